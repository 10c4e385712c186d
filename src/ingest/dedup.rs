//! Collapsing redeliveries: the same id with the same content is one event
//! (its `redeliveries` counts the repeats); the same id with different
//! content keeps every version (`version` 1, 2, ... in created_at order,
//! then input order) for the integrity rule.

use super::ndjson::ParsedChunk;
use super::row::{ChunkRows, drop_rows, share_empty_columns};
use super::schema::{EVENTS, JSON_COLUMNS, PROVENANCE, events_col};
use crate::signals::Temp;
use datafusion::arrow::array::{
    Array, ArrayRef, Int32Array, Int64Array, StringArray, UInt32Array, make_comparator,
};
use datafusion::arrow::compute::{SortOptions, concat_batches, take_record_batch};
use datafusion::arrow::ipc::CompressionType;
use datafusion::arrow::ipc::reader::FileReader;
use datafusion::arrow::ipc::writer::{FileWriter, IpcWriteOptions};
use datafusion::arrow::record_batch::RecordBatch;
use foldhash::HashMap;
use std::collections::hash_map::Entry;
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// One content version of an id: where its row is (in the kept rows).
#[derive(Clone, Copy)]
struct Version {
    content_hash: u64,
    /// The group of kept rows it is in, and its row there.
    chunk: u32,
    row: u32,
}

/// Per chunk: rows kept, and the events/redeliveries attributed to its input.
pub struct Outcome {
    /// The rows, when they were held in memory.
    pub batches: Vec<RecordBatch>,
    /// The rows, in order, when groups of them were spilled (`batches` is
    /// then empty): each read back when its turn comes.
    pub groups: Vec<Group>,
    /// Per chunk (same order as given): (distinct events, redeliveries).
    pub per_chunk: Vec<(u64, u64)>,
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
/// chunks are still being parsed. Only the redelivery counts and version
/// numbers of kept rows change afterwards, and the rare rows whose text
/// differed from an earlier one's but whose values are the same.
pub struct Deduper {
    first: HashMap<u128, Version>,
    later: HashMap<u128, Vec<Version>>,
    kept: Vec<Kept>,
    per_chunk: Vec<(u64, u64)>,
    /// Where closed groups are written so that memory holds only the
    /// tables of ids and counts (None: they stay in memory).
    spill_dir: Option<PathBuf>,
    /// The first failure to spill; later groups stay in memory.
    spill_error: Option<std::io::Error>,
}

impl Deduper {
    /// `events` is an estimate of the distinct events to come: growing a
    /// table of millions of ids copies it each time.
    pub fn with_capacity(events: usize) -> Self {
        Deduper {
            first: HashMap::with_capacity_and_hasher(events, Default::default()),
            later: HashMap::default(),
            kept: Vec::new(),
            per_chunk: Vec::new(),
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

    /// Close group `gi`, and spill it when spilling.
    fn close_group(&mut self, gi: usize) {
        let group = &mut self.kept[gi];
        group.close();
        if let Some(dir) = &self.spill_dir
            && self.spill_error.is_none()
            && group.rows > 0
            && let Err(e) = group.spill(dir)
        {
            self.spill_error = Some(e);
        }
    }

    /// Take the next chunk in input order: its events and keys move in,
    /// the rest of it (lines, bad lines) stays with the caller.
    ///
    /// Rows are told apart here by their content hash alone; a row whose
    /// hash is new for its id is kept as a version, and [`Self::finish`]
    /// folds versions whose values turn out equal.
    pub fn push(&mut self, chunk: &mut ParsedChunk) {
        let rows = std::mem::replace(&mut chunk.events, ChunkRows::Taken);
        let keys = std::mem::take(&mut chunk.keys);
        let joins = rows.is_events_layout()
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
        let stored = stored_redeliveries(&rows);
        let mut keep = Vec::with_capacity(keys.len());
        let mut counts = (0u64, 0u64);
        let mut kept = 0;
        for (ri, &(id_hash, content_hash)) in keys.iter().enumerate() {
            let stored = stored.get(ri).copied().unwrap_or(0);
            let here = Version {
                content_hash,
                chunk: gi as u32,
                row: self.kept[gi].redeliveries.len() as u32,
            };
            let v1 = match self.first.entry(id_hash) {
                Entry::Vacant(slot) => {
                    slot.insert(here);
                    None
                }
                Entry::Occupied(slot) => Some(*slot.get()),
            };
            let seen = v1.and_then(|v1| {
                let others = self.later.get(&id_hash).map_or(&[][..], Vec::as_slice);
                std::iter::once(&v1)
                    .chain(others)
                    .find(|v| v.content_hash == content_hash)
                    .copied()
            });
            match seen {
                Some(v) => {
                    let repeats = 1 + stored;
                    self.kept[v.chunk as usize].redeliveries[v.row as usize] += repeats;
                    counts.1 += repeats as u64;
                    keep.push(false);
                }
                None => {
                    if v1.is_some() {
                        self.later.entry(id_hash).or_default().push(here);
                    }
                    counts.0 += 1;
                    keep.push(true);
                    kept += 1;
                    self.kept[gi].redeliveries.push(stored);
                }
            }
        }
        let alone = !rows.is_events_layout();
        let group = &mut self.kept[gi];
        group.parts.push(rows.keep(keep, kept));
        let full = group.redeliveries.len() >= GROUP_ROWS / 2 || group.parts.len() >= GROUP_PARTS;
        if full || alone {
            self.close_group(gi);
        }
        self.per_chunk.push(counts);
    }

    /// Fold versions with equal values, number the rest and attach the
    /// final counts. Fails only when a group could not be spilled or read
    /// back.
    pub fn finish(mut self) -> std::io::Result<Outcome> {
        if !self.kept.is_empty() {
            self.close_group(self.kept.len() - 1);
        }
        if let Some(e) = self.spill_error.take() {
            return Err(e);
        }
        // The rows of spilled groups that versions compare, read back once.
        let loaded = self.rows_of_versions()?;
        let row_of = |kept: &[Kept], v: &Version| -> (RecordBatch, usize) {
            match loaded.index.get(&(v.chunk, v.row)) {
                Some(&(part, row)) => (loaded.parts[part as usize].clone(), row as usize),
                None => (kept[v.chunk as usize].events.clone(), v.row as usize),
            }
        };
        // Rows dropped from groups already laid out: (group, row).
        let mut folded: Vec<(u32, u32)> = Vec::new();
        for (id_hash, others) in &self.later {
            let mut versions = vec![self.first[id_hash]];
            for &v in others {
                // Different raw text can still be the same JSON value
                // (white space, key order, escapes): compare the rows.
                let (batch, row) = row_of(&self.kept, &v);
                let same = versions.iter().find(|earlier| {
                    let (b, r) = row_of(&self.kept, earlier);
                    rows_equal(&b, r, &batch, row)
                });
                match same.copied() {
                    Some(earlier) => {
                        let stored = int(&batch, "redeliveries", row as u32);
                        let kept = &mut self.kept[v.chunk as usize];
                        let repeats = 1 + kept.redeliveries[v.row as usize];
                        self.kept[earlier.chunk as usize].redeliveries[earlier.row as usize] +=
                            repeats;
                        let from = self.kept[v.chunk as usize].chunk_of(v.row);
                        let counts = &mut self.per_chunk[from];
                        counts.0 -= 1;
                        counts.1 += 1 + stored as u64;
                        folded.push((v.chunk, v.row));
                    }
                    None => versions.push(v),
                }
            }
            // Number the versions of an id by time (created_at, then input
            // order), not by which file happened to be read first: the same
            // events give the same version 1 however they are cut into files
            // and ordered.
            versions.sort_by_key(|v| {
                let (events, row) = row_of(&self.kept, v);
                (
                    int(&events, "created_ns", row as u32),
                    int(&events, "seq", row as u32),
                )
            });
            for (n, v) in versions.iter().enumerate() {
                self.kept[v.chunk as usize].version[v.row as usize] = n as i32 + 1;
            }
        }
        folded.sort_unstable();
        for rows in folded.chunk_by(|a, b| a.0 == b.0) {
            let kept = &mut self.kept[rows[0].0 as usize];
            let mut keep = vec![true; kept.rows];
            for &(_, row) in rows {
                keep[row as usize] = false;
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

    /// The rows of spilled groups that ids with several contents cite,
    /// read back once per group: one batch of them per group, and where
    /// each (group, row) is among them. A batch per row would cost more in
    /// column headers (70 arrays) than the rows hold, and a log with many
    /// redeliveries in other text (key order, white space) has one such row
    /// per redelivery.
    fn rows_of_versions(&self) -> std::io::Result<RowsOfVersions> {
        let mut wanted: std::collections::BTreeMap<u32, Vec<u32>> = Default::default();
        for (id_hash, others) in &self.later {
            for v in std::iter::once(&self.first[id_hash]).chain(others) {
                if self.kept[v.chunk as usize].spilled.is_some() {
                    wanted.entry(v.chunk).or_default().push(v.row);
                }
            }
        }
        let mut out = RowsOfVersions::default();
        for (group, mut rows) in wanted {
            rows.sort_unstable();
            rows.dedup();
            let events = self.kept[group as usize].load()?;
            let part = take_record_batch(&events, &UInt32Array::from(rows.clone()))
                .map_err(std::io::Error::other)?;
            drop(events);
            let at = out.parts.len() as u32;
            for (i, row) in rows.into_iter().enumerate() {
                out.index.insert((group, row), (at, i as u32));
            }
            out.parts.push(part);
        }
        Ok(out)
    }
}

/// Rows of spilled groups, read back: (group, row) -> (part, row in it).
#[derive(Default)]
struct RowsOfVersions {
    parts: Vec<RecordBatch>,
    index: HashMap<(u32, u32), (u32, u32)>,
}

/// Keep the entries of `values` marked in `keep`.
fn retain_marked<T>(values: &mut Vec<T>, keep: &[bool]) {
    let mut flags = keep.iter();
    values.retain(|_| *flags.next().unwrap_or(&true));
}

fn int(batch: &RecordBatch, name: &str, row: u32) -> i64 {
    let col = batch.column(events_col(name));
    let ints = col
        .as_any()
        .downcast_ref::<Int64Array>()
        .expect("an Int64 column");
    ints.value(row as usize)
}

/// Redelivery counts already recorded (Parquet written by `convert`); none
/// for rows read from NDJSON.
fn stored_redeliveries(rows: &ChunkRows) -> Vec<i64> {
    let ChunkRows::Built(batch) = rows else {
        return Vec::new();
    };
    let col = batch.column(events_col("redeliveries"));
    let ints = col
        .as_any()
        .downcast_ref::<Int64Array>()
        .expect("redeliveries is Int64");
    ints.values().to_vec()
}

fn with_column(batch: &RecordBatch, name: &str, col: ArrayRef) -> RecordBatch {
    let mut cols = batch.columns().to_vec();
    cols[events_col(name)] = col;
    RecordBatch::try_new(batch.schema(), cols).expect("same type as before")
}

/// Compare two event rows on everything but provenance; JSON text as values.
pub fn rows_equal(x: &RecordBatch, i: usize, y: &RecordBatch, j: usize) -> bool {
    for (k, field) in x.schema().fields().iter().enumerate() {
        let name = field.name().as_str();
        if PROVENANCE.contains(&name) {
            continue;
        }
        let (cx, cy) = (x.column(k), y.column(k));
        if JSON_COLUMNS.contains(&name) {
            let sx = cx
                .as_any()
                .downcast_ref::<StringArray>()
                .expect("JSON text is Utf8");
            let sy = cy
                .as_any()
                .downcast_ref::<StringArray>()
                .expect("JSON text is Utf8");
            if !json_equal(sx, i, sy, j) {
                return false;
            }
            continue;
        }
        let cmp = match make_comparator(cx.as_ref(), cy.as_ref(), SortOptions::default()) {
            Ok(c) => c,
            Err(_) => return false,
        };
        if cmp(i, j).is_ne() {
            return false;
        }
    }
    true
}

fn json_equal(x: &StringArray, i: usize, y: &StringArray, j: usize) -> bool {
    match (x.is_null(i), y.is_null(j)) {
        (true, true) => true,
        (false, false) => {
            let (a, b) = (x.value(i), y.value(j));
            a == b
                || matches!(
                    (serde_json::from_str::<serde_json::Value>(a), serde_json::from_str::<serde_json::Value>(b)),
                    (Ok(va), Ok(vb)) if va == vb
                )
        }
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
        assert_eq!(out.per_chunk[1000], (0, 1));
        assert_eq!(out.per_chunk[2999], (1, 0));
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
        assert_eq!(out.per_chunk, [(2, 1), (1, 3)]);
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
