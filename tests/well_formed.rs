//! Every report format is well-formed on any input: a log whose ids,
//! types, task ids, agents, tokens and payload strings are arbitrary
//! Unicode (controls, noncharacters such as U+FFFE and U+FFFF, bidi and
//! invisible characters, markup), a suppression reason and a configuration
//! file name of the same kind, audited once per case and rendered in every
//! format, each read back by a real parser: serde_json for JSON, JSON Lines
//! and SARIF (and the SARIF schema), roxmltree (strict XML 1.0) for JUnit,
//! html5ever for HTML, the Parquet reader for Parquet; text and Markdown
//! carry no hidden character but line breaks.

use hvaudit::audit::{Audit, AuditConfig};
use hvaudit::escape::{hidden, visible};
use hvaudit::gate::{GateOptions, suppressions::Suppressions};
use hvaudit::report::{Configuration, Provenance, RenderOptions, ReportFormat, render_with};
use hvaudit::{Report, Severity};
use proptest::prelude::*;
use serde_json::{Value, json};

/// Characters that have broken one format or another, beside any char.
const NASTY: [char; 24] = [
    '\u{0}',
    '\u{1}',
    '\u{8}',
    '\u{b}',
    '\u{c}',
    '\u{1b}',
    '\u{7f}',
    '\u{85}',
    '\u{9f}',
    '\r',
    '\n',
    '\t',
    '\u{fffe}',
    '\u{ffff}',
    '\u{1fffe}',
    '\u{fdd0}',
    '\u{202e}',
    '\u{200b}',
    '\u{feff}',
    '<',
    '&',
    '"',
    ']',
    '\\',
];

/// A short string of any characters, the nasty ones often; it shrinks
/// toward fewer and plainer characters.
fn text() -> impl Strategy<Value = String> {
    let c = prop_oneof![any::<char>(), proptest::sample::select(NASTY.to_vec())];
    proptest::collection::vec(c, 0..8).prop_map(String::from_iter)
}

/// The strings a case plants in its log and files.
#[derive(Debug, Clone)]
struct Planted {
    id: String,
    ty: String,
    task: String,
    agent: String,
    token: String,
    payload: String,
    reason: String,
    config: String,
}

fn planted() -> impl Strategy<Value = Planted> {
    (
        text(),
        text(),
        text(),
        text(),
        text(),
        text(),
        text(),
        text(),
    )
        .prop_map(
            |(id, ty, task, agent, token, payload, reason, config)| Planted {
                id,
                ty,
                task,
                agent,
                token,
                payload,
                reason,
                config,
            },
        )
}

/// A log where lifecycle, orphan, token and envelope rules fire on the
/// planted strings, and rejected lines carry them in their text.
fn log(p: &Planted) -> String {
    let event = |n: u32, ty: &str, at: u32, extra: Value| {
        let mut e = json!({
            "spec_version": "0.2",
            "id": format!("{}-{n}", p.id),
            "type": ty,
            "source": p.agent,
            "session_id": p.task,
            "created_at": format!("2026-07-14T10:00:{at:02}Z"),
            "task_id": p.task,
            "payload": {"task_id": p.task, "message": p.payload},
        });
        for (k, v) in extra.as_object().unwrap() {
            e[k] = v.clone();
        }
        e.to_string()
    };
    let handoff = |n: u32, at: u32| {
        event(
            n,
            "delegation.handoff.completed",
            at,
            json!({"handoff_token": p.token, "delegated_by": p.agent, "delegated_to": "agent:b",
                   "parent_task_id": p.payload}),
        )
    };
    [
        event(1, "task.started", 1, json!({"parent_task_id": p.payload})),
        event(2, "task.completed", 2, json!({})),
        event(3, "task.completed", 3, json!({})),
        handoff(4, 4),
        handoff(5, 5),
        event(6, &p.ty, 6, json!({})),
        event(7, "x.y", 7, json!({"spec_version": p.payload})),
        // Not JSON: a rejected line, kept with its text.
        format!("{{\"id\": {}", p.payload),
    ]
    .join("\n")
        + "\n"
}

/// A TOML basic string: JSON's escapes, which TOML reads, and DEL, which
/// TOML wants escaped too.
fn toml_string(s: &str) -> String {
    serde_json::to_string(s)
        .unwrap()
        .replace('\u{7f}', "\\u007F")
}

/// The case audited, its suppressions applied, and the options that make
/// every format state the configuration file and the command.
fn audited(p: &Planted) -> (Report, RenderOptions) {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("log.ndjson");
    std::fs::write(&path, log(p)).unwrap();
    let mut report = Audit::new(AuditConfig {
        reading: hvaudit::tables::ReadingOptions {
            ingest: hvaudit::ingest::IngestOptions {
                allow_empty: true,
                ..crate::common::test_reading()
            },
            ..crate::common::reading_options(vec![path])
        },
        ..Default::default()
    })
    .run()
    .expect("the audit runs");
    let suppressions = dir.path().join("suppressions.toml");
    std::fs::write(
        &suppressions,
        format!(
            "[[suppress]]\nrule = \"lifecycle.*\"\nreason = {}\nowner = {}\n",
            toml_string(&format!("r{}", p.reason)),
            toml_string(&p.reason)
        ),
    )
    .unwrap();
    let gate = GateOptions {
        fail_on: Some(Severity::High),
        suppressions: Some(Suppressions::load(&suppressions).expect("the suppressions load")),
        ..Default::default()
    };
    hvaudit::gate::apply(&mut report, gate);
    let opts = RenderOptions {
        provenance: Provenance {
            command: vec!["hvaudit".into(), p.config.clone()],
            configuration: Some(Configuration {
                file: p.config.clone(),
                found: "--config".into(),
                options: vec!["fail-on".into()],
                rules: vec![format!("{} severity=low", p.task)],
            }),
            generated_at: None,
        },
        ..Default::default()
    };
    (report, opts)
}

fn rendered(report: &Report, format: ReportFormat, opts: &RenderOptions) -> Vec<u8> {
    let mut out = Vec::new();
    render_with(report, format, opts, &mut out).expect("it renders");
    out
}

/// The `tr` rows of the HTML findings table, by their `data-task`, and
/// the parser's errors.
fn html_rows(page: &[u8]) -> (Vec<String>, Vec<String>) {
    use html5ever::tendril::TendrilSink;
    use markup5ever_rcdom::{Handle, NodeData, RcDom};
    let dom = html5ever::parse_document(RcDom::default(), Default::default())
        .from_utf8()
        .read_from(&mut &page[..])
        .unwrap();
    fn walk(node: &Handle, rows: &mut Vec<String>) {
        if let NodeData::Element { name, attrs, .. } = &node.data {
            let attrs = attrs.borrow();
            let attr = |n: &str| {
                attrs
                    .iter()
                    .find(|a| &*a.name.local == n)
                    .map(|a| a.value.to_string())
            };
            if &*name.local == "tr" && attr("class").is_some_and(|c| c.starts_with("finding ")) {
                rows.push(attr("data-task").unwrap_or_default());
            }
        }
        for child in node.children.borrow().iter() {
            walk(child, rows);
        }
    }
    let mut rows = Vec::new();
    walk(&dom.document, &mut rows);
    let errors = dom.errors.borrow().iter().map(|e| e.to_string()).collect();
    (rows, errors)
}

fn check_every_format(report: &Report, opts: &RenderOptions) -> Result<(), TestCaseError> {
    let n = report.findings.len();
    let json: Value = serde_json::from_slice(&rendered(report, ReportFormat::Json, opts))
        .map_err(|e| TestCaseError::fail(format!("json: {e}")))?;
    prop_assert_eq!(json["findings"].as_array().map(Vec::len), Some(n));
    let jsonl = rendered(report, ReportFormat::Jsonl, opts);
    for line in jsonl.split(|b| *b == b'\n').filter(|l| !l.is_empty()) {
        serde_json::from_slice::<Value>(line)
            .map_err(|e| TestCaseError::fail(format!("jsonl: {e}")))?;
    }
    let sarif: Value = serde_json::from_slice(&rendered(report, ReportFormat::Sarif, opts))
        .map_err(|e| TestCaseError::fail(format!("sarif: {e}")))?;
    let schema = crate::common::sarif_schema_errors(&sarif);
    prop_assert!(schema.is_empty(), "sarif schema: {:?}", schema);
    let junit = String::from_utf8(rendered(report, ReportFormat::Junit, opts)).unwrap();
    if let Err(e) = roxmltree::Document::parse(&junit) {
        return Err(TestCaseError::fail(format!("junit: {e}\n{junit}")));
    }
    let (rows, errors) = html_rows(&rendered(report, ReportFormat::Html, opts));
    prop_assert!(errors.is_empty(), "html parse errors: {:?}", errors);
    let tasks: Vec<String> = report
        .findings
        .iter()
        .map(|f| {
            f.task_id
                .as_deref()
                .map(|t| visible(t).into_owned())
                .unwrap_or_default()
        })
        .collect();
    prop_assert_eq!(rows, tasks, "one row a finding, its task intact");
    for format in [ReportFormat::Text, ReportFormat::Markdown] {
        let out = String::from_utf8(rendered(report, format, opts)).unwrap();
        let shown = out.chars().find(|&c| c != '\n' && hidden(c));
        prop_assert_eq!(shown, None, "{} shows a hidden character", format);
    }
    let parquet = bytes::Bytes::from(rendered(report, ReportFormat::Parquet, opts));
    let rows: usize =
        datafusion::parquet::arrow::arrow_reader::ParquetRecordBatchReaderBuilder::try_new(parquet)
            .and_then(|b| b.build())
            .map_err(|e| TestCaseError::fail(format!("parquet: {e}")))?
            .map(|b| b.map(|b| b.num_rows()).unwrap_or_default())
            .sum();
    prop_assert_eq!(rows, n);
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig {
        cases: 16,
        failure_persistence: None,
        ..ProptestConfig::default()
    })]

    #[test]
    fn every_format_parses_whatever_the_log_holds(p in planted()) {
        let (report, opts) = audited(&p);
        prop_assert!(report.rule_errors.is_empty(), "{:?}", report.rule_errors);
        prop_assert!(report.findings.len() >= 3, "the rules fire: {}", report.findings.len());
        check_every_format(&report, &opts)?;
    }
}

#[test]
fn the_characters_xml_forbids_reach_no_junit_report() {
    let p = Planted {
        id: "\u{fffe}".into(),
        ty: "\u{ffff}".into(),
        task: "t\u{0}\u{ffff}".into(),
        agent: "\u{1b}[31m".into(),
        token: "\u{fffe}".into(),
        payload: "\u{ffff}\u{b}".into(),
        reason: "\u{fffe}".into(),
        config: "\u{ffff}.toml".into(),
    };
    let (report, opts) = audited(&p);
    let junit = String::from_utf8(rendered(&report, ReportFormat::Junit, &opts)).unwrap();
    assert!(
        !junit.contains(['\u{fffe}', '\u{ffff}', '\u{0}', '\u{b}']),
        "{junit}"
    );
    roxmltree::Document::parse(&junit).expect("JUnit is XML");
    assert!(junit.contains("\\u{ffff}"), "shown escaped: {junit}");
}
