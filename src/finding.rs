//! One finding: a rule violation with its places, timeline and severity,
//! as every renderer reads it, and the instants reports write.

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
    /// Set when the finding rests on a conflicting copy: it arises only when
    /// this version of the conflicting ids it cites is read instead of
    /// version 1 (docs/protocol.md, "A conflicting copy cannot hide
    /// evidence").
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rests_on_version: Option<u32>,
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

/// RFC 3339 with milliseconds and `Z`, the one format every report uses.
pub fn fmt_instant(t: &DateTime<Utc>) -> String {
    t.to_rfc3339_opts(SecondsFormat::Millis, true)
}

/// Optional instants in JSON as `fmt_instant` text (chrono's own serde
/// support would rebuild the whole Arrow stack with another feature).
pub(crate) mod instant {
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
