//! The user's own rules and views (`--rules-dir`): they read the built-in
//! views and each other, whatever their file names, and a view that cannot
//! be built is reported without stopping the rest.

use crate::common::{audit_lines, findings_of};
use serde_json::json;
use std::path::Path;

fn event(id: &str, ty: &str, at: &str, task: &str) -> String {
    json!({
        "spec_version": "0.2", "id": id, "type": ty, "source": "agent:test",
        "created_at": format!("2026-07-14T{at}Z"), "task_id": task,
        "payload": {"task_id": task},
    })
    .to_string()
}

/// Task `done` runs to completion; task `open` is submitted and never ends.
fn log() -> Vec<String> {
    vec![
        event("e1", "task.submitted", "10:00:00", "done"),
        event("e2", "task.completed", "10:00:01", "done"),
        event("e3", "task.submitted", "10:00:02", "open"),
    ]
}

/// A rule file reporting every row of `view` as a finding.
fn rule_over(view: &str) -> String {
    format!(
        "-- id: custom.unfinished\n-- severity: low\n-- family: custom\n-- dialect: any\n\
         -- summary: a task without a terminal event\n-- spec: local policy\n\
         -- explain:\n--   Every task must end.\n\
         SELECT task_id, 'no terminal event' AS message, make_array(first_seq) AS seqs FROM {view}\n"
    )
}

fn write(dir: &Path, name: &str, text: &str) {
    let path = dir.join(name);
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    std::fs::write(path, text).unwrap();
}

#[test]
fn a_user_rule_reads_a_user_view_that_reads_another_and_a_built_in_one() {
    let dir = tempfile::tempdir().unwrap();
    // The file names sort the reader before what it reads: the order comes
    // from the queries, not the names.
    write(
        dir.path(),
        "views/01_unfinished.sql",
        "SELECT * FROM task_facts WHERE term_seq IS NULL",
    );
    write(
        dir.path(),
        "views/02_task_facts.sql",
        "-- materialize: true\nSELECT task_id, first_seq, term_seq FROM tasks",
    );
    write(
        dir.path(),
        "custom.unfinished.sql",
        &rule_over("unfinished"),
    );
    let report = audit_lines(&log(), |c| c.rules_dir = Some(dir.path().to_path_buf()));
    assert!(report.rule_errors.is_empty(), "{:?}", report.rule_errors);
    assert_eq!(
        findings_of(&report, "custom.unfinished"),
        vec![(Some("open".into()), vec!["e3".into()])]
    );
}

#[test]
fn views_that_read_each_other_are_reported_and_the_other_rules_still_run() {
    let dir = tempfile::tempdir().unwrap();
    write(dir.path(), "views/50_left.sql", "SELECT * FROM right_side");
    write(dir.path(), "views/51_right_side.sql", "SELECT * FROM left");
    write(dir.path(), "custom.unfinished.sql", &rule_over("left"));
    let mut lines = log();
    // A built-in rule's case: the same id with different content.
    lines.push(event("e1", "task.submitted", "10:00:03", "done"));
    let report = audit_lines(&lines, |c| c.rules_dir = Some(dir.path().to_path_buf()));
    let failed: Vec<&str> = report
        .rule_errors
        .iter()
        .map(|(what, _)| what.as_str())
        .collect();
    assert_eq!(
        failed,
        ["50_left.sql", "51_right_side.sql", "custom.unfinished"]
    );
    assert!(
        report.rule_errors.iter().all(|(_, e)| e.contains("cycle")),
        "{:?}",
        report.rule_errors
    );
    assert_eq!(
        findings_of(&report, "integrity.conflicting_duplicate").len(),
        1
    );
}

#[test]
fn a_user_rule_and_view_may_call_the_helpers() {
    let dir = tempfile::tempdir().unwrap();
    // Each task's first event, by time_order / seq_of.
    write(
        dir.path(),
        "views/10_firsts.sql",
        "SELECT seq_of(min(time_order(created_us, seq))) AS first_seq FROM ev GROUP BY task_key",
    );
    write(
        dir.path(),
        "custom.first_events.sql",
        "-- id: custom.first_events\n-- severity: info\n-- family: custom\n-- dialect: any\n\
         -- summary: the first event of every task\n-- spec: local policy\n\
         -- explain:\n--   Lists them.\n\
         SELECT e.task_id, concat('first at ', Instant_Text(e.created_at), ' -- instant_text(x)') AS message,\n\
                make_array(e.seq) AS seqs\n\
         FROM firsts f JOIN ev e ON e.seq = f.first_seq\n",
    );
    let report = audit_lines(&log(), |c| c.rules_dir = Some(dir.path().to_path_buf()));
    assert!(report.rule_errors.is_empty(), "{:?}", report.rule_errors);
    let mut messages: Vec<(Vec<String>, String)> = report
        .findings
        .iter()
        .filter(|f| f.rule == "custom.first_events")
        .map(|f| (f.event_ids.clone(), f.message.clone()))
        .collect();
    messages.sort();
    assert_eq!(
        messages,
        [
            (
                vec!["e1".to_string()],
                "first at 2026-07-14T10:00:00.000Z -- instant_text(x)".to_string()
            ),
            (
                vec!["e3".to_string()],
                "first at 2026-07-14T10:00:02.000Z -- instant_text(x)".to_string()
            ),
        ]
    );
}

#[test]
fn a_helper_called_with_the_wrong_arguments_is_reported_with_its_file_and_line() {
    let dir = tempfile::tempdir().unwrap();
    write(
        dir.path(),
        "views/10_firsts.sql",
        "SELECT task_key,\n       min(time_order(created_us)) AS ord\nFROM ev GROUP BY task_key",
    );
    write(dir.path(), "custom.unfinished.sql", &rule_over("tasks"));
    let cfg = hvaudit::audit::AuditConfig {
        rules_dir: Some(dir.path().to_path_buf()),
        ..Default::default()
    };
    let e = cfg
        .catalog()
        .expect_err("the rule set is refused")
        .to_string();
    assert!(
        e.contains("10_firsts.sql: line 2: time_order(us, seq) takes 2 arguments, given 1"),
        "{e}"
    );
    let lint = assert_cmd::Command::cargo_bin("hvaudit")
        .unwrap()
        .timeout(std::time::Duration::from_secs(60))
        .args(["--no-config", "rules", "lint"])
        .arg(dir.path())
        .output()
        .unwrap();
    assert_eq!(lint.status.code(), Some(1));
    let said = String::from_utf8_lossy(&lint.stdout);
    assert!(
        said.contains("error: 10_firsts.sql: line 2: time_order(us, seq)"),
        "{said}"
    );
}

#[test]
fn a_summary_count_that_cannot_be_taken_is_reported_not_zero() {
    let dir = tempfile::tempdir().unwrap();
    // The view the report's count of unresolved decision bases reads,
    // replaced by one that cannot be built.
    write(
        dir.path(),
        "views/99_unresolved_basis.sql",
        "SELECT * FROM no_such_table",
    );
    let report = audit_lines(&log(), |c| c.rules_dir = Some(dir.path().to_path_buf()));
    let count = report
        .rule_errors
        .iter()
        .find(|(what, _)| what == "unresolved_basis");
    assert!(
        count.is_some_and(|(_, e)| e.contains("counting the unresolved decision bases")),
        "{:?}",
        report.rule_errors
    );
}
