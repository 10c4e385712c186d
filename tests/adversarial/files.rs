//! Damaged files and directories: compressed streams cut or corrupted,
//! Parquet of the wrong shape or forged, entries that cannot be read.

use super::*;
use crate::common::hvaudit_bound_by_modes;

#[test]
fn truncated_and_corrupt_gzip_and_zstd_keep_the_rest_and_say_where() {
    let dir = tempfile::tempdir().unwrap();
    let (gz, zst) = compressed(&numbered("c", 5000));
    let flip = |bytes: &[u8]| {
        let mut b = bytes.to_vec();
        let mid = b.len() / 2;
        for x in &mut b[mid..mid + 64] {
            *x ^= 0xa5;
        }
        b
    };
    let cases: Vec<(&str, Vec<u8>)> = vec![
        ("cut.gz", gz[..gz.len() / 2].to_vec()),
        ("cut.zst", zst[..zst.len() / 2].to_vec()),
        ("flipped.gz", flip(&gz)),
        ("flipped.zst", flip(&zst)),
        ("magic-only.gz", vec![0x1f, 0x8b]),
        ("magic-only.zst", vec![0x28, 0xb5, 0x2f, 0xfd]),
    ];
    let (good_gz, _) = compressed(&numbered("ok", 100));
    let good = write(dir.path(), "good.gz", &good_gz);
    for (name, bytes) in cases {
        let f = write(dir.path(), name, &bytes);
        let ing = read_with(&[f.clone(), good.clone()], &crate::common::test_reading());
        let broken = &ing.inputs[0];
        // Told where: an input error with the line reached, or the garbage
        // the decoder let through as located bad lines.
        let err = broken.error.as_deref().unwrap_or_default();
        assert!(
            err.contains("stream") || broken.bad_lines > 0,
            "{name}: nothing said about the damage: {broken:?}"
        );
        if name.starts_with("cut") || name.starts_with("flipped") {
            assert!(
                broken.events > 100,
                "{name}: lines before the damage kept: {broken:?}"
            );
        }
        let fine = &ing.inputs[1];
        assert_eq!((fine.events, fine.error.as_deref()), (100, None), "{name}");
        let (_, _, stderr) = run_ok(&[os("audit"), f.as_os_str(), good.as_os_str()], &[0, 1]);
        assert!(stderr.contains(name), "{name}: {stderr}");
    }
}

fn parquet_file(
    path: &Path,
    batch: &datafusion::arrow::record_batch::RecordBatch,
    meta: Option<Vec<(&str, String)>>,
) {
    use datafusion::parquet::file::metadata::KeyValue;
    use datafusion::parquet::file::properties::WriterProperties;
    let props = meta.map(|kv| {
        WriterProperties::builder()
            .set_key_value_metadata(Some(
                kv.into_iter()
                    .map(|(k, v)| KeyValue::new(k.into(), v))
                    .collect(),
            ))
            .build()
    });
    let file = std::fs::File::create(path).unwrap();
    let mut w =
        datafusion::parquet::arrow::ArrowWriter::try_new(file, batch.schema(), props).unwrap();
    w.write(batch).unwrap();
    w.close().unwrap();
}

/// A map with integer keys: valid Arrow and Parquet, but no JSON object.
fn int_keyed_map() -> datafusion::arrow::array::MapArray {
    use datafusion::arrow::array::{Int32Builder, MapBuilder, StringBuilder};
    let mut b = MapBuilder::new(None, Int32Builder::new(), StringBuilder::new());
    b.keys().append_value(1);
    b.values().append_value("x");
    b.append(true).unwrap();
    b.finish()
}

#[test]
fn parquet_with_wrong_column_types_is_rejected_row_by_row() {
    use datafusion::arrow::array::{ArrayRef, Float64Array, Int64Array, StringArray};
    use datafusion::arrow::record_batch::RecordBatch;
    use std::sync::Arc;
    let dir = tempfile::tempdir().unwrap();
    let s = |v: &[&str]| Arc::new(StringArray::from(v.to_vec())) as ArrayRef;
    let wrong = RecordBatch::try_from_iter(vec![
        ("spec_version", s(&["0.2", "0.2"])),
        ("id", Arc::new(Int64Array::from(vec![1, 2])) as ArrayRef),
        ("type", s(&["task.progress", "task.progress"])),
        ("source", s(&["a", "a"])),
        (
            "created_at",
            s(&["2026-07-14T10:00:00Z", "2026-07-14T10:00:00Z"]),
        ),
        ("payload", s(&["{}", "{}"])),
    ])
    .unwrap();
    let wrong_ts = RecordBatch::try_from_iter(vec![
        ("spec_version", s(&["0.2", "0.2"])),
        ("id", s(&["w1", "w2"])),
        ("type", s(&["task.progress", "task.progress"])),
        ("source", s(&["a", "a"])),
        (
            "created_at",
            Arc::new(Float64Array::from(vec![1.7e9, f64::NAN])) as ArrayRef,
        ),
        ("payload", s(&["{}", "not json"])),
    ])
    .unwrap();
    // A column type that has no JSON form: the rows cannot be checked.
    let no_json = RecordBatch::try_from_iter(vec![
        ("id", s(&["n1"])),
        ("odd", Arc::new(int_keyed_map()) as ArrayRef),
    ])
    .unwrap();
    let p1 = dir.path().join("wrong.parquet");
    let p2 = dir.path().join("wrong_ts.parquet");
    let p3 = dir.path().join("no_json.parquet");
    parquet_file(&p1, &wrong, None);
    parquet_file(&p2, &wrong_ts, None);
    parquet_file(&p3, &no_json, None);
    let junk = write(
        dir.path(),
        "junk.parquet",
        b"PAR1 this is not parquet at all PAR1",
    );
    let good = write(dir.path(), "good.ndjson", &numbered("ok", 3));
    let ing = read_with(
        &[
            p1.clone(),
            p2.clone(),
            junk.clone(),
            p3.clone(),
            good.clone(),
        ],
        &crate::common::test_reading(),
    );
    let bad = query(
        &ing,
        "SELECT src_file, src_line, reason FROM bad_lines ORDER BY seq",
    );
    let at = |file: &Path, line: i64| {
        bad.iter()
            .find(|r| r["src_file"] == file.display().to_string() && r["src_line"] == line)
            .map(|r| r["reason"].as_str().unwrap().to_string())
            .unwrap_or_else(|| panic!("no bad row {}:{line} in {bad:?}", file.display()))
    };
    assert!(at(&p1, 1).contains("field id must be a string, found a number"));
    assert!(at(&p1, 2).contains("field id must be a string"));
    assert!(at(&p2, 1).contains("field created_at must be a string, found a number"));
    assert!(!at(&p2, 2).is_empty());
    assert_eq!(ing.inputs[0].bad_lines + ing.inputs[1].bad_lines, 4);
    let e = ing.inputs[2].error.as_deref().unwrap_or_default();
    assert!(e.contains("not a readable Parquet file"), "{e}");
    // A map with integer keys is written with text keys: the row is a line
    // like any other, counted, and checked (no envelope: a bad line).
    let odd = &ing.inputs[3];
    assert_eq!((odd.lines, odd.error.as_deref()), (1, None), "{odd:?}");
    assert_eq!(odd.lines, odd.events + odd.bad_lines, "{odd:?}");
    assert_eq!(ing.inputs[4].events, 3, "the good file next to them");
    run_ok(
        &[
            os("audit"),
            p1.as_os_str(),
            p2.as_os_str(),
            junk.as_os_str(),
            p3.as_os_str(),
            good.as_os_str(),
        ],
        &[0, 1],
    );
}

/// `lines` (NDJSON objects whose members are all strings, but `payload`,
/// an object) as Parquet from another pipeline: one text column a member,
/// `payload` as JSON text, and an `odd` column `map<int32,string>` holding
/// `{1: "x"}`, which no JSON writer can write as it is. The same lines with
/// `"odd":{"1":"x"}` added, as the NDJSON twin.
fn parquet_twin(dir: &Path, lines: &str) -> (PathBuf, PathBuf) {
    use datafusion::arrow::array::{
        ArrayRef, Int32Builder, MapBuilder, StringArray, StringBuilder,
    };
    use datafusion::arrow::record_batch::RecordBatch;
    use std::sync::Arc;
    let rows: Vec<serde_json::Map<String, Value>> = lines
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    let mut names: Vec<String> = rows.iter().flat_map(|r| r.keys().cloned()).collect();
    names.sort();
    names.dedup();
    let mut columns: Vec<(String, ArrayRef)> = names
        .iter()
        .map(|n| {
            let cells: Vec<Option<String>> = rows
                .iter()
                .map(|r| match r.get(n) {
                    None => None,
                    Some(Value::String(s)) if n != "payload" => Some(s.clone()),
                    Some(v) => {
                        assert_eq!(n, "payload", "only the payload is JSON text");
                        Some(v.to_string())
                    }
                })
                .collect();
            (n.clone(), Arc::new(StringArray::from(cells)) as ArrayRef)
        })
        .collect();
    let mut odd = MapBuilder::new(None, Int32Builder::new(), StringBuilder::new());
    for _ in &rows {
        odd.keys().append_value(1);
        odd.values().append_value("x");
        odd.append(true).unwrap();
    }
    columns.push(("odd".into(), Arc::new(odd.finish())));
    let batch = RecordBatch::try_from_iter(columns).unwrap();
    let parquet = dir.join("twin.parquet");
    parquet_file(&parquet, &batch, None);
    let ndjson: String = rows
        .into_iter()
        .map(|mut r| {
            r.insert("odd".into(), json!({"1": "x"}));
            format!("{}\n", Value::Object(r))
        })
        .collect();
    (parquet, write(dir, "twin.ndjson", ndjson.as_bytes()))
}

/// The findings of an audit of `log` (rule, severity, fingerprint), its
/// exit code under `--fail-on critical`, and its accounting.
fn audit_of(log: &Path) -> (Vec<(String, String, String)>, i32, Value) {
    let (code, stdout, _) = run_ok(
        &[
            os("audit"),
            os("--format"),
            os("json"),
            os("--fail-on"),
            os("critical"),
            log.as_os_str(),
        ],
        &[0, 1],
    );
    let report: Value = serde_json::from_str(&stdout).unwrap();
    let mut findings: Vec<_> = report["findings"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| {
            let s = |k: &str| f[k].as_str().unwrap().to_string();
            (s("rule"), s("severity"), s("fingerprint"))
        })
        .collect();
    findings.sort();
    let counts = json!([
        report["inputs"][0]["lines"],
        report["inputs"][0]["events"],
        report["inputs"][0]["redeliveries"],
        report["inputs"][0]["bad_lines"],
    ]);
    (findings, code, counts)
}

/// A root, a token handed over and a replay of it, in Parquet with a column
/// JSON cannot hold as it is: the rows were dropped with a warning and the
/// gate passed. Now they are read as their NDJSON twin is: the same
/// findings (the critical replay), fingerprints, accounting and exit code.
#[test]
fn rows_with_a_column_json_cannot_hold_are_audited_as_their_ndjson_twin() {
    let dir = tempfile::tempdir().unwrap();
    let lines = std::fs::read_to_string(
        Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("queries/tests/token.replayed/second_issuance_not_a_redelivery.ndjson"),
    )
    .unwrap();
    let (parquet, ndjson) = parquet_twin(dir.path(), &lines);
    let (findings, code, counts) = audit_of(&parquet);
    assert!(
        findings
            .iter()
            .any(|(rule, sev, _)| rule == "token.replayed" && sev == "critical"),
        "{findings:?}"
    );
    assert_eq!(code, 1, "the gate fails on the replay");
    assert_eq!((findings, code, counts), audit_of(&ndjson));
}

/// A payload naming `task_id` twice is a bad line in NDJSON; as a Parquet
/// cell it was re-parsed, the last key winning, into an event of another
/// task. Both twins now refuse it, for the same reason.
#[test]
fn a_payload_naming_a_key_twice_is_refused_in_parquet_as_in_ndjson() {
    let dir = tempfile::tempdir().unwrap();
    let dup = r#"{"task_id":"pt","task_id":"other"}"#;
    let line = |id: &str, ty: &str, at: &str, payload: &str| {
        format!(
            r#"{{"spec_version":"0.2","id":"{id}","type":"{ty}","source":"agent:a","created_at":"{at}","task_id":"pt","payload":{payload}}}"#
        )
    };
    let ndjson = write(
        dir.path(),
        "twin.ndjson",
        format!(
            "{}\n{}\n",
            line(
                "ok1",
                "task.submitted",
                "2026-07-14T10:00:00Z",
                r#"{"task_id":"pt"}"#
            ),
            line("two", "task.started", "2026-07-14T10:00:01Z", dup)
        )
        .as_bytes(),
    );
    let parquet = dir.path().join("twin.parquet");
    {
        use datafusion::arrow::array::{ArrayRef, StringArray};
        use datafusion::arrow::record_batch::RecordBatch;
        use std::sync::Arc;
        let s = |v: [&str; 2]| Arc::new(StringArray::from(v.to_vec())) as ArrayRef;
        let batch = RecordBatch::try_from_iter(vec![
            ("spec_version", s(["0.2", "0.2"])),
            ("id", s(["ok1", "two"])),
            ("type", s(["task.submitted", "task.started"])),
            ("source", s(["agent:a", "agent:a"])),
            (
                "created_at",
                s(["2026-07-14T10:00:00Z", "2026-07-14T10:00:01Z"]),
            ),
            ("task_id", s(["pt", "pt"])),
            ("payload", s([r#"{"task_id":"pt"}"#, dup])),
        ])
        .unwrap();
        parquet_file(&parquet, &batch, None);
    }
    let bad_reason = |log: &Path| {
        let ing = read_with(&[log.to_path_buf()], &crate::common::test_reading());
        assert_eq!(
            (ing.inputs[0].events, ing.inputs[0].bad_lines),
            (1, 1),
            "{:?}",
            ing.inputs[0]
        );
        let bad = query(&ing, "SELECT reason FROM bad_lines");
        bad[0]["reason"].as_str().unwrap().to_string()
    };
    let (from_parquet, from_ndjson) = (bad_reason(&parquet), bad_reason(&ndjson));
    assert!(from_parquet.contains("task_id"), "{from_parquet}");
    assert_eq!(from_parquet, from_ndjson);
}

/// Regression: a Parquet file that claims to be hvaudit's own layout was
/// trusted for its counts; a negative `redeliveries` overflowed the
/// accounting (a panic in debug builds, nonsense totals in release). Now
/// nothing it claims is believed without convert's MAC: it is read as
/// Parquet from elsewhere, and the accounting holds (`read_with`). Signed
/// with the store key, as a convert bug would leave it, its counts are
/// still refused.
#[test]
fn a_forged_hvaudit_parquet_cannot_break_the_accounting() {
    use datafusion::arrow::array::{ArrayRef, Int64Array};
    use datafusion::arrow::record_batch::RecordBatch;
    use datafusion::parquet::arrow::arrow_reader::ParquetRecordBatchReaderBuilder;
    use std::sync::Arc;
    let dir = tempfile::tempdir().unwrap();
    let real = dir.path().join("real.parquet");
    hvaudit()
        .args(["convert", "-q", "-o"])
        .arg(&real)
        .arg(upstream("harmovela-0.2/fixtures/task-lifecycle.ndjson"))
        .assert()
        .success();
    let reader =
        ParquetRecordBatchReaderBuilder::try_new(std::fs::File::open(&real).unwrap()).unwrap();
    let meta: Vec<(String, String)> = reader
        .metadata()
        .file_metadata()
        .key_value_metadata()
        .unwrap()
        .iter()
        .filter(|kv| kv.key != "ARROW:schema")
        .map(|kv| (kv.key.clone(), kv.value.clone().unwrap_or_default()))
        .collect();
    let batch: RecordBatch = reader.build().unwrap().next().unwrap().unwrap();
    for (col, value) in [
        ("redeliveries", -5),
        ("seq", -1),
        ("redeliveries", i64::MAX),
    ] {
        let at = batch.schema().index_of(col).unwrap();
        let mut cols = batch.columns().to_vec();
        let mut values = vec![0i64; batch.num_rows()];
        if col == "seq" {
            values = (0..batch.num_rows() as i64).collect();
        }
        values[0] = value;
        cols[at] = Arc::new(Int64Array::from(values)) as ArrayRef;
        let forged = RecordBatch::try_new(batch.schema(), cols).unwrap();
        let path = dir.path().join("forged.parquet");
        parquet_file(
            &path,
            &forged,
            Some(meta.iter().map(|(k, v)| (k.as_str(), v.clone())).collect()),
        );
        let good = write(dir.path(), "good.ndjson", &numbered("ok", 3));
        let read = || {
            read_with(
                &[path.clone(), good.clone()],
                &crate::common::test_reading(),
            )
        };
        let ing = read();
        let e = ing.inputs[0].error.as_deref().unwrap_or_default();
        assert!(
            e.contains("read as Parquet from elsewhere"),
            "{col}={value}: {e}"
        );
        assert_eq!(ing.inputs[1].events, 3);
        run_ok(&[os("audit"), path.as_os_str(), good.as_os_str()], &[0, 1]);
        crate::common::sign(&path);
        let ing = read();
        let e = ing.inputs[0].error.as_deref().unwrap_or_default();
        assert!(
            e.contains(&format!("column {col}")) || e.contains("redeliveries sums"),
            "{col}={value}: {e}"
        );
        run_ok(&[os("audit"), path.as_os_str(), good.as_os_str()], &[0, 1]);
        std::fs::remove_file(hvaudit::store_key::mac_path(&path)).unwrap();
    }
}

/// A log whose name starts with a dot, or that sits in a hidden directory,
/// is not read in a walk, but it is listed with the reason, so that a
/// reader of the report sees it was passed over; hvaudit's own temporary
/// files are passed over without a word. Named on the command line, it is
/// read.
#[test]
fn hidden_files_in_a_walk_are_listed_as_passed_over() {
    let dir = tempfile::tempdir().unwrap();
    let logs = dir.path().join("logs");
    std::fs::create_dir_all(logs.join(".hidden")).unwrap();
    write(&logs, "a.ndjson", &numbered("ok", 3));
    let evidence = write(&logs, ".evidence.ndjson", &numbered("dot", 2));
    write(&logs.join(".hidden"), "x.ndjson", &numbered("hid", 2));
    write(&logs, ".hvaudit-1-2.tmp", b"partial");
    let ing = read_with(std::slice::from_ref(&logs), &crate::common::test_reading());
    assert_eq!(ing.total().events, 3);
    let listed: Vec<(String, String)> = ing
        .skipped
        .iter()
        .map(|s| (s.path.clone(), s.reason.clone()))
        .collect();
    let reason = |name: &str| {
        listed
            .iter()
            .find(|(p, _)| p.ends_with(name))
            .map(|(_, r)| r.clone())
            .unwrap_or_else(|| panic!("{name} not listed: {listed:?}"))
    };
    assert!(reason(".evidence.ndjson").contains("hidden file"));
    assert!(reason(".hidden").contains("hidden directory"));
    assert!(
        !listed
            .iter()
            .any(|(p, _)| p.contains("x.ndjson") || p.contains(".hvaudit-")),
        "{listed:?}"
    );
    let (_, stdout, _) = run_ok(
        &[os("audit"), os("--format"), os("json"), logs.as_os_str()],
        &[0, 1],
    );
    let report: Value = serde_json::from_str(&stdout).unwrap();
    let skipped: Vec<&str> = report["inputs"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|i| i["format"] == "skipped")
        .map(|i| i["path"].as_str().unwrap())
        .collect();
    assert_eq!(skipped.len(), 2, "{skipped:?}");
    let named = read_with(&[evidence], &crate::common::test_reading());
    assert_eq!(named.total().events, 2);
}

#[test]
fn unreadable_entries_loops_and_empty_directories_are_skipped_and_named() {
    use std::os::unix::fs::{PermissionsExt, symlink};
    let dir = tempfile::tempdir().unwrap();
    let logs = dir.path().join("logs");
    std::fs::create_dir(&logs).unwrap();
    write(&logs, "a.ndjson", &numbered("ok", 3));
    symlink(
        dir.path().join("nowhere.ndjson"),
        logs.join("dangling.ndjson"),
    )
    .unwrap();
    symlink(&logs, logs.join("loop")).unwrap();
    symlink(logs.join("self.ndjson"), logs.join("self.ndjson")).unwrap();
    let empty = dir.path().join("empty");
    std::fs::create_dir(&empty).unwrap();

    let ing = read_with(std::slice::from_ref(&logs), &crate::common::test_reading());
    let skipped = |name: &str| {
        ing.skipped
            .iter()
            .find(|s| s.path.ends_with(name))
            .map(|s| s.reason.clone())
            .unwrap_or_else(|| {
                panic!(
                    "{name} not reported: {:?}",
                    ing.skipped
                        .iter()
                        .map(|s| (&s.path, &s.reason))
                        .collect::<Vec<_>>()
                )
            })
    };
    assert!(skipped("dangling.ndjson").contains("No such file"));
    assert!(skipped("loop").contains("symbolic link loop"));
    assert!(skipped("self.ndjson").contains("symbolic links"));
    assert_eq!(ing.total().events, 3);
    let (_, _, stderr) = run_ok(&[os("audit"), logs.as_os_str()], &[0, 1]);
    assert!(
        stderr.contains("skipped") && stderr.contains("dangling.ndjson"),
        "{stderr}"
    );

    // An empty directory is an error (a gate must not pass on nothing),
    // unless allowed; then it is said to be empty.
    let (_, _, stderr) = run_ok(&[os("audit"), empty.as_os_str()], &[2]);
    assert!(stderr.contains("holds no log file"), "{stderr}");
    let allowed = IngestOptions {
        allow_empty: true,
        ..crate::common::test_reading()
    };
    let none = read_with(std::slice::from_ref(&empty), &allowed);
    assert_eq!(none.total().lines, 0);
    assert!(none.skipped[0].reason.contains("no log files"));
    let (_, stdout, stderr) = run_ok(&[os("audit"), os("--allow-empty"), empty.as_os_str()], &[0]);
    assert!(stderr.contains("no log files"), "{stderr}");
    assert!(stdout.contains("No events"), "{stdout}");

    // A file its mode makes unreadable, checked through the binary: the
    // tests may run as root, whom modes do not stop (hvaudit_bound_by_modes
    // then takes that power away).
    // It might hold the finding: the run stops (exit 2) and says how to go
    // on; `--allow-unreadable` audits the rest and lists it as skipped.
    let locked = write(&logs, "locked.ndjson", &numbered("locked", 2));
    std::fs::set_permissions(&locked, std::fs::Permissions::from_mode(0o000)).unwrap();
    let out = hvaudit_bound_by_modes()
        .args(["audit", "-q", "--format", "json", "--fail-on", "none"])
        .arg(&logs)
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{out:?}");
    assert!(
        stderr.contains("locked.ndjson") && stderr.contains("--allow-unreadable"),
        "{stderr}"
    );
    let out = hvaudit_bound_by_modes()
        .args(["audit", "-q", "--format", "json", "--fail-on", "none"])
        .arg("--allow-unreadable")
        .arg(&logs)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0), "{out:?}");
    let report: Value = serde_json::from_slice(&out.stdout).unwrap();
    let inputs = report["inputs"].as_array().unwrap();
    let locked_input = inputs
        .iter()
        .find(|i| i["path"].as_str().unwrap().ends_with("locked.ndjson"))
        .unwrap_or_else(|| panic!("locked.ndjson not reported: {inputs:?}"));
    assert_eq!(locked_input["format"], "skipped", "{locked_input}");
    let why = locked_input["error"].as_str().unwrap_or_default();
    assert!(why.contains("ermission denied"), "{locked_input}");
    let events: u64 = inputs.iter().map(|i| i["events"].as_u64().unwrap()).sum();
    assert_eq!(events, 3, "{inputs:?}");

    // Paths named on the command line that cannot be used: exit 2, and why.
    for (name, why) in [
        ("dangling.ndjson", "symbolic link"),
        ("self.ndjson", "symbolic link"),
        ("missing.ndjson", "no such file"),
    ] {
        let (_, _, stderr) = run_ok(&[os("audit"), logs.join(name).as_os_str()], &[2]);
        assert!(
            stderr.contains(why) && stderr.contains(name),
            "{name}: {stderr}"
        );
    }
}

/// The walk finds and sniffs a log; the reader opens its name again. A name
/// swapped in between for a link (to `/dev/zero`, which never ends, or to
/// another log) was read as whatever it led to. The reader now reads only
/// the file that was found, NDJSON and Parquet alike, and says why not.
#[test]
fn a_log_swapped_after_the_walk_is_not_read() {
    use hvaudit::ingest::{ingest_inputs, inputs::expand};
    let dir = tempfile::tempdir().unwrap();
    let logs = dir.path().join("logs");
    std::fs::create_dir(&logs).unwrap();
    write(&logs, "a.ndjson", &numbered("ok", 3));
    write(&logs, "b.parquet", b"");
    let parquet_source = write(dir.path(), "src.ndjson", &numbered("pq", 2));
    hvaudit()
        .args(["convert", "-q", "-o"])
        .arg(logs.join("b.parquet"))
        .arg(&parquet_source)
        .assert()
        .success();
    let other = write(dir.path(), "other.ndjson", &numbered("intruder", 5));
    let (found, skipped) = expand(std::slice::from_ref(&logs), false, false).unwrap();
    assert_eq!(found.len(), 2, "{found:?}");
    // Both names now lead elsewhere: a link to another log, a new file.
    std::fs::remove_file(logs.join("a.ndjson")).unwrap();
    std::os::unix::fs::symlink(&other, logs.join("a.ndjson")).unwrap();
    // (Renamed over it, so that the new file cannot reuse the old inode.)
    std::fs::copy(&other, dir.path().join("new")).unwrap();
    std::fs::rename(dir.path().join("new"), logs.join("b.parquet")).unwrap();
    let ing = ingest_inputs(&found, skipped.clone(), &crate::common::test_reading()).unwrap();
    for input in &ing.inputs {
        let e = input.error.as_deref().unwrap_or_default();
        assert!(e.contains("replaced after it was found"), "{input:?}");
    }
    assert_eq!(
        ing.total().events,
        0,
        "nothing of the intruder's log is read"
    );
    // A FIFO (whose open would wait for a writer) and `/dev/zero` (which
    // never ends) in the names' place: refused at once.
    std::fs::remove_file(logs.join("a.ndjson")).unwrap();
    let made = std::process::Command::new("mkfifo")
        .arg(logs.join("a.ndjson"))
        .status()
        .unwrap();
    assert!(made.success());
    std::fs::remove_file(logs.join("b.parquet")).unwrap();
    std::os::unix::fs::symlink("/dev/zero", logs.join("b.parquet")).unwrap();
    let ing = ingest_inputs(&found, skipped, &crate::common::test_reading()).unwrap();
    for input in &ing.inputs {
        let e = input.error.as_deref().unwrap_or_default();
        assert!(e.contains("replaced after it was found"), "{input:?}");
    }
}

/// A scheduled job that writes its report and its rejected lines beside
/// the logs audits the same directory the next day: what hvaudit wrote
/// (its MAC file says so, checked with the store key) is listed as passed
/// over, not read as a log, and the same `-o` works again. A log beside a
/// MAC file copied from a real report is read all the same, and a report
/// named on the command line is read as asked.
#[test]
fn reports_written_beside_the_logs_are_not_read_as_logs_the_next_day() {
    let dir = tempfile::tempdir().unwrap();
    let logs = dir.path().join("logs");
    std::fs::create_dir_all(&logs).unwrap();
    let sample =
        Path::new(env!("CARGO_MANIFEST_DIR")).join("samples/incident/harmovela-0.2.ndjson");
    std::fs::copy(&sample, logs.join("harmovela-0.2.ndjson")).unwrap();
    let (report, rejected) = (logs.join("report.json"), logs.join("rejected.ndjson"));
    let nightly = || {
        let args = [
            os("audit"),
            logs.as_os_str(),
            os("--format"),
            os("json"),
            os("-o"),
            report.as_os_str(),
            os("--bad-lines"),
            rejected.as_os_str(),
        ];
        let (code, _, _) = run_ok(&args, &[0, 1]);
        let v: Value = serde_json::from_str(&std::fs::read_to_string(&report).unwrap()).unwrap();
        (code, v)
    };
    let (day1, first) = nightly();
    assert!(first["accounting"]["bad_lines"].as_u64().unwrap() > 0);
    let (day2, second) = nightly();
    assert_eq!(day1, day2);
    assert_eq!(first["findings"], second["findings"]);
    assert_eq!(first["accounting"], second["accounting"]);
    let passed_over: Vec<&str> = second["inputs"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|i| {
            i["error"]
                .as_str()
                .is_some_and(|e| e.contains("written by hvaudit"))
        })
        .map(|i| i["path"].as_str().unwrap())
        .collect();
    assert_eq!(passed_over.len(), 2, "{}", second["inputs"]);
    // A MAC file copied from the report vouches for nothing else.
    let planted = write(
        dir.path().join("logs").as_path(),
        "planted.ndjson",
        &numbered("p", 3),
    );
    std::fs::copy(
        hvaudit::store_key::mac_path(&report),
        hvaudit::store_key::mac_path(&planted),
    )
    .unwrap();
    let (_, third) = nightly();
    let events = |v: &Value| v["accounting"]["events"].as_u64().unwrap();
    assert_eq!(events(&third), events(&first) + 3);
    // Named on the command line, the report is read (as the bad lines
    // JSON that is not NDJSON makes).
    let (_, out, _) = run_ok(
        &[
            os("audit"),
            os("--format"),
            os("json"),
            os("--allow-empty"),
            report.as_os_str(),
        ],
        &[0, 1, 2],
    );
    let named: Value = serde_json::from_str(&out).unwrap();
    assert!(
        named["accounting"]["lines"].as_u64().unwrap() > 0,
        "{named}"
    );
}
