//! Collapsing redeliveries (docs/protocol.md, identity): the same
//! id (its exact text) with the same content (the same JSON value) is one
//! event, whose `redeliveries` counts the repeats; the same id with other
//! content keeps every version (`version` 1, 2, ... by created_at, then
//! input order), which the integrity rule and the readings of later
//! versions (`rules::readings`) read.
//!
//! Rows are looked up by a keyed hash of their id and by their content
//! digest. Both only narrow the search: a row whose id key and digest match
//! a kept row's is compared with that row, id text and every column (JSON
//! as values), before it is dropped as a redelivery. Where the kept row is
//! in memory that happens at once; where it was spilled to disk, when the
//! dedup finishes (the row is kept until then). Versions are bucketed by
//! digest, so N versions of one id cost O(N), not O(N^2).

use super::canonical::{self, Canonicalizer};
use super::ndjson::ParsedChunk;
use super::normalize::Parsed;
use super::row::{drop_rows, share_empty_columns};
use super::schema::{EVENTS, JSON_COLUMNS, PROVENANCE, events_col};
use crate::signals::Temp;
use datafusion::arrow::array::{
    Array, ArrayRef, AsArray, FixedSizeBinaryArray, Int32Array, Int64Array, StringArray,
    UInt32Array, make_comparator,
};
use datafusion::arrow::compute::{SortOptions, concat_batches, take_record_batch};
use datafusion::arrow::ipc::CompressionType;
use datafusion::arrow::ipc::reader::FileReader;
use datafusion::arrow::ipc::writer::{FileWriter, IpcWriteOptions};
use datafusion::arrow::record_batch::RecordBatch;
use foldhash::HashMap;
use std::collections::hash_map::Entry as Slot;
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// Where a kept row is: its group, and its position among the group's
/// kept rows.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
struct At {
    group: u32,
    row: u32,
}

/// No index into `Deduper::seen`.
const ALONE: u32 = u32::MAX;

/// The table's entry per id key: the first row kept under it, its digest's
/// first bytes, and where the rest are once there is more than one.
#[derive(Clone, Copy)]
struct Entry {
    at: At,
    digest: u64,
    more: u32,
}

/// The rows kept under one id key once there are several (versions of one
/// id, or, rarely, ids sharing the key).
#[derive(Default)]
struct Seen {
    /// In input order, with the first bytes of each row's digest.
    rows: Vec<(At, u64)>,
    /// Digest -> positions in `rows`, once there are many of them.
    by_digest: HashMap<u64, Vec<u32>>,
}

/// The table's digest of a row whose line's digest is unknown: stored by a
/// `convert` of layout 1 or 2, which kept no line text to make it of
/// (`row_keys`). Such a row is compared with every row of its id. (A line
/// whose digest happens to start with 8 zero bytes is compared more, never
/// less.)
const UNKNOWN: u64 = 0;

/// Up to this many rows under one key are scanned; past it, looked up.
const SCAN: usize = 8;

impl Seen {
    fn add(&mut self, at: At, digest: u64) {
        let n = self.rows.len() as u32;
        self.rows.push((at, digest));
        if self.rows.len() > SCAN {
            if self.by_digest.is_empty() {
                for (i, (_, d)) in self.rows.iter().enumerate() {
                    self.by_digest.entry(*d).or_default().push(i as u32);
                }
            } else {
                self.by_digest.entry(digest).or_default().push(n);
            }
        }
    }

    /// The rows with this digest, in input order.
    /// The rows with this digest, in input order, and those whose line's
    /// digest is unknown (`UNKNOWN`), which any row may equal.
    fn with_digest(&self, digest: u64) -> Vec<At> {
        if self.by_digest.is_empty() || digest == UNKNOWN {
            return (self.rows.iter())
                .filter(|(_, d)| *d == digest || *d == UNKNOWN || digest == UNKNOWN)
                .map(|(at, _)| *at)
                .collect();
        }
        let mut ix: Vec<u32> = [digest, UNKNOWN]
            .iter()
            .flat_map(|d| self.by_digest.get(d).into_iter().flatten().copied())
            .collect();
        ix.sort_unstable();
        ix.into_iter().map(|i| self.rows[i as usize].0).collect()
    }
}

/// A row kept as the presumed repeat of a row that was spilled: compared
/// when the dedup finishes.
struct Pending {
    at: At,
    of: At,
}

/// How one chunk's lines were counted.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Counts {
    /// Distinct events: the first version of each id.
    pub events: u64,
    /// Later versions of an id (other contents under an id already seen).
    pub versions: u64,
    /// Exact repeats, collapsed.
    pub redeliveries: u64,
}

/// Per chunk: rows kept, and the events/redeliveries attributed to its input.
pub struct Outcome {
    /// The rows, when they were held in memory.
    pub batches: Vec<RecordBatch>,
    /// The rows, in order, when groups of them were spilled (`batches` is
    /// then empty): each read back when its turn comes.
    pub groups: Vec<Group>,
    /// Per chunk (same order as given).
    pub per_chunk: Vec<Counts>,
}

/// The rows of one or more consecutive chunks once their redeliveries are
/// dropped. Small chunks (a short file is one) share a group: a batch per
/// file cost about 55 KB of column headers each, held to the end, and every
/// query a pass per batch.
struct Kept {
    /// The group's rows, once it is closed (empty once spilled).
    events: RecordBatch,
    /// Rows in the group once closed (also when spilled).
    rows: usize,
    /// The file holding the group's rows, when they were spilled.
    spilled: Option<Temp>,
    /// Rows to drop from the spilled rows when they are read back
    /// (versions folded into an earlier one).
    keep: Option<Vec<bool>>,
    /// The chunks' rows while it is open.
    parts: Vec<RecordBatch>,
    /// (first row, chunk index) of each chunk in the group.
    chunks: Vec<(u32, u32)>,
    redeliveries: Vec<i64>,
    version: Vec<i32>,
}

/// A group takes chunks while it holds fewer rows than this.
const GROUP_ROWS: usize = 8192;
/// ... and fewer chunks than this (each part held costs its headers).
const GROUP_PARTS: usize = 256;

impl Kept {
    fn open() -> Kept {
        Kept {
            events: RecordBatch::new_empty(EVENTS.clone()),
            rows: 0,
            spilled: None,
            keep: None,
            parts: Vec::new(),
            chunks: Vec::new(),
            redeliveries: Vec::new(),
            version: Vec::new(),
        }
    }

    /// The chunk the group's row `row` came from.
    fn chunk_of(&self, row: u32) -> usize {
        let at = self.chunks.partition_point(|&(first, _)| first <= row);
        self.chunks[at - 1].1 as usize
    }

    fn is_open(&self) -> bool {
        !self.parts.is_empty()
    }

    /// Lay the parts out as one batch.
    fn close(&mut self) {
        if self.parts.len() == 1 {
            self.events = self.parts.pop().expect("one part");
        } else if !self.parts.is_empty() {
            let parts = std::mem::take(&mut self.parts);
            let events = concat_batches(&EVENTS, &parts).expect("parts have the events schema");
            drop(parts);
            self.events = share_empty_columns(events);
        }
        self.rows = self.events.num_rows();
        self.version = vec![1; self.redeliveries.len()];
    }

    /// Write the closed group's rows to a file in `dir` and let them go.
    fn spill(&mut self, dir: &Path) -> std::io::Result<()> {
        let temp = crate::signals::temp_in(dir)?;
        let options = IpcWriteOptions::default()
            .try_with_compression(Some(CompressionType::LZ4_FRAME))
            .map_err(std::io::Error::other)?;
        let out = std::io::BufWriter::new(temp.reopen()?);
        let mut w = FileWriter::try_new_with_options(out, &EVENTS, options)
            .map_err(std::io::Error::other)?;
        w.write(&self.events).map_err(std::io::Error::other)?;
        w.finish().map_err(std::io::Error::other)?;
        self.events = RecordBatch::new_empty(EVENTS.clone());
        self.spilled = Some(temp);
        Ok(())
    }

    /// The group's rows as written, read back if spilled.
    fn load(&self) -> std::io::Result<RecordBatch> {
        let Some(temp) = &self.spilled else {
            return Ok(self.events.clone());
        };
        let file = std::io::BufReader::new(temp.reopen()?);
        let reader = FileReader::try_new(file, None).map_err(std::io::Error::other)?;
        let batches = reader
            .collect::<Result<Vec<_>, _>>()
            .map_err(std::io::Error::other)?;
        concat_batches(&EVENTS, &batches).map_err(std::io::Error::other)
    }
}

/// A closed group of event rows as `finish` leaves it: laid out, or in its
/// spill file with the final counts to attach when it is read back.
pub struct Group(Kept);

impl Group {
    /// The group's rows with their final redelivery counts and versions.
    pub fn load(self) -> std::io::Result<RecordBatch> {
        let k = self.0;
        let mut events = k.load()?;
        if let Some(keep) = k.keep {
            let n = k.redeliveries.len();
            events = drop_rows(events, keep, n);
        }
        let batch = with_column(
            &events,
            "redeliveries",
            Arc::new(Int64Array::from(k.redeliveries)),
        );
        Ok(with_column(
            &batch,
            "version",
            Arc::new(Int32Array::from(k.version)),
        ))
    }
}

/// Consecutive groups of fewer than `GROUP_ROWS` rows in all, as one batch
/// each (groups closed at `GROUP_PARTS` chunks of one line each are small).
fn coalesce(batches: Vec<RecordBatch>) -> Vec<RecordBatch> {
    let mut out = Vec::new();
    let mut run: Vec<RecordBatch> = Vec::new();
    let mut rows = 0;
    let flush = |run: &mut Vec<RecordBatch>, out: &mut Vec<RecordBatch>| match run.len() {
        0 => {}
        1 => out.extend(run.pop()),
        _ => {
            let all = concat_batches(&EVENTS, run.iter()).expect("batches have the events schema");
            run.clear();
            out.push(share_empty_columns(all));
        }
    };
    for b in batches {
        if b.num_rows() == 0 {
            continue;
        }
        if rows + b.num_rows() > GROUP_ROWS {
            flush(&mut run, &mut out);
            rows = 0;
        }
        if b.schema().fields() != EVENTS.fields() {
            // Kept apart, in order.
            flush(&mut run, &mut out);
            rows = 0;
            out.push(b);
            continue;
        }
        rows += b.num_rows();
        run.push(b);
    }
    flush(&mut run, &mut out);
    out
}

/// Collapses redeliveries chunk by chunk, in input order, as chunks come
/// from the parsers: whether a row is kept depends only on the rows before
/// it, so each chunk is laid out without its redeliveries while later
/// chunks are still being parsed. Afterwards only redelivery counts and
/// version numbers change, and rows presumed repeats of spilled rows go
/// once confirmed.
pub struct Deduper {
    table: HashMap<u64, Entry>,
    seen: Vec<Seen>,
    pending: Vec<Pending>,
    kept: Vec<Kept>,
    per_chunk: Vec<Counts>,
    canonical: Canonicalizer,
    /// Where closed groups are written so that memory holds only the
    /// tables of ids and counts (None: they stay in memory).
    spill_dir: Option<PathBuf>,
    /// The first failure to spill; later groups stay in memory.
    spill_error: Option<std::io::Error>,
}

/// The first 8 bytes of a digest, as the table keeps it.
fn short(digest: &[u8; 16]) -> u64 {
    u64::from_le_bytes(digest[..8].try_into().expect("8 bytes"))
}

impl Deduper {
    /// `events` is an estimate of the distinct events to come: growing a
    /// table of millions of ids copies it each time.
    pub fn with_capacity(events: usize) -> Self {
        Deduper {
            table: HashMap::with_capacity_and_hasher(events, Default::default()),
            seen: Vec::new(),
            pending: Vec::new(),
            kept: Vec::new(),
            per_chunk: Vec::new(),
            canonical: Canonicalizer::default(),
            spill_dir: None,
            spill_error: None,
        }
    }

    /// As `with_capacity`, writing each closed group of rows to a file in
    /// `dir`: memory then holds about 50 bytes per distinct event (the id
    /// table, counts and versions) instead of the rows.
    pub fn spilling_to(events: usize, dir: &Path) -> Self {
        Deduper {
            spill_dir: Some(dir.to_path_buf()),
            ..Deduper::with_capacity(events)
        }
    }

    /// Close group `gi`, and spill it when spilling (once: a closed group
    /// stays as it is).
    fn close_group(&mut self, gi: usize) {
        let group = &mut self.kept[gi];
        if !group.is_open() {
            return;
        }
        group.close();
        if let Some(dir) = &self.spill_dir
            && self.spill_error.is_none()
            && group.rows > 0
            && let Err(e) = group.spill(dir)
        {
            self.spill_error = Some(e);
        }
    }
}

/// A kept row of an earlier chunk, when it is in memory.
fn row_in_memory(kept: &[Kept], at: At) -> Option<(&RecordBatch, usize)> {
    let group = kept.get(at.group as usize)?;
    if group.is_open() {
        let part = group.chunks.partition_point(|&(first, _)| first <= at.row) - 1;
        let first = group.chunks[part].0;
        return Some((&group.parts[part], (at.row - first) as usize));
    }
    (group.spilled.is_none()).then_some((&group.events, at.row as usize))
}

impl Deduper {
    /// Take the next chunk in input order: its events and keys move in,
    /// the rest of it (lines, bad lines) stays with the caller.
    pub fn push(&mut self, chunk: &mut ParsedChunk) {
        let rows = std::mem::replace(&mut chunk.events, super::row::ChunkRows::Taken);
        let keys = std::mem::take(&mut chunk.keys);
        let alone = !rows.is_events_layout();
        let joins = !alone
            && self
                .kept
                .last()
                .is_some_and(|g| g.is_open() && g.redeliveries.len() + keys.len() < GROUP_ROWS);
        if !joins {
            if !self.kept.is_empty() {
                self.close_group(self.kept.len() - 1);
            }
            self.kept.push(Kept::open());
        }
        let gi = self.kept.len() - 1;
        let first_row = self.kept[gi].redeliveries.len() as u32;
        let chunk_idx = self.per_chunk.len() as u32;
        self.kept[gi].chunks.push((first_row, chunk_idx));
        // Laid out whole: a redelivery is compared with its original on the
        // rows before it goes (a chunk without one is not copied).
        let full = rows.finish();
        let stored = stored_redeliveries(&full);
        let mut keep = Vec::with_capacity(keys.len());
        // Row in `full` of each row kept so far from this chunk.
        let mut kept_here: Vec<u32> = Vec::with_capacity(keys.len());
        let mut counts = Counts::default();
        for (ri, key) in keys.iter().enumerate() {
            let stored = stored.get(ri).copied().unwrap_or(0);
            let here = At {
                group: gi as u32,
                row: first_row + kept_here.len() as u32,
            };
            match self.repeat_of(key, (&full, ri), here, &kept_here, first_row) {
                Repeat::Of(of) => {
                    // Its stored repeats are counted with the chunk's
                    // (`ParsedChunk::collapsed`); the row itself here.
                    self.add_repeats(of, 1 + stored);
                    counts.redeliveries += 1;
                    keep.push(false);
                    continue;
                }
                Repeat::Maybe(of) => self.pending.push(Pending { at: here, of }),
                Repeat::No => {}
            }
            counts.events += 1;
            keep.push(true);
            kept_here.push(ri as u32);
            self.kept[gi].redeliveries.push(stored);
        }
        let kept = kept_here.len();
        let batch = if kept == full.num_rows() {
            full
        } else {
            drop_rows(full, keep, kept)
        };
        let group = &mut self.kept[gi];
        group.parts.push(batch);
        let full = group.redeliveries.len() >= GROUP_ROWS / 2 || group.parts.len() >= GROUP_PARTS;
        if full || alone {
            self.close_group(gi);
        }
        self.per_chunk.push(counts);
    }

    /// Add `n` repeats to the kept row at `at` (in memory or spilled: the
    /// counts are held apart from the rows).
    fn add_repeats(&mut self, at: At, n: i64) {
        self.kept[at.group as usize].redeliveries[at.row as usize] += n;
    }

    /// Whether the row `(batch, row)` with `key`, which would be kept at
    /// `here`, repeats a row kept before; it is entered in the table
    /// unless it does.
    fn repeat_of(
        &mut self,
        key: &Parsed,
        (batch, row): (&RecordBatch, usize),
        here: At,
        kept_here: &[u32],
        first_row: u32,
    ) -> Repeat {
        let digest = short(&key.digest);
        let entry = match self.table.entry(key.id_key) {
            Slot::Vacant(slot) => {
                slot.insert(Entry {
                    at: here,
                    digest,
                    more: ALONE,
                });
                return Repeat::No;
            }
            Slot::Occupied(slot) => *slot.get(),
        };
        let candidates = if entry.more == ALONE {
            if entry.digest == digest || entry.digest == UNKNOWN || digest == UNKNOWN {
                vec![entry.at]
            } else {
                Vec::new()
            }
        } else {
            self.seen[entry.more as usize].with_digest(digest)
        };
        let mut spilled = None;
        for c in candidates {
            let earlier = if c.group == here.group && c.row >= first_row {
                Some((batch, kept_here[(c.row - first_row) as usize] as usize))
            } else {
                row_in_memory(&self.kept, c)
            };
            match earlier {
                Some((b, r)) => {
                    if same_event(b, r, batch, row, &mut self.canonical) {
                        return Repeat::Of(c);
                    }
                }
                None => spilled = spilled.or(Some(c)),
            }
        }
        // Kept: another version of the id, another id under the key, or a
        // presumed repeat of a spilled row until it is compared.
        let more = if entry.more == ALONE {
            let mut seen = Seen::default();
            seen.add(entry.at, entry.digest);
            self.seen.push(seen);
            let more = (self.seen.len() - 1) as u32;
            self.table.insert(key.id_key, Entry { more, ..entry });
            more
        } else {
            entry.more
        };
        self.seen[more as usize].add(here, digest);
        match spilled {
            Some(of) => Repeat::Maybe(of),
            None => Repeat::No,
        }
    }

    /// Confirm the presumed repeats, number the versions of each id and
    /// attach the final counts. Fails only when a group could not be
    /// spilled or read back.
    pub fn finish(mut self) -> std::io::Result<Outcome> {
        if !self.kept.is_empty() {
            self.close_group(self.kept.len() - 1);
        }
        if let Some(e) = self.spill_error.take() {
            return Err(e);
        }
        // Every row a comparison or a numbering reads, read back once.
        let mut wanted: Vec<At> = self.pending.iter().flat_map(|p| [p.at, p.of]).collect();
        for seen in &self.seen {
            wanted.extend(seen.rows.iter().map(|(at, _)| *at));
        }
        let loaded = self.rows_of(wanted)?;
        // Presumed repeats, in input order: a repeat goes, its count moves.
        let mut gone: std::collections::HashSet<At> = Default::default();
        let pending = std::mem::take(&mut self.pending);
        for p in &pending {
            let ((x, i), (y, j)) = (loaded.row(&self.kept, p.of), loaded.row(&self.kept, p.at));
            if !same_event(x, i, y, j, &mut self.canonical) {
                continue;
            }
            let repeats = 1 + self.kept[p.at.group as usize].redeliveries[p.at.row as usize];
            self.add_repeats(p.of, repeats);
            let chunk = self.kept[p.at.group as usize].chunk_of(p.at.row);
            let counts = &mut self.per_chunk[chunk];
            counts.events -= 1;
            counts.redeliveries += 1;
            gone.insert(p.at);
        }
        // Versions: per id key, the rows of each id (by its text), numbered
        // by time (created_at, then input order) so that the same events
        // give the same version 1 however they are cut into files.
        let mut numbered: Vec<(At, i32)> = Vec::new();
        for seen in &self.seen {
            let mut rows: Vec<(&str, i64, i64, At)> = seen
                .rows
                .iter()
                .filter(|(at, _)| !gone.contains(at))
                .map(|(at, _)| {
                    let (b, r) = loaded.row(&self.kept, *at);
                    let id = b.column(events_col("id")).as_string::<i32>().value(r);
                    (id, int(b, "created_ns", r), int(b, "seq", r), *at)
                })
                .collect();
            rows.sort_unstable();
            for same_id in rows.chunk_by(|a, b| a.0 == b.0) {
                let versions = same_id.iter().enumerate();
                numbered.extend(versions.map(|(n, row)| (row.3, n as i32 + 1)));
            }
        }
        for (at, version) in numbered {
            let kept = &mut self.kept[at.group as usize];
            kept.version[at.row as usize] = version;
            if version > 1 {
                let chunk = kept.chunk_of(at.row);
                self.per_chunk[chunk].events -= 1;
                self.per_chunk[chunk].versions += 1;
            }
        }
        drop(loaded);
        let mut gone: Vec<At> = gone.into_iter().collect();
        gone.sort_unstable();
        for rows in gone.chunk_by(|a, b| a.group == b.group) {
            let kept = &mut self.kept[rows[0].group as usize];
            let mut keep = vec![true; kept.rows];
            for at in rows {
                keep[at.row as usize] = false;
            }
            retain_marked(&mut kept.redeliveries, &keep);
            retain_marked(&mut kept.version, &keep);
            if kept.spilled.is_some() {
                kept.keep = Some(keep);
            } else {
                let n = kept.redeliveries.len();
                let events =
                    std::mem::replace(&mut kept.events, RecordBatch::new_empty(EVENTS.clone()));
                kept.events = drop_rows(events, keep, n);
            }
        }
        if self.spill_dir.is_some() {
            return Ok(Outcome {
                batches: Vec::new(),
                groups: self.kept.into_iter().map(Group).collect(),
                per_chunk: self.per_chunk,
            });
        }
        let batches = self
            .kept
            .into_iter()
            .map(|k| Group(k).load().expect("rows held in memory"))
            .collect();
        Ok(Outcome {
            batches: coalesce(batches),
            groups: Vec::new(),
            per_chunk: self.per_chunk,
        })
    }

    /// The rows at `wanted` of spilled groups, read back once per group:
    /// one batch of them per group, and where each row is among them. A
    /// batch per row would cost more in column headers (70 arrays) than the
    /// rows hold.
    fn rows_of(&self, wanted: Vec<At>) -> std::io::Result<RowsOfVersions> {
        let mut by_group: std::collections::BTreeMap<u32, Vec<u32>> = Default::default();
        for at in wanted {
            if self.kept[at.group as usize].spilled.is_some() {
                by_group.entry(at.group).or_default().push(at.row);
            }
        }
        let mut out = RowsOfVersions::default();
        for (group, mut rows) in by_group {
            rows.sort_unstable();
            rows.dedup();
            let events = self.kept[group as usize].load()?;
            let part = take_record_batch(&events, &UInt32Array::from(rows.clone()))
                .map_err(std::io::Error::other)?;
            drop(events);
            let at = out.parts.len() as u32;
            for (i, row) in rows.into_iter().enumerate() {
                out.index.insert(At { group, row }, (at, i as u32));
            }
            out.parts.push(part);
        }
        Ok(out)
    }
}

/// What a row is to the rows kept before it.
enum Repeat {
    /// The same event as the kept row there.
    Of(At),
    /// Maybe the same event as that spilled row: kept, compared at the end.
    Maybe(At),
    /// Not a repeat: a new event or another version.
    No,
}

/// Rows of spilled groups, read back: At -> (part, row in it).
#[derive(Default)]
struct RowsOfVersions {
    parts: Vec<RecordBatch>,
    index: HashMap<At, (u32, u32)>,
}

impl RowsOfVersions {
    /// The row at `at`: read back if its group was spilled, else in memory.
    fn row<'a>(&'a self, kept: &'a [Kept], at: At) -> (&'a RecordBatch, usize) {
        match self.index.get(&at) {
            Some(&(part, row)) => (&self.parts[part as usize], row as usize),
            None => (&kept[at.group as usize].events, at.row as usize),
        }
    }
}

/// Keep the entries of `values` marked in `keep`.
fn retain_marked<T>(values: &mut Vec<T>, keep: &[bool]) {
    let mut flags = keep.iter();
    values.retain(|_| *flags.next().unwrap_or(&true));
}

fn int(batch: &RecordBatch, name: &str, row: usize) -> i64 {
    let col = batch.column(events_col(name));
    let ints = col
        .as_any()
        .downcast_ref::<Int64Array>()
        .expect("an Int64 column");
    ints.value(row)
}

/// Redelivery counts already recorded (Parquet written by `convert`); none
/// for rows read from NDJSON.
fn stored_redeliveries(batch: &RecordBatch) -> Vec<i64> {
    let Ok(at) = batch.schema().index_of("redeliveries") else {
        return Vec::new();
    };
    let col = batch.column(at);
    match col.as_any().downcast_ref::<Int64Array>() {
        Some(ints) if ints.null_count() == 0 && ints.values().iter().any(|n| *n != 0) => {
            ints.values().to_vec()
        }
        _ => Vec::new(),
    }
}

fn with_column(batch: &RecordBatch, name: &str, col: ArrayRef) -> RecordBatch {
    let mut cols = batch.columns().to_vec();
    cols[events_col(name)] = col;
    RecordBatch::try_new(batch.schema(), cols).expect("same type as before")
}

/// Digests for rows of `convert`'s Parquet written before rows carried
/// their own (layouts 1 and 2): BLAKE3 of each row's content columns
/// (every one but provenance, by name, JSON text in canonical form). Not
/// the digest the line would have had, which those files do not keep.
pub fn digest_of_columns(batch: &RecordBatch) -> FixedSizeBinaryArray {
    let mut canonical = Canonicalizer::default();
    let schema = batch.schema();
    let mut out = Vec::with_capacity(16 * batch.num_rows());
    let mut text = Vec::new();
    for r in 0..batch.num_rows() {
        text.clear();
        for (k, field) in schema.fields().iter().enumerate() {
            let name = field.name().as_str();
            if PROVENANCE.contains(&name) || name == "digest" {
                continue;
            }
            text.extend_from_slice(name.as_bytes());
            text.push(b'=');
            let column = batch.column(k);
            if column.is_null(r) {
                text.extend_from_slice(b"null");
            } else if JSON_COLUMNS.contains(&name)
                && let Some(json) = column.as_string_opt::<i32>()
                && let Ok(c) = canonical.canonical(json.value(r))
            {
                text.extend_from_slice(c);
            } else {
                let shown = datafusion::arrow::util::display::array_value_to_string(column, r)
                    .unwrap_or_default();
                canonical::push_string(&mut text, &shown);
            }
            text.push(0);
        }
        out.extend_from_slice(&super::identity::digest(&text));
    }
    FixedSizeBinaryArray::new(16, out.into(), None)
}

/// What the dedup looks stored rows (laid out as `EVENTS`) up by: their id
/// key and digest. Rows stored without the line as written (layouts 1 and
/// 2) have a digest made of their columns, unlike any line's: filed as
/// unknown (zeros), compared with every row of their id.
pub fn row_keys(batch: &RecordBatch) -> Vec<Parsed> {
    let ids = batch.column(events_col("id")).as_string::<i32>();
    let digests = batch.column(events_col("digest")).as_fixed_size_binary();
    let written = batch.column(events_col("as_written"));
    (0..batch.num_rows())
        .map(|r| Parsed {
            id_key: super::identity::id_key(ids.value(r)),
            digest: match written.is_null(r) || digests.is_null(r) {
                false => digests.value(r).try_into().expect("16 bytes"),
                true => [0; 16],
            },
        })
        .collect()
}

/// Columns whose typed value can differ while the member as written is the
/// same JSON value (`0` and `-0` as floats), or be the same while it
/// differs: `as_written` holds them exactly, and compares instead.
const COMPARED_AS_WRITTEN: [&str; 2] = ["confidence", "attestation_count"];

/// Whether two rows are the same event: the same id text and the same
/// content, every column but provenance compared, JSON text as JSON values.
pub fn same_event(
    x: &RecordBatch,
    i: usize,
    y: &RecordBatch,
    j: usize,
    canonical: &mut Canonicalizer,
) -> bool {
    let digests = |b: &RecordBatch, r: usize| -> Option<Vec<u8>> {
        let at = b.schema().index_of("digest").ok()?;
        let d: &FixedSizeBinaryArray = b.column(at).as_fixed_size_binary_opt()?;
        Some(d.value(r).to_vec())
    };
    // A row stored without the line as written (layouts 1 and 2) is
    // compared on what its columns keep: the nearest a comparison can come.
    let legacy = |b: &RecordBatch, r: usize| {
        let at = b.schema().index_of("as_written").ok();
        at.is_none_or(|at| b.column(at).is_null(r))
    };
    let whole = !legacy(x, i) && !legacy(y, j);
    // Different digests: different values (the digest is of the value).
    if whole && digests(x, i) != digests(y, j) {
        return false;
    }
    let (sx, sy) = (x.schema(), y.schema());
    let same_layout = Arc::ptr_eq(&sx, &sy) || sx.fields() == sy.fields();
    for (k, field) in sx.fields().iter().enumerate() {
        let name = field.name().as_str();
        if PROVENANCE.contains(&name) || COMPARED_AS_WRITTEN.contains(&name) {
            continue;
        }
        let kept_by_line_only = ["digest", "as_written"].contains(&name)
            || super::schema::NS_COLUMNS.iter().any(|(ns, _)| *ns == name);
        if !whole && kept_by_line_only {
            continue;
        }
        let other = match same_layout {
            true => k,
            false => match sy.index_of(name) {
                Ok(other) => other,
                Err(_) => return false,
            },
        };
        let (cx, cy) = (x.column(k), y.column(other));
        if JSON_COLUMNS.contains(&name) {
            let (Some(sx), Some(sy)) = (cx.as_string_opt::<i32>(), cy.as_string_opt::<i32>())
            else {
                return false;
            };
            if !json_equal(sx, i, sy, j, canonical) {
                return false;
            }
            continue;
        }
        if !value_eq(cx.as_ref(), i, cy.as_ref(), j) {
            return false;
        }
    }
    true
}

/// Whether row `i` of `x` and row `j` of `y` (of one type) hold the same
/// value, nulls equal to nulls; the common types without building a
/// comparator for a single pair (most columns of a row are null).
fn value_eq(x: &dyn Array, i: usize, y: &dyn Array, j: usize) -> bool {
    use datafusion::arrow::datatypes::{DataType, Int32Type, Int64Type};
    match (x.is_null(i), y.is_null(j)) {
        (true, true) => return true,
        (false, false) => {}
        _ => return false,
    }
    if x.data_type() != y.data_type() {
        return false;
    }
    match x.data_type() {
        DataType::Utf8 => x.as_string::<i32>().value(i) == y.as_string::<i32>().value(j),
        DataType::Int64 => {
            x.as_primitive::<Int64Type>().value(i) == y.as_primitive::<Int64Type>().value(j)
        }
        DataType::Int32 => {
            x.as_primitive::<Int32Type>().value(i) == y.as_primitive::<Int32Type>().value(j)
        }
        DataType::FixedSizeBinary(_) => {
            x.as_fixed_size_binary().value(i) == y.as_fixed_size_binary().value(j)
        }
        DataType::Dictionary(key, value)
            if **key == DataType::Int32 && **value == DataType::Utf8 =>
        {
            fn text(a: &dyn Array, r: usize) -> &str {
                let d = a.as_dictionary::<Int32Type>();
                let k = d.keys().value(r) as usize;
                d.values().as_string::<i32>().value(k)
            }
            text(x, i) == text(y, j)
        }
        _ => match make_comparator(x, y, SortOptions::default()) {
            Ok(cmp) => cmp(i, j).is_eq(),
            Err(_) => false,
        },
    }
}

fn json_equal(
    x: &StringArray,
    i: usize,
    y: &StringArray,
    j: usize,
    canonical: &mut Canonicalizer,
) -> bool {
    match (x.is_null(i), y.is_null(j)) {
        (true, true) => true,
        (false, false) => canonical::compare(canonical, x.value(i), y.value(j)).is_eq(),
        _ => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ingest::ndjson::{self, Chunk};
    use crate::ingest::normalize::NormalizeOptions;
    use crate::ingest::row::ChunkShape;

    fn chunk(chunk_idx: u32, first_line: u64, lines: &[&str]) -> ParsedChunk {
        let data = lines.iter().map(|l| format!("{l}\n")).collect::<String>();
        let chunk = Chunk {
            file_idx: 0,
            chunk_idx,
            first_line,
            data: data.into_bytes(),
            oversized: None,
        };
        let opts = NormalizeOptions {
            token_format: Default::default(),
        };
        ndjson::parse_chunk(
            &chunk,
            "t".into(),
            ndjson::ChunkLimits::lines(1 << 20),
            opts,
            &mut ChunkShape::default(),
        )
    }

    fn counts(events: u64, versions: u64, redeliveries: u64) -> Counts {
        Counts {
            events,
            versions,
            redeliveries,
        }
    }

    fn column<'a>(batch: &'a RecordBatch, name: &str) -> &'a ArrayRef {
        batch.column(events_col(name))
    }

    fn line(id: &str, ty: &str) -> String {
        format!(
            r#"{{"spec_version":"0.2","id":"{id}","type":"{ty}","source":"s","created_at":"2026-07-14T12:00:00Z","payload":{{}}}}"#
        )
    }

    #[test]
    fn one_line_chunks_share_batches_and_keep_their_counts() {
        // 3,000 chunks of one line (3,000 files of one line): e0 comes back
        // as a redelivery every 1000 chunks, and as another version once.
        let mut dedup = Deduper::with_capacity(16);
        let mut per_chunk = Vec::new();
        for i in 0..3000u32 {
            let l = match i {
                1000 | 2000 => line("e0", "t.x"),
                2999 => line("e0", "t.y"),
                _ => line(&format!("e{i}"), "t.x"),
            };
            let mut c = chunk(i, 1, &[&l]);
            dedup.push(&mut c);
            per_chunk.push(c);
        }
        let out = dedup.finish().unwrap();
        let rows: usize = out.batches.iter().map(|b| b.num_rows()).sum();
        assert_eq!(rows, 2998);
        assert!(out.batches.len() <= 2, "{} batches", out.batches.len());
        assert_eq!(out.per_chunk[1000], counts(0, 0, 1));
        assert_eq!(out.per_chunk[2999], counts(0, 1, 0), "another version");
        let mut e0 = Vec::new();
        for b in &out.batches {
            let id = column(b, "id")
                .as_any()
                .downcast_ref::<StringArray>()
                .unwrap();
            let red = column(b, "redeliveries")
                .as_any()
                .downcast_ref::<Int64Array>()
                .unwrap();
            let ver = column(b, "version")
                .as_any()
                .downcast_ref::<Int32Array>()
                .unwrap();
            for r in (0..b.num_rows()).filter(|&r| id.value(r) == "e0") {
                e0.push((red.value(r), ver.value(r)));
            }
            for c in b.columns() {
                c.to_data().validate_full().unwrap();
            }
        }
        assert_eq!(e0, [(2, 1), (0, 2)]);
    }

    /// The rows out of a finished dedup, read back if spilled, as (id,
    /// redeliveries, version, payload).
    fn rows_out(out: Outcome) -> Vec<(String, i64, i32, String)> {
        let batches: Vec<RecordBatch> = if out.groups.is_empty() {
            out.batches
        } else {
            assert!(out.batches.is_empty());
            out.groups.into_iter().map(|g| g.load().unwrap()).collect()
        };
        let mut rows = Vec::new();
        for b in &batches {
            let text = |name| {
                datafusion::arrow::compute::cast(
                    column(b, name),
                    &datafusion::arrow::datatypes::DataType::Utf8,
                )
                .unwrap()
            };
            let (id, red, ver, payload) = (
                text("id"),
                text("redeliveries"),
                text("version"),
                text("payload"),
            );
            let s = |a: &ArrayRef, r| {
                a.as_any()
                    .downcast_ref::<StringArray>()
                    .unwrap()
                    .value(r)
                    .to_string()
            };
            for r in 0..b.num_rows() {
                rows.push((
                    s(&id, r),
                    s(&red, r).parse().unwrap(),
                    s(&ver, r).parse().unwrap(),
                    s(&payload, r),
                ));
            }
        }
        rows
    }

    #[test]
    fn spilled_rows_come_back_as_the_held_ones() {
        // 30 chunks of 500 lines: groups close and spill as they fill; ids
        // repeat across them as exact redeliveries, as the same value in
        // other text, and as other versions.
        let lines: Vec<Vec<String>> = (0..30u32)
            .map(|c| {
                (0..500u32)
                    .map(|n| {
                        let id = (c * 500 + n) % 9000;
                        let body = match (c, n % 7) {
                            (20.., 0) => r#"{"b":2,"a":1}"#.to_string(),
                            (25.., 3) => format!(r#"{{"v":{c}}}"#),
                            _ => r#"{"a":1,"b":2}"#.to_string(),
                        };
                        format!(
                            r#"{{"spec_version":"0.2","id":"e{id}","type":"t.x","source":"s","created_at":"2026-07-14T12:00:00Z","payload":{body}}}"#
                        )
                    })
                    .collect()
            })
            .collect();
        let dir = tempfile::tempdir().unwrap();
        let run = |mut dedup: Deduper| {
            for (c, ls) in lines.iter().enumerate() {
                let refs: Vec<&str> = ls.iter().map(String::as_str).collect();
                dedup.push(&mut chunk(c as u32, 1 + 500 * c as u64, &refs));
            }
            dedup.finish().unwrap()
        };
        let held = run(Deduper::with_capacity(16));
        let spilled = run(Deduper::spilling_to(16, dir.path()));
        assert_eq!(held.per_chunk, spilled.per_chunk);
        assert!(spilled.groups.len() > 1, "rows were spilled in groups");
        let (a, b) = (rows_out(held), rows_out(spilled));
        assert!(a.iter().any(|r| r.2 > 1) && a.iter().any(|r| r.1 > 0));
        assert_eq!(a, b);
        assert_eq!(
            std::fs::read_dir(dir.path()).unwrap().count(),
            0,
            "spill files removed"
        );
    }

    /// Columns taken out of the payload as JSON text (a subscription's
    /// filter) differ in text with it, and are compared as JSON with it.
    #[test]
    fn versions_whose_filters_differ_only_in_spacing_fold() {
        let a = r#"{"spec_version":"0.2","id":"s1","type":"t.x","source":"s","created_at":"2026-07-14T12:00:00Z","payload":{"types":["a","b"],"filter":{"topic":["x","y"]}}}"#;
        let a2 = r#"{"spec_version":"0.2","id":"s1","type":"t.x","source":"s","created_at":"2026-07-14T12:00:00Z","payload":{"types":[ "a", "b" ],"filter":{"topic":[ "x" ,"y"]}}}"#;
        let mut chunks = [chunk(0, 1, &[a]), chunk(1, 2, &[a2])];
        let mut dedup = Deduper::with_capacity(2);
        for c in &mut chunks {
            dedup.push(c);
        }
        let out = dedup.finish().unwrap();
        let rows: usize = out.batches.iter().map(RecordBatch::num_rows).sum();
        assert_eq!(rows, 1, "one event, redelivered");
        let red = column(&out.batches[0], "redeliveries")
            .as_any()
            .downcast_ref::<Int64Array>()
            .unwrap()
            .value(0);
        assert_eq!(red, 1);
    }

    #[test]
    fn versions_equal_in_value_fold_into_the_first_across_chunks() {
        let a = r#"{"spec_version":"0.2","id":"e1","type":"t.x","source":"s","created_at":"2026-07-14T12:00:00Z","payload":{"a":1,"b":2}}"#;
        // Same value, other text: kept as a version at first, folded at the end.
        let a2 = r#"{"spec_version":"0.2","id":"e1","type":"t.x","source":"s","created_at":"2026-07-14T12:00:00Z","payload":{"b":2,"a":1}}"#;
        let b = r#"{"spec_version":"0.2","id":"e1","type":"t.y","source":"s","created_at":"2026-07-14T12:00:05Z","payload":{}}"#;
        let other = r#"{"spec_version":"0.2","id":"e2","type":"t.x","source":"s","created_at":"2026-07-14T12:00:01Z","payload":{}}"#;
        let mut chunks = [
            chunk(0, 1, &[a, other, a]),
            chunk(1, 4, &[a2, other, b, a2]),
        ];
        let mut dedup = Deduper::with_capacity(4);
        for c in &mut chunks {
            dedup.push(c);
        }
        let out = dedup.finish().unwrap();
        // Chunk 0: e1 and e2, one repeat of e1. Chunk 1: a2 and its repeat
        // are redeliveries of e1, e2 again, b a new version.
        assert_eq!(out.per_chunk, [counts(2, 0, 1), counts(0, 1, 3)]);
        let ids: Vec<(String, i64, i32)> = out
            .batches
            .iter()
            .flat_map(|batch| {
                let id = column(batch, "id")
                    .as_any()
                    .downcast_ref::<StringArray>()
                    .unwrap();
                let red = column(batch, "redeliveries")
                    .as_any()
                    .downcast_ref::<Int64Array>()
                    .unwrap();
                let ver = column(batch, "version")
                    .as_any()
                    .downcast_ref::<Int32Array>()
                    .unwrap();
                (0..batch.num_rows())
                    .map(|r| (id.value(r).to_string(), red.value(r), ver.value(r)))
                    .collect::<Vec<_>>()
            })
            .collect();
        assert_eq!(
            ids,
            [
                ("e1".to_string(), 3, 1),
                ("e2".to_string(), 1, 1),
                ("e1".to_string(), 0, 2)
            ]
        );
        for batch in &out.batches {
            for c in batch.columns() {
                c.to_data().validate_full().unwrap();
            }
        }
    }
}
