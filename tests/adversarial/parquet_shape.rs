//! Parquet whose shape is hostile: columns that repeat a name (read as one
//! JSON key, the last winning), files of thousands of tiny row groups, and
//! values or pages larger than a line may be, which a few kilobytes of
//! compressed Parquet can hold.

use super::{bad_lines, hvaudit, os, read_with, run_ok, write};
use crate::ingest::{ev, query};
use datafusion::arrow::array::{ArrayRef, StringArray};
use datafusion::arrow::datatypes::{Field, Schema};
use datafusion::arrow::record_batch::RecordBatch;
use datafusion::parquet::arrow::ArrowWriter;
use datafusion::parquet::basic::{Compression, ZstdLevel};
use datafusion::parquet::file::properties::{WriterProperties, WriterPropertiesBuilder};
use hvaudit::ingest::{IngestOptions, Ingested};
use serde_json::json;
use std::path::Path;
use std::sync::Arc;

fn text(values: &[&str]) -> ArrayRef {
    Arc::new(StringArray::from(values.to_vec()))
}

/// Envelope columns in this order (names may repeat), one row group per
/// `rows_per_group` rows.
fn parquet(path: &Path, columns: Vec<(&str, ArrayRef)>, rows_per_group: usize) {
    parquet_with(path, columns, rows_per_group, WriterProperties::builder());
}

/// [`parquet`] written with `props`.
fn parquet_with(
    path: &Path,
    columns: Vec<(&str, ArrayRef)>,
    rows_per_group: usize,
    props: WriterPropertiesBuilder,
) {
    let fields: Vec<Field> = columns
        .iter()
        .map(|(n, a)| Field::new(*n, a.data_type().clone(), true))
        .collect();
    let schema = Arc::new(Schema::new(fields));
    let arrays = columns.into_iter().map(|(_, a)| a).collect();
    let batch = RecordBatch::try_new(schema.clone(), arrays).unwrap();
    let props = props
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
    let ing = read_with(&[dup.clone(), good.clone()], &crate::common::test_reading());
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
    let ing = read_with(&[path], &crate::common::test_reading());
    assert_eq!(ing.inputs[0].events, n as u64, "{:?}", ing.inputs[0]);
    assert!(
        ing.events.len() <= 2,
        "{} batches for {n} events",
        ing.events.len()
    );
}

/// `n` events `e0`.. as envelope columns; the payload of each row in `big`
/// is a JSON string of `size` bytes.
fn events_with_big_payloads(n: usize, big: &[usize], size: usize) -> Vec<(&'static str, ArrayRef)> {
    let ids: Vec<String> = (0..n).map(|i| format!("e{i}")).collect();
    let ids: Vec<&str> = ids.iter().map(String::as_str).collect();
    let payloads: Vec<String> = (0..n)
        .map(|i| match big.contains(&i) {
            true => format!("\"{}\"", "a".repeat(size)),
            false => format!("{{\"i\":{i}}}"),
        })
        .collect();
    let payloads: Vec<&str> = payloads.iter().map(String::as_str).collect();
    let all = |v: &str| text(&vec![v; n]);
    vec![
        ("spec_version", all("0.2")),
        ("id", text(&ids)),
        ("type", all("task.progress")),
        ("source", all("agent:a")),
        ("created_at", all("2026-07-14T10:00:00Z")),
        ("payload", text(&payloads)),
    ]
}

/// The rows (from, to; within the group) of the page of `column` in row
/// group `group` holding row `row` of the group, by the file's offset index.
fn page_rows(path: &Path, group: usize, column: &str, row: usize) -> (usize, usize) {
    use datafusion::parquet::arrow::arrow_reader::{ArrowReaderMetadata, ArrowReaderOptions};
    use datafusion::parquet::file::metadata::PageIndexPolicy;
    let options = ArrowReaderOptions::new().with_page_index_policy(PageIndexPolicy::Required);
    let footer = ArrowReaderMetadata::load(&std::fs::File::open(path).unwrap(), options).unwrap();
    let meta = footer.metadata();
    let leaf = (0..meta.file_metadata().schema_descr().num_columns())
        .find(|&c| meta.file_metadata().schema_descr().column(c).name() == column)
        .unwrap();
    let rows = meta.row_group(group).num_rows() as usize;
    let starts: Vec<usize> = meta.offset_index().unwrap()[group][leaf]
        .page_locations()
        .iter()
        .map(|p| p.first_row_index as usize)
        .chain([rows])
        .collect();
    let at = starts.iter().rposition(|s| *s <= row).unwrap();
    (starts[at], starts[at + 1])
}

/// Zstd, pages of 4 rows.
fn small_pages() -> WriterPropertiesBuilder {
    WriterProperties::builder()
        .set_compression(Compression::ZSTD(ZstdLevel::default()))
        .set_data_page_row_count_limit(4)
        .set_write_batch_size(4)
}

const MIB: usize = 1 << 20;

fn capped(cap: usize) -> IngestOptions {
    IngestOptions {
        max_line_bytes: cap,
        ..crate::common::test_reading()
    }
}

/// The ids of the events read.
fn ids(ing: &Ingested) -> Vec<String> {
    query(ing, "SELECT id FROM events ORDER BY seq")
        .into_iter()
        .map(|r| r["id"].as_str().unwrap().to_string())
        .collect()
}

#[test]
fn a_parquet_value_over_the_line_cap_is_a_bad_line_and_never_serialized() {
    // A 2 MiB payload under a 1 MiB cap: decoded (its page is within eight
    // lines), measured on the Arrow array and cut out of the batch.
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("big_value.parquet");
    parquet_with(
        &path,
        events_with_big_payloads(6, &[2], 2 * MIB),
        1024,
        small_pages(),
    );
    assert!(std::fs::metadata(&path).unwrap().len() < 64 << 10);
    let ing = read_with(std::slice::from_ref(&path), &capped(MIB));
    let input = &ing.inputs[0];
    assert_eq!(
        (input.lines, input.events, input.bad_lines),
        (6, 5, 1),
        "{input:?}"
    );
    assert_eq!(ids(&ing), ["e0", "e1", "e3", "e4", "e5"]);
    let bad = bad_lines(&ing);
    assert_eq!(bad.len(), 1);
    let (line, reason) = &bad[0];
    assert_eq!(*line, 3, "the file's third row");
    assert!(
        reason.starts_with("row of 2097")
            && reason.contains("bytes exceeds the 1048576-byte cap (--max-line-bytes)")
            && reason.contains("its column payload holds 2097156 bytes"),
        "{reason}"
    );
    let row = query(&ing, "SELECT id, type FROM bad_lines");
    assert_eq!(
        (row[0]["id"].as_str(), row[0]["type"].as_str()),
        (Some("e2"), Some("task.progress"))
    );
    // The cap given on the command line, as an audit reports it.
    let (_, stdout, _) = run_ok(
        &[
            os("audit"),
            os("-q"),
            os("--max-line-bytes"),
            os("1M"),
            os("--format"),
            os("json"),
            path.as_os_str(),
        ],
        &[0, 1],
    );
    let report: serde_json::Value = serde_json::from_str(&stdout).unwrap();
    let input = &report["inputs"][0];
    assert_eq!(input["identity_holds"], true, "{input}");
    assert_eq!(
        (input["events"].as_u64(), input["bad_lines"].as_u64()),
        (Some(5), Some(1))
    );
    let invalid = report["findings"]
        .as_array()
        .unwrap()
        .iter()
        .find(|f| f["rule"] == "envelope.invalid")
        .expect("the rejected row is reported");
    assert_eq!(invalid["locations"][0]["line"], 3, "{invalid}");
    assert!(
        invalid["message"]
            .as_str()
            .unwrap()
            .contains("1048576-byte cap"),
        "{invalid}"
    );
}

#[test]
fn a_parquet_page_over_the_limit_is_never_decoded_and_only_its_rows_are_rejected() {
    // Three row groups of 16 rows in pages of 4; in the second, a page
    // holds a 12 MiB payload: over eight 1 MiB lines, so the page is not
    // decoded, and its rows (which cannot be read without it) are
    // rejected, listed once; every other row is read.
    let dir = tempfile::tempdir().unwrap();
    let plain = dir.path().join("big_page.parquet");
    let no_dictionary = small_pages().set_dictionary_enabled(false);
    parquet_with(
        &plain,
        events_with_big_payloads(48, &[22], 12 * MIB),
        16,
        no_dictionary,
    );
    assert!(std::fs::metadata(&plain).unwrap().len() < 64 << 10);
    // The rows of the page, by the offset index the writer wrote.
    let (a, b) = page_rows(&plain, 1, "payload", 22 - 16);
    let (a, b) = (16 + a, 16 + b);
    assert!(b - a >= 2, "a page of several rows: {a}..{b}");
    let ing = read_with(std::slice::from_ref(&plain), &capped(MIB));
    let input = &ing.inputs[0];
    let n = (b - a) as u64;
    assert_eq!(
        (
            input.lines,
            input.events,
            input.bad_lines,
            input.bad_lines_unlisted
        ),
        (48, 48 - n, n, n - 1),
        "{input:?}"
    );
    let expected: Vec<String> = (0..48)
        .filter(|i| !(a..b).contains(i))
        .map(|i| format!("e{i}"))
        .collect();
    assert_eq!(ids(&ing), expected);
    let bad = bad_lines(&ing);
    assert_eq!(bad.len(), 1, "{bad:?}");
    let (line, reason) = &bad[0];
    assert_eq!(*line, a as i64 + 1);
    let rows = format!("rows {}-{} (row group 1)", a + 1, b);
    let count = format!("({n} rows, counted as {n} bad lines, listed once)");
    assert!(
        reason.starts_with(&format!("{rows}: its page of column payload holds 1258"))
            && reason.contains("over the 8388608-byte limit for one page (8 x --max-line-bytes)")
            && reason.ends_with(&count),
        "{reason}"
    );
    // Written with a dictionary, the value is in the group's dictionary
    // page, which the pages before the writer gave it up need: their rows
    // are rejected (one run, listed once), the plain pages after it read
    // without it.
    let dictionary = dir.path().join("big_dictionary.parquet");
    parquet_with(
        &dictionary,
        events_with_big_payloads(48, &[22], 12 * MIB),
        16,
        small_pages(),
    );
    let ing = read_with(std::slice::from_ref(&dictionary), &capped(MIB));
    let input = &ing.inputs[0];
    let n = input.bad_lines;
    assert!((7..16).contains(&n), "{input:?}");
    assert_eq!((input.lines, input.events), (48, 48 - n), "{input:?}");
    let expected: Vec<String> = (0..48)
        .filter(|i| !(16..16 + n).contains(i))
        .map(|i| format!("e{i}"))
        .collect();
    assert_eq!(ids(&ing), expected);
    let (line, reason) = &bad_lines(&ing)[0];
    assert_eq!(*line, 17);
    assert!(
        reason.starts_with(&format!(
            "rows 17-{} (row group 1): its pages of column payload need its dictionary page, \
             which holds 1258",
            16 + n
        )),
        "{reason}"
    );
    // Under the default cap (16 MiB lines, 128 MiB pages) both are read whole.
    for path in [&plain, &dictionary] {
        let ing = read_with(std::slice::from_ref(path), &crate::common::test_reading());
        assert_eq!((ing.inputs[0].events, ing.inputs[0].bad_lines), (48, 0));
    }
}

#[test]
fn a_value_over_the_cap_in_converts_own_layout_is_rejected_the_same_way() {
    // convert's files are taken as they are, but a crafted one (or one
    // written under a larger cap) can hold a value over this audit's cap.
    let dir = tempfile::tempdir().unwrap();
    let mut log = String::new();
    for i in 0..5 {
        let payload = match i {
            2 => json!({"blob": "b".repeat(2 * MIB)}),
            _ => json!({"i": i}),
        };
        let line = ev(
            &format!("e{i}"),
            "task.progress",
            "2026-07-14T10:00:00Z",
            json!({"payload": payload}),
        );
        log.push_str(&line);
        log.push('\n');
    }
    let ndjson = write(dir.path(), "log.ndjson", log.as_bytes());
    let out = dir.path().join("converted");
    let status = hvaudit()
        .args(["convert", "-q"])
        .arg(&ndjson)
        .arg("-o")
        .arg(&out)
        .output()
        .unwrap();
    assert!(status.status.success(), "{status:?}");
    let ing = read_with(std::slice::from_ref(&out), &capped(MIB));
    let total = ing.total();
    assert_eq!(
        (total.lines, total.events, total.bad_lines),
        (5, 4, 1),
        "{total:?}"
    );
    assert_eq!(ids(&ing), ["e0", "e1", "e3", "e4"]);
    let (_, reason) = &bad_lines(&ing)[0];
    assert!(
        reason
            .contains("exceeds the 1048576-byte cap (--max-line-bytes): its column payload holds"),
        "{reason}"
    );
    let row = query(&ing, "SELECT id, type, src_file FROM bad_lines");
    assert_eq!(row[0]["id"], "e2", "{row:?}");
    assert!(
        row[0]["src_file"].as_str().unwrap().ends_with(".parquet"),
        "{row:?}"
    );
    // Its page over eight lines: not decoded either.
    let ing = read_with(std::slice::from_ref(&out), &capped(MIB / 8));
    let total = ing.total();
    assert!(total.identity_holds(), "{total:?}");
    assert_eq!(total.lines, 5, "{total:?}");
    assert!(total.events < 5 && total.bad_lines >= 1, "{total:?}");
    let reasons: Vec<String> = bad_lines(&ing).into_iter().map(|(_, r)| r).collect();
    assert!(
        reasons
            .iter()
            .any(|r| r.contains("of column payload") && r.contains("not decoded")),
        "{reasons:?}"
    );
}
