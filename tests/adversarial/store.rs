//! `convert`'s output is believed only when its MAC shows convert wrote it
//! (src/store_key.rs). Whoever writes the logs can write a Parquet file in
//! convert's layout, with convert's metadata and schema, whose stored
//! claims (where each event was read, how often it was redelivered, the
//! digests fingerprints are made of) say what they like.

use super::{os, run_ok};
use crate::common::{TEST_STORE_KEY, hvaudit, scrubbed};
use datafusion::arrow::array::{ArrayRef, Int64Array, RecordBatch};
use serde_json::Value;
use std::path::{Path, PathBuf};
use std::sync::Arc;

fn incident_log() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("samples/incident/harmovela-0.2.ndjson")
}

/// `log` converted to `dir/store.parquet` (and its siblings) with `key`.
fn convert_with(log: &Path, dir: &Path, key: &str) -> PathBuf {
    std::fs::create_dir_all(dir).unwrap();
    let out = dir.join("store.parquet");
    hvaudit()
        .env(hvaudit::store_key::ENV, key)
        .args(["convert", "-q", "-o"])
        .arg(&out)
        .arg(log)
        .assert()
        .success();
    out
}

/// Rewrite the Parquet file `path` with `change` applied to every batch,
/// keeping its key-value metadata (convert's layout, table and run).
fn rewrite(path: &Path, change: impl Fn(RecordBatch) -> RecordBatch) {
    use datafusion::parquet::arrow::ArrowWriter;
    use datafusion::parquet::file::properties::WriterProperties;
    let (builder, metadata) = crate::common::parquet_with_metadata(path);
    let schema = builder.schema().clone();
    let batches: Vec<_> = builder
        .build()
        .unwrap()
        .map(|b| change(b.unwrap()))
        .collect();
    let props = WriterProperties::builder()
        .set_key_value_metadata(Some(metadata))
        .build();
    let mut writer =
        ArrowWriter::try_new(std::fs::File::create(path).unwrap(), schema, Some(props)).unwrap();
    for b in batches {
        writer.write(&b).unwrap();
    }
    writer.close().unwrap();
}

/// The forger's claims: every event read from line 7 of a file it never
/// was in, and the first one redelivered a million times.
fn forge_claims(batch: RecordBatch) -> RecordBatch {
    use datafusion::arrow::array::DictionaryArray;
    use datafusion::arrow::datatypes::Int32Type;
    let n = batch.num_rows();
    let mut cols = batch.columns().to_vec();
    let at = |name: &str| batch.schema().index_of(name).unwrap();
    let innocent: DictionaryArray<Int32Type> =
        std::iter::repeat_n(Some("/var/log/agents/innocent.ndjson"), n).collect();
    cols[at("src_file")] = Arc::new(innocent) as ArrayRef;
    cols[at("src_line")] = Arc::new(Int64Array::from(vec![7; n]));
    let mut redeliveries = vec![0i64; n];
    redeliveries[0] = 1_000_000;
    cols[at("redeliveries")] = Arc::new(Int64Array::from(redeliveries));
    RecordBatch::try_new(batch.schema(), cols).unwrap()
}

fn mac_file(part: &Path) -> PathBuf {
    hvaudit::store_key::mac_path(part)
}

fn json_report(args: &[&std::ffi::OsStr], codes: &[i32]) -> (i32, Value, String) {
    let mut all = vec![os("audit"), os("--format"), os("json")];
    all.extend_from_slice(args);
    let (code, out, err) = run_ok(&all, codes);
    let report = serde_json::from_str(&out).unwrap_or(Value::Null);
    (code, report, err)
}

/// What the report's inputs say of the events file `store.parquet`.
fn note_of(report: &Value) -> Option<String> {
    let input = report["inputs"]
        .as_array()
        .unwrap()
        .iter()
        .find(|i| i["path"].as_str().unwrap().ends_with("/store.parquet"))
        .unwrap();
    input["error"].as_str().map(str::to_string)
}

fn cited_files(report: &Value) -> Vec<String> {
    let mut files: Vec<String> = report["findings"]
        .as_array()
        .unwrap()
        .iter()
        .flat_map(|f| f["locations"].as_array().cloned().unwrap_or_default())
        .filter_map(|l| l["file"].as_str().map(str::to_string))
        .collect();
    files.sort();
    files.dedup();
    files
}

/// Audit `store` against `baseline`, failing on any new finding: exit `code`.
fn gate_against(store: &Path, baseline: &Path, code: i32) {
    let args = [os("audit"), store.as_os_str(), os("--baseline")];
    let gate = [baseline.as_os_str(), os("--fail-on-new"), os("info")];
    run_ok(&[&args[..], &gate[..]].concat(), &[code]);
}

/// The attacker's test of #51's first defect: a file in convert's layout
/// whose claims were changed. With convert's MAC file still beside it, the
/// run stops and names it; without one, a loaded audit reads its rows as
/// lines (no claim believed: no evidence cites the innocent file, the
/// accounting counts rows, and findings are new against a baseline of
/// the real store), and an in-place audit refuses it.
#[test]
fn a_forged_store_file_is_refused_or_read_with_every_check() {
    let dir = tempfile::tempdir().unwrap();
    let store = convert_with(&incident_log(), &dir.path().join("store"), TEST_STORE_KEY);
    let store_dir = store.parent().unwrap().to_path_buf();
    // The legal look-alike: the store as convert wrote it is believed,
    // loaded and in place, and is its own baseline.
    let baseline = dir.path().join("baseline.json");
    let (_, real, err) = json_report(&[store_dir.as_os_str()], &[0, 1]);
    assert!(note_of(&real).is_none(), "{}", real["inputs"]);
    assert!(err.is_empty() || !err.contains("convert's layout"), "{err}");
    std::fs::write(&baseline, serde_json::to_string(&real).unwrap()).unwrap();
    assert!(!real["findings"].as_array().unwrap().is_empty());
    let (_, in_place, _) = json_report(&[os("--in-place"), store_dir.as_os_str()], &[0, 1]);
    assert_eq!(in_place["findings"], real["findings"]);
    gate_against(&store_dir, &baseline, 0);

    rewrite(&store, forge_claims);
    // convert's MAC beside it: the bytes are not those it was made of.
    for args in [
        vec![store_dir.as_os_str()],
        vec![os("--in-place"), store_dir.as_os_str()],
    ] {
        let (_, _, err) = json_report(&args, &[2]);
        assert!(err.contains("store.parquet"), "{err}");
        assert!(err.contains("not those convert wrote"), "{err}");
    }
    // No MAC file: read as Parquet from elsewhere, or refused in place.
    std::fs::remove_file(mac_file(&store)).unwrap();
    let (_, read, _) = json_report(&[store_dir.as_os_str()], &[0, 1]);
    let note = note_of(&read).unwrap_or_default();
    assert!(note.contains("read as Parquet from elsewhere"), "{note}");
    assert!(
        !cited_files(&read).iter().any(|f| f.contains("innocent")),
        "{read}"
    );
    let rows = real["accounting"]["events"].as_u64().unwrap()
        + real["accounting"]["redeliveries"].as_u64().unwrap()
        + real["accounting"]["conflicting_copies"]
            .as_u64()
            .unwrap_or(0);
    assert!(
        read["accounting"]["lines"].as_u64().unwrap() <= rows,
        "{}",
        read["accounting"]
    );
    // Not one finding passes as an old one.
    gate_against(&store_dir, &baseline, 1);
    let (_, _, err) = json_report(&[os("--in-place"), store_dir.as_os_str()], &[2]);
    assert!(err.contains("no MAC file"), "{err}");
}

/// A forger who runs convert with a key of their own makes a MAC that the
/// operator's key does not accept; a store audited without any key is read
/// as Parquet from elsewhere (loaded) or refused (in place), never believed.
#[test]
fn a_store_made_with_another_key_or_read_without_one_is_not_believed() {
    let dir = tempfile::tempdir().unwrap();
    let forger_key = "66".repeat(32);
    let store = convert_with(&incident_log(), &dir.path().join("store"), &forger_key);
    let store_dir = store.parent().unwrap().to_path_buf();
    for args in [
        vec![store.as_os_str()],
        vec![os("--in-place"), store_dir.as_os_str()],
    ] {
        let (_, _, err) = json_report(&args, &[2]);
        assert!(err.contains("another store key"), "{err}");
    }
    // No key at all: an empty home, no variable.
    let home = tempfile::tempdir().unwrap();
    let run = |args: &[&std::ffi::OsStr]| {
        let out = scrubbed(crate::common::bin())
            .env_remove(hvaudit::store_key::ENV)
            .env("HOME", home.path())
            .args(["--no-config", "audit", "--format", "json"])
            .args(args)
            .output()
            .unwrap();
        (
            out.status.code(),
            String::from_utf8_lossy(&out.stdout).into_owned(),
            String::from_utf8_lossy(&out.stderr).into_owned(),
        )
    };
    let (code, out, _) = run(&[store.as_os_str()]);
    assert!(matches!(code, Some(0 | 1)), "{code:?}");
    let read: Value = serde_json::from_str(&out).unwrap();
    let note = note_of(&read).unwrap_or_default();
    assert!(note.contains("no store key"), "{note}");
    let (code, _, err) = run(&[os("--in-place"), store_dir.as_os_str()]);
    assert_eq!(code, Some(2), "{err}");
    assert!(err.contains("no store key"), "{err}");
    // Reading made no key file; only convert makes one.
    assert!(!home.path().join(".config").exists());
}

/// The first convert of a machine makes the key file, private, and says
/// so; the next ones use it, and an audit there believes their output.
#[test]
fn convert_makes_the_key_file_once_and_audits_use_it() {
    use std::os::unix::fs::PermissionsExt;
    let dir = tempfile::tempdir().unwrap();
    let home = dir.path().join("home");
    std::fs::create_dir_all(&home).unwrap();
    let run = |args: &[&std::ffi::OsStr]| {
        let out = scrubbed(crate::common::bin())
            .env_remove(hvaudit::store_key::ENV)
            .env("HOME", &home)
            .arg("--no-config")
            .args(args)
            .output()
            .unwrap();
        (
            out.status.code(),
            String::from_utf8_lossy(&out.stderr).into_owned(),
        )
    };
    let first = dir.path().join("a.parquet");
    let (code, err) = run(&[
        os("convert"),
        os("-o"),
        first.as_os_str(),
        incident_log().as_os_str(),
    ]);
    assert_eq!(code, Some(0), "{err}");
    assert!(err.contains("made the store key"), "{err}");
    let key = home.join(".config/hvaudit/store.key");
    let mode = std::fs::metadata(&key).unwrap().permissions().mode();
    assert_eq!(mode & 0o777, 0o600);
    let text = std::fs::read_to_string(&key).unwrap();
    let second = dir.path().join("b.parquet");
    let (code, err) = run(&[
        os("convert"),
        os("-o"),
        second.as_os_str(),
        incident_log().as_os_str(),
    ]);
    assert_eq!(code, Some(0), "{err}");
    assert!(!err.contains("made the store key"), "{err}");
    assert_eq!(std::fs::read_to_string(&key).unwrap(), text);
    let (code, err) = run(&[os("audit"), os("--in-place"), first.as_os_str(), os("-q")]);
    assert!(matches!(code, Some(0 | 1)), "{err}");
}
