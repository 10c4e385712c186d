//! Helpers shared by the integration tests.

use hvaudit::Report;
use hvaudit::audit::{AuditConfig, run_audit};

/// Write `lines` as one NDJSON file and audit it with the config tweaked.
pub fn audit_lines(lines: &[String], tweak: impl FnOnce(&mut AuditConfig)) -> Report {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("log.ndjson");
    std::fs::write(&path, lines.join("\n") + "\n").expect("write log");
    let mut cfg = AuditConfig {
        inputs: vec![path],
        ..Default::default()
    };
    tweak(&mut cfg);
    run_audit(&cfg).expect("audit runs")
}

/// The findings of one rule, as (task_id, event_ids).
pub fn findings_of(report: &Report, rule: &str) -> Vec<(Option<String>, Vec<String>)> {
    report
        .findings
        .iter()
        .filter(|f| f.rule == rule)
        .map(|f| (f.task_id.clone(), f.event_ids.clone()))
        .collect()
}
