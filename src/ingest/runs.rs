//! Events that more than one `convert` run kept, read where they lie (in
//! place, on a cluster) as one read of all the runs together keeps them
//! (docs/protocol.md, identity): a redelivery whose copies landed in two
//! runs (shards, days) is one event, counted once, and the versions of an
//! id are numbered across the runs. Each run collapsed its own repeats; only
//! the ids stored more than once are read back and collapsed again, by the
//! same dedup a loaded read uses.

use super::dedup::Deduper;
use super::ndjson::ParsedChunk;
use super::row::ChunkRows;
use super::schema::{EVENTS, events_col};
use crate::InputSummary;
use datafusion::arrow::array::{AsArray, RecordBatch};
use datafusion::arrow::compute::cast;
use datafusion::arrow::datatypes::{Int32Type, Int64Type};
use datafusion::error::Result;
use datafusion::prelude::SessionContext;
use std::collections::HashMap;

/// The stored rows of ids kept more than once, and what a read of all the
/// runs together makes of them.
#[derive(Debug, Default)]
pub struct Overlap {
    /// Every stored row of those ids, by seq (sorted).
    pub replaced: Vec<i64>,
    /// Of those, the rows that are repeats of another (sorted): their
    /// evidence goes with them.
    pub dropped: Vec<i64>,
    /// The rows kept, as one read keeps them (redeliveries summed, versions
    /// numbered across the runs).
    pub rows: Vec<RecordBatch>,
    /// Per input, how its counts move: (events, conflicting copies,
    /// redeliveries).
    pub moves: HashMap<usize, (i64, i64, i64)>,
}

impl Overlap {
    /// `inputs` with the counts moved.
    pub fn apply(&self, inputs: &mut [InputSummary]) {
        for (&input, &(events, copies, redeliveries)) in &self.moves {
            let Some(i) = inputs.get_mut(input) else {
                continue;
            };
            let add = |n: &mut u64, d: i64| *n = n.saturating_add_signed(d);
            add(&mut i.events, events);
            add(&mut i.conflicting_copies, copies);
            add(&mut i.redeliveries, redeliveries);
        }
    }
}

/// The overlap of the runs whose events `ctx` holds, or None when no id
/// is stored more than once across them. `input_of` names the input a
/// stored seq came from.
pub async fn overlap(
    ctx: &SessionContext,
    input_of: impl Fn(i64) -> Option<usize>,
) -> Result<Option<Overlap>> {
    let sql = "SELECT * FROM events WHERE id IN \
               (SELECT id FROM events GROUP BY id HAVING count(*) > 1) ORDER BY seq";
    let stored = ctx.sql(sql).await?.collect().await?;
    let mut rows = Vec::new();
    for b in stored.iter().filter(|b| b.num_rows() > 0) {
        // As a loaded read lays them out (the engine may hand text back
        // in another encoding).
        let columns = EVENTS
            .fields()
            .iter()
            .map(|f| cast(b.column(events_col(f.name())), f.data_type()))
            .collect::<std::result::Result<Vec<_>, _>>()?;
        rows.push(RecordBatch::try_new(EVENTS.clone(), columns)?);
    }
    if rows.is_empty() {
        return Ok(None);
    }
    let before = versions_by_seq(&rows);
    // Repeats are counted again from scratch: each run's own stay in the
    // rows' `redeliveries`, and the dedup adds those of the rows it drops.
    let mut dedup = Deduper::with_capacity(before.len());
    for (n, batch) in rows.into_iter().enumerate() {
        let mut chunk = stored_chunk(batch, n as u32);
        dedup.push(&mut chunk);
    }
    let kept = dedup
        .finish()
        .map_err(|e| datafusion::error::DataFusionError::External(Box::new(e)))?
        .batches;
    let after = versions_by_seq(&kept);
    let mut moves: HashMap<usize, (i64, i64, i64)> = HashMap::new();
    let mut dropped = Vec::new();
    for (&seq, &was) in &before {
        let Some(input) = input_of(seq) else { continue };
        let m = moves.entry(input).or_default();
        // Out of the count it was in...
        if was == 1 {
            m.0 -= 1;
        } else {
            m.1 -= 1;
        }
        // ...into the one it is in now.
        match after.get(&seq) {
            None => {
                m.2 += 1;
                dropped.push(seq);
            }
            Some(1) => m.0 += 1,
            Some(_) => m.1 += 1,
        }
    }
    moves.retain(|_, m| *m != (0, 0, 0));
    if moves.is_empty() && after.len() == before.len() && after == before {
        // Every id stored twice was versions within one run: nothing to do.
        return Ok(None);
    }
    let mut replaced: Vec<i64> = before.into_keys().collect();
    replaced.sort_unstable();
    dropped.sort_unstable();
    Ok(Some(Overlap {
        replaced,
        dropped,
        rows: kept,
        moves,
    }))
}

/// Seq -> version of the rows.
fn versions_by_seq(batches: &[RecordBatch]) -> HashMap<i64, i32> {
    let mut out = HashMap::new();
    for b in batches {
        let seqs = b.column(events_col("seq")).as_primitive::<Int64Type>();
        let versions = b.column(events_col("version")).as_primitive::<Int32Type>();
        for r in 0..b.num_rows() {
            out.insert(seqs.value(r), versions.value(r));
        }
    }
    out
}

/// Stored rows as a chunk the dedup takes, keyed by their id and digest.
fn stored_chunk(batch: RecordBatch, chunk_idx: u32) -> ParsedChunk {
    let keys = super::dedup::row_keys(&batch);
    ParsedChunk {
        file_idx: 0,
        chunk_idx,
        events: ChunkRows::Built(batch),
        keys,
        bad: Vec::new(),
        bad_unlisted: 0,
        bad_raw: Vec::new(),
        lines: 0,
        blank: 0,
        collapsed: 0,
    }
}

/// The SQL of `events` over the stored table `stored` and the kept rows
/// `kept`: every stored row but the replaced ones, then the kept rows.
pub fn events_view(stored: &str, kept: &str, overlap: &Overlap) -> String {
    format!(
        "SELECT * FROM {stored} WHERE seq NOT IN ({}) UNION ALL SELECT * FROM {kept}",
        list(&overlap.replaced)
    )
}

/// The SQL of `evidence` over the stored table `stored`: the entries of
/// the rows dropped as repeats go with them.
pub fn evidence_view(stored: &str, overlap: &Overlap) -> String {
    if overlap.dropped.is_empty() {
        return format!("SELECT * FROM {stored}");
    }
    format!(
        "SELECT * FROM {stored} WHERE event_seq NOT IN ({})",
        list(&overlap.dropped)
    )
}

fn list(seqs: &[i64]) -> String {
    let texts: Vec<String> = seqs.iter().map(i64::to_string).collect();
    texts.join(",")
}
