//! The audit report model every renderer reads: the inputs' accounting,
//! the span, the rules, the findings (held by `finding_store`) and the gate.
//! Below the steps that fill it (the inputs, the rules, the audit) as well
//! as the renderers beside it: it names none of them.

use crate::finding::{BaselineState, Finding, Severity, instant};
use crate::finding_store::{FindingKey, Findings};
use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
/// Metadata of one rule, from its SQL file header.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct RuleMeta {
    pub id: String,
    pub severity: Severity,
    pub family: String,
    /// The spec version whose semantics the rule checks (the header's
    /// `dialect`, a key of the reports): "any", "0.1" or "0.2".
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
    /// As read: "ndjson", "ndjson.gz", "ndjson.zst" or "parquet"; "skipped"
    /// for a path a walk passed over (`error` says why).
    pub format: String,
    pub bytes: u64,
    /// Non-blank lines (rows for Parquet) read.
    pub lines: u64,
    /// Distinct events (first occurrences of an (id, content) pair).
    pub events: u64,
    /// Later versions of an id already seen: the same id with other
    /// content (conflicting copies, `integrity.conflicting_duplicate`).
    #[serde(default, skip_serializing_if = "is_zero")]
    pub conflicting_copies: u64,
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
        self.lines == self.events + self.conflicting_copies + self.redeliveries + self.bad_lines
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
            t.conflicting_copies += i.conflicting_copies;
            t.redeliveries += i.redeliveries;
            t.bad_lines += i.bad_lines;
            t.bad_lines_unlisted += i.bad_lines_unlisted;
            t.blank_lines += i.blank_lines;
        }
        t
    }
}

/// Readings past the 16th version are not made: an id with more versions
/// is itself a critical finding (`integrity.conflicting_duplicate`).
pub const MAX_READING: u32 = 16;

/// The readings of later versions an audit made (docs/protocol.md, "A
/// conflicting copy cannot hide evidence").
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct ReadingsMade {
    /// Ids with more than one version.
    pub ids: u64,
    /// Readings made (of versions 2, 3, ...).
    pub readings: u32,
    /// Ids with more versions than the last reading reaches (the 16th,
    /// `MAX_READING`).
    pub past_the_last: u64,
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
    /// With `--since`/`--until`: the findings left out because none of
    /// the events they cite lies in the window.
    #[serde(default)]
    pub outside_window: Option<u64>,
    /// When the log holds conflicting ids: the readings of their later
    /// versions that were made.
    #[serde(default)]
    pub readings: Option<ReadingsMade>,
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
