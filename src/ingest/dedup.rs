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
use datafusion::arrow::compute::{SortOptions, filter_record_batch};
use datafusion::arrow::record_batch::RecordBatch;
use std::collections::HashMap;
use std::sync::Arc;

/// One content version of an id: where its row is.
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

/// Deduplicate chunks that are already in input order.
pub fn dedup(chunks: &mut [ParsedChunk]) -> Outcome {
    // Sized once: growing a table of millions of ids copies it each time.
    let events: usize = chunks.iter().map(|c| c.keys.len()).sum();
    let mut first: HashMap<u128, Version> = HashMap::with_capacity(events);
    let mut later: HashMap<u128, Vec<Version>> = HashMap::new();
    let mut keep: Vec<Vec<bool>> = chunks.iter().map(|c| vec![true; c.keys.len()]).collect();
    let mut version: Vec<Vec<i32>> = chunks.iter().map(|c| vec![1; c.keys.len()]).collect();
    let mut redeliveries: Vec<Vec<i64>> = chunks
        .iter()
        .map(|c| stored_redeliveries(&c.events))
        .collect();
    let mut per_chunk = vec![(0u64, 0u64); chunks.len()];

    for (ci, chunk) in chunks.iter().enumerate() {
        for (ri, &(id_hash, content_hash)) in chunk.keys.iter().enumerate() {
            let here = Version {
                content_hash,
                chunk: ci as u32,
                row: ri as u32,
            };
            let Some(&v1) = first.get(&id_hash) else {
                first.insert(id_hash, here);
                per_chunk[ci].0 += 1;
                continue;
            };
            let others = later.entry(id_hash).or_default();
            let seen = std::iter::once(&v1)
                .chain(others.iter())
                .position(|v| same_content(chunks, v, &here));
            match seen {
                Some(n) => {
                    let v = if n == 0 { v1 } else { others[n - 1] };
                    let repeats = 1 + redeliveries[ci][ri];
                    redeliveries[v.chunk as usize][v.row as usize] += repeats;
                    keep[ci][ri] = false;
                    per_chunk[ci].1 += repeats as u64;
                }
                None => {
                    others.push(here);
                    version[ci][ri] = 1 + others.len() as i32;
                    per_chunk[ci].0 += 1;
                }
            }
        }
    }

    // Number the versions of an id by time (created_at, then input order),
    // not by which file happened to be read first: the same events give the
    // same version 1 however they are cut into files and ordered.
    for (id_hash, others) in &later {
        if others.is_empty() {
            continue;
        }
        let mut all: Vec<Version> = others.clone();
        all.push(first[id_hash]);
        all.sort_by_key(|v| {
            let events = &chunks[v.chunk as usize].events;
            (int(events, "created_us", v.row), int(events, "seq", v.row))
        });
        for (n, v) in all.iter().enumerate() {
            version[v.chunk as usize][v.row as usize] = n as i32 + 1;
        }
    }

    // Each chunk's batch is taken out and dropped as soon as its kept rows
    // are copied, so the peak stays near one copy of the table.
    let empty = RecordBatch::new_empty(EVENTS.clone());
    let batches = chunks
        .iter_mut()
        .enumerate()
        .map(|(ci, c)| {
            let taken = std::mem::replace(&mut c.events, empty.clone());
            let batch = with_column(
                &taken,
                "redeliveries",
                Arc::new(Int64Array::from(std::mem::take(&mut redeliveries[ci]))),
            );
            let batch = with_column(
                &batch,
                "version",
                Arc::new(Int32Array::from(std::mem::take(&mut version[ci]))),
            );
            drop(taken);
            let keep = std::mem::take(&mut keep[ci]);
            if keep.iter().all(|k| *k) {
                return batch;
            }
            let mask = BooleanArray::from(keep);
            let kept = filter_record_batch(&batch, &mask).expect("mask matches the batch");
            share_empty_columns(kept)
        })
        .collect();
    Outcome { batches, per_chunk }
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

fn same_content(chunks: &[ParsedChunk], a: &Version, b: &Version) -> bool {
    if a.content_hash == b.content_hash {
        return true;
    }
    // Different raw text can still be the same JSON value (white space, key
    // order inside the payload, escapes): compare the normalized rows.
    rows_equal(
        &chunks[a.chunk as usize].events,
        a.row as usize,
        &chunks[b.chunk as usize].events,
        b.row as usize,
    )
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
