//! The operator decides the audit, not the files beside the logs: a
//! configuration file that came with the logs is passed over, one that
//! tries to write files or pick the code that runs needs the operator's
//! `--config`; rule and view files may only read the tables; `sql -f`
//! runs queries only unless told otherwise.

use crate::common::hvaudit_reading_config;
use serde_json::Value;
use std::path::{Path, PathBuf};

fn sample_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("samples/incident")
}

/// A copy of the incident sample's logs in `dir`.
fn copy_logs(dir: &Path) {
    std::fs::create_dir_all(dir).unwrap();
    for f in ["aep-0.1.ndjson", "harmovela-0.2.ndjson"] {
        std::fs::copy(sample_dir().join(f), dir.join(f)).unwrap();
    }
}

/// (rule, fingerprint) of every finding of a JSON report, sorted.
fn prints(report: &Path) -> Vec<(String, String)> {
    let v: Value = serde_json::from_str(&std::fs::read_to_string(report).unwrap()).unwrap();
    let mut out: Vec<(String, String)> = v["findings"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| {
            let s = |k: &str| f[k].as_str().unwrap().to_string();
            (s("rule"), s("fingerprint"))
        })
        .collect();
    out.sort();
    out
}

/// Every path under `dir`, relative, sorted.
fn tree(dir: &Path) -> Vec<String> {
    let mut out: Vec<String> = walkdir::WalkDir::new(dir)
        .min_depth(1)
        .into_iter()
        // The MAC file beside each report hvaudit writes is part of it.
        .filter(|e| {
            e.as_ref()
                .map_or(true, |e| !e.file_name().to_string_lossy().ends_with(".mac"))
        })
        .map(|e| {
            let e = e.unwrap();
            e.path()
                .strip_prefix(dir)
                .unwrap()
                .to_string_lossy()
                .into_owned()
        })
        .collect();
    out.sort();
    out
}

/// Logs pulled from a compromised host, with what came with them: a
/// configuration that gives the gate up, takes the log directory as the
/// rule directory and writes rejected lines over a file outside, and a
/// view that hides every event.
fn plant(logs: &Path) {
    std::fs::write(
        logs.join("hvaudit.toml"),
        "[audit]\nfail-on = \"none\"\nrules-dir = \".\"\nbad-lines = \"../victim\"\n",
    )
    .unwrap();
    std::fs::create_dir_all(logs.join("views")).unwrap();
    std::fs::write(
        logs.join("views/01_ev.sql"),
        "SELECT * FROM events WHERE false\n",
    )
    .unwrap();
    // A line the bad-lines file would get.
    let mut log = std::fs::read_to_string(logs.join("aep-0.1.ndjson")).unwrap();
    log.push_str("not json: echo owned >> ~/.bashrc\n");
    std::fs::write(logs.join("aep-0.1.ndjson"), log).unwrap();
}

#[test]
fn files_planted_beside_the_logs_change_neither_findings_nor_exit_code() {
    let root = tempfile::tempdir().unwrap();
    let (planted, clean, out) = (
        root.path().join("logs"),
        root.path().join("clean"),
        root.path().join("out"),
    );
    copy_logs(&planted);
    copy_logs(&clean);
    std::fs::create_dir(&out).unwrap();
    plant(&planted);
    std::fs::copy(planted.join("aep-0.1.ndjson"), clean.join("aep-0.1.ndjson")).unwrap();
    let before = tree(root.path());
    // `cd logs && hvaudit audit .`, and the same with the log files named
    // one by one (a shell glob) or the directory by its absolute path.
    let ways: [(&str, Vec<String>); 3] = [
        ("dot", vec![".".into()]),
        (
            "files",
            vec!["aep-0.1.ndjson".into(), "harmovela-0.2.ndjson".into()],
        ),
        ("absolute", vec![planted.display().to_string()]),
    ];
    for (name, inputs) in ways {
        let report = out.join(format!("{name}.json"));
        let run = hvaudit_reading_config()
            .current_dir(&planted)
            .args(["audit", "--format", "json", "-o"])
            .arg(&report)
            .args(&inputs)
            .output()
            .unwrap();
        let stderr = String::from_utf8_lossy(&run.stderr);
        assert_eq!(
            run.status.code(),
            Some(1),
            "{name}: the gate holds: {stderr}"
        );
        assert!(
            stderr.contains(
                "hvaudit: ignoring ./hvaudit.toml: the working directory lies in the input"
            ),
            "{name}: {stderr}"
        );
        let reference = out.join(format!("{name}-clean.json"));
        let clean_inputs: Vec<PathBuf> = match name {
            "files" => inputs.iter().map(|i| clean.join(i)).collect(),
            _ => vec![clean.clone()],
        };
        let run = hvaudit_reading_config()
            .current_dir(&clean)
            .args(["audit", "-q", "--format", "json", "-o"])
            .arg(&reference)
            .args(&clean_inputs)
            .output()
            .unwrap();
        assert_eq!(run.status.code(), Some(1));
        assert_eq!(prints(&report), prints(&reference), "{name}");
        assert!(!prints(&report).is_empty());
    }
    assert!(!root.path().join("victim").exists());
    // Nothing was written but the reports the operator named.
    let mut expected = before.clone();
    for name in ["dot", "files", "absolute"] {
        expected.push(format!("out/{name}.json"));
        expected.push(format!("out/{name}-clean.json"));
    }
    expected.sort();
    assert_eq!(tree(root.path()), expected);
}

#[test]
fn a_discovered_file_may_not_write_files_or_pick_the_code_that_runs() {
    let root = tempfile::tempdir().unwrap();
    let (ops, logs) = (root.path().join("ops"), root.path().join("logs"));
    copy_logs(&logs);
    std::fs::create_dir(&ops).unwrap();
    for (table, key, value) in [
        ("audit", "bad-lines", "\"rejected.txt\""),
        ("audit", "output", "\"report.txt\""),
        ("audit", "rules-dir", "\"rules\""),
        ("audit", "spill-dir", "\".\""),
        ("audit", "cluster", "\"df://elsewhere:50050\""),
        ("audit", "endpoint", "\"http://elsewhere\""),
        ("sql", "execute", "\"COPY (SELECT 1) TO 'x.csv'\""),
        ("sql", "file", "\"q.sql\""),
        ("sql", "allow-writes", "true"),
        ("convert", "output", "\"parquet\""),
    ] {
        std::fs::write(
            ops.join("hvaudit.toml"),
            format!("[{table}]\n{key} = {value}\n"),
        )
        .unwrap();
        let run = hvaudit_reading_config()
            .current_dir(&ops)
            .args(["audit", "-q"])
            .arg(&logs)
            .output()
            .unwrap();
        let stderr = String::from_utf8_lossy(&run.stderr);
        assert_eq!(run.status.code(), Some(2), "{key}: {stderr}");
        assert!(
            stderr.contains(&format!("[{table}] {key} "))
                && stderr.contains("pass the file with --config ./hvaudit.toml to allow it"),
            "{key}: {stderr}"
        );
        assert!(
            !stderr.contains('\n') || stderr.lines().count() == 1,
            "{stderr}"
        );
    }
    assert_eq!(tree(&ops), ["hvaudit.toml"], "nothing written");
    // Named by the operator, the same file may.
    std::fs::write(
        ops.join("hvaudit.toml"),
        "[audit]\nbad-lines = \"rejected.txt\"\n",
    )
    .unwrap();
    let run = hvaudit_reading_config()
        .current_dir(&ops)
        .args(["--config", "hvaudit.toml", "audit", "-q"])
        .arg(&logs)
        .output()
        .unwrap();
    assert_eq!(run.status.code(), Some(1), "{run:?}");
    assert!(ops.join("rejected.txt").exists());
    let stderr = String::from_utf8_lossy(&run.stderr);
    assert_eq!(
        stderr.trim(),
        "hvaudit: configuration hvaudit.toml (--config) set: bad-lines"
    );
}

#[test]
fn an_explicit_file_inside_the_logs_is_refused() {
    let root = tempfile::tempdir().unwrap();
    let logs = root.path().join("logs");
    copy_logs(&logs);
    let planted = logs.join("hvaudit.toml");
    std::fs::write(&planted, "[audit]\nfail-on = \"none\"\n").unwrap();
    let by_flag = hvaudit_reading_config()
        .arg("--config")
        .arg(&planted)
        .args(["audit", "-q"])
        .arg(&logs)
        .output()
        .unwrap();
    let by_env = hvaudit_reading_config()
        .env("HVAUDIT_CONFIG", &planted)
        .args(["audit", "-q"])
        .arg(logs.join("aep-0.1.ndjson"))
        .output()
        .unwrap();
    for (how, run) in [("--config", by_flag), ("HVAUDIT_CONFIG", by_env)] {
        let stderr = String::from_utf8_lossy(&run.stderr);
        assert_eq!(run.status.code(), Some(2), "{how}: {stderr}");
        assert!(
            stderr.contains(&format!("({how}) lies inside the input"))
                && stderr.contains("move it out of the logs' directory"),
            "{how}: {stderr}"
        );
    }
    // Moved out, it applies, and says so under --quiet.
    let outside = root.path().join("ops.toml");
    std::fs::rename(&planted, &outside).unwrap();
    let run = hvaudit_reading_config()
        .env("HVAUDIT_CONFIG", &outside)
        .args(["audit", "-q"])
        .arg(&logs)
        .output()
        .unwrap();
    assert_eq!(run.status.code(), Some(0));
    let stderr = String::from_utf8_lossy(&run.stderr);
    assert!(
        stderr.starts_with("hvaudit: configuration ")
            && stderr
                .trim_end()
                .ends_with("ops.toml (HVAUDIT_CONFIG) set: fail-on"),
        "{stderr}"
    );
    // --no-config reads none, the environment's neither.
    let run = hvaudit_reading_config()
        .env("HVAUDIT_CONFIG", &outside)
        .args(["--no-config", "audit", "-q"])
        .arg(&logs)
        .output()
        .unwrap();
    assert_eq!(run.status.code(), Some(1));
    assert!(run.stderr.is_empty(), "{run:?}");
}

#[test]
fn a_run_that_applies_a_configuration_says_so_and_every_report_states_it() {
    let root = tempfile::tempdir().unwrap();
    let (ops, logs) = (root.path().join("ops"), root.path().join("logs"));
    copy_logs(&logs);
    std::fs::create_dir(&ops).unwrap();
    std::fs::write(
        ops.join("hvaudit.toml"),
        "[audit]\nfail-on = \"critical\"\nformat = \"json\"\n\n\
         [rules.\"token.replayed\"]\nseverity = \"critical\"\n",
    )
    .unwrap();
    let run = hvaudit_reading_config()
        .current_dir(&ops)
        .args(["audit", "-q"])
        .arg(&logs)
        .output()
        .unwrap();
    let said = "./hvaudit.toml (working directory) set: fail-on, format; \
                [rules] token.replayed severity=critical";
    assert_eq!(
        String::from_utf8_lossy(&run.stderr).trim_end(),
        format!("hvaudit: configuration {said}")
    );
    let report: Value = serde_json::from_slice(&run.stdout).unwrap();
    assert_eq!(report["configuration"]["found"], "working directory");
    assert_eq!(report["configuration"]["options"][1], "format");
    // Without one, no trace of it.
    let run = hvaudit_reading_config()
        .current_dir(&ops)
        .args(["--no-config", "audit", "-q", "--format", "json"])
        .arg(&logs)
        .output()
        .unwrap();
    let report: Value = serde_json::from_slice(&run.stdout).unwrap();
    assert!(report.get("configuration").is_none());
    assert!(run.stderr.is_empty());
}

/// A rule directory with `file` (relative) holding `text`.
fn rules_dir(root: &Path, file: &str, text: &str) -> PathBuf {
    let dir = root.join("rules");
    let path = dir.join(file);
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    std::fs::write(&path, text).unwrap();
    dir
}

fn rule(id: &str, sql: &str) -> String {
    format!(
        "-- id: {id}\n-- severity: low\n-- family: custom\n-- dialect: any\n\
         -- summary: s\n-- spec: local\n-- explain:\n--   e\n{sql}\n"
    )
}

#[test]
fn a_rule_or_view_that_is_not_a_query_is_refused_before_anything_runs() {
    let root = tempfile::tempdir().unwrap();
    let logs = root.path().join("logs");
    copy_logs(&logs);
    let secret = root.path().join("secret.txt");
    std::fs::write(&secret, "line\nTOP-SECRET-VALUE\n").unwrap();
    let written = root.path().join("x.csv");
    let files: [(&str, String, &str); 5] = [
        (
            "views/90_copy.sql",
            format!("COPY (SELECT 1 AS a) TO '{}'\n", written.display()),
            "COPY ... TO",
        ),
        (
            "views/90_table.sql",
            format!(
                "CREATE EXTERNAL TABLE leak (line TEXT) STORED AS CSV LOCATION '{}'\n",
                secret.display()
            ),
            "CREATE EXTERNAL TABLE",
        ),
        (
            "custom.insert.sql",
            rule("custom.insert", "INSERT INTO events SELECT * FROM events"),
            "INSERT",
        ),
        (
            "custom.set.sql",
            rule("custom.set", "SET datafusion.execution.batch_size = 1"),
            "SET",
        ),
        (
            "custom.two.sql",
            rule(
                "custom.two",
                &format!(
                    "SELECT NULL AS task_id, 'x' AS message, make_array(1) AS seqs; \
                     COPY (SELECT 1) TO '{}'",
                    written.display()
                ),
            ),
            "2 statements",
        ),
    ];
    for (file, text, kind) in files {
        let case = tempfile::tempdir().unwrap();
        let dir = rules_dir(case.path(), file, &text);
        let name = Path::new(file)
            .file_name()
            .unwrap()
            .to_string_lossy()
            .into_owned();
        let audit = hvaudit_reading_config()
            .args(["--no-config", "audit", "-q", "--rules-dir"])
            .arg(&dir)
            .arg(&logs)
            .output()
            .unwrap();
        let lint = hvaudit_reading_config()
            .args(["--no-config", "rules", "lint"])
            .arg(&dir)
            .output()
            .unwrap();
        let test = hvaudit_reading_config()
            .args(["--no-config", "rules", "test"])
            .arg(&dir)
            .output()
            .unwrap();
        for (command, run, code) in [("audit", audit, 2), ("lint", lint, 1), ("test", test, 2)] {
            let said = String::from_utf8_lossy(&run.stdout) + String::from_utf8_lossy(&run.stderr);
            assert_eq!(run.status.code(), Some(code), "{command} {file}: {said}");
            assert!(
                said.contains(&name) && said.contains(kind),
                "{command} {file}: {said}"
            );
            assert!(!said.contains("TOP-SECRET"), "{command} {file}: {said}");
        }
        assert!(!written.exists(), "{file}: nothing was written");
    }
}

#[test]
fn a_rule_cannot_read_a_file_by_naming_it() {
    let root = tempfile::tempdir().unwrap();
    let logs = root.path().join("logs");
    copy_logs(&logs);
    let secret = root.path().join("secret.csv");
    std::fs::write(&secret, "task_id,message\nt,TOP-SECRET-VALUE\n").unwrap();
    let dir = rules_dir(
        root.path(),
        "custom.read.sql",
        &rule(
            "custom.read",
            &format!(
                "SELECT task_id, message, make_array(1) AS seqs FROM '{}'",
                secret.display()
            ),
        ),
    );
    let run = hvaudit_reading_config()
        .args([
            "--no-config",
            "audit",
            "-q",
            "--format",
            "json",
            "--rules-dir",
        ])
        .arg(&dir)
        .arg(&logs)
        .output()
        .unwrap();
    assert_eq!(run.status.code(), Some(2), "the rule fails: {run:?}");
    let said = String::from_utf8_lossy(&run.stdout) + String::from_utf8_lossy(&run.stderr);
    assert!(said.contains("custom.read failed"), "{said}");
    assert!(!said.contains("TOP-SECRET"), "{said}");
}

fn sql(dir: &Path, args: &[&str]) -> std::process::Output {
    hvaudit_reading_config()
        .current_dir(dir)
        .args(["--no-config", "sql", "-q"])
        .args(args)
        .arg(sample_dir().join("aep-0.1.ndjson"))
        .output()
        .unwrap()
}

#[test]
fn sql_from_a_file_runs_queries_only_unless_allowed() {
    let dir = tempfile::tempdir().unwrap();
    let copy = "SELECT count(*) AS n FROM events; COPY (SELECT 1 AS a) TO 'copied.csv'";
    std::fs::write(dir.path().join("q.sql"), copy).unwrap();
    let run = sql(dir.path(), &["-f", "q.sql"]);
    let stderr = String::from_utf8_lossy(&run.stderr);
    assert_eq!(run.status.code(), Some(2), "{stderr}");
    assert!(
        stderr.contains("statement 2 of 2: a COPY ... TO statement is refused")
            && stderr.contains("pass --allow-writes to run it"),
        "{stderr}"
    );
    assert!(run.stdout.is_empty(), "refused before any statement ran");
    assert!(!dir.path().join("copied.csv").exists());
    let run = sql(dir.path(), &["-f", "q.sql", "--allow-writes"]);
    assert_eq!(run.status.code(), Some(0), "{run:?}");
    assert!(dir.path().join("copied.csv").exists());
    std::fs::remove_file(dir.path().join("copied.csv")).unwrap();
    // -e keeps its power, unless --read-only.
    let run = sql(dir.path(), &["-e", copy]);
    assert_eq!(run.status.code(), Some(0), "{run:?}");
    assert!(dir.path().join("copied.csv").exists());
    std::fs::remove_file(dir.path().join("copied.csv")).unwrap();
    let secret = dir.path().join("secret.csv");
    std::fs::write(&secret, "a\nTOP-SECRET\n").unwrap();
    let external = format!(
        "CREATE EXTERNAL TABLE s STORED AS CSV LOCATION '{}'",
        secret.display()
    );
    for statement in [copy.to_string(), external] {
        let run = sql(dir.path(), &["--read-only", "-e", &statement]);
        let stderr = String::from_utf8_lossy(&run.stderr);
        assert_eq!(run.status.code(), Some(2), "{stderr}");
        assert!(
            stderr.contains("leave out --read-only to run it"),
            "{stderr}"
        );
        assert!(!String::from_utf8_lossy(&run.stdout).contains("TOP-SECRET"));
    }
    assert!(!dir.path().join("copied.csv").exists());
    // Queries run as ever.
    let run = sql(
        dir.path(),
        &["--read-only", "-e", "SELECT count(*) AS n FROM tasks"],
    );
    assert_eq!(run.status.code(), Some(0), "{run:?}");
}
