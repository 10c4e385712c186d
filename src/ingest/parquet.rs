//! Parquet input. Files written by `convert` carry the normalized layout and
//! are taken as they are; any other Parquet whose columns are envelope
//! fields is turned back into JSON lines and normalized like NDJSON, so both
//! paths obey the same checks.

use super::IngestOptions;
use super::inputs::{Format, Input};
use super::ndjson::{self, BadLine, Chunk, ParsedChunk, seq_of};
use super::normalize::NormalizeOptions;
use super::row::ChunkRows;
use super::row::{ChunkShape, all_null, share_empty_columns, zeros_for};
use super::schema::ADDED_IN_LAYOUT_3;
use super::schema::{
    BAD_LINES, BAD_LINES_V2, EVENTS, EVENTS_V1, EVENTS_V2, EVIDENCE, JSON_COLUMNS, LAYOUT_KEY,
    LAYOUT_V1, LAYOUT_V2, LAYOUT_VERSION, NS_COLUMNS, UNKNOWN_MEMBERS,
};
use datafusion::arrow::array::{
    Array, ArrayRef, AsArray, FixedSizeBinaryArray, Int32Array, Int64Array, StringArray,
};
use datafusion::arrow::compute::cast;
use datafusion::arrow::datatypes::{DataType, Field, Fields, Int64Type};
use datafusion::arrow::record_batch::RecordBatch;
use datafusion::parquet::arrow::ProjectionMask;
use datafusion::parquet::arrow::arrow_reader::{
    ArrowReaderMetadata, ArrowReaderOptions, ParquetRecordBatchReaderBuilder,
};
use datafusion::parquet::file::metadata::ParquetMetaData;
use datafusion::parquet::file::reader::ChunkReader;
use std::fs::File;
use std::path::Path;
use std::sync::Arc;
use std::sync::Mutex;
use std::sync::atomic::{AtomicUsize, Ordering};

/// Metadata keys written by `convert`.
pub const TABLE_KEY: &str = "hvaudit.table";
pub const RUN_KEY: &str = "hvaudit.run";

pub struct ParquetRead {
    pub chunks: Vec<ParsedChunk>,
    /// Why the files cannot be read together: two convert runs whose seqs
    /// overlap (refused as `--in-place` and a cluster refuse them).
    pub overlap: Option<String>,
    /// (input index, error) for files that could not be read to the end.
    pub errors: Vec<(usize, String)>,
    /// First file index free for NDJSON inputs (above every stored seq).
    pub next_file_idx: u32,
}

/// The input position of the n-th Parquet input (its file index).
pub fn input_of(inputs: &[Input], file_idx: u32) -> usize {
    inputs
        .iter()
        .enumerate()
        .filter(|(_, i)| i.format == Format::Parquet)
        .nth(file_idx as usize)
        .map(|(n, _)| n)
        .expect("file index of a parquet input")
}

enum Kind {
    Events,
    BadLines,
    /// `convert`'s evidence files: derived from events, so rebuilt, not read.
    Evidence,
    Foreign,
}

struct Opened {
    kind: Kind,
    run: Option<String>,
    batches: Vec<RecordBatch>,
    error: Option<String>,
}

/// Which of `convert`'s tables a Parquet file holds (None: not ours, by its
/// layout key, table key and exact schema), and the convert run it came from.
fn own_table(footer: &ArrowReaderMetadata) -> (Option<OwnTable>, Option<String>) {
    let meta = footer
        .metadata()
        .file_metadata()
        .key_value_metadata()
        .cloned()
        .unwrap_or_default();
    let get = |k: &str| {
        meta.iter()
            .find(|kv| kv.key == k)
            .and_then(|kv| kv.value.clone())
    };
    let fields = footer.schema().fields();
    // Earlier layouts differ in the events table only (read as the current).
    let events = match get(LAYOUT_KEY).as_deref() {
        Some(LAYOUT_VERSION) => EVENTS.fields(),
        Some(LAYOUT_V2) => EVENTS_V2.fields(),
        Some(LAYOUT_V1) => EVENTS_V1.fields(),
        _ => return (None, get(RUN_KEY)),
    };
    let bad_lines = match get(LAYOUT_KEY).as_deref() {
        Some(LAYOUT_VERSION) => BAD_LINES.fields(),
        _ => BAD_LINES_V2.fields(),
    };
    let table = match get(TABLE_KEY).as_deref() {
        Some("events") if fields == events => Some(OwnTable::Events),
        Some("bad_lines") if fields == bad_lines => Some(OwnTable::BadLines),
        Some("evidence") if fields == EVIDENCE.fields() => Some(OwnTable::Evidence),
        _ => None,
    };
    (table, get(RUN_KEY))
}

/// The file at `path` and its footer, or why it cannot be read.
fn open_file(path: &Path) -> Result<(File, ArrowReaderMetadata), String> {
    let file = File::open(path).map_err(|e| format!("cannot open: {e}"))?;
    let footer = read_footer(&file)?;
    Ok((file, footer))
}

/// Parse a file's footer (once per file: every reader of it shares it) and
/// check that its columns are unambiguous.
fn read_footer<R: ChunkReader>(reader: &R) -> Result<ArrowReaderMetadata, String> {
    let footer = ArrowReaderMetadata::load(reader, ArrowReaderOptions::new())
        .map_err(|e| format!("not a readable Parquet file: {e}"))?;
    unambiguous(footer.schema().fields(), "")?;
    Ok(footer)
}

/// Two columns of one name (at the top or inside a struct) would both
/// become one JSON key, the last silently winning; refused as NDJSON lines
/// with a repeated key are.
fn unambiguous(fields: &Fields, within: &str) -> Result<(), String> {
    let mut names = std::collections::HashSet::new();
    for f in fields.iter() {
        let path = if within.is_empty() {
            f.name().clone()
        } else {
            format!("{within}.{}", f.name())
        };
        if !names.insert(f.name().as_str()) {
            return Err(format!(
                "ambiguous Parquet schema: two columns named {path:?}; no row of it was used"
            ));
        }
        nested_unambiguous(f.data_type(), &path)?;
    }
    Ok(())
}

/// [`unambiguous`] for the fields nested in a column of type `t`.
fn nested_unambiguous(t: &DataType, path: &str) -> Result<(), String> {
    match t {
        DataType::Struct(fields) => unambiguous(fields, path),
        DataType::List(item)
        | DataType::LargeList(item)
        | DataType::ListView(item)
        | DataType::LargeListView(item)
        | DataType::FixedSizeList(item, _)
        | DataType::Map(item, _) => nested_unambiguous(item.data_type(), path),
        DataType::Dictionary(_, value) => nested_unambiguous(value, path),
        _ => Ok(()),
    }
}

fn open(input: &Input, threads: usize) -> Opened {
    let failed = |e: String| Opened {
        kind: Kind::Foreign,
        run: None,
        batches: Vec::new(),
        error: Some(e),
    };
    let footer = match &input.object {
        Some(object) => read_footer(object),
        None => open_file(&input.path).map(|(_, footer)| footer),
    };
    let footer = match footer {
        Ok(footer) => footer,
        Err(e) => return failed(e),
    };
    let (table, run) = own_table(&footer);
    let kind = match table {
        Some(OwnTable::Events) => Kind::Events,
        Some(OwnTable::BadLines) => Kind::BadLines,
        Some(OwnTable::Evidence) => Kind::Evidence,
        None => Kind::Foreign,
    };
    if matches!(kind, Kind::Evidence) {
        return Opened {
            kind,
            run,
            batches: Vec::new(),
            error: None,
        };
    }
    let skip_empty = matches!(kind, Kind::Events);
    let (mut batches, mut error) = match &input.object {
        Some(object) => {
            let fetch = |groups: &[usize]| {
                let ranges = chunk_ranges(&footer, groups, |_| true);
                object.fetch(&ranges).map_err(|e| e.to_string())
            };
            decode(&footer, &fetch, threads, skip_empty)
        }
        None => {
            let reopen =
                |_: &[usize]| File::open(&input.path).map_err(|e| format!("cannot open: {e}"));
            decode(&footer, &reopen, threads, skip_empty)
        }
    };
    let mut kind = kind;
    if matches!(kind, Kind::Events)
        && let Some(bad) = batches.iter().find_map(implausible_events)
    {
        // Counts and seqs are trusted from our own files; a file that only
        // looks like one must not corrupt the accounting.
        error = Some(format!(
            "claims to be hvaudit's events layout but {bad}; no row of it was used"
        ));
        batches.clear();
        kind = Kind::Foreign;
    }
    Opened {
        kind,
        run,
        batches,
        error,
    }
}

/// Batches read from a file, and the error that ended it early.
type Decoded = (Vec<RecordBatch>, Option<String>);

/// Rows per decoded batch.
const BATCH_ROWS: usize = 8192;

/// The byte ranges of the column chunks of row groups `groups` whose leaf
/// column index passes `wanted`.
fn chunk_ranges(
    footer: &ArrowReaderMetadata,
    groups: &[usize],
    wanted: impl Fn(usize) -> bool,
) -> Vec<std::ops::Range<u64>> {
    let meta = footer.metadata();
    let mut ranges = Vec::new();
    for &g in groups {
        let group = meta.row_group(g);
        for c in (0..group.num_columns()).filter(|&c| wanted(c)) {
            let (start, len) = group.column(c).byte_range();
            ranges.push(start..start.saturating_add(len));
        }
    }
    ranges
}

/// Decode a file's row groups, several at a time, into batches in file
/// order; an error ends the file there (the rows before it are kept).
/// Each reader opens the file for its row groups with `open` (an object's
/// column chunks are fetched then; clones of one file handle share a
/// position, and the reader seeks) and reuses the parsed `footer`: parsing
/// it again per row group was quadratic (10,000 row groups did not finish
/// in 3 minutes).
fn decode<R: ChunkReader + 'static>(
    footer: &ArrowReaderMetadata,
    open: &(dyn Fn(&[usize]) -> Result<R, String> + Sync),
    threads: usize,
    skip_empty: bool,
) -> Decoded {
    let spans = spans(footer.metadata());
    let read = |groups: &[usize]| match open(groups) {
        Ok(reader) => read_batches(reader, footer, groups, skip_empty),
        Err(e) => (Vec::new(), Some(e)),
    };
    if spans.len() <= 1 || threads <= 1 {
        let all: Vec<usize> = spans.concat();
        return read(&all);
    }
    let next = AtomicUsize::new(0);
    let decoded: Vec<Mutex<Option<Decoded>>> = spans.iter().map(|_| Mutex::new(None)).collect();
    std::thread::scope(|scope| {
        for _ in 0..threads.min(spans.len()) {
            scope.spawn(|| {
                loop {
                    let span = next.fetch_add(1, Ordering::Relaxed);
                    if span >= spans.len() {
                        break;
                    }
                    let result = read(&spans[span]);
                    if let Ok(mut slot) = decoded[span].lock() {
                        *slot = Some(result);
                    }
                }
            });
        }
    });
    let mut batches = Vec::new();
    for slot in decoded {
        let (part, error) = slot
            .into_inner()
            .ok()
            .flatten()
            .unwrap_or_else(|| (Vec::new(), Some("a row group was not decoded".into())));
        batches.extend(part);
        if error.is_some() {
            return (batches, error);
        }
    }
    (batches, None)
}

/// The row groups in runs of consecutive ones holding `BATCH_ROWS` rows or
/// more (the last run may hold fewer): the unit a worker decodes, so that
/// tiny row groups cost neither a reader nor a batch each.
fn spans(meta: &ParquetMetaData) -> Vec<Vec<usize>> {
    let mut spans = Vec::new();
    let (mut span, mut rows) = (Vec::new(), 0i64);
    for (g, group) in meta.row_groups().iter().enumerate() {
        span.push(g);
        rows += group.num_rows();
        if rows >= BATCH_ROWS as i64 {
            spans.push(std::mem::take(&mut span));
            rows = 0;
        }
    }
    if !span.is_empty() {
        spans.push(span);
    }
    spans
}

/// Read the row groups `groups` of a file, batch by batch, so that a break
/// keeps what came before it. With `skip_empty`, columns whose statistics
/// say they are null in every one of them are not decoded but laid out as
/// shared all-null arrays: most events columns are empty, and decoding
/// them was most of reading a file.
fn read_batches<R: ChunkReader + 'static>(
    reader: R,
    footer: &ArrowReaderMetadata,
    groups: &[usize],
    skip_empty: bool,
) -> Decoded {
    let mut batches = Vec::new();
    let empty = if skip_empty {
        empty_columns(footer, groups)
    } else {
        Vec::new()
    };
    let builder = ParquetRecordBatchReaderBuilder::new_with_metadata(reader, footer.clone())
        .with_row_groups(groups.to_vec());
    let builder = if empty.is_empty() {
        builder
    } else {
        let kept = (0..empty.len()).filter(|&c| !empty[c]);
        let mask = ProjectionMask::leaves(footer.parquet_schema(), kept);
        builder.with_projection(mask)
    };
    let reader = match builder.with_batch_size(BATCH_ROWS).build() {
        Ok(r) => r,
        Err(e) => return (batches, Some(format!("not a readable Parquet file: {e}"))),
    };
    let file = footer.schema().fields();
    let events = [&EVENTS, &EVENTS_V2, &EVENTS_V1]
        .iter()
        .any(|layout| layout.fields() == file);
    for b in reader {
        let b = if skip_empty && events {
            b.and_then(|b| as_events_layout(b, file, &empty))
        } else {
            b
        };
        match b {
            Ok(b) => batches.push(b),
            Err(e) => {
                let error = format!("Parquet read stopped: {e}; rows before it were kept");
                return (batches, Some(error));
            }
        }
    }
    (batches, None)
}

/// Per column of the events file: null in every row of the row groups
/// `groups`, by the file's statistics. Empty when the file is not laid out
/// one leaf per column (then every column is read).
fn empty_columns(footer: &ArrowReaderMetadata, groups: &[usize]) -> Vec<bool> {
    let meta = footer.metadata();
    let fields = footer.schema().fields();
    if footer.parquet_schema().num_columns() != fields.len() {
        return Vec::new();
    }
    // A required column is always read: statistics that claim it empty
    // are wrong, and reading it reports that.
    (0..fields.len())
        .map(|c| {
            fields[c].is_nullable()
                && groups.iter().all(|&g| {
                    let group = meta.row_group(g);
                    let nulls = group
                        .column(c)
                        .statistics()
                        .and_then(|s| s.null_count_opt());
                    nulls == Some(group.num_rows() as u64)
                })
        })
        .collect()
}

/// A batch of events read from a file of any layout, whose columns are
/// `file`, as `EVENTS` lays it out: the `empty` columns, not read, put back
/// as nulls, a layout 1 batch's text cast to categories, and what a layout
/// before 3 lacks made: the nanosecond columns of its microseconds,
/// `as_written` null and `digest` of the row's columns
/// (`dedup::digest_of_columns`).
fn as_events_layout(
    batch: RecordBatch,
    file: &Fields,
    empty: &[bool],
) -> Result<RecordBatch, datafusion::arrow::error::ArrowError> {
    use datafusion::arrow::error::ArrowError;
    if batch.schema().fields() == EVENTS.fields() {
        return Ok(batch);
    }
    let n = batch.num_rows();
    let zeros = zeros_for(n);
    // The file's columns by name: read, or None when left out as empty.
    let mut read = batch.columns().iter();
    let stored: std::collections::HashMap<&str, Option<&ArrayRef>> = file
        .iter()
        .enumerate()
        .map(|(c, f)| {
            let skipped = empty.get(c) == Some(&true);
            (f.name().as_str(), if skipped { None } else { read.next() })
        })
        .collect();
    let laid_out = |field: &Field| -> Result<ArrayRef, ArrowError> {
        let missing =
            || ArrowError::SchemaError(format!("column {} could not be laid out", field.name()));
        match stored.get(field.name().as_str()) {
            Some(Some(c)) if c.data_type() != field.data_type() => cast(c, field.data_type()),
            Some(Some(c)) => Ok(Arc::clone(c)),
            Some(None) => all_null(field.data_type(), n, &zeros).ok_or_else(missing),
            None if field.name() == "digest" => {
                // Made below, of the other columns.
                all_null(&DataType::Int64, n, &zeros).ok_or_else(missing)
            }
            None if ADDED_IN_LAYOUT_3.contains(&field.name().as_str()) => {
                all_null(field.data_type(), n, &zeros).ok_or_else(missing)
            }
            None => {
                let (_, us) = NS_COLUMNS
                    .iter()
                    .find(|(ns, _)| ns == field.name())
                    .ok_or_else(missing)?;
                match stored.get(us) {
                    Some(Some(us)) => nanos_of_micros(us),
                    Some(None) => all_null(field.data_type(), n, &zeros).ok_or_else(missing),
                    None => Err(missing()),
                }
            }
        }
    };
    let columns = EVENTS
        .fields()
        .iter()
        .map(|f| laid_out(f))
        .collect::<Result<Vec<_>, _>>()?;
    let mut columns = columns;
    if !stored.contains_key("digest") {
        let at = super::schema::events_col("digest");
        let fields: Vec<_> = (EVENTS.fields().iter().enumerate())
            .filter(|(i, _)| *i != at)
            .map(|(_, f)| f.clone())
            .collect();
        let mut rest = columns.clone();
        rest.remove(at);
        let rest = RecordBatch::try_new(
            Arc::new(datafusion::arrow::datatypes::Schema::new(fields)),
            rest,
        )?;
        columns[at] = Arc::new(super::dedup::digest_of_columns(&rest));
    }
    RecordBatch::try_new(EVENTS.clone(), columns)
}

/// Microseconds (Int64 or a timestamp) as nanoseconds, past i64 its ends:
/// what a layout before 3 knows of the nanosecond columns.
fn nanos_of_micros(us: &ArrayRef) -> Result<ArrayRef, datafusion::arrow::error::ArrowError> {
    let us = cast(us, &DataType::Int64)?;
    let ns = us
        .as_primitive::<Int64Type>()
        .unary::<_, Int64Type>(|us| us.saturating_mul(1000));
    Ok(Arc::new(ns))
}

/// Read every Parquet input into parsed chunks.
pub fn read_all(inputs: &[Input], opts: &IngestOptions) -> ParquetRead {
    let files: Vec<(usize, &Input, Opened)> = inputs
        .iter()
        .enumerate()
        .filter(|(_, i)| i.format == Format::Parquet)
        .map(|(n, i)| {
            let o = open(i, opts.worker_threads());
            opts.progress.fetch_add(i.bytes, Ordering::Relaxed);
            (n, i, o)
        })
        .collect();
    let mut out = ParquetRead {
        chunks: Vec::new(),
        overlap: None,
        errors: Vec::new(),
        next_file_idx: files.len() as u32,
    };
    // Runs whose seqs overlap (one directory converted into twice) would
    // count their events twice: refused, with the words of --in-place.
    let ranges: Vec<_> = files
        .iter()
        .filter(|(_, _, o)| matches!(o.kind, Kind::Events | Kind::BadLines))
        .filter_map(|(_, i, o)| Some((o.run.clone(), seq_range(&o.batches)?, i.display.clone())))
        .collect();
    if let Err(e) = check_seqs_disjoint(&ranges) {
        out.overlap = Some(e.to_string());
        return out;
    }
    // Stored seqs are kept, as in place: the runs' seqs are disjoint. Files
    // of no recorded run are renumbered in input order.
    let keep_seq = !files
        .iter()
        .any(|(_, _, o)| !matches!(o.kind, Kind::Foreign) && o.run.is_none());
    let norm = NormalizeOptions {
        token_format: opts.token_format,
    };
    for (file_idx, (input_idx, input, opened)) in files.into_iter().enumerate() {
        let file_idx = file_idx as u32;
        if let Some(e) = opened.error {
            out.errors.push((input_idx, e));
        }
        let mut row = 0u64;
        let mut shape = ChunkShape::default();
        for (chunk_idx, batch) in opened.batches.into_iter().enumerate() {
            let chunk_idx = chunk_idx as u32;
            let parsed = match opened.kind {
                Kind::Events => {
                    let batch = if keep_seq {
                        batch
                    } else {
                        renumber(&batch, "seq", file_idx, row)
                    };
                    let max_seq = max_i64(&batch, "seq");
                    out.next_file_idx = out.next_file_idx.max((max_seq >> 40) as u32 + 1);
                    converted_events(batch, file_idx, chunk_idx)
                }
                Kind::Evidence => continue,
                Kind::BadLines => {
                    let batch = if keep_seq {
                        batch
                    } else {
                        renumber(&batch, "seq", file_idx, row)
                    };
                    converted_bad_lines(&batch, file_idx, chunk_idx)
                }
                Kind::Foreign => {
                    let data = match rows_as_json_lines(&batch) {
                        Ok(d) => d,
                        Err(e) => {
                            out.errors.push((
                                input_idx,
                                format!(
                                    "rows {}..{} cannot be read as JSON ({e}); the rest was kept",
                                    row + 1,
                                    row + batch.num_rows() as u64
                                ),
                            ));
                            row += batch.num_rows() as u64;
                            continue;
                        }
                    };
                    let chunk = Chunk {
                        file_idx,
                        chunk_idx,
                        first_line: row + 1,
                        data,
                        oversized: None,
                    };
                    ndjson::parse_chunk(
                        &chunk,
                        Arc::from(input.display.as_str()),
                        opts.chunk_limits(),
                        norm,
                        &mut shape,
                    )
                }
            };
            row += parsed.events.len() as u64 + parsed.bad_count();
            out.chunks.push(parsed);
        }
    }
    out
}

/// Why stored provenance columns cannot be ours, if they cannot.
fn implausible_events(batch: &RecordBatch) -> Option<String> {
    for col in ["seq", "src_line", "redeliveries"] {
        let a = batch.column_by_name(col)?;
        let a = a.as_any().downcast_ref::<Int64Array>()?;
        if let Some(v) = a.values().iter().find(|v| **v < 0) {
            return Some(format!("column {col} holds {v}"));
        }
    }
    let total = batch
        .column_by_name("redeliveries")?
        .as_any()
        .downcast_ref::<Int64Array>()?
        .values()
        .iter()
        .try_fold(0i64, |acc, v| acc.checked_add(*v));
    match total {
        Some(t) if t < 1 << 52 => None,
        _ => Some("column redeliveries sums to more than any log holds".into()),
    }
}

/// The lowest and highest `seq` of a file's batches (None: no rows).
fn seq_range(batches: &[RecordBatch]) -> Option<(i64, i64)> {
    use datafusion::arrow::compute::{max, min};
    let mut range: Option<(i64, i64)> = None;
    for b in batches {
        let a = b.column_by_name("seq").expect("seq column");
        let a = a.as_any().downcast_ref::<Int64Array>().expect("Int64");
        if let (Some(lo), Some(hi)) = (min(a), max(a)) {
            range = Some(range.map_or((lo, hi), |(l, h)| (l.min(lo), h.max(hi))));
        }
    }
    range
}

fn max_i64(batch: &RecordBatch, col: &str) -> i64 {
    let a = batch.column_by_name(col).expect("column");
    let a = a.as_any().downcast_ref::<Int64Array>().expect("Int64");
    a.values().iter().copied().max().unwrap_or(0)
}

/// Give rows fresh seqs in input order (file index, then row).
fn renumber(batch: &RecordBatch, col: &str, file_idx: u32, first_row: u64) -> RecordBatch {
    let seqs: Int64Array = (0..batch.num_rows() as u64)
        .map(|r| seq_of(file_idx, first_row + r + 1))
        .collect();
    let at = batch.schema().index_of(col).expect("seq column");
    let mut cols = batch.columns().to_vec();
    cols[at] = Arc::new(seqs);
    RecordBatch::try_new(batch.schema(), cols).expect("same schema")
}

fn converted_events(batch: RecordBatch, file_idx: u32, chunk_idx: u32) -> ParsedChunk {
    let redeliveries = batch.column_by_name("redeliveries").expect("redeliveries");
    let redeliveries = redeliveries
        .as_any()
        .downcast_ref::<Int64Array>()
        .expect("Int64");
    let keys = super::dedup::row_keys(&batch);
    let collapsed = redeliveries.values().iter().map(|n| *n as u64).sum::<u64>();
    let lines = batch.num_rows() as u64 + collapsed;
    ParsedChunk {
        file_idx,
        chunk_idx,
        events: ChunkRows::Built(share_empty_columns(batch)),
        keys,
        bad: Vec::new(),
        bad_unlisted: 0,
        bad_raw: Vec::new(),
        lines,
        blank: 0,
        collapsed,
    }
}

fn converted_bad_lines(batch: &RecordBatch, file_idx: u32, chunk_idx: u32) -> ParsedChunk {
    let s = |name: &str| {
        batch
            .column_by_name(name)
            .and_then(|c| c.as_any().downcast_ref::<StringArray>().cloned())
            .expect("bad_lines Utf8 column")
    };
    let i = |name: &str| {
        batch
            .column_by_name(name)
            .and_then(|c| c.as_any().downcast_ref::<Int64Array>().cloned())
            .expect("bad_lines Int64 column")
    };
    let (seq, file, line, reason, excerpt, id, type_) = (
        i("seq"),
        s("src_file"),
        i("src_line"),
        s("reason"),
        s("excerpt"),
        s("id"),
        s("type"),
    );
    let opt = |a: &StringArray, r: usize| (!a.is_null(r)).then(|| a.value(r).to_string());
    let digests = batch
        .column_by_name("digest")
        .and_then(|c| c.as_any().downcast_ref::<FixedSizeBinaryArray>().cloned());
    let digest = |r: usize| {
        let d = digests.as_ref().filter(|d| !d.is_null(r))?;
        d.value(r).try_into().ok()
    };
    let bad = (0..batch.num_rows())
        .map(|r| BadLine {
            seq: seq.value(r),
            line: line.value(r) as u64,
            reason: reason.value(r).to_string(),
            excerpt: excerpt.value(r).to_string(),
            id: opt(&id, r),
            type_: opt(&type_, r),
            src_file: Some(Arc::from(file.value(r))),
            digest: digest(r),
        })
        .collect::<Vec<_>>();
    ParsedChunk {
        file_idx,
        chunk_idx,
        events: ChunkRows::Built(RecordBatch::new_empty(super::schema::EVENTS.clone())),
        keys: Vec::new(),
        lines: bad.len() as u64,
        bad,
        bad_unlisted: 0,
        bad_raw: Vec::new(),
        blank: 0,
        collapsed: 0,
    }
}

/// Rows of a foreign batch as JSON object lines, JSON-text columns inlined.
fn rows_as_json_lines(
    batch: &RecordBatch,
) -> Result<Vec<u8>, datafusion::arrow::error::ArrowError> {
    let mut buf = Vec::new();
    {
        let mut w = datafusion::arrow::json::LineDelimitedWriter::new(&mut buf);
        w.write(batch)?;
        w.finish()?;
    }
    let mut out = Vec::with_capacity(buf.len());
    for line in buf.split(|b| *b == b'\n').filter(|l| !l.is_empty()) {
        let fixed = serde_json::from_slice::<serde_json::Map<String, serde_json::Value>>(line)
            .map(|mut obj| {
                // Members that hold JSON, as other pipelines write them: text.
                for &k in JSON_COLUMNS.iter().filter(|c| **c != UNKNOWN_MEMBERS) {
                    if let Some(serde_json::Value::String(text)) = obj.get(k)
                        && let Ok(v) = serde_json::from_str::<serde_json::Value>(text)
                    {
                        obj.insert(k.to_string(), v);
                    }
                }
                serde_json::to_vec(&obj).unwrap_or_else(|_| line.to_vec())
            })
            .unwrap_or_else(|_| line.to_vec());
        out.extend_from_slice(&fixed);
        out.push(b'\n');
    }
    Ok(out)
}

/// Which normalized table a `convert` output file holds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum OwnTable {
    Events,
    BadLines,
    Evidence,
}

/// A file written by `convert`, as a cluster run sees it without loading it:
/// its table, its run, the range of its seqs and its share of the
/// accounting (the same figures a local read of the file reports).
#[derive(Debug, Clone)]
pub struct OwnFile {
    pub table: OwnTable,
    /// An events file of a layout before 3, without the nanosecond columns.
    pub micros_only: bool,
    pub run: Option<String>,
    pub seqs: Option<(i64, i64)>,
    pub summary: crate::InputSummary,
}

/// Describe one of `convert`'s files, reading only its footer and the
/// `seq` and `redeliveries` columns. Anything else is an error that says so.
pub fn describe_own(input: &Input) -> Result<OwnFile, String> {
    match &input.object {
        Some(object) => {
            let footer = read_footer(object)?;
            let fetch = |roots: &[usize]| {
                let schema = footer.parquet_schema();
                let groups: Vec<usize> = (0..footer.metadata().num_row_groups()).collect();
                let ranges = chunk_ranges(&footer, &groups, |leaf| {
                    roots.contains(&schema.get_column_root_idx(leaf))
                });
                object.fetch(&ranges).map_err(|e| e.to_string())
            };
            describe(input, fetch, footer.clone())
        }
        None => {
            let (file, footer) = open_file(&input.path)?;
            describe(input, |_: &[usize]| Ok(file), footer)
        }
    }
}

/// `describe_own` with `open` giving the reader of the root columns it is
/// passed.
fn describe<R: ChunkReader + 'static>(
    input: &Input,
    open: impl FnOnce(&[usize]) -> Result<R, String>,
    footer: ArrowReaderMetadata,
) -> Result<OwnFile, String> {
    let (Some(table), run) = own_table(&footer) else {
        return Err(
            "not written by this version of `hvaudit convert`; a cluster or --in-place \
             reads only convert's output (run `hvaudit convert LOGS -o DIR` first)"
                .to_string(),
        );
    };
    let micros_only = table == OwnTable::Events
        && NS_COLUMNS
            .iter()
            .any(|(ns, _)| footer.schema().field_with_name(ns).is_err());
    let seq_col = match table {
        OwnTable::Evidence => "event_seq",
        OwnTable::Events | OwnTable::BadLines => "seq",
    };
    let wanted: Vec<usize> = footer
        .schema()
        .fields()
        .iter()
        .enumerate()
        .filter(|(_, f)| ["redeliveries", "version", seq_col].contains(&f.name().as_str()))
        .map(|(i, _)| i)
        .collect();
    let file = open(&wanted)?;
    let mask = ProjectionMask::roots(footer.parquet_schema(), wanted);
    let reader = ParquetRecordBatchReaderBuilder::new_with_metadata(file, footer)
        .with_projection(mask)
        .with_batch_size(65536)
        .build()
        .map_err(|e| format!("not a readable Parquet file: {e}"))?;
    let (mut rows, mut redeliveries, mut copies) = (0u64, 0u64, 0u64);
    let mut seqs: Option<(i64, i64)> = None;
    for b in reader {
        let b = b.map_err(|e| format!("Parquet read stopped: {e}"))?;
        rows += b.num_rows() as u64;
        let col = |name: &str| {
            b.column_by_name(name)
                .and_then(|a| a.as_any().downcast_ref::<Int64Array>().cloned())
        };
        if let Some(v) = b
            .column_by_name("version")
            .and_then(|a| a.as_any().downcast_ref::<Int32Array>().cloned())
        {
            copies += v.values().iter().filter(|v| **v > 1).count() as u64;
        }
        if let Some(r) = col("redeliveries") {
            redeliveries += r
                .values()
                .iter()
                .map(|v| v.max(&0).unsigned_abs())
                .sum::<u64>();
        }
        if let Some(s) = col(seq_col) {
            for v in s.values().iter().copied() {
                seqs = Some(seqs.map_or((v, v), |(lo, hi)| (lo.min(v), hi.max(v))));
            }
        }
    }
    let mut summary = crate::InputSummary {
        path: input.display.clone(),
        format: input.format.name().into(),
        bytes: input.bytes,
        ..Default::default()
    };
    match table {
        OwnTable::Events => {
            // Later versions of an id are not events of their own.
            summary.events = rows - copies;
            summary.conflicting_copies = copies;
            summary.redeliveries = redeliveries;
            summary.lines = rows + redeliveries;
        }
        OwnTable::BadLines => {
            summary.bad_lines = rows;
            summary.lines = rows;
        }
        OwnTable::Evidence => {}
    }
    Ok(OwnFile {
        table,
        micros_only,
        run,
        seqs,
        summary,
    })
}

/// Seqs identify events in every rule; files of one run never share one,
/// but two runs without distinct `--shard` numbers would. One sweep over
/// the ranges by start, not every pair (20,000 files are 2 * 10^8 pairs).
/// The loaded read and `convert` ask it too, so every reader agrees.
pub(crate) fn check_seqs_disjoint(
    ranges: &[(Option<String>, (i64, i64), String)],
) -> anyhow::Result<()> {
    let mut order: Vec<&(Option<String>, (i64, i64), String)> = ranges.iter().collect();
    order.sort_by_key(|(_, (lo, _), _)| *lo);
    // Among the ranges before: the one reaching furthest, and the one
    // reaching furthest from another run than that one's. A range from a
    // different run overlaps one of them if it overlaps any.
    let mut furthest: Option<&(Option<String>, (i64, i64), String)> = None;
    let mut other: Option<&(Option<String>, (i64, i64), String)> = None;
    for r in order {
        let (run, (lo, hi), name) = r;
        let clash = match furthest {
            Some(f) if f.0 != *run => Some(f),
            _ => other,
        };
        if let Some((_, (_, reach), earlier)) = clash
            && reach >= lo
        {
            anyhow::bail!(
                "{earlier} and {name} come from different convert runs with overlapping seqs; \
                 convert each shard with its own --shard N (0..2047) so events keep distinct seqs"
            );
        }
        match furthest {
            Some(f) if f.1.1 >= *hi => {
                if f.0 != *run && other.is_none_or(|o| o.1.1 < *hi) {
                    other = Some(r);
                }
            }
            Some(f) => {
                // Of the same run, `other` still reaches furthest elsewhere.
                if f.0 != *run {
                    other = Some(f);
                }
                furthest = Some(r);
            }
            None => furthest = Some(r),
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use datafusion::arrow::array::Int64Array;
    use datafusion::arrow::datatypes::{DataType, Field, Schema};
    use datafusion::parquet::arrow::ArrowWriter;
    use datafusion::parquet::file::properties::WriterProperties;

    /// A file of `groups` row groups of `rows` rows each, numbered 0.. in order.
    fn numbered_file(groups: usize, rows: usize) -> tempfile::NamedTempFile {
        let schema = Arc::new(Schema::new(vec![Field::new("n", DataType::Int64, false)]));
        let file = tempfile::NamedTempFile::new().unwrap();
        let props = WriterProperties::builder()
            .set_max_row_group_row_count(Some(rows))
            .build();
        let mut w =
            ArrowWriter::try_new(file.reopen().unwrap(), schema.clone(), Some(props)).unwrap();
        let all = Int64Array::from_iter_values(0..(groups * rows) as i64);
        w.write(&RecordBatch::try_new(schema, vec![Arc::new(all)]).unwrap())
            .unwrap();
        w.close().unwrap();
        file
    }

    fn numbers(batches: &[RecordBatch]) -> Vec<i64> {
        batches
            .iter()
            .flat_map(|b| {
                let a = b.column(0).as_any().downcast_ref::<Int64Array>().unwrap();
                a.values().to_vec()
            })
            .collect()
    }

    fn open_path(path: &Path) -> impl Fn(&[usize]) -> Result<File, String> + Sync + '_ {
        move |_| File::open(path).map_err(|e| e.to_string())
    }

    #[test]
    fn row_groups_decoded_in_parallel_come_back_in_file_order() {
        // Seven groups of 5000 rows: four runs of two groups (the last of one).
        let file = numbered_file(7, 5000);
        let path = file.path();
        let (_, footer) = open_file(path).unwrap();
        assert_eq!(footer.metadata().num_row_groups(), 7);
        assert_eq!(spans(footer.metadata()).len(), 4);
        let (parallel, error) = decode(&footer, &open_path(path), 3, false);
        assert!(error.is_none());
        let (serial, _) = decode(&footer, &open_path(path), 1, false);
        let expected: Vec<i64> = (0..35_000).collect();
        assert_eq!(numbers(&parallel), expected);
        assert_eq!(numbers(&serial), expected);
    }

    /// The Parquet reader asks for every page's header and data; from an
    /// object store each ask was a request. The column chunks are fetched
    /// once, and every read after that is served from them: with the
    /// object gone, a file of 4 row groups of many pages still decodes.
    #[test]
    fn an_objects_row_groups_decode_from_their_chunks_fetched_once() {
        use crate::ingest::remote::RemoteObject;
        use object_store::{ObjectStore, ObjectStoreExt, path::Path as ObjectPath};
        let schema = Arc::new(Schema::new(vec![Field::new("n", DataType::Int64, false)]));
        let props = WriterProperties::builder()
            .set_max_row_group_row_count(Some(5000))
            .set_data_page_row_count_limit(100)
            .set_write_batch_size(100)
            .build();
        let mut data = Vec::new();
        let mut w = ArrowWriter::try_new(&mut data, schema.clone(), Some(props)).unwrap();
        let all = Int64Array::from_iter_values(0..20_000);
        w.write(&RecordBatch::try_new(schema, vec![Arc::new(all)]).unwrap())
            .unwrap();
        w.close().unwrap();
        let store: Arc<dyn ObjectStore> = Arc::new(object_store::memory::InMemory::new());
        let location = ObjectPath::from("events.parquet");
        let object = RemoteObject {
            store: Arc::clone(&store),
            location: location.clone(),
            size: data.len() as u64,
            url: "memory:///events.parquet".into(),
        };
        let runtime = tokio::runtime::Runtime::new().unwrap();
        runtime.block_on(store.put(&location, data.into())).unwrap();
        let footer = read_footer(&object).unwrap();
        let groups: Vec<usize> = (0..footer.metadata().num_row_groups()).collect();
        assert_eq!(groups.len(), 4);
        let pages = footer
            .metadata()
            .row_group(0)
            .column(0)
            .page_encoding_stats();
        assert!(pages.is_none_or(|p| p.iter().map(|s| s.count).sum::<i32>() > 10));
        let fetched = object
            .fetch(&chunk_ranges(&footer, &groups, |_| true))
            .unwrap();
        runtime.block_on(store.delete(&location)).unwrap();
        let (batches, error) = read_batches(fetched, &footer, &groups, false);
        assert_eq!(error, None);
        assert_eq!(numbers(&batches), (0..20_000).collect::<Vec<i64>>());
    }

    /// A file in memory that counts the bytes read from it.
    struct Counted {
        data: bytes::Bytes,
        read: Arc<std::sync::atomic::AtomicU64>,
    }

    struct CountedRead<R> {
        inner: R,
        read: Arc<std::sync::atomic::AtomicU64>,
    }

    impl<R: std::io::Read> std::io::Read for CountedRead<R> {
        fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
            let n = self.inner.read(buf)?;
            self.read.fetch_add(n as u64, Ordering::Relaxed);
            Ok(n)
        }
    }

    impl datafusion::parquet::file::reader::Length for Counted {
        fn len(&self) -> u64 {
            self.data.len() as u64
        }
    }

    impl ChunkReader for Counted {
        type T = CountedRead<<bytes::Bytes as ChunkReader>::T>;

        fn get_read(&self, start: u64) -> datafusion::parquet::errors::Result<Self::T> {
            Ok(CountedRead {
                inner: self.data.get_read(start)?,
                read: Arc::clone(&self.read),
            })
        }

        fn get_bytes(
            &self,
            start: u64,
            length: usize,
        ) -> datafusion::parquet::errors::Result<bytes::Bytes> {
            self.read.fetch_add(length as u64, Ordering::Relaxed);
            self.data.get_bytes(start, length)
        }
    }

    #[test]
    fn bytes_read_grow_linearly_with_the_row_groups() {
        // Row groups of 64 rows, 1x and 4x of them, read by 4 workers. The
        // footer lists every row group: parsed again for each, the bytes read
        // grew with the square of their number (16x here).
        let read = |groups: usize| {
            let file = numbered_file(groups, 64);
            let data = bytes::Bytes::from(std::fs::read(file.path()).unwrap());
            let read = Arc::new(std::sync::atomic::AtomicU64::new(0));
            let open = |_: &[usize]| {
                Ok(Counted {
                    data: data.clone(),
                    read: Arc::clone(&read),
                })
            };
            let footer = read_footer(&open(&[]).unwrap()).unwrap();
            let (batches, error) = decode(&footer, &open, 4, false);
            assert!(error.is_none(), "{error:?}");
            assert_eq!(
                numbers(&batches),
                (0..64 * groups as i64).collect::<Vec<_>>()
            );
            assert!(
                batches.len() <= groups * 64 / BATCH_ROWS + spans(footer.metadata()).len(),
                "{} batches: tiny row groups make full batches",
                batches.len()
            );
            (read.load(Ordering::Relaxed), data.len() as u64)
        };
        let (small, small_file) = read(256);
        let (large, large_file) = read(1024);
        assert!(
            large <= 3 * large_file,
            "{large} bytes read from a file of {large_file}"
        );
        assert!(
            large * small_file <= 2 * small * large_file,
            "{small} then {large} bytes read: not linear"
        );
    }

    #[test]
    fn a_repeated_column_name_at_any_level_is_refused_with_its_name() {
        use datafusion::arrow::array::{ArrayRef, StringArray, StructArray};
        let text = |v: &str| Arc::new(StringArray::from(vec![v])) as ArrayRef;
        let write = |columns: Vec<(&str, ArrayRef)>| {
            let fields: Vec<Field> = columns
                .iter()
                .map(|(n, a)| Field::new(*n, a.data_type().clone(), true))
                .collect();
            let schema = Arc::new(Schema::new(fields));
            let arrays = columns.into_iter().map(|(_, a)| a).collect();
            let mut out = Vec::new();
            let mut w = ArrowWriter::try_new(&mut out, schema.clone(), None).unwrap();
            w.write(&RecordBatch::try_new(schema, arrays).unwrap())
                .unwrap();
            w.close().unwrap();
            read_footer(&bytes::Bytes::from(out)).map(drop)
        };
        let e = write(vec![
            ("id", text("e1")),
            ("type", text("task.started")),
            ("id", text("e2")),
        ])
        .unwrap_err();
        assert!(e.contains("two columns named \"id\""), "{e}");
        let inner = StructArray::from(vec![
            (Arc::new(Field::new("x", DataType::Utf8, true)), text("1")),
            (Arc::new(Field::new("x", DataType::Utf8, true)), text("2")),
        ]);
        let e = write(vec![("id", text("e1")), ("payload", Arc::new(inner))]).unwrap_err();
        assert!(e.contains("two columns named \"payload.x\""), "{e}");
        let fine = StructArray::from(vec![(
            Arc::new(Field::new("id", DataType::Utf8, true)),
            text("1"),
        )]);
        write(vec![("id", text("e1")), ("payload", Arc::new(fine))])
            .expect("one name at different levels is not ambiguous");
    }

    #[test]
    fn columns_empty_in_a_row_group_are_laid_out_as_nulls_not_decoded() {
        use crate::ingest::row::{EventBuilders, Row};
        // Events in two row groups of BATCH_ROWS; `topic` is set only in
        // the second.
        let n = 2 * BATCH_ROWS as i64;
        let mut rows = EventBuilders::new("x".into(), n as usize);
        for seq in 0..n {
            rows.push(&Row {
                seq,
                id: format!("e{seq}").into(),
                type_: "t.x".into(),
                dialect: "0.2",
                topic: (seq >= n / 2).then(|| "news".into()),
                ..Row::default()
            });
        }
        let batch = rows.finish();
        let file = tempfile::NamedTempFile::new().unwrap();
        let props = WriterProperties::builder()
            .set_max_row_group_row_count(Some(BATCH_ROWS))
            .build();
        let mut w =
            ArrowWriter::try_new(file.reopen().unwrap(), EVENTS.clone(), Some(props)).unwrap();
        w.write(&batch).unwrap();
        w.close().unwrap();
        let path = file.path();
        let topic = EVENTS.index_of("topic").unwrap();
        let (_, footer) = open_file(path).unwrap();
        assert!(
            empty_columns(&footer, &[0])[topic],
            "topic is empty in the first group"
        );
        assert!(!empty_columns(&footer, &[0, 1])[topic]);
        let (plain, _) = decode(&footer, &open_path(path), 1, false);
        let plain = datafusion::arrow::compute::concat_batches(&EVENTS, &plain).unwrap();
        assert_eq!(plain, batch);
        for threads in [1, 2] {
            let (read, error) = decode(&footer, &open_path(path), threads, true);
            assert!(error.is_none());
            let read = datafusion::arrow::compute::concat_batches(&EVENTS, &read).unwrap();
            assert_eq!(read, batch, "{threads} threads");
        }
    }
}
