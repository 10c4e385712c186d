//! Hostile and broken input: logs from production incidents are truncated,
//! corrupted, half-written or written by a compromised agent. Whatever they
//! hold, the analyzer must not crash, must say where each problem is, must
//! keep auditing the rest, and must not let log content into its reports
//! unescaped. Outputs are atomic, even when the process is interrupted.

use crate::common::hvaudit;
use crate::ingest::{ev, query, upstream};
use hvaudit::audit::{Audit, AuditConfig};
use hvaudit::ingest::{IngestOptions, Ingested, ingest};
use hvaudit::protocol::TokenFormat;
use hvaudit::report::{ReportFormat, render};
use serde_json::{Value, json};
use std::io::Write;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

mod bounded;
mod extremes;
mod files;
mod interrupts;
mod lines;
mod many_inputs;
mod parquet_shape;
mod reports;
mod store;
mod streams;
mod values;

const DEEP: usize = 100_000;

fn write(dir: &Path, name: &str, bytes: &[u8]) -> PathBuf {
    let p = dir.join(name);
    std::fs::write(&p, bytes).unwrap();
    p
}

/// A good line before and after each of `bad`, so that every test also
/// checks that the neighbours of a broken line are still audited.
fn sandwich(bad: &[Vec<u8>]) -> Vec<u8> {
    let mut out = Vec::new();
    let good = |n: usize| {
        ev(
            &format!("good{n}"),
            "task.progress",
            "2026-07-14T10:00:00Z",
            json!({}),
        )
    };
    out.extend_from_slice(good(0).as_bytes());
    out.push(b'\n');
    for (n, line) in bad.iter().enumerate() {
        out.extend_from_slice(line);
        out.push(b'\n');
        out.extend_from_slice(good(n + 1).as_bytes());
        out.push(b'\n');
    }
    out
}

fn read_with(paths: &[PathBuf], opts: &IngestOptions) -> Ingested {
    let ing = ingest(paths, opts).expect("inputs usable");
    for i in &ing.inputs {
        assert!(i.identity_holds(), "accounting broken for {i:?}");
    }
    assert!(ing.total().identity_holds());
    ing
}

/// Every good neighbour of `n` bad lines became an event.
fn neighbours_kept(ing: &Ingested, n: usize) {
    let rows = query(ing, "SELECT id FROM events WHERE id LIKE 'good%'");
    assert_eq!(
        rows.len(),
        n + 1,
        "good lines around the bad ones: {rows:?}"
    );
}

/// The bad_lines rows as (line, reason).
fn bad_lines(ing: &Ingested) -> Vec<(i64, String)> {
    query(ing, "SELECT src_line, reason FROM bad_lines ORDER BY seq")
        .into_iter()
        .map(|r| {
            (
                r["src_line"].as_i64().unwrap(),
                r["reason"].as_str().unwrap().to_string(),
            )
        })
        .collect()
}

/// The bad line at `line`, which must exist, with a reason containing `want`.
fn assert_bad(ing: &Ingested, line: i64, want: &str) {
    let bad = bad_lines(ing);
    let found = bad.iter().find(|(l, _)| *l == line);
    let reason = &found
        .unwrap_or_else(|| panic!("no bad line {line} in {bad:?}"))
        .1;
    assert!(
        reason.contains(want),
        "line {line}: {want:?} not in {reason:?}"
    );
}

fn event(ing: &Ingested, id: &str, cols: &str) -> Value {
    let rows = query(ing, &format!("SELECT {cols} FROM events WHERE id = '{id}'"));
    assert_eq!(rows.len(), 1, "event {id}: {rows:?}");
    rows.into_iter().next().unwrap()
}

/// Run the binary; it must not panic and must exit with one of `codes`.
fn run_ok(args: &[&std::ffi::OsStr], codes: &[i32]) -> (i32, String, String) {
    let out = hvaudit()
        .args(args)
        .timeout(Duration::from_secs(300))
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    let code = out.status.code().unwrap_or(-1);
    assert!(!stderr.contains("panicked"), "{args:?} panicked: {stderr}");
    assert!(codes.contains(&code), "{args:?} exited {code}: {stderr}");
    (code, stdout, stderr)
}

fn os(s: &str) -> &std::ffi::OsStr {
    std::ffi::OsStr::new(s)
}

fn deep_array(n: usize) -> String {
    "[".repeat(n) + &"]".repeat(n)
}

fn envelope(id: &str, ty: &str, rest: &str) -> Vec<u8> {
    format!(
        r#"{{"spec_version":"0.2","id":"{id}","type":"{ty}","source":"agent:x","created_at":"2026-07-14T10:00:00Z"{rest}}}"#
    )
    .into_bytes()
}

fn compressed(plain: &[u8]) -> (Vec<u8>, Vec<u8>) {
    let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
    gz.write_all(plain).unwrap();
    (gz.finish().unwrap(), zstd::encode_all(plain, 3).unwrap())
}

fn numbered(prefix: &str, n: usize) -> Vec<u8> {
    let mut out = Vec::new();
    for i in 0..n {
        let line = ev(
            &format!("{prefix}{i}"),
            "task.progress",
            "2026-07-14T10:00:00Z",
            json!({"payload": {"i": i}}),
        );
        out.extend_from_slice(line.as_bytes());
        out.push(b'\n');
    }
    out
}

const ALL_FORMATS: [ReportFormat; 6] = [
    ReportFormat::Text,
    ReportFormat::Json,
    ReportFormat::Jsonl,
    ReportFormat::Markdown,
    ReportFormat::Html,
    ReportFormat::Sarif,
];
