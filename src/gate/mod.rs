//! The nightly gate around an audit's findings: which of them are
//! suppressed (reviewed and accepted), which are new against a baseline
//! report, and which fail the run.

pub mod baseline;
pub mod suppressions;

use crate::finding::{BaselineState, Severity};
use crate::finding_store::Mark;
use crate::report::model::{BaselineUsed, Report, SuppressionsUsed};
use baseline::Baseline;
use chrono::NaiveDate;
use suppressions::Suppressions;

/// What the gate is given.
#[derive(Default)]
pub struct GateOptions {
    /// `--fail-on`; None: findings never fail the run.
    pub fail_on: Option<Severity>,
    /// `--fail-on-new`: fail only on new findings at or above it.
    pub fail_on_new: Option<Severity>,
    pub suppressions: Option<Suppressions>,
    pub baseline: Option<Baseline>,
    /// The day expiry dates are compared with (today, in UTC).
    pub today: Option<NaiveDate>,
}

/// Mark each finding of `report` (suppressed, new, unchanged) and record
/// the gate's settings, the suppression entries' use and the absent
/// findings in `report.gate`.
pub fn apply(report: &mut Report, opts: GateOptions) {
    let today = opts
        .today
        .unwrap_or_else(|| chrono::Utc::now().date_naive());
    report.gate.fail_on = opts.fail_on_new.or(opts.fail_on);
    report.gate.new_only = opts.fail_on_new.is_some();
    if opts.suppressions.is_none() && opts.baseline.is_none() {
        return;
    }
    let n = report.findings.len();
    let mut marks = vec![Mark::default(); n];
    let mut fingerprints = Vec::with_capacity(n);
    let entries = opts
        .suppressions
        .as_ref()
        .map(|s| s.entries.as_slice())
        .unwrap_or_default();
    let mut used = vec![0u64; entries.len()];
    for (mark, f) in marks.iter_mut().zip(report.findings.iter()) {
        // The first entry in the file that matches and has not expired.
        if let Some(i) = opts
            .suppressions
            .as_ref()
            .and_then(|s| s.first_match(&f, today))
        {
            used[i] += 1;
            mark.suppression = Some(entries[i].note().clone());
        }
        if opts.baseline.is_some() {
            fingerprints.push(f.fingerprint.clone());
        }
    }
    if let Some(s) = &opts.suppressions {
        report.gate.suppressions = Some(SuppressionsUsed {
            file: s.file.clone(),
            entries: entries
                .iter()
                .zip(&used)
                .map(|(e, n)| e.used(today, *n))
                .collect(),
        });
    }
    if let Some(b) = opts.baseline {
        let (states, absent) = baseline::classify(
            b.findings.iter().map(|f| f.fingerprint.as_str()),
            fingerprints.iter().map(String::as_str),
        );
        let count = |s: BaselineState| states.iter().filter(|x| **x == s).count() as u64;
        let (new, unchanged) = (count(BaselineState::New), count(BaselineState::Unchanged));
        for (mark, state) in marks.iter_mut().zip(states) {
            mark.baseline = Some(state);
        }
        let mut gone = vec![false; b.findings.len()];
        for i in absent {
            gone[i] = true;
        }
        let absent_findings = b
            .findings
            .into_iter()
            .zip(gone)
            .filter(|(_, gone)| *gone)
            .map(|(mut f, _)| {
                f.baseline_state = Some(BaselineState::Absent);
                f.suppression = None;
                f
            })
            .collect();
        report.gate.baseline = Some(BaselineUsed {
            file: b.file,
            new,
            unchanged,
            absent: absent_findings,
        });
    }
    report.findings = report.findings.with_marks(marks);
}

/// Entries of the suppression file that expired, and those that matched
/// nothing (and have not expired).
pub fn stale_entries(
    report: &Report,
) -> (
    Vec<&crate::report::model::EntryUse>,
    Vec<&crate::report::model::EntryUse>,
) {
    let Some(s) = &report.gate.suppressions else {
        return (Vec::new(), Vec::new());
    };
    let expired = s.entries.iter().filter(|e| e.expired).collect();
    let unused = s
        .entries
        .iter()
        .filter(|e| !e.expired && e.suppressed == 0)
        .collect();
    (expired, unused)
}
