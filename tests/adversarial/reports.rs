//! Log content in every report format: shown as text, never acted on.

use super::*;

/// Strings a compromised agent could write, aimed at each report format.
const HOSTILE: [&str; 6] = [
    "<script>alert(1)</script>",
    "</style><img src=x onerror=alert(2)>\"'",
    "| a | b |*bold*`code`[x](javascript:alert(3))",
    "\u{1b}[31mred\u{1b}]0;title\u{7}",
    "line\nbreak\r\u{85}c1\u{9b}31m\u{202e}rtl",
    "<!-- --> & &amp; ${x} {{ x }} {% x %}",
];

#[test]
fn log_content_never_reaches_a_report_unescaped() {
    let dir = tempfile::tempdir().unwrap();
    let mut lines = Vec::new();
    for (n, h) in HOSTILE.iter().enumerate() {
        // A task whose first event is task.progress: lifecycle findings
        // carry its task id, event id and agent.
        lines.push(
            json!({"spec_version": "0.2", "id": format!("{h}#{n}"), "type": "task.progress",
                   "source": h, "created_at": "2026-07-14T10:00:00Z",
                   "task_id": format!("{h}@{n}"), "payload": {"task_id": format!("{h}@{n}"), "note": h}})
            .to_string(),
        );
        // A schema violation quoting a payload string.
        lines.push(
            json!({"spec_version": "0.2", "id": format!("p{n}"), "type": "context.invalidated",
                   "source": "agent:x", "created_at": "2026-07-14T10:00:01Z",
                   "payload": {"context_key": {"k": h}}})
            .to_string(),
        );
        // A rejected line whose reason, id and type come from the log.
        lines.push(
            json!({"spec_version": "0.2", "id": format!("{h}!{n}"), "type": h,
                   "source": "agent:x", "created_at": "2026-07-14T10:00:02Z", "payload": {}})
            .to_string(),
        );
    }
    // Even the file name is hostile.
    let name = "\u{1b}[2J<script>x|*`.ndjson";
    let f = write(dir.path(), name, (lines.join("\n") + "\n").as_bytes());
    let report = Audit::new(crate::common::audit_config(vec![f.clone()]))
        .run()
        .unwrap();
    for rule in ["lifecycle.illegal_transition", "envelope.invalid"] {
        assert!(
            report.findings.iter().any(|x| x.rule == rule),
            "no {rule} finding"
        );
    }
    let hostile_tasks: Vec<String> = HOSTILE
        .iter()
        .enumerate()
        .map(|(n, h)| format!("{h}@{n}"))
        .collect();
    for format in ALL_FORMATS {
        let mut out = Vec::new();
        render(&report, format, &mut out).unwrap();
        let text = String::from_utf8(out).expect("reports are UTF-8");
        match format {
            ReportFormat::Json | ReportFormat::Sarif => {
                let v: Value =
                    serde_json::from_str(&text).unwrap_or_else(|e| panic!("{format}: {e}"));
                carries_the_data(format, &v, &hostile_tasks);
            }
            ReportFormat::Jsonl => {
                let rows: Vec<Value> = text
                    .lines()
                    .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("jsonl: {e}: {l}")))
                    .collect();
                carries_the_data(format, &Value::Array(rows), &hostile_tasks);
            }
            _ => {
                no_control_characters(format, &text);
                assert!(text.contains("x1b"), "{format}: the ESC shown as text");
            }
        }
        if format == ReportFormat::Html {
            // Only the page's own elements, as many as in a benign report.
            let benign = benign_html();
            for tag in [
                "<script",
                "</script",
                "<style",
                "</style",
                "<img",
                "<!--",
                "href=\"javascript",
            ] {
                let (n, m) = (text.matches(tag).count(), benign.matches(tag).count());
                assert_eq!(n, m, "html: {tag} {n} times, {m} in a benign report");
            }
            assert!(text.contains("&lt;script&gt;alert(1)&lt;"));
            assert!(text.contains("\\x1b[31mred"));
        }
        if format == ReportFormat::Markdown {
            markdown_tables_intact(&text);
            for raw in ["<script", "<img", "[x](javascript", "<!--", "`code`"] {
                assert!(!text.contains(raw), "md contains raw {raw:?}");
            }
        }
        if format == ReportFormat::Text {
            assert!(
                text.contains("<script>alert(1)</script>@0"),
                "text keeps markup as text"
            );
        }
    }
}

fn benign_html() -> String {
    let report = Audit::new(crate::common::audit_config(vec![upstream(
        "harmovela-0.2/fixtures/task-lifecycle.ndjson",
    )]))
    .run()
    .unwrap();
    let mut out = Vec::new();
    render(&report, ReportFormat::Html, &mut out).unwrap();
    String::from_utf8(out).unwrap()
}

/// The JSON formats keep hostile strings exactly (escaped by JSON itself).
fn carries_the_data(format: ReportFormat, v: &Value, tasks: &[String]) {
    let mut strings = Vec::new();
    collect_strings(v, &mut strings);
    for t in tasks {
        assert!(
            strings.iter().any(|s| s.contains(t.as_str())),
            "{format}: {t:?} lost"
        );
    }
}

fn collect_strings<'a>(v: &'a Value, out: &mut Vec<&'a str>) {
    match v {
        Value::String(s) => out.push(s),
        Value::Array(a) => a.iter().for_each(|x| collect_strings(x, out)),
        Value::Object(o) => o.values().for_each(|x| collect_strings(x, out)),
        _ => {}
    }
}

/// No C0 control (but newline and tab), DEL, C1 control or bidi override.
fn no_control_characters(format: ReportFormat, text: &str) {
    for (n, line) in text.lines().enumerate() {
        let bad = line.chars().find(|c| {
            (c.is_control() && *c != '\t')
                || ('\u{202a}'..='\u{202e}').contains(c)
                || ('\u{2066}'..='\u{2069}').contains(c)
        });
        assert!(
            bad.is_none(),
            "{format} line {}: {bad:?} in {line:?}",
            n + 1
        );
    }
    assert!(!text.contains('\r'), "{format}: carriage return");
}

/// Every row of a Markdown table has as many cell separators as its header.
fn markdown_tables_intact(text: &str) {
    let pipes = |l: &str| {
        let b = l.as_bytes();
        (0..b.len())
            .filter(|&i| b[i] == b'|' && (i == 0 || b[i - 1] != b'\\'))
            .count()
    };
    let mut header: Option<usize> = None;
    let mut rows = 0;
    for line in text.lines() {
        if line.starts_with('|') {
            let n = pipes(line);
            match header {
                None => header = Some(n),
                Some(h) => assert_eq!(n, h, "md table row broken: {line}"),
            }
            rows += 1;
        } else {
            header = None;
        }
    }
    assert!(rows > 5, "md has tables");
}

/// Look-alike ids stay distinct events, and the text and HTML reports say
/// which ones may be taken for others (not in NFKC, or of mixed scripts),
/// with their code points; a plain id beside them carries no mark.
#[test]
fn look_alike_ids_are_marked_with_their_code_points() {
    let dir = tempfile::tempdir().unwrap();
    // Tasks whose first event is task.progress: a lifecycle finding each.
    let tasks = ["task_a", "task_\u{430}", "cafe\u{301}", "\u{ff54}ask_a"];
    let lines: Vec<String> = tasks
        .iter()
        .enumerate()
        .map(|(n, t)| {
            json!({"spec_version": "0.2", "id": format!("e{n}"), "type": "task.progress",
                   "source": "agent:x", "created_at": "2026-07-14T10:00:00Z",
                   "task_id": t, "payload": {"task_id": t}})
            .to_string()
        })
        .collect();
    let f = write(
        dir.path(),
        "log.ndjson",
        (lines.join("\n") + "\n").as_bytes(),
    );
    let report = Audit::new(crate::common::audit_config(vec![f]))
        .run()
        .unwrap();
    for format in [ReportFormat::Text, ReportFormat::Html] {
        let mut out = Vec::new();
        render(&report, format, &mut out).unwrap();
        let out = String::from_utf8(out).unwrap();
        // Text: after the id; HTML: in an element of its own beside the
        // id's, which stays the id alone (and its filter's value).
        let marked = |task: &str, mark: &str| match format {
            ReportFormat::Html => {
                format!("{task}</span> <span class=\"lookalike\">[look-alike: {mark}]</span>")
            }
            _ => format!("{task} [look-alike: {mark}]"),
        };
        for (task, mark) in [
            ("task_\u{430}", "mixes scripts; U+0430"),
            ("cafe\u{301}", "not in NFKC; U+0301"),
            ("\u{ff54}ask_a", "not in NFKC; U+FF54"),
        ] {
            assert!(out.contains(&marked(task, mark)), "{format:?}: {task}");
        }
        assert!(!out.contains("task_a [look-alike"), "{format:?}");
        assert!(
            !out.contains("task_a</span> <span class=\"lookalike\""),
            "{format:?}"
        );
    }
}
