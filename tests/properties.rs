//! Properties over generated logs: the answer depends on the events, not on
//! how they were cut into files, delivered again, stored as Parquet, or
//! damaged around them; and every line is accounted for.
//!
//! Logs come from `hvaudit::synth::generate` (planted violations of every
//! rule, random seed, 50-200 KB). Few cases, so the module stays fast in CI.

use assert_cmd::Command;
use hvaudit::audit::{Audit, AuditConfig};
use hvaudit::ingest::normalize::{NormalizeOptions, parse_line};
use hvaudit::ingest::{IngestOptions, ingest};
use hvaudit::synth::{SynthOptions, generate};
use proptest::prelude::*;
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

/// Small deterministic generator for the choices a case makes from its seed.
struct Dice(u64);

impl Dice {
    fn next(&mut self) -> u64 {
        // splitmix64
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }
    fn below(&mut self, n: usize) -> usize {
        (self.next() % n as u64) as usize
    }
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

/// Deal the lines into `n` files (each keeps its lines' relative order),
/// some compressed, named so that their sorted order is shuffled too.
fn split(dir: &Path, lines: &[Vec<u8>], n: usize, dice: &mut Dice) -> Vec<PathBuf> {
    let mut parts: Vec<Vec<Vec<u8>>> = vec![Vec::new(); n];
    for l in lines {
        parts[dice.below(n)].push(l.clone());
    }
    let mut order: Vec<usize> = (0..n).collect();
    for i in (1..n).rev() {
        order.swap(i, dice.below(i + 1));
    }
    let mut paths = Vec::new();
    for (pos, &p) in order.iter().enumerate() {
        let path = dir.join(format!("part{pos}-{p}.log"));
        write_log(&path, &parts[p], dice.below(3));
        paths.push(path);
    }
    paths
}

fn findings(inputs: Vec<PathBuf>) -> Vec<Key> {
    let report = Audit::new(AuditConfig {
        inputs: inputs.clone(),
        ..Default::default()
    })
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

/// Damage a line in one of the ways broken logs do.
fn corrupt(line: &mut Vec<u8>, dice: &mut Dice) {
    if line.is_empty() {
        line.push(b'{');
        return;
    }
    let at = dice.below(line.len());
    match dice.below(6) {
        0 => line.truncate(at),
        1 => line[at] ^= 1 << dice.below(8),
        2 => line.insert(at, 0),
        3 => line.insert(at, 0xff),
        4 => line
            .splice(at..at, b"\"}{\x1b[31m".iter().copied())
            .for_each(drop),
        _ => *line = line[at..].to_vec(),
    }
    if line.contains(&b'\n') {
        line.retain(|b| *b != b'\n');
    }
}

fn config(cases: u32) -> ProptestConfig {
    ProptestConfig {
        cases,
        failure_persistence: None,
        // Each step re-audits; the failing seed is printed, which is enough.
        max_shrink_iters: 4,
        ..ProptestConfig::default()
    }
}

proptest! {
    #![proptest_config(config(6))]

    /// One log, audited whole, split into files in any order (some
    /// compressed), with exact redeliveries added, and after a round trip
    /// through `hvaudit convert`: the same findings every time.
    #[test]
    fn findings_depend_on_the_events_only(
        seed in any::<u64>(),
        bytes in 50_000u64..200_000,
        files in 2usize..5,
        redelivered in 1usize..40,
        choices in any::<u64>(),
    ) {
        let lines = synth_lines(seed, bytes);
        let mut dice = Dice(choices);
        let dir = tempfile::tempdir().unwrap();
        let whole = dir.path().join("log.ndjson");
        write_log(&whole, &lines, 0);
        let base = findings(vec![whole.clone()]);
        prop_assert!(!base.is_empty());

        let split_dir = dir.path().join("split");
        std::fs::create_dir(&split_dir).unwrap();
        let parts = split(&split_dir, &lines, files, &mut dice);
        prop_assert_eq!(&findings(parts), &base, "split into {} files", files);

        // Each copy lands somewhere after its original.
        let mut again = lines.clone();
        let events: Vec<usize> = (0..lines.len()).filter(|&i| is_event(&lines[i])).collect();
        for _ in 0..redelivered {
            let i = events[dice.below(events.len())];
            let original = lines[i].clone();
            let pos = again.iter().position(|l| *l == original).unwrap();
            let to = pos + 1 + dice.below(again.len() - pos);
            again.insert(to, original);
        }
        let redo = dir.path().join("redelivered");
        std::fs::create_dir(&redo).unwrap();
        let path = redo.join("log.ndjson");
        write_log(&path, &again, 0);
        prop_assert_eq!(&findings(vec![path]), &base, "{} redeliveries", redelivered);

        let parquet = dir.path().join("parquet");
        Command::cargo_bin("hvaudit")
            .unwrap()
            .args(["convert", "-q", "-o"])
            .arg(&parquet)
            .arg(&whole)
            .assert()
            .success();
        prop_assert_eq!(&findings(vec![parquet]), &base, "after the Parquet round trip");
    }
}

proptest! {
    #![proptest_config(config(16))]

    /// lines read = events + redeliveries + bad lines, per input and in
    /// total, whatever was damaged, and every non-blank line is counted.
    #[test]
    fn every_line_is_accounted_for_even_when_damaged(
        seed in any::<u64>(),
        bytes in 50_000u64..150_000,
        files in 1usize..4,
        damaged in 0usize..60,
        choices in any::<u64>(),
    ) {
        let mut lines = synth_lines(seed, bytes);
        let mut dice = Dice(choices);
        for _ in 0..damaged {
            let i = dice.below(lines.len());
            corrupt(&mut lines[i], &mut dice);
        }
        // A few exact repeats too, so all three terms are exercised.
        for _ in 0..5 {
            let i = dice.below(lines.len());
            lines.push(lines[i].clone());
        }
        let dir = tempfile::tempdir().unwrap();
        let paths = split(dir.path(), &lines, files, &mut dice);
        let ing = ingest(&paths, &IngestOptions::default()).unwrap();
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
