//! Helpers shared by the integration tests.

use hvaudit::Report;
use hvaudit::audit::{Audit, AuditConfig};
use std::path::{Path, PathBuf};
use std::time::Duration;

/// How long one run of the binary may take unless its test says otherwise:
/// well above the slowest run a test makes, well below a hung CI job.
pub const TIMEOUT: Duration = Duration::from_secs(300);

/// What a run of the binary keeps of the test's environment: where
/// programs and temp files are, backtraces and coverage output. Nothing
/// else reaches it (no `HVAUDIT_*`, `AWS_*`, `COLUMNS`, `RUST_LOG`,
/// `SOURCE_DATE_EPOCH` from the shell that ran the tests); a test that
/// needs a variable sets it.
const KEPT_VARS: [&str; 4] = ["PATH", "TMPDIR", "RUST_BACKTRACE", "LLVM_PROFILE_FILE"];

/// The binary this build of the tests runs.
pub fn bin() -> PathBuf {
    PathBuf::from(env!("CARGO_BIN_EXE_hvaudit"))
}

/// A home directory that does not exist, so that nothing under the user's
/// own (`~/.aws`, the SQL prompt's history) is read or written.
pub fn no_home() -> PathBuf {
    std::env::temp_dir().join("hvaudit-no-home")
}

/// `program` with the scrubbed environment every run of the binary gets
/// (`KEPT_VARS`, and `HOME` where nothing is); for a shell or `script`
/// that runs the binary, as for the binary itself.
pub fn scrubbed(program: impl AsRef<std::ffi::OsStr>) -> std::process::Command {
    let mut cmd = std::process::Command::new(program);
    cmd.env_clear();
    for name in KEPT_VARS {
        if let Some(value) = std::env::var_os(name) {
            cmd.env(name, value);
        }
    }
    cmd.env("HOME", no_home());
    // What `convert` writes is authenticated with this key, and read back
    // with it (the home above holds no key file).
    cmd.env(hvaudit::store_key::ENV, TEST_STORE_KEY);
    cmd
}

/// The store key every run of the binary gets (`scrubbed`).
pub const TEST_STORE_KEY: &str = "7465737473746f72656b65792d6e6f742d612d7365637265742d666f722d7573";

/// A Parquet reader of `path`, and the file's key-value metadata without
/// the Arrow schema (a writer stores its own): to rewrite one of convert's
/// files as it was, but for what a test changes.
pub fn parquet_with_metadata(
    path: &Path,
) -> (
    datafusion::parquet::arrow::arrow_reader::ParquetRecordBatchReaderBuilder<std::fs::File>,
    Vec<datafusion::parquet::file::metadata::KeyValue>,
) {
    use datafusion::parquet::arrow::arrow_reader::ParquetRecordBatchReaderBuilder;
    let builder =
        ParquetRecordBatchReaderBuilder::try_new(std::fs::File::open(path).unwrap()).unwrap();
    let mut metadata = builder
        .metadata()
        .file_metadata()
        .key_value_metadata()
        .cloned()
        .unwrap();
    metadata.retain(|kv| kv.key != "ARROW:schema");
    (builder, metadata)
}

/// Write the MAC file of the Parquet file `path` with the tests' store
/// key, as convert would have: for tests that rewrite convert's files on
/// purpose (an earlier layout) and need them believed.
pub fn sign(path: &Path) {
    use hvaudit::store_key::{Signed, StoreKey, mac_of_file, mac_path};
    let key = StoreKey::from_hex(TEST_STORE_KEY).unwrap();
    let file = std::fs::File::open(path).unwrap();
    let (len, mac) = mac_of_file(&key, Signed::Part, &file).unwrap();
    std::fs::write(mac_path(path), key.mac_text(Signed::Part, len, &mac)).unwrap();
}

/// `AuditConfig::of(inputs)`, reading as the tests read ([`test_reading`]).
pub fn audit_config(inputs: Vec<PathBuf>) -> AuditConfig {
    AuditConfig {
        reading: reading_options(inputs),
        ..AuditConfig::of(Vec::new())
    }
}

/// `ReadingOptions::new(inputs)`, reading as the tests read.
pub fn reading_options(inputs: Vec<PathBuf>) -> hvaudit::tables::ReadingOptions {
    hvaudit::tables::ReadingOptions {
        ingest: test_reading(),
        ..hvaudit::tables::ReadingOptions::new(inputs)
    }
}

/// Reading options as the tests read: the defaults, with the tests' store
/// key (what the binary converted is believed when read in the test).
pub fn test_reading() -> hvaudit::ingest::IngestOptions {
    hvaudit::ingest::IngestOptions {
        store_key: hvaudit::store_key::KeySource::Given(
            hvaudit::store_key::StoreKey::from_hex(TEST_STORE_KEY).unwrap(),
        ),
        ..Default::default()
    }
}

/// `hvaudit --no-config`, in the scrubbed environment, for a process the
/// test starts and watches itself (no timeout: the test ends it).
pub fn hvaudit_process() -> std::process::Command {
    let mut cmd = scrubbed(bin());
    cmd.arg("--no-config");
    cmd
}

/// `hvaudit --no-config` in the scrubbed environment, failing the test
/// when it runs longer than `TIMEOUT`: how the tests run the binary.
pub fn hvaudit() -> assert_cmd::Command {
    let mut cmd = assert_cmd::Command::from_std(hvaudit_process());
    cmd.timeout(TIMEOUT);
    cmd
}

/// `hvaudit` as `hvaudit()` runs it, but reading the configuration as a
/// user's run does (`--config`, `HVAUDIT_CONFIG`, `./hvaudit.toml`): for
/// the tests of configuration, which set what they read.
pub fn hvaudit_reading_config() -> assert_cmd::Command {
    let mut cmd = assert_cmd::Command::from_std(scrubbed(bin()));
    cmd.timeout(TIMEOUT);
    cmd
}

/// Whether the tests run as root (the effective user id in
/// /proc/self/status), whom file modes do not stop.
pub fn is_root() -> bool {
    let status = std::fs::read_to_string("/proc/self/status").expect("/proc/self/status");
    let uid = status
        .lines()
        .find_map(|l| l.strip_prefix("Uid:"))
        .expect("a Uid line");
    uid.split_whitespace().nth(1) == Some("0")
}

/// `hvaudit --no-config` as `hvaudit()` runs it, but bound by file modes:
/// as root, started through setpriv(1) without the capabilities that let
/// root read and search past them (so that a mode-000 file is unreadable,
/// as for any user).
pub fn hvaudit_bound_by_modes() -> assert_cmd::Command {
    if !is_root() {
        return hvaudit();
    }
    let caps = "-dac_override,-dac_read_search";
    let mut cmd = scrubbed("setpriv");
    cmd.arg(format!("--inh-caps={caps}"))
        .arg(format!("--bounding-set={caps}"))
        .arg(bin())
        .arg("--no-config");
    let mut cmd = assert_cmd::Command::from_std(cmd);
    cmd.timeout(TIMEOUT);
    cmd
}

/// Write `lines` as one NDJSON file and audit it with the config tweaked.
pub fn audit_lines(lines: &[String], tweak: impl FnOnce(&mut AuditConfig)) -> Report {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("log.ndjson");
    std::fs::write(&path, lines.join("\n") + "\n").expect("write log");
    let mut cfg = audit_config(vec![path]);
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
pub fn sql_csv(query: &str, extra: &[&str], path: &Path) -> String {
    let output = hvaudit()
        .args(["sql", "-q", "--format", "csv", "-e", query])
        .args(extra)
        .arg(path)
        .output()
        .unwrap();
    assert!(output.status.success(), "{output:?}");
    String::from_utf8(output.stdout).unwrap()
}

/// Make a FIFO at `path` (in a temp dir of the test's own).
pub fn mkfifo(path: &Path) {
    let made = std::process::Command::new("mkfifo").arg(path).status();
    assert!(made.is_ok_and(|s| s.success()), "mkfifo {path:?}");
}

/// Make a character device node at `path` (in a temp dir of the test's
/// own, never the system's /dev). Only root may: the test fails, saying
/// so, for anyone else.
pub fn mknod_char(path: &Path, major: u32, minor: u32) {
    assert!(
        is_root(),
        "this test makes a device node, which needs root (as CI runs); \
         run it as root or leave it out with --skip"
    );
    let made = std::process::Command::new("mknod")
        .arg(path)
        .args(["c", &major.to_string(), &minor.to_string()])
        .status();
    assert!(made.is_ok_and(|s| s.success()), "mknod {path:?}");
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

/// How many cases a costly property test runs: `ci`, or `PROPTEST_CASES`
/// when set, for a longer search than the test command's
/// (`PROPTEST_CASES=50 scripts/test properties::`).
pub fn proptest_cases(ci: u32) -> u32 {
    std::env::var("PROPTEST_CASES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(ci)
}
