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
