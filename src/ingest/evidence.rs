//! evidence_chain entries, checked at ingest and exploded into `evidence`.

use super::schema::EVIDENCE;
use datafusion::arrow::array::{
    Array, Int32Builder, Int64Array, Int64Builder, StringArray, StringBuilder,
};
use datafusion::arrow::record_batch::RecordBatch;
use serde::Deserialize;
use std::sync::Arc;

#[derive(Deserialize)]
pub struct Entry {
    pub source: String,
    pub id: String,
}

/// Parse an evidence_chain value: an array of {source, id} strings.
pub fn parse_chain(text: &str) -> Result<Vec<Entry>, String> {
    serde_json::from_str::<Vec<Entry>>(text).map_err(|e| {
        format!(
            "field evidence_chain must be an array of {{source, id}} strings: {}",
            e.to_string().replace(" at line 1 column ", " at column ")
        )
    })
}

/// Build `evidence` rows for one `events` batch.
pub fn explode(events: &RecordBatch) -> RecordBatch {
    let col = |name: &str| {
        events
            .column(events.schema().index_of(name).expect("events column"))
            .clone()
    };
    let seqs = col("seq");
    let seqs = seqs
        .as_any()
        .downcast_ref::<Int64Array>()
        .expect("seq is Int64");
    let ids = col("id");
    let ids = ids
        .as_any()
        .downcast_ref::<StringArray>()
        .expect("id is Utf8");
    let chains = col("evidence_chain");
    let chains = chains
        .as_any()
        .downcast_ref::<StringArray>()
        .expect("evidence_chain is Utf8");
    let mut seq_b = Int64Builder::new();
    let mut id_b = StringBuilder::new();
    let mut pos_b = Int32Builder::new();
    let mut src_b = StringBuilder::new();
    let mut ref_b = StringBuilder::new();
    for row in 0..events.num_rows() {
        if chains.is_null(row) {
            continue;
        }
        // Checked at ingest; Parquet from elsewhere may still hold junk, skip it.
        let Ok(entries) = parse_chain(chains.value(row)) else {
            continue;
        };
        for (pos, e) in entries.iter().enumerate() {
            seq_b.append_value(seqs.value(row));
            id_b.append_value(ids.value(row));
            pos_b.append_value(i32::try_from(pos).unwrap_or(i32::MAX));
            src_b.append_value(&e.source);
            ref_b.append_value(&e.id);
        }
    }
    RecordBatch::try_new(
        EVIDENCE.clone(),
        vec![
            Arc::new(seq_b.finish()),
            Arc::new(id_b.finish()),
            Arc::new(pos_b.finish()),
            Arc::new(src_b.finish()),
            Arc::new(ref_b.finish()),
        ],
    )
    .expect("evidence columns match the schema")
}
