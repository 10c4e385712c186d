//! Rule tests: orphan, parent, token, checkpoint, lifecycle families.
//!
//! Each rule gets a log where it fires and, next to it, a legal look-alike
//! that must stay silent. Logs are written as timelines, one event a line:
//!
//! ```text
//! "ID TYPE HH:MM:SS[.fff] TASK [key=value ...]"
//! ```
//!
//! TASK is the envelope task_id (`-` for none); `key=value` sets an envelope
//! field, a dotted key a nested one (`payload.error.code=x`); integers stay
//! numbers. A task.* event gets payload.task_id = TASK unless the line sets
//! it or says `no_payload_task_id`. The day is 2026-07-14 (UTC).

use crate::common::{audit_lines, findings_of};
use base64::Engine as _;
use hvaudit::protocol::{SpecMode, TokenFormat};
use hvaudit::{Report, Severity};
use serde_json::{Value, json};

// ------------------------------------------------------------------ helpers

/// One Harmovela 0.2 event line from the timeline notation above.
fn line(spec: &str) -> String {
    envelope(json!({"spec_version": "0.2"}), spec)
}

/// The same as an AEP 0.1 event (aep_version).
fn line01(spec: &str) -> String {
    envelope(json!({"aep_version": "0.1"}), spec)
}

fn envelope(version: Value, spec: &str) -> String {
    let mut words = spec.split_whitespace();
    let mut next = |what: &str| words.next().unwrap_or_else(|| panic!("{spec}: no {what}"));
    let (id, ty, at, task) = (next("id"), next("type"), next("time"), next("task"));
    let mut e = version;
    e["id"] = json!(id);
    e["type"] = json!(ty);
    e["source"] = json!("agent:test");
    e["created_at"] = json!(format!("2026-07-14T{at}Z"));
    e["payload"] = json!({});
    if task != "-" {
        e["task_id"] = json!(task);
        if ty.starts_with("task.") {
            e["payload"]["task_id"] = json!(task);
        }
    }
    for kv in words {
        if kv == "no_payload_task_id" {
            e["payload"].as_object_mut().unwrap().remove("task_id");
            continue;
        }
        let (path, v) = kv
            .split_once('=')
            .unwrap_or_else(|| panic!("{spec}: {kv} is not k=v"));
        // a dotted key nests: payload.error.code=x is {"payload": {"error": {"code": "x"}}}
        let mut slot = &mut e;
        for k in path.split('.') {
            if !slot.is_object() {
                *slot = json!({});
            }
            slot = &mut slot[k];
        }
        *slot = v
            .parse::<i64>()
            .map(Value::from)
            .unwrap_or_else(|_| json!(v));
    }
    e.to_string()
}

fn lines(specs: &[&str]) -> Vec<String> {
    specs.iter().map(|s| line(s)).collect()
}

fn lines01(specs: &[&str]) -> Vec<String> {
    specs.iter().map(|s| line01(s)).collect()
}

/// submitted, accepted, started of a 0.2 task (ids PREFIX_sub, _acc, _start)
/// at 10:00:SEC and the next two seconds; `extra` goes onto task.submitted
/// (e.g. a parent link).
fn running(prefix: &str, task: &str, sec: u32, extra: &str) -> Vec<String> {
    running_specs(prefix, task, sec, extra)
        .iter()
        .map(|s| line(s))
        .collect()
}

/// The same in AEP 0.1.
fn running01(prefix: &str, task: &str, sec: u32, extra: &str) -> Vec<String> {
    running_specs(prefix, task, sec, extra)
        .iter()
        .map(|s| line01(s))
        .collect()
}

fn running_specs(prefix: &str, task: &str, sec: u32, extra: &str) -> [String; 3] {
    let at = |d: u32| format!("10:00:{:02}", sec + d);
    [
        format!("{prefix}_sub task.submitted {} {task} {extra}", at(0)),
        format!("{prefix}_acc task.accepted {} {task}", at(1)),
        format!("{prefix}_start task.started {} {task}", at(2)),
    ]
}

/// interruption.requested for TASK with policy save_and_stop and a 5 s grace period.
fn save_and_stop(id: &str, at: &str, task: &str) -> String {
    format!(
        "{id} interruption.requested {at} {task} interruption_policy=save_and_stop \
         payload.grace_period_ms=5000"
    )
}

/// The binding fields of a delegation of TASK under PARENT to TO, by agent:planner.
fn bind(task: &str, parent: &str, to: &str) -> String {
    format!("{task} parent_task_id={parent} delegated_by=agent:planner delegated_to={to}")
}

/// A structured handoff token: base64url JSON claims.
fn claims_token(claims: Value) -> String {
    base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(claims.to_string())
}

fn log(parts: Vec<Vec<String>>) -> Vec<String> {
    parts.into_iter().flatten().collect()
}

fn audit(lines: &[String]) -> Report {
    audit_lines(lines, |_| {})
}

/// (task, event ids) of one finding.
fn f(task: &str, ids: &[&str]) -> (Option<String>, Vec<String>) {
    (
        Some(task.to_string()),
        ids.iter().map(|s| s.to_string()).collect(),
    )
}

fn sorted(mut v: Vec<(Option<String>, Vec<String>)>) -> Vec<(Option<String>, Vec<String>)> {
    v.sort();
    v
}

fn messages(report: &Report, rule: &str) -> Vec<String> {
    report
        .findings
        .iter()
        .filter(|f| f.rule == rule)
        .map(|f| f.message.clone())
        .collect()
}

fn severity_of(report: &Report, rule: &str) -> Severity {
    report
        .findings
        .iter()
        .find(|f| f.rule == rule)
        .expect("a finding")
        .severity
}

const FAMILIES: &[&str] = &[
    "orphan.",
    "parent.",
    "token.",
    "checkpoint.",
    "lifecycle.",
    "delegation.",
];

fn mine(rule: &str) -> bool {
    FAMILIES.iter().any(|p| rule.starts_with(p))
}

/// Every finding of this module's families, as (rule, event ids), sorted.
fn my_findings(report: &Report) -> Vec<(String, Vec<String>)> {
    let mut v: Vec<(String, Vec<String>)> = report
        .findings
        .iter()
        .filter(|f| mine(&f.rule))
        .map(|f| (f.rule.clone(), f.event_ids.clone()))
        .collect();
    v.sort();
    v
}

/// No rule of these families, and no view, failed to run.
fn no_rule_errors(report: &Report) {
    let errors: Vec<_> = report
        .rule_errors
        .iter()
        .filter(|(id, _)| mine(id) || id.ends_with(".sql"))
        .collect();
    assert!(errors.is_empty(), "rule errors: {errors:?}");
}

// ------------------------------------------------------------------ orphan.*

#[test]
fn cancel_not_cascaded_fires_for_a_child_that_completes_after_its_parent_was_cancelled() {
    let child = "parent_task_id=task_p";
    let l = log(vec![
        running("p", "task_p", 0, ""),
        running("ok", "task_ok", 3, child),
        running("bad", "task_bad", 3, child),
        running("done", "task_done", 3, child),
        lines(&[
            // finished before the cancel: not concerned
            "done_end task.completed 10:00:06 task_done",
            "p_cancel task.cancelled 10:00:10 task_p",
            // the cascade the spec asks for: silent
            "ok_cancel task.cancelled 10:00:11 task_ok causation_id=p_cancel",
            // completes instead of being cancelled: fires
            "bad_end task.completed 10:00:12 task_bad",
        ]),
    ]);
    let r = audit(&l);
    no_rule_errors(&r);
    assert_eq!(
        findings_of(&r, "orphan.cancel_not_cascaded"),
        vec![f("task_bad", &["bad_end", "p_cancel", "bad_sub"])]
    );
    let msg = &messages(&r, "orphan.cancel_not_cascaded")[0];
    assert!(msg.contains("task_p"), "{msg}");
    assert!(
        msg.contains("task.completed at 2026-07-14T10:00:12.000Z"),
        "{msg}"
    );
}

#[test]
fn cancel_not_cascaded_waits_for_the_horizon_before_flagging_a_child_that_never_ends() {
    let l = log(vec![
        running("p", "task_p", 0, ""),
        running("c", "task_c", 3, "parent_task_id=task_p"),
        lines(&[
            "p_cancel task.cancelled 10:00:10 task_p",
            "tail session.heartbeat 10:00:40 -",
        ]),
    ]);
    let r = audit(&l);
    no_rule_errors(&r);
    assert_eq!(
        findings_of(&r, "orphan.cancel_not_cascaded"),
        vec![f("task_c", &["p_cancel", "c_sub"])]
    );
    // 30 s of log follow the cancel: enough for a 30 s horizon, not for 31 s
    let r = audit_lines(&l, |c| c.horizon_ms = Some(30_000));
    assert_eq!(findings_of(&r, "orphan.cancel_not_cascaded").len(), 1);
    let r = audit_lines(&l, |c| c.horizon_ms = Some(31_000));
    assert!(findings_of(&r, "orphan.cancel_not_cascaded").is_empty());
    assert!(
        findings_of(&r, "parent.terminated_early").is_empty(),
        "the cascade may still come"
    );
}

#[test]
fn outlived_parent_fires_for_a_02_child_still_emitting_after_its_parent_completed() {
    let child = "parent_task_id=task_p";
    let l = log(vec![
        running("p", "task_p", 0, ""),
        running("busy", "task_busy", 3, child),
        running("quiet", "task_quiet", 3, child),
        running("first", "task_first", 3, child),
        lines(&[
            // a child finishing first is the normal 0.2 pattern
            "first_end task.completed 10:00:08 task_first",
            "p_end task.completed 10:00:10 task_p",
            // any event with the child's task_id counts, not only task.*
            "busy_call tool.call.requested 10:00:11 task_busy",
            "busy_progress task.progress 10:00:12 task_busy",
            "busy_end task.completed 10:00:13 task_busy",
            // ends after the parent without emitting anything else: not an
            // orphan (parent.terminated_early reports the parent)
            "quiet_end task.completed 10:00:13 task_quiet",
        ]),
    ]);
    let r = audit(&l);
    no_rule_errors(&r);
    assert_eq!(
        findings_of(&r, "orphan.outlived_parent"),
        vec![f("task_busy", &["busy_call", "p_end", "busy_sub"])]
    );
    assert!(messages(&r, "orphan.outlived_parent")[0].contains("2 more non-terminal event(s)"));
}

#[test]
fn outlived_parent_in_01_only_flags_a_child_that_never_ends() {
    let child = "parent_task_id=task_p";
    let l = log(vec![
        running01("p", "task_p", 0, ""),
        running01("late", "task_late", 3, child),
        running01("lost", "task_lost", 3, child),
        lines01(&[
            "p_end task.completed 10:00:10 task_p",
            // 0.1: finishing after the parent is the rule, even with progress
            "late_progress task.progress 10:00:11 task_late",
            "late_end task.completed 10:00:12 task_late",
            "lost_progress task.progress 10:00:12 task_lost",
        ]),
    ]);
    let r = audit(&l);
    no_rule_errors(&r);
    assert_eq!(
        findings_of(&r, "orphan.outlived_parent"),
        vec![f("task_lost", &["p_end", "lost_sub"])]
    );
    assert!(
        findings_of(&r, "parent.terminated_early").is_empty(),
        "not 0.2's rule"
    );
    assert!(findings_of(&r, "parent.child_terminated_first").is_empty());
}

#[test]
fn cascade_unlinked_fires_when_a_childs_cancel_names_neither_the_parents_cancel_nor_its_request() {
    let child = "parent_task_id=task_p";
    let l = log(vec![
        running("p", "task_p", 0, ""),
        running("a", "task_a", 3, child),
        running("b", "task_b", 3, child),
        running("c", "task_c", 3, child),
        running("d", "task_d", 3, child),
        lines(&[
            "p_req task.cancel.requested 10:00:08 task_p",
            "p_cancel task.cancelled 10:00:10 task_p",
            "a_cancel task.cancelled 10:00:11 task_a causation_id=p_cancel",
            "b_cancel task.cancelled 10:00:11 task_b causation_id=p_req",
            "c_cancel task.cancelled 10:00:11 task_c causation_id=c_start",
            "d_cancel task.cancelled 10:00:11 task_d",
        ]),
    ]);
    let r = audit(&l);
    no_rule_errors(&r);
    assert_eq!(
        sorted(findings_of(&r, "orphan.cascade_unlinked")),
        vec![
            f("task_c", &["c_cancel", "p_cancel"]),
            f("task_d", &["d_cancel", "p_cancel"])
        ]
    );
    // the cascade itself happened: nothing of high severity about it
    assert!(findings_of(&r, "parent.terminated_early").is_empty());
    assert!(findings_of(&r, "orphan.cancel_not_cascaded").is_empty());
}

#[test]
fn dangling_parent_fires_for_a_parent_seen_nowhere_and_not_for_one_seen_on_any_event() {
    let l = lines(&[
        "a_sub task.submitted 10:00:00 task_a parent_task_id=task_ghost",
        "a_acc task.accepted 10:00:01 task_a",
        // task_x appears only on an interruption event: it exists
        "x_int interruption.requested 10:00:00 task_x interruption_policy=force_stop",
        "b_sub task.submitted 10:00:02 task_b payload.parent_task_id=task_x",
    ]);
    let r = audit(&l);
    no_rule_errors(&r);
    assert_eq!(
        findings_of(&r, "orphan.dangling_parent"),
        vec![f("task_a", &["a_sub"])]
    );
    assert!(messages(&r, "orphan.dangling_parent")[0].contains("task_ghost"));
}

// ------------------------------------------------------------------ parent.*

#[test]
fn terminated_early_fires_on_the_upstream_parent_child_negative_fixture() {
    // upstream harmovela-0.2 fixtures/parent-child-negative.ndjson, compacted
    let l = lines(&[
        "evt_pcneg_001 task.submitted 12:30:00 task_parent",
        "evt_pcneg_002 task.accepted 12:30:01 task_parent",
        "evt_pcneg_003 task.started 12:30:02 task_parent",
        "evt_pcneg_004 task.submitted 12:30:03 task_child parent_task_id=task_parent",
        "evt_pcneg_005 task.accepted 12:30:04 task_child",
        "evt_pcneg_006 task.started 12:30:05 task_child",
        "evt_pcneg_007 task.completed 12:30:10 task_parent",
    ]);
    let r = audit(&l);
    no_rule_errors(&r);
    assert_eq!(
        findings_of(&r, "parent.terminated_early"),
        vec![f("task_parent", &["evt_pcneg_007", "evt_pcneg_004"])]
    );
    let msg = &messages(&r, "parent.terminated_early")[0];
    assert!(
        msg.contains("task.completed at 2026-07-14T12:30:10.000Z"),
        "{msg}"
    );
    assert!(
        msg.contains("task_child (active since 2026-07-14T12:30:03.000Z"),
        "{msg}"
    );
}

#[test]
fn terminated_early_is_silent_when_the_02_child_finishes_first() {
    // upstream harmovela-0.2 fixtures/parent-child-positive.ndjson, compacted
    let l = lines(&[
        "evt_pcpos_001 task.submitted 12:00:00 task_parent",
        "evt_pcpos_002 task.accepted 12:00:01 task_parent",
        "evt_pcpos_003 task.started 12:00:02 task_parent",
        "evt_pcpos_004 task.submitted 12:00:03 task_child parent_task_id=task_parent",
        "evt_pcpos_005 task.accepted 12:00:04 task_child",
        "evt_pcpos_006 task.started 12:00:05 task_child",
        "evt_pcpos_007 task.completed 12:00:10 task_child",
        "evt_pcpos_008 task.completed 12:00:11 task_parent",
    ]);
    let r = audit(&l);
    no_rule_errors(&r);
    assert_eq!(my_findings(&r), vec![]);
    // an early-0.2 runtime audited with --spec 0.1: the child-first rule
    let r = audit_lines(&l, |c| c.spec = SpecMode::V01);
    assert_eq!(
        findings_of(&r, "parent.child_terminated_first"),
        vec![f("task_child", &["evt_pcpos_007", "evt_pcpos_008"])]
    );
}

#[test]
fn terminated_early_counts_a_delegated_child_as_active_but_not_a_rejected_one() {
    let w = bind("task_w", "task_p", "agent:worker");
    let r_ = bind("task_r", "task_p", "agent:busy");
    let l = log(vec![
        running("p", "task_p", 0, ""),
        lines(&[
            &format!("w_req delegation.requested 10:00:03 {w}"),
            &format!("w_acc delegation.accepted 10:00:04 {w}"),
            &format!("r_req delegation.requested 10:00:03 {r_}"),
            &format!("r_rej delegation.rejected 10:00:04 {r_}"),
            "p_end task.completed 10:00:10 task_p",
        ]),
    ]);
    let r = audit(&l);
    no_rule_errors(&r);
    assert_eq!(
        findings_of(&r, "parent.terminated_early"),
        vec![f("task_p", &["p_end", "w_acc"])]
    );
}

#[test]
fn terminated_early_accepts_a_cancel_cascade_but_not_a_child_completing_after_the_cancel() {
    // the cascade of upstream harmovela-0.2 fixtures/delegation-positive.ndjson
    let mut specs = vec![
        "evt_dpos_008 task.submitted 10:02:00 task_parent",
        "evt_dpos_009 task.accepted 10:02:01 task_parent",
        "evt_dpos_010 task.started 10:02:02 task_parent",
        "evt_dpos_011 task.submitted 10:02:03 task_child payload.parent_task_id=task_parent",
        "evt_dpos_012 task.cancelled 10:02:10 task_parent",
        "evt_dpos_013 task.cancelled 10:02:11 task_child causation_id=evt_dpos_012",
    ];
    let r = audit(&lines(&specs));
    no_rule_errors(&r);
    assert_eq!(my_findings(&r), vec![]);
    // the same, but the child completes: no cascade
    specs[5] = "evt_dpos_013 task.completed 10:02:11 task_child";
    let r = audit(&lines(&specs));
    assert_eq!(
        findings_of(&r, "parent.terminated_early"),
        vec![f("task_parent", &["evt_dpos_012", "evt_dpos_011"])]
    );
}

#[test]
fn child_terminated_first_fires_in_01_unless_the_parent_was_being_cancelled() {
    let l = log(vec![
        running01("p", "task_p", 0, ""),
        running01("c", "task_c", 3, "parent_task_id=task_p"),
        lines01(&[
            "c_end task.completed 10:00:06 task_c",
            "p_end task.completed 10:00:10 task_p",
        ]),
        // the parent's cancel was requested before the child ended: allowed
        running01("q", "task_q", 0, ""),
        running01("d", "task_d", 3, "parent_task_id=task_q"),
        lines01(&[
            "q_req task.cancel.requested 10:00:06 task_q",
            "d_end task.cancelled 10:00:07 task_d causation_id=q_req",
            "q_end task.cancelled 10:00:08 task_q",
        ]),
        // the parent never ends in the log: the order is not proven
        running01("s", "task_s", 0, ""),
        running01("e", "task_e", 3, "parent_task_id=task_s"),
        lines01(&["e_end task.completed 10:00:06 task_e"]),
    ]);
    let r = audit(&l);
    no_rule_errors(&r);
    assert_eq!(
        findings_of(&r, "parent.child_terminated_first"),
        vec![f("task_c", &["c_end", "p_end"])]
    );
    assert_eq!(
        severity_of(&r, "parent.child_terminated_first"),
        Severity::High
    );
    // --spec 0.2 audits the same log with parent-last semantics
    let r = audit_lines(&l, |c| c.spec = SpecMode::V02);
    assert!(findings_of(&r, "parent.child_terminated_first").is_empty());
}

// ------------------------------------------------------------------ token.*

/// requested, accepted, handoff.completed (ids PREFIX_req, _acc, _hand) of
/// TASK under task_p to TO at 10:00:SEC and the next two seconds, the handoff
/// carrying TOKEN.
fn handoff(prefix: &str, sec: u32, task: &str, to: &str, token: &str) -> Vec<String> {
    let b = bind(task, "task_p", to);
    let at = |d: u32| format!("10:00:{:02}", sec + d);
    vec![
        line(&format!("{prefix}_req delegation.requested {} {b}", at(0))),
        line(&format!("{prefix}_acc delegation.accepted {} {b}", at(1))),
        line(&format!(
            "{prefix}_hand delegation.handoff.completed {} {b} handoff_token={token}",
            at(2)
        )),
    ]
}

#[test]
fn replayed_fires_on_a_second_issuance_of_one_token_but_not_on_a_redelivery() {
    let first = handoff("a", 1, "task_a", "agent:worker", "ht_1");
    let l = log(vec![
        lines(&["p_sub task.submitted 10:00:00 task_p"]),
        first.clone(),
        // the same line delivered twice (at-least-once): collapsed, silent
        vec![first[2].clone()],
        handoff("b", 4, "task_b", "agent:worker", "ht_1"),
        handoff("c", 7, "task_c", "agent:worker", "ht_2"),
    ]);
    let r = audit(&l);
    no_rule_errors(&r);
    assert_eq!(
        findings_of(&r, "token.replayed"),
        vec![f("task_b", &["b_hand", "a_hand"])]
    );
    assert_eq!(severity_of(&r, "token.replayed"), Severity::Critical);
}

#[test]
fn replayed_compares_structured_tokens_by_jti_only_under_the_structured_option() {
    let token = |task: &str| {
        claims_token(
            json!({"iss": "agent:planner", "sub": "agent:worker", "task_id": task,
            "parent_task_id": "task_p", "iat": "2026-07-14T10:00:00Z",
            "exp": "2026-07-14T11:00:00Z", "jti": "j-1"}),
        )
    };
    let l = log(vec![
        lines(&["p_sub task.submitted 10:00:00 task_p"]),
        handoff("a", 1, "task_a", "agent:worker", &token("task_a")),
        handoff("b", 4, "task_b", "agent:worker", &token("task_b")),
    ]);
    let r = audit(&l);
    no_rule_errors(&r);
    assert!(
        findings_of(&r, "token.replayed").is_empty(),
        "opaque tokens differ by value"
    );
    let r = audit_lines(&l, |c| {
        c.reading.ingest.token_format = TokenFormat::Structured
    });
    no_rule_errors(&r);
    assert_eq!(
        findings_of(&r, "token.replayed"),
        vec![f("task_b", &["b_hand", "a_hand"])]
    );
    assert!(findings_of(&r, "token.claims_invalid").is_empty());
}

#[test]
fn rebound_fires_when_a_token_shows_up_with_another_binding_and_not_when_fields_are_absent() {
    let l = log(vec![
        lines(&["p_sub task.submitted 10:00:00 task_p"]),
        handoff("a", 1, "task_a", "agent:worker", "ht_1"),
        lines(&[
            // presenting without the delegation fields: nothing differs
            "a_use tool.call.requested 10:00:04 task_a handoff_token=ht_1",
            // presented by another delegate: rebound
            "x_use tool.call.requested 10:00:05 task_a handoff_token=ht_1 delegated_to=agent:x",
        ]),
    ]);
    let r = audit(&l);
    no_rule_errors(&r);
    assert_eq!(
        findings_of(&r, "token.rebound"),
        vec![f("task_a", &["x_use", "a_hand"])]
    );
    let msg = &messages(&r, "token.rebound")[0];
    assert!(
        msg.contains("delegated_to agent:x instead of agent:worker"),
        "{msg}"
    );
}

#[test]
fn superseded_fires_for_an_old_token_presented_after_the_escalation_only() {
    let sup = bind("task_a", "task_p", "agent:supervisor");
    let l = log(vec![
        lines(&["p_sub task.submitted 10:00:00 task_p"]),
        handoff("a", 1, "task_a", "agent:worker", "ht_old"),
        lines(&[
            "use_before tool.call.requested 10:00:04 task_a handoff_token=ht_old",
            &format!("esc delegation.escalated 10:00:05 {sup}"),
            "use_after tool.call.requested 10:00:06 task_a handoff_token=ht_old",
            // the token issued after the escalation is the valid one
            &format!("new_hand delegation.handoff.completed 10:00:07 {sup} handoff_token=ht_new"),
            "use_new tool.call.requested 10:00:08 task_a handoff_token=ht_new",
        ]),
    ]);
    let r = audit(&l);
    no_rule_errors(&r);
    assert_eq!(
        findings_of(&r, "token.superseded"),
        vec![f("task_a", &["use_after", "esc", "a_hand"])]
    );
}

#[test]
fn after_rejection_fires_for_a_token_of_the_rejected_pair_and_not_for_another_delegate() {
    let worker = bind("task_a", "task_p", "agent:worker");
    let other = bind("task_a", "task_p", "agent:other");
    let l = lines(&[
        "p_sub task.submitted 10:00:00 task_p",
        &format!("req delegation.requested 10:00:01 {worker}"),
        &format!("rej delegation.rejected 10:00:02 {worker}"),
        // a handoff to the delegate that rejected: the issuance and its use fire
        &format!("bad_hand delegation.handoff.completed 10:00:03 {worker} handoff_token=ht_bad"),
        "bad_use task.started 10:00:04 task_a handoff_token=ht_bad",
        // the same task handed to another delegate: silent
        &format!("ok_acc delegation.accepted 10:00:05 {other}"),
        &format!("ok_hand delegation.handoff.completed 10:00:06 {other} handoff_token=ht_ok"),
        "ok_use tool.call.requested 10:00:07 task_a handoff_token=ht_ok",
    ]);
    let r = audit(&l);
    no_rule_errors(&r);
    assert_eq!(
        sorted(findings_of(&r, "token.after_rejection")),
        vec![
            f("task_a", &["bad_hand", "rej"]),
            f("task_a", &["bad_use", "rej"])
        ]
    );
}

#[test]
fn claims_invalid_names_each_failed_check_under_the_structured_option_only() {
    let claims = |task: &str, sub: &str, iat: Value, exp: Option<&str>| {
        let mut c = json!({"iss": "agent:planner", "sub": sub, "task_id": task,
            "parent_task_id": "task_p", "iat": iat, "jti": format!("j-{task}")});
        if let Some(exp) = exp {
            c["exp"] = json!(exp);
        }
        claims_token(c)
    };
    // valid, as the middle of a three-part compact token, iat in epoch seconds
    let good = claims(
        "task_a",
        "agent:worker",
        json!(1_784_023_200),
        Some("2026-07-14T11:00:00Z"),
    );
    let good = format!("hdr.{good}.sig");
    // wrong subject and no expiry: two findings on its handoff
    let bad = claims("task_b", "agent:other", json!("2026-07-14T10:00:04Z"), None);
    // issued-at 2 minutes ahead; expired by the time it is presented
    let stale = claims(
        "task_c",
        "agent:worker",
        json!("2026-07-14T10:02:10Z"),
        Some("2026-07-14T10:00:09Z"),
    );
    let l = log(vec![
        lines(&["p_sub task.submitted 10:00:00 task_p"]),
        handoff("a", 1, "task_a", "agent:worker", &good),
        handoff("b", 2, "task_b", "agent:worker", &bad),
        handoff("c", 5, "task_c", "agent:worker", &stale),
        lines(&[&format!(
            "c_use tool.call.requested 10:00:09 task_c handoff_token={stale}"
        )]),
    ]);
    let r = audit(&l);
    no_rule_errors(&r);
    assert!(
        findings_of(&r, "token.claims_invalid").is_empty(),
        "opaque tokens are never decoded"
    );
    let r = audit_lines(&l, |c| {
        c.reading.ingest.token_format = TokenFormat::Structured
    });
    no_rule_errors(&r);
    // (event, check named in "fails the CHECK check")
    let mut got: Vec<(String, String)> = r
        .findings
        .iter()
        .filter(|f| f.rule == "token.claims_invalid")
        .map(|f| {
            let head = f.message.split(" check: ").next().unwrap();
            (
                f.event_ids[0].clone(),
                head.rsplit(' ').next().unwrap().to_string(),
            )
        })
        .collect();
    got.sort();
    let want = [
        ("b_hand", "expiry"),
        ("b_hand", "sub"),
        ("c_hand", "iat"),
        ("c_use", "exp"),
        ("c_use", "iat"),
    ];
    let want: Vec<(String, String)> = want
        .iter()
        .map(|(e, c)| (e.to_string(), c.to_string()))
        .collect();
    assert_eq!(got, want);
}

#[test]
fn undecodable_reports_each_token_value_once_under_the_structured_option_only() {
    let l = log(vec![
        lines(&["p_sub task.submitted 10:00:00 task_p"]),
        handoff("a", 1, "task_a", "agent:worker", "ht_abc123"),
        lines(&["a_use tool.call.requested 10:00:04 task_a handoff_token=ht_abc123"]),
    ]);
    let r = audit(&l);
    no_rule_errors(&r);
    assert!(findings_of(&r, "token.undecodable").is_empty());
    let r = audit_lines(&l, |c| {
        c.reading.ingest.token_format = TokenFormat::Structured
    });
    no_rule_errors(&r);
    assert_eq!(
        findings_of(&r, "token.undecodable"),
        vec![f("task_a", &["a_hand"])]
    );
    assert!(findings_of(&r, "token.claims_invalid").is_empty());
}

// ------------------------------------------------------------------ checkpoint.*

#[test]
fn missing_fires_when_no_checkpoint_is_saved_before_the_task_ends_or_is_interrupted_again() {
    let l = log(vec![
        running("a", "task_a", 0, ""),
        running("b", "task_b", 0, ""),
        running("c", "task_c", 0, ""),
        lines(&[
            // a: ends without saving
            &save_and_stop("a_int", "10:05:00", "task_a"),
            "a_end task.completed 10:05:09 task_a",
            // b: a save without checkpoint_id does not count; the next request closes
            &save_and_stop("b_int", "10:05:00", "task_b"),
            "b_saved interruption.saved 10:05:01 task_b",
            "b_int2 interruption.requested 10:05:02 task_b interruption_policy=force_stop",
            // c: saved in time (the upstream agent-runtime-semantics flow): silent
            &save_and_stop("c_int", "10:05:00", "task_c"),
            "c_ack interruption.acknowledged 10:05:01 task_c causation_id=c_int",
            "c_saved interruption.saved 10:05:02 task_c checkpoint_id=ckpt_c causation_id=c_ack",
        ]),
    ]);
    let r = audit(&l);
    no_rule_errors(&r);
    assert_eq!(
        sorted(findings_of(&r, "checkpoint.missing")),
        vec![
            f("task_a", &["a_int", "a_end"]),
            f("task_b", &["b_int", "b_int2"])
        ]
    );
    assert!(findings_of(&r, "checkpoint.late").is_empty());
}

#[test]
fn missing_at_the_end_of_the_log_respects_the_horizon() {
    let l = lines(&[
        "a_sub task.submitted 10:00:00 task_a",
        &save_and_stop("a_int", "10:05:00", "task_a"),
        "tail session.heartbeat 10:05:10 -",
    ]);
    let r = audit(&l);
    no_rule_errors(&r);
    assert_eq!(
        findings_of(&r, "checkpoint.missing"),
        vec![f("task_a", &["a_int"])]
    );
    let r = audit_lines(&l, |c| c.horizon_ms = Some(60_000));
    assert!(findings_of(&r, "checkpoint.missing").is_empty());
}

#[test]
fn late_fires_one_millisecond_after_the_grace_period_and_not_exactly_at_the_deadline() {
    let l = lines(&[
        &save_and_stop("a_int", "10:05:00.000", "task_a"),
        "a_saved interruption.saved 10:05:05.001 task_a checkpoint_id=ckpt_a",
        &save_and_stop("b_int", "10:05:00.000", "task_b"),
        "b_saved interruption.saved 10:05:05.000 task_b checkpoint_id=ckpt_b",
    ]);
    let r = audit(&l);
    no_rule_errors(&r);
    assert_eq!(
        findings_of(&r, "checkpoint.late"),
        vec![f("task_a", &["a_saved", "a_int"])]
    );
    assert!(messages(&r, "checkpoint.late")[0].contains("5001 ms"));
    assert!(
        findings_of(&r, "checkpoint.missing").is_empty(),
        "missing and late are exclusive"
    );
}

#[test]
fn resume_unknown_fires_for_an_unsaved_checkpoint_unless_the_task_fails_with_checkpoint_missing() {
    let l = lines(&[
        "a_saved interruption.saved 10:05:00 task_a checkpoint_id=ckpt_1",
        "a_res interruption.resumed 10:06:00 task_a checkpoint_id=ckpt_2",
        "a_prog task.progress 10:06:01 task_a",
        // resumes what it saved (named in the payload this time): silent
        "b_saved interruption.saved 10:05:00 task_b checkpoint_id=ckpt_1",
        "b_res interruption.resumed 10:06:00 task_b payload.checkpoint_id=ckpt_1",
        // another task's checkpoint does not count
        "c_res interruption.resumed 10:06:00 task_c checkpoint_id=ckpt_1",
        // fails as the spec asks: silent
        "d_res interruption.resumed 10:06:00 task_d checkpoint_id=ckpt_9",
        "d_fail task.failed 10:06:01 task_d payload.error.code=checkpoint_missing",
        "tail session.heartbeat 10:07:00 -",
    ]);
    let r = audit(&l);
    no_rule_errors(&r);
    assert_eq!(
        sorted(findings_of(&r, "checkpoint.resume_unknown")),
        vec![f("task_a", &["a_res"]), f("task_c", &["c_res"])]
    );
    assert!(findings_of(&r, "checkpoint.resume_without_id").is_empty());
}

#[test]
fn resume_without_id_fires_only_for_a_resume_naming_no_checkpoint() {
    let l = lines(&[
        "a_saved interruption.saved 10:05:00 task_a checkpoint_id=ckpt_1",
        "a_res interruption.resumed 10:06:00 task_a",
        "b_saved interruption.saved 10:05:00 task_b checkpoint_id=ckpt_1",
        "b_res interruption.resumed 10:06:00 task_b checkpoint_id=ckpt_1",
    ]);
    let r = audit(&l);
    no_rule_errors(&r);
    assert_eq!(
        findings_of(&r, "checkpoint.resume_without_id"),
        vec![f("task_a", &["a_res"])]
    );
    assert!(findings_of(&r, "checkpoint.resume_unknown").is_empty());
}

#[test]
fn not_stopped_fires_for_work_after_the_stop_point_and_not_after_the_resume() {
    let l = log(vec![
        running("a", "task_a", 0, ""),
        running("b", "task_b", 0, ""),
        running("d", "task_d", 0, ""),
        lines(&[
            // save_and_stop: work before the save is fine, after it is not
            &save_and_stop("a_int", "10:05:00", "task_a"),
            "a_prog1 task.progress 10:05:01 task_a",
            "a_saved interruption.saved 10:05:02 task_a checkpoint_id=ckpt_a",
            "a_out task.output 10:05:03 task_a",
            "a_prog2 task.progress 10:05:04 task_a",
            "a_res interruption.resumed 10:06:00 task_a checkpoint_id=ckpt_a",
            "a_prog3 task.progress 10:06:01 task_a",
            // force_stop: the acknowledgement is the stop point
            "b_int interruption.requested 10:05:00 task_b interruption_policy=force_stop",
            "b_ack interruption.acknowledged 10:05:01 task_b",
            "b_prog task.progress 10:05:02 task_b",
            // drain_then_stop is not covered
            "d_int interruption.requested 10:05:00 task_d interruption_policy=drain_then_stop",
            "d_ack interruption.acknowledged 10:05:01 task_d",
            "d_prog task.progress 10:05:02 task_d",
        ]),
    ]);
    let r = audit(&l);
    no_rule_errors(&r);
    assert_eq!(
        sorted(findings_of(&r, "checkpoint.not_stopped")),
        vec![
            f("task_a", &["a_out", "a_saved"]),
            f("task_b", &["b_prog", "b_ack"])
        ]
    );
    let msgs = messages(&r, "checkpoint.not_stopped");
    let msg = msgs.iter().find(|m| m.contains("task_a")).unwrap();
    assert!(msg.contains("and 1 more"), "{msg}");
}

// ------------------------------------------------------------------ lifecycle.*, delegation.*

#[test]
fn upstream_delegation_negative_gives_exactly_the_expected_findings() {
    // upstream harmovela-0.2 fixtures/delegation-negative.ndjson, compacted
    let child = bind("task_rej_child", "task_rej", "agent:worker");
    let child2 = bind("task_rej_child_2", "task_rej", "agent:worker");
    let sup = bind("task_rej_child_2", "task_rej", "agent:supervisor");
    let l = lines(&[
        "evt_dneg_001 task.submitted 11:00:00 task_rej",
        &format!("evt_dneg_002 delegation.requested 11:00:01 {child}"),
        &format!("evt_dneg_003 delegation.rejected 11:00:02 {child}"),
        &format!("evt_dneg_004 delegation.requested 11:00:03 {child2}"),
        &format!("evt_dneg_005 delegation.rejected 11:00:04 {child2}"),
        &format!("evt_dneg_006 delegation.escalated 11:00:05 {sup}"),
        "evt_dneg_007 task.submitted 11:01:00 task_done",
        "evt_dneg_008 task.accepted 11:01:01 task_done",
        "evt_dneg_009 task.started 11:01:02 task_done",
        "evt_dneg_010 task.completed 11:01:03 task_done",
        "evt_dneg_011 task.cancelled 11:01:04 task_done causation_id=evt_dneg_010",
    ]);
    let r = audit(&l);
    no_rule_errors(&r);
    let ids = |v: &[&str]| v.iter().map(|s| s.to_string()).collect::<Vec<_>>();
    assert_eq!(
        my_findings(&r),
        vec![
            (
                "delegation.escalated_after_rejection".into(),
                ids(&["evt_dneg_006", "evt_dneg_005"])
            ),
            (
                "lifecycle.illegal_transition".into(),
                ids(&["evt_dneg_011", "evt_dneg_010"])
            ),
        ]
    );
    assert!(messages(&r, "lifecycle.illegal_transition")[0].contains("a terminal state"));
}

#[test]
fn escalated_after_rejection_is_silent_for_an_escalation_of_a_live_delegation() {
    // the escalation of upstream harmovela-0.2 fixtures/delegation-positive.ndjson
    let l = lines(&[
        "evt_dpos_005 task.submitted 10:01:00 task_esc",
        &format!(
            "evt_dpos_006 delegation.requested 10:01:01 {}",
            bind("task_esc_child", "task_esc", "agent:worker")
        ),
        &format!(
            "evt_dpos_007 delegation.escalated 10:01:05 {}",
            bind("task_esc_child", "task_esc", "agent:supervisor")
        ),
    ]);
    let r = audit(&l);
    no_rule_errors(&r);
    assert_eq!(my_findings(&r), vec![]);
}

#[test]
fn illegal_transition_is_silent_for_a_redelivered_terminal_event() {
    let done = line("t_end task.completed 10:00:03 task_t");
    let l = log(vec![
        running("t", "task_t", 0, ""),
        vec![done.clone()],
        // at-least-once delivery: the identical line again, later in the file
        lines(&["o_sub task.submitted 10:00:04 task_other"]),
        vec![done],
    ]);
    let r = audit(&l);
    no_rule_errors(&r);
    assert_eq!(my_findings(&r), vec![]);
}

#[test]
fn illegal_transition_fires_on_a_repeated_state_a_bad_first_event_and_a_late_cancel_request() {
    let w = bind("task_w", "task_a", "agent:worker");
    let v = bind("task_v", "task_a", "agent:worker");
    let l = lines(&[
        "a_sub task.submitted 10:00:00 task_a",
        "a_acc task.accepted 10:00:01 task_a",
        "a_acc2 task.accepted 10:00:02 task_a",
        // a cancel request while the task runs is not a transition: silent
        "a_req task.cancel.requested 10:00:03 task_a",
        "a_cancel task.cancelled 10:00:04 task_a",
        "a_req2 task.cancel.requested 10:00:05 task_a",
        // starts without being submitted
        "b_prog task.progress 10:00:00 task_b",
        // delegated to its worker: may start with task.started
        &format!("w_acc delegation.accepted 10:00:00 {w}"),
        "w_start task.started 10:00:01 task_w",
        "w_end task.completed 10:00:02 task_w",
        // delegated, but the worker still runs the whole table: legal too
        &format!("v_acc delegation.accepted 10:00:00 {v}"),
        "v_sub task.submitted 10:00:01 task_v",
        "v_acc2 task.accepted 10:00:02 task_v",
        "v_start task.started 10:00:03 task_v",
    ]);
    let r = audit(&l);
    no_rule_errors(&r);
    assert_eq!(
        sorted(findings_of(&r, "lifecycle.illegal_transition")),
        vec![
            f("task_a", &["a_acc2", "a_acc"]),
            f("task_a", &["a_req2", "a_cancel"]),
            f("task_b", &["b_prog"]),
        ]
    );
}

#[test]
fn skipped_accept_reports_submitted_then_started_as_info_instead_of_an_illegal_transition() {
    let l = lines(&[
        "a_sub task.submitted 10:00:00 task_a",
        "a_start task.started 10:00:01 task_a",
        "a_end task.completed 10:00:02 task_a",
        "b_sub task.submitted 10:00:00 task_b",
        "b_acc task.accepted 10:00:01 task_b",
        "b_start task.started 10:00:02 task_b",
    ]);
    let r = audit(&l);
    no_rule_errors(&r);
    assert_eq!(
        findings_of(&r, "lifecycle.skipped_accept"),
        vec![f("task_a", &["a_start", "a_sub"])]
    );
    assert_eq!(severity_of(&r, "lifecycle.skipped_accept"), Severity::Info);
    assert!(findings_of(&r, "lifecycle.illegal_transition").is_empty());
}

#[test]
fn task_id_mismatch_fires_for_a_missing_or_different_payload_task_id() {
    let l = lines(&[
        "a_sub task.submitted 10:00:00 task_a no_payload_task_id",
        "b_sub task.submitted 10:00:00 task_b payload.task_id=task_x",
        "c_sub task.submitted 10:00:00 task_c",
    ]);
    let r = audit(&l);
    no_rule_errors(&r);
    assert_eq!(
        sorted(findings_of(&r, "lifecycle.task_id_mismatch")),
        vec![f("task_a", &["a_sub"]), f("task_b", &["b_sub"])]
    );
}

#[test]
fn conflicting_parent_fires_for_two_parents_and_not_for_one_parent_named_twice() {
    let l = lines(&[
        "p_sub task.submitted 10:00:00 task_p",
        "q_sub task.submitted 10:00:00 task_q",
        "a_sub task.submitted 10:00:01 task_a parent_task_id=task_p",
        &format!(
            "a_acc delegation.accepted 10:00:02 {}",
            bind("task_a", "task_q", "agent:worker")
        ),
        // envelope and payload agree, and so does the delegation: one parent
        "b_sub task.submitted 10:00:01 task_b parent_task_id=task_p payload.parent_task_id=task_p",
        &format!(
            "b_acc delegation.accepted 10:00:02 {}",
            bind("task_b", "task_p", "agent:worker")
        ),
        // one event whose envelope and payload disagree names two parents
        "c_sub task.submitted 10:00:01 task_c parent_task_id=task_p payload.parent_task_id=task_q",
        "c_start task.started 10:00:02 task_c parent_task_id=task_p",
    ]);
    let r = audit(&l);
    no_rule_errors(&r);
    assert_eq!(
        sorted(findings_of(&r, "lifecycle.conflicting_parent")),
        vec![f("task_a", &["a_acc", "a_sub"]), f("task_c", &["c_sub"])]
    );
    let msg = &messages(&r, "lifecycle.conflicting_parent")[0];
    assert!(msg.contains("task_p") && msg.contains("task_q"), "{msg}");
}

// ------------------------------------------------------------------ AEP 0.1

#[test]
fn aep_01_runtime_semantics_flow_gives_no_finding_of_medium_or_higher() {
    // the task events of upstream aep-0.1 fixtures/agent-runtime-semantics.ndjson
    let d = bind("task_02", "task_01", "agent:worker");
    let l = lines01(&[
        &format!("evt_deleg_01 delegation.requested 10:01:00 {d}"),
        &format!("evt_deleg_02 delegation.accepted 10:02:00 {d} correlation_id=evt_deleg_01"),
        &format!("evt_deleg_03 delegation.handoff.completed 10:03:00 {d} handoff_token=ht_abc123"),
        &save_and_stop("evt_int_01", "10:05:00", "task_01"),
        "evt_int_02 interruption.acknowledged 10:05:01 task_01 causation_id=evt_int_01",
        "evt_int_03 interruption.saved 10:05:02 task_01 checkpoint_id=ckpt_task_01",
    ]);
    let r = audit(&l);
    no_rule_errors(&r);
    let serious: Vec<_> = r
        .findings
        .iter()
        .filter(|f| mine(&f.rule) && f.severity >= Severity::Medium)
        .map(|f| (f.rule.clone(), f.event_ids.clone()))
        .collect();
    assert!(serious.is_empty(), "{serious:?}");
}

/// Each family run alone (`--rules FAMILY.*`: only the views its rules
/// read run, and the columns nothing else reads are let go of) finds
/// exactly what the whole audit finds for it, on a log with violations of
/// every rule.
#[test]
fn each_family_alone_finds_what_the_whole_audit_finds_for_it() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("log.ndjson");
    std::fs::write(&path, crate::common::synth_log(8, 3 << 20, 0.02)).unwrap();
    let audit = |rules: Option<String>| {
        let cfg = hvaudit::audit::AuditConfig {
            rules_glob: rules,
            ..crate::common::audit_config(vec![path.clone()])
        };
        hvaudit::audit::Audit::new(cfg).run().unwrap()
    };
    let whole = audit(None);
    assert!(whole.rule_errors.is_empty(), "{:?}", whole.rule_errors);
    let families: std::collections::BTreeSet<String> =
        whole.rules.iter().map(|r| r.family.clone()).collect();
    assert!(families.len() >= 10, "{families:?}");
    let of = |report: &hvaudit::Report, family: &str| -> Vec<String> {
        let mut found: Vec<String> = report
            .findings
            .iter()
            .filter(|f| f.rule.starts_with(&format!("{family}.")))
            .map(|f| format!("{} {} {}", f.rule, f.message, f.event_ids.join(",")))
            .collect();
        found.sort();
        found
    };
    for family in &families {
        let alone = audit(Some(format!("{family}.*")));
        assert!(
            alone.rule_errors.is_empty(),
            "{family}: {:?}",
            alone.rule_errors
        );
        let expected = of(&whole, family);
        assert!(!expected.is_empty(), "the log plants no {family} violation");
        assert_eq!(of(&alone, family), expected, "{family}");
        assert_eq!(alone.unresolved_basis, whole.unresolved_basis, "{family}");
    }
}
