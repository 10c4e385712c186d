//! `hvaudit rules test DIR`: every built-in rule's cases under
//! `queries/tests/` pass, as CI runs them; a user's case that differs
//! shows the difference, `--bless` writes what was found, and `rules lint`
//! reminds of rules without a case.

use crate::common::hvaudit;
use hvaudit::rule_cases as cases;
use hvaudit::rules::catalog::Catalog;
use std::path::{Path, PathBuf};

/// Every built-in rule's cases are audited one by one.
const RULES_TEST_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(600);

fn queries() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("queries")
}

#[test]
fn every_built_in_rule_has_cases_and_they_pass() {
    let catalog = Catalog::embedded().unwrap();
    let ids: Vec<&str> = catalog.rules.iter().map(|r| r.meta.id.as_str()).collect();
    assert_eq!(cases::untested(&queries(), &ids), Vec::<&str>::new());
    let all = cases::cases(&queries(), &ids).unwrap();
    // A firing case of every rule: its expected file names a finding.
    for id in &ids {
        let fires = all.iter().filter(|c| c.rule == *id).any(|c| {
            std::fs::read_to_string(&c.expected)
                .unwrap()
                .lines()
                .any(|l| l.contains(&format!(" {id} ")))
        });
        assert!(fires, "{id} has no case where it fires");
    }
    let run = hvaudit()
        .timeout(RULES_TEST_TIMEOUT)
        .args(["rules", "test"])
        .arg(queries())
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&run.stdout);
    assert_eq!(run.status.code(), Some(0), "{stdout}");
    let n = all.len();
    assert!(
        stdout.ends_with(&format!("{n} case(s): {n} passed, 0 failed\n")),
        "{stdout}"
    );
}

/// A rule directory with one rule, `custom.unfinished` (a task without a
/// terminal event), and one case of it holding `expected`.
fn user_dir(root: &Path, expected: &str) -> PathBuf {
    let dir = root.join("rules");
    let case = dir.join("tests/custom.unfinished");
    std::fs::create_dir_all(&case).unwrap();
    std::fs::write(
        dir.join("custom.unfinished.sql"),
        "-- id: custom.unfinished\n-- severity: low\n-- family: custom\n-- dialect: any\n\
         -- summary: a task without a terminal event\n-- spec: local policy\n\
         -- explain:\n--   Every task must end.\n\
         SELECT task_id, 'no terminal event' AS message, make_array(first_seq) AS seqs \
         FROM tasks WHERE term_seq IS NULL\n",
    )
    .unwrap();
    let event = |id: &str, ty: &str, task: &str| {
        serde_json::json!({
            "spec_version": "0.2", "id": id, "type": ty, "source": "agent:a",
            "created_at": "2026-07-14T10:00:00Z", "task_id": task,
            "payload": {"task_id": task},
        })
        .to_string()
    };
    let log = [
        event("e1", "task.submitted", "done"),
        event("e2", "task.completed", "done"),
        event("e3", "task.submitted", "open"),
    ];
    std::fs::write(case.join("open.ndjson"), log.join("\n") + "\n").unwrap();
    std::fs::write(case.join("open.expected"), expected).unwrap();
    dir
}

#[test]
fn a_case_that_differs_fails_with_a_diff_and_bless_writes_the_findings() {
    let root = tempfile::tempdir().unwrap();
    let wrong =
        "# a task that never ends\nlow custom.unfinished task=\"done\" events=[\"e1\"] lines=[1]\n";
    let dir = user_dir(root.path(), wrong);
    let run = hvaudit()
        .timeout(RULES_TEST_TIMEOUT)
        .args(["rules", "test"])
        .arg(&dir)
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&run.stdout);
    assert_eq!(run.status.code(), Some(1), "{stdout}");
    assert!(
        stdout.contains("FAILED  custom.unfinished/open: the findings differ"),
        "{stdout}"
    );
    assert!(
        stdout.contains("-low custom.unfinished task=\"done\" events=[\"e1\"] lines=[1]")
            && stdout.contains("+low custom.unfinished task=\"open\" events=[\"e3\"] lines=[3]")
            && stdout.contains("@@"),
        "{stdout}"
    );
    assert!(
        stdout.ends_with("1 case(s): 0 passed, 1 failed\n"),
        "{stdout}"
    );
    let bless = hvaudit()
        .timeout(RULES_TEST_TIMEOUT)
        .args(["rules", "test", "--bless"])
        .arg(&dir)
        .output()
        .unwrap();
    assert_eq!(bless.status.code(), Some(0), "{bless:?}");
    assert_eq!(
        std::fs::read_to_string(dir.join("tests/custom.unfinished/open.expected")).unwrap(),
        "# a task that never ends\nlow custom.unfinished task=\"open\" events=[\"e3\"] lines=[3]\n",
        "the comments kept, the findings written"
    );
    hvaudit()
        .timeout(RULES_TEST_TIMEOUT)
        .args(["rules", "test"])
        .arg(&dir)
        .assert()
        .success();
    // A case without its expected file fails until blessed.
    std::fs::remove_file(dir.join("tests/custom.unfinished/open.expected")).unwrap();
    let run = hvaudit()
        .timeout(RULES_TEST_TIMEOUT)
        .args(["rules", "test"])
        .arg(&dir)
        .output()
        .unwrap();
    assert_eq!(run.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&run.stdout).contains("write it with --bless"));
}

#[test]
fn a_directory_without_cases_or_with_a_case_of_no_rule_is_a_usage_error() {
    let root = tempfile::tempdir().unwrap();
    let dir = user_dir(root.path(), "");
    std::fs::create_dir_all(dir.join("tests/custom.typo")).unwrap();
    let run = hvaudit()
        .timeout(RULES_TEST_TIMEOUT)
        .args(["rules", "test"])
        .arg(&dir)
        .output()
        .unwrap();
    assert_eq!(run.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&run.stderr).contains("no rule has the id \"custom.typo\""));
    std::fs::remove_dir_all(dir.join("tests")).unwrap();
    let run = hvaudit()
        .timeout(RULES_TEST_TIMEOUT)
        .args(["rules", "test"])
        .arg(&dir)
        .output()
        .unwrap();
    assert_eq!(run.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&run.stderr).contains("RULE_ID/CASE.ndjson"));
}

#[test]
fn lint_reminds_of_rules_without_a_case() {
    let root = tempfile::tempdir().unwrap();
    let dir = user_dir(root.path(), "");
    let lint = |dir: &Path| {
        let run = hvaudit()
            .timeout(RULES_TEST_TIMEOUT)
            .args(["rules", "lint"])
            .arg(dir)
            .output()
            .unwrap();
        assert_eq!(run.status.code(), Some(0), "{run:?}");
        String::from_utf8(run.stdout).unwrap()
    };
    assert!(!lint(&dir).contains("note:"));
    std::fs::remove_dir_all(dir.join("tests")).unwrap();
    let said = lint(&dir);
    assert!(
        said.contains("note: custom.unfinished has no test case"),
        "{said}"
    );
    assert!(!said.contains("error"), "a note, not an error: {said}");
}
