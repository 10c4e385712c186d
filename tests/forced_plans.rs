//! The rule set gives the report of the default plan also under the plans
//! that big inputs get: sort-merge joins instead of hash joins, joins
//! repartitioned instead of broadcast, several partitions per query, small
//! batches. A small log never makes the planner choose them by itself; the
//! settings (`HVAUDIT_SESSION_SETTINGS`) force them, on a loaded log and in
//! place here, on a cluster in cluster.rs.

use crate::common::{hvaudit, synth_log};
use hvaudit::engine::SETTINGS_VAR;
use std::ffi::OsStr;
use std::path::Path;

/// Session settings that force the big-data plans, each set a different mix.
pub const FORCED: [&str; 2] = [
    // Every join sorted and merged (as on a Ballista cluster once a side is
    // too big to broadcast), three partitions, batches of 64 rows.
    "datafusion.optimizer.prefer_hash_join=false,\
     datafusion.optimizer.hash_join_single_partition_threshold=0,\
     datafusion.optimizer.hash_join_single_partition_threshold_rows=0,\
     datafusion.execution.target_partitions=3,\
     datafusion.execution.batch_size=64",
    // Hash joins on repartitioned sides, five partitions, batches of 32 rows.
    "datafusion.optimizer.hash_join_single_partition_threshold=0,\
     datafusion.optimizer.hash_join_single_partition_threshold_rows=0,\
     datafusion.execution.target_partitions=5,\
     datafusion.execution.batch_size=32",
];

/// Batches of a few rows, on the local engine only: on a cluster they trip a
/// debug assertion of Ballista 55's shuffle writer (a union's batches keep
/// the nullability of the branch they come from), docs/cluster.md.
const TINY_BATCHES: &str = "datafusion.optimizer.prefer_hash_join=false,\
     datafusion.execution.target_partitions=4,\
     datafusion.execution.batch_size=7";

/// `hvaudit audit -q --format json ARGS` under `settings` (none: the default
/// plans); its report, which must be complete (exit 0 or 1, not 2).
pub fn audit_json(args: &[&OsStr], settings: Option<&str>) -> String {
    let mut cmd = hvaudit();
    cmd.args(["audit", "-q", "--format", "json"]).args(args);
    match settings {
        Some(s) => cmd.env(SETTINGS_VAR, s),
        None => cmd.env_remove(SETTINGS_VAR),
    };
    let output = cmd.output().unwrap();
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        matches!(output.status.code(), Some(0 | 1)),
        "under {settings:?}: {:?}\n{stderr}",
        output.status
    );
    let json = String::from_utf8(output.stdout).unwrap();
    let report: serde_json::Value = serde_json::from_str(&json).unwrap();
    let findings = report["findings"].as_array().map_or(0, Vec::len);
    assert!(
        findings > 30,
        "under {settings:?}: only {findings} findings"
    );
    json
}

/// Every forced set gives the default plan's report, byte for byte.
fn assert_plans_agree(args: &[&OsStr]) {
    let default = audit_json(args, None);
    for settings in FORCED.into_iter().chain([TINY_BATCHES]) {
        let forced = audit_json(args, Some(settings));
        assert!(
            forced == default,
            "under {settings}: the report differs from the default plan's"
        );
    }
}

/// A generated log of about `size` bytes with rejected lines, as NDJSON and
/// as `convert`'s Parquet.
pub fn log_and_parquet(
    dir: &Path,
    seed: u64,
    size: u64,
) -> (std::path::PathBuf, std::path::PathBuf) {
    let log = dir.join("log.ndjson");
    let mut bytes = synth_log(seed, size, 0.02);
    bytes.extend_from_slice(b"not json at all\n{\"id\": 5}\n");
    std::fs::write(&log, bytes).unwrap();
    let out = dir.join("parquet");
    hvaudit()
        .args(["convert", "-q", "-o"])
        .arg(&out)
        .arg(&log)
        .assert()
        .success();
    (log, out)
}

#[test]
fn forced_plans_give_the_default_report_on_a_loaded_log() {
    let dir = tempfile::tempdir().unwrap();
    let (log, _) = log_and_parquet(dir.path(), 21, 150_000);
    assert_plans_agree(&[log.as_os_str()]);
}

#[test]
fn forced_plans_give_the_default_report_in_place() {
    let dir = tempfile::tempdir().unwrap();
    let (_, parquet) = log_and_parquet(dir.path(), 22, 150_000);
    assert_plans_agree(&[OsStr::new("--in-place"), parquet.as_os_str()]);
}

#[test]
fn a_bad_session_setting_exits_2_naming_the_variable() {
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("log.ndjson");
    std::fs::write(&log, synth_log(23, 5_000, 0.0)).unwrap();
    let output = hvaudit()
        .args(["audit", "-q"])
        .arg(&log)
        .env(SETTINGS_VAR, "datafusion.execution.no_such_setting=1")
        .output()
        .unwrap();
    assert_eq!(output.status.code(), Some(2), "{output:?}");
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(stderr.contains(SETTINGS_VAR), "{stderr}");
}
