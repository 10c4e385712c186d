//! `--format parquet`: one row per finding, for polars, DuckDB, pandas or
//! any Parquet reader. The columns are the JSON report's finding fields,
//! serialized by json.rs's own `FindingJson` (this file only gives them
//! Arrow types), so the two cannot drift: evidence stays nested (event ids,
//! locations and the timeline as lists), a suppression is a struct, the
//! baseline state text. The report's summary (accounting, gate) is the
//! JSON's; the baseline's absent findings are not rows, as they were not
//! found. The configuration file applied, if any, is in the file's
//! key-value metadata (`hvaudit.configuration`, its one-line summary).

use super::Configuration;
use super::json::FindingJson;
use super::model::Report;
use datafusion::arrow::datatypes::{DataType, Field, Fields, Schema, SchemaRef, TimeUnit};
use datafusion::arrow::json::ReaderBuilder;
use datafusion::parquet::arrow::ArrowWriter;
use datafusion::parquet::file::metadata::KeyValue;
use std::io::Write;
use std::sync::Arc;

/// The metadata key naming this file's layout, and its version: a reader
/// can tell a findings file from the events tables.
const FINDINGS_KEY: &str = "hvaudit.findings";
const FINDINGS_LAYOUT: &str = "1";
/// The metadata key of the configuration file's summary.
const CONFIGURATION_KEY: &str = "hvaudit.configuration";

/// Findings serialized at a time, and per row group: memory holds one
/// group, not a million findings twice.
const ROWS: usize = 16 * 1024;

pub(super) fn render(
    report: &Report,
    config: Option<&Configuration>,
    out: &mut dyn Write,
) -> anyhow::Result<()> {
    let schema = schema(report.readings.is_some());
    // Strict: a field the JSON gains that the schema lacks is an error
    // (and a test), not a silently dropped column.
    let mut decoder = ReaderBuilder::new(schema.clone())
        .with_strict_mode(true)
        .build_decoder()?;
    let mut metadata = vec![KeyValue::new(
        FINDINGS_KEY.into(),
        FINDINGS_LAYOUT.to_string(),
    )];
    if let Some(c) = config {
        metadata.push(KeyValue::new(
            CONFIGURATION_KEY.into(),
            super::clean(&c.summary()).into_owned(),
        ));
    }
    let props = crate::parquet_output::properties()
        .set_max_row_group_row_count(Some(ROWS))
        .set_key_value_metadata(Some(metadata))
        .build();
    // The writer wants an owned, sendable sink: it writes into a buffer
    // that is emptied into `out` after each row group.
    let mut writer = ArrowWriter::try_new(Vec::new(), schema, Some(props))?;
    let mut findings = report.findings.iter();
    loop {
        let chunk: Vec<_> = findings.by_ref().take(ROWS).collect();
        if chunk.is_empty() {
            break;
        }
        let rows: Vec<FindingJson> = chunk.iter().map(|f| FindingJson::new(f)).collect();
        decoder.serialize(&rows)?;
        if let Some(batch) = decoder.flush()? {
            writer.write(&batch)?;
        }
        drain(&mut writer, out)?;
    }
    writer.finish()?;
    drain(&mut writer, out)
}

/// The rows [`render`] writes, as Arrow batches of at most `ROWS`
/// findings, with the file's schema (the Python module's
/// `Report.findings`).
pub fn findings_batches(
    report: &Report,
) -> anyhow::Result<(SchemaRef, Vec<datafusion::arrow::record_batch::RecordBatch>)> {
    let schema = schema(report.readings.is_some());
    let mut decoder = ReaderBuilder::new(schema.clone())
        .with_strict_mode(true)
        .build_decoder()?;
    let mut batches = Vec::new();
    let mut findings = report.findings.iter();
    loop {
        let chunk: Vec<_> = findings.by_ref().take(ROWS).collect();
        if chunk.is_empty() {
            break;
        }
        let rows: Vec<FindingJson> = chunk.iter().map(|f| FindingJson::new(f)).collect();
        decoder.serialize(&rows)?;
        batches.extend(decoder.flush()?);
    }
    Ok((schema, batches))
}

/// Move what the writer has written so far to `out`. The writer counts
/// the bytes it wrote itself, so emptying its buffer leaves the offsets in
/// the footer right.
fn drain(writer: &mut ArrowWriter<Vec<u8>>, out: &mut dyn Write) -> anyhow::Result<()> {
    let buffer = writer.inner_mut();
    out.write_all(buffer)?;
    buffer.clear();
    Ok(())
}

/// The columns, in the JSON's key order. Lines are int64 as `src_line` is
/// in the events table (a join needs no cast); instants are timestamps at
/// the JSON's millisecond precision. `rests_on_version` is a column only
/// when the log held conflicting ids (`readings`).
fn schema(readings: bool) -> SchemaRef {
    let text = |name: &str, nullable: bool| Field::new(name, DataType::Utf8, nullable);
    let line = Field::new("line", DataType::Int64, false);
    let instant = |name: &str| {
        Field::new(
            name,
            DataType::Timestamp(TimeUnit::Millisecond, Some("UTC".into())),
            true,
        )
    };
    let list_of =
        |name: &str, item: DataType| Field::new_list(name, Field::new("item", item, false), false);
    let location = Fields::from(vec![
        text("file", false),
        line.clone(),
        text("event_id", true),
    ]);
    let timeline = Fields::from(vec![
        instant("at"),
        text("event_id", false),
        text("type", false),
        text("task_id", true),
        text("file", false),
        line,
    ]);
    let suppression = Fields::from(vec![
        Field::new("entry", DataType::Int64, false),
        text("reason", false),
        text("owner", true),
        text("expires", true),
    ]);
    let mut fields = vec![
        text("rule", false),
        text("severity", false),
        text("family", false),
        text("message", false),
        text("task_id", true),
        text("agent", true),
        text("session_id", true),
        list_of("event_ids", DataType::Utf8),
        list_of("locations", DataType::Struct(location)),
        instant("at"),
        text("fingerprint", false),
        list_of("timeline", DataType::Struct(timeline)),
        Field::new("suppression", DataType::Struct(suppression), true),
        text("baseline_state", true),
    ];
    if readings {
        fields.push(Field::new("rests_on_version", DataType::Int32, true));
    }
    Arc::new(Schema::new(fields))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::finding::{Finding, Location, Severity};
    use crate::report::model::{Gate, Span};
    use datafusion::arrow::array::{Array, AsArray};
    use datafusion::parquet::arrow::arrow_reader::ParquetRecordBatchReaderBuilder;

    /// More findings than one row group holds: every group is drained into
    /// the output as it closes, and the footer still finds them all.
    #[test]
    fn findings_past_one_row_group_read_back_whole_and_in_order() {
        let count = 2 * ROWS + 5;
        let findings: Vec<Finding> = (0..count)
            .map(|n| Finding {
                rule: "task.x".into(),
                severity: Severity::Low,
                family: "task".into(),
                message: format!("finding {n}"),
                task_id: None,
                agent: None,
                session_id: None,
                event_ids: vec![format!("e{n}")],
                locations: vec![Location {
                    file: "log.ndjson".into(),
                    line: n as u64 + 1,
                    event_id: None,
                }],
                at: None,
                fingerprint: format!("{n:016x}"),
                timeline: Vec::new(),
                suppression: None,
                baseline_state: None,
                rests_on_version: None,
            })
            .collect();
        let report = Report {
            tool: "hvaudit".into(),
            version: "0".into(),
            inputs: Vec::new(),
            span: Span {
                from: None,
                to: None,
            },
            rules: Vec::new(),
            unresolved_basis: 0,
            findings: findings.into(),
            rule_errors: Vec::new(),
            timeline_buckets: Vec::new(),
            outside_window: None,
            readings: None,
            gate: Gate::default(),
        };
        let mut out = Vec::new();
        render(&report, None, &mut out).unwrap();
        let reader = ParquetRecordBatchReaderBuilder::try_new(bytes::Bytes::from(out)).unwrap();
        assert_eq!(reader.metadata().num_row_groups(), 3);
        let mut messages = Vec::new();
        for batch in reader.build().unwrap() {
            let batch = batch.unwrap();
            let column = batch.column_by_name("message").unwrap().as_string::<i32>();
            messages.extend((0..column.len()).map(|i| column.value(i).to_string()));
        }
        let expected: Vec<String> = (0..count).map(|n| format!("finding {n}")).collect();
        assert_eq!(messages, expected);
    }
}

/// The report's inputs as one Arrow batch, a row per input: the JSON
/// report's `inputs` fields in its order, every one a column (the JSON
/// leaves out the counts that are zero; a table keeps its columns whatever
/// the values).
pub fn inputs_batch(
    inputs: &[crate::InputSummary],
) -> anyhow::Result<datafusion::arrow::record_batch::RecordBatch> {
    use datafusion::arrow::array::{ArrayRef, BooleanArray, StringArray, UInt64Array};
    let text = |get: fn(&crate::InputSummary) -> Option<&str>| -> ArrayRef {
        Arc::new(inputs.iter().map(get).collect::<StringArray>())
    };
    let count = |get: fn(&crate::InputSummary) -> u64| -> ArrayRef {
        Arc::new(UInt64Array::from_iter_values(inputs.iter().map(get)))
    };
    let columns: Vec<(&str, ArrayRef)> = vec![
        ("path", text(|i| Some(&i.path))),
        ("format", text(|i| Some(&i.format))),
        ("bytes", count(|i| i.bytes)),
        ("lines", count(|i| i.lines)),
        ("events", count(|i| i.events)),
        ("conflicting_copies", count(|i| i.conflicting_copies)),
        ("redeliveries", count(|i| i.redeliveries)),
        ("bad_lines", count(|i| i.bad_lines)),
        ("bad_lines_unlisted", count(|i| i.bad_lines_unlisted)),
        ("blank_lines", count(|i| i.blank_lines)),
        (
            "identity_holds",
            Arc::new(BooleanArray::from_iter(
                inputs.iter().map(|i| Some(i.identity_holds())),
            )),
        ),
        ("error", text(|i| i.error.as_deref())),
    ];
    let fields: Vec<Field> = (columns.iter())
        .map(|(name, c)| Field::new(*name, c.data_type().clone(), *name == "error"))
        .collect();
    let schema = Arc::new(Schema::new(fields));
    let arrays = columns.into_iter().map(|(_, c)| c).collect();
    Ok(datafusion::arrow::record_batch::RecordBatch::try_new(
        schema, arrays,
    )?)
}

#[cfg(test)]
mod inputs_tests {
    use super::*;
    use datafusion::arrow::array::AsArray;
    use datafusion::arrow::datatypes::UInt64Type;

    #[test]
    fn every_field_of_the_json_inputs_is_a_column_even_when_zero() {
        let a = crate::InputSummary {
            path: "a.ndjson".into(),
            format: "ndjson".into(),
            lines: 3,
            events: 3,
            ..Default::default()
        };
        let b = crate::InputSummary {
            path: "b.ndjson.gz".into(),
            error: Some("truncated".into()),
            conflicting_copies: 1,
            bad_lines_unlisted: 2,
            ..a.clone()
        };
        let batch = inputs_batch(&[a.clone(), b.clone()]).unwrap();
        assert_eq!(batch.num_rows(), 2);
        let names: Vec<&str> = (batch.schema_ref().fields().iter())
            .map(|f| f.name().as_str())
            .collect();
        // The JSON report's fields, all of them, in its order (b has them all).
        let report = Report {
            tool: "hvaudit".into(),
            version: "0".into(),
            inputs: vec![a, b],
            span: crate::report::model::Span {
                from: None,
                to: None,
            },
            rules: Vec::new(),
            unresolved_basis: 0,
            findings: Vec::new().into(),
            rule_errors: Vec::new(),
            timeline_buckets: Vec::new(),
            outside_window: None,
            readings: None,
            gate: Default::default(),
        };
        let text = super::super::summary_json(&report).unwrap();
        let json: serde_json::Value = serde_json::from_str(&text).unwrap();
        // Where each key first appears in b's object, as written.
        let b_at = text.find("b.ndjson.gz").unwrap();
        let b_object = &text[text[..b_at].rfind("\"path\"").unwrap()..];
        let mut keys: Vec<(usize, &str)> = (json["inputs"][1].as_object().unwrap().keys())
            .map(|k| (b_object.find(&format!("\"{k}\"")).unwrap(), k.as_str()))
            .collect();
        keys.sort_unstable();
        let keys: Vec<&str> = keys.into_iter().map(|(_, k)| k).collect();
        assert_eq!(names, keys);
        let copies = batch.column_by_name("conflicting_copies").unwrap();
        assert_eq!(copies.as_primitive::<UInt64Type>().values(), &[0, 1]);
        assert_eq!(batch.column_by_name("error").unwrap().null_count(), 1);
    }
}
