//! Logs larger than memory: under `--memory-limit`, `convert` spills the
//! event rows as it reads them and `audit` goes through Parquet on disk by
//! itself. Both must give exactly what the in-memory paths give. The
//! spilled paths are taken on small logs here (any limit below the table's
//! size takes them), with the rows that make the dedup work hardest:
//! redeliveries, versions of one id, and text that differs while the
//! value does not, far apart in the log so that they land in different
//! spilled groups.

use crate::common::{hvaudit, synth_log};
use std::io::Write;
use std::path::{Path, PathBuf};

/// A generated log, then (40 k lines later) an exact redelivery of one of
/// its events, the same event with its keys in another order (the same
/// value: a redelivery too), and a conflicting version of another one.
fn hard_log(dir: &Path) -> PathBuf {
    let log = synth_log(11, 12 << 20, 0.02);
    let text = String::from_utf8(log).unwrap();
    let lines: Vec<&str> = text.lines().collect();
    let pick = |n: usize| -> serde_json::Value {
        let line = lines
            .iter()
            .skip(n)
            .find(|l| l.contains("\"task.progress\""))
            .unwrap();
        serde_json::from_str(line).unwrap()
    };
    let (first, second) = (pick(10), pick(2000));
    let mut out = std::fs::File::create(dir.join("log.ndjson")).unwrap();
    out.write_all(text.as_bytes()).unwrap();
    writeln!(out, "{first}").unwrap();
    // serde_json's map keeps keys sorted: write them in reverse.
    let reversed: Vec<String> = first
        .as_object()
        .unwrap()
        .iter()
        .rev()
        .map(|(k, v)| format!("{}:{v}", serde_json::Value::from(k.as_str())))
        .collect();
    writeln!(out, "{{{}}}", reversed.join(",")).unwrap();
    let mut changed = second.clone();
    changed["payload"] = serde_json::json!({"note": "a different body"});
    writeln!(out, "{changed}").unwrap();
    dir.join("log.ndjson")
}

/// A temp directory holding [`hard_log`] and an empty spill directory.
fn hard_log_and_spill_dir() -> (tempfile::TempDir, PathBuf, PathBuf) {
    let dir = tempfile::tempdir().unwrap();
    let log = hard_log(dir.path());
    let spill = dir.path().join("spill");
    std::fs::create_dir(&spill).unwrap();
    (dir, log, spill)
}

fn table_csv(dir: &Path, query: &str) -> String {
    let out = hvaudit()
        .args(["sql", "-q", "--in-place", "--format", "csv", "-e", query])
        .arg(dir)
        .output()
        .unwrap();
    assert!(out.status.success(), "{out:?}");
    String::from_utf8(out.stdout).unwrap()
}

#[test]
fn convert_under_a_memory_limit_writes_the_same_tables() {
    let (dir, log, spill) = hard_log_and_spill_dir();
    let (held, spilled) = (dir.path().join("held"), dir.path().join("spilled"));
    hvaudit()
        .args(["convert", "-q", "-o"])
        .arg(&held)
        .arg(&log)
        .assert()
        .success();
    hvaudit()
        .args(["convert", "-q", "--memory-limit", "1M", "--spill-dir"])
        .arg(&spill)
        .arg("-o")
        .arg(&spilled)
        .arg(&log)
        .assert()
        .success();
    for query in [
        "SELECT * FROM events ORDER BY seq",
        "SELECT * FROM evidence ORDER BY event_seq, 2, 3",
        "SELECT * FROM bad_lines ORDER BY seq",
    ] {
        let (a, b) = (table_csv(&held, query), table_csv(&spilled, query));
        assert!(a.lines().count() > 1, "{query}: nothing to compare");
        assert!(a == b, "{query}: the spilled convert differs");
    }
    // The log's own dedup cases came out as they should.
    let counts = table_csv(
        &spilled,
        "SELECT max(version), sum(redeliveries) FROM events",
    );
    let row: Vec<i64> = counts
        .lines()
        .nth(1)
        .unwrap()
        .split(',')
        .map(|n| n.parse().unwrap())
        .collect();
    assert!(row[0] >= 2 && row[1] >= 2, "{counts}");
    // Nothing is left in the spill directory.
    assert_eq!(std::fs::read_dir(&spill).unwrap().count(), 0);
}

#[test]
fn an_audit_whose_table_would_not_fit_gives_the_loaded_report() {
    let (_dir, log, spill) = hard_log_and_spill_dir();
    let report = |extra: &[&str], stdin: Option<&Path>| {
        let mut c = hvaudit();
        c.args(["audit", "--format", "json", "--fail-on", "none"])
            .args(extra);
        match stdin {
            Some(p) => c.arg("-").pipe_stdin(p).unwrap(),
            None => c.arg(&log),
        };
        let out = c.output().unwrap();
        assert_eq!(out.status.code(), Some(0), "{out:?}");
        (
            String::from_utf8(out.stdout).unwrap(),
            String::from_utf8(out.stderr).unwrap(),
        )
    };
    let spill_arg = spill.to_str().unwrap();
    let (loaded, _) = report(&[], None);
    // 48M: under twice the table (about 25 MB), and room for the engine.
    let (spilled, said) = report(&["--memory-limit", "48M", "--spill-dir", spill_arg], None);
    assert!(said.contains("would not fit --memory-limit"), "{said}");
    assert!(loaded == spilled, "the spilled audit's report differs");
    // A stream's size is unknown: under a limit it is spilled too, and the
    // report still names <stdin>.
    let (from_stdin, said) = report(
        &["--memory-limit", "1G", "--spill-dir", spill_arg],
        Some(&log),
    );
    assert!(said.contains("a stream"), "{said}");
    let (loaded_stdin, _) = report(&[], Some(&log));
    assert!(from_stdin == loaded_stdin && from_stdin.contains("<stdin>"));
    assert_eq!(
        std::fs::read_dir(&spill).unwrap().count(),
        0,
        "scratch removed"
    );
}

#[test]
fn sql_over_a_table_that_would_not_fit_answers_as_the_loaded_one() {
    let (_dir, log, spill) = hard_log_and_spill_dir();
    let query = "SELECT id, version, redeliveries, src_line FROM events ORDER BY seq; \
                 SELECT count(*) FROM bad_lines; SELECT count(*) FROM tasks";
    let answer_on = |extra: &[&str], available: &str| {
        let out = hvaudit()
            .args(["sql", "--format", "csv", "-e", query])
            .args(extra)
            .arg(&log)
            .env("HVAUDIT_MEMORY_AVAILABLE", available)
            .output()
            .unwrap();
        assert!(out.status.success(), "{out:?}");
        (
            String::from_utf8(out.stdout).unwrap(),
            String::from_utf8(out.stderr).unwrap(),
        )
    };
    let answer = |extra: &[&str]| answer_on(extra, "8G");
    let spill_arg = spill.to_str().unwrap();
    let (loaded, _) = answer(&["-q"]);
    let (spilled, said) = answer(&["--memory-limit", "48M", "--spill-dir", spill_arg]);
    assert!(said.contains("would not fit --memory-limit"), "{said}");
    assert!(loaded.lines().count() > 1000);
    assert!(loaded == spilled, "the spilled sql answers differently");
    // No limit given, on a machine with less memory than the table takes.
    let (implied, said) = answer_on(&["--spill-dir", spill_arg], "20M");
    assert!(said.contains("this machine has available"), "{said}");
    assert!(loaded == implied, "the spilled sql answers differently");
    assert_eq!(
        std::fs::read_dir(&spill).unwrap().count(),
        0,
        "scratch removed"
    );
}

/// The progress on a terminal names each phase of a spilled audit:
/// reading (with the rows spilled), writing them as Parquet, auditing.
/// `script` gives the run a terminal and keeps what it drew.
#[test]
fn a_spilled_audit_shows_each_phase_on_a_terminal() {
    let dir = tempfile::tempdir().unwrap();
    let log = hard_log(dir.path());
    let bin = crate::common::bin();
    let screen = dir.path().join("screen");
    let command = format!(
        "{} --no-config audit --memory-limit 48M --format json -o {} {}",
        bin.display(),
        dir.path().join("r.json").display(),
        log.display()
    );
    // Progress is drawn only on a terminal its TERM names.
    let status = crate::common::scrubbed("script")
        .env("TERM", "xterm")
        .args(["-qec", &command])
        .arg(&screen)
        .stdin(std::process::Stdio::null())
        .status()
        .expect("`script` (util-linux) gives the run a terminal");
    assert_eq!(status.code(), Some(1), "findings at --fail-on high");
    let drawn = String::from_utf8_lossy(&std::fs::read(&screen).unwrap()).into_owned();
    for phase in [
        "reading, spilling rows",
        "spilling: writing the rows as Parquet",
        "auditing: rules",
    ] {
        assert!(drawn.contains(phase), "no {phase:?} in: {drawn}");
    }
}

/// `replay` of a log too large for `--memory-limit` goes through Parquet on
/// disk as `audit` does, and gives the replay of the loaded log.
#[test]
fn a_spilled_replay_equals_the_loaded_one() {
    let dir = tempfile::tempdir().unwrap();
    let log = hard_log(dir.path());
    let text = std::fs::read_to_string(&log).unwrap();
    let task = text
        .lines()
        .filter_map(|l| serde_json::from_str::<serde_json::Value>(l).ok())
        .find_map(|v| v["task_id"].as_str().map(str::to_string))
        .unwrap();
    let replayed = |extra: &[&str], available: &str| {
        let out = hvaudit()
            .args(["replay", "--format", "json", "--task", &task])
            .args(extra)
            .arg(&log)
            .env("HVAUDIT_MEMORY_AVAILABLE", available)
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        (
            out.stdout,
            String::from_utf8_lossy(&out.stderr).into_owned(),
        )
    };
    let (loaded, _) = replayed(&["-q"], "8G");
    let spill = tempfile::tempdir().unwrap();
    let spill_arg = spill.path().to_str().unwrap();
    let (spilled, _) = replayed(
        &["-q", "--memory-limit", "48M", "--spill-dir", spill_arg],
        "8G",
    );
    assert!(!loaded.is_empty());
    assert_eq!(
        String::from_utf8_lossy(&loaded),
        String::from_utf8_lossy(&spilled)
    );
    // No limit given, on a machine with less memory than the table takes.
    let (implied, said) = replayed(&["--spill-dir", spill_arg], "20M");
    assert!(said.contains("this machine has available"), "{said}");
    assert_eq!(
        String::from_utf8_lossy(&loaded),
        String::from_utf8_lossy(&implied)
    );
    assert_eq!(
        std::fs::read_dir(spill.path()).unwrap().count(),
        0,
        "scratch removed"
    );
}

/// Without `--memory-limit`, a log whose loaded table would not fit the
/// memory the machine has available is read through the spill directory
/// all the same (instead of loaded until the system kills the process):
/// the audit gives the loaded report, `convert` the held tables. The
/// variable plays a machine with that little memory; with plenty, the log
/// is loaded as before.
#[test]
fn a_log_too_large_for_the_machine_is_spilled_without_a_limit() {
    let (dir, log, spill) = hard_log_and_spill_dir();
    let run = |args: &[&str], available: Option<&str>| {
        let mut c = hvaudit();
        c.args(args).arg("--spill-dir").arg(&spill);
        c.env_remove("HVAUDIT_MEMORY_AVAILABLE");
        if let Some(a) = available {
            c.env("HVAUDIT_MEMORY_AVAILABLE", a);
        }
        let out = c.arg(&log).output().unwrap();
        let said = String::from_utf8(out.stderr).unwrap();
        assert_eq!(out.status.code(), Some(0), "{said}");
        assert!(!said.contains("failed"), "{said}");
        (out.stdout, said)
    };
    let audit = ["audit", "--format", "json", "--fail-on", "none"];
    let (loaded, said) = run(&audit, None);
    assert!(!said.contains("would not fit"), "{said}");
    // The table is about 24 MiB: 20M does not hold it, 1G does.
    let (spilled, said) = run(&audit, Some("20M"));
    assert!(
        said.contains("would not fit the 20 MiB this machine has available"),
        "{said}"
    );
    assert!(loaded == spilled, "the spilled audit's report differs");
    let (_, said) = run(&audit, Some("1G"));
    assert!(!said.contains("would not fit"), "{said}");
    // convert holds more than an audit: 30M does not hold it.
    let (held, implied) = (dir.path().join("held"), dir.path().join("implied"));
    let held_arg = format!("-o{}", held.display());
    let implied_arg = format!("-o{}", implied.display());
    run(&["convert", &held_arg], None);
    let (_, said) = run(&["convert", &implied_arg], Some("30M"));
    assert!(said.contains("rows are spilled as they are read"), "{said}");
    for query in [
        "SELECT * FROM events ORDER BY seq",
        "SELECT * FROM bad_lines ORDER BY seq",
    ] {
        let (a, b) = (table_csv(&held, query), table_csv(&implied, query));
        assert!(a.lines().count() > 1, "{query}: nothing to compare");
        assert!(a == b, "{query}: the spilled convert differs");
    }
    assert_eq!(std::fs::read_dir(&spill).unwrap().count(), 0);
}

/// Through the library, as a caller without the binary: on a machine too
/// small for the loaded table (`MemoryOptions::available`, a stand-in for
/// what the system says), `Tables::open` reads the log to Parquet on disk
/// for an audit, a `sql` session and a replay alike, and each answers as
/// over the loaded table.
#[test]
fn audit_sql_and_replay_choose_the_spilled_path_through_the_library() {
    use hvaudit::audit::{Audit, AuditConfig, block_on};
    use hvaudit::replay::{ReplayRequest, Scope, replay};
    use hvaudit::tables::{MemoryOptions, Place, Purpose, ReadingOptions, Tables};
    let sample = Path::new(env!("CARGO_MANIFEST_DIR")).join("samples/incident");
    let spill = tempfile::tempdir().unwrap();
    let loaded = crate::common::audit_config(vec![sample.clone()]);
    let small = AuditConfig {
        reading: ReadingOptions {
            memory: MemoryOptions {
                // 1 MiB available: the run keeps to the least limit, 64 MiB.
                available: Some(1 << 20),
                spill_dir: Some(spill.path().to_path_buf()),
                ..Default::default()
            },
            ..crate::common::reading_options(vec![sample])
        },
        ..Default::default()
    };
    let on_disk = |purpose| {
        let tables = Tables::open(&small.reading, purpose).unwrap();
        assert!(
            matches!(&tables.place, Place::OnDisk(d) if d.plan.available == Some(1 << 20)),
            "{purpose:?} is not read to disk"
        );
        assert_eq!(tables.memory.limit, Some(64 << 20), "{purpose:?}");
        tables
    };
    let json = |r: &hvaudit::Report| {
        let mut out = Vec::new();
        hvaudit::report::render_with(
            r,
            hvaudit::report::ReportFormat::Json,
            &Default::default(),
            &mut out,
        )
        .unwrap();
        String::from_utf8(out).unwrap()
    };

    // The audit: `Audit::run` opens the tables itself.
    on_disk(Purpose::Audit);
    let spilled = Audit::new(small.clone()).run().unwrap();
    let whole = Audit::new(loaded.clone()).run().unwrap();
    assert!(spilled.rule_errors.is_empty(), "{:?}", spilled.rule_errors);
    assert!(
        json(&spilled) == json(&whole),
        "the spilled audit's report differs"
    );

    // A sql session over the same tables.
    let count = |tables: &Tables| {
        block_on(async {
            let (ctx, _scratch) = tables.session().await.unwrap();
            let sql = "SELECT 'events' AS t, count(*) AS n, sum(seq) AS s FROM events \
                       UNION ALL SELECT 'bad_lines', count(*), sum(seq) FROM bad_lines \
                       ORDER BY t";
            let batches = ctx.sql(sql).await.unwrap().collect().await.unwrap();
            datafusion::arrow::util::pretty::pretty_format_batches(&batches)
                .unwrap()
                .to_string()
        })
    };
    let queried = count(&on_disk(Purpose::Query));
    let held = count(&Tables::open(&loaded.reading, Purpose::Query).unwrap());
    assert_eq!(queried, held);

    // A replay: `replay` opens the tables itself too.
    on_disk(Purpose::Replay);
    let request = ReplayRequest {
        scope: Scope::Task("task_223151fd620b0074".into()),
        at: None,
    };
    let replayed = replay(&small, &request).unwrap();
    assert_eq!(replayed, replay(&loaded, &request).unwrap());
    assert_eq!(
        std::fs::read_dir(spill.path()).unwrap().count(),
        0,
        "scratch removed"
    );
}
