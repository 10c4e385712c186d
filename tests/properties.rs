//! Properties over generated logs: the answer depends on the events, not on
//! how they were cut into files, delivered again, stored as Parquet, or
//! damaged around them; and every line is accounted for.
//!
//! Logs come from `hvaudit_synth::generate` (planted violations of every
//! rule, random seed, 50-200 KB). Every choice a case makes (how the log
//! is cut, which lines are delivered again or damaged, and how) is drawn
//! by a proptest strategy, so a failure shrinks to a smaller one. Few
//! cases, so the module stays fast in CI; `PROPTEST_CASES=N` runs N of
//! each costly one.

use crate::common::hvaudit;
use hvaudit::audit::Audit;
use hvaudit::ingest::ingest;
use hvaudit::ingest::normalize::{NormalizeOptions, parse_line};
use hvaudit_synth::{SynthOptions, generate};
use proptest::prelude::*;
use proptest::sample::Index;
use std::io::Write;
use std::path::{Path, PathBuf};

/// A finding without its locations: rule, severity, message (file:line
/// references replaced), task, sorted event ids.
type Key = (String, String, String, Option<String>, Vec<String>);

fn synth_lines(seed: u64, bytes: u64) -> Vec<Vec<u8>> {
    let opts = SynthOptions {
        seed,
        target_bytes: bytes,
        violations: true,
        ..Default::default()
    };
    let mut log = Vec::new();
    generate(&opts, &mut log, &mut std::io::sink()).unwrap();
    log.split(|b| *b == b'\n')
        .filter(|l| !l.is_empty())
        .map(<[u8]>::to_vec)
        .collect()
}

/// A generated log's lines, shown by what made them (a failing case
/// prints its seed and size, not the 100 KB of the log).
#[derive(Clone)]
struct Log {
    seed: u64,
    bytes: u64,
    lines: Vec<Vec<u8>>,
}

impl std::fmt::Debug for Log {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "Log {{ seed: {}, bytes: {}, lines: {} }}",
            self.seed,
            self.bytes,
            self.lines.len()
        )
    }
}

/// A generated log of about `bytes` bytes; it shrinks to seed 0 and the
/// smallest size.
fn logs(bytes: std::ops::Range<u64>) -> impl Strategy<Value = Log> {
    (any::<u64>(), bytes).prop_map(|(seed, bytes)| Log {
        seed,
        bytes,
        lines: synth_lines(seed, bytes),
    })
}

/// How a log of `lines` lines is dealt into files: each line's file (a
/// file keeps its lines' relative order), the order of the files' names,
/// and each file's compression (plain, gzip, zstd).
#[derive(Debug, Clone)]
struct Split {
    file_of_line: Vec<usize>,
    name_order: Vec<usize>,
    compression: Vec<usize>,
}

fn splits(lines: usize, files: std::ops::Range<usize>) -> impl Strategy<Value = Split> {
    files.prop_flat_map(move |n| {
        (
            proptest::collection::vec(0..n, lines),
            Just((0..n).collect::<Vec<usize>>()).prop_shuffle(),
            proptest::collection::vec(0usize..3, n),
        )
            .prop_map(|(file_of_line, name_order, compression)| Split {
                file_of_line,
                name_order,
                compression,
            })
    })
}

/// Write `lines` as one file, plain, gzip or zstd by `kind`.
fn write_log(path: &Path, lines: &[Vec<u8>], kind: usize) {
    let mut plain = Vec::new();
    for l in lines {
        plain.extend_from_slice(l);
        plain.push(b'\n');
    }
    let bytes = match kind % 3 {
        0 => plain,
        1 => {
            let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
            gz.write_all(&plain).unwrap();
            gz.finish().unwrap()
        }
        _ => zstd::encode_all(&plain[..], 1).unwrap(),
    };
    std::fs::write(path, bytes).unwrap();
}

/// Deal the lines into files as `split` says, named so that their sorted
/// order is shuffled too.
fn split(dir: &Path, lines: &[Vec<u8>], split: &Split) -> Vec<PathBuf> {
    let mut parts: Vec<Vec<Vec<u8>>> = vec![Vec::new(); split.compression.len()];
    for (l, &file) in lines.iter().zip(&split.file_of_line) {
        parts[file].push(l.clone());
    }
    let mut paths = Vec::new();
    for (pos, &p) in split.name_order.iter().enumerate() {
        let path = dir.join(format!("part{pos}-{p}.log"));
        write_log(&path, &parts[p], split.compression[p]);
        paths.push(path);
    }
    paths
}

fn findings(inputs: Vec<PathBuf>) -> Vec<Key> {
    let report = Audit::new(crate::common::audit_config(inputs.clone()))
        .run()
        .unwrap();
    assert!(report.rule_errors.is_empty(), "{:?}", report.rule_errors);
    let mut keys: Vec<Key> = report
        .findings
        .iter()
        .map(|f| {
            let mut ids = f.event_ids.clone();
            ids.sort();
            (
                f.rule.clone(),
                f.severity.as_str().to_string(),
                without_locations(&f.message),
                f.task_id.clone(),
                ids,
            )
        })
        .collect();
    keys.sort();
    keys
}

/// Messages may cite `file:line`; those naturally differ between layouts.
fn without_locations(message: &str) -> String {
    let mut out = String::with_capacity(message.len());
    let mut rest = message;
    while let Some(at) = rest.find("/part").or_else(|| rest.find("/log.ndjson")) {
        // The temp dir path before the name is cut back to its start.
        let start = rest[..at].rfind(' ').map_or(0, |s| s + 1);
        out.push_str(&rest[..start]);
        let tail = &rest[at..];
        let colon = tail.find(':').unwrap_or(tail.len());
        let digits = tail[colon + 1..]
            .find(|c: char| !c.is_ascii_digit())
            .map_or(tail.len(), |d| colon + 1 + d);
        out.push_str("<file:line>");
        rest = &tail[digits..];
    }
    out.push_str(rest);
    out
}

fn is_event(line: &[u8]) -> bool {
    std::str::from_utf8(line)
        .ok()
        .is_some_and(|t| parse_line(t, 0, 1, NormalizeOptions::default(), |_| {}).is_ok())
}

/// One of the ways broken logs are damaged, at a place in a line.
#[derive(Debug, Clone, Copy)]
enum Damage {
    /// Cut off there.
    Truncate,
    /// One bit of the byte there flipped.
    FlipBit(u8),
    /// A NUL byte put in.
    Nul,
    /// A byte that is never UTF-8 put in.
    NotUtf8,
    /// A closed object, a new one and a terminal colour put in.
    Spliced,
    /// Only what follows kept (the line's start lost).
    Tail,
}

fn damages() -> impl Strategy<Value = Damage> {
    prop_oneof![
        Just(Damage::Truncate),
        (0u8..8).prop_map(Damage::FlipBit),
        Just(Damage::Nul),
        Just(Damage::NotUtf8),
        Just(Damage::Spliced),
        Just(Damage::Tail),
    ]
}

/// Damage a line at `at` (an index into it) in the way `damage` says.
fn corrupt(line: &mut Vec<u8>, at: Index, damage: Damage) {
    if line.is_empty() {
        line.push(b'{');
        return;
    }
    let at = at.index(line.len());
    match damage {
        Damage::Truncate => line.truncate(at),
        Damage::FlipBit(bit) => line[at] ^= 1 << bit,
        Damage::Nul => line.insert(at, 0),
        Damage::NotUtf8 => line.insert(at, 0xff),
        Damage::Spliced => line
            .splice(at..at, b"\"}{\x1b[31m".iter().copied())
            .for_each(drop),
        Damage::Tail => *line = line[at..].to_vec(),
    }
    if line.contains(&b'\n') {
        line.retain(|b| *b != b'\n');
    }
}

/// `cases` cases, and at most `shrink_iters` steps to shrink a failing one
/// (each step runs the whole case again).
fn config(cases: u32, shrink_iters: u32) -> ProptestConfig {
    ProptestConfig {
        cases,
        failure_persistence: None,
        max_shrink_iters: shrink_iters,
        ..ProptestConfig::default()
    }
}

/// A log, a way to split it, and redeliveries: each (which event, how
/// far after the original the copy lands).
fn redelivery_cases() -> impl Strategy<Value = (Log, Split, Vec<(Index, Index)>)> {
    logs(50_000..200_000).prop_flat_map(|log| {
        let n = log.lines.len();
        (
            Just(log),
            splits(n, 2..5),
            proptest::collection::vec((any::<Index>(), any::<Index>()), 1..40),
        )
    })
}

proptest! {
    // Each case audits four times (a second each, in a debug build); a
    // shrinking step is a whole case. PROPTEST_CASES runs more.
    #![proptest_config(config(crate::common::proptest_cases(3), 24))]

    /// One log, audited whole, split into files in any order (some
    /// compressed), with exact redeliveries added, and after a round trip
    /// through `hvaudit convert`: the same findings every time.
    #[test]
    fn findings_depend_on_the_events_only((log, how, redelivered) in redelivery_cases()) {
        let lines = &log.lines;
        let dir = tempfile::tempdir().unwrap();
        let whole = dir.path().join("log.ndjson");
        write_log(&whole, lines, 0);
        let base = findings(vec![whole.clone()]);
        prop_assert!(!base.is_empty());

        let split_dir = dir.path().join("split");
        std::fs::create_dir(&split_dir).unwrap();
        let parts = split(&split_dir, lines, &how);
        prop_assert_eq!(&findings(parts), &base, "split as {:?}", how.name_order);

        // Each copy lands somewhere after its original.
        let mut again = lines.clone();
        let events: Vec<usize> = (0..lines.len()).filter(|&i| is_event(&lines[i])).collect();
        for (which, after) in &redelivered {
            let original = lines[events[which.index(events.len())]].clone();
            let pos = again.iter().position(|l| *l == original).unwrap();
            let to = pos + 1 + after.index(again.len() - pos);
            again.insert(to, original);
        }
        let redo = dir.path().join("redelivered");
        std::fs::create_dir(&redo).unwrap();
        let path = redo.join("log.ndjson");
        write_log(&path, &again, 0);
        prop_assert_eq!(&findings(vec![path]), &base, "{} redeliveries", redelivered.len());

        let parquet = dir.path().join("parquet");
        hvaudit()
            .args(["convert", "-q", "-o"])
            .arg(&parquet)
            .arg(&whole)
            .assert()
            .success();
        prop_assert_eq!(&findings(vec![parquet]), &base, "after the Parquet round trip");
    }
}

/// A log, the damage done to it (which line, where in it, how), lines
/// repeated exactly, and a way to split the result.
#[allow(clippy::type_complexity)]
fn damage_cases() -> impl Strategy<Value = (Log, Vec<(Index, Index, Damage)>, Vec<Index>, Split)> {
    // A few exact repeats always, so all three terms are exercised.
    const REPEATS: usize = 5;
    logs(50_000..150_000).prop_flat_map(|log| {
        let n = log.lines.len() + REPEATS;
        (
            Just(log),
            proptest::collection::vec((any::<Index>(), any::<Index>(), damages()), 0..60),
            proptest::collection::vec(any::<Index>(), REPEATS),
            splits(n, 1..4),
        )
    })
}

proptest! {
    #![proptest_config(config(16, 64))]

    /// lines read = events + redeliveries + bad lines, per input and in
    /// total, whatever was damaged, and every non-blank line is counted.
    #[test]
    fn every_line_is_accounted_for_even_when_damaged(
        (log, damaged, repeats, how) in damage_cases(),
    ) {
        let mut lines = log.lines;
        for (line, at, damage) in damaged {
            let i = line.index(lines.len());
            corrupt(&mut lines[i], at, damage);
        }
        for repeat in repeats {
            let i = repeat.index(lines.len());
            lines.push(lines[i].clone());
        }
        let dir = tempfile::tempdir().unwrap();
        let paths = split(dir.path(), &lines, &how);
        let ing = ingest(&paths, &crate::common::test_reading()).unwrap();
        for i in &ing.inputs {
            prop_assert!(i.identity_holds(), "{:?}", i);
            prop_assert!(i.error.is_none(), "{:?}", i);
        }
        let t = ing.total();
        prop_assert!(t.identity_holds(), "{:?}", t);
        let written = lines
            .iter()
            .filter(|l| !l.iter().all(u8::is_ascii_whitespace))
            .count() as u64;
        prop_assert_eq!(t.lines, written);
        prop_assert_eq!(t.blank_lines, lines.len() as u64 - written);
        let bad_rows: usize = ing.bad_lines.iter().map(|b| b.num_rows()).sum();
        prop_assert_eq!(t.bad_lines, bad_rows as u64);
        // Every row is an event or a later version of one.
        let event_rows: usize = ing.events.iter().map(|b| b.num_rows()).sum();
        prop_assert_eq!(t.events + t.conflicting_copies, event_rows as u64);
    }
}

#[test]
fn locations_are_cut_from_messages_and_nothing_else() {
    let m = "/tmp/.tmpAb/split/part1-3.log:17: not JSON (event id e1); skipped";
    assert_eq!(
        without_locations(m),
        "<file:line>: not JSON (event id e1); skipped"
    );
    let m = "x /tmp/q/log.ndjson:4: bad";
    assert_eq!(without_locations(m), "x <file:line>: bad");
    assert_eq!(without_locations("no location"), "no location");
}
