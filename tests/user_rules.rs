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

/// A loaded audit lets go of the raw JSON columns no query names; a user
/// rule that names `payload` and `extra` still reads them as written.
#[test]
fn a_user_rule_reads_the_payload_and_extra_the_built_in_rules_leave_out() {
    let dir = tempfile::tempdir().unwrap();
    write(
        dir.path(),
        "custom.tenant.sql",
        "-- id: custom.tenant\n-- severity: low\n-- family: custom\n-- dialect: any\n\
         -- summary: a task of tenant t9\n-- spec: local policy\n\
         -- explain:\n--   Tenant t9 is audited apart.\n\
         SELECT task_id, concat('payload ', payload) AS message, make_array(seq) AS seqs \
         FROM events WHERE extra LIKE '%\"t9\"%'\n",
    );
    let mut lines = log();
    lines[1] = lines[1].replacen('{', r#"{"tenant_id":"t9","#, 1);
    let report = audit_lines(&lines, |c| c.rules_dir = Some(dir.path().to_path_buf()));
    assert!(report.rule_errors.is_empty(), "{:?}", report.rule_errors);
    let found: Vec<String> = report
        .findings
        .iter()
        .filter(|f| f.rule == "custom.tenant")
        .map(|f| f.message.clone())
        .collect();
    assert_eq!(found, [r#"payload {"task_id":"done"}"#]);
}

#[test]
fn the_built_in_rules_leave_the_raw_json_out_of_the_loaded_table() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("log.ndjson");
    std::fs::write(&path, log().join("\n")).unwrap();
    let mut ingested =
        hvaudit::ingest::ingest(&[path], &hvaudit::ingest::IngestOptions::default()).unwrap();
    let catalog = hvaudit::rules::catalog::Catalog::embedded().unwrap();
    hvaudit::audit::let_go_of_unread_json(&mut ingested, &catalog);
    let events = &ingested.events[0];
    for (column, nulls) in [("payload", 3), ("extra", 3), ("id", 0), ("task_id", 0)] {
        let array = events.column_by_name(column).unwrap();
        assert_eq!(array.null_count(), nulls, "{column}");
    }
}

/// The rule comparing versions reads their payloads: an id with two
/// contents keeps both rows' text, the other rows lose theirs.
#[test]
fn the_versions_of_an_id_keep_their_raw_json() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("log.ndjson");
    let mut lines = log();
    let mut other = event("e1", "task.submitted", "10:00:00", "done");
    other = other.replace(
        r#""payload":{"task_id":"done"}"#,
        r#""payload":{"task_id":"done","n":1}"#,
    );
    lines.push(other);
    std::fs::write(&path, lines.join("\n")).unwrap();
    let mut ingested = hvaudit::ingest::ingest(
        std::slice::from_ref(&path),
        &hvaudit::ingest::IngestOptions::default(),
    )
    .unwrap();
    let catalog = hvaudit::rules::catalog::Catalog::embedded().unwrap();
    hvaudit::audit::let_go_of_unread_json(&mut ingested, &catalog);
    let payloads = hvaudit::audit::block_on(async {
        let ctx = datafusion::prelude::SessionContext::new();
        hvaudit::engine::register_tables(&ctx, &ingested).unwrap();
        let df = ctx
            .sql("SELECT id, version, payload IS NULL AS gone FROM events ORDER BY seq")
            .await
            .unwrap();
        datafusion::arrow::util::pretty::pretty_format_batches(&df.collect().await.unwrap())
            .unwrap()
            .to_string()
    });
    let rows: Vec<&str> = payloads.lines().filter(|l| l.contains("| e")).collect();
    assert_eq!(rows.len(), 4, "{payloads}");
    for (row, gone) in rows.iter().zip(["false", "true", "true", "false"]) {
        assert!(
            row.trim_end_matches('|').trim().ends_with(gone),
            "{payloads}"
        );
    }
    // And the rule still says what differs.
    let report = audit_lines(&lines, |_| {});
    let found = report
        .findings
        .iter()
        .find(|f| f.rule == "integrity.conflicting_duplicate")
        .expect("the collision is found");
    assert!(
        found.message.contains("differing: payload"),
        "{}",
        found.message
    );
}

/// Only the rules listed as reading raw JSON may name it among the built-in
/// queries: the loaded audit keeps it for them in the rows they read.
#[test]
fn no_other_built_in_query_names_a_raw_json_column() {
    let catalog = hvaudit::rules::catalog::Catalog::embedded().unwrap();
    let readers: Vec<&str> = hvaudit::audit::JSON_READERS.iter().map(|r| r.0).collect();
    let words = catalog.words(&readers).unwrap();
    for column in hvaudit::ingest::schema::JSON_COLUMNS.iter() {
        if column.starts_with("filter_") {
            continue;
        }
        assert!(!words.contains(*column), "a built-in query names {column}");
    }
}
