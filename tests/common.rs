//! Helpers shared by the integration tests.

use hvaudit::Report;
use hvaudit::audit::{Audit, AuditConfig};

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
    Audit::new(cfg.clone()).run().expect("audit runs")
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

/// A generated log with planted violations of every rule.
pub fn synth_log(seed: u64, bytes: u64, redelivery_rate: f64) -> Vec<u8> {
    let opts = hvaudit_synth::SynthOptions {
        seed,
        target_bytes: bytes,
        violations: true,
        redelivery_rate,
        ..Default::default()
    };
    let mut log = Vec::new();
    hvaudit_synth::generate(&opts, &mut log, &mut std::io::sink()).unwrap();
    log
}

/// `hvaudit sql -q --format csv -e QUERY [EXTRA...] PATH`, which must
/// succeed within a few minutes; its stdout.
pub fn sql_csv(query: &str, extra: &[&str], path: &std::path::Path) -> String {
    let output = assert_cmd::Command::cargo_bin("hvaudit")
        .unwrap()
        .timeout(std::time::Duration::from_secs(300))
        .args(["sql", "-q", "--format", "csv", "-e", query])
        .args(extra)
        .arg(path)
        .output()
        .unwrap();
    assert!(output.status.success(), "{output:?}");
    String::from_utf8(output.stdout).unwrap()
}

/// Make a FIFO at `path` (in a temp dir of the test's own).
pub fn mkfifo(path: &std::path::Path) {
    let made = std::process::Command::new("mkfifo").arg(path).status();
    assert!(made.is_ok_and(|s| s.success()), "mkfifo {path:?}");
}

/// Make a character device node at `path` (in a temp dir of the test's
/// own, never the system's /dev); false when not allowed (not root).
pub fn mknod_char(path: &std::path::Path, major: u32, minor: u32) -> bool {
    std::process::Command::new("mknod")
        .arg(path)
        .args(["c", &major.to_string(), &minor.to_string()])
        .status()
        .is_ok_and(|s| s.success())
}

/// The reasons `sarif` breaks the OASIS SARIF 2.1.0 schema (none: valid).
pub fn sarif_schema_errors(sarif: &serde_json::Value) -> Vec<String> {
    let schema: serde_json::Value =
        serde_json::from_str(include_str!("fixtures/sarif-schema-2.1.0.json")).unwrap();
    let validator = jsonschema::options()
        .should_validate_formats(true)
        .build(&schema)
        .expect("schema compiles");
    validator
        .iter_errors(sarif)
        .map(|e| format!("{e} at {}", e.instance_path()))
        .collect()
}
