//! `hvaudit sql` output a script can rely on: every type in every format,
//! valid empty results, and log text that can neither drive a terminal nor
//! run as a spreadsheet formula; several statements in one document per
//! format; `-o FILE`.

use crate::common::hvaudit;
use serde_json::Value;
use std::path::Path;

fn sql(log: &Path, format: &str, query: &str) -> String {
    let out = hvaudit()
        .args(["sql", "-q", "--format", format, "-e", query])
        .arg(log)
        .output()
        .unwrap();
    assert!(out.status.success(), "{format} {query}: {out:?}");
    String::from_utf8(out.stdout).unwrap()
}

fn log(dir: &Path) -> std::path::PathBuf {
    let p = dir.join("log.ndjson");
    let line = |id: &str, payload: &str| {
        format!(
            r#"{{"spec_version":"0.2","id":"{id}","type":"task.progress","source":"agent:a","created_at":"2026-07-14T10:00:00Z","task_id":"t1","payload":{payload}}}"#
        )
    };
    let lines = [
        line(
            "e1",
            r#"{"task_id":"t1","n":7,"note":"=HYPERLINK(\"http://x\")","o":{"k":[1,true]}}"#,
        ),
        line(
            "e2",
            "{\"task_id\":\"t1\",\"n\":2.5,\"note\":\"\\u001b]8;;http://x\\u0007click\\u001b]8;;\\u0007\"}",
        ),
    ];
    std::fs::write(&p, lines.join("\n") + "\n").unwrap();
    p
}

const UNION: &str = "SELECT id, json_get(payload, 'n') AS n, json_get(payload, 'task_id') AS t, \
     payload -> 'o' AS o, make_array(1, 2) AS a FROM events ORDER BY id";

#[test]
fn union_and_nested_values_are_written_in_every_format() {
    let dir = tempfile::tempdir().unwrap();
    let log = log(dir.path());
    let json: Value = serde_json::from_str(&sql(&log, "json", UNION)).unwrap();
    assert_eq!(json[0]["n"], 7);
    assert_eq!(json[1]["n"], 2.5);
    assert_eq!(json[0]["t"], "t1");
    assert_eq!(json[0]["o"], serde_json::json!({"k": [1, true]}));
    assert_eq!(json[0]["a"], serde_json::json!([1, 2]));
    let lines: Vec<Value> = sql(&log, "ndjson", UNION)
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(lines, json.as_array().unwrap().clone());
    let csv = sql(&log, "csv", UNION);
    assert_eq!(
        csv.lines().collect::<Vec<_>>(),
        [
            "id,n,t,o,a",
            r#"e1,7,t1,"{""k"":[1,true]}","[1,2]""#,
            "e2,2.5,t1,,\"[1,2]\""
        ]
    );
    let table = sql(&log, "table", UNION);
    assert!(table.contains("| e1 | 7   | t1 |"), "{table}");
    assert!(!table.contains("str="), "{table}");
}

#[test]
fn empty_results_are_valid_in_every_format() {
    let dir = tempfile::tempdir().unwrap();
    let log = log(dir.path());
    let none = "SELECT id, type FROM events WHERE false";
    assert_eq!(sql(&log, "json", none), "[]\n");
    assert_eq!(sql(&log, "ndjson", none), "");
    assert_eq!(sql(&log, "csv", none), "id,type\n");
    let table = sql(&log, "table", none);
    assert!(table.contains("| id | type |"), "{table}");
    assert!(table.trim_end().ends_with("0 rows"), "{table}");
}

#[test]
fn log_text_cannot_drive_a_terminal_or_run_as_a_formula() {
    let dir = tempfile::tempdir().unwrap();
    let log = log(dir.path());
    let q = "SELECT id, json_get_str(payload, 'note') AS note FROM events ORDER BY id";
    let table = sql(&log, "table", q);
    assert!(!table.contains('\u{1b}'), "raw escape in {table:?}");
    assert!(table.contains("\\x1b]8;;http://x\\x07click"), "{table}");
    let csv = sql(&log, "csv", q);
    assert!(csv.contains("'=HYPERLINK"), "{csv}");
    // JSON keeps the exact value (escaped by JSON itself).
    let json: Value = serde_json::from_str(&sql(&log, "json", q)).unwrap();
    assert_eq!(json[0]["note"], "=HYPERLINK(\"http://x\")");
}

/// `hvaudit sql -q ARGS... LOG`: (exit code, stdout, stderr).
fn sql_run(log: &Path, args: &[&str]) -> (Option<i32>, String, String) {
    let out = hvaudit()
        .args(["sql", "-q"])
        .args(args)
        .arg(log)
        .output()
        .unwrap();
    (
        out.status.code(),
        String::from_utf8(out.stdout).unwrap(),
        String::from_utf8(out.stderr).unwrap(),
    )
}

const SCRIPT: &str = "SELECT count(*) AS n FROM events; \
     CREATE VIEW ids AS SELECT id FROM events; \
     SELECT id FROM ids ORDER BY id; \
     SELECT id FROM ids WHERE false";

#[test]
fn several_statements_make_one_document_per_format() {
    let dir = tempfile::tempdir().unwrap();
    let log = log(dir.path());
    // json: one array per statement (the view's too) in one array.
    let json: Value = serde_json::from_str(&sql(&log, "json", SCRIPT)).unwrap();
    assert_eq!(
        json,
        serde_json::json!([[{"n": 2}], [], [{"id": "e1"}, {"id": "e2"}], []])
    );
    // One statement stays a plain array.
    let one: Value = serde_json::from_str(&sql(&log, "json", "SELECT 1 AS a")).unwrap();
    assert_eq!(one, serde_json::json!([{"a": 1}]));
    // ndjson: every row in order, each line an object.
    let rows: Vec<Value> = sql(&log, "ndjson", SCRIPT)
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(
        rows,
        [
            serde_json::json!({"n": 2}),
            serde_json::json!({"id": "e1"}),
            serde_json::json!({"id": "e2"})
        ]
    );
    // csv: a header and rows per statement with columns, a blank line
    // between two; the view writes nothing.
    assert_eq!(sql(&log, "csv", SCRIPT), "n\n2\n\nid\ne1\ne2\n\nid\n");
    let table = sql(&log, "table", SCRIPT);
    assert_eq!(table.matches("| id |").count(), 2, "{table}");
    assert!(table.trim_end().ends_with("0 rows"), "{table}");
}

#[test]
fn output_to_a_file_is_replaced_only_when_every_statement_ran() {
    let dir = tempfile::tempdir().unwrap();
    let log = log(dir.path());
    let out = dir.path().join("out.json");
    let path = out.to_str().unwrap();
    let (code, stdout, err) = sql_run(&log, &["--format", "json", "-o", path, "-e", SCRIPT]);
    assert_eq!(code, Some(0), "{err}");
    assert_eq!(stdout, "");
    let written: Value = serde_json::from_str(&std::fs::read_to_string(&out).unwrap()).unwrap();
    assert_eq!(written[2], serde_json::json!([{"id": "e1"}, {"id": "e2"}]));
    // A later statement fails: the file keeps its old content, no temp
    // file is left.
    let before = std::fs::read(&out).unwrap();
    let (code, _, err) = sql_run(
        &log,
        &[
            "--format",
            "json",
            "-o",
            path,
            "-e",
            "SELECT 1; SELECT * FROM nowhere",
        ],
    );
    assert_eq!(code, Some(2), "{err}");
    assert!(err.contains("nowhere"), "{err}");
    assert_eq!(std::fs::read(&out).unwrap(), before);
    // The log, the output and the output's MAC file: no temp file.
    let names: Vec<_> = std::fs::read_dir(dir.path()).unwrap().collect();
    assert_eq!(names.len(), 3, "{names:?}");
    // From a query file too.
    let queries = dir.path().join("q.sql");
    std::fs::write(&queries, "SELECT id FROM events ORDER BY id;\n").unwrap();
    let csv = dir.path().join("out.csv");
    let (code, _, err) = sql_run(
        &log,
        &[
            "--format",
            "csv",
            "-f",
            queries.to_str().unwrap(),
            "-o",
            csv.to_str().unwrap(),
        ],
    );
    assert_eq!(code, Some(0), "{err}");
    assert_eq!(std::fs::read_to_string(&csv).unwrap(), "id\ne1\ne2\n");
}

#[test]
fn an_output_that_is_the_log_or_the_query_file_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let log = log(dir.path());
    let before = std::fs::read(&log).unwrap();
    let (code, _, err) = sql_run(&log, &["-o", log.to_str().unwrap(), "-e", "SELECT 1"]);
    assert_eq!(code, Some(2), "{err}");
    assert!(err.contains("destroy the log"), "{err}");
    assert_eq!(std::fs::read(&log).unwrap(), before);
    let queries = dir.path().join("q.sql");
    std::fs::write(&queries, "SELECT 1;\n").unwrap();
    let q = queries.to_str().unwrap();
    let (code, _, err) = sql_run(&log, &["-o", q, "-f", q]);
    assert_eq!(code, Some(2), "{err}");
    assert!(err.contains("destroy the queries"), "{err}");
    assert_eq!(std::fs::read_to_string(&queries).unwrap(), "SELECT 1;\n");
    // The prompt writes to the terminal: -o needs -e or -f.
    let (code, _, err) = sql_run(&log, &["-o", dir.path().join("x").to_str().unwrap()]);
    assert_eq!(code, Some(2), "{err}");
    assert!(!dir.path().join("x").exists());
}

#[test]
fn parquet_holds_one_result_with_every_type() {
    use datafusion::arrow::array::{Array, AsArray};
    use datafusion::arrow::datatypes::{DataType, Int64Type};
    use datafusion::parquet::arrow::arrow_reader::ParquetRecordBatchReaderBuilder;
    let dir = tempfile::tempdir().unwrap();
    let log = log(dir.path());
    let out = dir.path().join("out.parquet");
    let script = format!("CREATE VIEW v AS SELECT 1 AS x; {UNION}");
    let (code, _, err) = sql_run(
        &log,
        &[
            "--format",
            "parquet",
            "-o",
            out.to_str().unwrap(),
            "-e",
            &script,
        ],
    );
    assert_eq!(code, Some(0), "{err}");
    let file = std::fs::File::open(&out).unwrap();
    let batches: Vec<_> = ParquetRecordBatchReaderBuilder::try_new(file)
        .unwrap()
        .build()
        .unwrap()
        .collect::<Result<_, _>>()
        .unwrap();
    let b = datafusion::arrow::compute::concat_batches(&batches[0].schema(), &batches).unwrap();
    assert_eq!(b.num_rows(), 2);
    let text = |name: &str, row: usize| {
        let col = b.column_by_name(name).unwrap();
        let col = datafusion::arrow::compute::cast(col, &DataType::Utf8).unwrap();
        col.as_string::<i32>().value(row).to_string()
    };
    assert_eq!(text("id", 0), "e1");
    // The JSON functions' union values as their JSON text.
    assert_eq!((text("n", 0), text("n", 1)), ("7".into(), "2.5".into()));
    assert_eq!(text("t", 0), "\"t1\"");
    assert_eq!(text("o", 0), r#"{"k":[1,true]}"#);
    assert!(b.column_by_name("o").unwrap().is_null(1));
    // A list stays a list.
    let a = b.column_by_name("a").unwrap().as_list::<i32>().value(0);
    assert_eq!(a.as_primitive::<Int64Type>().values(), &[1, 2]);
    // Two results cannot share one file: nothing is written.
    let two = dir.path().join("two.parquet");
    let (code, _, err) = sql_run(
        &log,
        &[
            "--format",
            "parquet",
            "-o",
            two.to_str().unwrap(),
            "-e",
            "SELECT 1; SELECT 2",
        ],
    );
    assert_eq!(code, Some(2), "{err}");
    assert!(err.contains("one result"), "{err}");
    assert!(!two.exists());
    // The prompt has no file to write.
    let (code, _, err) = sql_run(&log, &["--format", "parquet"]);
    assert_eq!(code, Some(2), "{err}");
    assert!(err.contains("-e or -f"), "{err}");
}

/// The rule files' helpers work in queries too, expanded as in the files.
#[test]
fn queries_may_call_the_rule_helpers() {
    let dir = tempfile::tempdir().unwrap();
    let log = log(dir.path());
    let out = sql(
        &log,
        "csv",
        "SELECT id, instant_text(created_at) AS at, seq_of(time_order(created_ns, seq)) = seq AS same \
         FROM events ORDER BY id",
    );
    assert_eq!(
        out,
        "id,at,same\ne1,2026-07-14T10:00:00.000Z,true\ne2,2026-07-14T10:00:00.000Z,true\n"
    );
}
