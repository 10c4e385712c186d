//! `--format json`: one pretty-printed JSON object. The serde structs below
//! fix the key order; the JSONL and HTML renderers reuse them so every
//! machine-readable view of a finding has the same shape.

use super::model::{EntryUse, InputSummary, Report};
use super::{Configuration, identity_holds};
use crate::finding::{BaselineState, Finding, Severity, Suppression, fmt_instant};
use crate::finding_store::Findings;
use serde::Serialize;
use serde::ser::{SerializeMap, SerializeSeq, Serializer};
use std::io::Write;

pub(super) fn render(
    report: &Report,
    config: Option<&Configuration>,
    out: &mut dyn Write,
) -> anyhow::Result<()> {
    let json = ReportJson {
        configuration: config,
        ..ReportJson::new(report)
    };
    serde_json::to_writer_pretty(&mut *out, &json)?;
    out.write_all(b"\n")?;
    Ok(())
}

#[derive(Serialize)]
pub(super) struct ReportJson<'a> {
    tool: &'a str,
    version: &'a str,
    /// How the findings' fingerprints are made: a baseline must match it.
    fingerprint_version: u32,
    /// The configuration file applied; absent when none was, so such a
    /// report is the same bytes as one written before the field existed.
    #[serde(skip_serializing_if = "Option::is_none")]
    configuration: Option<&'a Configuration>,
    inputs: Vec<InputJson<'a>>,
    span: SpanJson,
    counts: CountsJson,
    accounting: AccountingJson,
    unresolved_basis: u64,
    /// When the log holds conflicting ids: the readings of their later
    /// versions that were made.
    #[serde(skip_serializing_if = "Option::is_none")]
    readings: Option<super::model::ReadingsMade>,
    rules: Vec<&'a str>,
    rule_errors: Vec<RuleErrorJson<'a>>,
    gate: GateJson<'a>,
    /// None for the summary the HTML page reads (its findings come one at
    /// a time).
    #[serde(skip_serializing_if = "Option::is_none")]
    findings: Option<FindingsJson<'a>>,
}

/// The findings, each shaped as it is written: a million findings are not
/// held a second time as JSON views.
pub(super) struct FindingsJson<'a>(&'a Findings);

impl Serialize for FindingsJson<'_> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let mut seq = s.serialize_seq(Some(self.0.len()))?;
        for f in self.0.iter() {
            seq.serialize_element(&FindingJson::new(&f))?;
        }
        seq.end()
    }
}

impl<'a> ReportJson<'a> {
    pub(super) fn new(report: &'a Report) -> Self {
        Self {
            tool: &report.tool,
            version: &report.version,
            fingerprint_version: crate::finding_store::FINGERPRINT_VERSION,
            configuration: None,
            inputs: report.inputs.iter().map(InputJson::new).collect(),
            span: SpanJson {
                from: report.span.from.as_ref().map(fmt_instant),
                to: report.span.to.as_ref().map(fmt_instant),
            },
            counts: CountsJson {
                total: report.findings.len(),
                outside_window: report.outside_window,
                by_severity: Counts(
                    report
                        .counts_by_severity()
                        .into_iter()
                        .map(|(s, n)| (s.as_str().to_string(), n))
                        .collect(),
                ),
                by_rule: Counts(report.counts_by(|f| Some(f.rule))),
                by_family: Counts(report.counts_by(|f| Some(f.family))),
            },
            accounting: AccountingJson::new(&report.totals(), identity_holds(report)),
            unresolved_basis: report.unresolved_basis,
            readings: report.readings,
            rules: report.rules.iter().map(|r| r.id.as_str()).collect(),
            rule_errors: report
                .rule_errors
                .iter()
                .map(|(rule, error)| RuleErrorJson { rule, error })
                .collect(),
            gate: GateJson::new(report),
            findings: Some(FindingsJson(&report.findings)),
        }
    }

    /// Everything but the findings.
    pub(super) fn summary(report: &'a Report) -> Self {
        Self {
            findings: None,
            ..Self::new(report)
        }
    }
}

#[derive(Serialize)]
struct InputJson<'a> {
    path: &'a str,
    format: &'a str,
    #[serde(flatten)]
    accounting: AccountingJson,
    /// Why the input stopped early; null when it was read to its end.
    error: Option<&'a str>,
}

impl<'a> InputJson<'a> {
    fn new(i: &'a InputSummary) -> Self {
        Self {
            path: &i.path,
            format: &i.format,
            accounting: AccountingJson::new(i, i.identity_holds()),
            error: i.error.as_deref(),
        }
    }
}

/// The accounting identity's terms, per input and for the whole run.
#[derive(Serialize)]
struct AccountingJson {
    bytes: u64,
    lines: u64,
    events: u64,
    #[serde(skip_serializing_if = "is_zero")]
    conflicting_copies: u64,
    redeliveries: u64,
    bad_lines: u64,
    #[serde(skip_serializing_if = "is_zero")]
    bad_lines_unlisted: u64,
    blank_lines: u64,
    identity_holds: bool,
}

fn is_zero(n: &u64) -> bool {
    *n == 0
}

impl AccountingJson {
    fn new(i: &InputSummary, identity_holds: bool) -> Self {
        Self {
            bytes: i.bytes,
            lines: i.lines,
            events: i.events,
            conflicting_copies: i.conflicting_copies,
            redeliveries: i.redeliveries,
            bad_lines: i.bad_lines,
            bad_lines_unlisted: i.bad_lines_unlisted,
            blank_lines: i.blank_lines,
            identity_holds,
        }
    }
}

#[derive(Serialize)]
struct SpanJson {
    from: Option<String>,
    to: Option<String>,
}

#[derive(Serialize)]
struct CountsJson {
    total: usize,
    /// With `--since`/`--until`: findings left out, citing no event inside.
    #[serde(skip_serializing_if = "Option::is_none")]
    outside_window: Option<u64>,
    by_severity: Counts,
    by_rule: Counts,
    by_family: Counts,
}

/// Counts serialized as a JSON object in the given order (most severe or
/// most frequent first), which a BTreeMap would lose.
struct Counts(Vec<(String, usize)>);

impl Serialize for Counts {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let mut map = s.serialize_map(Some(self.0.len()))?;
        for (k, n) in &self.0 {
            map.serialize_entry(k, n)?;
        }
        map.end()
    }
}

/// The gate: its verdict and settings, the suppression file's entries and
/// the baseline's counts with the absent findings.
#[derive(Serialize)]
struct GateJson<'a> {
    /// "passed", "failed" or "not gated" (`--fail-on none`).
    verdict: &'static str,
    fail_on: Option<Severity>,
    new_only: bool,
    /// Findings that fail the run.
    failing: usize,
    suppressed: usize,
    /// The inputs held no event: nothing was audited.
    no_events: bool,
    suppressions: Option<SuppressionsJson<'a>>,
    baseline: Option<BaselineJson<'a>>,
}

#[derive(Serialize)]
struct SuppressionsJson<'a> {
    file: &'a str,
    entries: &'a [EntryUse],
}

#[derive(Serialize)]
struct BaselineJson<'a> {
    file: &'a str,
    new: u64,
    unchanged: u64,
    absent: Vec<FindingJson<'a>>,
}

impl<'a> GateJson<'a> {
    fn new(report: &'a Report) -> Self {
        let failing = report.failing();
        let g = &report.gate;
        Self {
            verdict: match (g.fail_on, failing) {
                (None, _) => "not gated",
                (Some(_), 0) => "passed",
                _ => "failed",
            },
            fail_on: g.fail_on,
            new_only: g.new_only,
            failing,
            suppressed: report.suppressed(),
            no_events: report.no_events(),
            suppressions: g.suppressions.as_ref().map(|s| SuppressionsJson {
                file: &s.file,
                entries: &s.entries,
            }),
            baseline: g.baseline.as_ref().map(|b| BaselineJson {
                file: &b.file,
                new: b.new,
                unchanged: b.unchanged,
                absent: b.absent.iter().map(FindingJson::new).collect(),
            }),
        }
    }
}

#[derive(Serialize)]
struct RuleErrorJson<'a> {
    rule: &'a str,
    error: &'a str,
}

#[derive(Serialize)]
pub(super) struct FindingJson<'a> {
    rule: &'a str,
    severity: Severity,
    family: &'a str,
    /// What a reader sees (`jq -r` on a terminal): hidden characters made
    /// visible, as in SARIF. The data fields (ids, event ids) stay exact.
    message: std::borrow::Cow<'a, str>,
    task_id: Option<&'a str>,
    agent: Option<&'a str>,
    session_id: Option<&'a str>,
    event_ids: &'a [String],
    locations: Vec<LocationJson<'a>>,
    at: Option<String>,
    fingerprint: &'a str,
    timeline: Vec<TimelineJson<'a>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    suppression: Option<&'a Suppression>,
    #[serde(skip_serializing_if = "Option::is_none")]
    baseline_state: Option<BaselineState>,
    #[serde(skip_serializing_if = "Option::is_none")]
    rests_on_version: Option<u32>,
}

impl<'a> FindingJson<'a> {
    pub(super) fn new(f: &'a Finding) -> Self {
        Self {
            rule: &f.rule,
            severity: f.severity,
            family: &f.family,
            message: super::log_text(&f.message),
            task_id: f.task_id.as_deref(),
            agent: f.agent.as_deref(),
            session_id: f.session_id.as_deref(),
            event_ids: &f.event_ids,
            locations: f
                .locations
                .iter()
                .map(|l| LocationJson {
                    file: &l.file,
                    line: l.line,
                    event_id: l.event_id.as_deref(),
                })
                .collect(),
            at: f.at.as_ref().map(fmt_instant),
            fingerprint: &f.fingerprint,
            timeline: f
                .timeline
                .iter()
                .map(|t| TimelineJson {
                    at: t.at.as_ref().map(fmt_instant),
                    event_id: &t.event_id,
                    event_type: &t.event_type,
                    task_id: t.task_id.as_deref(),
                    file: &t.file,
                    line: t.line,
                })
                .collect(),
            suppression: f.suppression.as_ref(),
            baseline_state: f.baseline_state,
            rests_on_version: f.rests_on_version,
        }
    }
}

#[derive(Serialize)]
struct LocationJson<'a> {
    file: &'a str,
    line: u64,
    event_id: Option<&'a str>,
}

#[derive(Serialize)]
struct TimelineJson<'a> {
    at: Option<String>,
    event_id: &'a str,
    #[serde(rename = "type")]
    event_type: &'a str,
    task_id: Option<&'a str>,
    file: &'a str,
    line: u64,
}
