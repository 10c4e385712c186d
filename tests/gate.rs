//! The nightly gate: inputs that hold nothing, rule selection, stable
//! fingerprints, suppressions, baselines, the configuration file, JUnit.

use crate::common::{hvaudit, hvaudit_reading_config, sarif_schema_errors};
use predicates::prelude::*;
use serde_json::Value;
use std::path::{Path, PathBuf};

fn sample(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("samples/incident")
        .join(name)
}

fn lines(name: &str) -> Vec<String> {
    std::fs::read_to_string(sample(name))
        .unwrap()
        .lines()
        .map(str::to_string)
        .collect()
}

fn write_lines(path: &Path, lines: &[String]) {
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    std::fs::write(path, lines.join("\n") + "\n").unwrap();
}

fn json_file(path: &Path) -> Value {
    serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap()
}

/// (rule, fingerprint) of each finding of a JSON report, sorted.
fn prints(report: &Value) -> Vec<(String, String)> {
    let mut v: Vec<(String, String)> = report["findings"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| {
            (
                f["rule"].as_str().unwrap().to_string(),
                f["fingerprint"].as_str().unwrap().to_string(),
            )
        })
        .collect();
    v.sort();
    v
}

fn finding<'a>(report: &'a Value, rule: &str, event: &str) -> &'a Value {
    report["findings"]
        .as_array()
        .unwrap()
        .iter()
        .find(|f| {
            f["rule"] == rule
                && f["event_ids"]
                    .as_array()
                    .unwrap()
                    .iter()
                    .any(|e| e == event)
        })
        .unwrap_or_else(|| panic!("no {rule} finding citing {event}"))
}

#[test]
fn a_directory_or_pattern_without_logs_fails_unless_allowed() {
    let dir = tempfile::tempdir().unwrap();
    let empty = dir.path().join("2026-07-15");
    std::fs::create_dir(&empty).unwrap();
    std::fs::write(empty.join("README.txt"), "not a log\n").unwrap();
    hvaudit()
        .arg("audit")
        .arg(&empty)
        .assert()
        .code(2)
        .stderr(predicate::str::contains("holds no log file"))
        .stderr(predicate::str::contains("README.txt"))
        .stderr(predicate::str::contains("--allow-empty"));
    hvaudit()
        .arg("audit")
        .arg(dir.path().join("2026-07-16/*.ndjson"))
        .assert()
        .code(2)
        .stderr(predicate::str::contains("no file matches"));
    // Accepted, the report says that nothing was audited.
    let out = hvaudit()
        .args(["audit", "-q", "--allow-empty", "--format", "json"])
        .arg(&empty)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0), "{out:?}");
    let report: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(report["gate"]["no_events"], true);
    hvaudit()
        .args(["audit", "-q", "--allow-empty", "--format", "md"])
        .arg(&empty)
        .assert()
        .success()
        .stdout(predicate::str::contains(
            "No events: the inputs hold no events",
        ));
    // A log file with no event in it is the same: nothing was audited.
    let blank = dir.path().join("blank.ndjson");
    std::fs::write(&blank, "\n\n").unwrap();
    hvaudit()
        .args(["audit", "-q"])
        .arg(&blank)
        .assert()
        .code(2)
        .stderr(predicate::str::contains("hold no events"));
    hvaudit()
        .args(["audit", "-q", "--allow-empty"])
        .arg(&blank)
        .assert()
        .success();
}

#[test]
fn rule_selection_takes_includes_and_excludes_and_refuses_typos() {
    let listed = |args: &[&str]| -> Vec<String> {
        let out = hvaudit()
            .args(["rules", "list"])
            .args(args)
            .output()
            .unwrap();
        assert!(out.status.success(), "{out:?}");
        String::from_utf8(out.stdout)
            .unwrap()
            .lines()
            .map(|l| l.split_whitespace().next().unwrap().to_string())
            .collect()
    };
    let all = listed(&[]);
    let no_tokens = listed(&["--rules", "*,-token.*"]);
    assert!(no_tokens.iter().all(|r| !r.starts_with("token.")));
    assert_eq!(
        no_tokens.len(),
        all.len() - all.iter().filter(|r| r.starts_with("token.")).count()
    );
    assert_eq!(
        listed(&[
            "--rules",
            "orphan.*",
            "--exclude-rules",
            "orphan.dangling_parent"
        ]),
        all.iter()
            .filter(|r| r.starts_with("orphan.") && *r != "orphan.dangling_parent")
            .cloned()
            .collect::<Vec<_>>()
    );
    for bad in ["orphan.*,nosuch", "*,-tokens.*"] {
        hvaudit()
            .args(["audit", "--rules", bad])
            .arg(sample("aep-0.1.ndjson"))
            .assert()
            .code(2)
            .stderr(predicate::str::contains("matches no rule"))
            .stderr(predicate::str::contains(
                "the families checkpoint, decision",
            ));
    }
    hvaudit()
        .args(["rules", "list", "--exclude-rules", "*"])
        .assert()
        .code(2)
        .stderr(predicate::str::contains("leaves no rule"));
}

#[test]
fn fingerprints_do_not_change_when_the_logs_move_or_split() {
    let dir = tempfile::tempdir().unwrap();
    let report = |dir: &Path| -> Value {
        let out = hvaudit()
            .args(["audit", "-q", "--format", "json"])
            .arg(dir)
            .output()
            .unwrap();
        assert_eq!(out.status.code(), Some(1), "{out:?}");
        serde_json::from_slice(&out.stdout).unwrap()
    };
    let before = report(&sample(""));
    // Moved, renamed, and the AEP log split in two at a line.
    let aep = lines("aep-0.1.ndjson");
    let (head, tail) = aep.split_at(aep.len() / 2);
    let moved = dir.path().join("archive/2026/07/14");
    write_lines(&moved.join("a-part1.ndjson"), head);
    write_lines(&moved.join("a-part2.ndjson"), tail);
    write_lines(&moved.join("z-harmovela"), &lines("harmovela-0.2.ndjson"));
    let after = report(&moved);
    assert_eq!(prints(&before), prints(&after));
    // The two rules whose messages name files are among them.
    for rule in ["envelope.invalid", "integrity.conflicting_duplicate"] {
        assert!(prints(&after).iter().any(|(r, _)| r == rule), "{rule}");
    }
}

/// Day 1: three findings, two accepted with suppressions. Day 2: one of
/// the accepted ones fixed, a new violation, the other log moved and split.
#[test]
fn a_nightly_gate_over_two_days() {
    let dir = tempfile::tempdir().unwrap();
    let rules = "envelope.unsupported_version,subscription.no_filter,token.replayed";
    // --fail-on medium unless the call says how it fails.
    let gate = |args: &[&str], logs: &Path| {
        let mut c = hvaudit();
        c.current_dir(dir.path())
            .args(["audit", "-q", "--rules", rules])
            .args(args)
            .arg(logs);
        if !args.iter().any(|a| a.starts_with("--fail-on")) {
            c.args(["--fail-on", "medium"]);
        }
        c
    };
    let day1 = dir.path().join("day1");
    write_lines(&day1.join("aep-0.1.ndjson"), &lines("aep-0.1.ndjson"));
    write_lines(
        &day1.join("harmovela-0.2.ndjson"),
        &lines("harmovela-0.2.ndjson"),
    );
    gate(&["--format", "json", "-o", "raw.json"], &day1)
        .assert()
        .code(1);
    let raw = json_file(&dir.path().join("raw.json"));
    assert_eq!(raw["findings"].as_array().unwrap().len(), 3);
    let replayed = finding(&raw, "token.replayed", "evt_6dadf86520ec1092");
    std::fs::write(
        dir.path().join("suppressions.toml"),
        format!(
            "[[suppress]]\nfingerprint = {}\nreason = \"replay drill on the test tenant\"\n\
             owner = \"secops\"\n\n[[suppress]]\nrule = \"envelope.unsupported_*\"\n\
             agent = \"harness:*\"\nreason = \"the test harness still sends 9.9\"\n\
             expires = 2999-12-31\n",
            replayed["fingerprint"]
        ),
    )
    .unwrap();
    gate(
        &[
            "--suppressions",
            "suppressions.toml",
            "--format",
            "json",
            "-o",
            "day1.json",
        ],
        &day1,
    )
    .assert()
    .code(1);
    let day1_report = json_file(&dir.path().join("day1.json"));
    assert_eq!(day1_report["gate"]["suppressed"], 2);
    assert_eq!(day1_report["gate"]["failing"], 1, "subscription.no_filter");

    // Day 2: the unsupported version is fixed, a subscription without a
    // filter is new, and the AEP log sits elsewhere in two files.
    let day2 = dir.path().join("day2");
    let aep = lines("aep-0.1.ndjson");
    let (head, tail) = aep.split_at(700);
    write_lines(&day2.join("shipped/aep-a.ndjson"), head);
    write_lines(&day2.join("shipped/aep-b.ndjson"), tail);
    let mut h: Vec<String> = lines("harmovela-0.2.ndjson")
        .into_iter()
        .filter(|l| !l.contains("evt_239496fdeea7f9cf"))
        .collect();
    let template = h
        .iter()
        .find(|l| l.contains("\"type\":\"subscription.requested\""))
        .unwrap()
        .clone();
    let mut new_event: Value = serde_json::from_str(&template).unwrap();
    new_event["id"] = "evt_new_unfiltered_01".into();
    new_event["payload"] = serde_json::json!({});
    h.push(new_event.to_string());
    write_lines(&day2.join("harmovela-0.2.ndjson"), &h);

    let day2_args = [
        "--suppressions",
        "suppressions.toml",
        "--baseline",
        "day1.json",
        "--fail-on-new",
        "medium",
    ];
    gate(
        &[&day2_args[..], &["--format", "json", "-o", "day2.json"]].concat(),
        &day2,
    )
    .assert()
    .code(1);
    let day2_report = json_file(&dir.path().join("day2.json"));
    let state = |rule: &str, event: &str| {
        let f = finding(&day2_report, rule, event);
        (f["baseline_state"].clone(), f.get("suppression").is_some())
    };
    assert_eq!(
        state("token.replayed", "evt_6dadf86520ec1092"),
        ("unchanged".into(), true),
        "the suppression by fingerprint survives the move and the split"
    );
    assert_eq!(
        state("subscription.no_filter", "evt_fad5378804697832"),
        ("unchanged".into(), false)
    );
    assert_eq!(
        state("subscription.no_filter", "evt_new_unfiltered_01"),
        ("new".into(), false)
    );
    let g = &day2_report["gate"];
    assert_eq!(
        (
            g["baseline"]["new"].clone(),
            g["baseline"]["unchanged"].clone()
        ),
        (1.into(), 2.into())
    );
    let absent = g["baseline"]["absent"].as_array().unwrap();
    assert_eq!(absent.len(), 1);
    assert_eq!(absent[0]["rule"], "envelope.unsupported_version");
    assert_eq!(absent[0]["baseline_state"], "absent");
    let entries = g["suppressions"]["entries"].as_array().unwrap();
    assert_eq!(
        entries
            .iter()
            .map(|e| e["suppressed"].as_u64().unwrap())
            .collect::<Vec<_>>(),
        [1, 0],
        "the second entry's finding is fixed: unused"
    );
    assert_eq!(
        (g["verdict"].clone(), g["failing"].clone()),
        ("failed".into(), 1.into())
    );

    // Only a new finding at or above the level fails; the new one is medium.
    gate(
        &[&day2_args[..4], &["--fail-on-new", "high"]].concat(),
        &day2,
    )
    .assert()
    .code(0);
    // An unused entry fails the run when asked.
    gate(
        &[
            &day2_args[..4],
            &["--fail-on", "none", "--error-on-unused-suppressions"],
        ]
        .concat(),
        &day2,
    )
    .assert()
    .code(1)
    .stderr(predicate::str::contains("suppression entry 2"))
    .stderr(predicate::str::contains("matched no finding"));

    // SARIF: valid, with the states and the suppression.
    let out = gate(&[&day2_args[..], &["--format", "sarif"]].concat(), &day2)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    let sarif: Value = serde_json::from_slice(&out.stdout).unwrap();
    let errors = sarif_schema_errors(&sarif);
    assert!(errors.is_empty(), "SARIF invalid:\n{}", errors.join("\n"));
    let results = sarif["runs"][0]["results"].as_array().unwrap();
    let mut states: Vec<&str> = results
        .iter()
        .map(|r| r["baselineState"].as_str().unwrap())
        .collect();
    states.sort();
    assert_eq!(states, ["absent", "new", "unchanged", "unchanged"]);
    let suppressed: Vec<&Value> = results
        .iter()
        .filter(|r| !r["suppressions"].as_array().unwrap().is_empty())
        .collect();
    assert_eq!(suppressed.len(), 1);
    assert_eq!(suppressed[0]["ruleId"], "token.replayed");
    assert_eq!(suppressed[0]["suppressions"][0]["kind"], "external");
    assert_eq!(
        suppressed[0]["suppressions"][0]["justification"],
        "replay drill on the test tenant"
    );

    // `diff` classifies the two reports the same way.
    let out = hvaudit()
        .current_dir(dir.path())
        .args(["diff", "day1.json", "day2.json", "--format", "json"])
        .output()
        .unwrap();
    assert!(out.status.success(), "{out:?}");
    let diff: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(
        diff["counts"],
        serde_json::json!({"new": 1, "unchanged": 2, "absent": 1})
    );
    hvaudit()
        .current_dir(dir.path())
        .args(["diff", "day1.json", "day2.json", "--fail-on-new", "medium"])
        .assert()
        .code(1)
        .stdout(predicate::str::contains(
            "1 new, 2 unchanged, 1 absent (fixed)",
        ));
}

#[test]
fn an_expired_suppression_stops_suppressing_and_fails_the_gate() {
    let dir = tempfile::tempdir().unwrap();
    let sup = dir.path().join("s.toml");
    let log = sample("aep-0.1.ndjson");
    let with = |expires: &str| {
        std::fs::write(
            &sup,
            format!(
                "[[suppress]]\nrule = \"token.replayed\"\nreason = \"until the fix ships\"\n\
                 expires = {expires}\n"
            ),
        )
        .unwrap();
        let mut c = hvaudit();
        c.args(["audit", "-q", "--rules", "token.replayed", "--suppressions"])
            .arg(&sup)
            .arg(&log);
        c
    };
    with("2999-01-01").assert().code(0);
    with("2020-01-01")
        .assert()
        .code(1)
        .stderr(predicate::str::contains(
            "suppression entry 1 (rule token.replayed) expired on 2020-01-01",
        ));
    // A broken file is said before any log is read.
    std::fs::write(&sup, "[[suppress]]\nrule = \"token.*\"\n").unwrap();
    hvaudit()
        .args(["audit", "--suppressions"])
        .arg(&sup)
        .arg(&log)
        .assert()
        .code(2)
        .stderr(predicate::str::contains("entry 1: `reason` is required"));
}

#[test]
fn the_configuration_file_sets_options_severities_and_rules() {
    let dir = tempfile::tempdir().unwrap();
    let log = sample("aep-0.1.ndjson");
    std::fs::write(
        dir.path().join("hvaudit.toml"),
        "[audit]\nformat = \"json\"\nfail-on = \"critical\"\nrules = \"token.*\"\n\n\
         [rules.\"token.replayed\"]\nseverity = \"low\"\n\n[rules.\"token.rebound\"]\nenabled = false\n",
    )
    .unwrap();
    let run = |args: &[&str]| {
        let out = hvaudit_reading_config()
            .current_dir(dir.path())
            .args(["audit", "-q"])
            .args(args)
            .arg(&log)
            .output()
            .unwrap();
        (out.status.code(), String::from_utf8(out.stdout).unwrap())
    };
    let (code, out) = run(&[]);
    let report: Value = serde_json::from_str(&out).unwrap();
    let rules: Vec<&str> = report["rules"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r.as_str().unwrap())
        .collect();
    assert!(rules.iter().all(|r| r.starts_with("token.")) && !rules.contains(&"token.rebound"));
    assert_eq!(
        finding(&report, "token.replayed", "evt_6dadf86520ec1092")["severity"],
        "low"
    );
    assert_eq!(code, Some(0), "no critical finding is left");
    // The command line wins over the file.
    let (code, out) = run(&["--format", "text", "--fail-on", "low"]);
    assert_eq!(code, Some(1));
    assert!(out.contains("Verdict: FAILED"), "{out}");
    // `config show` says where each value comes from.
    hvaudit_reading_config()
        .current_dir(dir.path())
        .args(["config", "show"])
        .assert()
        .success()
        .stdout(predicate::str::contains(
            "configuration file: ./hvaudit.toml (working directory)",
        ))
        .stdout(
            predicate::str::contains("fail-on")
                .and(predicate::str::contains("critical  (configuration file)")),
        )
        .stdout(
            predicate::str::contains("token.rebound").and(predicate::str::contains("left out")),
        );
    // --no-config ignores it; a wrong key is an error naming it.
    let (code, _) = run(&["--no-config"]);
    assert_eq!(code, Some(1), "the default --fail-on high");
    std::fs::write(
        dir.path().join("hvaudit.toml"),
        "[audit]\nfail-onn = \"low\"\n",
    )
    .unwrap();
    hvaudit_reading_config()
        .current_dir(dir.path())
        .args(["audit", "-q"])
        .arg(&log)
        .assert()
        .code(2)
        .stderr(predicate::str::contains(
            "hvaudit.toml: [audit] has no option \"fail-onn\"",
        ));
}

#[test]
fn junit_has_a_case_per_rule_and_validates_against_the_schema() {
    let dir = tempfile::tempdir().unwrap();
    let xml = dir.path().join("junit.xml");
    hvaudit()
        .args([
            "audit",
            "-q",
            "--format",
            "junit",
            "--rules",
            "token.*,subscription.*",
            "-o",
        ])
        .arg(&xml)
        .arg(sample(""))
        .assert()
        .code(1);
    let schema = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/junit.xsd");
    let lint = |file: &Path| {
        std::process::Command::new("xmllint")
            .args(["--noout", "--schema"])
            .arg(&schema)
            .arg(file)
            .output()
            .expect(
                "xmllint runs the JUnit schema check; install it with \
                 `apt-get install -y libxml2-utils` (scripts/test does as root)",
            )
    };
    let checked = lint(&xml);
    assert!(checked.status.success(), "{checked:?}");
    let text = std::fs::read_to_string(&xml).unwrap();
    // A case per rule, and one for the inputs.
    assert_eq!(text.matches("<testcase ").count(), 8, "{text}");
    // Four token rules have findings at or above --fail-on high; the
    // subscription finding (medium) is listed in its case's output.
    assert_eq!(text.matches("<failure ").count(), 4, "{text}");
    assert!(text.contains("finding(s) that fail the run (--fail-on high)"));
    assert!(text.contains("<system-out>MEDIUM subscription.no_filter"));
    assert!(text.contains("name=\"token.replayed\" classname=\"hvaudit.token\""));
    // The schema is really enforced.
    std::fs::write(&xml, text.replacen("<testcase ", "<testcas ", 1)).unwrap();
    assert!(!lint(&xml).status.success());
}

#[test]
fn fail_on_none_never_fails_on_findings() {
    hvaudit()
        .args(["audit", "-q", "--fail-on", "none"])
        .arg(sample(""))
        .assert()
        .code(0)
        .stdout(predicate::str::contains(
            "not gated: findings never fail the run",
        ));
    hvaudit()
        .args(["audit", "-q", "--fail-on", "loud"])
        .arg(sample(""))
        .assert()
        .code(2)
        .stderr(predicate::str::contains("or none"));
}
