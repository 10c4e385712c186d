//! Planted cases: one small session per case, legal but for its fault. This
//! file holds the catalogue and the cases about records (decisions,
//! provenance, envelopes, payloads, duplicates); task cases are in
//! `violations_tasks`, token cases in `violations_tokens`.

use super::records::{HARNESS, Ref};
use super::scene::{Dialect, Id, Kind, Scene, Version};
use super::tasks::Step;
use super::violations_tasks::{self as vt, Ckpt};
use super::violations_tokens as vk;

const USER: &str = "agent:orchestrator";
const ACTOR: &str = "agent:planner";

/// A planted case: the dialect it needs (if any) and how to write it.
pub(crate) struct Case {
    pub dialect: Option<Dialect>,
    body: fn(&mut Scene, i64),
}

const fn case(dialect: Option<Dialect>, body: fn(&mut Scene, i64)) -> Case {
    Case { dialect, body }
}

const V01: Option<Dialect> = Some(Dialect::V01);
const V02: Option<Dialect> = Some(Dialect::V02);

/// Every built-in rule (docs/rules.md) is planted by at least one entry.
pub(crate) const CASES: &[Case] = &[
    case(V01, vt::cancel_not_cascaded),
    case(V02, vt::cancel_not_cascaded),
    case(V01, vt::outlived_parent),
    case(V02, vt::outlived_parent),
    case(None, vt::cascade_unlinked),
    case(None, vt::dangling_parent),
    case(V02, vt::terminated_early),
    case(V01, vt::child_terminated_first),
    case(None, vk::token_replayed),
    case(None, vk::token_rebound),
    case(None, vk::token_superseded),
    case(None, vk::token_after_rejection),
    case(None, |sc, t| vk::token_bad(sc, t, false)),
    case(None, |sc, t| vk::token_bad(sc, t, true)),
    case(None, |sc, t| vt::checkpoint(sc, t, Ckpt::Missing)),
    case(None, |sc, t| vt::checkpoint(sc, t, Ckpt::Late)),
    case(None, |sc, t| vt::checkpoint(sc, t, Ckpt::ResumeUnknown)),
    case(None, |sc, t| vt::checkpoint(sc, t, Ckpt::ResumeWithoutId)),
    case(None, |sc, t| vt::checkpoint(sc, t, Ckpt::NotStopped)),
    case(None, unverified_basis),
    case(None, retracted_basis),
    case(None, stale_basis),
    case(None, contested_basis),
    case(None, |sc, t| chain(sc, t, false)),
    case(None, |sc, t| chain(sc, t, true)),
    case(None, vt::illegal_transition),
    case(None, vt::skipped_accept),
    case(None, vt::task_id_mismatch),
    case(V02, vt::conflicting_parent),
    case(None, vt::escalated_after_rejection),
    case(None, conflicting_duplicate),
    case(None, |sc, t| bad_envelope(sc, t, 0)),
    case(None, |sc, t| bad_envelope(sc, t, 1)),
    case(None, |sc, t| bad_envelope(sc, t, 2)),
    case(None, unknown_type),
    case(None, unsupported_version),
    case(V02, legacy_version_field),
    case(None, no_filter),
    case(None, payload_invalid),
];

/// Writes the session of case `i` starting at `start`.
pub(crate) fn planted(sc: &mut Scene, start: i64, i: usize) {
    let (t, sub) = sc.open_session(start, USER);
    (CASES[i].body)(sc, t + sc.dt(50, 1000));
    sc.close_session(start, USER, sub);
}

/// A decision whose only asserted basis is an unverified observation.
fn unverified_basis(sc: &mut Scene, at: i64) {
    let o = sc.observe(at);
    let d = sc.decide(at + sc.dt(100, 3000), ACTOR, None, &[o]);
    sc.plant("decision.unverified_basis", d.id, None);
}

/// A decision on a fact retracted before it (by fact_id, sometimes also by
/// causation).
fn retracted_basis(sc: &mut Scene, at: i64) {
    let (f, fact_id) = sc.fact(at, "verified");
    let t = at + sc.dt(100, 3000);
    let cite = sc.rng.chance(0.5);
    sc.retract(t, f, fact_id, cite);
    let d = sc.decide(t + sc.dt(100, 3000), ACTOR, None, &[f]);
    sc.plant("decision.retracted_basis", d.id, None);
}

/// A decision after its fact's valid_until, or after created_at + stale_after.
fn stale_basis(sc: &mut Scene, at: i64) {
    let (f, _) = match sc.rng.chance(0.5) {
        true => sc.fact_ex(at, "verified", at + 2000, "PT1H"),
        false => sc.fact_ex(at, "verified", at + 14_400_000, "PT2S"),
    };
    let d = sc.decide(at + sc.dt(5000, 20_000), ACTOR, None, &[f]);
    sc.plant("decision.stale_basis", d.id, None);
}

/// A decision on a contested fact; the conflict is resolved only afterwards
/// (or never).
fn contested_basis(sc: &mut Scene, at: i64) {
    let (f, _) = sc.fact(at, "attested");
    let t = at + sc.dt(100, 3000);
    let c = sc.conflict(t, f);
    let d = sc.decide(t + sc.dt(100, 3000), ACTOR, None, &[f]);
    if sc.rng.chance(0.5) {
        sc.revise(d.at + sc.dt(100, 3000), c);
    }
    sc.plant("decision.contested_basis", d.id, None);
}

/// An attestation whose chain ends elsewhere than its causation
/// (`unordered` false), or whose chain runs backwards in time (true).
fn chain(sc: &mut Scene, at: i64, unordered: bool) {
    let (f1, _) = sc.fact(at, "verified");
    let (f2, _) = sc.fact(at + sc.dt(100, 2000), "verified");
    let entries: [Ref; 2] = if unordered { [f2, f1] } else { [f1, f2] };
    let x = sc
        .ev(
            f2.at + sc.dt(100, 2000),
            "provenance.attestation.added",
            "agent:verifier",
        )
        .id("causation_id", f1.id)
        .chain(&entries.map(|r| (r.source, r.id)))
        .s("source_trust", "attested")
        .pay()
        .s("attestor", "agent:verifier")
        .s("method", "cross_reference")
        .end();
    let rule = if unordered {
        "provenance.chain_unordered"
    } else {
        "provenance.chain_mismatch"
    };
    sc.plant(rule, x, None);
}

/// An event id reused later for different content.
fn conflicting_duplicate(sc: &mut Scene, at: i64) {
    let (mut p, t) = sc.start_direct(at, USER, ACTOR, None);
    let cause = p.last;
    let t = t + sc.dt(100, 2000);
    let x = sc.step(t, &mut p, Step::Progress(30));
    let t = t + sc.dt(500, 5000);
    sc.ev_as(t, "task.progress", p.agent, Version::Dialect, x)
        .s("target", p.owner)
        .tagged("topic", "tasks.", p.id)
        .id("task_id", p.id)
        .id("causation_id", cause)
        .pay()
        .id("task_id", p.id)
        .s("state", "progress")
        .s("message", "recomputed totals")
        .frac("progress", 35)
        .end();
    sc.step(t + sc.dt(100, 2000), &mut p, Step::Completed);
    sc.plant("integrity.conflicting_duplicate", x, Some(p.id));
}

/// A heartbeat without a version field (0), with a malformed created_at
/// (1), or cut short so it is not JSON (2).
fn bad_envelope(sc: &mut Scene, at: i64, kind: u8) {
    let session = sc.session;
    let e = match kind {
        0 => {
            let id = sc.new_id(Kind::Evt);
            sc.ev_as(at, "session.heartbeat", HARNESS, Version::Missing, id)
        }
        1 => {
            let bad = sc.rng.pick(&[
                "2026-13-41T10:00:05.123Z",
                "2026-07-14T25:61:00Z",
                "yesterday 10:00",
            ]);
            sc.ev(at, "session.heartbeat", HARNESS).bad_time(bad)
        }
        _ => sc.ev(at, "session.heartbeat", HARNESS),
    };
    let x = e.s("target", USER).pay().id("session_id", session).end();
    if kind == 2 {
        let line = sc.truncate_last();
        sc.plant_line("envelope.invalid", line);
    } else {
        sc.plant("envelope.invalid", x, None);
    }
}

/// A type outside the registry; in 0.1 sometimes a 0.2-only family.
fn unknown_type(sc: &mut Scene, at: i64) {
    let ty = match sc.dialect {
        Dialect::V02 => sc.rng.pick(&[
            "agent.plan.drafted",
            "telemetry.span.recorded",
            "memory.fact.archived",
        ]),
        Dialect::V01 => sc.rng.pick(&[
            "state.delta.applied",
            "query.requested",
            "agent.plan.drafted",
        ]),
    };
    let x = sc
        .ev(at, ty, ACTOR)
        .s("target", USER)
        .pay()
        .s("summary", "three-step plan")
        .end();
    sc.plant("envelope.unknown_type", x, None);
}

fn heartbeat_as(sc: &mut Scene, at: i64, version: Version) -> Id {
    let (id, session) = (sc.new_id(Kind::Evt), sc.session);
    sc.ev_as(at, "session.heartbeat", HARNESS, version, id)
        .s("target", USER)
        .pay()
        .id("session_id", session)
        .end()
}

fn unsupported_version(sc: &mut Scene, at: i64) {
    let v = sc.rng.pick(&[
        Version::Spec("9.9"),
        Version::Spec("1.0"),
        Version::Aep("0.3"),
    ]);
    let x = heartbeat_as(sc, at, v);
    sc.plant("envelope.unsupported_version", x, None);
}

fn legacy_version_field(sc: &mut Scene, at: i64) {
    let x = heartbeat_as(sc, at, Version::Legacy);
    sc.plant("envelope.legacy_version_field", x, None);
}

/// subscription.requested with none of types, source, target, topic.
fn no_filter(sc: &mut Scene, at: i64) {
    let with_mode = sc.rng.chance(0.5);
    let e = sc
        .ev(at, "subscription.requested", USER)
        .s("target", HARNESS)
        .pay();
    let e = if with_mode {
        e.s("delivery_mode", "at_least_once")
    } else {
        e
    };
    let x = e.end();
    sc.plant("subscription.no_filter", x, None);
}

/// A payload missing what its schema requires (none of these feed a rule).
fn payload_invalid(sc: &mut Scene, at: i64) {
    let e = match sc.rng.below(4) {
        0 => sc
            .ev(at, "context.invalidated", "context:main")
            .pay()
            .s("reason", "index rebuilt"),
        1 => {
            let fact_id = sc.new_id(Kind::Fact);
            sc.ev(at, "memory.fact.added", "memory:main")
                .pay()
                .id("fact_id", fact_id)
        }
        2 => sc
            .ev(at, "belief.conflict.detected", "agent:verifier")
            .pay()
            .s("subject", "vendor rate limit")
            .open_arr("claims")
            .item()
            .s("source", "agent:crawler")
            .s("value", "300 rpm")
            .close()
            .close_arr(),
        _ => sc
            .ev(at, "provenance.attestation.added", "agent:verifier")
            .pay()
            .s("attestor", "agent:verifier"),
    };
    let x = e.end();
    sc.plant("payload.invalid", x, None);
}
