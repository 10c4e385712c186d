//! Report renderer tests: every format on a hand-built report full of
//! hostile strings, checked for escaping, shape and determinism.

use crate::common::hvaudit;
use chrono::{DateTime, TimeZone, Utc};
use hvaudit::finding::{BaselineState, Suppression, TimelineEntry};
use hvaudit::report::model::{BaselineUsed, EntryUse, Gate, Span, SuppressionsUsed, TimeBucket};
use hvaudit::report::{
    Configuration, Provenance, RenderOptions, ReportFormat, TextOptions, render, render_text,
    render_with,
};
use hvaudit::{Finding, InputSummary, Location, Report, RuleMeta, Severity};
use serde_json::Value;

const XSS: &str = "<script>alert(1)</script>";
const MULTIBYTE: &str = "日本語 — ✓";

fn t(sec: u32, ms: u32) -> DateTime<Utc> {
    Utc.with_ymd_and_hms(2025, 3, 14, 9, 26, sec).unwrap()
        + chrono::Duration::milliseconds(ms.into())
}

fn rule(id: &str, severity: Severity, family: &str) -> RuleMeta {
    RuleMeta {
        id: id.into(),
        severity,
        family: family.into(),
        dialect: "any".into(),
        summary: format!("Summary of {id} with `code` and <b>html</b>"),
        spec: "AEP 0.2 §4.3".into(),
        explain: format!("Explanation of {id}.\nSecond line."),
    }
}

fn entry(
    at: DateTime<Utc>,
    id: &str,
    ty: &str,
    task: Option<&str>,
    file: &str,
    line: u64,
) -> TimelineEntry {
    TimelineEntry {
        at: Some(at),
        event_id: id.into(),
        event_type: ty.into(),
        task_id: task.map(Into::into),
        file: file.into(),
        line,
    }
}

fn loc(file: &str, line: u64, event: Option<&str>) -> Location {
    Location {
        file: file.into(),
        line,
        event_id: event.map(Into::into),
    }
}

/// A report small enough to snapshot, with hostile strings in every field a
/// log can reach.
fn sample() -> Report {
    let a = "logs/run a.ndjson";
    let b = "logs/日本語.ndjson.gz";
    let findings = vec![
        Finding {
            rule: "HV-TASK-001".into(),
            severity: Severity::Critical,
            family: "lifecycle".into(),
            message: format!("task completed twice: {XSS} \"quoted\" 'single' </style>"),
            task_id: Some("task-1".into()),
            agent: Some("agent:planner".into()),
            event_ids: vec!["evt-1".into(), "evt-2".into()],
            locations: vec![loc(a, 3, Some("evt-1")), loc(a, 9, Some("evt-2"))],
            at: Some(t(5, 120)),
            fingerprint: "a1b2c3d4e5f60718".into(),
            session_id: Some("sess-<1>".into()),
            suppression: None,
            baseline_state: Some(BaselineState::New),
            rests_on_version: None,
            timeline: vec![
                entry(t(5, 120), "evt-1", "task.completed", Some("task-1"), a, 3),
                entry(t(6, 0), "evt-2", "task.completed", Some("task-1"), a, 9),
            ],
        },
        Finding {
            rule: "HV-TOKEN-002".into(),
            severity: Severity::High,
            family: "tokens | auth".into(),
            message: "token reused\x1b[31m RED \x1b]0;pwned\x07 \u{9b}2J | *bold* _it_ [link](http://x) `tick` # ~strike~ \\ back\nnext line"
                .into(),
            task_id: Some("task-</script>-2".into()),
            agent: Some("agent:planner".into()),
            event_ids: vec!["evt-\x1b[2J".into()],
            locations: vec![loc(b, 1, Some("evt-\x1b[2J"))],
            at: Some(t(7, 0)),
            fingerprint: "ffff000011112222".into(),
            session_id: None,
            suppression: Some(Suppression {
                entry: 2,
                reason: "accepted <b>risk</b>\x1b[31m until the migration".into(),
                owner: Some("team | auth".into()),
                expires: Some("2999-12-31".into()),
            }),
            baseline_state: Some(BaselineState::Unchanged),
            rests_on_version: None,
            timeline: vec![entry(t(7, 0), "evt-\x1b[2J", "handoff</script>", Some("task-</script>-2"), b, 1)],
        },
        Finding {
            rule: "HV-TASK-001".into(),
            severity: Severity::High,
            family: "lifecycle".into(),
            message: format!("{MULTIBYTE} unicode message \u{202e}reversed"),
            task_id: Some("task-1".into()),
            agent: Some("agent:planner".into()),
            event_ids: vec!["evt-7".into()],
            locations: vec![loc(a, 12, Some("evt-7"))],
            at: Some(t(9, 999)),
            fingerprint: "0123456789abcdef".into(),
            session_id: None,
            suppression: None,
            baseline_state: Some(BaselineState::Unchanged),
            rests_on_version: None,
            timeline: vec![],
        },
        Finding {
            rule: "HV-INFO-009".into(),
            severity: Severity::Info,
            family: "hygiene".into(),
            message: "no location, no task, line unknown".into(),
            task_id: None,
            agent: Some("agent:planner".into()),
            event_ids: vec!["evt-9".into()],
            locations: vec![loc(b, 0, None)],
            at: None,
            fingerprint: "9999999999999999".into(),
            session_id: None,
            suppression: None,
            baseline_state: Some(BaselineState::Unchanged),
            rests_on_version: None,
            timeline: vec![],
        },
    ];
    Report {
        tool: "hvaudit".into(),
        version: "0.1.0".into(),
        inputs: vec![
            InputSummary {
                path: a.into(),
                format: "ndjson".into(),
                bytes: 4096,
                lines: 20,
                events: 15,
                redeliveries: 3,
                bad_lines: 2,
                blank_lines: 1,
                error: None,
                ..Default::default()
            },
            InputSummary {
                path: b.into(),
                format: "ndjson.gz".into(),
                bytes: 512,
                lines: 5,
                events: 3,
                redeliveries: 0,
                bad_lines: 1,
                blank_lines: 0,
                error: Some("truncated gzip stream <eof>\x1b[0m".into()),
                ..Default::default()
            },
        ],
        span: Span {
            from: Some(t(0, 0)),
            to: Some(t(59, 500)),
        },
        rules: vec![
            rule("HV-TASK-001", Severity::Critical, "lifecycle"),
            rule("HV-TOKEN-002", Severity::High, "tokens | auth"),
            rule("HV-INFO-009", Severity::Info, "hygiene"),
            rule("HV-QUIET-010", Severity::Medium, "quiet"),
        ],
        unresolved_basis: 2,
        findings: findings.into(),
        rule_errors: vec![(
            "HV-BROKEN-099".into(),
            "SQL error: <near> `FROM`\x1b[1m".into(),
        )],
        timeline_buckets: vec![
            bucket(t(0, 0), 20, 12, 2),
            bucket(t(20, 0), 20, 0, 0),
            bucket(t(40, 0), 20, 6, 1),
        ],
        outside_window: None,
        readings: None,
        gate: Gate {
            fail_on: Some(Severity::High),
            new_only: false,
            suppressions: Some(SuppressionsUsed {
                file: "audit/suppressions.toml".into(),
                entries: vec![
                    EntryUse {
                        entry: 1,
                        matches: "rule HV-OLD-* task t_*".into(),
                        reason: "old <i>rule</i>".into(),
                        owner: None,
                        expires: Some("2020-01-31".into()),
                        expired: true,
                        suppressed: 0,
                    },
                    EntryUse {
                        entry: 2,
                        matches: "fingerprint ffff000011112222".into(),
                        reason: "accepted <b>risk</b>\x1b[31m until the migration".into(),
                        owner: Some("team | auth".into()),
                        expires: Some("2999-12-31".into()),
                        expired: false,
                        suppressed: 1,
                    },
                    EntryUse {
                        entry: 3,
                        matches: "rule nothing.*".into(),
                        reason: "never matched".into(),
                        owner: None,
                        expires: None,
                        expired: false,
                        suppressed: 0,
                    },
                ],
            }),
            baseline: Some(BaselineUsed {
                file: "reports/yesterday.json".into(),
                new: 1,
                unchanged: 3,
                absent: vec![Finding {
                    rule: "HV-TASK-001".into(),
                    severity: Severity::High,
                    family: "lifecycle".into(),
                    message: "fixed since: <s>gone</s>".into(),
                    task_id: Some("task-0".into()),
                    agent: None,
                    session_id: None,
                    event_ids: vec!["evt-0".into()],
                    locations: vec![loc("logs/old.ndjson", 4, Some("evt-0"))],
                    at: Some(t(1, 0)),
                    fingerprint: "00000000deadbeef".into(),
                    timeline: vec![],
                    suppression: None,
                    baseline_state: Some(BaselineState::Absent),
                    rests_on_version: None,
                }],
            }),
        },
    }
}

fn bucket(from: DateTime<Utc>, secs: i64, events: u64, findings: u64) -> TimeBucket {
    TimeBucket {
        from: Some(from),
        to: Some(from + chrono::Duration::seconds(secs)),
        events,
        findings,
    }
}

/// The sample plus a 10 000-character message.
fn hostile() -> Report {
    let mut r = sample();
    let mut findings = r.findings.to_vec();
    let mut long = findings[1].clone();
    long.message = "</script>|".repeat(1000);
    long.fingerprint = "long".into();
    findings.insert(2, long);
    r.findings = findings.into();
    r
}

fn render_to_string(report: &Report, format: ReportFormat) -> String {
    let mut out = Vec::new();
    render(report, format, &mut out).expect("render");
    String::from_utf8(out).expect("utf-8 output")
}

const ALL: [ReportFormat; 7] = [
    ReportFormat::Text,
    ReportFormat::Json,
    ReportFormat::Jsonl,
    ReportFormat::Markdown,
    ReportFormat::Html,
    ReportFormat::Sarif,
    ReportFormat::Junit,
];

#[test]
fn format_names_parse_and_errors_list_choices() {
    for (name, f) in [
        ("text", ReportFormat::Text),
        ("JSON", ReportFormat::Json),
        ("jsonl", ReportFormat::Jsonl),
        ("md", ReportFormat::Markdown),
        ("markdown", ReportFormat::Markdown),
        ("html", ReportFormat::Html),
        ("sarif", ReportFormat::Sarif),
        ("junit", ReportFormat::Junit),
    ] {
        assert_eq!(name.parse::<ReportFormat>().unwrap(), f);
    }
    let err = "xml".parse::<ReportFormat>().unwrap_err();
    assert!(
        err.contains("'xml'") && err.contains("sarif") && err.contains("markdown"),
        "{err}"
    );
}

#[test]
fn every_format_renders_deterministically() {
    let r = hostile();
    for f in ALL {
        let first = render_to_string(&r, f);
        assert!(!first.is_empty(), "{f} is empty");
        assert!(first.contains("HV-TASK-001"), "{f} lacks a rule id");
        assert_eq!(first, render_to_string(&r, f), "{f} differs between runs");
    }
}

#[test]
fn json_is_one_object_with_counts_and_accounting() {
    let out = render_to_string(&hostile(), ReportFormat::Json);
    assert!(out.ends_with("}\n"));
    let v: Value = serde_json::from_str(&out).expect("one JSON value");
    for key in [
        "tool",
        "version",
        "inputs",
        "span",
        "counts",
        "accounting",
        "unresolved_basis",
        "rules",
        "rule_errors",
        "findings",
    ] {
        assert!(v.get(key).is_some(), "missing {key}");
    }
    assert_eq!(v["span"]["from"], "2025-03-14T09:26:00.000Z");
    assert_eq!(v["span"]["to"], "2025-03-14T09:26:59.500Z");
    let counts = &v["counts"];
    assert_eq!(counts["total"], 5);
    let sev: Vec<(&str, u64)> = counts["by_severity"]
        .as_object()
        .unwrap()
        .iter()
        .map(|(k, n)| (k.as_str(), n.as_u64().unwrap()))
        .collect();
    let mut expected = vec![
        ("critical", 1),
        ("high", 3),
        ("info", 1),
        ("low", 0),
        ("medium", 0),
    ];
    let mut got = sev.clone();
    got.sort();
    expected.sort();
    assert_eq!(got, expected);
    assert_eq!(counts["by_rule"]["HV-TOKEN-002"], 2);
    assert_eq!(counts["by_family"]["lifecycle"], 2);
    let acc = &v["accounting"];
    assert_eq!(
        (acc["lines"].as_u64(), acc["events"].as_u64()),
        (Some(25), Some(18))
    );
    assert_eq!(
        acc["identity_holds"], false,
        "input b has 5 lines for 4 accounted"
    );
    assert_eq!(v["inputs"][0]["identity_holds"], true);
    assert_eq!(v["inputs"][1]["identity_holds"], false);
    assert_eq!(v["rules"].as_array().unwrap().len(), 4);
    assert_eq!(v["rule_errors"][0]["rule"], "HV-BROKEN-099");
    let f = &v["findings"][0];
    assert_eq!(f["severity"], "critical");
    assert_eq!(f["at"], "2025-03-14T09:26:05.120Z");
    assert_eq!(
        f["locations"][1],
        serde_json::json!({"file": "logs/run a.ndjson", "line": 9, "event_id": "evt-2"})
    );
    assert_eq!(f["timeline"][0]["type"], "task.completed");
    let long = v["findings"][2]["message"].as_str().unwrap();
    assert_eq!(
        long.chars().count(),
        10_000,
        "long values are not truncated"
    );
    assert_eq!(v["findings"][4]["task_id"], Value::Null);
}

#[test]
fn jsonl_is_one_finding_a_line() {
    let r = hostile();
    let out = render_to_string(&r, ReportFormat::Jsonl);
    let lines: Vec<&str> = out.lines().collect();
    let absent = &r.gate.baseline.as_ref().unwrap().absent;
    assert_eq!(lines.len(), r.findings.len() + absent.len());
    assert!(out.ends_with('\n'));
    let every = r
        .findings
        .to_vec()
        .into_iter()
        .chain(absent.iter().cloned());
    for (line, f) in lines.iter().zip(every) {
        let v: Value = serde_json::from_str(line).expect("each line is JSON");
        assert_eq!(v["rule"], f.rule.as_str());
        assert_eq!(v["fingerprint"], f.fingerprint.as_str());
    }
}

#[test]
fn text_has_no_control_codes_from_the_log() {
    let r = hostile();
    let out = render_to_string(&r, ReportFormat::Text);
    assert!(!out.contains('\x1b') && !out.contains('\x07') && !out.contains('\u{9b}'));
    assert!(!out.contains('\u{202e}'));
    assert!(
        out.contains("token reused\\x1b[31m RED"),
        "escape shown, not executed"
    );
    assert!(out.contains(MULTIBYTE));
    assert!(out.contains("MISMATCH") && out.contains(": MISMATCH"));
    assert!(out.contains("HV-BROKEN-099"));
    assert!(out.contains("logs/run a.ndjson:9 (event evt-2)"));

    // With color on, the only escapes are our own SGR codes.
    let mut colored = Vec::new();
    let color = TextOptions {
        color: true,
        ..Default::default()
    };
    render_text(&r, &color, &mut colored).unwrap();
    let colored = String::from_utf8(colored).unwrap();
    for (i, _) in colored.match_indices('\x1b') {
        let rest = &colored[i + 1..];
        let sgr = rest
            .strip_prefix('[')
            .and_then(|s| s.split_once('m'))
            .map(|(c, _)| c);
        let sgr = sgr.expect("only CSI ... m sequences");
        assert!(
            sgr.chars().all(|c| c.is_ascii_digit() || c == ';'),
            "unexpected {sgr:?}"
        );
    }
}

#[test]
fn markdown_escapes_log_values() {
    let out = render_to_string(&hostile(), ReportFormat::Markdown);
    assert!(!out.contains("<script") && !out.contains("</style") && !out.contains('\x1b'));
    assert!(!out.contains('\u{202e}'));
    assert!(out.contains("&lt;script&gt;alert(1)&lt;/script&gt;"));
    assert!(out.contains("tokens \\| auth"));
    assert!(out.contains("\\*bold\\* \\_it\\_ \\[link\\](http://x) \\`tick\\`"));
    assert!(out.contains("back<br>next line"));
    assert!(out.contains(MULTIBYTE));
    // Every table row keeps its column count: no pipe from the data leaks.
    for line in out.lines().filter(|l| l.starts_with("| ")) {
        let cells = line.replace("\\|", "").matches('|').count();
        assert!(cells == 3 || cells == 10, "row with {cells} pipes: {line}");
    }
}

#[test]
fn html_escapes_log_values_everywhere() {
    let r = hostile();
    let out = render_to_string(&r, ReportFormat::Html);
    assert!(out.starts_with("<!DOCTYPE html>"));
    assert!(!out.contains("<script>alert"));
    assert_eq!(
        out.matches("</script").count(),
        1,
        "only the page's own script ends"
    );
    assert_eq!(
        out.matches("</style").count(),
        1,
        "only the page's own style ends"
    );
    assert_eq!(out.matches("<script").count(), 1);
    assert!(
        !out.contains('\x1b') && !out.contains('\u{202e}'),
        "no raw controls"
    );
    // The long message is prose with slashes: it breaks after them only.
    assert!(out.contains(
        "<span class=\"seg\">script&gt;|&lt;/</span><wbr><span class=\"seg\">script&gt;|&lt;/</span>"
    ));
    assert!(
        !out.contains("src=\"http") && !out.contains("href=\"http"),
        "no external assets"
    );
    assert!(out.contains(MULTIBYTE));
    assert!(out.contains("id=\"findings\""));
    assert!(out.contains("<span id=\"count-high\">3</span>"));
    assert!(out.contains("<span id=\"count-low\">0</span>"));
    let rows = out.matches("<tr class=\"finding sev-").count();
    assert_eq!(rows, r.findings.len());
    assert!(out.contains(
        "class=\"finding sev-critical\" data-severity=\"critical\" data-rule=\"HV-TASK-001\""
    ));
    assert!(out.contains("@media print"));
}

#[test]
fn every_format_carries_each_findings_timeline() {
    let r = sample();
    // The second event of the first finding's timeline appears nowhere else.
    let second = "2025-03-14T09:26:06.000Z";
    for f in ALL {
        let out = render_to_string(&r, f);
        assert!(out.contains(second), "{f} lacks the timeline");
    }
    let sarif: Value = serde_json::from_str(&render_to_string(&r, ReportFormat::Sarif)).unwrap();
    let steps = &sarif["runs"][0]["results"][0]["codeFlows"][0]["threadFlows"][0]["locations"];
    assert_eq!(steps[1]["executionTimeUtc"], second);
    assert_eq!(steps[1]["executionOrder"], 1);
    assert_eq!(
        steps[1]["location"]["physicalLocation"]["region"]["startLine"],
        9
    );
    let text = render_to_string(&r, ReportFormat::Text);
    assert!(text.contains("  timeline:"), "{text}");
}

/// A report whose rule id and family try to break out of the SVG text.
fn hostile_rules() -> Report {
    let mut r = sample();
    let evil = "x</text><script>alert(1)</script><text>\"'&";
    let mut findings = r.findings.to_vec();
    for f in &mut findings {
        f.rule = evil.into();
        f.family = format!("{evil}\x1b[31m");
    }
    r.findings = findings.into();
    r.rules[0].id = evil.into();
    r
}

#[test]
fn html_charts_escape_rule_ids() {
    let out = render_to_string(&hostile_rules(), ReportFormat::Html);
    assert_eq!(out.matches("<script").count(), 1, "only the page's script");
    assert_eq!(out.matches("</script").count(), 1);
    assert!(!out.contains("</text><script") && !out.contains('\x1b'));
    let chart = &out[out.find("id=\"chart-rules\"").unwrap()..];
    let chart = &chart[..chart.find("</svg>").unwrap()];
    assert!(
        chart.contains("data-rule=\"x&lt;&#x2f;text&gt;&lt;script&gt;alert(1)&lt;&#x2f;script&gt;&lt;text&gt;&quot;&#x27;&amp;\""),
        "{chart}"
    );
    // The tooltip has the whole id; the label is cut at 38 characters.
    assert!(chart.contains(
        "<title>x&lt;&#x2f;text&gt;&lt;script&gt;alert(1)&lt;&#x2f;script&gt;&lt;text&gt;&quot;&#x27;&amp;: 4 findings"
    ));
    assert!(
        chart.contains(
            ">x&lt;&#x2f;text&gt;&lt;script&gt;alert(1)&lt;&#x2f;script&gt;&lt;tex…</text>"
        ),
        "{chart}"
    );
    // Every opened text element is closed by our own markup only.
    assert_eq!(
        chart.matches("<text").count(),
        chart.matches("</text>").count()
    );
}

#[test]
fn html_charts_show_the_counts() {
    let r = sample();
    let out = render_to_string(&r, ReportFormat::Html);
    let rules = &out[out.find("id=\"chart-rules\"").unwrap()..];
    let rules = &rules[..rules.find("</svg>").unwrap()];
    assert_eq!(
        rules.matches("<g class=\"bar\"").count(),
        3,
        "one bar per rule with findings"
    );
    assert!(rules.contains("data-rule=\"HV-TASK-001\" data-count=\"2\""));
    assert!(rules.contains("data-rule=\"HV-TOKEN-002\" data-count=\"1\""));
    // The most frequent rule's bar is the longest, in its worst severity.
    assert!(
        rules.contains("<rect class=\"critical\" x=\"252.0\" y=\"3.0\" width=\"340.0\""),
        "{rules}"
    );
    let time = &out[out.find("id=\"chart-time\"").unwrap()..];
    let time = &time[..time.find("</svg>").unwrap()];
    assert!(
        time.contains("data-events=\"18\" data-findings=\"3\""),
        "{time}"
    );
    assert_eq!(
        time.matches("<g class=\"bucket\"").count(),
        r.timeline_buckets.len()
    );
    assert_eq!(
        time.matches("<rect class=\"events\"").count(),
        2,
        "empty buckets draw nothing"
    );
    assert!(
        out.contains("<b id=\"sum-total\">4</b>") && out.contains("<b id=\"sum-critical\">1</b>")
    );
    assert!(out.contains("(59.5 s)"), "span length in the header");
    // No buckets, no time chart (and no error).
    let mut empty = r.clone();
    empty.timeline_buckets.clear();
    let out = render_to_string(&empty, ReportFormat::Html);
    assert!(!out.contains("id=\"chart-time\"") && out.contains("No timed events."));
}

#[test]
fn sarif_validates_against_the_oasis_schema() {
    let r = hostile();
    let out = render_to_string(&r, ReportFormat::Sarif);
    let sarif: Value = serde_json::from_str(&out).unwrap();
    let schema: Value =
        serde_json::from_str(include_str!("fixtures/sarif-schema-2.1.0.json")).unwrap();
    let validator = jsonschema::options()
        .should_validate_formats(true)
        .build(&schema)
        .expect("schema compiles");
    let errors: Vec<String> = validator
        .iter_errors(&sarif)
        .map(|e| format!("{e} at {}", e.instance_path()))
        .collect();
    assert!(errors.is_empty(), "SARIF invalid:\n{}", errors.join("\n"));
    // The schema is really enforced: a line 0 region is rejected.
    let mut broken = sarif.clone();
    broken["runs"][0]["results"][0]["locations"][0]["physicalLocation"]["region"]["startLine"] =
        0.into();
    assert!(!validator.is_valid(&broken), "schema accepted startLine 0");
    // The info finding's line is unknown (0): its location has no region.
    let info = &sarif["runs"][0]["results"][4]["locations"][0]["physicalLocation"];
    assert!(info.get("region").is_none() && info["artifactLocation"]["uri"].is_string());

    let run = &sarif["runs"][0];
    let driver = &run["tool"]["driver"];
    assert_eq!(driver["name"], "hvaudit");
    let rules = driver["rules"].as_array().unwrap();
    assert_eq!(rules.len(), r.rules.len());
    assert_eq!(rules[0]["defaultConfiguration"]["level"], "error");
    assert_eq!(rules[3]["defaultConfiguration"]["level"], "warning");
    assert_eq!(rules[2]["defaultConfiguration"]["level"], "note");
    let results = run["results"].as_array().unwrap();
    let absent = &r.gate.baseline.as_ref().unwrap().absent;
    assert_eq!(results.len(), r.findings.len() + absent.len());
    let every = r
        .findings
        .to_vec()
        .into_iter()
        .chain(absent.iter().cloned());
    for (res, f) in results.iter().zip(every) {
        let idx = res["ruleIndex"].as_u64().unwrap() as usize;
        assert_eq!(rules[idx]["id"], res["ruleId"]);
        assert_eq!(res["ruleId"], f.rule.as_str());
        assert_eq!(
            res["partialFingerprints"]["hvaudit/v3"],
            f.fingerprint.as_str()
        );
        for l in res["locations"].as_array().unwrap() {
            let region = &l["physicalLocation"]["region"];
            assert!(region.is_null() || region["startLine"].as_u64().unwrap() >= 1);
            let uri = l["physicalLocation"]["artifactLocation"]["uri"]
                .as_str()
                .unwrap();
            assert!(
                uri.bytes().all(|b| b.is_ascii_graphic()),
                "uri not encoded: {uri}"
            );
        }
    }
    assert_eq!(results[0]["level"], "error");
    assert_eq!(
        results[0]["locations"][0]["physicalLocation"]["artifactLocation"]["uri"],
        "logs/run%20a.ndjson"
    );
    assert!(out.ends_with('\n'));
}

#[test]
fn empty_report_renders_in_every_format() {
    let mut r = sample();
    r.findings = Vec::new().into();
    r.gate = Default::default();
    r.inputs.clear();
    r.rule_errors.clear();
    r.span = Span {
        from: None,
        to: None,
    };
    for f in ALL {
        let out = render_to_string(&r, f);
        if f == ReportFormat::Jsonl {
            assert!(out.is_empty());
        } else {
            assert!(!out.is_empty(), "{f}");
        }
    }
    let v: Value = serde_json::from_str(&render_to_string(&r, ReportFormat::Json)).unwrap();
    assert_eq!(v["span"]["from"], Value::Null);
    assert_eq!(v["accounting"]["identity_holds"], true);
}

/// A rule id and an input path longer than a narrow terminal.
const LONG_RULE: &str = "checkpoint.resume_without_id_after_an_interrupted_parent";
const LONG_PATH: &str =
    "/var/log/agents/production/cluster-eu-west-1/runs/2025-03-14/planner-and-executor.ndjson";

/// The sample with a long rule id on its first finding and a long input
/// path that the findings cite.
fn long_ids() -> Report {
    let mut r = sample();
    let mut findings = r.findings.to_vec();
    findings[0].rule = LONG_RULE.into();
    for f in &mut findings {
        for l in &mut f.locations {
            l.file = LONG_PATH.into();
        }
    }
    r.findings = findings.into();
    r.inputs[0].path = LONG_PATH.into();
    r
}

fn text_at(report: &Report, width: usize) -> String {
    let mut out = Vec::new();
    let opts = TextOptions {
        color: false,
        width,
    };
    render_text(report, &opts, &mut out).unwrap();
    String::from_utf8(out).unwrap()
}

/// Asserts the text fits `width`, but for a line that holds a word (no
/// slash in it) too long for any line, and that every occurrence of
/// `path` is broken, if at all, right after one of its slashes.
fn assert_fits(out: &str, width: usize, path: &str) {
    use unicode_width::UnicodeWidthStr;
    for line in out.lines() {
        let indent = line.len() - line.trim_start().len();
        let unbreakable = line
            .split_whitespace()
            .any(|w| !w.contains('/') && indent + w.width() > width);
        assert!(
            line.width() <= width || unbreakable,
            "a line wider than {width}: {line:?}\n{out}"
        );
    }
    // The lines run together, their indentation dropped: a path broken
    // across lines reads whole again, and each break must follow a slash.
    let mut joined = String::new();
    let mut ends = Vec::new();
    for line in out.lines() {
        joined.push_str(line.trim_start());
        ends.push(joined.len());
    }
    let found: Vec<usize> = joined.match_indices(path).map(|(i, _)| i).collect();
    assert!(!found.is_empty(), "{path} is not in the report at {width}");
    for start in found {
        for end in ends
            .iter()
            .filter(|e| (start + 1..start + path.len()).contains(*e))
        {
            assert_eq!(
                &joined[end - 1..*end],
                "/",
                "{path} broken mid-segment at {width}:\n{out}"
            );
        }
    }
}

#[test]
fn text_wraps_to_the_width_without_breaking_identifiers() {
    let r = long_ids();
    let wide = text_at(&r, 1000);
    let whole = |out: &str, id: &str| out.lines().filter(|l| l.contains(id)).count();
    for width in [40, 64, 100] {
        let out = text_at(&r, width);
        assert_fits(&out, width, LONG_PATH);
        // Each identifier stays whole on its line, as often as unwrapped.
        for id in [
            LONG_RULE,
            "HV-TOKEN-002",
            "ffff000011112222",
            "task-</script>-2",
            "2025-03-14T09:26:05.120Z",
        ] {
            assert_eq!(whole(&out, id), whole(&wide, id), "{id} at {width}:\n{out}");
        }
    }
    // Narrow enough, the long path is broken; wide, nothing is.
    assert!(!text_at(&r, 40).contains(&format!("at {LONG_PATH}")));
    assert!(wide.contains(&format!("at {LONG_PATH}:3 (event evt-1)")));
    // The default (a pipe) is 100 columns.
    assert_eq!(render_to_string(&r, ReportFormat::Text), text_at(&r, 100));
    // A 10 000-character message of slashes fits too.
    assert_fits(&text_at(&hostile(), 72), 72, "logs/run a.ndjson:3");
}

#[test]
fn text_tables_give_way_to_a_narrow_terminal() {
    let r = long_ids();
    // 80 columns: the path column gives way (a longer path gets lines of
    // its own), the numbers stay aligned under their heading.
    let out = text_at(&r, 80);
    let inputs: Vec<&str> = out
        .lines()
        .skip_while(|l| *l != "Inputs")
        .take(10)
        .collect();
    assert!(
        inputs[1].starts_with("  PATH ") && inputs[1].ends_with("IDENTITY"),
        "{inputs:?}"
    );
    let head_at = inputs[1].find("LINES").unwrap() + "LINES".len();
    let row = inputs
        .iter()
        .find(|l| l.ends_with("  OK"))
        .expect("the first input's row");
    assert_eq!(
        &row[head_at - 2..head_at],
        "20",
        "numbers aligned: {inputs:?}"
    );
    // 40 columns: too narrow for the columns, each input is a record.
    let out = text_at(&r, 40);
    assert!(
        out.contains("  planner-and-executor.ndjson\n      format ndjson, lines 20,\n"),
        "{out}"
    );
}

#[test]
fn text_repeats_the_summary_at_the_end() {
    let out = render_to_string(&sample(), ReportFormat::Text);
    let tail: Vec<&str> = out.lines().rev().take(6).collect();
    let tail: Vec<&str> = tail.into_iter().rev().collect();
    assert_eq!(
        tail,
        [
            "Summary",
            "  Findings: 4 (critical 1, high 2, medium 0, low 0, info 1)",
            "  By rule: HV-TASK-001 2, HV-INFO-009 1, HV-TOKEN-002 1",
            "  Accounting: MISMATCH",
            "  Verdict: FAILED: 2 finding(s) at or above high (--fail-on high); 1 suppressed finding(s) not",
            "    counted",
        ],
        "{out}"
    );
    // The counts near the top are still there too.
    assert_eq!(out.matches("Findings: 4 (critical 1,").count(), 2);
}

/// The command line, configuration and generation time the snapshots
/// show: fixed, as SOURCE_DATE_EPOCH fixes the time for the CLI, so they
/// stay stable.
fn provenance() -> Provenance {
    Provenance {
        command: [
            "hvaudit",
            "audit",
            "--format",
            "html",
            "-o",
            "report.html",
            "'logs/run a.ndjson'",
        ]
        .map(String::from)
        .to_vec(),
        configuration: Some(Configuration {
            file: "ci/hvaudit.toml".into(),
            found: "--config".into(),
            options: vec!["fail-on".into()],
            rules: vec![
                "token.replayed severity=critical".into(),
                "envelope.legacy_version_field enabled=false".into(),
            ],
        }),
        generated_at: Some(t(59, 500) + chrono::Duration::hours(1)),
    }
}

fn html_with(report: &Report, provenance: Provenance) -> String {
    let opts = RenderOptions {
        provenance,
        ..Default::default()
    };
    let mut out = Vec::new();
    render_with(report, ReportFormat::Html, &opts, &mut out).unwrap();
    String::from_utf8(out).unwrap()
}

#[test]
fn every_format_states_the_configuration_it_applied() {
    let with = RenderOptions {
        provenance: provenance(),
        ..Default::default()
    };
    let said = "ci/hvaudit.toml (--config) set: fail-on; [rules] token.replayed \
                severity=critical, envelope.legacy_version_field enabled=false";
    let rendered = |format: ReportFormat, opts: &RenderOptions| {
        let mut out = Vec::new();
        render_with(&sample(), format, opts, &mut out).unwrap();
        out
    };
    for format in ALL {
        let out = String::from_utf8(rendered(format, &with)).unwrap();
        let plain = render_to_string(&sample(), format);
        match format {
            // One finding a line and nothing else: no place for it.
            ReportFormat::Jsonl => assert_eq!(out, plain),
            ReportFormat::Json => {
                let v: Value = serde_json::from_str(&out).unwrap();
                assert_eq!(v["configuration"]["file"], "ci/hvaudit.toml");
                assert_eq!(v["configuration"]["found"], "--config");
                assert_eq!(v["configuration"]["options"][0], "fail-on");
                assert_eq!(
                    v["configuration"]["rules"][1],
                    "envelope.legacy_version_field enabled=false"
                );
                let p: Value = serde_json::from_str(&plain).unwrap();
                assert!(p.get("configuration").is_none(), "absent without one");
            }
            ReportFormat::Sarif => {
                let v: Value = serde_json::from_str(&out).unwrap();
                let c = &v["runs"][0]["properties"]["configuration"];
                assert_eq!(c["summary"], said, "{c}");
                let p: Value = serde_json::from_str(&plain).unwrap();
                assert!(p["runs"][0]["properties"].get("configuration").is_none());
            }
            // The HTML header lays the line out in spans (see below).
            ReportFormat::Html => assert!(out.contains("id=\"configuration\"")),
            ReportFormat::Text => {
                let one_line = out.split_whitespace().collect::<Vec<_>>().join(" ");
                assert!(
                    one_line.contains(&format!("Configuration: {said}")),
                    "{out}"
                );
            }
            ReportFormat::Markdown => {
                assert!(out.contains("**Configuration:** ci/hvaudit.toml"), "{out}")
            }
            ReportFormat::Junit => assert!(
                out.contains(&format!(
                    "<property name=\"hvaudit.configuration\" value=\"{said}\"/>"
                )),
                "{out}"
            ),
            ReportFormat::Parquet => unreachable!("not among ALL"),
        }
        if format != ReportFormat::Jsonl {
            assert!(
                !plain.contains("ci/hvaudit.toml"),
                "{format}: only when one applied"
            );
        }
    }
    // Parquet: in the file's key-value metadata.
    use datafusion::parquet::file::reader::{FileReader, SerializedFileReader};
    let file =
        SerializedFileReader::new(bytes::Bytes::from(rendered(ReportFormat::Parquet, &with)))
            .unwrap();
    let kv = file
        .metadata()
        .file_metadata()
        .key_value_metadata()
        .unwrap();
    let config = kv
        .iter()
        .find(|k| k.key == "hvaudit.configuration")
        .unwrap();
    assert_eq!(config.value.as_deref(), Some(said));
}

#[test]
fn html_header_states_verdict_command_and_time() {
    let out = html_with(&sample(), provenance());
    assert!(
        out.contains("<div id=\"verdict\" class=\"verdict failed\"><b>FAILED: 2 finding(s) at or above high <span class=\"id\">(--fail-on</span> high)"),
        "{out}"
    );
    assert!(out.contains("<dt>Generated</dt><dd><span class=\"mono at\" id=\"generated\">2025-03-14T10:26:59.500Z</span>"));
    assert!(out.contains("<dd id=\"configuration\"><span class=\"path\"><span class=\"seg\">ci/</span><wbr><span class=\"seg\">hvaudit.toml</span></span> <span class=\"id\">(--config)</span> set: <span class=\"id\">fail-on;</span> [rules] token.replayed severity=critical, envelope.legacy_version_field enabled=false</dd>"), "{out}");
    let command = &out[out.find("id=\"command\"").unwrap()..];
    let command = &command[..command.find("</code>").unwrap()];
    // Each word whole; words apart by a space, where the line may break.
    assert!(
        command.contains("<span class=\"seg\">--format</span></span> <span class=\"path\"><span class=\"seg\">html</span>"),
        "{command}"
    );
    // The quoted path breaks only after its slash.
    assert!(command.contains("<span class=\"seg\">&#x27;logs/</span><wbr><span class=\"seg\">run a.ndjson&#x27;</span>"), "{command}");
    // Passed, and not gated at all.
    let mut passed = sample();
    passed.gate.fail_on = Some(Severity::Critical);
    passed.findings = passed.findings.to_vec()[1..].to_vec().into();
    assert!(html_with(&passed, provenance()).contains("class=\"verdict passed\"><b>PASSED"));
    let mut ungated = sample();
    ungated.gate.fail_on = None;
    assert!(html_with(&ungated, provenance()).contains("class=\"verdict\"><b>not gated"));
    // A library call states neither command nor time.
    let plain = render_to_string(&sample(), ReportFormat::Html);
    assert!(!plain.contains("id=\"command\"") && !plain.contains("id=\"generated\""));
}

#[test]
fn html_folds_timelines_and_keeps_identifiers_whole() {
    let out = html_with(&long_ids(), provenance());
    assert!(!out.contains("<details open"), "timelines start folded");
    assert_eq!(out.matches("<details class=\"timeline\">").count(), 2);
    assert!(out.contains("id=\"expand-all\"") && out.contains("id=\"collapse-all\""));
    // Identifiers in nowrap spans; paths in segments with a break after
    // each slash only.
    assert!(out.contains(&format!("<span class=\"mono id\">{LONG_RULE}</span>")));
    assert!(out.contains("<span class=\"id\">a1b2c3d4e5f60718</span>"));
    assert!(out.contains(
        "<span class=\"seg\">cluster-eu-west-1/</span><wbr><span class=\"seg\">runs/</span>"
    ));
    assert!(out.contains("<span class=\"seg\">planner-and-executor.ndjson:3</span>"));
    assert!(out.contains(".id, .seg, .sev, .mono.at { white-space: nowrap; }"));
    assert!(!out.contains("td.rule .mono { overflow-wrap: anywhere"));
}

#[test]
fn cli_html_header_names_the_configuration_file() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(
        dir.path().join("hvaudit.toml"),
        "[audit]\nfail-on = \"critical\"\n\n[rules.\"token.rebound\"]\nenabled = false\n",
    )
    .unwrap();
    let sample_dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("samples/incident");
    let out = crate::common::hvaudit_reading_config()
        .current_dir(dir.path())
        .args(["audit", "-q", "--format", "html"])
        .arg(&sample_dir)
        .output()
        .unwrap();
    let html = String::from_utf8(out.stdout).unwrap();
    let said = &html[html
        .find("<dd id=\"configuration\">")
        .expect("the header names it")..];
    let said = &said[..said.find("</dd>").unwrap()];
    assert!(
        said.contains("<span class=\"seg\">hvaudit.toml</span></span> (working directory) set: <span class=\"id\">fail-on;</span> [rules] token.rebound enabled=false"),
        "{said}"
    );
    assert!(
        html.contains("<span class=\"id\">(--fail-on</span> critical)"),
        "the verdict uses it"
    );
}

#[test]
fn cli_text_fits_the_terminal_it_is_written_to() {
    // A terminal of 72 columns, through util-linux's `script` (a pty).
    let exe = crate::common::bin();
    let sample_dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("samples/incident");
    let line = format!(
        "stty rows 40 cols 72; {} --no-config audit -q {}",
        exe.display(),
        sample_dir.display()
    );
    let out = crate::common::scrubbed("script")
        .args(["-qec", &line, "/dev/null"])
        .env_remove("COLUMNS")
        .output()
        .expect("`script` (util-linux) runs the report in a terminal");
    let text = String::from_utf8(out.stdout).unwrap().replace('\r', "");
    assert!(text.contains("Summary"), "{text}");
    assert_fits(&text, 72, "harmovela-0.2.ndjson");
    assert!(
        text.lines().any(|l| l.len() > 64),
        "laid out to 72, not less"
    );
}

#[test]
fn cli_text_fits_columns_and_html_honours_source_date_epoch() {
    let sample_dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("samples/incident");
    let audit = |env: &[(&str, &str)], args: &[&str]| {
        let mut cmd = hvaudit();
        cmd.env_remove("COLUMNS").env_remove("SOURCE_DATE_EPOCH");
        for (k, v) in env {
            cmd.env(k, v);
        }
        let out = cmd
            .args(["audit", "-q"])
            .args(args)
            .arg(&sample_dir)
            .output()
            .unwrap();
        assert_ne!(
            out.status.code(),
            Some(2),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8(out.stdout).unwrap()
    };
    let piped = audit(&[], &[]);
    let narrow = audit(&[("COLUMNS", "60")], &[]);
    assert_ne!(piped, narrow);
    assert_fits(&piped, 100, "harmovela-0.2.ndjson");
    assert_fits(&narrow, 60, "harmovela-0.2.ndjson");
    assert!(
        narrow.lines().last().unwrap().starts_with("  "),
        "the summary ends it"
    );

    let html = audit(
        &[("SOURCE_DATE_EPOCH", "1700000000")],
        &["--format", "html"],
    );
    assert!(
        !html.contains("id=\"configuration\""),
        "no configuration file here"
    );
    assert!(
        html.contains("id=\"generated\">2023-11-14T22:13:20.000Z<"),
        "time"
    );
    assert!(html.contains(
        "<span class=\"seg\">--format</span></span> <span class=\"path\"><span class=\"seg\">html</span>"
    ));
    assert_eq!(
        html,
        audit(
            &[("SOURCE_DATE_EPOCH", "1700000000")],
            &["--format", "html"]
        )
    );
}

// One snapshot per format of the small sample (the 10 000-character
// message stays out of the snapshots). The HTML one states a fixed
// command and generation time (see `provenance`).
macro_rules! snapshot_tests {
    ($($name:ident => $format:expr),* $(,)?) => {$(
        #[test]
        fn $name() {
            insta::assert_snapshot!(render_to_string(&sample(), $format));
        }
    )*};
}

snapshot_tests! {
    snapshot_text => ReportFormat::Text,
    snapshot_json => ReportFormat::Json,
    snapshot_jsonl => ReportFormat::Jsonl,
    snapshot_markdown => ReportFormat::Markdown,
    snapshot_sarif => ReportFormat::Sarif,
    snapshot_junit => ReportFormat::Junit,
}

#[test]
fn snapshot_html() {
    insta::assert_snapshot!(html_with(&sample(), provenance()));
}

/// The HTML report cuts a value of the log past 80 characters (an event id,
/// a task) as the text report does, and shows the operator's own text (a
/// suppression's reason) whole.
#[test]
fn html_cuts_long_log_values_and_keeps_a_long_reason_whole() {
    let mut r = sample();
    let mut findings = r.findings.to_vec();
    let (id, reason) = ("e".repeat(120), "r".repeat(120));
    findings[1].event_ids = vec![id.clone()];
    findings[1].locations[0].event_id = Some(id.clone());
    findings[1].task_id = Some(id.clone());
    if let Some(s) = findings[1].suppression.as_mut() {
        s.reason = reason.clone();
    }
    r.findings = findings.into();
    let out = html_with(&r, provenance());
    assert!(out.contains(&reason), "the reason whole");
    assert!(!out.contains(&id), "the id cut");
    assert!(out.contains(&format!("{}…[120 characters, blake3 ", "e".repeat(40))));
}
