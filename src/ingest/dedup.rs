//! Collapsing redeliveries: the same id with the same content is one event
//! (its `redeliveries` counts the repeats); the same id with different
//! content keeps every version (`version` 1, 2, ... in created_at order,
//! then input order) for the integrity rule.

use super::ndjson::ParsedChunk;
use super::row::share_empty_columns;
use super::schema::{EVENTS, events_col};
use datafusion::arrow::array::{
    Array, ArrayRef, BooleanArray, Int32Array, Int64Array, StringArray, make_comparator,
};
use datafusion::arrow::compute::{FilterBuilder, SortOptions};
use datafusion::arrow::record_batch::RecordBatch;
use foldhash::HashMap;
use std::sync::Arc;

/// One content version of an id: where its row is (in the kept rows).
#[derive(Clone, Copy)]
struct Version {
    content_hash: u64,
    chunk: u32,
    row: u32,
}

/// Columns that describe where and how often an event was seen, not what it
/// says; they do not take part in content comparison.
const PROVENANCE: [&str; 5] = ["seq", "src_file", "src_line", "redeliveries", "version"];
/// Columns holding JSON text, compared as JSON values.
const JSON_TEXT: [&str; 4] = ["payload", "delivery", "evidence_chain", "extra"];

/// Per chunk: rows kept, and the events/redeliveries attributed to its input.
pub struct Outcome {
    pub batches: Vec<RecordBatch>,
    /// Per chunk (same order as given): (distinct events, redeliveries).
    pub per_chunk: Vec<(u64, u64)>,
}

/// A chunk's rows once its redeliveries are dropped.
struct Kept {
    events: RecordBatch,
    redeliveries: Vec<i64>,
    version: Vec<i32>,
}

/// Collapses redeliveries chunk by chunk, in input order, as chunks come
/// from the parsers: whether a row is kept depends only on the rows before
/// it, so each chunk is cut down (and its full batch freed) while later
/// chunks are still being parsed. Only the redelivery counts and version
/// numbers of kept rows change afterwards.
pub struct Deduper {
    first: HashMap<u128, Version>,
    later: HashMap<u128, Vec<Version>>,
    kept: Vec<Kept>,
    per_chunk: Vec<(u64, u64)>,
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
        }
    }

    /// Take the next chunk in input order: its events and keys move in,
    /// the rest of it (lines, bad lines) stays with the caller.
    pub fn push(&mut self, chunk: &mut ParsedChunk) {
        let events = std::mem::replace(&mut chunk.events, RecordBatch::new_empty(EVENTS.clone()));
        let keys = std::mem::take(&mut chunk.keys);
        let ci = self.kept.len() as u32;
        let stored = stored_redeliveries(&events);
        let mut keep = Vec::with_capacity(keys.len());
        // Kept rows of this chunk so far, by their index in `events`.
        let mut kept_rows: Vec<u32> = Vec::with_capacity(keys.len());
        let mut redeliveries: Vec<i64> = Vec::with_capacity(keys.len());
        let mut version: Vec<i32> = Vec::with_capacity(keys.len());
        let mut counts = (0u64, 0u64);
        for (ri, &(id_hash, content_hash)) in keys.iter().enumerate() {
            let here = Version {
                content_hash,
                chunk: ci,
                row: kept_rows.len() as u32,
            };
            let repeats = 1 + stored[ri];
            let Some(&v1) = self.first.get(&id_hash) else {
                self.first.insert(id_hash, here);
                counts.0 += 1;
                keep.push(true);
                kept_rows.push(ri as u32);
                redeliveries.push(stored[ri]);
                version.push(1);
                continue;
            };
            let others = self.later.entry(id_hash).or_default();
            let row_of = |v: &Version| -> (&RecordBatch, usize) {
                if v.chunk == ci {
                    (&events, kept_rows[v.row as usize] as usize)
                } else {
                    (&self.kept[v.chunk as usize].events, v.row as usize)
                }
            };
            let seen = std::iter::once(&v1).chain(others.iter()).position(|v| {
                v.content_hash == content_hash || {
                    // Different raw text can still be the same JSON value
                    // (white space, key order, escapes): compare the rows.
                    let (batch, row) = row_of(v);
                    rows_equal(batch, row, &events, ri)
                }
            });
            match seen {
                Some(n) => {
                    let v = if n == 0 { v1 } else { others[n - 1] };
                    if v.chunk == ci {
                        redeliveries[v.row as usize] += repeats;
                    } else {
                        self.kept[v.chunk as usize].redeliveries[v.row as usize] += repeats;
                    }
                    counts.1 += repeats as u64;
                    keep.push(false);
                }
                None => {
                    others.push(here);
                    counts.0 += 1;
                    keep.push(true);
                    kept_rows.push(ri as u32);
                    redeliveries.push(stored[ri]);
                    version.push(1 + others.len() as i32);
                }
            }
        }
        let events = if kept_rows.len() == keys.len() {
            events
        } else {
            drop_rows(events, keep, kept_rows.len())
        };
        self.kept.push(Kept {
            events,
            redeliveries,
            version,
        });
        self.per_chunk.push(counts);
    }

    /// Number the versions and attach the final counts.
    pub fn finish(mut self) -> Outcome {
        // Number the versions of an id by time (created_at, then input
        // order), not by which file happened to be read first: the same
        // events give the same version 1 however they are cut into files
        // and ordered.
        for (id_hash, others) in &self.later {
            if others.is_empty() {
                continue;
            }
            let mut all: Vec<Version> = others.clone();
            all.push(self.first[id_hash]);
            all.sort_by_key(|v| {
                let events = &self.kept[v.chunk as usize].events;
                (int(events, "created_us", v.row), int(events, "seq", v.row))
            });
            for (n, v) in all.iter().enumerate() {
                self.kept[v.chunk as usize].version[v.row as usize] = n as i32 + 1;
            }
        }
        let batches = self
            .kept
            .into_iter()
            .map(|k| {
                let batch = with_column(
                    &k.events,
                    "redeliveries",
                    Arc::new(Int64Array::from(k.redeliveries)),
                );
                with_column(&batch, "version", Arc::new(Int32Array::from(k.version)))
            })
            .collect();
        Outcome {
            batches,
            per_chunk: self.per_chunk,
        }
    }
}

/// The rows of `events` marked in `keep` (`kept` of them). Columns empty in
/// every row (most of them, sharing one zeroed buffer) are cut to length
/// rather than copied: filtering them was half of this step.
fn drop_rows(events: RecordBatch, keep: Vec<bool>, kept: usize) -> RecordBatch {
    let predicate = FilterBuilder::new(&BooleanArray::from(keep))
        .optimize()
        .build();
    let columns = events
        .columns()
        .iter()
        .map(|c| {
            if c.null_count() == c.len() {
                c.slice(0, kept)
            } else {
                predicate.filter(c).expect("mask matches the batch")
            }
        })
        .collect();
    let kept_batch =
        RecordBatch::try_new(events.schema(), columns).expect("same columns as before");
    drop(events);
    // A column whose only values were in dropped rows is empty now.
    share_empty_columns(kept_batch)
}

fn int(batch: &RecordBatch, name: &str, row: u32) -> i64 {
    let col = batch.column(events_col(name));
    let ints = col
        .as_any()
        .downcast_ref::<Int64Array>()
        .expect("an Int64 column");
    ints.value(row as usize)
}

/// Redelivery counts already recorded (Parquet written by `convert`).
fn stored_redeliveries(batch: &RecordBatch) -> Vec<i64> {
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
        if JSON_TEXT.contains(&name) {
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
