//! The binary's whole output, as snapshots (insta), in datafusion-cli's
//! style: success, exit code, stdout and stderr of one run. A real audit
//! of `samples/incident` in text and JSON, and the main error paths:
//! an unreadable file, a bad option, no logs, a rule that fails, a bad
//! configuration key. Filters put names in place of what depends on the
//! machine (temp dirs, the version).

use crate::common::{hvaudit, hvaudit_bound_by_modes, hvaudit_reading_config};
use std::path::Path;
use std::process::Output;

/// A run as the snapshots show it.
fn shown(out: &Output) -> String {
    format!(
        "success: {}\nexit_code: {}\n----- stdout -----\n{}\n----- stderr -----\n{}",
        out.status.success(),
        out.status
            .code()
            .map_or_else(|| "none".to_string(), |c| c.to_string()),
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr),
    )
}

/// Snapshot `out` of the command line `command` as `name`, with `dir` (a
/// test's temp dir) shown as `[TEMP]` and the crate's version as
/// `[VERSION]`.
fn assert_run(name: &str, command: &str, out: &Output, dir: Option<&Path>) {
    let mut settings = insta::Settings::clone_current();
    settings.set_description(command);
    if let Some(dir) = dir {
        settings.add_filter(&regex_escape(&dir.display().to_string()), "[TEMP]");
    }
    let version = regex_escape(env!("CARGO_PKG_VERSION"));
    settings.add_filter(&format!("hvaudit {version}"), "hvaudit [VERSION]");
    settings.add_filter(
        &format!(r#""version": "{version}""#),
        r#""version": "[VERSION]""#,
    );
    settings.bind(|| insta::assert_snapshot!(name, shown(out)));
}

fn regex_escape(text: &str) -> String {
    text.chars()
        .flat_map(|c| {
            let special = "\\.+*?()|[]{}^$#&-~".contains(c);
            special.then_some('\\').into_iter().chain([c])
        })
        .collect()
}

/// `hvaudit ARGS`, from the repository's root (so that the sample's paths
/// are the same relative ones on every machine).
fn run_at_root(args: &[&str]) -> Output {
    hvaudit()
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .args(args)
        .output()
        .unwrap()
}

#[test]
fn the_incident_sample_audited_as_text() {
    let out = run_at_root(&["audit", "samples/incident"]);
    assert_run(
        "audit_incident_text",
        "hvaudit audit samples/incident",
        &out,
        None,
    );
}

#[test]
fn the_incident_sample_audited_as_json() {
    let out = run_at_root(&["audit", "-q", "--format", "json", "samples/incident"]);
    let command = "hvaudit audit -q --format json samples/incident";
    assert_run("audit_incident_json", command, &out, None);
}

#[test]
fn an_unreadable_file_is_an_input_error() {
    use std::os::unix::fs::PermissionsExt;
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("locked.ndjson");
    std::fs::copy(
        Path::new(env!("CARGO_MANIFEST_DIR")).join("samples/incident/aep-0.1.ndjson"),
        &log,
    )
    .unwrap();
    std::fs::set_permissions(&log, std::fs::Permissions::from_mode(0o000)).unwrap();
    let out = hvaudit_bound_by_modes()
        .args(["audit", "-q"])
        .arg(&log)
        .output()
        .unwrap();
    let command = "hvaudit audit -q [TEMP]/locked.ndjson (mode 000)";
    assert_run("error_unreadable_file", command, &out, Some(dir.path()));
}

#[test]
fn a_bad_option_value_is_a_usage_error() {
    let out = run_at_root(&["audit", "--fail-on", "severe", "samples/incident"]);
    let command = "hvaudit audit --fail-on severe samples/incident";
    assert_run("error_bad_option", command, &out, None);
}

#[test]
fn a_directory_without_logs_is_an_input_error() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("NOTES.txt"), "no log here\n").unwrap();
    let out = hvaudit()
        .args(["audit", "-q"])
        .arg(dir.path())
        .output()
        .unwrap();
    let command = "hvaudit audit -q [TEMP] (NOTES.txt only)";
    assert_run("error_no_logs", command, &out, Some(dir.path()));
}

#[test]
fn a_rule_that_fails_to_run_fails_the_audit() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(
        dir.path().join("custom.broken.sql"),
        "-- id: custom.broken\n-- severity: low\n-- family: custom\n-- dialect: any\n\
         -- summary: a rule whose query cannot run\n-- spec: local policy\n\
         -- explain:\n--   Divides by zero on every row.\n\
         SELECT task_id, 'never' AS message, make_array(seq) AS seqs FROM ev WHERE seq / 0 = 1\n",
    )
    .unwrap();
    let out = hvaudit()
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .args(["audit", "-q", "--rules", "custom.*", "--rules-dir"])
        .arg(dir.path())
        .arg("samples/incident")
        .output()
        .unwrap();
    let command = "hvaudit audit -q --rules 'custom.*' --rules-dir [TEMP] samples/incident";
    assert_run("error_rule_fails", command, &out, Some(dir.path()));
}

#[test]
fn a_bad_configuration_key_is_named() {
    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("ops.toml");
    std::fs::write(&config, "[audit]\nfail-onn = \"low\"\n").unwrap();
    let out = hvaudit_reading_config()
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .arg("--config")
        .arg(&config)
        .args(["audit", "-q", "samples/incident"])
        .output()
        .unwrap();
    let command = "hvaudit --config [TEMP]/ops.toml audit -q samples/incident";
    assert_run("error_bad_config_key", command, &out, Some(dir.path()));
}
