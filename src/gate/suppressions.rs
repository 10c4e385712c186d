//! The suppression file: reviewed findings that no longer fail the gate.
//!
//! ```toml
//! [[suppress]]
//! fingerprint = "5d1c0f…"          # one finding, wherever its log is read from
//! reason = "replay test traffic"   # required
//! owner = "payments-team"          # optional
//! expires = 2027-03-31             # optional: the last day it applies
//!
//! [[suppress]]
//! rule = "token.*"                 # globs on the rule id, task, agent, session
//! agent = "agent:legacy-*"
//! reason = "legacy agents reuse tokens until their migration"
//! ```

use crate::finding::{Finding, Suppression};
use crate::ingest::inputs::shown_path;
use crate::report::model::EntryUse;
use chrono::NaiveDate;
use serde::Deserialize;
use std::path::Path;
use std::sync::Arc;

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct File {
    #[serde(default)]
    suppress: Vec<RawEntry>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawEntry {
    fingerprint: Option<String>,
    rule: Option<String>,
    task: Option<String>,
    agent: Option<String>,
    session: Option<String>,
    reason: Option<String>,
    owner: Option<String>,
    expires: Option<toml::Value>,
}

/// One entry, checked: what it matches and what it says.
#[derive(Debug, Clone)]
pub struct Entry {
    number: usize,
    fingerprint: Option<String>,
    rule: Option<glob::Pattern>,
    task: Option<glob::Pattern>,
    agent: Option<glob::Pattern>,
    session: Option<glob::Pattern>,
    note: Arc<Suppression>,
    expires: Option<NaiveDate>,
}

/// A suppression file, read and checked.
#[derive(Debug, Clone)]
pub struct Suppressions {
    /// The file as reports show it.
    pub file: String,
    pub entries: Vec<Entry>,
}

impl Suppressions {
    pub fn load(path: &Path) -> anyhow::Result<Suppressions> {
        let shown = shown_path(path);
        let text = std::fs::read_to_string(path).map_err(|e| {
            anyhow::anyhow!("cannot read the suppression file {shown}: {e}; check --suppressions")
        })?;
        Suppressions::parse(&shown, &text)
    }

    pub fn parse(shown: &str, text: &str) -> anyhow::Result<Suppressions> {
        let file: File =
            toml::from_str(text).map_err(|e| anyhow::anyhow!("suppression file {shown}: {e}"))?;
        let entries = file
            .suppress
            .into_iter()
            .enumerate()
            .map(|(i, raw)| Entry::new(i + 1, raw))
            .collect::<Result<_, String>>()
            .map_err(|e| anyhow::anyhow!("suppression file {shown}: {e}"))?;
        Ok(Suppressions {
            file: shown.to_string(),
            entries,
        })
    }
}

impl Entry {
    fn new(number: usize, raw: RawEntry) -> Result<Entry, String> {
        let at = format!("entry {number}");
        let pattern = |what: &str, p: &Option<String>| {
            p.as_deref()
                .map(|p| {
                    glob::Pattern::new(p)
                        .map_err(|e| format!("{at}: bad {what} pattern {p:?}: {e}"))
                })
                .transpose()
        };
        let reason = raw
            .reason
            .filter(|r| !r.trim().is_empty())
            .ok_or_else(|| format!("{at}: `reason` is required (why the finding is accepted)"))?;
        if raw.fingerprint.is_none() && raw.rule.is_none() {
            return Err(format!(
                "{at}: give a `fingerprint`, or a `rule` pattern (with `task`, `agent` or `session` to narrow it)"
            ));
        }
        if let Some(f) = &raw.fingerprint
            && !(f.len() == 32 && f.bytes().all(|b| b.is_ascii_hexdigit()))
        {
            return Err(format!(
                "{at}: fingerprint {f:?} is not the 32 hex digits a report shows"
            ));
        }
        let expires = raw
            .expires
            .map(|v| expiry(&v))
            .transpose()
            .map_err(|e| format!("{at}: {e}"))?;
        Ok(Entry {
            number,
            fingerprint: raw.fingerprint.map(|f| f.to_ascii_lowercase()),
            rule: pattern("rule", &raw.rule)?,
            task: pattern("task", &raw.task)?,
            agent: pattern("agent", &raw.agent)?,
            session: pattern("session", &raw.session)?,
            note: Arc::new(Suppression {
                entry: number,
                reason,
                owner: raw.owner,
                expires: expires.map(|d| d.to_string()),
            }),
            expires,
        })
    }

    pub fn note(&self) -> &Arc<Suppression> {
        &self.note
    }

    /// Whether the entry no longer applies on `today`.
    pub fn expired(&self, today: NaiveDate) -> bool {
        self.expires.is_some_and(|last| today > last)
    }

    /// Whether every part the entry gives matches the finding.
    pub fn matches(&self, f: &Finding) -> bool {
        let glob = |p: &Option<glob::Pattern>, v: Option<&str>| {
            p.as_ref().is_none_or(|p| v.is_some_and(|v| p.matches(v)))
        };
        self.fingerprint
            .as_deref()
            .is_none_or(|fp| fp == f.fingerprint)
            && glob(&self.rule, Some(&f.rule))
            && glob(&self.task, f.task_id.as_deref())
            && glob(&self.agent, f.agent.as_deref())
            && glob(&self.session, f.session_id.as_deref())
    }

    /// What the entry matches, for reports: `rule token.* agent a*`.
    pub fn describe(&self) -> String {
        let parts = [
            ("fingerprint", self.fingerprint.clone()),
            ("rule", self.rule.as_ref().map(|p| p.as_str().to_string())),
            ("task", self.task.as_ref().map(|p| p.as_str().to_string())),
            ("agent", self.agent.as_ref().map(|p| p.as_str().to_string())),
            (
                "session",
                self.session.as_ref().map(|p| p.as_str().to_string()),
            ),
        ];
        parts
            .into_iter()
            .filter_map(|(k, v)| v.map(|v| format!("{k} {v}")))
            .collect::<Vec<_>>()
            .join(" ")
    }

    /// The entry's line in a report, with what it did.
    pub fn used(&self, today: NaiveDate, suppressed: u64) -> EntryUse {
        EntryUse {
            entry: self.number,
            matches: self.describe(),
            reason: self.note.reason.clone(),
            owner: self.note.owner.clone(),
            expires: self.note.expires.clone(),
            expired: self.expired(today),
            suppressed,
        }
    }
}

/// `expires`: a TOML date (2027-03-31) or the same as a string.
fn expiry(v: &toml::Value) -> Result<NaiveDate, String> {
    let text = match v {
        toml::Value::String(s) => s.clone(),
        toml::Value::Datetime(d) => d.to_string(),
        other => return Err(format!("expires {other} is not a date (YYYY-MM-DD)")),
    };
    NaiveDate::parse_from_str(text.trim(), "%Y-%m-%d")
        .map_err(|_| format!("expires {text:?} is not a date (YYYY-MM-DD)"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_entry_needs_a_reason_and_something_to_match() {
        let bad = |text: &str| Suppressions::parse("s.toml", text).unwrap_err().to_string();
        assert!(bad("[[suppress]]\nrule = \"a.*\"\n").contains("`reason` is required"));
        assert!(bad("[[suppress]]\nreason = \"r\"\n").contains("give a `fingerprint`"));
        assert!(bad("[[suppress]]\nfingerprint = \"abc\"\nreason = \"r\"\n").contains("32 hex"));
        assert!(
            bad("[[suppress]]\nrule = \"a\"\nreason = \"r\"\nexpires = \"soon\"\n")
                .contains("not a date")
        );
        assert!(bad("[[suppress]]\nrul = \"a\"\nreason = \"r\"\n").contains("unknown field"));
        let ok = Suppressions::parse(
            "s.toml",
            "[[suppress]]\nrule = \"a.*\"\nreason = \"r\"\nexpires = 2027-03-31\n\
             [[suppress]]\nrule = \"b\"\nreason = \"r\"\nexpires = \"2020-01-01\"\n",
        )
        .unwrap();
        let today = NaiveDate::from_ymd_opt(2027, 3, 31).unwrap();
        assert!(!ok.entries[0].expired(today), "the last day still applies");
        assert!(ok.entries[0].expired(today.succ_opt().unwrap()));
        assert!(ok.entries[1].expired(today));
    }
}
