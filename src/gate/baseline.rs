//! Baselines: an earlier `--format json` report, against which each finding
//! is new or unchanged, and the earlier findings not found again absent.
//! Findings are matched by fingerprint, which does not depend on where the
//! log was read from; several findings with one fingerprint (identical
//! rejected lines, say) are matched one for one.

use crate::finding::{BaselineState, Finding};
use crate::ingest::inputs::shown_path;
use serde::Deserialize;
use std::collections::HashMap;
use std::path::Path;

/// The findings of an earlier report.
pub struct Baseline {
    /// The file as reports show it.
    pub file: String,
    pub findings: Vec<Finding>,
}

#[derive(Deserialize)]
struct JsonReport {
    tool: Option<String>,
    /// Absent in reports written before fingerprints had a version.
    fingerprint_version: Option<u32>,
    findings: Vec<Finding>,
}

impl Baseline {
    pub fn load(path: &Path) -> anyhow::Result<Baseline> {
        let shown = shown_path(path);
        let file = crate::operator_files::open_regular(path)
            .map_err(|e| anyhow::anyhow!("cannot read the baseline {shown}: {e}"))?;
        let report: JsonReport =
            serde_json::from_reader(std::io::BufReader::new(file)).map_err(|e| {
                anyhow::anyhow!(
                    "the baseline {shown} is not an hvaudit JSON report ({e}); \
                     write one with `hvaudit audit ... --format json -o FILE`"
                )
            })?;
        if report.tool.as_deref() != Some("hvaudit") {
            anyhow::bail!(
                "the baseline {shown} is not an hvaudit JSON report (its `tool` is not \"hvaudit\")"
            );
        }
        let current = crate::finding_store::FINGERPRINT_VERSION;
        if report.fingerprint_version != Some(current) {
            let written = match report.fingerprint_version {
                Some(v) => format!("version {v}"),
                None => "an earlier version".to_string(),
            };
            anyhow::bail!(
                "the baseline {shown} holds fingerprints of {written}, and this hvaudit makes \
                 them another way (version {current}: from what the cited events say, not their \
                 ids), so no finding would match; rebuild it from the same logs: \
                 `hvaudit audit LOGS --format json -o {shown}` (review the findings it holds again)"
            );
        }
        Ok(Baseline {
            file: shown,
            findings: report.findings,
        })
    }
}

/// The state of each of `now` (in order) against `before`, and the indices
/// of `before` that nothing matched, in order.
pub fn classify<'a>(
    before: impl IntoIterator<Item = &'a str>,
    now: impl IntoIterator<Item = &'a str>,
) -> (Vec<BaselineState>, Vec<usize>) {
    let mut waiting: HashMap<&str, Vec<usize>> = HashMap::new();
    let mut count = 0;
    for (i, fp) in before.into_iter().enumerate() {
        waiting.entry(fp).or_default().push(i);
        count = i + 1;
    }
    // Matched in order: the first earlier finding of a fingerprint first.
    for list in waiting.values_mut() {
        list.reverse();
    }
    let mut matched = vec![false; count];
    let states = now
        .into_iter()
        .map(|fp| match waiting.get_mut(fp).and_then(Vec::pop) {
            Some(i) => {
                matched[i] = true;
                BaselineState::Unchanged
            }
            None => BaselineState::New,
        })
        .collect();
    let absent = (0..count).filter(|i| !matched[*i]).collect();
    (states, absent)
}

#[cfg(test)]
mod tests {
    use super::*;
    use BaselineState::{New, Unchanged};

    #[test]
    fn findings_are_matched_one_for_one_by_fingerprint() {
        let (states, absent) = classify(["a", "b", "b", "c"], ["b", "d", "a", "b", "b"]);
        assert_eq!(states, [Unchanged, New, Unchanged, Unchanged, New]);
        assert_eq!(absent, [3], "c is gone");
        let (states, absent) = classify([], ["x"]);
        assert_eq!((states, absent), (vec![New], vec![]));
    }
}
