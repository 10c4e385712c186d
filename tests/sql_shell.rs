//! The `hvaudit sql LOGS` prompt driven through standard input: meta-
//! commands, results with their row count, errors on one line, listings
//! with the built-in views apart and sorted. (Completion is tested on its
//! function in src/commands/sql_shell.rs: it needs a terminal.)

use crate::common::hvaudit;
use std::path::Path;

fn log(dir: &Path) -> std::path::PathBuf {
    let p = dir.join("log.ndjson");
    let line = |id: &str, ty: &str| {
        format!(
            r#"{{"spec_version":"0.2","id":"{id}","type":"{ty}","source":"agent:a","created_at":"2026-07-14T10:00:00Z","task_id":"t1","payload":{{"task_id":"t1"}}}}"#
        )
    };
    let lines = [line("e1", "task.submitted"), line("e2", "task.accepted")];
    std::fs::write(&p, lines.join("\n") + "\n").unwrap();
    p
}

/// The shell fed `input`, with HOME in a temp dir: (stdout, stderr).
fn shell(input: &str) -> (String, String) {
    let dir = tempfile::tempdir().unwrap();
    let log = log(dir.path());
    let home = dir.path().join("home");
    std::fs::create_dir(&home).unwrap();
    let out = hvaudit()
        .timeout(std::time::Duration::from_secs(120))
        .env("HOME", &home)
        .args(["sql", "-q"])
        .arg(&log)
        .write_stdin(input)
        .output()
        .unwrap();
    assert!(out.status.success(), "{out:?}");
    // Piped lines are not a session to keep in the history.
    assert_eq!(std::fs::read_dir(&home).unwrap().count(), 0);
    (
        String::from_utf8(out.stdout).unwrap(),
        String::from_utf8(out.stderr).unwrap(),
    )
}

#[test]
fn results_come_with_their_row_count_and_errors_on_one_line() {
    let (out, err) = shell(
        "SELECT id\n  FROM events\n  ORDER BY id;\nSELEC 1;\nSELECT * FROM nowhere;\n\
         SELECT id FROM events WHERE false;\n\\timing off\nSELECT 1 AS one;\n",
    );
    assert!(out.contains("| e1 |") && out.contains("| e2 |"), "{out}");
    let lines: Vec<&str> = err.lines().collect();
    assert!(
        lines[0].starts_with("2 rows in ") && lines[0].ends_with(" s"),
        "{err}"
    );
    assert!(
        lines[1].starts_with("error: syntax error: ") && lines[1].contains("SELEC"),
        "{err}"
    );
    assert!(!err.contains("ParserError"), "{err}");
    assert!(
        lines[2].starts_with("error: ") && lines[2].contains("nowhere"),
        "{err}"
    );
    assert!(lines[3].starts_with("0 rows in "), "{err}");
    assert_eq!(&lines[4..], ["timing off", "1 row"], "{err}");
    // The empty result still shows its head, without a second count.
    assert!(out.contains("| id |"), "{out}");
    assert!(!out.contains("0 rows"), "{out}");
}

#[test]
fn meta_commands_list_describe_help_and_quit() {
    let (out, err) = shell(
        "\\dt\n\\dv\n\\d events\n.schema tasks\nCREATE VIEW mine AS SELECT id FROM events;\n\
         .tables\n\\?\nhelp\n\\d nosuch\n\\x\n\\q\nSELECT 424242 AS after_quit;\n",
    );
    // \dt: the log's tables, sorted; no views.
    let dt = out.split("built-in views").next().unwrap();
    assert!(
        dt.starts_with("tables:\n  bad_lines decision_types events evidence settings\n"),
        "{out}"
    );
    // \dv: the built-in views apart, sorted.
    let builtin = out
        .split("built-in views (queries/views/):\n")
        .nth(1)
        .unwrap();
    let names: Vec<&str> = builtin
        .lines()
        .take_while(|l| l.starts_with("  "))
        .flat_map(str::split_whitespace)
        .collect();
    let mut sorted = names.clone();
    sorted.sort();
    assert_eq!(names, sorted);
    assert!(
        names.contains(&"tasks") && names.contains(&"ev"),
        "{names:?}"
    );
    assert!(!names.contains(&"events"), "{names:?}");
    // \d NAME and .schema NAME: the columns.
    assert!(out.contains("events (table)\n  seq "), "{out}");
    assert!(
        out.contains("tasks (built-in view, queries/views/10_tasks.sql)\n"),
        "{out}"
    );
    assert!(out.contains("  term_seq "), "{out}");
    // .tables after CREATE VIEW: the user's view in its own group.
    assert!(out.contains("your views:\n  mine\n"), "{out}");
    // \? and help print the help; the unknown ones say so.
    assert_eq!(out.matches("\\timing").count(), 2 * 2, "{out}");
    assert!(err.contains("error: no table or view \"nosuch\""), "{err}");
    assert!(err.contains("error: unknown command \\x"), "{err}");
    // \q ends the shell: the statement after it never runs.
    assert!(!out.contains("424242"), "{out}");
}

#[test]
fn show_tables_lists_the_built_in_views_after_the_tables_sorted() {
    for run in [Run::Shell, Run::Script] {
        let csv = run.csv("SHOW TABLES;");
        let rows: Vec<Vec<&str>> = csv
            .lines()
            .skip(1)
            .map(|l| l.split(',').collect())
            .collect();
        let public: Vec<(&str, &str)> = rows
            .iter()
            .filter(|r| r[1] == "public")
            .map(|r| (r[2], r[3]))
            .collect();
        let first_builtin = public
            .iter()
            .position(|(_, t)| *t == "BUILT-IN VIEW")
            .expect("built-in views listed");
        let (tables, builtin) = public.split_at(first_builtin);
        assert!(builtin.iter().all(|(_, t)| *t == "BUILT-IN VIEW"), "{csv}");
        assert!(tables.iter().any(|(n, _)| *n == "events"), "{csv}");
        assert!(builtin.iter().any(|(n, _)| *n == "tasks"), "{csv}");
        for group in [tables, builtin] {
            let names: Vec<&str> = group.iter().map(|(n, _)| *n).collect();
            let mut sorted = names.clone();
            sorted.sort();
            assert_eq!(names, sorted, "{csv}");
        }
        // The information schema comes last.
        let last_public = rows.iter().rposition(|r| r[1] == "public").unwrap();
        assert!(
            rows[last_public + 1..]
                .iter()
                .all(|r| r[1] == "information_schema")
        );
    }
}

enum Run {
    Shell,
    Script,
}

impl Run {
    fn csv(&self, sql: &str) -> String {
        let dir = tempfile::tempdir().unwrap();
        let log = log(dir.path());
        let mut cmd = hvaudit();
        cmd.timeout(std::time::Duration::from_secs(120))
            .env("HOME", dir.path())
            .args(["sql", "-q", "--format", "csv"]);
        let out = match self {
            Run::Shell => cmd.arg(&log).write_stdin(sql).output(),
            Run::Script => cmd.args(["-e", sql]).arg(&log).output(),
        }
        .unwrap();
        assert!(out.status.success(), "{out:?}");
        String::from_utf8(out.stdout).unwrap()
    }
}

#[test]
fn a_script_reports_a_syntax_error_without_debug_text() {
    let dir = tempfile::tempdir().unwrap();
    let log = log(dir.path());
    let out = hvaudit()
        .timeout(std::time::Duration::from_secs(120))
        .args(["sql", "-q", "-e", "SELEC 1"])
        .arg(&log)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8(out.stderr).unwrap();
    assert!(
        err.starts_with("hvaudit: query failed: syntax error: "),
        "{err}"
    );
    assert!(!err.contains("ParserError"), "{err}");
    assert_eq!(err.lines().count(), 1, "{err}");
}
