//! The audit on a Ballista cluster (one scheduler, two executors, in this
//! process on 127.0.0.1) gives the same report as the local audit of the
//! same Parquet, down to every finding, location and count.

use crate::common::{hvaudit, sql_csv, synth_log};
use crate::forced_plans::{FORCED, audit_json, log_and_parquet};
use hvaudit::Report;
use hvaudit::audit::Audit;
use hvaudit::tables::Location;
use std::path::{Path, PathBuf};
use std::sync::LazyLock;

/// One cluster for the whole module: a runtime whose worker threads keep
/// serving while the tests (and the CLI processes they start) use it.
pub(crate) static CLUSTER: LazyLock<(tokio::runtime::Runtime, String)> = LazyLock::new(|| {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(4)
        .enable_all()
        .build()
        .expect("runtime");
    let url = rt
        .block_on(hvaudit::cluster::start_in_process(2, 2))
        .expect("in-process cluster starts");
    (rt, url)
});

fn convert(inputs: &[&Path], out: &Path, shard: u16) {
    hvaudit()
        .arg("convert")
        .arg("-q")
        .args(inputs)
        .arg("-o")
        .arg(out)
        .arg("--shard")
        .arg(shard.to_string())
        .assert()
        .success();
}

/// A generated log of about `size` bytes in `dir`, converted to Parquet
/// there; the Parquet's directory.
fn converted_log(dir: &Path, seed: u64, size: u64) -> PathBuf {
    let log = dir.join("log.ndjson");
    std::fs::write(&log, synth_log(seed, size, 0.0)).unwrap();
    let out = dir.join("parquet");
    convert(&[&log], &out, 0);
    out
}

fn local(dir: &Path) -> Report {
    Audit::new(crate::common::audit_config(vec![dir.to_path_buf()]))
        .run()
        .expect("local audit runs")
}

fn on_cluster(dir: &Path) -> Result<Report, hvaudit::audit::AuditError> {
    let mut cfg = crate::common::audit_config(vec![dir.to_path_buf()]);
    let url = CLUSTER.1.clone();
    cfg.reading.location = Location::Cluster {
        url,
        timeout: DEADLINE,
    };
    Audit::new(cfg).run()
}

/// Far above the few seconds each cluster run takes on a loaded machine (a
/// job the scheduler never finishes must fail the test, not hang CI).
const DEADLINE: std::time::Duration = std::time::Duration::from_secs(300);

fn assert_same(local: &Report, cluster: &Report) {
    assert!(local.rule_errors.is_empty(), "{:?}", local.rule_errors);
    assert!(cluster.rule_errors.is_empty(), "{:?}", cluster.rule_errors);
    assert!(local.findings.len() > 30, "{}", local.findings.len());
    for (a, b) in local.findings.iter().zip(&cluster.findings) {
        assert_eq!(
            serde_json::to_value(a).unwrap(),
            serde_json::to_value(b).unwrap()
        );
    }
    assert_eq!(local.findings.len(), cluster.findings.len());
    // The whole JSON report: inputs, accounting, span, histogram, counts.
    let json = |r: &Report| {
        let mut out = Vec::new();
        hvaudit::report::render(r, hvaudit::report::ReportFormat::Json, &mut out).unwrap();
        String::from_utf8(out).unwrap()
    };
    assert_eq!(json(local), json(cluster));
}

#[test]
fn findings_on_a_two_executor_cluster_equal_the_local_run() {
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("log.ndjson");
    let mut bytes = synth_log(11, 150_000, 0.02);
    // Rejected lines travel too (bad_lines table, payload.invalid, ...).
    bytes.extend_from_slice(b"not json at all\n{\"id\": 5}\n");
    std::fs::write(&log, bytes).unwrap();
    let out = dir.path().join("parquet");
    convert(&[&log], &out, 0);
    assert!(out.join("evidence").is_dir(), "convert writes evidence");
    let local = local(&out);
    assert!(local.totals().bad_lines >= 2);
    let cluster = on_cluster(&out).expect("cluster audit runs");
    assert_same(&local, &cluster);
    // The views the executors wrote beside the inputs are gone.
    assert_eq!(scratch_dirs(&out), Vec::<PathBuf>::new());
}

/// Events 1 ns apart in reverse file order, a deadline missed by 1 ns,
/// years past int64 nanoseconds: the cluster orders them as a local audit
/// does (`order_ns.rs`).
#[test]
fn nanosecond_order_on_the_cluster_is_the_local_one() {
    let dir = tempfile::tempdir().unwrap();
    let (_, parquet) = crate::order_ns::log_and_parquet(dir.path());
    let cluster = on_cluster(&parquet).expect("cluster audit runs");
    assert_eq!(
        crate::order_ns::findings(&cluster),
        crate::order_ns::expected()
    );
    assert_eq!(
        serde_json::to_value(&cluster.findings).unwrap(),
        serde_json::to_value(&local(&parquet).findings).unwrap()
    );
}

/// Parquet of a layout before the nanosecond columns reads them as its
/// microseconds on the cluster too (a view over the files), as a local
/// audit does.
#[test]
fn layout_2_parquet_on_the_cluster_is_the_local_one() {
    let dir = tempfile::tempdir().unwrap();
    let (_, parquet) = crate::order_ns::log_and_parquet(dir.path());
    crate::roundtrip::downgrade(&parquet, "2");
    let local = local(&parquet);
    let cluster = on_cluster(&parquet).expect("cluster audit runs");
    assert!(cluster.rule_errors.is_empty(), "{:?}", cluster.rule_errors);
    assert_eq!(
        serde_json::to_value(&cluster.findings).unwrap(),
        serde_json::to_value(&local.findings).unwrap()
    );
    // to the microsecond, the 1 ns late save is on time
    assert!(!local.findings.iter().any(|f| f.rule == "checkpoint.late"));
}

/// The `.hvaudit-*` entries directly in `dir` (where a cluster audit has
/// its views written when no --spill-dir is given).
fn scratch_dirs(dir: &Path) -> Vec<PathBuf> {
    std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| {
            p.file_name()
                .unwrap()
                .to_string_lossy()
                .starts_with(".hvaudit-")
        })
        .collect()
}

#[test]
fn an_interrupted_cluster_audit_removes_its_views() {
    let dir = tempfile::tempdir().unwrap();
    let (_, parquet) = log_and_parquet(dir.path(), 33, 60_000);
    let url = &CLUSTER.1;
    let mut audit = crate::common::hvaudit_process()
        .args(["audit", "-q", "--format", "json", "--cluster", url])
        .arg(&parquet)
        .env_remove(hvaudit::engine::SETTINGS_VAR)
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .map(Reaped)
        .unwrap();
    // Interrupt it once the cluster has written a view.
    let started = std::time::Instant::now();
    let written = || {
        scratch_dirs(&parquet).iter().any(|d| {
            walkdir::WalkDir::new(d)
                .into_iter()
                .filter_map(Result::ok)
                .any(|e| e.file_type().is_file())
        })
    };
    while !written() {
        assert!(
            audit.0.try_wait().unwrap().is_none(),
            "the audit ended before it wrote a view"
        );
        assert!(started.elapsed() < DEADLINE, "no view written");
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    let pid = audit.0.id().to_string();
    let sent = std::process::Command::new("kill")
        .args(["-INT", &pid])
        .status();
    assert!(sent.unwrap().success());
    let status = audit.0.wait().unwrap();
    assert_eq!(status.code(), Some(130));
    // The handler removed the directory, but the jobs the audit had running
    // go on without it and may write their view again (the executors make
    // the directories they write to): the next cluster audit's sweep (the
    // same call) removes what they leave, once they are done.
    let mut clean_since = None;
    while clean_since.is_none_or(|t: std::time::Instant| t.elapsed().as_secs() < 3) {
        hvaudit::signals::sweep_stale(&parquet);
        match (scratch_dirs(&parquet).is_empty(), clean_since) {
            (true, None) => clean_since = Some(std::time::Instant::now()),
            (false, _) => clean_since = None,
            _ => {}
        }
        assert!(started.elapsed() < DEADLINE, "the views stay");
        std::thread::sleep(std::time::Duration::from_millis(200));
    }
}

#[test]
fn shards_converted_apart_audit_as_one_log() {
    let dir = tempfile::tempdir().unwrap();
    let bytes = synth_log(12, 120_000, 0.0);
    let lines: Vec<&[u8]> = bytes.split_inclusive(|b| *b == b'\n').collect();
    let (a, b) = lines.split_at(lines.len() / 2);
    let (fa, fb) = (dir.path().join("a.ndjson"), dir.path().join("b.ndjson"));
    std::fs::write(&fa, a.concat()).unwrap();
    std::fs::write(&fb, b.concat()).unwrap();
    let out = dir.path().join("parquet");
    convert(&[&fa], &out, 0);
    convert(&[&fb], &out, 1);
    let cluster = on_cluster(&out).expect("cluster audit runs");
    assert_same(&local(&out), &cluster);
}

#[test]
fn shards_without_their_own_number_are_refused() {
    let dir = tempfile::tempdir().unwrap();
    let bytes = synth_log(13, 50_000, 0.0);
    let (fa, fb) = (dir.path().join("a.ndjson"), dir.path().join("b.ndjson"));
    std::fs::write(&fa, &bytes).unwrap();
    std::fs::write(&fb, &bytes).unwrap();
    let (out, other) = (dir.path().join("parquet"), dir.path().join("other"));
    convert(&[&fa], &out, 0);
    // convert refuses a second shard 0 in `out`: put it there by hand.
    convert(&[&fb], &other, 0);
    for entry in walkdir::WalkDir::new(&other) {
        let from = entry.unwrap().into_path();
        let to = out.join(from.strip_prefix(&other).unwrap());
        if from.is_dir() {
            std::fs::create_dir_all(&to).unwrap();
        } else {
            std::fs::copy(&from, &to).unwrap();
        }
    }
    let err = on_cluster(&out).expect_err("overlapping seqs are refused");
    assert!(err.to_string().contains("--shard"), "{err}");
}

/// A rule that fails as it runs on the executors fails alone and named:
/// the other rules still give every finding of the local audit, and a rule
/// of the user's own gives its findings too.
#[test]
fn a_rule_that_fails_on_the_cluster_fails_alone() {
    let dir = tempfile::tempdir().unwrap();
    let out = converted_log(dir.path(), 17, 60_000);
    let rules = dir.path().join("rules");
    std::fs::create_dir(&rules).unwrap();
    let rule = |name: &str, sql: &str| {
        let text = format!(
            "-- id: custom.{name}\n-- severity: low\n-- family: custom\n-- dialect: any\n\
             -- summary: {name}\n-- spec: local policy\n-- explain:\n--   Tested.\n{sql}\n"
        );
        std::fs::write(rules.join(format!("custom.{name}.sql")), text).unwrap();
    };
    // Every row's type is not a number: the cast fails on the executors,
    // once the job has started.
    rule(
        "broken",
        "SELECT task_id, 'never' AS message, make_array(seq) AS seqs FROM ev \
         WHERE CAST(type AS INT) > 0",
    );
    rule(
        "started",
        "SELECT task_id, 'started' AS message, make_array(seq) AS seqs FROM ev \
         WHERE type = 'task.started'",
    );
    let run = |cluster: bool| {
        let mut cfg = crate::common::audit_config(vec![out.clone()]);
        cfg.rules_dir = Some(rules.clone());
        if cluster {
            cfg.reading.location = Location::Cluster {
                url: CLUSTER.1.clone(),
                timeout: DEADLINE,
            };
        }
        Audit::new(cfg).run().expect("the audit runs")
    };
    let (local, cluster) = (run(false), run(true));
    for report in [&local, &cluster] {
        let failed: Vec<&str> = report.rule_errors.iter().map(|(r, _)| r.as_str()).collect();
        assert_eq!(failed, ["custom.broken"], "{:?}", report.rule_errors);
        assert!(report.findings.iter().any(|f| f.rule == "custom.started"));
    }
    assert!(local.findings.len() > 30, "{}", local.findings.len());
    assert_eq!(
        serde_json::to_value(&local.findings).unwrap(),
        serde_json::to_value(&cluster.findings).unwrap()
    );
}

#[test]
fn sql_runs_on_the_cluster_from_the_command_line() {
    let dir = tempfile::tempdir().unwrap();
    let out = converted_log(dir.path(), 14, 40_000);
    let query = "SELECT count(*) AS n, count(DISTINCT task_id) AS tasks FROM events";
    let run = |extra: &[&str]| sql_csv(query, extra, &out);
    let url = &CLUSTER.1;
    let remote = run(&["--cluster", url]);
    assert_eq!(remote, run(&[]));
    assert!(remote.starts_with("n,tasks\n"), "{remote}");
}

#[test]
fn cluster_usage_errors_exit_2_with_what_to_do() {
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("log.ndjson");
    std::fs::write(&log, synth_log(15, 20_000, 0.0)).unwrap();
    let run = |args: &[&std::ffi::OsStr]| {
        let output = hvaudit().timeout(DEADLINE).args(args).output().unwrap();
        assert_eq!(output.status.code(), Some(2), "{output:?}");
        String::from_utf8(output.stderr).unwrap()
    };
    let os = std::ffi::OsStr::new;
    // NDJSON must be converted first.
    let url = &CLUSTER.1;
    let err = run(&[os("audit"), os("--cluster"), os(url), log.as_os_str()]);
    assert!(err.contains("hvaudit convert"), "{err}");
    // A URL that is not df://HOST:PORT.
    let err = run(&[
        os("audit"),
        os("--cluster"),
        os("http://x"),
        log.as_os_str(),
    ]);
    assert!(err.contains("df://HOST:PORT"), "{err}");
    // Nobody listening.
    let out: PathBuf = dir.path().join("parquet");
    convert(&[&log], &out, 0);
    let err = run(&[
        os("audit"),
        os("--cluster"),
        os("df://127.0.0.1:1"),
        out.as_os_str(),
    ]);
    assert!(err.contains("no Ballista scheduler"), "{err}");
}

#[test]
fn forced_plans_on_the_cluster_give_the_default_report() {
    let dir = tempfile::tempdir().unwrap();
    // Smaller than the local tests' log: every cluster job is dearer.
    let (_, parquet) = log_and_parquet(dir.path(), 24, 80_000);
    // The default plans give the local report (the tests above); the local
    // in-place audit stands for them here, in a fraction of the time.
    let in_place = [std::ffi::OsStr::new("--in-place"), parquet.as_os_str()];
    let default = audit_json(&in_place, None);
    let url = &CLUSTER.1;
    let args = [
        std::ffi::OsStr::new("--cluster"),
        url.as_ref(),
        parquet.as_os_str(),
    ];
    // The client sends the settings with every job; the scheduler plans by them.
    for settings in FORCED {
        let forced = audit_json(&args, Some(settings));
        assert!(
            forced == default,
            "under {settings}: the cluster report differs from the default plan's"
        );
    }
}

#[test]
fn a_cluster_without_executors_gives_up_at_the_timeout() {
    let dir = tempfile::tempdir().unwrap();
    let out = converted_log(dir.path(), 16, 20_000);
    // A scheduler that no executor ever joins: every job stays queued.
    let rt = tokio::runtime::Runtime::new().unwrap();
    let url = rt
        .block_on(hvaudit::cluster::start_in_process(0, 1))
        .unwrap();
    for args in [
        vec!["audit", "--cluster", &url, "--timeout", "3s"],
        vec![
            "sql",
            "--cluster",
            &url,
            "--timeout",
            "3s",
            "-e",
            "SELECT count(*) FROM events",
        ],
    ] {
        let started = std::time::Instant::now();
        let output = hvaudit()
            .timeout(DEADLINE)
            .args(&args)
            .arg(&out)
            .output()
            .unwrap();
        assert_eq!(output.status.code(), Some(2), "{args:?}: {output:?}");
        let err = String::from_utf8(output.stderr).unwrap();
        assert!(err.contains("did not finish within 3 s"), "{err}");
        assert!(err.contains("no executor"), "{err}");
        // The deadline, plus a process start and a few Parquet footers.
        let took = started.elapsed();
        assert!(
            took < std::time::Duration::from_secs(60),
            "{args:?} took {took:?}"
        );
    }
}

/// A child process, killed when dropped (also when a test fails half way).
struct Reaped(std::process::Child);

impl Drop for Reaped {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// An `hvaudit executor` process.
struct ExecutorProcess {
    child: Reaped,
    work_dir: tempfile::TempDir,
}

impl ExecutorProcess {
    /// Join the scheduler at `url` with `vcores` task slots; returns once
    /// the executor listens (it registers right after).
    fn start(url: &str, vcores: usize) -> ExecutorProcess {
        let scheduler = url.trim_start_matches("df://");
        let work_dir = tempfile::tempdir().unwrap();
        let free = || hvaudit::cluster::free_port().unwrap();
        let (port, grpc_port) = (free(), free());
        let child = crate::common::hvaudit_process()
            .args(["executor", "--scheduler", scheduler])
            .args(["--bind-host", "127.0.0.1", "--external-host", "127.0.0.1"])
            .args([
                "--port",
                &port.to_string(),
                "--grpc-port",
                &grpc_port.to_string(),
            ])
            .args(["--vcores", &vcores.to_string()])
            .arg("--work-dir")
            .arg(work_dir.path())
            .env("RUST_LOG", "error")
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .spawn()
            .map(Reaped)
            .unwrap();
        let started = std::time::Instant::now();
        while std::net::TcpStream::connect(("127.0.0.1", grpc_port)).is_err() {
            assert!(started.elapsed() < DEADLINE, "the executor does not start");
            std::thread::sleep(std::time::Duration::from_millis(100));
        }
        std::thread::sleep(std::time::Duration::from_millis(500));
        ExecutorProcess { child, work_dir }
    }

    /// How many shuffle files the executor has written (results that later
    /// stages read from it).
    fn shuffle_files(&self) -> usize {
        walkdir::WalkDir::new(self.work_dir.path())
            .into_iter()
            .filter_map(Result::ok)
            .filter(|e| e.file_type().is_file())
            .count()
    }

    /// SIGKILL: no goodbye to the scheduler.
    fn kill(&mut self) {
        self.child.0.kill().unwrap();
        self.child.0.wait().unwrap();
    }
}

/// An executor killed mid-audit (`replace`: and a new one started at once,
/// so that the jobs could go on): the audit exits 2 saying the run was
/// disturbed, or gives exactly the report of an undisturbed run; never
/// another report.
fn audit_with_an_executor_killed(seed: u64, replace: bool) {
    let dir = tempfile::tempdir().unwrap();
    let (_, parquet) = log_and_parquet(dir.path(), seed, 60_000);
    let undisturbed = audit_json(
        &[std::ffi::OsStr::new("--in-place"), parquet.as_os_str()],
        None,
    );
    // A cluster of its own: the other tests' cluster stays whole. Lost
    // executors are noticed within seconds (ours beat every 5 s).
    let rt = tokio::runtime::Runtime::new().unwrap();
    let url = rt
        .block_on(hvaudit::cluster::start_scheduler_in_process(
            std::time::Duration::from_secs(12),
        ))
        .unwrap();
    let _survivor = ExecutorProcess::start(&url, 1);
    let mut victim = ExecutorProcess::start(&url, 1);
    let (stdout, stderr) = (dir.path().join("stdout"), dir.path().join("stderr"));
    let mut audit = crate::common::hvaudit_process()
        .args(["audit", "-q", "--format", "json", "--cluster", &url])
        .args(["--timeout", "150s"])
        .arg(&parquet)
        // More partitions than task slots: stages run in waves, so the kill
        // finds stages part done (which Ballista 55 re-runs whole).
        .env(
            hvaudit::engine::SETTINGS_VAR,
            "datafusion.execution.target_partitions=8",
        )
        .stdout(std::fs::File::create(&stdout).unwrap())
        .stderr(std::fs::File::create(&stderr).unwrap())
        .spawn()
        .map(Reaped)
        .unwrap();
    // Kill it once it holds shuffle output of several jobs.
    let started = std::time::Instant::now();
    while victim.shuffle_files() < 40 {
        assert!(
            audit.0.try_wait().unwrap().is_none(),
            "the audit ended before the executor held 40 shuffle files"
        );
        assert!(started.elapsed() < DEADLINE, "the executor got no task");
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    victim.kill();
    let _replacement = replace.then(|| ExecutorProcess::start(&url, 1));
    let status = loop {
        if let Some(status) = audit.0.try_wait().unwrap() {
            break status;
        }
        assert!(
            started.elapsed() < DEADLINE,
            "the audit did not end within {DEADLINE:?}"
        );
        std::thread::sleep(std::time::Duration::from_millis(100));
    };
    let (out, err) = (
        std::fs::read_to_string(&stdout).unwrap(),
        std::fs::read_to_string(&stderr).unwrap(),
    );
    match status.code() {
        Some(2) => {
            assert!(err.contains("was disturbed during the audit"), "{err}");
            assert!(err.contains("run the audit again"), "{err}");
            assert!(out.is_empty(), "a disturbed run writes no report: {out}");
        }
        Some(0 | 1) => assert!(out == undisturbed, "a report unlike the undisturbed one"),
        other => panic!("exit {other:?}: {err}"),
    }
    eprintln!(
        "executor killed (replaced: {replace}): exit {:?}, {err}",
        status.code()
    );
}

#[test]
fn an_executor_killed_mid_audit_never_gives_another_report() {
    audit_with_an_executor_killed(31, false);
}

#[test]
fn an_executor_killed_and_replaced_mid_audit_never_gives_another_report() {
    audit_with_an_executor_killed(32, true);
}
