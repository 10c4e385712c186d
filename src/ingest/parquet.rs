//! Parquet input. Files written by `convert` carry the normalized layout and
//! are taken as they are; any other Parquet whose columns are envelope
//! fields is turned back into JSON lines and normalized like NDJSON, so both
//! paths obey the same checks.

use super::IngestOptions;
use super::authentic::authenticate;
use super::inputs::{Input, LogFormat};
use super::ndjson::{self, BadLine, Chunk, MAX_REASON_CHARS, ParsedChunk, seq_of};
use super::normalize::{NormalizeOptions, clip};
use super::parquet_lines::{Lines, rows_as_lines};
use super::parquet_pages::{ChunkPages, GroupName, GroupPlan, PAGE_LINES, chunk_range, plan_group};
use super::parquet_rows::{Oversized, oversized, short_text};
use super::row::ChunkRows;
use super::row::{ChunkShape, all_null, share_empty_columns, zeros_for};
use super::schema::ADDED_IN_LAYOUT_3;
use super::schema::{
    BAD_LINES, BAD_LINES_V2, EVENTS, EVENTS_V1, EVENTS_V2, EVIDENCE, JSON_COLUMNS, LAYOUT_KEY,
    LAYOUT_V1, LAYOUT_V2, LAYOUT_VERSION, NS_COLUMNS, UNKNOWN_MEMBERS,
};
use crate::object_storage::{Fetched, RemoteObject};
use crate::store_key::{KeySource, Unauthenticated};
use datafusion::arrow::array::{
    Array, ArrayRef, AsArray, FixedSizeBinaryArray, Int32Array, Int64Array, StringArray,
};
use datafusion::arrow::compute::cast;
use datafusion::arrow::datatypes::{DataType, Field, Fields, Int64Type};
use datafusion::arrow::record_batch::RecordBatch;
use datafusion::parquet::arrow::ProjectionMask;
use datafusion::parquet::arrow::arrow_reader::{
    ArrowReaderMetadata, ArrowReaderOptions, ParquetRecordBatchReader,
    ParquetRecordBatchReaderBuilder, RowSelection, RowSelectionPolicy, RowSelector,
};
use datafusion::parquet::file::metadata::{ParquetMetaData, ParquetMetaDataBuilder};
use datafusion::parquet::file::page_index::offset_index::OffsetIndexMetaData;
use datafusion::parquet::file::reader::ChunkReader;
use std::fs::File;
use std::ops::Range;
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
    /// A file in convert's layout whose MAC does not match (changed after
    /// convert wrote it, or made with another key): the run stops.
    pub forged: Option<String>,
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
        .filter(|(_, i)| i.format == LogFormat::Parquet)
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

/// A run of a file's rows, in file order.
enum Piece {
    /// Rows `first..first + batch.num_rows()` (from 0), decoded.
    Rows { first: u64, batch: RecordBatch },
    /// Rows `first..first + rows` that were not decoded, and why.
    Skipped {
        first: u64,
        rows: u64,
        reason: String,
    },
}

struct Opened {
    kind: Kind,
    run: Option<String>,
    pieces: Vec<Piece>,
    error: Option<String>,
    /// Why the run must stop (a MAC that does not match).
    forged: Option<String>,
}

impl Opened {
    fn batches(&self) -> impl Iterator<Item = &RecordBatch> {
        self.pieces.iter().filter_map(|p| match p {
            Piece::Rows { batch, .. } => Some(batch),
            Piece::Skipped { .. } => None,
        })
    }
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

/// The input's file and its footer, or why it cannot be read.
fn open_file(input: &Input) -> Result<(File, ArrowReaderMetadata), String> {
    let file = input.open_file()?;
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

fn open(input: &Input, threads: usize, limits: Limits, keys: &KeySource) -> Opened {
    let failed = |e: String| Opened {
        kind: Kind::Foreign,
        run: None,
        pieces: Vec::new(),
        error: Some(e),
        forged: None,
    };
    let footer = match &input.object {
        Some(object) => read_footer(object),
        None => open_file(input).map(|(_, footer)| footer),
    };
    let footer = match footer {
        Ok(footer) => footer,
        Err(e) => return failed(e),
    };
    let (table, run) = own_table(&footer);
    // What a file in convert's layout claims is believed only when its MAC
    // shows that convert wrote it; otherwise it is read as any Parquet.
    let (table, unauthenticated) = match table {
        None => (None, None),
        Some(table) => match timed_authenticate(input, keys) {
            Ok(()) => (Some(table), None),
            Err(Unauthenticated::Missing(why)) => (
                None,
                Some(format!(
                    "in convert's layout, but {why}: read as Parquet from elsewhere, each row a \
                 line with every check (its stored locations, redelivery counts and digests \
                 are not used)"
                )),
            ),
            Err(Unauthenticated::Failed(why)) => {
                return Opened {
                    forged: Some(format!(
                        "{} is in convert's layout, but {why}",
                        input.display
                    )),
                    ..failed(String::new())
                };
            }
        },
    };
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
            pieces: Vec::new(),
            error: None,
            forged: None,
        };
    }
    let skip_empty = matches!(kind, Kind::Events);
    let (mut pieces, mut error) = match &input.object {
        Some(object) => {
            // A chunk no larger than a page may be costs no more to fetch
            // than to decode; a larger one could hide a page that is not to
            // be read (a 1 GiB value that does not compress), so its pages
            // are looked at first, at a request each.
            let remote = Remote {
                object,
                whole_up_to: limits.page,
            };
            decode(&footer, &remote, threads, skip_empty, limits)
        }
        None => {
            let reopen = Whole(|| input.open_file());
            decode(&footer, &reopen, threads, skip_empty, limits)
        }
    };
    let mut kind = kind;
    let implausible = pieces.iter().find_map(|p| match p {
        Piece::Rows { batch, .. } => implausible_events(batch),
        Piece::Skipped { .. } => None,
    });
    if matches!(kind, Kind::Events)
        && let Some(bad) = implausible
    {
        // Counts and seqs are trusted from our own files; a file that only
        // looks like one must not corrupt the accounting.
        error = Some(format!(
            "claims to be hvaudit's events layout but {bad}; no row of it was used"
        ));
        pieces.clear();
        kind = Kind::Foreign;
    }
    let error = match (unauthenticated, error) {
        (Some(note), Some(e)) => Some(format!("{note}; {e}")),
        (note, e) => note.or(e),
    };
    Opened {
        kind,
        run,
        pieces,
        error,
        forged: None,
    }
}

/// [`authenticate`], its time said under `HVAUDIT_TIMING`.
fn timed_authenticate(input: &Input, keys: &KeySource) -> Result<(), Unauthenticated> {
    let started = std::time::Instant::now();
    let checked = authenticate(input, keys);
    crate::progress::timing("parquet authenticate", &input.display, started);
    checked
}

/// What is decoded at once.
#[derive(Debug, Clone, Copy)]
struct Limits {
    /// `--max-line-bytes`: a longer row is a bad line.
    line: u64,
    /// A page holding more is not decoded (its rows are bad lines):
    /// `PAGE_LINES` lines.
    page: u64,
    /// Bytes of pages a batch is decoded from, about.
    batch: u64,
}

/// A batch is decoded from about this many bytes of pages (and at most
/// `BATCH_ROWS` rows). Reading 40,000 rows of 8 kB (197 MB of Parquet from
/// DuckDB) took 4.9, 4.8, 4.8 and 5.0 s at 4, 8, 16 and 32 MiB and peaked
/// at 829, 861, 865 and 1,005 MB (5.4 s, 949 MB by rows alone).
const BATCH_BYTES: u64 = 16 << 20;

impl Limits {
    fn new(max_line_bytes: usize) -> Limits {
        let line = max_line_bytes as u64;
        Limits {
            line,
            page: line.saturating_mul(PAGE_LINES),
            batch: BATCH_BYTES,
        }
    }
}

/// Where a Parquet file's bytes come from.
trait Source: Sync {
    type Reader: ChunkReader + 'static;
    /// Whether a column chunk of `len` bytes is read whole before its page
    /// headers are looked at; if not, they are read one by one through
    /// `read_at`, and only its pages within the limit are read.
    fn whole(&self, len: u64) -> bool;
    /// `len` bytes at `offset`, read now.
    fn read_at(&self, offset: u64, len: usize) -> Result<bytes::Bytes, String>;
    /// The reader of a span's row groups, holding (at least) `ranges`.
    fn reader(&self, ranges: &[Range<u64>]) -> Result<Self::Reader, String>;
}

/// A file opened whole for each span (a local file: reads are cheap).
struct Whole<F>(F);

impl<R: ChunkReader + 'static, F: Fn() -> Result<R, String> + Sync> Source for Whole<F> {
    type Reader = R;

    fn whole(&self, _: u64) -> bool {
        true
    }

    fn read_at(&self, _: u64, _: usize) -> Result<bytes::Bytes, String> {
        Err("read whole".into())
    }

    fn reader(&self, _: &[Range<u64>]) -> Result<R, String> {
        (self.0)()
    }
}

/// An object in a store: a span's column chunks are fetched up front in a
/// few ranged reads, except those larger than `whole_up_to`, of which
/// only the pages to decode are.
struct Remote<'a> {
    object: &'a RemoteObject,
    whole_up_to: u64,
}

impl Source for Remote<'_> {
    type Reader = Fetched;

    fn whole(&self, len: u64) -> bool {
        len <= self.whole_up_to
    }

    fn read_at(&self, offset: u64, len: usize) -> Result<bytes::Bytes, String> {
        self.object
            .read_range(offset, len as u64)
            .map_err(|e| e.to_string())
    }

    fn reader(&self, ranges: &[Range<u64>]) -> Result<Fetched, String> {
        self.object.fetch(ranges).map_err(|e| e.to_string())
    }
}

/// Pieces read from a file, and the error that ended it early.
type Decoded = (Vec<Piece>, Option<String>);

/// Rows per decoded batch, at most.
const BATCH_ROWS: usize = 8192;

/// The byte ranges of the column chunks of row groups `groups` whose leaf
/// column index passes `wanted` (chunks the footer places nowhere left
/// out: reading them fails with the reason).
fn chunk_ranges(
    footer: &ArrowReaderMetadata,
    groups: &[usize],
    wanted: impl Fn(usize) -> bool,
) -> Vec<Range<u64>> {
    let meta = footer.metadata();
    let mut ranges = Vec::new();
    for &g in groups {
        let group = meta.row_group(g);
        for c in (0..group.num_columns()).filter(|&c| wanted(c)) {
            ranges.extend(chunk_range(group.column(c)).ok());
        }
    }
    ranges
}

/// Decode a file's row groups, several at a time, into pieces in file
/// order; an error ends the file there (the rows before it are kept).
/// Each worker reads the page headers of its row groups, opens the file
/// for them (an object's column chunks are fetched then; clones of one
/// file handle share a position, and the reader seeks) and reuses the
/// parsed `footer`: parsing it again per row group was quadratic (10,000
/// row groups did not finish in 3 minutes).
fn decode<S: Source>(
    footer: &ArrowReaderMetadata,
    source: &S,
    threads: usize,
    skip_empty: bool,
    limits: Limits,
) -> Decoded {
    let meta = footer.metadata();
    if let Some((g, rows)) = meta
        .row_groups()
        .iter()
        .map(|g| g.num_rows())
        .enumerate()
        .find(|(_, rows)| *rows < 0)
    {
        return (
            Vec::new(),
            Some(format!(
                "not a readable Parquet file: row group {g} claims {rows} rows"
            )),
        );
    }
    let spans = spans(meta);
    // The file row each span starts at.
    let starts: Vec<u64> = spans
        .iter()
        .scan(0u64, |row, span| {
            let first = *row;
            for &g in span {
                *row = row.saturating_add(meta.row_group(g).num_rows() as u64);
            }
            Some(first)
        })
        .collect();
    let read = |span: usize| {
        read_span(
            footer,
            source,
            &spans[span],
            starts[span],
            skip_empty,
            limits,
        )
    };
    if spans.len() <= 1 || threads <= 1 {
        let mut pieces = Vec::new();
        for span in 0..spans.len() {
            let (part, error) = read(span);
            pieces.extend(part);
            if error.is_some() {
                return (pieces, error);
            }
        }
        return (pieces, None);
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
                    let result = read(span);
                    if let Ok(mut slot) = decoded[span].lock() {
                        *slot = Some(result);
                    }
                }
            });
        }
    });
    let mut pieces = Vec::new();
    for slot in decoded {
        let (part, error) = slot
            .into_inner()
            .ok()
            .flatten()
            .unwrap_or_else(|| (Vec::new(), Some("a row group was not decoded".into())));
        pieces.extend(part);
        if error.is_some() {
            return (pieces, error);
        }
    }
    (pieces, None)
}

/// The row groups in runs of consecutive ones holding `BATCH_ROWS` rows or
/// `BATCH_BYTES` bytes or more (the last run may hold fewer): the unit a
/// worker decodes, so that tiny row groups cost neither a reader nor a
/// batch each.
fn spans(meta: &ParquetMetaData) -> Vec<Vec<usize>> {
    let mut spans = Vec::new();
    let (mut span, mut rows, mut bytes) = (Vec::new(), 0i64, 0i64);
    for (g, group) in meta.row_groups().iter().enumerate() {
        span.push(g);
        rows = rows.saturating_add(group.num_rows());
        bytes = bytes.saturating_add(group.total_byte_size());
        if rows >= BATCH_ROWS as i64 || bytes >= BATCH_BYTES as i64 {
            spans.push(std::mem::take(&mut span));
            (rows, bytes) = (0, 0);
        }
    }
    if !span.is_empty() {
        spans.push(span);
    }
    spans
}

/// Rows of a span, in file order: decoded, or not and why.
#[derive(Debug, PartialEq)]
enum Segment {
    Keep {
        first: u64,
        rows: u64,
    },
    Skip {
        first: u64,
        rows: u64,
        reason: String,
    },
}

/// Add rows `first..first + rows` to those kept.
fn keep(segments: &mut Vec<Segment>, first: u64, rows: u64) {
    match segments.last_mut() {
        Some(Segment::Keep { first: f, rows: r }) if *f + *r == first => *r += rows,
        _ => segments.push(Segment::Keep { first, rows }),
    }
}

/// Read the row groups `groups` of a file, its rows from `first_row` on,
/// batch by batch, so that a break keeps what came before it.
///
/// First their page headers are read: a page larger than `limits.page`
/// is never decoded, and the rows it holds become a `Piece::Skipped` (the
/// row group's rows, when which rows it holds cannot be told). The others
/// are decoded in batches of about `limits.batch` bytes of pages.
///
/// With `skip_empty`, columns whose statistics say they are null in every
/// one of the groups are not decoded but laid out as shared all-null
/// arrays: most events columns are empty, and decoding them was most of
/// reading a file.
fn read_span<S: Source>(
    footer: &ArrowReaderMetadata,
    source: &S,
    groups: &[usize],
    first_row: u64,
    skip_empty: bool,
    limits: Limits,
) -> Decoded {
    let meta = footer.metadata();
    let empty = if skip_empty {
        empty_columns(footer, groups)
    } else {
        Vec::new()
    };
    let schema = footer.parquet_schema();
    let leaves: Vec<usize> = (0..schema.num_columns())
        .filter(|&c| !empty.get(c).copied().unwrap_or(false))
        .collect();
    // Per group, per leaf read: its pages. The chunks not read whole first,
    // so that only their pages to decode are fetched with the others.
    let mut indexed = vec![0usize; groups.len()];
    let mut pages: Vec<Vec<(usize, Option<ChunkPages>)>> = groups
        .iter()
        .zip(&mut indexed)
        .map(|(&g, indexed)| {
            let group = meta.row_group(g);
            leaves
                .iter()
                .map(|&leaf| {
                    let chunk = group.column(leaf);
                    let whole = chunk_range(chunk).map_or(true, |r| source.whole(r.end - r.start));
                    let read = |offset: u64, len: usize| source.read_at(offset, len);
                    let pages =
                        (!whole).then(|| ChunkPages::read(&read, chunk, limits.page, indexed));
                    (leaf, pages)
                })
                .collect()
        })
        .collect();
    let mut ranges = Vec::new();
    for (&g, chunks) in groups.iter().zip(&pages) {
        for (leaf, read) in chunks {
            match read {
                Some(pages) => ranges.extend(pages.needed.iter().cloned()),
                None => ranges.extend(chunk_range(meta.row_group(g).column(*leaf)).ok()),
            }
        }
    }
    let reader = match source.reader(&ranges) {
        Ok(r) => r,
        Err(e) => return (Vec::new(), Some(e)),
    };
    let read = |offset: u64, len: usize| {
        reader
            .get_bytes(offset, len)
            .map_err(|e| format!("cannot read: {e}"))
    };
    let names = |leaf: usize| schema.column(leaf).path().string();
    let mut segments: Vec<Segment> = Vec::new();
    // What the reader is to read of the groups it reads.
    let mut selectors: Vec<RowSelector> = Vec::new();
    let (mut read_groups, mut partial) = (Vec::new(), Vec::new());
    let mut batch_rows = BATCH_ROWS;
    let mut row = first_row;
    for ((&g, chunks), indexed) in groups.iter().zip(&mut pages).zip(&mut indexed) {
        let group = meta.row_group(g);
        let chunks: Vec<(usize, ChunkPages)> = chunks
            .iter_mut()
            .map(|(leaf, pages)| {
                let pages = pages.take().unwrap_or_else(|| {
                    ChunkPages::read(&read, group.column(*leaf), limits.page, indexed)
                });
                (*leaf, pages)
            })
            .collect();
        let rows = group.num_rows() as u64;
        let name = GroupName {
            number: g,
            first_row: row + 1,
            column: &names,
            limit: limits.page,
        };
        let bytes = match plan_group(group, chunks, &name) {
            GroupPlan::Read { bytes } => {
                keep(&mut segments, row, rows);
                selectors.push(RowSelector::select(rows as usize));
                read_groups.push(g);
                bytes
            }
            GroupPlan::Partial {
                bytes,
                skip,
                index,
                undictionaried,
            } => {
                let mut at = 0;
                for (r, reason) in skip {
                    if r.start > at {
                        keep(&mut segments, row + at, r.start - at);
                        selectors.push(RowSelector::select((r.start - at) as usize));
                    }
                    selectors.push(RowSelector::skip((r.end - r.start) as usize));
                    segments.push(Segment::Skip {
                        first: row + r.start,
                        rows: r.end - r.start,
                        reason,
                    });
                    at = r.end;
                }
                if rows > at {
                    keep(&mut segments, row + at, rows - at);
                    selectors.push(RowSelector::select((rows - at) as usize));
                }
                read_groups.push(g);
                partial.push(Indexed {
                    group: g,
                    index,
                    undictionaried,
                });
                bytes
            }
            GroupPlan::Reject(reason) => {
                segments.push(Segment::Skip {
                    first: row,
                    rows,
                    reason,
                });
                0
            }
        };
        if rows > 0 && bytes > 0 {
            let fit = u128::from(limits.batch) * u128::from(rows) / u128::from(bytes);
            batch_rows = batch_rows.min(usize::try_from(fit).unwrap_or(usize::MAX).max(1));
        }
        row = row.saturating_add(rows);
    }
    let mut out = Vec::new();
    if read_groups.is_empty() {
        let none: Vec<RecordBatch> = Vec::new();
        let error = align(none.into_iter().map(Ok), segments, &mut out);
        return (out, error);
    }
    let selection = (!partial.is_empty()).then(|| RowSelection::from(selectors));
    let batches = decoder(
        reader,
        footer,
        &read_groups,
        partial,
        selection,
        &empty,
        batch_rows,
    );
    let batches = match batches {
        Ok(b) => b,
        Err(e) => return (out, Some(format!("not a readable Parquet file: {e}"))),
    };
    // Events of any layout laid out as `EVENTS`; other files as they are.
    let file = footer.schema().fields();
    let events = [&EVENTS, &EVENTS_V2, &EVENTS_V1]
        .iter()
        .any(|layout| layout.fields() == file);
    let batches = batches.map(|b| {
        b.and_then(|b| match skip_empty && events {
            true => as_events_layout(b, file, &empty),
            false => Ok(b),
        })
        .map_err(|e| format!("Parquet read stopped: {e}; rows before it were kept"))
    });
    let error = align(batches, segments, &mut out);
    (out, error)
}

/// A row group read through our offset index.
struct Indexed {
    group: usize,
    /// For each of the file's leaves.
    index: Vec<OffsetIndexMetaData>,
    /// Leaves whose dictionary page is not to be read.
    undictionaried: Vec<usize>,
}

/// The reader of `groups`, in batches of `batch_rows`: through our offset
/// index for those in `partial`, where some of their rows are not to be
/// read (`selection`).
fn decoder<R: ChunkReader + 'static>(
    reader: R,
    footer: &ArrowReaderMetadata,
    groups: &[usize],
    partial: Vec<Indexed>,
    selection: Option<RowSelection>,
    empty: &[bool],
    batch_rows: usize,
) -> datafusion::parquet::errors::Result<ParquetRecordBatchReader> {
    let footer = if partial.is_empty() {
        footer.clone()
    } else {
        // The reader skips a page without reading it only through an
        // offset index; ours, from the headers read, is the one trusted.
        let meta = footer.metadata();
        let mut index: Vec<Vec<OffsetIndexMetaData>> = vec![Vec::new(); meta.num_row_groups()];
        let mut row_groups = meta.row_groups().to_vec();
        for p in partial {
            // Without its dictionary page, a chunk starts at its first data
            // page, and the reader looks for no dictionary before it.
            for &leaf in &p.undictionaried {
                let first = p.index[leaf].page_locations.first().map(|l| l.offset);
                let group = &row_groups[p.group];
                let mut columns = group.columns().to_vec();
                columns[leaf] = columns[leaf]
                    .clone()
                    .into_builder()
                    .set_dictionary_page_offset(None)
                    .set_data_page_offset(first.unwrap_or(columns[leaf].data_page_offset()))
                    .build()?;
                row_groups[p.group] = group
                    .clone()
                    .into_builder()
                    .set_column_metadata(columns)
                    .build()?;
            }
            index[p.group] = p.index;
        }
        let with_index = ParquetMetaDataBuilder::new_from_metadata(meta.as_ref().clone())
            .set_row_groups(row_groups)
            .set_offset_index(Some(index))
            .build();
        ArrowReaderMetadata::try_new(Arc::new(with_index), ArrowReaderOptions::new())?
    };
    let mut builder = ParquetRecordBatchReaderBuilder::new_with_metadata(reader, footer.clone())
        .with_row_groups(groups.to_vec())
        .with_batch_size(batch_rows);
    if !empty.is_empty() {
        let kept = (0..empty.len()).filter(|&c| !empty[c]);
        builder = builder.with_projection(ProjectionMask::leaves(footer.parquet_schema(), kept));
    }
    if let Some(selection) = selection {
        // Selectors skip whole pages; a mask would decode them.
        builder = builder
            .with_row_selection(selection)
            .with_row_selection_policy(RowSelectionPolicy::Selectors);
    }
    builder.build()
}

/// Lay the decoded batches over the span's segments: each batch's rows are
/// the next rows kept; the rows skipped become pieces where they fall.
/// Returns the error that ended the span early.
fn align(
    batches: impl Iterator<Item = Result<RecordBatch, String>>,
    segments: Vec<Segment>,
    out: &mut Vec<Piece>,
) -> Option<String> {
    let mut segments = segments.into_iter();
    let skipped = |out: &mut Vec<Piece>, first: u64, rows: u64, reason: String| {
        if rows > 0 {
            out.push(Piece::Skipped {
                first,
                rows,
                reason,
            });
        }
    };
    // The kept rows being filled: the next one's file row, and how many.
    let (mut next, mut left) = (0u64, 0u64);
    for batch in batches {
        let batch = match batch {
            Ok(b) => b,
            Err(e) => return Some(e),
        };
        let mut at = 0usize;
        while at < batch.num_rows() {
            while left == 0 {
                match segments.next() {
                    Some(Segment::Keep { first, rows }) => (next, left) = (first, rows),
                    Some(Segment::Skip {
                        first,
                        rows,
                        reason,
                    }) => skipped(out, first, rows, reason),
                    None => {
                        return Some(
                            "Parquet read stopped: the file holds more rows than its footer \
                             says; rows before them were kept"
                                .into(),
                        );
                    }
                }
            }
            let n = left.min((batch.num_rows() - at) as u64);
            out.push(Piece::Rows {
                first: next,
                batch: batch.slice(at, n as usize),
            });
            at += n as usize;
            next += n;
            left -= n;
        }
    }
    let short = "Parquet read stopped: the file holds fewer rows than its footer says; \
                 rows before the gap were kept";
    if left > 0 {
        return Some(short.into());
    }
    for segment in segments {
        match segment {
            Segment::Skip {
                first,
                rows,
                reason,
            } => skipped(out, first, rows, reason),
            Segment::Keep { rows: 0, .. } => {}
            Segment::Keep { .. } => return Some(short.into()),
        }
    }
    None
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
    let limits = Limits::new(opts.max_line_bytes);
    let files: Vec<(usize, &Input, Opened)> = inputs
        .iter()
        .enumerate()
        .filter(|(_, i)| i.format == LogFormat::Parquet)
        .map(|(n, i)| {
            let o = open(i, opts.worker_threads(), limits, &opts.store_key);
            opts.progress.fetch_add(i.bytes, Ordering::Relaxed);
            (n, i, o)
        })
        .collect();
    let forged = files.iter().find_map(|(_, _, o)| o.forged.clone());
    let mut out = ParquetRead {
        chunks: Vec::new(),
        overlap: None,
        forged,
        errors: Vec::new(),
        next_file_idx: files.len() as u32,
    };
    // Runs whose seqs overlap (one directory converted into twice) would
    // count their events twice: refused, with the words of --in-place.
    let ranges: Vec<_> = files
        .iter()
        .filter(|(_, _, o)| matches!(o.kind, Kind::Events | Kind::BadLines))
        .filter_map(|(_, i, o)| Some((o.run.clone(), seq_range(o.batches())?, i.display.clone())))
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
    // Rows of a stored table that were not decoded have no stored seq:
    // theirs come from a file index above every stored one.
    let mut spare_idx = ranges
        .iter()
        .map(|(_, (_, hi), _)| (hi >> 40) as u32 + 1)
        .fold(out.next_file_idx, u32::max);
    let norm = NormalizeOptions {
        token_format: opts.token_format,
    };
    // Members that hold JSON, as other pipelines write them: text, spliced
    // into the line as written (the unknown members' column stays text).
    let spliced: Vec<&str> = JSON_COLUMNS
        .iter()
        .copied()
        .filter(|c| *c != UNKNOWN_MEMBERS)
        .collect();
    for (file_idx, (input_idx, input, opened)) in files.into_iter().enumerate() {
        let file_idx = file_idx as u32;
        if let Some(e) = opened.error {
            out.errors.push((input_idx, e));
        }
        let mut chunk_idx = 0u32;
        let mut next_chunk = || {
            chunk_idx += 1;
            chunk_idx - 1
        };
        let mut shape = ChunkShape::default();
        let mut skipped_idx = None;
        let bad_rows = |file_idx, chunk_idx, bad: Vec<BadLine>, unlisted: u64| {
            rejected_rows(file_idx, chunk_idx, bad, unlisted, opts.max_bad_lines)
        };
        for piece in opened.pieces {
            let (first, batch) = match piece {
                Piece::Skipped { .. } if matches!(opened.kind, Kind::Evidence) => continue,
                Piece::Skipped {
                    first,
                    rows,
                    reason,
                } => {
                    let seq_file = if keep_seq && !matches!(opened.kind, Kind::Foreign) {
                        *skipped_idx.get_or_insert_with(|| {
                            spare_idx += 1;
                            spare_idx - 1
                        })
                    } else {
                        file_idx
                    };
                    let line = first + 1;
                    let reason = if rows > 1 {
                        format!("{reason} ({rows} rows, counted as {rows} bad lines, listed once)")
                    } else {
                        reason
                    };
                    let bad = row_bad_line(seq_of(seq_file, line), line, &reason);
                    out.chunks
                        .push(bad_rows(file_idx, next_chunk(), vec![bad], rows - 1));
                    continue;
                }
                Piece::Rows { first, batch } => (first, batch),
            };
            match opened.kind {
                Kind::Events | Kind::BadLines => {
                    let batch = if keep_seq {
                        batch
                    } else {
                        renumber(&batch, "seq", file_idx, first)
                    };
                    let (batch, bad) = split_oversized(batch, first, limits.line, |r, b| {
                        let seqs = b.column_by_name("seq")?;
                        let seqs = seqs.as_any().downcast_ref::<Int64Array>()?;
                        (r < seqs.len()).then(|| seqs.value(r))
                    });
                    if matches!(opened.kind, Kind::Events) {
                        let max_seq = max_i64(&batch, "seq");
                        out.next_file_idx = out.next_file_idx.max((max_seq >> 40) as u32 + 1);
                        out.chunks
                            .push(converted_events(batch, file_idx, next_chunk()));
                    } else {
                        out.chunks
                            .push(converted_bad_lines(&batch, file_idx, next_chunk()));
                    }
                    if !bad.is_empty() {
                        out.chunks.push(bad_rows(file_idx, next_chunk(), bad, 0));
                    }
                }
                Kind::Evidence => {}
                Kind::Foreign => {
                    // Rows over the cap are cut out before anything is
                    // written as JSON; the runs between are read as lines.
                    let over = oversized(&batch, limits.line);
                    let mut at = 0usize;
                    let mut runs = Vec::new();
                    for o in over.iter().map(|o| o.row).chain([batch.num_rows()]) {
                        if o > at {
                            runs.push(at..o);
                        }
                        at = o + 1;
                    }
                    let mut over = over.into_iter().peekable();
                    for run in runs {
                        let before: Vec<_> =
                            std::iter::from_fn(|| over.next_if(|o| o.row < run.start)).collect();
                        if !before.is_empty() {
                            let bad = too_long(&batch, first, limits.line, before, |r| {
                                Some(seq_of(file_idx, first + r as u64 + 1))
                            });
                            out.chunks.push(bad_rows(file_idx, next_chunk(), bad, 0));
                        }
                        let part = batch.slice(run.start, run.len());
                        let line = first + run.start as u64 + 1;
                        for lines in rows_as_lines(&part, &spliced) {
                            match lines {
                                Lines::Written { offset, data } => {
                                    let chunk = Chunk {
                                        file_idx,
                                        chunk_idx: next_chunk(),
                                        first_line: line + offset as u64,
                                        data,
                                        oversized: None,
                                    };
                                    out.chunks.push(ndjson::parse_chunk(
                                        &chunk,
                                        Arc::from(input.display.as_str()),
                                        opts.chunk_limits(),
                                        norm,
                                        &mut shape,
                                    ));
                                }
                                // Counted and listed as a bad line, so the
                                // accounting and the gate see the row.
                                Lines::Unwritable { offset, reason } => {
                                    let line = line + offset as u64;
                                    let bad = row_bad_line(seq_of(file_idx, line), line, &reason);
                                    out.chunks
                                        .push(bad_rows(file_idx, next_chunk(), vec![bad], 0));
                                }
                            }
                        }
                    }
                    let after: Vec<_> = over.collect();
                    if !after.is_empty() {
                        let bad = too_long(&batch, first, limits.line, after, |r| {
                            Some(seq_of(file_idx, first + r as u64 + 1))
                        });
                        out.chunks.push(bad_rows(file_idx, next_chunk(), bad, 0));
                    }
                }
            }
        }
    }
    out.next_file_idx = out.next_file_idx.max(spare_idx);
    out
}

/// A row of a Parquet file rejected for `reason`, with no text of its own.
fn row_bad_line(seq: i64, line: u64, reason: &str) -> BadLine {
    BadLine {
        seq,
        line,
        reason: clip(reason, MAX_REASON_CHARS).into_owned(),
        excerpt: String::new(),
        id: None,
        type_: None,
        src_file: None,
        digest: None,
    }
}

/// `batch` (rows from file row `first`, from 0) without its rows longer
/// than `cap`, and those rows as bad lines (`seq` gives a row's seq).
fn split_oversized(
    batch: RecordBatch,
    first: u64,
    cap: u64,
    seq: impl Fn(usize, &RecordBatch) -> Option<i64>,
) -> (RecordBatch, Vec<BadLine>) {
    let over = oversized(&batch, cap);
    if over.is_empty() {
        return (batch, Vec::new());
    }
    let bad = too_long(&batch, first, cap, over.clone(), |r| seq(r, &batch));
    let mut keep = vec![true; batch.num_rows()];
    for o in &over {
        keep[o.row] = false;
    }
    let kept = datafusion::arrow::compute::filter_record_batch(
        &batch,
        &datafusion::arrow::array::BooleanArray::from(keep),
    )
    .expect("a mask as long as the batch");
    (kept, bad)
}

/// The rows `over` of `batch` as bad lines: their row in the file, their
/// size and their largest column, their id and type when short.
fn too_long(
    batch: &RecordBatch,
    first: u64,
    cap: u64,
    over: Vec<Oversized>,
    seq: impl Fn(usize) -> Option<i64>,
) -> Vec<BadLine> {
    let text = |name: &str, r: usize| batch.column_by_name(name).and_then(|c| short_text(c, r));
    over.into_iter()
        .map(|o| {
            let line = first + o.row as u64 + 1;
            let reason = format!(
                "row of {} bytes exceeds the {cap}-byte cap (--max-line-bytes): its column {} \
                 holds {} bytes; not serialized",
                o.bytes, o.column, o.column_bytes
            );
            BadLine {
                seq: seq(o.row).unwrap_or(line as i64),
                line,
                reason: clip(&reason, MAX_REASON_CHARS).into_owned(),
                excerpt: String::new(),
                id: text("id", o.row),
                type_: text("type", o.row),
                src_file: None,
                digest: None,
            }
        })
        .collect()
}

/// A chunk of rows rejected before they were parsed: `bad` listed (the
/// first `max_bad` of them), `unlisted` more counted.
fn rejected_rows(
    file_idx: u32,
    chunk_idx: u32,
    mut bad: Vec<BadLine>,
    unlisted: u64,
    max_bad: usize,
) -> ParsedChunk {
    let lines = bad.len() as u64 + unlisted;
    let over = bad.len().saturating_sub(max_bad);
    bad.truncate(max_bad);
    ParsedChunk {
        file_idx,
        chunk_idx,
        events: ChunkRows::Built(RecordBatch::new_empty(EVENTS.clone())),
        keys: Vec::new(),
        bad,
        bad_unlisted: unlisted + over as u64,
        bad_raw: Vec::new(),
        lines,
        blank: 0,
        collapsed: 0,
    }
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
fn seq_range<'a>(batches: impl Iterator<Item = &'a RecordBatch>) -> Option<(i64, i64)> {
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
            let (file, footer) = open_file(input)?;
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
pub fn check_seqs_disjoint(ranges: &[(Option<String>, (i64, i64), String)]) -> anyhow::Result<()> {
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
    use crate::ingest::parquet_pages::PageKind;
    use datafusion::arrow::array::{AsArray, Int64Array};
    use datafusion::arrow::datatypes::{DataType, Field, Int64Type, Schema};
    use datafusion::parquet::arrow::ArrowWriter;
    use datafusion::parquet::file::properties::WriterProperties;
    use std::path::Path;

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

    /// The decoded batches of `pieces`, which must all be decoded rows in
    /// file order.
    fn batches_of(pieces: Vec<Piece>) -> Vec<RecordBatch> {
        let mut row = 0;
        pieces
            .into_iter()
            .map(|p| match p {
                Piece::Rows { first, batch } => {
                    assert_eq!(first, row, "pieces in file order");
                    row += batch.num_rows() as u64;
                    batch
                }
                Piece::Skipped { first, reason, .. } => panic!("row {first} skipped: {reason}"),
            })
            .collect()
    }

    fn numbers(pieces: Vec<Piece>) -> Vec<i64> {
        batches_of(pieces)
            .iter()
            .flat_map(|b| {
                let a = b.column(0).as_any().downcast_ref::<Int64Array>().unwrap();
                a.values().to_vec()
            })
            .collect()
    }

    fn open_path(path: &Path) -> Whole<impl Fn() -> Result<File, String> + Sync + '_> {
        Whole(move || File::open(path).map_err(|e| e.to_string()))
    }

    fn limits() -> Limits {
        Limits::new(ndjson::DEFAULT_MAX_LINE_BYTES)
    }

    #[test]
    fn row_groups_decoded_in_parallel_come_back_in_file_order() {
        // Seven groups of 5000 rows: four runs of two groups (the last of one).
        let file = numbered_file(7, 5000);
        let path = file.path();
        let footer = read_footer(&File::open(path).unwrap()).unwrap();
        assert_eq!(footer.metadata().num_row_groups(), 7);
        assert_eq!(spans(footer.metadata()).len(), 4);
        let (parallel, error) = decode(&footer, &open_path(path), 3, true, limits());
        assert!(error.is_none());
        let (serial, _) = decode(&footer, &open_path(path), 1, true, limits());
        let expected: Vec<i64> = (0..35_000).collect();
        assert_eq!(numbers(parallel), expected);
        assert_eq!(numbers(serial), expected);
    }

    /// The Parquet reader asks for every page's header and data; from an
    /// object store each ask was a request. The column chunks are fetched
    /// once, and every read after that is served from them: with the
    /// object gone, a file of 4 row groups of many pages still decodes.
    #[test]
    fn an_objects_row_groups_decode_from_their_chunks_fetched_once() {
        use crate::object_storage::RemoteObject;
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
        let fetched = Mutex::new(Some(fetched));
        let once = Whole(|| {
            fetched
                .lock()
                .unwrap()
                .take()
                .ok_or("fetched once".to_string())
        });
        let (pieces, error) = read_span(&footer, &once, &groups, 0, false, limits());
        assert_eq!(error, None);
        assert_eq!(numbers(pieces), (0..20_000).collect::<Vec<i64>>());
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
            let open = Whole(|| {
                Ok(Counted {
                    data: data.clone(),
                    read: Arc::clone(&read),
                })
            });
            let footer = read_footer(&open.reader(&[]).unwrap()).unwrap();
            let (pieces, error) = decode(&footer, &open, 4, true, limits());
            assert!(error.is_none(), "{error:?}");
            let batches = batches_of(pieces);
            let numbers: Vec<i64> = batches
                .iter()
                .flat_map(|b| b.column(0).as_primitive::<Int64Type>().values().to_vec())
                .collect();
            assert_eq!(numbers, (0..64 * groups as i64).collect::<Vec<_>>());
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
        use crate::ingest::row::{EventBuilders, EventRow};
        // Events in two row groups of BATCH_ROWS; `topic` is set only in
        // the second.
        let n = 2 * BATCH_ROWS as i64;
        let mut rows = EventBuilders::new("x".into(), n as usize);
        for seq in 0..n {
            rows.push(&EventRow {
                seq,
                id: format!("e{seq}").into(),
                type_: "t.x".into(),
                dialect: "0.2",
                topic: (seq >= n / 2).then(|| "news".into()),
                ..EventRow::default()
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
        let footer = read_footer(&File::open(path).unwrap()).unwrap();
        assert!(
            empty_columns(&footer, &[0])[topic],
            "topic is empty in the first group"
        );
        assert!(!empty_columns(&footer, &[0, 1])[topic]);
        let (plain, _) = decode(&footer, &open_path(path), 1, false, limits());
        let plain = batches_of(plain);
        let plain = datafusion::arrow::compute::concat_batches(&EVENTS, &plain).unwrap();
        assert_eq!(plain, batch);
        for threads in [1, 2] {
            let (read, error) = decode(&footer, &open_path(path), threads, true, limits());
            assert!(error.is_none());
            let read = batches_of(read);
            let read = datafusion::arrow::compute::concat_batches(&EVENTS, &read).unwrap();
            assert_eq!(read, batch, "{threads} threads");
        }
    }

    /// A file in memory that records the byte ranges read from it.
    struct Recorded {
        data: bytes::Bytes,
        reads: Arc<Mutex<Vec<Range<u64>>>>,
    }

    struct RecordedRead {
        data: bytes::Bytes,
        at: u64,
        reads: Arc<Mutex<Vec<Range<u64>>>>,
    }

    impl std::io::Read for RecordedRead {
        fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
            let start = (self.at as usize).min(self.data.len());
            let n = buf.len().min(self.data.len() - start);
            buf[..n].copy_from_slice(&self.data[start..start + n]);
            self.reads.lock().unwrap().push(self.at..self.at + n as u64);
            self.at += n as u64;
            Ok(n)
        }
    }

    impl datafusion::parquet::file::reader::Length for Recorded {
        fn len(&self) -> u64 {
            self.data.len() as u64
        }
    }

    impl ChunkReader for Recorded {
        type T = RecordedRead;

        fn get_read(&self, start: u64) -> datafusion::parquet::errors::Result<RecordedRead> {
            Ok(RecordedRead {
                data: self.data.clone(),
                at: start,
                reads: Arc::clone(&self.reads),
            })
        }

        fn get_bytes(
            &self,
            start: u64,
            length: usize,
        ) -> datafusion::parquet::errors::Result<bytes::Bytes> {
            self.reads
                .lock()
                .unwrap()
                .push(start..start + length as u64);
            self.data.get_bytes(start, length)
        }
    }

    /// Bytes of `range` that `reads` cover.
    fn read_of(reads: &[Range<u64>], range: &Range<u64>) -> u64 {
        reads
            .iter()
            .map(|r| {
                r.end
                    .min(range.end)
                    .saturating_sub(r.start.max(range.start))
            })
            .sum()
    }

    /// Events `e0`.. as (id, payload) in row groups of `rows` rows, pages
    /// of 8 rows; the payloads of rows `big` hold `size` bytes.
    fn paged_file(
        groups: usize,
        rows: usize,
        big: &[usize],
        size: usize,
        props: datafusion::parquet::file::properties::WriterPropertiesBuilder,
    ) -> Vec<u8> {
        use datafusion::arrow::array::{ArrayRef, StringArray};
        let n = groups * rows;
        let ids: ArrayRef = Arc::new(StringArray::from_iter_values(
            (0..n).map(|i| format!("e{i}")),
        ));
        let payloads: ArrayRef = Arc::new(StringArray::from_iter_values((0..n).map(|i| {
            if big.contains(&i) {
                format!("\"{}\"", "x".repeat(size))
            } else {
                format!("{{\"i\":{i}}}")
            }
        })));
        let schema = Arc::new(Schema::new(vec![
            Field::new("id", DataType::Utf8, false),
            Field::new("payload", DataType::Utf8, false),
        ]));
        let props = props
            .set_max_row_group_row_count(Some(rows))
            .set_data_page_row_count_limit(8)
            .set_write_batch_size(8)
            .build();
        let mut out = Vec::new();
        let mut w = ArrowWriter::try_new(&mut out, schema.clone(), Some(props)).unwrap();
        w.write(&RecordBatch::try_new(schema, vec![ids, payloads]).unwrap())
            .unwrap();
        w.close().unwrap();
        out
    }

    /// The pages of leaf `leaf` in row group `group` of `data`.
    fn pages_in(data: &[u8], group: usize, leaf: usize) -> Vec<crate::ingest::parquet_pages::Page> {
        let bytes = bytes::Bytes::from(data.to_vec());
        let footer = read_footer(&bytes).unwrap();
        let chunk = footer.metadata().row_group(group).column(leaf);
        let mut pages = Vec::new();
        let read = |o: u64, l: usize| bytes.get_bytes(o, l).map_err(|e| e.to_string());
        crate::ingest::parquet_pages::walk(&read, chunk_range(chunk).unwrap(), 1 << 30, &mut |p| {
            pages.push(p);
            Ok(())
        })
        .unwrap();
        pages
    }

    /// The ids of decoded rows and the skipped runs (first row, rows,
    /// reason), checking that the pieces follow one another.
    fn ids_and_skips(pieces: Vec<Piece>) -> (Vec<String>, Vec<(u64, u64, String)>) {
        let (mut ids, mut skips, mut row) = (Vec::new(), Vec::new(), 0);
        for p in pieces {
            match p {
                Piece::Rows { first, batch } => {
                    assert_eq!(first, row);
                    row += batch.num_rows() as u64;
                    let a = batch.column(0).as_string::<i32>();
                    ids.extend(a.iter().map(|v| v.unwrap().to_string()));
                }
                Piece::Skipped {
                    first,
                    rows,
                    reason,
                } => {
                    assert_eq!(first, row);
                    row += rows;
                    skips.push((first, rows, reason));
                }
            }
        }
        (ids, skips)
    }

    fn small_limits() -> Limits {
        Limits {
            line: 1000,
            page: 4000,
            batch: 16 << 20,
        }
    }

    #[test]
    fn a_page_over_the_limit_is_skipped_unread_and_the_rest_decoded() {
        use datafusion::parquet::file::properties::WriterProperties;
        // Three groups of 40 rows; in the second, the page of rows 8..16
        // holds a 10 kB payload (row 50 of the file).
        let data = paged_file(
            3,
            40,
            &[50],
            10_000,
            WriterProperties::builder().set_dictionary_enabled(false),
        );
        let big = pages_in(&data, 1, 1)
            .into_iter()
            .find(|p| p.uncompressed > 10_000)
            .unwrap();
        let reads = Arc::new(Mutex::new(Vec::new()));
        let open = Whole(|| {
            Ok(Recorded {
                data: bytes::Bytes::from(data.clone()),
                reads: Arc::clone(&reads),
            })
        });
        let footer = read_footer(&open.reader(&[]).unwrap()).unwrap();
        for threads in [1, 3] {
            reads.lock().unwrap().clear();
            let (pieces, error) = decode(&footer, &open, threads, false, small_limits());
            assert_eq!(error, None);
            let (ids, skips) = ids_and_skips(pieces);
            let expected: Vec<String> = (0..120)
                .filter(|i| !(48..56).contains(i))
                .map(|i| format!("e{i}"))
                .collect();
            assert_eq!(ids, expected);
            assert_eq!(skips.len(), 1, "{skips:?}");
            let (first, rows, reason) = &skips[0];
            assert_eq!((*first, *rows), (48, 8));
            assert!(
                reason.starts_with("rows 49-56 (row group 1): its page of column payload holds")
                    && reason.contains("over the 4000-byte limit for one page"),
                "{reason}"
            );
            // Of the page's data, at most what came with its header.
            let data_range = big.offset + big.header_len..big.range().end;
            let read = read_of(&reads.lock().unwrap(), &data_range);
            assert!(read <= 128, "{read} bytes of the skipped page read");
        }
    }

    #[test]
    fn pages_needing_a_dictionary_over_the_limit_are_skipped_and_the_others_read_without_it() {
        use datafusion::parquet::file::properties::WriterProperties;
        // The 10 kB value goes into the second group's dictionary, which
        // then outgrows its 4 kB limit: the writer falls back to plain
        // pages. Rows in pages read through the dictionary are skipped;
        // those in plain pages read, the dictionary page never.
        let data = paged_file(
            3,
            40,
            &[50],
            10_000,
            WriterProperties::builder().set_dictionary_page_size_limit(4096),
        );
        let pages = pages_in(&data, 1, 1);
        let dictionary = pages[0].clone();
        assert_eq!(dictionary.kind, PageKind::Dictionary);
        let mut row = 40;
        let mut through_dictionary = Vec::new();
        for p in pages.iter().filter(|p| p.kind == PageKind::Data) {
            if p.dictionary_encoded {
                through_dictionary.extend(row..row + p.values);
            }
            row += p.values;
        }
        assert!(
            through_dictionary.contains(&50) && through_dictionary.len() < 40,
            "{through_dictionary:?}"
        );
        let reads = Arc::new(Mutex::new(Vec::new()));
        let open = Whole(|| {
            Ok(Recorded {
                data: bytes::Bytes::from(data.clone()),
                reads: Arc::clone(&reads),
            })
        });
        let footer = read_footer(&open.reader(&[]).unwrap()).unwrap();
        let (pieces, error) = decode(&footer, &open, 1, false, small_limits());
        assert_eq!(error, None);
        let (ids, skips) = ids_and_skips(pieces);
        let expected: Vec<String> = (0..120)
            .filter(|i| !through_dictionary.contains(i))
            .map(|i| format!("e{i}"))
            .collect();
        assert_eq!(ids, expected);
        let (first, rows, reason) = &skips[0];
        assert_eq!((*first, *rows), (40, through_dictionary.len() as u64));
        assert!(
            reason.starts_with(&format!(
                "rows 41-{} (row group 1): its pages of column payload need its dictionary page, \
                 which holds",
                40 + rows
            )),
            "{reason}"
        );
        let data_range = dictionary.offset + dictionary.header_len..dictionary.range().end;
        let read = read_of(&reads.lock().unwrap(), &data_range);
        assert!(read <= 128, "{read} bytes of the dictionary page read");
    }

    #[test]
    fn an_objects_chunk_too_large_to_fetch_is_fetched_without_its_skipped_page() {
        use crate::object_storage::RemoteObject;
        use datafusion::parquet::file::properties::WriterProperties;
        use object_store::{ObjectStore, ObjectStoreExt, path::Path as ObjectPath};
        // Incompressible pages: the payload chunk is larger than a line, so
        // its page headers are read one by one and only its other pages
        // fetched; the object is gone by the time they are decoded.
        let data = paged_file(
            3,
            40,
            &[50],
            10_000,
            WriterProperties::builder().set_dictionary_enabled(false),
        );
        let big = pages_in(&data, 1, 1)
            .into_iter()
            .find(|p| p.uncompressed > 10_000)
            .unwrap();
        let store: Arc<dyn ObjectStore> = Arc::new(object_store::memory::InMemory::new());
        let location = ObjectPath::from("events.parquet");
        let object = RemoteObject {
            store: Arc::clone(&store),
            location: location.clone(),
            size: data.len() as u64,
            url: "memory:///events.parquet".into(),
        };
        let runtime = tokio::runtime::Runtime::new().unwrap();
        runtime
            .block_on(store.put(&location, data.clone().into()))
            .unwrap();
        let footer = read_footer(&object).unwrap();

        struct Gone<'a> {
            remote: Remote<'a>,
            asked: Mutex<Vec<Range<u64>>>,
            delete: &'a (dyn Fn() + Sync),
        }
        impl Source for Gone<'_> {
            type Reader = Fetched;
            fn whole(&self, len: u64) -> bool {
                self.remote.whole(len)
            }
            fn read_at(&self, offset: u64, len: usize) -> Result<bytes::Bytes, String> {
                self.asked.lock().unwrap().push(offset..offset + len as u64);
                self.remote.read_at(offset, len)
            }
            fn reader(&self, ranges: &[Range<u64>]) -> Result<Fetched, String> {
                self.asked.lock().unwrap().extend(ranges.iter().cloned());
                let fetched = self.remote.reader(ranges);
                (self.delete)();
                fetched
            }
        }
        let delete = || {
            runtime.block_on(store.delete(&location)).unwrap();
        };
        let gone = Gone {
            remote: Remote {
                object: &object,
                whole_up_to: small_limits().line,
            },
            asked: Mutex::new(Vec::new()),
            delete: &delete,
        };
        let (pieces, error) = read_span(&footer, &gone, &[1], 40, false, small_limits());
        assert_eq!(error, None);
        let (ids, skips) = ids_and_skips_from(pieces, 40);
        assert_eq!(ids.len(), 32);
        assert_eq!((skips[0].0, skips[0].1), (48, 8));
        let data_range = big.offset + big.header_len..big.range().end;
        let asked = read_of(&gone.asked.lock().unwrap(), &data_range);
        assert!(asked <= 128, "{asked} bytes of the skipped page asked for");
    }

    /// [`ids_and_skips`] of a span from file row `first`.
    fn ids_and_skips_from(
        pieces: Vec<Piece>,
        first: u64,
    ) -> (Vec<String>, Vec<(u64, u64, String)>) {
        let shifted = pieces
            .into_iter()
            .map(|p| match p {
                Piece::Rows { first: f, batch } => Piece::Rows {
                    first: f - first,
                    batch,
                },
                Piece::Skipped {
                    first: f,
                    rows,
                    reason,
                } => Piece::Skipped {
                    first: f - first,
                    rows,
                    reason,
                },
            })
            .collect();
        let (ids, skips) = ids_and_skips(shifted);
        (
            ids,
            skips
                .into_iter()
                .map(|(f, r, why)| (f + first, r, why))
                .collect(),
        )
    }
}
