//! Parquet whose shape is hostile: columns that repeat a name (read as one
//! JSON key, the last winning) and files of thousands of tiny row groups.

use super::{hvaudit, os, read_with, run_ok, write};
use crate::ingest::query;
use datafusion::arrow::array::{ArrayRef, StringArray};
use datafusion::arrow::datatypes::{Field, Schema};
use datafusion::arrow::record_batch::RecordBatch;
use datafusion::parquet::arrow::ArrowWriter;
use datafusion::parquet::file::properties::WriterProperties;
use hvaudit::ingest::IngestOptions;
use std::path::Path;
use std::sync::Arc;

fn text(values: &[&str]) -> ArrayRef {
    Arc::new(StringArray::from(values.to_vec()))
}

/// Envelope columns in this order (names may repeat), one row group per
/// `rows_per_group` rows.
fn parquet(path: &Path, columns: Vec<(&str, ArrayRef)>, rows_per_group: usize) {
    let fields: Vec<Field> = columns
        .iter()
        .map(|(n, a)| Field::new(*n, a.data_type().clone(), true))
        .collect();
    let schema = Arc::new(Schema::new(fields));
    let arrays = columns.into_iter().map(|(_, a)| a).collect();
    let batch = RecordBatch::try_new(schema.clone(), arrays).unwrap();
    let props = WriterProperties::builder()
        .set_max_row_group_row_count(Some(rows_per_group))
        .build();
    let file = std::fs::File::create(path).unwrap();
    let mut w = ArrowWriter::try_new(file, schema, Some(props)).unwrap();
    // A group at a time: the writer splits a larger batch by recursing once
    // per row group.
    for from in (0..batch.num_rows()).step_by(rows_per_group) {
        let n = rows_per_group.min(batch.num_rows() - from);
        w.write(&batch.slice(from, n)).unwrap();
    }
    w.close().unwrap();
}

/// Two events whose `id` and `type` columns each appear twice.
fn ambiguous(path: &Path) {
    let both = |v: &str| text(&[v, v]);
    parquet(
        path,
        vec![
            ("spec_version", both("0.2")),
            ("id", text(&["a1", "a2"])),
            ("type", both("task.started")),
            ("source", both("agent:a")),
            ("created_at", both("2026-07-14T10:00:00Z")),
            ("payload", both("{}")),
            ("id", text(&["b1", "b2"])),
            ("type", both("task.completed")),
        ],
        1024,
    );
}

#[test]
fn a_parquet_file_with_a_repeated_column_is_refused_and_named() {
    let dir = tempfile::tempdir().unwrap();
    let dup = dir.path().join("dup.parquet");
    ambiguous(&dup);
    let good = write(dir.path(), "good.ndjson", &super::numbered("ok", 2));
    let ing = read_with(&[dup.clone(), good.clone()], &IngestOptions::default());
    let e = ing.inputs[0].error.as_deref().unwrap_or_default();
    assert!(e.contains("two columns named \"id\""), "{e}");
    assert_eq!(ing.inputs[0].events, 0, "no row of it is used");
    assert_eq!(ing.inputs[1].events, 2, "the good file next to it");
    let ids = query(&ing, "SELECT id FROM events ORDER BY id");
    assert_eq!(ids.len(), 2, "{ids:?}");
    // Loaded, like any unreadable Parquet file: a warning naming the file,
    // and the rest is audited.
    let (_, _, stderr) = run_ok(&[os("audit"), dup.as_os_str(), good.as_os_str()], &[0, 1]);
    assert!(
        stderr.contains("dup.parquet") && stderr.contains("two columns named \"id\""),
        "{stderr}"
    );
    // In place, like any Parquet file an in-place audit cannot use: exit 2.
    let out = hvaudit()
        .args(["audit", "-q", "--in-place"])
        .arg(&dup)
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(
        stderr.contains("dup.parquet") && stderr.contains("two columns named \"id\""),
        "{stderr}"
    );
}

#[test]
fn thousands_of_tiny_row_groups_are_read_as_few_batches() {
    // 4,000 row groups of one event each: each was decoded on its own
    // (and its footer parsed again), one batch per row group.
    let n = 4_000;
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("tiny_groups.parquet");
    let ids: Vec<String> = (0..n).map(|i| format!("e{i}")).collect();
    let ids: Vec<&str> = ids.iter().map(String::as_str).collect();
    let all = |v: &str| text(&vec![v; n]);
    parquet(
        &path,
        vec![
            ("spec_version", all("0.2")),
            ("id", text(&ids)),
            ("type", all("task.progress")),
            ("source", all("agent:a")),
            ("created_at", all("2026-07-14T10:00:00Z")),
            ("payload", all("{}")),
        ],
        1,
    );
    let ing = read_with(&[path], &IngestOptions::default());
    assert_eq!(ing.inputs[0].events, n as u64, "{:?}", ing.inputs[0]);
    assert!(
        ing.events.len() <= 2,
        "{} batches for {n} events",
        ing.events.len()
    );
}
