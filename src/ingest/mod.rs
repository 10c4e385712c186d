//! Ingest: inputs -> normalized Arrow tables `events`, `evidence`, `bad_lines`.

pub(crate) mod authentic;
pub mod canonical;
mod category_column;
pub mod dedup;
pub mod evidence;
pub mod identity;
pub mod inputs;
mod members;
pub mod ndjson;
pub mod normalize;
mod number_column;
pub mod parquet;
mod parquet_lines;
mod parquet_pages;
mod parquet_rows;
pub mod payload;
pub mod payload_schema;
mod raw_json;
pub mod row;
pub mod runs;
pub mod schema;
mod text_column;
pub mod time;
pub mod token;

use crate::protocol::TokenFormat;
use crate::report::model::InputSummary;
use datafusion::arrow::array::{FixedSizeBinaryBuilder, Int64Builder, StringBuilder};
use datafusion::arrow::record_batch::RecordBatch;
use inputs::{Input, InputError, LogFormat, Skipped};
use ndjson::{BadLine, ParsedChunk};
use normalize::NormalizeOptions;
use row::ChunkShape;
use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, mpsc};

/// Rejected lines listed per input by default (in `bad_lines` and the
/// report); the rest are counted, so that a log of junk cannot hide an
/// event among them or fill memory with them.
pub const DEFAULT_MAX_BAD_LINES: usize = 1000;

/// How to read the inputs.
#[derive(Debug, Clone)]
pub struct IngestOptions {
    pub token_format: TokenFormat,
    pub max_line_bytes: usize,
    /// Parser threads; 0 = one per core.
    pub threads: usize,
    /// Keep rejected lines verbatim (for `--bad-lines FILE`).
    pub keep_bad_raw: bool,
    /// Rejected lines listed per input (in `bad_lines` and the report;
    /// default [`DEFAULT_MAX_BAD_LINES`]); the rest are counted.
    /// `--bad-lines FILE` still gets every one.
    pub max_bad_lines: usize,
    /// Accept a directory or pattern without logs (`--allow-empty`).
    pub allow_empty: bool,
    /// List a log that a walk or pattern finds but cannot read as skipped,
    /// instead of failing (`--allow-unreadable`).
    pub allow_unreadable: bool,
    /// Write the event rows to files here as they are read, holding only
    /// the redelivery table in memory; `Ingested::spilled` then holds them
    /// (for `convert` under a memory limit).
    pub spill_dir: Option<PathBuf>,
    /// Bytes read so far across inputs, for a progress bar.
    pub progress: Arc<AtomicU64>,
    /// Set by the caller to stop early: chunks still cut are not parsed.
    pub interrupt: crate::interrupt::Interrupt,
    /// The key that authenticates files in `convert`'s layout; a file it
    /// does not authenticate is read as Parquet from elsewhere.
    pub store_key: crate::store_key::KeySource,
    /// Bytes that compressed inputs may decode to before the read stops
    /// with [`IngestFailure::OverBudget`] (a loaded read whose compressed
    /// input expands past what its size promised; `tables` then reads it
    /// to disk). None: no bound.
    pub decoded_budget: Option<u64>,
}

impl Default for IngestOptions {
    fn default() -> Self {
        IngestOptions {
            token_format: TokenFormat::Opaque,
            max_line_bytes: ndjson::DEFAULT_MAX_LINE_BYTES,
            threads: 0,
            keep_bad_raw: false,
            max_bad_lines: DEFAULT_MAX_BAD_LINES,
            allow_empty: false,
            allow_unreadable: false,
            spill_dir: None,
            progress: Arc::default(),
            interrupt: Default::default(),
            store_key: crate::store_key::KeySource::lazy(),
            decoded_budget: None,
        }
    }
}

impl IngestOptions {
    /// Parser threads to start.
    pub fn worker_threads(&self) -> usize {
        match self.threads {
            0 => std::thread::available_parallelism().map_or(2, |n| n.get()),
            n => n,
        }
    }

    /// What a chunk's parse keeps of its rejected lines.
    pub fn chunk_limits(&self) -> ndjson::ChunkLimits {
        ndjson::ChunkLimits {
            max_line: self.max_line_bytes,
            max_bad: self.max_bad_lines,
            keep_raw: self.keep_bad_raw,
        }
    }
}

/// The normalized tables and the accounting of how they were made.
#[derive(Default)]
pub struct Ingested {
    pub events: Vec<RecordBatch>,
    pub evidence: Vec<RecordBatch>,
    /// With `IngestOptions::spill_dir`: the event rows in order, in their
    /// spill files (`events` and `evidence` are then empty; each group's
    /// evidence is `evidence::explode` of its rows).
    pub spilled: Vec<dedup::Group>,
    pub bad_lines: Vec<RecordBatch>,
    pub inputs: Vec<InputSummary>,
    /// Paths inside directories or globs that could not be used.
    pub skipped: Vec<Skipped>,
}

impl Ingested {
    pub fn total(&self) -> InputSummary {
        InputSummary::total(&self.inputs)
    }
}

/// Expand the paths and read every input.
pub fn ingest(paths: &[PathBuf], opts: &IngestOptions) -> Result<Ingested, InputError> {
    let (inputs, skipped) = inputs::expand(paths, opts.allow_empty, opts.allow_unreadable)?;
    ingest_inputs(&inputs, skipped, opts)
}

/// Read already expanded inputs (held in memory: `opts.spill_dir` unset).
pub fn ingest_inputs(
    inputs: &[Input],
    skipped: Vec<Skipped>,
    opts: &IngestOptions,
) -> Result<Ingested, InputError> {
    ingest_inputs_into(inputs, skipped, opts, None).map_err(|e| match e {
        IngestFailure::Inputs(e) => e,
        write => unreachable!("no bad-lines writer, spill directory or budget, yet: {write}"),
    })
}

/// Why reading inputs stopped: not the inputs (their faults are noted per
/// input), but where their rows or rejected lines were being written.
#[derive(Debug, thiserror::Error)]
pub enum IngestFailure {
    /// Writing a rejected line to the `--bad-lines` output failed.
    #[error("{0}")]
    BadLinesOut(std::io::Error),
    /// Writing event rows to, or reading them back from, the spill directory.
    #[error(
        "cannot write the event rows to the spill directory {}: {error}; free space there or \
         choose another with --spill-dir",
        crate::ingest::inputs::shown_path(.dir)
    )]
    Spill { dir: PathBuf, error: std::io::Error },
    /// The inputs cannot be read together (convert runs that overlap).
    #[error(transparent)]
    Inputs(#[from] InputError),
    /// Compressed inputs decoded to more than `decoded_budget`; the read
    /// stopped there, and nothing of it is kept.
    #[error("compressed input decoded to more than {0} bytes")]
    OverBudget(u64),
}

/// Read already expanded inputs, writing every rejected line verbatim to
/// `bad_out` as it is found, in input order (with `keep_bad_raw`). Fails
/// only when writing there (or to the spill directory) fails.
pub fn ingest_inputs_into(
    inputs: &[Input],
    skipped: Vec<Skipped>,
    opts: &IngestOptions,
    mut bad_out: Option<&mut dyn std::io::Write>,
) -> Result<Ingested, IngestFailure> {
    let threads = opts.worker_threads();
    let started = std::time::Instant::now();
    let mut read_errors: Vec<Option<String>> = vec![None; inputs.len()];
    let mut chunks: Vec<ParsedChunk> = Vec::new();

    // Parquet inputs are read first: they may fix the seq space (see parquet.rs).
    let parquet = parquet::read_all(inputs, opts);
    if let Some(overlap) = parquet.overlap {
        return Err(InputError::OverlappingRuns(overlap).into());
    }
    if let Some(forged) = parquet.forged {
        return Err(InputError::Unauthentic(forged).into());
    }
    let file_offset = parquet.next_file_idx;
    for (idx, r) in parquet.errors {
        read_errors[idx] = Some(match read_errors[idx].take() {
            Some(before) => format!("{before}; {r}"),
            None => r,
        });
    }
    chunks.extend(parquet.chunks);

    // NDJSON: one reader thread cuts chunks, workers parse them.
    let ndjson_inputs: Vec<(usize, &Input)> = inputs
        .iter()
        .enumerate()
        .filter(|(_, i)| i.format != LogFormat::Parquet)
        .collect();
    let norm = NormalizeOptions {
        token_format: opts.token_format,
    };
    let names: Vec<Arc<str>> = inputs
        .iter()
        .map(|i| Arc::from(i.display.as_str()))
        .collect();
    let pool = ndjson::BufferPool::default();
    // Parquet chunks first, then NDJSON chunks in the order they were cut.
    chunks.sort_by_key(|c| (c.file_idx, c.chunk_idx));
    let parquet_events: usize = chunks.iter().map(|c| c.keys.len()).sum();
    let expected = expected_events(inputs) + parquet_events;
    let mut deduper = match &opts.spill_dir {
        // Bounded memory matters more there than one copy of the table as
        // it grows: an estimate 20% high can double it (a power of two).
        Some(dir) => dedup::Deduper::spilling_to(expected / 2, dir),
        None => dedup::Deduper::with_capacity(expected),
    };
    // Rejected lines still to be listed, per file index.
    let mut listable = BadLineQuota::new(opts.max_bad_lines);
    let mut write_error: Option<std::io::Error> = None;
    for chunk in &mut chunks {
        deduper.push(chunk);
        listable.apply(chunk);
    }
    let over_budget = std::sync::atomic::AtomicBool::new(false);
    std::thread::scope(|scope| {
        let (chunk_tx, chunk_rx) = mpsc::sync_channel::<(u64, ndjson::Chunk)>(threads * 2);
        let chunk_rx = Arc::new(Mutex::new(chunk_rx));
        // Bounded, so that parsers wait when the rows are taken in more
        // slowly than they are parsed (writing them to the spill directory):
        // parsed chunks do not pile up in memory.
        let (out_tx, out_rx) = mpsc::sync_channel::<(u64, ParsedChunk)>(threads * 2);
        for _ in 0..threads {
            let rx = Arc::clone(&chunk_rx);
            let tx = out_tx.clone();
            let (names, ndjson_inputs, pool) = (&names, &ndjson_inputs, &pool);
            scope.spawn(move || {
                let mut shape = ChunkShape::default();
                loop {
                    let next = rx.lock().map(|r| r.recv());
                    let Ok(Ok((order, chunk))) = next else { break };
                    if opts.interrupt.is_set() {
                        pool.give(chunk.data);
                        continue;
                    }
                    let input_idx = ndjson_inputs[(chunk.file_idx - file_offset) as usize].0;
                    let name = Arc::clone(&names[input_idx]);
                    let parsed =
                        ndjson::parse_chunk(&chunk, name, opts.chunk_limits(), norm, &mut shape);
                    pool.give(chunk.data);
                    if tx.send((order, parsed)).is_err() {
                        break;
                    }
                }
            });
        }
        drop(out_tx);
        let reader = scope.spawn(|| {
            let mut errors = Vec::new();
            let mut order = 0u64;
            let mut decoded = 0u64;
            for (n, (input_idx, input)) in ndjson_inputs.iter().enumerate() {
                let file_idx = file_offset + n as u32;
                let compressed = matches!(input.format, LogFormat::Gzip | LogFormat::Zstd);
                let mut send = |c: ndjson::Chunk| {
                    if opts.interrupt.is_set() || over_budget.load(Ordering::Relaxed) {
                        return;
                    }
                    // Metered as it decodes: a compressed file's size says
                    // nothing of what it expands to.
                    if let (true, Some(budget)) = (compressed, opts.decoded_budget) {
                        decoded += c.data.len() as u64;
                        if decoded > budget {
                            over_budget.store(true, Ordering::Relaxed);
                            return;
                        }
                    }
                    // Fails only once every worker has stopped, which only
                    // a panic does: the scope then ends in that panic.
                    let _ = chunk_tx.send((order, c));
                    order += 1;
                };
                let err = ndjson::read_chunks(
                    input,
                    file_idx,
                    opts.max_line_bytes,
                    Arc::clone(&opts.progress),
                    &pool,
                    &mut send,
                    &|| opts.interrupt.is_set() || over_budget.load(Ordering::Relaxed),
                );
                errors.push((*input_idx, err));
            }
            drop(chunk_tx);
            errors
        });
        // Collapse redeliveries as chunks arrive, in the order they were
        // cut; chunks parsed ahead of their turn wait here.
        let mut waiting = std::collections::BTreeMap::new();
        let mut next = 0u64;
        let mut take = |mut parsed: ParsedChunk| {
            take_chunk(
                &mut parsed,
                &mut deduper,
                &mut listable,
                &mut bad_out,
                &mut write_error,
            );
            chunks.push(parsed);
        };
        for (order, parsed) in out_rx.iter() {
            waiting.insert(order, parsed);
            while let Some(parsed) = waiting.remove(&next) {
                take(parsed);
                next += 1;
            }
        }
        // Only a worker that died could leave a gap; keep what came anyway.
        for (_, parsed) in waiting {
            take(parsed);
        }
        for (idx, err) in reader.join().expect("reader thread does not panic") {
            read_errors[idx] = err;
        }
    });
    if let (true, Some(budget)) = (over_budget.into_inner(), opts.decoded_budget) {
        return Err(IngestFailure::OverBudget(budget));
    }
    if let Some(e) = write_error {
        return Err(IngestFailure::BadLinesOut(e));
    }
    crate::progress::timing("ingest", "parse", started);
    let started = std::time::Instant::now();
    let deduped = deduper.finish().map_err(|error| IngestFailure::Spill {
        dir: opts.spill_dir.clone().unwrap_or_default(),
        error,
    })?;
    crate::progress::timing("ingest", "dedup", started);
    // Which input each file index belongs to.
    let input_of = |file_idx: u32| -> usize {
        if file_idx >= file_offset {
            ndjson_inputs[(file_idx - file_offset) as usize].0
        } else {
            parquet::input_of(inputs, file_idx)
        }
    };
    Ok(assemble(
        inputs,
        skipped,
        chunks,
        deduped,
        read_errors,
        input_of,
    ))
}

/// One parsed chunk, in input order: its redeliveries collapsed, its
/// rejected lines written out and capped.
fn take_chunk(
    parsed: &mut ParsedChunk,
    deduper: &mut dedup::Deduper,
    listable: &mut BadLineQuota,
    bad_out: &mut Option<&mut dyn std::io::Write>,
    write_error: &mut Option<std::io::Error>,
) {
    deduper.push(parsed);
    listable.apply(parsed);
    let raw = std::mem::take(&mut parsed.bad_raw);
    if let Some(out) = bad_out.as_deref_mut()
        && write_error.is_none()
        && let Err(e) = out.write_all(&raw)
    {
        *write_error = Some(e);
    }
}

/// The first `max` rejected lines of each input are listed; the rest only
/// counted.
struct BadLineQuota {
    max: usize,
    listed: std::collections::HashMap<u32, usize>,
}

impl BadLineQuota {
    fn new(max: usize) -> Self {
        BadLineQuota {
            max,
            listed: Default::default(),
        }
    }

    fn apply(&mut self, chunk: &mut ParsedChunk) {
        let listed = self.listed.entry(chunk.file_idx).or_default();
        let room = self.max - *listed;
        if chunk.bad.len() > room {
            chunk.bad_unlisted += (chunk.bad.len() - room) as u64;
            chunk.bad.truncate(room);
        }
        *listed += chunk.bad.len();
    }
}

/// Distinct events to expect, for sizing the redelivery table once: about
/// one per 400 bytes of NDJSON, compressed input counting 5x. Too large a
/// guess costs fresh memory; too small, the table copies itself once.
fn expected_events(inputs: &[Input]) -> usize {
    let bytes: u64 = inputs
        .iter()
        .map(|i| match i.format {
            LogFormat::Gzip | LogFormat::Zstd => i.bytes.saturating_mul(5),
            LogFormat::Parquet => 0,
            _ => i.bytes,
        })
        .sum();
    (bytes / 400).min(1 << 28) as usize
}

fn assemble(
    inputs: &[Input],
    skipped: Vec<Skipped>,
    chunks: Vec<ParsedChunk>,
    deduped: dedup::Outcome,
    read_errors: Vec<Option<String>>,
    input_of: impl Fn(u32) -> usize,
) -> Ingested {
    let mut summaries: Vec<InputSummary> = inputs
        .iter()
        .map(|i| InputSummary {
            path: i.display.clone(),
            format: i.format.name().into(),
            bytes: i.bytes,
            ..Default::default()
        })
        .collect();
    for (i, e) in read_errors.into_iter().enumerate() {
        summaries[i].error = e;
    }
    let mut bad: Vec<(&str, &BadLine)> = Vec::new();
    for (chunk, counts) in chunks.iter().zip(&deduped.per_chunk) {
        let s = &mut summaries[input_of(chunk.file_idx)];
        s.lines += chunk.lines;
        s.blank_lines += chunk.blank;
        s.events += counts.events;
        s.conflicting_copies += counts.versions;
        s.redeliveries += counts.redeliveries + chunk.collapsed;
        s.bad_lines += chunk.bad_count();
        s.bad_lines_unlisted += chunk.bad_unlisted;
        let name = inputs[input_of(chunk.file_idx)].display.as_str();
        bad.extend(
            chunk
                .bad
                .iter()
                .map(|b| (b.src_file.as_deref().unwrap_or(name), b)),
        );
    }
    let events: Vec<RecordBatch> = deduped
        .batches
        .into_iter()
        .filter(|b| b.num_rows() > 0)
        .collect();
    let spilled = deduped.groups;
    let started = std::time::Instant::now();
    let evidence = events
        .iter()
        .map(evidence::explode)
        .filter(|b| b.num_rows() > 0)
        .collect();
    crate::progress::timing("ingest", "evidence", started);
    Ingested {
        events,
        evidence,
        spilled,
        bad_lines: bad_lines_batch(&bad).into_iter().collect(),
        inputs: summaries,
        skipped,
    }
}

fn bad_lines_batch(bad: &[(&str, &BadLine)]) -> Option<RecordBatch> {
    if bad.is_empty() {
        return None;
    }
    let mut seq = Int64Builder::new();
    let mut file = StringBuilder::new();
    let mut line = Int64Builder::new();
    let mut reason = StringBuilder::new();
    let mut excerpt = StringBuilder::new();
    let mut id = StringBuilder::new();
    let mut type_ = StringBuilder::new();
    let mut digest = FixedSizeBinaryBuilder::new(16);
    for (name, b) in bad {
        seq.append_value(b.seq);
        file.append_value(name);
        line.append_value(b.line as i64);
        reason.append_value(&b.reason);
        excerpt.append_value(&b.excerpt);
        id.append_option(b.id.as_deref());
        type_.append_option(b.type_.as_deref());
        match &b.digest {
            Some(d) => digest.append_value(d).expect("16 bytes"),
            None => digest.append_null(),
        }
    }
    let batch = RecordBatch::try_new(
        schema::BAD_LINES.clone(),
        vec![
            Arc::new(seq.finish()),
            Arc::new(file.finish()),
            Arc::new(line.finish()),
            Arc::new(reason.finish()),
            Arc::new(excerpt.finish()),
            Arc::new(id.finish()),
            Arc::new(type_.finish()),
            Arc::new(digest.finish()),
        ],
    )
    .expect("the builders match the bad_lines schema: every required column has a value");
    Some(batch)
}
