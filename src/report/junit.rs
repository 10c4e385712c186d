//! `--format junit`: JUnit XML for CI systems that show test results. One
//! test suite per rule family, one test case per rule: it fails when the
//! rule has findings that count for the gate (listed in the failure),
//! errs when the rule could not run, and passes otherwise (suppressed and
//! below-threshold findings are listed in its system-out). A first suite,
//! `hvaudit.inputs`, errs when the inputs held no event; its properties
//! name the configuration file applied, if any.
//!
//! Every text written goes through `clean`, which escapes the characters
//! XML 1.0 forbids (C0 controls but tab and line breaks, U+FFFE, U+FFFF)
//! with the other hidden ones: a log line or a rule file cannot make the
//! document unparseable.

use super::model::Report;
use super::{Configuration, clean, log_text, log_value};
use crate::finding::{Finding, fmt_instant};
use quick_junit::{NonSuccessKind, TestCase, TestCaseStatus, TestSuite};
use std::collections::BTreeMap;
use std::io::Write;

pub(super) fn render(
    report: &Report,
    config: Option<&Configuration>,
    out: &mut dyn Write,
) -> anyhow::Result<()> {
    // Per rule: the findings that fail the gate and the others, as lines.
    let mut failing: BTreeMap<&str, Vec<String>> = BTreeMap::new();
    let mut other: BTreeMap<&str, Vec<String>> = BTreeMap::new();
    for (f, key) in report.findings.iter().zip(report.findings.keys()) {
        let rule = report
            .rules
            .iter()
            .find(|r| r.id == f.rule)
            .map(|r| r.id.as_str())
            .unwrap_or("unknown");
        let into = if report.counts_for_gate(&key) {
            &mut failing
        } else {
            &mut other
        };
        into.entry(rule).or_default().push(line(&f));
    }
    let errors: BTreeMap<&str, &str> = report
        .rule_errors
        .iter()
        .map(|(r, e)| (r.as_str(), e.as_str()))
        .collect();
    let mut suites: BTreeMap<&str, TestSuite> = BTreeMap::new();
    for rule in &report.rules {
        let id = rule.id.as_str();
        let status = if let Some(e) = errors.get(id) {
            let mut s = TestCaseStatus::non_success(NonSuccessKind::Error);
            s.set_message(format!("the rule could not run: {}", clean(e)));
            s
        } else if let Some(lines) = failing.get(id) {
            let mut s = TestCaseStatus::non_success(NonSuccessKind::Failure);
            s.set_message(format!(
                "{} finding(s) that fail the run ({})",
                lines.len(),
                gate_option(report)
            ));
            s.set_type(rule.severity.as_str());
            s.set_description(lines.join("\n"));
            s
        } else {
            TestCaseStatus::success()
        };
        let mut case = TestCase::new(clean(id).into_owned(), status);
        case.set_classname(format!("hvaudit.{}", clean(&rule.family)));
        if let Some(lines) = other.get(id) {
            case.set_system_out(lines.join("\n"));
        }
        suites
            .entry(rule.family.as_str())
            .or_insert_with(|| TestSuite::new(format!("hvaudit.{}", clean(&rule.family))))
            .add_test_case(case);
    }
    // A rule file that failed before it could be listed (it did not parse).
    for (rule, error) in &report.rule_errors {
        if report.rules.iter().any(|r| &r.id == rule) {
            continue;
        }
        let mut s = TestCaseStatus::non_success(NonSuccessKind::Error);
        s.set_message(format!("the rule could not run: {}", clean(error)));
        let mut case = TestCase::new(clean(rule).into_owned(), s);
        case.set_classname("hvaudit.rules");
        suites
            .entry("rules")
            .or_insert_with(|| TestSuite::new("hvaudit.rules"))
            .add_test_case(case);
    }
    // Passing cases mean little when nothing was read: say so as a case.
    let status = if report.no_events() {
        let mut s = TestCaseStatus::non_success(NonSuccessKind::Error);
        s.set_message("the inputs hold no events: nothing was audited");
        s
    } else {
        TestCaseStatus::success()
    };
    let mut case = TestCase::new("inputs hold events", status);
    case.set_classname("hvaudit.inputs");
    let mut inputs = TestSuite::new("hvaudit.inputs");
    inputs.add_test_case(case);
    if let Some(c) = config {
        inputs.add_property(("hvaudit.configuration", clean(&c.summary()).as_ref()));
    }
    let mut xml = quick_junit::Report::new("hvaudit");
    xml.add_test_suite(inputs);
    xml.add_test_suites(suites.into_values());
    xml.serialize(&mut *out)?;
    Ok(())
}

/// The option that decides which findings fail, as given.
fn gate_option(report: &Report) -> String {
    match (report.gate.fail_on, report.gate.new_only) {
        (Some(s), true) => format!("--fail-on-new {s}"),
        (Some(s), false) => format!("--fail-on {s}"),
        (None, _) => "--fail-on none".into(),
    }
}

/// One finding as a line (severity, place, message, state, fingerprint),
/// then its timeline, a line an event.
fn line(f: &Finding) -> String {
    let place = f
        .locations
        .first()
        .map(|l| format!("{}:{}", l.file, l.line))
        .unwrap_or_default();
    let mut state = String::new();
    if let Some(s) = &f.suppression {
        state.push_str(&format!(" [suppressed: {}]", s.reason));
    }
    if let Some(b) = f.baseline_state {
        state.push_str(&format!(" [{}]", b.as_str()));
    }
    if let Some(v) = f.rests_on_version {
        state.push_str(&format!(" [rests on a conflicting copy: version {v}]"));
    }
    let mut text = clean(&format!(
        "{} {} {}: {}{} (fingerprint {})",
        f.severity.as_str().to_uppercase(),
        f.rule,
        place,
        log_text(&f.message),
        state,
        f.fingerprint
    ))
    .into_owned();
    for t in &f.timeline {
        let at = t.at.as_ref().map(fmt_instant).unwrap_or_else(|| "-".into());
        text.push_str(&clean(&format!(
            "\n    {at} {} {} {}:{}",
            log_value(&t.event_type),
            log_value(&t.event_id),
            t.file,
            t.line
        )));
    }
    text
}
