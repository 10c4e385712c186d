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
use std::collections::HashMap;
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
    /// The entries that can match a finding, found without trying them all:
    /// a file of thousands of entries meets a report of many findings.
    index: Index,
}

/// Entry numbers (positions in `entries`, in file order) by what a finding
/// must carry for them to match.
#[derive(Debug, Clone, Default)]
struct Index {
    /// Entries that name a fingerprint: only that finding can match them.
    by_fingerprint: HashMap<String, Vec<usize>>,
    /// Entries without a fingerprint whose rule pattern is a plain id.
    by_rule: HashMap<String, Vec<usize>>,
    /// The rest (a rule glob): tried on every finding.
    any: Vec<usize>,
}

impl Index {
    fn new(entries: &[Entry]) -> Index {
        let mut index = Index::default();
        for (i, e) in entries.iter().enumerate() {
            let plain_rule = e
                .rule
                .as_ref()
                .map(|p| p.as_str())
                .filter(|r| !r.contains(['*', '?', '[', ']']));
            match (&e.fingerprint, plain_rule) {
                (Some(fp), _) => index.by_fingerprint.entry(fp.clone()).or_default().push(i),
                (None, Some(rule)) => index.by_rule.entry(rule.to_string()).or_default().push(i),
                (None, None) => index.any.push(i),
            }
        }
        index
    }
}

impl Suppressions {
    pub fn load(path: &Path) -> anyhow::Result<Suppressions> {
        let shown = shown_path(path);
        let text = crate::operator_files::read_text(path, crate::operator_files::TEXT_LIMIT)
            .map_err(|e| {
                anyhow::anyhow!(
                    "cannot read the suppression file {shown}: {e}; check --suppressions"
                )
            })?;
        Suppressions::parse(&shown, &text)
    }

    pub fn parse(shown: &str, text: &str) -> anyhow::Result<Suppressions> {
        let file: File = toml::from_str(text).map_err(|e| {
            // The parser quotes the offending line: its controls must not
            // reach the operator's terminal.
            let e = crate::escape::visible_lines(&e.to_string());
            anyhow::anyhow!("suppression file {shown}: {e}")
        })?;
        let entries = file
            .suppress
            .into_iter()
            .enumerate()
            .map(|(i, raw)| Entry::new(i + 1, raw))
            .collect::<Result<Vec<_>, String>>()
            .map_err(|e| anyhow::anyhow!("suppression file {shown}: {e}"))?;
        Ok(Suppressions {
            file: shown.to_string(),
            index: Index::new(&entries),
            entries,
        })
    }

    /// The position of the first entry in the file that matches `f` and
    /// has not expired on `today`.
    pub fn first_match(&self, f: &Finding, today: NaiveDate) -> Option<usize> {
        let none = Vec::new();
        let mut candidates: Vec<usize> = [
            self.index
                .by_fingerprint
                .get(&f.fingerprint)
                .unwrap_or(&none),
            self.index.by_rule.get(&f.rule).unwrap_or(&none),
            &self.index.any,
        ]
        .into_iter()
        .flatten()
        .copied()
        .collect();
        candidates.sort_unstable();
        candidates.into_iter().find(|&i| {
            let e = &self.entries[i];
            !e.expired(today) && e.matches(f)
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
        // The quoted line of a TOML error shows its controls escaped.
        let quoted = bad("[[suppress]]\nrule = \"a\" \u{1b}]0;pwned\u{7}\nreason = \"r\"\n");
        assert!(!quoted.contains('\u{1b}'), "{quoted:?}");
        assert!(quoted.contains("\\x1b]0;pwned\\x07"), "{quoted:?}");
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

    fn finding(rule: &str, fingerprint: &str, agent: &str) -> Finding {
        Finding {
            rule: rule.into(),
            severity: crate::finding::Severity::High,
            family: "token".into(),
            message: String::new(),
            task_id: None,
            agent: Some(agent.into()),
            session_id: None,
            event_ids: Vec::new(),
            locations: Vec::new(),
            at: None,
            fingerprint: fingerprint.into(),
            timeline: Vec::new(),
            suppression: None,
            baseline_state: None,
            rests_on_version: None,
        }
    }

    /// The index finds what trying every entry in file order finds: the
    /// first entry that matches, whatever kind of entry it is.
    #[test]
    fn the_index_finds_the_first_matching_entry_in_file_order() {
        let fp = "5d1c0f00000000000000000000000000";
        let s = Suppressions::parse(
            "s.toml",
            &format!(
                "[[suppress]]\nrule = \"token.*\"\nagent = \"agent:legacy\"\nreason = \"glob\"\n\
                 [[suppress]]\nrule = \"token.replayed\"\nagent = \"agent:b\"\nreason = \"plain\"\n\
                 [[suppress]]\nfingerprint = \"{}\"\nreason = \"fp\"\n\
                 [[suppress]]\nrule = \"token.replayed\"\nreason = \"plain, any agent\"\n\
                 [[suppress]]\nfingerprint = \"{fp}\"\nreason = \"expired\"\nexpires = 2020-01-01\n",
                fp.to_uppercase()
            ),
        )
        .unwrap();
        let today = NaiveDate::from_ymd_opt(2026, 1, 1).unwrap();
        let first =
            |rule: &str, fp: &str, agent: &str| s.first_match(&finding(rule, fp, agent), today);
        let other = "00000000000000000000000000000001";
        assert_eq!(first("token.replayed", fp, "agent:legacy"), Some(0));
        assert_eq!(first("token.replayed", other, "agent:b"), Some(1));
        assert_eq!(first("token.replayed", fp, "agent:c"), Some(2));
        assert_eq!(first("token.expired", fp, "agent:c"), Some(2));
        assert_eq!(first("token.replayed", other, "agent:c"), Some(3));
        assert_eq!(first("token.expired", other, "agent:c"), None);
        assert_eq!(first("orphan.child", other, "agent:legacy"), None);
        // Every finding, against the plain scan the index replaces.
        for rule in ["token.replayed", "token.expired", "orphan.child"] {
            for f in [fp, other] {
                for agent in ["agent:legacy", "agent:b", "agent:c"] {
                    let scan = s
                        .entries
                        .iter()
                        .position(|e| !e.expired(today) && e.matches(&finding(rule, f, agent)));
                    assert_eq!(first(rule, f, agent), scan, "{rule} {f} {agent}");
                }
            }
        }
    }
}
