//! Synthetic log generator tests.

use base64::Engine as _;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use chrono::DateTime;
use hvaudit::audit::{Audit, AuditConfig};
use hvaudit::protocol::TokenFormat;
use hvaudit_synth::{SynthOptions, SynthStats, generate};
use serde_json::Value;
use std::collections::{BTreeSet, HashSet};

/// Every built-in rule id (docs/rules.md).
const RULES: [&str; 35] = [
    "orphan.cancel_not_cascaded",
    "orphan.outlived_parent",
    "orphan.cascade_unlinked",
    "orphan.dangling_parent",
    "parent.terminated_early",
    "parent.child_terminated_first",
    "token.replayed",
    "token.rebound",
    "token.superseded",
    "token.after_rejection",
    "token.claims_invalid",
    "token.undecodable",
    "checkpoint.missing",
    "checkpoint.late",
    "checkpoint.resume_unknown",
    "checkpoint.resume_without_id",
    "checkpoint.not_stopped",
    "decision.unverified_basis",
    "decision.retracted_basis",
    "decision.stale_basis",
    "decision.contested_basis",
    "provenance.chain_mismatch",
    "provenance.chain_unordered",
    "lifecycle.illegal_transition",
    "lifecycle.skipped_accept",
    "lifecycle.task_id_mismatch",
    "lifecycle.conflicting_parent",
    "delegation.escalated_after_rejection",
    "integrity.conflicting_duplicate",
    "envelope.invalid",
    "envelope.unknown_type",
    "envelope.unsupported_version",
    "envelope.legacy_version_field",
    "subscription.no_filter",
    "payload.invalid",
];

/// The 0.2-only families, never used by a 0.1 session's benign traffic.
const ONLY_02: [&str; 4] = ["adaptation.", "command.", "query.", "state."];

fn options(seed: u64, target_bytes: u64, violations: bool) -> SynthOptions {
    SynthOptions {
        seed,
        target_bytes,
        dialect_mix: 0.3,
        violations,
        redelivery_rate: 0.02,
    }
}

fn run(opts: &SynthOptions) -> (Vec<u8>, Vec<Value>, SynthStats) {
    let (mut log, mut truth) = (Vec::new(), Vec::new());
    let stats = generate(opts, &mut log, &mut truth).expect("generate writes to memory");
    let truth = String::from_utf8(truth).expect("truth is UTF-8");
    let truth = truth
        .lines()
        .map(|l| serde_json::from_str(l).expect("truth lines are JSON"))
        .collect();
    (log, truth, stats)
}

fn text(log: &[u8]) -> &str {
    std::str::from_utf8(log).expect("the log is UTF-8")
}

#[test]
fn same_options_same_bytes() {
    let opts = options(42, 1 << 20, true);
    let (a, ta, sa) = run(&opts);
    let (b, tb, sb) = run(&opts);
    assert!(a == b, "two runs with the same options differ");
    assert_eq!((ta, sa), (tb, sb));
    let (c, _, _) = run(&options(43, 1 << 20, true));
    assert!(a != c, "another seed gives the same log");
}

#[test]
fn every_rule_is_planted_in_a_small_log() {
    let (_, truth, stats) = run(&options(7, 2 << 20, true));
    let rules: BTreeSet<&str> = truth.iter().map(|t| t["rule"].as_str().unwrap()).collect();
    let want: BTreeSet<&str> = RULES.into_iter().collect();
    assert_eq!(rules, want, "planted rules differ from the catalogue");
    assert_eq!(stats.planted, truth.len() as u64);
    for t in &truth {
        // Claims are only checked, and tokens only decoded, under the option.
        let needs = matches!(
            t["rule"].as_str(),
            Some("token.claims_invalid" | "token.undecodable")
        );
        assert_eq!(
            t["requires"].as_str(),
            needs.then_some("structured-tokens"),
            "{t}"
        );
        assert!(t["event_id"].is_string() || t["line"].is_u64(), "{t}");
    }
}

#[test]
fn lines_are_json_objects_in_time_order() {
    let (log, truth, stats) = run(&options(11, 2 << 20, true));
    let bad_lines: HashSet<u64> = truth
        .iter()
        .filter(|t| t["rule"] == "envelope.invalid")
        .map(|t| {
            t["line"]
                .as_u64()
                .expect("envelope.invalid truth names its line")
        })
        .collect();
    let (mut seen, mut ids, mut last, mut events) = (HashSet::new(), HashSet::new(), i64::MIN, 0);
    let lines: Vec<&str> = text(&log).lines().collect();
    for (i, line) in lines.iter().enumerate() {
        let n = i as u64 + 1;
        let v: Value = match serde_json::from_str(line) {
            Ok(v) => v,
            Err(_) => {
                assert!(bad_lines.contains(&n), "line {n} is not JSON: {line}");
                continue;
            }
        };
        assert!(v.is_object(), "line {n} is not an object");
        let id = v["id"].as_str().expect("every JSON line has an id");
        if !seen.insert(*line) {
            continue; // an exact redelivery keeps its old created_at
        }
        events += 1;
        if !ids.insert(id.to_owned()) || bad_lines.contains(&n) {
            // a planted conflicting duplicate or bad envelope
            continue;
        }
        let at = v["created_at"].as_str().expect("created_at");
        assert!(at.ends_with('Z') && at.len() == 24, "line {n}: {at}");
        let at = DateTime::parse_from_rfc3339(at)
            .expect("RFC 3339")
            .timestamp_millis();
        assert!(at >= last, "line {n} goes back in time");
        last = at;
    }
    assert_eq!(stats.lines, lines.len() as u64);
    assert_eq!(stats.bytes, log.len() as u64);
    assert_eq!(stats.events, events);
    for t in &truth {
        if let Some(id) = t["event_id"].as_str() {
            assert!(ids.contains(id), "planted event {id} is not in the log");
        }
    }
}

#[test]
fn size_target_is_met_roughly() {
    for target in [300_000u64, 3 << 20] {
        let (log, _, stats) = run(&options(5, target, false));
        assert_eq!(stats.bytes, log.len() as u64);
        // The sessions under way are finished: a little over, never under.
        assert!(stats.bytes >= target, "{} < {target}", stats.bytes);
        assert!(
            stats.bytes < target + 400_000,
            "{} >> {target}",
            stats.bytes
        );
        let typical = stats.bytes / stats.lines;
        assert!((300..=600).contains(&typical), "mean line {typical} bytes");
    }
}

#[test]
fn benign_logs_mix_dialects_redeliver_and_carry_structured_tokens() {
    let opts = SynthOptions {
        dialect_mix: 0.5,
        redelivery_rate: 0.05,
        ..options(3, 1 << 20, false)
    };
    let (log, truth, _) = run(&opts);
    assert!(truth.is_empty());
    let (mut v01, mut v02, mut handoffs) = (0, 0, 0);
    let mut seen = HashSet::new();
    let mut redelivered = 0;
    for line in text(&log).lines() {
        if !seen.insert(line) {
            redelivered += 1;
            continue;
        }
        let v: Value = serde_json::from_str(line).expect("benign lines are JSON");
        let ty = v["type"].as_str().unwrap();
        match (v.get("spec_version"), v.get("aep_version")) {
            (Some(s), None) if *s == "0.2" => v02 += 1,
            (None, Some(a)) if *a == "0.1" => {
                v01 += 1;
                assert!(
                    !ONLY_02.iter().any(|f| ty.starts_with(f)),
                    "0.1 event of type {ty}"
                );
            }
            _ => panic!("benign line with unexpected version fields: {line}"),
        }
        if ty == "delegation.handoff.completed" {
            handoffs += 1;
            let token = v["handoff_token"]
                .as_str()
                .expect("a handoff issues a token");
            let body = match token.split('.').collect::<Vec<_>>()[..] {
                [claims] | [_, claims, _] => claims,
                _ => panic!("token {token} has 2 segments"),
            };
            let claims: Value = serde_json::from_slice(&URL_SAFE_NO_PAD.decode(body).unwrap())
                .expect("claims are JSON");
            assert_eq!(claims["iss"], v["delegated_by"]);
            assert_eq!(claims["sub"], v["delegated_to"]);
            assert_eq!(claims["task_id"], v["task_id"]);
            assert_eq!(claims["parent_task_id"], v["parent_task_id"]);
            assert!(claims["exp"].is_string() || claims["exp"].is_u64());
            assert!(claims["jti"].is_string());
        }
    }
    assert!(v01 > 100 && v02 > 100, "dialects: {v01} 0.1, {v02} 0.2");
    assert!(redelivered > 0 && handoffs > 0);
}

/// The analyzer on a generated log finds every planted case and nothing
/// else, with opaque and with structured tokens.
#[test]
fn audit_finds_exactly_the_planted_cases() {
    let (log, truth, _) = run(&options(2024, 3 << 19, true));
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("synth.ndjson");
    std::fs::write(&path, &log).expect("write log");
    for format in [TokenFormat::Opaque, TokenFormat::Structured] {
        let cfg = AuditConfig {
            reading: hvaudit::tables::ReadingOptions {
                ingest: hvaudit::ingest::IngestOptions {
                    token_format: format,
                    ..crate::common::test_reading()
                },
                ..crate::common::reading_options(vec![path.clone()])
            },
            ..Default::default()
        };
        let report = Audit::new(cfg.clone()).run().expect("audit runs");
        let expected: Vec<&Value> = truth
            .iter()
            .filter(|t| format == TokenFormat::Structured || t["requires"].is_null())
            .collect();
        let mut matched = vec![false; report.findings.len()];
        let mut missed = Vec::new();
        for t in &expected {
            let mut hit = false;
            for (i, f) in report.findings.iter().enumerate() {
                let same = match t["event_id"].as_str() {
                    Some(id) => f.event_ids.iter().any(|e| e == id),
                    None => f
                        .locations
                        .iter()
                        .any(|l| Some(l.line) == t["line"].as_u64()),
                };
                if f.rule == t["rule"].as_str().unwrap() && same {
                    matched[i] = true;
                    hit = true;
                }
            }
            if !hit {
                missed.push(t.to_string());
            }
        }
        let extra: Vec<String> = report
            .findings
            .iter()
            .zip(&matched)
            .filter(|(_, m)| !**m)
            .map(|(f, _)| format!("{} {:?}: {}", f.rule, f.event_ids, f.message))
            .collect();
        assert!(
            missed.is_empty() && extra.is_empty(),
            "{format:?} tokens: missed {missed:#?}\nunexpected {extra:#?}"
        );
    }
}
