//! The user's own rules and views (`--rules-dir`): they read the built-in
//! views and each other, whatever their file names, and a view that cannot
//! be built is reported without stopping the rest.

use crate::common::{audit_lines, findings_of, hvaudit};
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

/// A rule file `custom.NAME` of the local policy: `rows` is an optional
/// `-- rows:` header line (with its newline), `sql` its query.
fn custom_rule(name: &str, rows: &str, sql: &str) -> String {
    format!(
        "-- id: custom.{name}\n-- severity: low\n-- family: custom\n-- dialect: any\n\
         -- summary: {name}\n-- spec: local policy\n{rows}-- explain:\n--   Audited apart.\n{sql}\n"
    )
}

/// Write the rule `custom.NAME` into `rules`, then let go of what it and
/// the built-in rules leave unread in `ingested`.
fn let_go_beside(
    rules: &Path,
    name: &str,
    rows: &str,
    sql: &str,
    ingested: &mut hvaudit::ingest::Ingested,
) {
    write(
        rules,
        &format!("custom.{name}.sql"),
        &custom_rule(name, rows, sql),
    );
    let mut catalog = hvaudit::rules::catalog::Catalog::embedded().unwrap();
    catalog.add_dir(rules).unwrap();
    hvaudit::audit::let_go_of_unread_columns(ingested, &catalog);
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
        "SELECT seq_of(min(time_order(created_ns, seq))) AS first_seq FROM ev GROUP BY task_key",
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
        "SELECT task_key,\n       min(time_order(created_ns)) AS ord\nFROM ev GROUP BY task_key",
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
        e.contains("10_firsts.sql: line 2: time_order(ns, seq) takes 2 arguments, given 1"),
        "{e}"
    );
    let lint = hvaudit()
        .timeout(std::time::Duration::from_secs(60))
        .args(["rules", "lint"])
        .arg(dir.path())
        .output()
        .unwrap();
    assert_eq!(lint.status.code(), Some(1));
    let said = String::from_utf8_lossy(&lint.stdout);
    assert!(
        said.contains("error: 10_firsts.sql: line 2: time_order(ns, seq)"),
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
    assert_eq!(
        messages_of(&report, "custom.tenant"),
        [r#"payload {"task_id":"done"}"#]
    );
}

/// `log()` with envelope fields no built-in query reads (`topic`,
/// `conversation_id`, `correlation_id`, `confidence`) on every event.
fn log_with_unread_fields() -> Vec<String> {
    log()
        .iter()
        .map(|line| {
            line.replacen(
                '{',
                r#"{"topic":"t","conversation_id":"c","correlation_id":"r","confidence":0.5,"#,
                1,
            )
        })
        .collect()
}

fn ingest_lines(dir: &Path, lines: &[String]) -> hvaudit::ingest::Ingested {
    let path = dir.join("log.ndjson");
    std::fs::write(&path, lines.join("\n")).unwrap();
    hvaudit::ingest::ingest(&[path], &crate::common::test_reading()).unwrap()
}

fn null_counts(ingested: &hvaudit::ingest::Ingested, columns: &[&str]) -> Vec<usize> {
    let events = &ingested.events[0];
    columns
        .iter()
        .map(|c| events.column_by_name(c).unwrap().null_count())
        .collect()
}

#[test]
fn the_built_in_rules_leave_unread_columns_out_of_the_loaded_table() {
    let dir = tempfile::tempdir().unwrap();
    let mut ingested = ingest_lines(dir.path(), &log_with_unread_fields());
    let catalog = hvaudit::rules::catalog::Catalog::embedded().unwrap();
    hvaudit::audit::let_go_of_unread_columns(&mut ingested, &catalog);
    let gone = [
        "payload",
        "extra",
        "topic",
        "conversation_id",
        "correlation_id",
        "confidence",
    ];
    assert_eq!(null_counts(&ingested, &gone), [3; 6], "{gone:?}");
    let kept = [
        "id",
        "task_id",
        "source",
        "created_at",
        "src_file",
        "src_line",
    ];
    assert_eq!(null_counts(&ingested, &kept), [0; 6], "{kept:?}");
}

/// A user's query with a `*` may read any column: none is let go.
#[test]
fn a_user_query_with_a_wildcard_keeps_every_column() {
    let dir = tempfile::tempdir().unwrap();
    let rules = dir.path().join("rules");
    let mut ingested = ingest_lines(dir.path(), &log_with_unread_fields());
    let_go_beside(
        &rules,
        "everything",
        "",
        "SELECT e.task_id, 'x' AS message, make_array(e.seq) AS seqs \
         FROM (SELECT * FROM events) e WHERE e.seq < 0",
        &mut ingested,
    );
    let columns = ["payload", "topic", "correlation_id", "confidence"];
    assert_eq!(null_counts(&ingested, &columns), [0; 4], "{columns:?}");
    // count(*) is not such a `*`.
    let_go_beside(
        &rules,
        "everything",
        "",
        "SELECT task_id, 'x' AS message, make_array(min(seq)) AS seqs FROM events \
         GROUP BY task_id HAVING count(*) > 9",
        &mut ingested,
    );
    assert_eq!(null_counts(&ingested, &columns), [3; 4], "{columns:?}");
}

/// The rule comparing versions reads their payloads and correlation ids:
/// an id with two contents keeps both rows' text, the other rows lose it.
#[test]
fn the_versions_of_an_id_keep_their_raw_json() {
    let dir = tempfile::tempdir().unwrap();
    let mut lines = log_with_unread_fields();
    let other = lines[0].replace(
        r#""payload":{"task_id":"done"}"#,
        r#""payload":{"task_id":"done","n":1}"#,
    );
    lines.push(other);
    let mut ingested = ingest_lines(dir.path(), &lines);
    let catalog = hvaudit::rules::catalog::Catalog::embedded().unwrap();
    hvaudit::audit::let_go_of_unread_columns(&mut ingested, &catalog);
    let payloads = hvaudit::audit::block_on(async {
        let ctx = datafusion::prelude::SessionContext::new();
        hvaudit::engine::register_tables(&ctx, &ingested).unwrap();
        let df = ctx
            .sql(
                "SELECT id, version, CASE \
                   WHEN payload IS NULL AND correlation_id IS NULL THEN 'true' \
                   WHEN payload IS NOT NULL AND correlation_id IS NOT NULL THEN 'false' \
                   ELSE 'mixed' END AS gone \
                 FROM events ORDER BY seq",
            )
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
    let message = collision_message(&lines);
    assert!(message.contains("differing: payload"), "{message}");
}

/// The messages of `rule`'s findings, in report order.
fn messages_of(report: &hvaudit::Report, rule: &str) -> Vec<String> {
    let found = report.findings.iter().filter(|f| f.rule == rule);
    found.map(|f| f.message.clone()).collect()
}

/// What `integrity.conflicting_duplicate` says of the one collision in
/// `lines`.
fn collision_message(lines: &[String]) -> String {
    let report = audit_lines(lines, |_| {});
    let found = report
        .findings
        .iter()
        .find(|f| f.rule == "integrity.conflicting_duplicate")
        .expect("the collision is found");
    found.message.clone()
}

/// Versions that differ only in an envelope field no other rule reads are
/// still told apart: the rows of versioned ids keep every column.
#[test]
fn versions_differing_only_in_an_unread_envelope_field_are_compared() {
    let mut lines = log_with_unread_fields();
    lines.push(lines[2].replace(r#""correlation_id":"r""#, r#""correlation_id":"r2""#));
    let message = collision_message(&lines);
    assert!(message.contains("differing: correlation_id"), "{message}");
}

/// A user's rule that says which rows it reads keeps the columns only it
/// names in those rows, and reads them there.
#[test]
fn a_user_rule_saying_its_rows_keeps_its_columns_in_those_rows() {
    let dir = tempfile::tempdir().unwrap();
    let rules = dir.path().join("rules");
    let lines = log_with_unread_fields();
    let mut ingested = ingest_lines(dir.path(), &lines);
    let_go_beside(
        &rules,
        "topic",
        "-- rows: type task.completed\n",
        "SELECT task_id, concat('topic ', topic) AS message, make_array(seq) AS seqs \
         FROM ev WHERE type = 'task.completed'",
        &mut ingested,
    );
    // One completion among three events keeps its topic (and the payload,
    // which the built-in rules saying their rows name: the rows any of
    // them reads keep what they name), the others hold nulls.
    assert_eq!(null_counts(&ingested, &["topic", "payload"]), [2, 2]);
    assert_eq!(null_counts(&ingested, &["conversation_id"]), [3]);
    let report = audit_lines(&lines, |c| c.rules_dir = Some(rules.clone()));
    assert_eq!(messages_of(&report, "custom.topic"), ["topic t"]);
}

/// With one rule selected, most columns go, and none that cannot be null.
#[test]
fn a_narrow_selection_of_rules_runs_over_what_it_reads() {
    let mut lines = log_with_unread_fields();
    lines.push(lines[2].replace(r#""correlation_id":"r""#, r#""correlation_id":"r2""#));
    let report = audit_lines(&lines, |c| {
        c.rules_glob = Some("integrity.conflicting_duplicate".into())
    });
    assert!(report.rule_errors.is_empty(), "{:?}", report.rule_errors);
    let found: Vec<(String, String)> = report
        .findings
        .iter()
        .map(|f| (f.rule.clone(), f.message.clone()))
        .collect();
    assert_eq!(found.len(), 1, "{found:?}");
    assert_eq!(found[0].0, "integrity.conflicting_duplicate");
    assert!(
        found[0].1.contains("differing: correlation_id"),
        "{found:?}"
    );
}

/// Versions whose rows lie in different batches of the table (groups of a
/// few thousand rows, as in any large log) keep their columns in both.
#[test]
fn versions_in_different_batches_are_still_compared() {
    let dir = tempfile::tempdir().unwrap();
    let mut lines = log_with_unread_fields();
    let later = lines[2].replace(r#""correlation_id":"r""#, r#""correlation_id":"r2""#);
    lines.extend((0..20_000).map(|i| event(&format!("f{i}"), "task.progress", "10:00:03", "open")));
    lines.push(later);
    let mut ingested = ingest_lines(dir.path(), &lines);
    assert!(
        ingested.events.len() > 1,
        "one batch: the test does not split"
    );
    let catalog = hvaudit::rules::catalog::Catalog::embedded().unwrap();
    hvaudit::audit::let_go_of_unread_columns(&mut ingested, &catalog);
    let kept: usize = ingested
        .events
        .iter()
        .map(|b| b.num_rows() - b.column_by_name("correlation_id").unwrap().null_count())
        .sum();
    assert_eq!(
        kept, 2,
        "both versions keep their correlation_id, no other row"
    );
    let message = collision_message(&lines);
    assert!(message.contains("differing: correlation_id"), "{message}");
}

/// A rule file is code from a shared repository: one whose query never
/// ends (10^13 rows of a series, scanned for none) cannot hold a nightly
/// audit. Under `--rule-timeout` the audit stops it and exits 2 naming it;
/// the same rule over a series it can finish runs as any other. `sql
/// --timeout` bounds a statement the same way.
#[test]
fn a_query_that_never_ends_is_stopped_by_the_timeouts() {
    let dir = tempfile::tempdir().unwrap();
    let logs = dir.path().join("logs");
    std::fs::create_dir_all(&logs).unwrap();
    std::fs::write(logs.join("log.ndjson"), log().join("\n") + "\n").unwrap();
    let series = |n: &str| {
        format!(
            "SELECT NULL AS task_id, 'never' AS message, make_array(value) AS seqs \
             FROM generate_series(1, {n}) WHERE value < 0"
        )
    };
    let run = |rules: &Path, extra: &[&str]| {
        let started = std::time::Instant::now();
        let out = hvaudit()
            .args(["audit", "-q", "--rules-dir"])
            .arg(rules)
            .args(extra)
            .arg(&logs)
            .output()
            .unwrap();
        (
            out.status.code(),
            String::from_utf8_lossy(&out.stderr).into_owned(),
            started.elapsed(),
        )
    };
    // A rules directory holding one rule, custom.NAME, over a series to `end`.
    let rules_over = |name: &str, end: &str| {
        let rules = dir.path().join(name);
        std::fs::create_dir_all(&rules).unwrap();
        let file = format!("custom.{name}.sql");
        write(&rules, &file, &custom_rule(name, "", &series(end)));
        rules
    };
    let (code, err, took) = run(
        &rules_over("endless", "10000000000000"),
        &["--rule-timeout", "2s"],
    );
    assert_eq!(code, Some(2), "{err}");
    assert!(err.contains("custom.endless"), "{err}");
    assert!(err.contains("--rule-timeout"), "{err}");
    assert!(took < std::time::Duration::from_secs(120), "{took:?}");
    // The legal look-alike: a series it finishes.
    let (code, err, _) = run(&rules_over("finite", "1000"), &["--rule-timeout", "2m"]);
    assert!(matches!(code, Some(0 | 1)), "{err}");
    // sql: a statement over its --timeout is given up, exit 2.
    sql_gives_up(
        &["--timeout", "2s"],
        "SELECT count(*) FROM generate_series(1, 10000000000000) WHERE value < 0",
        &logs,
        "--timeout",
    );
}

/// `hvaudit sql OPTIONS -e QUERY LOGS` exits 2 and says `says`.
fn sql_gives_up(options: &[&str], query: &str, logs: &Path, says: &str) {
    let out = hvaudit()
        .arg("sql")
        .args(options)
        .args(["-e", query])
        .arg(logs)
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(err.contains(says), "{err}");
}

/// `repeat('x', 2^31)` in a rule file built 2 GiB outside the engine's
/// memory pool (8.4 GiB peak under `--memory-limit 512M`). Under a memory
/// limit the call is refused before it allocates: the audit exits 2 naming
/// the rule, and `sql` gives up the statement. The same rule asking for a
/// little runs as any other.
#[test]
fn a_function_asked_for_more_than_the_memory_limit_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let logs = dir.path().join("logs");
    std::fs::create_dir_all(&logs).unwrap();
    std::fs::write(logs.join("log.ndjson"), log().join("\n") + "\n").unwrap();
    let audit = |name: &str, times: &str| {
        let rules = dir.path().join(name);
        std::fs::create_dir_all(&rules).unwrap();
        let sql = format!(
            "SELECT task_id, left(repeat(id, {times}), 10) AS message, make_array(seq) AS seqs \
             FROM ev LIMIT 1"
        );
        write(
            &rules,
            &format!("custom.{name}.sql"),
            &custom_rule(name, "", &sql),
        );
        let out = hvaudit()
            .args(["audit", "-q", "--memory-limit", "256M", "--rules-dir"])
            .arg(&rules)
            .arg(&logs)
            .output()
            .unwrap();
        (
            out.status.code(),
            String::from_utf8_lossy(&out.stderr).into_owned(),
        )
    };
    let (code, err) = audit("huge", "2147483648");
    assert_eq!(code, Some(2), "{err}");
    assert!(err.contains("custom.huge"), "{err}");
    assert!(err.contains("repeat() would build"), "{err}");
    let (code, err) = audit("small", "3");
    assert!(matches!(code, Some(0 | 1)), "{err}");
    sql_gives_up(
        &["--memory-limit", "256M"],
        "SELECT length(lpad('x', 2147483648)) AS n",
        &logs,
        "lpad() would build",
    );
}
