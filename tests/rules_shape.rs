//! Rule tests: decision, provenance, integrity, envelope, subscription, payload.
//!
//! Each rule gets a log where it fires and, in the same log where possible,
//! a legal look-alike next to it that must stay silent.

use crate::common::{audit_lines, findings_of};
use hvaudit::{Report, Severity};
use serde_json::{Value, json};

/// A Harmovela 0.2 envelope line. `at` is "HH:MM:SS" on 2026-07-14 (UTC);
/// `extra` is merged into the envelope (a "payload" key replaces `{}`).
fn ev(id: &str, ty: &str, at: &str, extra: Value) -> String {
    envelope(json!({"spec_version": "0.2"}), id, ty, at, extra)
}

/// The same as an AEP 0.1 envelope (aep_version).
fn ev01(id: &str, ty: &str, at: &str, extra: Value) -> String {
    envelope(json!({"aep_version": "0.1"}), id, ty, at, extra)
}

fn envelope(version: Value, id: &str, ty: &str, at: &str, extra: Value) -> String {
    let mut e = version;
    let m = e.as_object_mut().unwrap();
    m.insert("id".into(), json!(id));
    m.insert("type".into(), json!(ty));
    m.insert("source".into(), json!("agent:test"));
    m.insert("created_at".into(), json!(format!("2026-07-14T{at}Z")));
    m.insert("payload".into(), json!({}));
    if let Value::Object(x) = extra {
        m.extend(x);
    }
    e.to_string()
}

/// An evidence_chain naming these event ids.
fn chain(ids: &[&str]) -> Value {
    Value::Array(
        ids.iter()
            .map(|id| json!({"source": "agent:test", "id": id}))
            .collect(),
    )
}

fn audit(lines: &[String]) -> Report {
    audit_lines(lines, |_| {})
}

/// (task, event ids) of one finding.
fn f(task: Option<&str>, ids: &[&str]) -> (Option<String>, Vec<String>) {
    (
        task.map(String::from),
        ids.iter().map(|s| s.to_string()).collect(),
    )
}

fn sorted(mut v: Vec<(Option<String>, Vec<String>)>) -> Vec<(Option<String>, Vec<String>)> {
    v.sort();
    v
}

/// Severity of every finding of `rule`, keyed by its first event id.
fn severities(report: &Report, rule: &str) -> Vec<(String, Severity)> {
    let mut v: Vec<(String, Severity)> = report
        .findings
        .iter()
        .filter(|f| f.rule == rule)
        .map(|f| (f.event_ids.first().cloned().unwrap_or_default(), f.severity))
        .collect();
    v.sort();
    v
}

fn message_of(report: &Report, rule: &str) -> String {
    report
        .findings
        .iter()
        .find(|f| f.rule == rule)
        .unwrap_or_else(|| panic!("no {rule} finding"))
        .message
        .clone()
}

const MY_RULES: &[&str] = &[
    "decision.unverified_basis",
    "decision.retracted_basis",
    "decision.stale_basis",
    "decision.contested_basis",
    "provenance.chain_mismatch",
    "provenance.chain_unordered",
    "integrity.conflicting_duplicate",
    "envelope.invalid",
    "envelope.unknown_type",
    "envelope.unsupported_version",
    "envelope.legacy_version_field",
    "subscription.no_filter",
    "payload.invalid",
];

/// The findings of this module's rules, as (rule, event ids), sorted.
fn my_findings(report: &Report) -> Vec<(String, Vec<String>)> {
    let mut v: Vec<(String, Vec<String>)> = report
        .findings
        .iter()
        .filter(|f| MY_RULES.contains(&f.rule.as_str()))
        .map(|f| (f.rule.clone(), f.event_ids.clone()))
        .collect();
    v.sort();
    v
}

fn no_rule_errors(report: &Report) {
    let mine: Vec<_> = report
        .rule_errors
        .iter()
        .filter(|(id, _)| MY_RULES.contains(&id.as_str()))
        .collect();
    assert!(mine.is_empty(), "rule errors: {mine:?}");
}

// ---------------------------------------------------------------- decisions

#[test]
fn unverified_basis_fires_when_every_trusted_basis_is_unverified_and_not_when_one_is_verified() {
    let log = [
        ev(
            "plain",
            "context.updated",
            "12:00:00",
            json!({"payload": {"context_key": "k"}}),
        ),
        ev(
            "checked",
            "memory.fact.added",
            "12:00:00",
            json!({"source_trust": "verified", "payload": {"fact_id": "f2"}}),
        ),
        ev(
            "rumour",
            "memory.fact.added",
            "12:00:01",
            json!({"source_trust": "unverified", "payload": {"fact_id": "f1"}}),
        ),
        // only unverified (plus one event without source_trust): fires
        ev(
            "act_1",
            "tool.call.requested",
            "12:00:05",
            json!({"task_id": "task_1", "causation_id": "rumour", "evidence_chain": chain(&["plain", "rumour"])}),
        ),
        // the same, with one verified basis event next to it: silent
        ev(
            "act_2",
            "tool.call.requested",
            "12:00:06",
            json!({"task_id": "task_2", "causation_id": "rumour", "evidence_chain": chain(&["checked", "rumour"])}),
        ),
        // no basis event asserts any trust: silent
        ev(
            "act_3",
            "command.requested",
            "12:00:07",
            json!({"task_id": "task_3", "causation_id": "plain"}),
        ),
    ];
    let r = audit(&log);
    no_rule_errors(&r);
    assert_eq!(
        findings_of(&r, "decision.unverified_basis"),
        vec![f(Some("task_1"), &["act_1", "rumour"])]
    );
    assert!(message_of(&r, "decision.unverified_basis").contains("unverified"));
}

#[test]
fn unverified_basis_only_looks_at_configured_decision_types() {
    let log = [
        ev(
            "rumour",
            "memory.fact.added",
            "12:00:00",
            json!({"source_trust": "unverified", "payload": {"fact_id": "f1"}}),
        ),
        ev(
            "act_1",
            "tool.call.requested",
            "12:00:05",
            json!({"task_id": "task_1", "causation_id": "rumour"}),
        ),
        ev(
            "dec_1",
            "agent.decision.recorded",
            "12:00:06",
            json!({"task_id": "task_1", "causation_id": "rumour"}),
        ),
    ];
    let r = audit_lines(&log, |cfg| {
        cfg.decision_types = Some(vec!["agent.decision.recorded".into()])
    });
    assert_eq!(
        findings_of(&r, "decision.unverified_basis"),
        vec![f(Some("task_1"), &["dec_1", "rumour"])]
    );
}

#[test]
fn unresolved_basis_references_are_counted_once_per_decision_and_id_and_self_entries_ignored() {
    let log = [
        ev(
            "rumour",
            "memory.fact.added",
            "12:00:00",
            json!({"source_trust": "unverified", "payload": {"fact_id": "f1"}}),
        ),
        // missing_1 named twice (causation and chain): one unresolved pair;
        // missing_2 once; the chain entry naming act_1 itself is not basis
        ev(
            "act_1",
            "command.requested",
            "12:00:05",
            json!({"task_id": "task_1", "causation_id": "missing_1", "evidence_chain": chain(&["missing_2", "rumour", "missing_1", "act_1"])}),
        ),
        // not a decision: its dangling references are not counted
        ev(
            "note",
            "context.updated",
            "12:00:06",
            json!({"causation_id": "missing_3", "payload": {"context_key": "k"}}),
        ),
    ];
    let r = audit(&log);
    assert_eq!(r.unresolved_basis, 2);
    // the missing events are never guessed at: the found basis is all unverified
    assert_eq!(
        findings_of(&r, "decision.unverified_basis"),
        vec![f(Some("task_1"), &["act_1", "rumour"])]
    );
}

#[test]
fn retracted_basis_fires_after_the_retraction_and_not_before_it() {
    let log = [
        ev(
            "fact",
            "memory.fact.added",
            "12:00:00",
            json!({"payload": {"fact_id": "f1", "value": "x"}}),
        ),
        // decided before the retraction: silent
        ev(
            "act_early",
            "command.requested",
            "12:00:01",
            json!({"task_id": "task_1", "causation_id": "fact"}),
        ),
        ev(
            "retract",
            "memory.fact.invalidated",
            "12:00:02",
            json!({"belief_status": "retracted", "payload": {"fact_id": "f1"}}),
        ),
        // decided at the retraction's very instant: not strictly after, silent
        ev(
            "act_same",
            "command.requested",
            "12:00:02",
            json!({"task_id": "task_1", "causation_id": "fact"}),
        ),
        // decided after the retraction on the retracted fact: fires
        ev(
            "act_late",
            "command.requested",
            "12:00:05",
            json!({"task_id": "task_1", "evidence_chain": chain(&["fact"])}),
        ),
    ];
    let r = audit(&log);
    no_rule_errors(&r);
    assert_eq!(
        findings_of(&r, "decision.retracted_basis"),
        vec![f(Some("task_1"), &["act_late", "fact", "retract"])]
    );
    assert!(message_of(&r, "decision.retracted_basis").contains("retract"));
}

#[test]
fn retracted_basis_follows_the_retractions_causation_and_ignores_mere_revisions() {
    let log = [
        ev("obs", "environment.observed", "12:00:00", json!({})),
        ev(
            "fact",
            "memory.fact.added",
            "12:00:00",
            json!({"payload": {"fact_id": "f2"}}),
        ),
        // retraction linked by causation_id to the basis event
        ev(
            "retract",
            "memory.fact.invalidated",
            "12:00:01",
            json!({"belief_status": "retracted", "causation_id": "obs", "payload": {"fact_id": "other"}}),
        ),
        // an invalidation that is a revision, not a retraction
        ev(
            "revise",
            "memory.fact.invalidated",
            "12:00:01",
            json!({"belief_status": "revised", "payload": {"fact_id": "f2"}}),
        ),
        ev(
            "act_1",
            "agent.decision.recorded",
            "12:00:05",
            json!({"task_id": "task_1", "causation_id": "obs"}),
        ),
        ev(
            "act_2",
            "agent.decision.recorded",
            "12:00:05",
            json!({"task_id": "task_2", "causation_id": "fact"}),
        ),
    ];
    let r = audit(&log);
    assert_eq!(
        findings_of(&r, "decision.retracted_basis"),
        vec![f(Some("task_1"), &["act_1", "obs", "retract"])]
    );
}

#[test]
fn stale_basis_fires_after_the_staleness_point_and_not_exactly_at_it() {
    let log = [
        ev(
            "snap",
            "context.snapshot.ready",
            "12:00:00",
            json!({"stale_after": "PT30S"}),
        ),
        ev(
            "fact",
            "memory.fact.added",
            "12:00:00",
            json!({"valid_until": "2026-07-14T12:00:10Z", "stale_after": "PT1H", "payload": {"fact_id": "f1"}}),
        ),
        // exactly at the staleness point: still valid
        ev(
            "act_on_time",
            "tool.call.requested",
            "12:00:30",
            json!({"task_id": "task_1", "causation_id": "snap"}),
        ),
        // after: stale (stale_after)
        ev(
            "act_late",
            "tool.call.requested",
            "12:01:00",
            json!({"task_id": "task_2", "causation_id": "snap"}),
        ),
        // valid_until is earlier than created_at + stale_after: stale since 12:00:10
        ev(
            "act_fact",
            "tool.call.requested",
            "12:00:11",
            json!({"task_id": "task_3", "evidence_chain": chain(&["fact"])}),
        ),
    ];
    let r = audit(&log);
    no_rule_errors(&r);
    assert_eq!(
        sorted(findings_of(&r, "decision.stale_basis")),
        vec![
            f(Some("task_2"), &["act_late", "snap"]),
            f(Some("task_3"), &["act_fact", "fact"])
        ]
    );
}

#[test]
fn contested_basis_fires_until_a_revision_resolves_the_conflict() {
    let log = [
        ev(
            "fact_a",
            "memory.fact.added",
            "12:00:00",
            json!({"payload": {"fact_id": "fa"}}),
        ),
        ev(
            "fact_b",
            "memory.fact.added",
            "12:00:00",
            json!({"payload": {"fact_id": "fb"}}),
        ),
        // conflict on fact_a, never resolved
        ev(
            "conflict_a",
            "belief.conflict.detected",
            "12:00:01",
            json!({"causation_id": "fact_a", "payload": {"subject": "a", "claims": []}}),
        ),
        // conflict on fact_b (via its evidence_chain), resolved at 12:00:04
        ev(
            "conflict_b",
            "belief.conflict.detected",
            "12:00:01",
            json!({"evidence_chain": chain(&["fact_b"]), "payload": {"subject": "b", "claims": []}}),
        ),
        ev(
            "act_a",
            "agent.decision.recorded",
            "12:00:02",
            json!({"task_id": "task_1", "causation_id": "fact_a"}),
        ),
        // acted on fact_b before the revision: fires
        ev(
            "act_b_early",
            "agent.decision.recorded",
            "12:00:03",
            json!({"task_id": "task_2", "causation_id": "fact_b"}),
        ),
        ev(
            "revised_b",
            "belief.revised",
            "12:00:04",
            json!({"causation_id": "conflict_b", "payload": {}}),
        ),
        // acted on fact_b after the revision: silent
        ev(
            "act_b_late",
            "agent.decision.recorded",
            "12:00:05",
            json!({"task_id": "task_3", "causation_id": "fact_b"}),
        ),
    ];
    let r = audit(&log);
    no_rule_errors(&r);
    assert_eq!(
        sorted(findings_of(&r, "decision.contested_basis")),
        vec![
            f(Some("task_1"), &["act_a", "fact_a", "conflict_a"]),
            f(Some("task_2"), &["act_b_early", "fact_b", "conflict_b"]),
        ]
    );
}

#[test]
fn contested_basis_ignores_a_conflict_raised_after_the_decision() {
    let log = [
        ev(
            "fact_a",
            "memory.fact.added",
            "12:00:00",
            json!({"payload": {"fact_id": "fa"}}),
        ),
        ev(
            "act_a",
            "agent.decision.recorded",
            "12:00:02",
            json!({"task_id": "task_1", "causation_id": "fact_a"}),
        ),
        ev(
            "conflict_a",
            "belief.conflict.detected",
            "12:00:03",
            json!({"causation_id": "fact_a", "payload": {"subject": "a", "claims": []}}),
        ),
    ];
    let r = audit(&log);
    assert!(findings_of(&r, "decision.contested_basis").is_empty());
}

// --------------------------------------------------------------- provenance

#[test]
fn chain_mismatch_fires_when_the_chain_does_not_end_with_the_causation() {
    let log = [
        ev("origin", "environment.observed", "12:00:00", json!({})),
        ev("cause", "environment.observed", "12:00:01", json!({})),
        // ends with origin, not with the causation: fires
        ev(
            "bad",
            "provenance.attestation.added",
            "12:00:05",
            json!({"causation_id": "cause", "evidence_chain": chain(&["cause", "origin"])}),
        ),
        // ends with the causation: silent
        ev(
            "good",
            "provenance.attestation.added",
            "12:00:05",
            json!({"causation_id": "cause", "evidence_chain": chain(&["origin", "cause"])}),
        ),
        // ends with the event itself after the causation (the spec's own example): silent
        ev(
            "selfish",
            "provenance.attestation.added",
            "12:00:05",
            json!({"causation_id": "cause", "evidence_chain": chain(&["origin", "cause", "selfish"])}),
        ),
        // chain without causation_id: nothing to compare, silent
        ev(
            "loose",
            "provenance.attestation.added",
            "12:00:05",
            json!({"evidence_chain": chain(&["cause", "origin"])}),
        ),
    ];
    let r = audit(&log);
    no_rule_errors(&r);
    assert_eq!(
        findings_of(&r, "provenance.chain_mismatch"),
        vec![f(None, &["bad", "cause", "origin"])]
    );
}

#[test]
fn chain_unordered_fires_on_entries_out_of_time_order_and_skips_missing_ones() {
    let log = [
        ev("first", "environment.observed", "12:00:00", json!({})),
        ev("second", "environment.observed", "12:00:01", json!({})),
        ev("twin", "environment.observed", "12:00:01", json!({})),
        // second before first in the chain: fires
        ev(
            "backwards",
            "provenance.attestation.added",
            "12:00:05",
            json!({"causation_id": "first", "evidence_chain": chain(&["second", "first"])}),
        ),
        // a missing entry in between and equal instants: silent
        ev(
            "forwards",
            "provenance.attestation.added",
            "12:00:05",
            json!({"causation_id": "twin", "evidence_chain": chain(&["first", "not_in_log", "second", "twin"])}),
        ),
    ];
    let r = audit(&log);
    no_rule_errors(&r);
    assert_eq!(
        findings_of(&r, "provenance.chain_unordered"),
        vec![f(None, &["backwards", "second", "first"])]
    );
}

// ---------------------------------------------------------------- integrity

#[test]
fn conflicting_duplicate_fires_on_different_content_but_not_on_a_redelivery() {
    let first = ev(
        "evt_1",
        "task.submitted",
        "12:00:00",
        json!({"task_id": "task_1", "payload": {"task_id": "task_1", "x": 1}}),
    );
    // the same JSON value with other key order and white space: a redelivery
    let redelivery = r#"{ "payload": {"x": 1, "task_id": "task_1"}, "task_id": "task_1", "created_at": "2026-07-14T12:00:00Z",
        "source": "agent:test", "type": "task.submitted", "id": "evt_1", "spec_version": "0.2" }"#
        .replace('\n', "");
    let conflicting = ev(
        "evt_1",
        "task.completed",
        "12:00:09",
        json!({"task_id": "task_1", "payload": {"task_id": "task_1"}}),
    );
    let log = [first, redelivery, conflicting];
    let r = audit(&log);
    no_rule_errors(&r);
    assert_eq!(
        findings_of(&r, "integrity.conflicting_duplicate"),
        vec![f(Some("task_1"), &["evt_1"])]
    );
    let finding = r
        .findings
        .iter()
        .find(|f| f.rule == "integrity.conflicting_duplicate")
        .unwrap();
    // every version, in version order (both carry the id evt_1, which the
    // report lists once)
    let lines: Vec<u64> = finding.locations.iter().map(|l| l.line).collect();
    assert_eq!(lines, vec![1, 3]);
    assert!(
        finding.message.contains("differing: type, created_at"),
        "{}",
        finding.message
    );
    assert_eq!(r.totals().redeliveries, 1);
}

// ----------------------------------------------------------------- envelope

#[test]
fn envelope_invalid_reports_each_bad_line_and_the_rest_is_still_audited() {
    let log = [
        ev("ok_1", "task.submitted", "12:00:00", json!({"task_id": "task_1", "payload": {"task_id": "task_1"}})),
        // no version field
        r#"{"id":"evt_x","type":"task.progress","source":"agent:test","created_at":"2026-07-14T12:00:01Z","payload":{}}"#.to_string(),
        "this is not json".to_string(),
        // still audited after the bad lines
        ev("odd", "com.example.custom", "12:00:02", json!({})),
    ];
    let r = audit(&log);
    no_rule_errors(&r);
    let mut lines: Vec<u64> = r
        .findings
        .iter()
        .filter(|f| f.rule == "envelope.invalid")
        .map(|f| f.locations[0].line)
        .collect();
    lines.sort();
    assert_eq!(lines, vec![2, 3]);
    assert_eq!(
        findings_of(&r, "envelope.unknown_type"),
        vec![f(None, &["odd"])]
    );
}

#[test]
fn unknown_type_is_medium_in_0_2_info_in_0_1_and_silent_for_registered_types() {
    let log = [
        ev("custom", "com.example.custom.event", "12:00:00", json!({})),
        // registered in 0.2
        ev(
            "cmd_02",
            "command.requested",
            "12:00:01",
            json!({"payload": {"command": "x"}}),
        ),
        // command.* is not in the 0.1 registry
        ev01(
            "cmd_01",
            "command.requested",
            "12:00:02",
            json!({"payload": {"command": "x"}}),
        ),
        ev01(
            "custom_01",
            "com.example.custom.event",
            "12:00:03",
            json!({}),
        ),
        // registered in both
        ev01("hb_01", "session.heartbeat", "12:00:04", json!({})),
    ];
    let r = audit(&log);
    no_rule_errors(&r);
    assert_eq!(
        severities(&r, "envelope.unknown_type"),
        vec![
            ("cmd_01".to_string(), Severity::Info),
            ("custom".to_string(), Severity::Medium),
            ("custom_01".to_string(), Severity::Info),
        ]
    );
}

#[test]
fn unsupported_version_fires_on_unknown_versions_only() {
    let log = [
        ev("ok_02", "session.heartbeat", "12:00:00", json!({})),
        ev01("ok_01", "session.heartbeat", "12:00:01", json!({})),
        envelope(
            json!({"spec_version": "9.9"}),
            "v99",
            "session.heartbeat",
            "12:00:02",
            json!({}),
        ),
        envelope(
            json!({"aep_version": "0.3"}),
            "v03",
            "session.heartbeat",
            "12:00:03",
            json!({}),
        ),
    ];
    let r = audit(&log);
    no_rule_errors(&r);
    assert_eq!(
        sorted(findings_of(&r, "envelope.unsupported_version")),
        vec![f(None, &["v03"]), f(None, &["v99"])]
    );
}

#[test]
fn legacy_version_field_fires_on_a_0_2_event_that_also_carries_aep_version() {
    let log = [
        ev(
            "both",
            "session.heartbeat",
            "12:00:00",
            json!({"aep_version": "0.1"}),
        ),
        ev("new", "session.heartbeat", "12:00:01", json!({})),
        ev01("old", "session.heartbeat", "12:00:02", json!({})),
    ];
    let r = audit(&log);
    no_rule_errors(&r);
    assert_eq!(
        findings_of(&r, "envelope.legacy_version_field"),
        vec![f(None, &["both"])]
    );
    assert_eq!(
        severities(&r, "envelope.legacy_version_field"),
        vec![("both".to_string(), Severity::Low)]
    );
    // aep_version "0.1" beside spec_version is the legacy field, not an unsupported version
    assert!(findings_of(&r, "envelope.unsupported_version").is_empty());
}

// ------------------------------------------------------ subscription, payload

#[test]
fn no_filter_fires_on_a_filterless_subscription_and_not_on_filtered_ones() {
    let log = [
        ev(
            "bare",
            "subscription.requested",
            "12:00:00",
            json!({"target": "harness:aep"}),
        ),
        ev(
            "empty",
            "subscription.requested",
            "12:00:01",
            json!({"payload": {"types": []}}),
        ),
        ev(
            "typed",
            "subscription.requested",
            "12:00:02",
            json!({"payload": {"types": ["task.*"]}}),
        ),
        ev(
            "nested",
            "subscription.requested",
            "12:00:03",
            json!({"payload": {"filter": {"topic": "tasks.alpha"}}}),
        ),
        ev(
            "by_source",
            "subscription.requested",
            "12:00:04",
            json!({"payload": {"source": "agent:x"}}),
        ),
    ];
    let r = audit(&log);
    no_rule_errors(&r);
    assert_eq!(
        sorted(findings_of(&r, "subscription.no_filter")),
        vec![f(None, &["bare"]), f(None, &["empty"])]
    );
}

#[test]
fn payload_invalid_fires_on_a_schema_violation_only() {
    let log = [
        ev("no_key", "context.invalidated", "12:00:00", json!({})),
        ev(
            "with_key",
            "context.invalidated",
            "12:00:01",
            json!({"payload": {"context_key": "k"}}),
        ),
        // task payloads have no schema
        ev(
            "free",
            "task.progress",
            "12:00:02",
            json!({"task_id": "task_1", "payload": {"anything": true}}),
        ),
    ];
    let r = audit(&log);
    no_rule_errors(&r);
    assert_eq!(
        findings_of(&r, "payload.invalid"),
        vec![f(None, &["no_key"])]
    );
    assert!(message_of(&r, "payload.invalid").contains("context_key"));
}

// ------------------------------------------------------- upstream fixtures
//
// Lines copied from the Harmovela protocol's conformance fixtures
// (axisrobo/aep at 7ea3a85, harmovela-0.2/fixtures/, Apache License 2.0).

fn lines(s: &str) -> Vec<String> {
    s.lines().map(str::to_string).collect()
}

const NEGATIVE: &str = r#"{"spec_version":"0.2","id":"evt_neg_001","type":"invalid.event.type","source":"agent:test","created_at":"2026-07-10T10:00:00Z","payload":{}}
{"id":"evt_neg_002","type":"task.progress","source":"agent:test","created_at":"2026-07-10T10:00:00Z","payload":{}}
{"spec_version":"9.9","id":"evt_neg_003","type":"task.progress","source":"agent:test","created_at":"2026-07-10T10:00:00Z","payload":{}}"#;

const REJECT_UNKNOWN_EVENTS: &str = r#"{"spec_version":"0.2","id":"evt_unknown_001","type":"com.example.custom.event","source":"agent:test","created_at":"2026-07-14T10:00:00Z","payload":{}}
{"spec_version":"0.2","id":"evt_unknown_002","type":"some.unknown.namespace.event","source":"agent:test","created_at":"2026-07-14T10:00:01Z","payload":{}}"#;

const REJECT_SOME_PAYLOAD: &str = r#"{"spec_version":"0.2","id":"evt_reject_payload_001","type":"context.invalidated","source":"agent:test","created_at":"2026-07-13T10:00:00Z","payload":{}}"#;

const REJECT_SOME_PROTOCOL: &str = r#"{"spec_version":"0.2","id":"evt_reject_subscription_001","type":"subscription.requested","source":"agent:test","created_at":"2026-07-13T10:00:00Z","payload":{}}"#;

const MEMORY_CONTEXT_ACK: &str = r#"{"spec_version":"0.2","id":"evt_sub_001","type":"subscription.requested","source":"agent:researcher","target":"harness:aep","session_id":"sess_01","conversation_id":"conv_01","created_at":"2026-07-09T10:00:00Z","payload":{"types":["memory.*","context.*"],"target":"agent:researcher","conversation_id":"conv_01"}}
{"spec_version":"0.2","id":"evt_memory_001","type":"memory.fact.added","source":"memory:main","target":"agent:researcher","session_id":"sess_01","conversation_id":"conv_01","created_at":"2026-07-09T10:00:05Z","payload":{"fact_id":"fact_01","value":"AEP is the event layer.","source":"user_input"}}
{"spec_version":"0.2","id":"evt_context_001","type":"context.invalidated","source":"context:main","target":"agent:researcher","session_id":"sess_01","conversation_id":"conv_01","created_at":"2026-07-09T10:00:06Z","payload":{"context_key":"memory_retrieval","reason":"memory update changed retrieval set"}}
{"spec_version":"0.2","id":"evt_ack_001","type":"event.acknowledged","source":"agent:researcher","target":"memory:main","session_id":"sess_01","conversation_id":"conv_01","causation_id":"evt_memory_001","created_at":"2026-07-09T10:00:07Z","payload":{"acknowledged_event_id":"evt_memory_001"}}"#;

const SESSION_FLOW: &str = r#"{"spec_version":"0.2","id":"evt_cap_001","type":"capabilities.requested","source":"agent:researcher","target":"harness:aep","session_id":"sess_01","created_at":"2026-07-09T10:00:00Z","payload":{}}
{"spec_version":"0.2","id":"evt_sess_001","type":"session.opened","source":"agent:researcher","target":"harness:aep","session_id":"sess_01","created_at":"2026-07-09T10:00:01Z","payload":{"session_id":"sess_01","version":"0.1"}}
{"spec_version":"0.2","id":"evt_sub_001","type":"subscription.requested","source":"agent:researcher","target":"harness:aep","session_id":"sess_01","created_at":"2026-07-09T10:00:02Z","payload":{"types":["task.*","context.*"],"target":"agent:researcher"}}
{"spec_version":"0.2","id":"evt_close_001","type":"session.closed","source":"agent:researcher","target":"harness:aep","session_id":"sess_01","created_at":"2026-07-09T10:05:00Z","payload":{"session_id":"sess_01","reason":"done"}}"#;

const AGENT_RUNTIME_SEMANTICS: &str = r#"{"spec_version":"0.2","id":"evt_belief_01","type":"belief.revised","source":"agent:planner","belief_status":"revised","belief_scope":"fact","confidence":0.95,"created_at":"2026-07-10T10:00:00Z","payload":{"previous":"The project deadline is 2026-07-15","corrected":"The project deadline is 2026-07-22"}}
{"spec_version":"0.2","id":"evt_deleg_03","type":"delegation.handoff.completed","source":"agent:planner","delegated_by":"agent:planner","delegated_to":"agent:worker","parent_task_id":"task_01","task_id":"task_02","handoff_token":"ht_abc123","created_at":"2026-07-10T10:03:00Z","payload":{}}
{"spec_version":"0.2","id":"evt_comp_01","type":"compensation.requested","source":"orchestrator:main","compensation_id":"task_01","task_id":"task_comp_01","created_at":"2026-07-10T10:05:03Z","payload":{"reason":"rollback partial effects","description":"rollback partial effects from indexing"}}
{"spec_version":"0.2","id":"evt_prov_01","type":"provenance.attestation.added","source":"agent:verifier","causation_id":"evt_belief_01","evidence_chain":[{"source":"sensor:a","id":"evt_001"},{"source":"agent:planner","id":"evt_belief_01"}],"source_trust":"attested","attestation_count":1,"data_provenance":"https://schemas.axisrobo.com/provenance/evt_belief_01","created_at":"2026-07-10T10:06:00Z","payload":{"attestor":"agent:verifier","method":"cross_reference"}}"#;

#[test]
fn upstream_negative_fixture_names_each_of_its_three_events() {
    let r = audit(&lines(NEGATIVE));
    no_rule_errors(&r);
    assert_eq!(
        my_findings(&r)
            .into_iter()
            .filter(|(rule, _)| rule != "envelope.invalid")
            .collect::<Vec<_>>(),
        vec![
            (
                "envelope.unknown_type".to_string(),
                vec!["evt_neg_001".to_string()]
            ),
            (
                "envelope.unsupported_version".to_string(),
                vec!["evt_neg_003".to_string()]
            ),
        ]
    );
    // evt_neg_002 has no version field: a bad line, reported at its line
    let bad: Vec<u64> = r
        .findings
        .iter()
        .filter(|f| f.rule == "envelope.invalid")
        .map(|f| f.locations[0].line)
        .collect();
    assert_eq!(bad, vec![2]);
    assert_eq!(
        severities(&r, "envelope.unknown_type"),
        vec![("evt_neg_001".to_string(), Severity::Medium)]
    );
}

#[test]
fn upstream_reject_fixtures_are_flagged() {
    let r = audit(&lines(REJECT_UNKNOWN_EVENTS));
    assert_eq!(
        my_findings(&r),
        vec![
            (
                "envelope.unknown_type".to_string(),
                vec!["evt_unknown_001".to_string()]
            ),
            (
                "envelope.unknown_type".to_string(),
                vec!["evt_unknown_002".to_string()]
            ),
        ]
    );
    let r = audit(&lines(REJECT_SOME_PAYLOAD));
    assert_eq!(
        my_findings(&r),
        vec![(
            "payload.invalid".to_string(),
            vec!["evt_reject_payload_001".to_string()]
        )]
    );
    let r = audit(&lines(REJECT_SOME_PROTOCOL));
    assert_eq!(
        my_findings(&r),
        vec![(
            "subscription.no_filter".to_string(),
            vec!["evt_reject_subscription_001".to_string()]
        )]
    );
}

#[test]
fn upstream_valid_fixtures_stay_silent_for_these_rules() {
    for (name, fixture) in [
        ("memory-context-ack", MEMORY_CONTEXT_ACK),
        ("session-flow", SESSION_FLOW),
        ("agent-runtime-semantics (excerpt)", AGENT_RUNTIME_SEMANTICS),
    ] {
        let r = audit(&lines(fixture));
        no_rule_errors(&r);
        assert_eq!(my_findings(&r), vec![], "{name}");
    }
}

/// More findings than one `IN` list holds are located by one scan: every
/// finding still names its own event and line.
#[test]
fn thousands_of_findings_each_cite_their_own_line() {
    let n = 5000;
    let lines: Vec<String> = (0..n)
        .map(|i| {
            format!(
                r#"{{"spec_version":"0.2","id":"evt_{i:05}","type":"vendor.custom_probe","source":"agent:probe","session_id":"s","created_at":"2026-07-14T10:{:02}:{:02}.000Z","payload":{{}}}}"#,
                i / 60 % 60,
                i % 60
            )
        })
        .collect();
    let r = audit_lines(&lines, |_| {});
    let found: Vec<_> = r
        .findings
        .iter()
        .filter(|f| f.rule == "envelope.unknown_type")
        .map(|f| (f.event_ids.clone(), f.locations[0].line))
        .collect();
    assert_eq!(found.len(), n);
    for (ids, line) in found {
        let i: u64 = ids[0].trim_start_matches("evt_").parse().unwrap();
        assert_eq!(line, i + 1, "{ids:?}");
    }
}
