//! The command line as users and scripts see it: exit codes, stderr summary,
//! sql output formats.

use crate::common::hvaudit;
use crate::ingest::upstream;
use predicates::prelude::*;

#[test]
fn sql_answers_over_the_fixtures_in_every_format() {
    let fx = upstream("harmovela-0.2/fixtures/task-lifecycle.ndjson");
    hvaudit()
        .args([
            "sql",
            "-e",
            "SELECT count(*) AS n FROM events",
            "--format",
            "json",
        ])
        .arg(&fx)
        .assert()
        .success()
        .stdout(predicate::str::contains(r#"[{"n":5}]"#))
        .stderr(predicate::str::contains(
            "5 lines = 5 events + 0 redeliveries + 0 bad lines",
        ));
    hvaudit()
        .args([
            "sql",
            "-q",
            "--format",
            "csv",
            "-e",
            "SELECT id FROM events ORDER BY seq LIMIT 2",
        ])
        .arg(&fx)
        .assert()
        .success()
        .stdout("id\nevt_task_001\nevt_task_002\n");
    hvaudit()
        .args([
            "sql",
            "-q",
            "--format",
            "ndjson",
            "-e",
            "SELECT json_get_str(payload, 'state') AS s FROM events WHERE id = 'evt_task_002'",
        ])
        .arg(&fx)
        .assert()
        .success()
        .stdout("{\"s\":\"accepted\"}\n");
    hvaudit()
        .args([
            "sql",
            "-q",
            "-e",
            "SELECT count(*) FROM events; SELECT 42 AS answer",
        ])
        .arg(&fx)
        .assert()
        .success()
        .stdout(predicate::str::contains("answer").and(predicate::str::contains("42")));
}

#[test]
fn unreadable_paths_and_bad_options_exit_2_with_advice() {
    hvaudit()
        .args(["audit", "/no/such/log.ndjson"])
        .assert()
        .code(2)
        .stderr(
            predicate::str::contains("cannot read /no/such/log.ndjson")
                .and(predicate::str::contains("check the path")),
        );
    hvaudit()
        .args(["audit", "--fail-on", "urgent", "x"])
        .assert()
        .code(2)
        .stderr(predicate::str::contains("unknown severity"));
    hvaudit()
        .args(["audit", "--max-line-bytes", "3G", "x"])
        .assert()
        .code(2)
        .stderr(predicate::str::contains("above the largest line cap, 1G"));
    hvaudit()
        .args(["sql", "-q", "-e", "SELECT nope FROM events"])
        .arg(upstream("aep-0.1/fixtures"))
        .assert()
        .code(2);
}

#[test]
fn bad_lines_file_gets_the_rejected_lines_verbatim() {
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("log.ndjson");
    std::fs::write(&log, "garbage one\n{\"a\":1}\n").unwrap();
    let out = dir.path().join("bad.ndjson");
    hvaudit()
        .args(["sql", "-q", "-e", "SELECT 1", "--bad-lines"])
        .arg(&out)
        .arg(&log)
        .assert()
        .success();
    assert_eq!(
        std::fs::read_to_string(&out).unwrap(),
        "garbage one\n{\"a\":1}\n"
    );
}

#[test]
fn a_rules_at_once_that_is_not_a_count_is_named_on_stderr() {
    let fx = upstream("harmovela-0.2/fixtures/task-lifecycle.ndjson");
    hvaudit()
        .env("HVAUDIT_RULES_AT_ONCE", "three")
        .args(["audit", "-q", "--fail-on", "none", "--format", "json"])
        .arg(&fx)
        .assert()
        .success()
        .stderr(predicate::str::contains(
            "HVAUDIT_RULES_AT_ONCE=\"three\" is not a count above 0",
        ));
}
