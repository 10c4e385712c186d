//! NDJSON -> Parquet (convert) -> the same events table.

use crate::common::hvaudit;
use crate::ingest::{query, read, upstream};

fn convert(src: &std::path::Path, out: &std::path::Path) {
    hvaudit()
        .args(["convert", "-q", "-o"])
        .arg(out)
        .arg(src)
        .assert()
        .success();
}

fn events_of(paths: &[std::path::PathBuf]) -> Vec<serde_json::Value> {
    let ing = read(paths);
    query(&ing, "SELECT * FROM events ORDER BY seq")
}

#[test]
fn parquet_round_trip_yields_the_same_events_table() {
    let dir = tempfile::tempdir().unwrap();
    let src = upstream("harmovela-0.2/fixtures");
    for out in [dir.path().join("by-day"), dir.path().join("one.parquet")] {
        convert(&src, &out);
        let before = events_of(std::slice::from_ref(&src));
        let after = events_of(std::slice::from_ref(&out));
        assert_eq!(before.len(), after.len(), "{}", out.display());
        assert_eq!(before, after, "{}", out.display());
        // A single-file output keeps rejected lines in a sibling file.
        let sibling = dir.path().join("one.bad_lines.parquet");
        let with_bad = if out.is_dir() {
            vec![out.clone()]
        } else {
            vec![out.clone(), sibling]
        };
        let ing = read(&with_bad);
        assert_eq!(
            ing.total().bad_lines,
            1,
            "rejected lines travel with the data"
        );
        assert!(ing.total().identity_holds());
    }
    // Day partitions: one directory per day of created_at.
    let days: Vec<_> = std::fs::read_dir(dir.path().join("by-day/events"))
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|n| n.starts_with("day="))
        .collect();
    // The fixtures span four days (2026-07-09, -10, -13 and -14).
    assert_eq!(days.len(), 4, "{days:?}");
}

#[test]
fn foreign_parquet_with_envelope_columns_is_normalized_like_ndjson() {
    use datafusion::arrow::array::{ArrayRef, Int64Array, StringArray};
    use datafusion::arrow::record_batch::RecordBatch;
    use std::sync::Arc;
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("other.parquet");
    let s = |v: Vec<Option<&str>>| Arc::new(StringArray::from(v)) as ArrayRef;
    let batch = RecordBatch::try_from_iter(vec![
        ("spec_version", s(vec![Some("0.2"), Some("0.2")])),
        ("id", s(vec![Some("p1"), Some("p2")])),
        (
            "type",
            s(vec![Some("task.submitted"), Some("task.submitted")]),
        ),
        ("source", s(vec![Some("agent:a"), Some("agent:a")])),
        (
            "created_at",
            s(vec![Some("2026-07-14T10:00:00Z"), Some("not a time")]),
        ),
        ("task_id", s(vec![Some("t1"), Some("t2")])),
        ("payload", s(vec![Some(r#"{"task_id":"t1"}"#), Some("{}")])),
        (
            "attempt",
            Arc::new(Int64Array::from(vec![1, 2])) as ArrayRef,
        ),
    ])
    .unwrap();
    let file = std::fs::File::create(&path).unwrap();
    let mut w =
        datafusion::parquet::arrow::ArrowWriter::try_new(file, batch.schema(), None).unwrap();
    w.write(&batch).unwrap();
    w.close().unwrap();
    let ing = read(&[path]);
    let ev = query(&ing, "SELECT id, p_task_id, src_line, extra FROM events");
    assert_eq!(ev.len(), 1);
    assert_eq!(
        ev[0]["p_task_id"], "t1",
        "payload JSON text is read as JSON"
    );
    assert_eq!(ev[0]["src_line"], 1, "row number for Parquet");
    assert_eq!(ev[0]["extra"], r#"{"attempt":1}"#);
    let bad = query(&ing, "SELECT src_line, reason FROM bad_lines");
    assert_eq!(bad[0]["src_line"], 2);
}

/// Redeliveries that convert collapsed are counted again when the Parquet
/// is read back: the accounting is the same as the NDJSON's.
#[test]
fn parquet_round_trip_keeps_the_accounting_of_redeliveries() {
    let dir = tempfile::tempdir().unwrap();
    let src = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("samples/incident");
    let out = dir.path().join("pq");
    convert(&src, &out);
    let before = read(std::slice::from_ref(&src)).total();
    let after = read(std::slice::from_ref(&out)).total();
    assert!(before.redeliveries > 0, "the sample has redeliveries");
    let figures = |t: &hvaudit::InputSummary| (t.lines, t.events, t.redeliveries, t.bad_lines);
    assert_eq!(figures(&before), figures(&after));
    assert!(after.identity_holds());
}

/// The JSON report of `hvaudit audit` on `path`, which must run every rule
/// (exit 0 or 1, never 2).
fn audit_json(path: &std::path::Path, extra: &[&str]) -> String {
    let output = hvaudit()
        .args(["audit", "-q", "--format", "json", "--fail-on", "critical"])
        .args(extra)
        .arg(path)
        .output()
        .unwrap();
    assert!(
        matches!(output.status.code(), Some(0 | 1)),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    String::from_utf8(output.stdout).unwrap()
}

/// `--in-place` scans the Parquet in every query instead of loading it; the
/// report and the answers must not notice, down to the accounting.
#[test]
fn in_place_audit_and_sql_answer_what_the_loaded_ones_answer() {
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("log.ndjson");
    let mut bytes = crate::common::synth_log(21, 120_000, 0.02);
    bytes.extend_from_slice(b"not json\n");
    std::fs::write(&log, bytes).unwrap();
    let out = dir.path().join("parquet");
    convert(&log, &out);
    let loaded = audit_json(&out, &[]);
    // The views an in-place audit computes go to the spill directory as
    // temp files, gone when it ends.
    let spill = dir.path().join("spill");
    std::fs::create_dir(&spill).unwrap();
    let spill_arg = spill.to_str().unwrap();
    let in_place = audit_json(
        &out,
        &[
            "--in-place",
            "--memory-limit",
            "256M",
            "--spill-dir",
            spill_arg,
        ],
    );
    assert!(loaded.contains("\"rule\""), "the log has findings");
    assert_eq!(loaded, in_place);
    let left: Vec<_> = std::fs::read_dir(&spill).unwrap().collect();
    assert!(left.is_empty(), "left in the spill directory: {left:?}");
    // Ad hoc SQL too, over the tables and the shared views.
    let query = "SELECT count(*) AS n, sum(redeliveries) AS r FROM events; \
                 SELECT count(*) AS tasks FROM tasks; SELECT count(*) AS bad FROM bad_lines";
    let sql = |extra: &[&str]| crate::common::sql_csv(query, extra, &out);
    let loaded = sql(&[]);
    assert!(
        loaded.contains("bad\n") && !loaded.contains("bad\n0\n"),
        "{loaded}"
    );
    assert_eq!(loaded, sql(&["--in-place"]));
    // NDJSON cannot be scanned in place: say how to get Parquet.
    for command in [
        &["audit", "-q", "--in-place"][..],
        &["sql", "-q", "--in-place", "-e", "SELECT 1"],
    ] {
        let output = hvaudit().args(command).arg(&log).output().unwrap();
        assert_eq!(output.status.code(), Some(2), "{output:?}");
        assert!(String::from_utf8_lossy(&output.stderr).contains("hvaudit convert"));
    }
    // A spill directory that does not exist is a usage error up front.
    let output = hvaudit()
        .args(["audit", "-q", "--in-place", "--spill-dir"])
        .arg(dir.path().join("missing"))
        .arg(&out)
        .output()
        .unwrap();
    assert_eq!(output.status.code(), Some(2), "{output:?}");
    assert!(String::from_utf8_lossy(&output.stderr).contains("is not a directory"));
}

/// Logs larger than memory are audited in place under `--memory-limit`, so
/// every rule must run within a pool much smaller than the data: a rule whose
/// plan holds a hash table over every event (which cannot spill) fails here.
/// Calibrated on this 100 MB log with two cores: the rule set needs more
/// than 32M; a semi-join form of integrity.conflicting_duplicate that broke
/// the 6 GB run needed more than 64M. (On a 30 MB log the two needs were
/// too close: small pools are shared by concurrent operators, so results
/// near the edge vary from run to run.)
#[test]
fn every_rule_runs_in_place_within_a_small_memory_limit() {
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("log.ndjson");
    hvaudit()
        .args(["synth", "-q", "--size", "100M", "--seed", "3", "-o"])
        .arg(&log)
        .assert()
        .success();
    let out = dir.path().join("parquet");
    convert(&log, &out);
    let loaded = audit_json(&out, &[]);
    assert_eq!(
        loaded,
        audit_json(&out, &["--in-place", "--memory-limit", "64M"])
    );
}

/// Rewrite `convert`'s events files under `dir` as an earlier layout wrote
/// them: without the nanosecond columns (layouts 1 and 2), and the category
/// columns as plain text (layout 1); the layout key says which. They are
/// signed with the tests' store key, so that they are believed (a file of
/// an earlier convert, which wrote no MAC, is read as Parquet from
/// elsewhere: `adversarial::store`).
pub fn downgrade(dir: &std::path::Path, layout: &str) {
    use datafusion::arrow::compute::cast;
    use datafusion::arrow::datatypes::{DataType, Field, Schema};
    use datafusion::parquet::arrow::ArrowWriter;
    use datafusion::parquet::file::properties::WriterProperties;
    use hvaudit::ingest::schema::NS_COLUMNS;
    use std::sync::Arc;
    for entry in walkdir::WalkDir::new(dir) {
        let path = entry.unwrap().into_path();
        let in_events = path.components().any(|c| c.as_os_str() == "events");
        let mac = path
            .file_name()
            .is_some_and(|n| n.to_string_lossy().starts_with('.'));
        if !in_events || mac || path.extension().is_none_or(|e| e != "parquet") {
            continue;
        }
        let (builder, mut metadata) = crate::common::parquet_with_metadata(&path);
        let key = metadata.iter_mut().find(|kv| kv.key == "hvaudit.layout");
        key.unwrap().value = Some(layout.into());
        let kept: Vec<usize> = (0..builder.schema().fields().len())
            .filter(|&i| {
                let name = builder.schema().field(i).name();
                // Nor did it have the identity columns.
                let added = hvaudit::ingest::schema::ADDED_IN_LAYOUT_3;
                !NS_COLUMNS.iter().any(|(ns, _)| ns == name) && !added.contains(&name.as_str())
            })
            .collect();
        let plain = |f: &Arc<Field>| match f.data_type() {
            DataType::Dictionary(_, _) if layout == "1" => {
                f.as_ref().clone().with_data_type(DataType::Utf8)
            }
            _ => f.as_ref().clone(),
        };
        let schema = Arc::new(Schema::new(
            kept.iter()
                .map(|&i| plain(&builder.schema().fields()[i]))
                .collect::<Vec<_>>(),
        ));
        let batches: Vec<_> = builder.build().unwrap().map(|b| b.unwrap()).collect();
        let props = WriterProperties::builder()
            .set_key_value_metadata(Some(metadata))
            .build();
        let mut writer = ArrowWriter::try_new(
            std::fs::File::create(&path).unwrap(),
            schema.clone(),
            Some(props),
        )
        .unwrap();
        for b in batches {
            let columns = schema
                .fields()
                .iter()
                .zip(&kept)
                .map(|(f, &i)| cast(b.column(i), f.data_type()).unwrap())
                .collect();
            let b = datafusion::arrow::record_batch::RecordBatch::try_new(schema.clone(), columns);
            writer.write(&b.unwrap()).unwrap();
        }
        writer.close().unwrap();
        crate::common::sign(&path);
    }
}

/// A report without what differs between files of the same events: their
/// sizes, and so the bytes read, and the fingerprints (made from each
/// event's digest, which files before layout 3 do not hold).
fn report_of(path: &std::path::Path, extra: &[&str]) -> serde_json::Value {
    let mut report: serde_json::Value = serde_json::from_str(&audit_json(path, extra)).unwrap();
    report.as_object_mut().unwrap().remove("inputs");
    report["accounting"]
        .as_object_mut()
        .unwrap()
        .remove("bytes");
    for f in report["findings"].as_array_mut().unwrap() {
        f.as_object_mut().unwrap().remove("fingerprint");
    }
    report
}

/// Parquet from an earlier `convert` (layout 1, text where layout 2 has
/// categories) is still audited, loaded and in place, with the same report.
#[test]
fn parquet_of_layout_1_gives_the_same_report() {
    earlier_layout_gives_the_same_report("1");
}

/// Layout 2, before the nanosecond columns: read as its microseconds, which
/// are the nanoseconds of a log written to the microsecond or coarser.
#[test]
fn parquet_of_layout_2_gives_the_same_report() {
    earlier_layout_gives_the_same_report("2");
}

fn earlier_layout_gives_the_same_report(layout: &str) {
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("log.ndjson");
    std::fs::write(&log, crate::common::synth_log(5, 20_000, 0.02)).unwrap();
    let (current, old) = (dir.path().join("current"), dir.path().join("old"));
    convert(&log, &current);
    convert(&log, &old);
    downgrade(&old, layout);
    let expected = report_of(&current, &[]);
    assert!(
        expected.to_string().contains("\"rule\""),
        "the log has findings"
    );
    assert_eq!(expected, report_of(&old, &[]));
    assert_eq!(expected, report_of(&old, &["--in-place"]));
    // The same rows, but for what those layouts did not store.
    let without_identity = |path: &std::path::PathBuf| {
        let sql = "SELECT * EXCLUDE (as_written, digest) FROM events ORDER BY seq";
        query(&read(std::slice::from_ref(path)), sql)
    };
    assert_eq!(without_identity(&current), without_identity(&old));
}

/// Shards converted by different versions, one before the nanosecond
/// columns and one after, audit as the same shards converted by this one,
/// loaded and in place.
#[test]
fn shards_of_layouts_2_and_3_audit_together() {
    let dir = tempfile::tempdir().unwrap();
    let log = String::from_utf8(crate::common::synth_log(6, 40_000, 0.0)).unwrap();
    let lines: Vec<&str> = log.lines().collect();
    let (a, b) = lines.split_at(lines.len() / 2);
    let (log_a, log_b) = (dir.path().join("a.ndjson"), dir.path().join("b.ndjson"));
    std::fs::write(&log_a, a.join("\n") + "\n").unwrap();
    std::fs::write(&log_b, b.join("\n") + "\n").unwrap();
    let (mixed, current) = (dir.path().join("mixed"), dir.path().join("current"));
    for (shard, log) in [("0", &log_a), ("1", &log_b)] {
        for out in [&mixed, &current] {
            hvaudit()
                .args(["convert", "-q", "--shard", shard, "-o"])
                .arg(out.join(shard))
                .arg(log)
                .assert()
                .success();
        }
    }
    downgrade(&mixed.join("0"), "2");
    assert_eq!(report_of(&current, &[]), report_of(&mixed, &[]));
    assert_eq!(
        report_of(&current, &["--in-place"]),
        report_of(&mixed, &["--in-place"])
    );
}

/// `hvaudit ARGS`: its exit code and stderr.
fn run(args: &[&std::ffi::OsStr]) -> (Option<i32>, String) {
    let output = hvaudit().args(args).output().unwrap();
    let stderr = String::from_utf8_lossy(&output.stderr).into_owned();
    (output.status.code(), stderr)
}

/// The files under `dir`, relative, sorted.
fn files_under(dir: &std::path::Path) -> Vec<std::path::PathBuf> {
    let mut files: Vec<_> = walkdir::WalkDir::new(dir)
        .into_iter()
        .map(|e| e.unwrap())
        .filter(|e| e.file_type().is_file())
        .map(|e| e.path().strip_prefix(dir).unwrap().to_path_buf())
        .collect();
    files.sort();
    files
}

/// A second convert run of the same shard into one directory would hold
/// every event twice under the same seqs: refused, saying what to do, and
/// the directory is left as it was. A run of its own shard is welcome.
#[test]
fn convert_refuses_a_directory_holding_a_run_of_the_same_shard() {
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("log.ndjson");
    std::fs::write(&log, crate::common::synth_log(4, 20_000, 0.0)).unwrap();
    let out = dir.path().join("parquet");
    convert(&log, &out);
    let first = files_under(&out);
    for shard in [&[][..], &["--shard".as_ref(), "0".as_ref()]] {
        let mut args: Vec<&std::ffi::OsStr> = vec!["convert".as_ref(), "-q".as_ref()];
        args.extend(shard);
        args.extend(["-o".as_ref(), out.as_os_str(), log.as_os_str()]);
        let (code, stderr) = run(&args);
        assert_eq!(code, Some(2), "{stderr}");
        assert!(
            stderr.contains("already holds a convert run of --shard 0")
                && stderr.contains("write to a new directory")
                && stderr.contains("--shard N")
                && stderr.contains("in use: 0"),
            "{stderr}"
        );
        assert_eq!(files_under(&out), first, "nothing written");
    }
    let (code, stderr) = run(&[
        "convert".as_ref(),
        "-q".as_ref(),
        "--shard".as_ref(),
        "3".as_ref(),
        "-o".as_ref(),
        out.as_os_str(),
        log.as_os_str(),
    ]);
    assert_eq!(code, Some(0), "{stderr}");
    assert!(files_under(&out).len() > first.len());
    // A FILE.parquet output is replaced by a new run, not added to, its
    // siblings too: the earlier run's rejected lines are not left beside it.
    let single = dir.path().join("one.parquet");
    let sample = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("samples/incident/harmovela-0.2.ndjson");
    let sample = std::fs::read_to_string(sample).unwrap();
    let clean: String = sample.lines().take(20).map(|l| format!("{l}\n")).collect();
    let (clean_log, with_bad) = (
        dir.path().join("clean.ndjson"),
        dir.path().join("bad.ndjson"),
    );
    std::fs::write(&clean_log, &clean).unwrap();
    std::fs::write(&with_bad, clean + "not json\n").unwrap();
    convert(&with_bad, &single);
    let sibling = dir.path().join("one.bad_lines.parquet");
    assert!(sibling.is_file());
    convert(&clean_log, &single);
    assert!(
        !sibling.exists(),
        "the earlier run's rejected lines are gone"
    );
    assert_eq!(read(std::slice::from_ref(&single)).total().bad_lines, 0);
}

/// Lines of a log split in two by event id, so that an event's
/// redeliveries stay in one part (as shards should be cut).
fn split_by_id(log: &[u8]) -> [Vec<u8>; 2] {
    let mut parts = [Vec::new(), Vec::new()];
    for line in log.split_inclusive(|b| *b == b'\n') {
        let id = serde_json::from_slice::<serde_json::Value>(line)
            .ok()
            .and_then(|v| v["id"].as_str().map(str::to_string))
            .unwrap_or_default();
        let part = id.bytes().map(usize::from).sum::<usize>() % 2;
        parts[part].extend_from_slice(line);
    }
    parts
}

/// Two shards converted into one directory, each with its own `--shard`:
/// the loaded audit and the in-place one read the same events and give
/// the same report, and the accounting holds.
#[test]
fn shards_of_one_directory_are_read_alike_loaded_and_in_place() {
    let dir = tempfile::tempdir().unwrap();
    let mut log = crate::common::synth_log(12, 120_000, 0.02);
    log.extend_from_slice(b"not json\n");
    let out = dir.path().join("parquet");
    for (shard, part) in split_by_id(&log).iter().enumerate() {
        let path = dir.path().join(format!("part{shard}.ndjson"));
        std::fs::write(&path, part).unwrap();
        let (code, stderr) = run(&[
            "convert".as_ref(),
            "-q".as_ref(),
            "--shard".as_ref(),
            shard.to_string().as_ref(),
            "-o".as_ref(),
            out.as_os_str(),
            path.as_os_str(),
        ]);
        assert_eq!(code, Some(0), "{stderr}");
    }
    let loaded = audit_json(&out, &[]);
    assert!(loaded.contains("\"rule\""), "the log has findings");
    assert_eq!(loaded, audit_json(&out, &["--in-place"]));
    let report: serde_json::Value = serde_json::from_str(&loaded).unwrap();
    let whole = dir.path().join("whole.ndjson");
    std::fs::write(&whole, &log).unwrap();
    let single: serde_json::Value = serde_json::from_str(&audit_json(&whole, &[])).unwrap();
    let accounting = &report["accounting"];
    assert_eq!(accounting["identity_holds"], true, "{accounting}");
    for key in ["lines", "events", "redeliveries", "bad_lines"] {
        assert_eq!(accounting[key], single["accounting"][key], "{key}");
    }
    let query = "SELECT count(*) AS n, count(DISTINCT seq) AS seqs, max(seq) AS top FROM events";
    let sql = |extra: &[&str]| crate::common::sql_csv(query, extra, &out);
    // The stored seqs are kept, as in place: each once, shard 1's above
    // shard 0's.
    let loaded = sql(&[]);
    let row: Vec<u64> = loaded
        .lines()
        .nth(1)
        .unwrap()
        .split(',')
        .map(|v| v.parse().unwrap())
        .collect();
    assert_eq!(row[0], row[1], "{loaded}");
    assert_eq!(row[2] >> 52, 1, "{loaded}");
    assert_eq!(loaded, sql(&["--in-place"]));
}

/// Two runs of one shard put into one directory by hand (copied): the
/// loaded read refuses them as `--in-place` does, with the same words,
/// instead of counting every event twice.
#[test]
fn overlapping_runs_are_refused_alike_loaded_and_in_place() {
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("log.ndjson");
    let mut bytes = crate::common::synth_log(6, 20_000, 0.02);
    bytes.extend_from_slice(b"not json\n");
    std::fs::write(&log, bytes).unwrap();
    let (out, other) = (dir.path().join("parquet"), dir.path().join("other"));
    convert(&log, &out);
    convert(&log, &other);
    for file in files_under(&other) {
        std::fs::create_dir_all(out.join(&file).parent().unwrap()).unwrap();
        std::fs::copy(other.join(&file), out.join(&file)).unwrap();
    }
    let refusal = |args: &[&str]| {
        let mut all: Vec<&std::ffi::OsStr> = args.iter().map(|a| a.as_ref()).collect();
        all.push(out.as_os_str());
        let (code, stderr) = run(&all);
        assert_eq!(code, Some(2), "{args:?}: {stderr}");
        stderr
    };
    let in_place = refusal(&["audit", "-q", "--in-place"]);
    assert!(
        in_place.contains("come from different convert runs with overlapping seqs")
            && in_place.contains("--shard N"),
        "{in_place}"
    );
    assert_eq!(refusal(&["audit", "-q"]), in_place);
    assert_eq!(refusal(&["sql", "-q", "-e", "SELECT 1"]), in_place);
    assert_eq!(
        refusal(&["sql", "-q", "--in-place", "-e", "SELECT 1"]),
        in_place
    );
}
