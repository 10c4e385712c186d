//! Findings and the audit report model that every renderer reads.

use crate::findings::{FindingKey, Findings};
use chrono::{DateTime, SecondsFormat, Utc};
use serde::{Deserialize, Serialize};
use std::fmt;
use std::str::FromStr;

/// Rule severity, ordered from least to most severe so `>=` compares urgency.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Severity {
    Info,
    Low,
    Medium,
    High,
    Critical,
}

impl Severity {
    pub const ALL: [Severity; 5] = [
        Severity::Critical,
        Severity::High,
        Severity::Medium,
        Severity::Low,
        Severity::Info,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            Severity::Info => "info",
            Severity::Low => "low",
            Severity::Medium => "medium",
            Severity::High => "high",
            Severity::Critical => "critical",
        }
    }
}

impl fmt::Display for Severity {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl FromStr for Severity {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s.trim().to_ascii_lowercase().as_str() {
            "info" => Ok(Severity::Info),
            "low" => Ok(Severity::Low),
            "medium" => Ok(Severity::Medium),
            "high" => Ok(Severity::High),
            "critical" => Ok(Severity::Critical),
            other => Err(format!(
                "unknown severity '{other}'; use one of critical, high, medium, low, info"
            )),
        }
    }
}

/// Where an event (or a rejected line) came from: file and line, or file and
/// row for Parquet input.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Location {
    pub file: String,
    pub line: u64,
    /// The event at that place, when the place holds a parsed event.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub event_id: Option<String>,
}

/// One event of a finding's timeline excerpt.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct TimelineEntry {
    #[serde(with = "instant")]
    pub at: Option<DateTime<Utc>>,
    pub event_id: String,
    #[serde(rename = "type")]
    pub event_type: String,
    pub task_id: Option<String>,
    pub file: String,
    pub line: u64,
}

/// One rule violation with the evidence to act on it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Finding {
    pub rule: String,
    pub severity: Severity,
    pub family: String,
    pub message: String,
    pub task_id: Option<String>,
    /// The agent (`source`) of the offending event.
    pub agent: Option<String>,
    /// The session of the offending event, when it names one.
    #[serde(default)]
    pub session_id: Option<String>,
    pub event_ids: Vec<String>,
    pub locations: Vec<Location>,
    /// Instant of the earliest event of the finding (sort key and display).
    #[serde(with = "instant")]
    pub at: Option<DateTime<Utc>>,
    /// Stable identity of the finding across runs (rule + events), for SARIF
    /// partialFingerprints and for diffing reports.
    pub fingerprint: String,
    /// The events that make the case, in time order.
    pub timeline: Vec<TimelineEntry>,
    /// Set when an entry of the suppression file accepted the finding: it
    /// is shown but does not count for `--fail-on`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub suppression: Option<Suppression>,
    /// Against `--baseline`: new, or unchanged since the baseline report.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub baseline_state: Option<BaselineState>,
}

/// The suppression-file entry that accepted a finding.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Suppression {
    /// Number of the entry in the file (1 = the first `[[suppress]]`).
    pub entry: usize,
    pub reason: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub owner: Option<String>,
    /// The last day the entry applies (YYYY-MM-DD).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub expires: Option<String>,
}

/// A finding compared with a baseline report, as SARIF names the states.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum BaselineState {
    /// Not in the baseline.
    New,
    /// In the baseline and still found.
    Unchanged,
    /// In the baseline, no longer found (fixed).
    Absent,
}

impl BaselineState {
    pub fn as_str(self) -> &'static str {
        match self {
            BaselineState::New => "new",
            BaselineState::Unchanged => "unchanged",
            BaselineState::Absent => "absent",
        }
    }
}

impl Finding {
    /// The total order of findings in every report: severity (most severe
    /// first), rule, first instant, file, line, then fingerprint.
    pub fn sort_key(&self) -> impl Ord + '_ {
        let first = self.locations.first();
        (
            std::cmp::Reverse(self.severity),
            self.rule.as_str(),
            self.at,
            first.map(|l| l.file.as_str()),
            first.map(|l| l.line),
            self.fingerprint.as_str(),
        )
    }
}

/// Metadata of one rule, from its SQL file header.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct RuleMeta {
    pub id: String,
    pub severity: Severity,
    pub family: String,
    /// "any", "0.1" or "0.2".
    pub dialect: String,
    pub summary: String,
    pub spec: String,
    /// Longer explanation: condition, interpretation choices, an example.
    pub explain: String,
}

fn is_zero(n: &u64) -> bool {
    *n == 0
}

/// What one input contributed: the accounting identity per input.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct InputSummary {
    pub path: String,
    /// "ndjson", "ndjson.gz", "ndjson.zst" or "parquet".
    pub format: String,
    pub bytes: u64,
    /// Non-blank lines (rows for Parquet) read.
    pub lines: u64,
    /// Distinct events (first occurrences of an (id, content) pair).
    pub events: u64,
    /// Exact repeats of an event already seen, collapsed.
    pub redeliveries: u64,
    /// Lines rejected into bad_lines.
    pub bad_lines: u64,
    /// Of those, the ones past the first `--max-bad-lines` of the input:
    /// counted, not listed in bad_lines or the report.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub bad_lines_unlisted: u64,
    /// Whitespace-only lines, skipped (not part of the identity).
    pub blank_lines: u64,
    /// Set when the input could not be read to its end (e.g. a truncated
    /// compressed stream); everything before the break is kept.
    pub error: Option<String>,
}

impl InputSummary {
    pub fn identity_holds(&self) -> bool {
        self.lines == self.events + self.redeliveries + self.bad_lines
    }

    /// The sum of several inputs' figures, named "total".
    pub fn total(inputs: &[InputSummary]) -> InputSummary {
        let mut t = InputSummary {
            path: "total".into(),
            ..Default::default()
        };
        for i in inputs {
            t.bytes += i.bytes;
            t.lines += i.lines;
            t.events += i.events;
            t.redeliveries += i.redeliveries;
            t.bad_lines += i.bad_lines;
            t.bad_lines_unlisted += i.bad_lines_unlisted;
            t.blank_lines += i.blank_lines;
        }
        t
    }
}

/// The time span covered by the audited events.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Span {
    #[serde(with = "instant")]
    pub from: Option<DateTime<Utc>>,
    #[serde(with = "instant")]
    pub to: Option<DateTime<Utc>>,
}

/// Everything a renderer needs.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Report {
    pub tool: String,
    pub version: String,
    pub inputs: Vec<InputSummary>,
    pub span: Span,
    pub rules: Vec<RuleMeta>,
    /// Decision basis references (causation_id / evidence_chain entries)
    /// naming events that are not in the input.
    pub unresolved_basis: u64,
    /// Already sorted by `Finding::sort_key`.
    pub findings: Findings,
    /// Rules that failed to parse or run, with their error.
    pub rule_errors: Vec<(String, String)>,
    /// Events and findings over the span in equal buckets (about 60), for
    /// the report's chart; empty when the log has no timed events.
    #[serde(default)]
    pub timeline_buckets: Vec<TimeBucket>,
    /// The gate around the findings: what fails the run, suppressions,
    /// the baseline.
    #[serde(default)]
    pub gate: Gate,
}

/// What decides the exit code besides the findings themselves.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Gate {
    /// `--fail-on`: findings at or above it fail the run; None never fails.
    pub fail_on: Option<Severity>,
    /// `--fail-on-new`: only findings the baseline does not hold count.
    #[serde(default)]
    pub new_only: bool,
    #[serde(default)]
    pub suppressions: Option<SuppressionsUsed>,
    #[serde(default)]
    pub baseline: Option<BaselineUsed>,
}

/// The suppression file and what each of its entries did.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct SuppressionsUsed {
    pub file: String,
    pub entries: Vec<EntryUse>,
}

/// One suppression entry: what it matches and how many findings it took.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct EntryUse {
    /// Number of the entry in the file (1 = the first).
    pub entry: usize,
    /// What it matches, e.g. `rule token.* task t_9*` or `fingerprint 1f…`.
    pub matches: String,
    pub reason: String,
    pub owner: Option<String>,
    pub expires: Option<String>,
    /// Past its expiry date: it no longer suppresses anything.
    pub expired: bool,
    /// Findings it suppressed (0 and not expired: unused).
    pub suppressed: u64,
}

/// The baseline report and the findings it holds that are gone now.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct BaselineUsed {
    pub file: String,
    pub new: u64,
    pub unchanged: u64,
    /// Findings of the baseline not found any more, in its order.
    pub absent: Vec<Finding>,
}

/// One bucket of the events-over-time histogram: `[from, to)`, the last
/// bucket closed at the span's end.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct TimeBucket {
    #[serde(with = "instant")]
    pub from: Option<DateTime<Utc>>,
    #[serde(with = "instant")]
    pub to: Option<DateTime<Utc>>,
    /// Events (rows of `events`) whose created_at falls in the bucket.
    pub events: u64,
    /// Findings whose first event (`at`) falls in the bucket.
    pub findings: u64,
}

impl Report {
    pub fn totals(&self) -> InputSummary {
        InputSummary::total(&self.inputs)
    }

    /// Whether a finding counts for the gate: not suppressed, at or above
    /// `--fail-on`, and new when only new findings count.
    pub fn counts_for_gate(&self, key: &FindingKey<'_>) -> bool {
        !key.suppressed
            && self.gate.fail_on.is_some_and(|s| key.severity >= s)
            && (!self.gate.new_only || key.baseline == Some(BaselineState::New))
    }

    /// The findings that fail the run (see `counts_for_gate`).
    pub fn failing(&self) -> usize {
        self.findings
            .keys()
            .filter(|k| self.counts_for_gate(k))
            .count()
    }

    /// The baseline's findings that are gone (none without a baseline).
    pub fn absent(&self) -> &[Finding] {
        self.gate
            .baseline
            .as_ref()
            .map(|b| b.absent.as_slice())
            .unwrap_or_default()
    }

    /// Suppressed findings.
    pub fn suppressed(&self) -> usize {
        self.findings.keys().filter(|k| k.suppressed).count()
    }

    /// Whether the inputs held no event at all: nothing was audited.
    pub fn no_events(&self) -> bool {
        self.totals().events == 0
    }

    /// Count of findings per severity, most severe first (all five listed).
    pub fn counts_by_severity(&self) -> Vec<(Severity, usize)> {
        Severity::ALL
            .iter()
            .map(|s| {
                (
                    *s,
                    self.findings.keys().filter(|f| f.severity == *s).count(),
                )
            })
            .collect()
    }

    /// Count of findings per key, sorted by count descending then key.
    pub fn counts_by<F: for<'a> Fn(&FindingKey<'a>) -> Option<&'a str>>(
        &self,
        key: F,
    ) -> Vec<(String, usize)> {
        let mut map = std::collections::BTreeMap::<&str, usize>::new();
        for f in self.findings.keys() {
            if let Some(k) = key(&f) {
                *map.entry(k).or_default() += 1;
            }
        }
        let mut v: Vec<(String, usize)> =
            map.into_iter().map(|(k, n)| (k.to_string(), n)).collect();
        v.sort_by(|a, b| b.1.cmp(&a.1).then_with(|| a.0.cmp(&b.0)));
        v
    }
}

/// RFC 3339 with milliseconds and `Z`, the one format every report uses.
pub fn fmt_instant(t: &DateTime<Utc>) -> String {
    t.to_rfc3339_opts(SecondsFormat::Millis, true)
}

/// Optional instants in JSON as `fmt_instant` text (chrono's own serde
/// support would rebuild the whole Arrow stack with another feature).
mod instant {
    use chrono::{DateTime, Utc};
    use serde::{Deserialize, Deserializer, Serializer};

    pub fn serialize<S: Serializer>(t: &Option<DateTime<Utc>>, s: S) -> Result<S::Ok, S::Error> {
        match t {
            Some(t) => s.serialize_str(&super::fmt_instant(t)),
            None => s.serialize_none(),
        }
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Option<DateTime<Utc>>, D::Error> {
        let text: Option<String> = Option::deserialize(d)?;
        text.map(|t| {
            DateTime::parse_from_rfc3339(&t)
                .map(|t| t.with_timezone(&Utc))
                .map_err(serde::de::Error::custom)
        })
        .transpose()
    }
}
