//! `audit --format parquet`: the JSON report's findings as Parquet rows,
//! and convert's Parquet and that file read by the tools users have
//! (polars and DuckDB, from Python) with the counts `hvaudit` gives.

use crate::common::hvaudit;
use datafusion::arrow::record_batch::RecordBatch;
use datafusion::parquet::arrow::arrow_reader::ParquetRecordBatchReaderBuilder;
use serde_json::Value;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

fn incident() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("samples/incident")
}

/// `hvaudit audit -q ARGS` that ran every rule (exit 0 or 1).
fn audit(args: &[&std::ffi::OsStr]) -> Vec<u8> {
    let output = hvaudit()
        .args(["audit", "-q", "--fail-on", "none"])
        .args(args)
        .output()
        .unwrap();
    assert_eq!(output.status.code(), Some(0), "{output:?}");
    output.stdout
}

fn read_parquet(bytes: Vec<u8>) -> (Vec<RecordBatch>, Vec<(String, Option<String>)>) {
    let builder = ParquetRecordBatchReaderBuilder::try_new(bytes::Bytes::from(bytes)).unwrap();
    let metadata = builder
        .metadata()
        .file_metadata()
        .key_value_metadata()
        .cloned()
        .unwrap_or_default()
        .into_iter()
        .map(|kv| (kv.key, kv.value))
        .collect();
    let batches = builder.build().unwrap().map(Result::unwrap).collect();
    (batches, metadata)
}

/// Rows as JSON objects, nulls written out.
fn rows_as_json(batches: &[RecordBatch]) -> Vec<Value> {
    let mut buf = Vec::new();
    let mut w = datafusion::arrow::json::WriterBuilder::new()
        .with_explicit_nulls(true)
        .build::<_, datafusion::arrow::json::writer::JsonArray>(&mut buf);
    for b in batches {
        w.write(b).unwrap();
    }
    w.finish().unwrap();
    drop(w);
    serde_json::from_slice(&buf).unwrap()
}

/// A finding as both files can say it: null and absent keys alike left
/// out, every instant in one form.
fn normalized(v: &Value) -> Value {
    match v {
        Value::Object(m) => Value::Object(
            m.iter()
                .filter(|(_, v)| !v.is_null())
                .map(|(k, v)| match (k.as_str(), v) {
                    ("at", Value::String(t)) => {
                        let t = chrono::DateTime::parse_from_rfc3339(t).unwrap();
                        (k.clone(), Value::from(t.timestamp_millis()))
                    }
                    _ => (k.clone(), normalized(v)),
                })
                .collect(),
        ),
        Value::Array(a) => Value::Array(a.iter().map(normalized).collect()),
        other => other.clone(),
    }
}

/// Every field of every finding of the JSON report is in the Parquet,
/// with nothing else: suppressions and baseline states included.
#[test]
fn the_findings_file_holds_the_json_findings_field_for_field() {
    let dir = tempfile::tempdir().unwrap();
    let (sup, base) = (
        dir.path().join("suppressions.toml"),
        dir.path().join("base.json"),
    );
    std::fs::write(
        &sup,
        "[[suppress]]\nrule = \"token.*\"\nreason = \"replay drill\"\nowner = \"secops\"\n",
    )
    .unwrap();
    // Yesterday's report knew only the token rules' findings.
    let yesterday = audit(&[
        "--rules".as_ref(),
        "token.*".as_ref(),
        "--format".as_ref(),
        "json".as_ref(),
        incident().as_os_str(),
    ]);
    std::fs::write(&base, yesterday).unwrap();
    let gated = |format: &str| {
        audit(&[
            "--suppressions".as_ref(),
            sup.as_os_str(),
            "--baseline".as_ref(),
            base.as_os_str(),
            "--format".as_ref(),
            format.as_ref(),
            incident().as_os_str(),
        ])
    };
    let json: Value = serde_json::from_slice(&gated("json")).unwrap();
    let parquet = gated("parquet");
    assert!(parquet.starts_with(b"PAR1") && parquet.ends_with(b"PAR1"));
    assert_eq!(parquet, gated("parquet"), "the same bytes every run");
    let (batches, metadata) = read_parquet(parquet);
    assert!(
        metadata.contains(&("hvaudit.findings".into(), Some("1".into()))),
        "{metadata:?}"
    );
    let findings = json["findings"].as_array().unwrap();
    let states = |key: &str| findings.iter().filter(|f| f.get(key).is_some()).count();
    assert!(
        states("suppression") > 0 && states("suppression") < findings.len(),
        "some findings suppressed, some not"
    );
    assert!(states("baseline_state") == findings.len());
    // The columns are the JSON's keys (sorted: serde_json sorts them), and
    // `rests_on_version` when the log held conflicting ids (null where a
    // finding rests on none).
    let mut keys: Vec<&str> = findings
        .iter()
        .flat_map(|f| f.as_object().unwrap().keys().map(String::as_str))
        .collect();
    keys.sort();
    keys.dedup();
    let schema = batches[0].schema();
    let mut columns: Vec<&str> = schema.fields().iter().map(|f| f.name().as_str()).collect();
    columns.sort();
    assert!(
        json["readings"].is_object(),
        "the log holds conflicting ids"
    );
    if !keys.contains(&"rests_on_version") {
        keys.push("rests_on_version");
        keys.sort();
    }
    assert_eq!(columns, keys);
    let rows = rows_as_json(&batches);
    assert_eq!(rows.len(), findings.len());
    for (row, finding) in rows.iter().zip(findings) {
        assert_eq!(normalized(row), normalized(finding));
    }
    // A report without findings is a file without rows, not an error.
    let none = audit(&[
        "--rules".as_ref(),
        "token.*".as_ref(),
        "--until".as_ref(),
        "2000-01-01T00:00:00Z".as_ref(),
        "--format".as_ref(),
        "parquet".as_ref(),
        incident().as_os_str(),
    ]);
    let (batches, _) = read_parquet(none);
    assert_eq!(batches.iter().map(RecordBatch::num_rows).sum::<usize>(), 0);
}

/// Parquet is binary: refused to a terminal (a pseudo-terminal made by
/// `script`), before any work, by `audit` as by `sql`.
#[test]
fn parquet_is_refused_to_a_terminal() {
    let bin = crate::common::bin();
    let sample = incident();
    for command in [
        format!(
            "{} --no-config audit -q --format parquet {}",
            bin.display(),
            sample.display()
        ),
        format!(
            "{} --no-config sql -q --format parquet -e 'SELECT 1' {}",
            bin.display(),
            sample.display()
        ),
    ] {
        let output = crate::common::scrubbed("script")
            .args(["-qec", &command, "/dev/null"])
            .stdin(std::process::Stdio::null())
            .output()
            .expect("script (util-linux) runs");
        let said = String::from_utf8_lossy(&output.stdout);
        assert_eq!(output.status.code(), Some(2), "{command}: {said}");
        assert!(
            said.contains("--format parquet is binary: write it with -o FILE, or pipe it"),
            "{command}: {said}"
        );
        assert!(!said.contains("PAR1"), "{command}: {said}");
    }
}

/// The Python packages' answers, from `python3` running [`READ_WITH_PYTHON`].
fn python_counts(args: &[&Path]) -> Value {
    let output = std::process::Command::new("python3")
        .arg("-c")
        .arg(READ_WITH_PYTHON)
        .args(args)
        .output()
        .unwrap_or_else(|e| {
            panic!("python3 cannot run ({e}); run the tests with scripts/test, which installs what they need")
        });
    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    serde_json::from_slice(&output.stdout).unwrap()
}

/// Counts of convert's tables and of the findings file, by polars and by
/// DuckDB, as docs/sql.md shows them read.
const READ_WITH_PYTHON: &str = r#"
import json, sys
events, bad_lines, findings = sys.argv[1:4]
try:
    import polars as pl
    import duckdb
except ImportError as e:
    sys.exit(f"the Python package {e.name} is missing: run the tests with scripts/test, which installs it in a virtual environment")

f = pl.read_parquet(findings)
ev = pl.scan_parquet(events)
out = {"polars": {
    "events": ev.select(pl.len()).collect().item(),
    "by_type": dict(ev.group_by("type").len().collect().iter_rows()),
    "bad_lines": pl.scan_parquet(bad_lines).select(pl.len()).collect().item(),
    "findings": f.height,
    "by_rule": dict(f.group_by("rule").len().iter_rows()),
    "by_severity": dict(f.group_by("severity").len().iter_rows()),
    "event_ids": f.select(pl.col("event_ids").list.len().sum()).item(),
    "location_lines": f.explode("locations").select(pl.col("locations").struct.field("line").sum()).item(),
}}
db = duckdb.connect()
one = lambda sql: db.execute(sql).fetchone()[0]
pairs = lambda sql: dict(db.execute(sql).fetchall())
out["duckdb"] = {
    "events": one(f"SELECT count(*) FROM '{events}'"),
    "by_type": pairs(f"SELECT type, count(*) FROM '{events}' GROUP BY type"),
    "bad_lines": one(f"SELECT count(*) FROM '{bad_lines}'"),
    "findings": one(f"SELECT count(*) FROM '{findings}'"),
    "by_rule": pairs(f"SELECT rule, count(*) FROM '{findings}' GROUP BY rule"),
    "by_severity": pairs(f"SELECT severity, count(*) FROM '{findings}' GROUP BY severity"),
    "event_ids": one(f"SELECT sum(len(event_ids)) FROM '{findings}'"),
    "location_lines": one(f"SELECT sum(l.line) FROM (SELECT unnest(locations) AS l FROM '{findings}')"),
}
print(json.dumps(out))
"#;

/// `hvaudit sql` as (first column, second column) of each row.
fn sql_pairs(query: &str, path: &Path) -> BTreeMap<String, Value> {
    let csv = crate::common::sql_csv(query, &[], path);
    csv.lines()
        .skip(1)
        .map(|l| {
            let (k, n) = l.rsplit_once(',').unwrap();
            (k.to_string(), Value::from(n.parse::<u64>().unwrap()))
        })
        .collect()
}

#[test]
fn polars_and_duckdb_read_convert_and_the_findings_as_hvaudit_does() {
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("log.ndjson");
    let mut bytes = crate::common::synth_log(9, 150_000, 0.02);
    bytes.extend_from_slice(b"not json\n");
    std::fs::write(&log, bytes).unwrap();
    let tables = dir.path().join("parquet");
    hvaudit()
        .args(["convert", "-q", "-o"])
        .arg(&tables)
        .arg(&log)
        .assert()
        .success();
    let findings = dir.path().join("findings.parquet");
    audit(&[
        "--format".as_ref(),
        "parquet".as_ref(),
        "-o".as_ref(),
        findings.as_os_str(),
        tables.as_os_str(),
    ]);
    let json: Value = serde_json::from_slice(&audit(&[
        "--format".as_ref(),
        "json".as_ref(),
        tables.as_os_str(),
    ]))
    .unwrap();
    let list = json["findings"].as_array().unwrap();
    let sum = |of: &dyn Fn(&Value) -> u64| list.iter().map(of).sum::<u64>();
    let by_type = sql_pairs(
        "SELECT type, count(*) AS n FROM events GROUP BY type",
        &tables,
    );
    let one = |query: &str| sql_pairs(&format!("SELECT 'all', {query}"), &tables)["all"].clone();
    let expected = serde_json::json!({
        "events": one("count(*) FROM events"),
        "by_type": by_type,
        "bad_lines": one("count(*) FROM bad_lines"),
        "findings": json["counts"]["total"],
        "by_rule": json["counts"]["by_rule"],
        // The JSON lists every severity, the readers those with findings.
        "by_severity": json["counts"]["by_severity"].as_object().unwrap().iter()
            .filter(|(_, n)| **n != 0).map(|(k, n)| (k.clone(), n.clone()))
            .collect::<serde_json::Map<_, _>>(),
        "event_ids": sum(&|f| f["event_ids"].as_array().unwrap().len() as u64),
        "location_lines": sum(&|f| f["locations"].as_array().unwrap().iter()
            .map(|l| l["line"].as_u64().unwrap()).sum()),
    });
    assert!(expected["findings"].as_u64().unwrap() > 10, "{expected}");
    assert!(expected["bad_lines"].as_u64().unwrap() > 0, "{expected}");
    let events = tables.join("events/*/*.parquet");
    let bad_lines = tables.join("bad_lines/*.parquet");
    let got = python_counts(&[&events, &bad_lines, &findings]);
    assert_eq!(got["polars"], expected, "polars");
    assert_eq!(got["duckdb"], expected, "duckdb");
}
