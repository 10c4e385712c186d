//! Benign sessions: legal under every built-in rule (docs/rules.md), with the legal
//! look-alikes of the planted cases mixed in (child finishing first in 0.2,
//! parent first in 0.1, linked cancel cascades, redelivered terminal events,
//! checkpoints saved inside or exactly at the grace period, mixed-trust
//! bases, retractions after the decision, conflicts resolved in time, tokens
//! re-issued after an escalation, re-delegation after a rejection).

use super::records::Kb;
use super::scene::{Dialect, Kind, Scene};
use super::tasks::{PLANNERS, USERS};
use super::tree::Tree;

/// One benign session starting at `start`.
pub(crate) fn session(sc: &mut Scene, start: i64) {
    let user = sc.rng.pick(USERS);
    let (mut t, sub) = sc.open_session(start, user);
    let kb = Kb::seed(sc, &mut t);
    if sc.dialect == Dialect::V02 && sc.rng.chance(0.5) {
        t = extras_02(sc, t, user);
    }
    let max_depth = sc.rng.range(1, 4) as u32;
    let mut tree = Tree::new(&kb, max_depth);
    for _ in 0..if sc.rng.chance(0.3) { 2 } else { 1 } {
        let planner = sc.rng.pick(PLANNERS);
        let at = t + sc.dt(50, 3000);
        tree.root(sc, user, planner, at);
    }
    let t = sc.last_at();
    epilogue(sc, t, user);
    sc.close_session(start, user, sub);
}

/// Legal look-alikes of the decision rules, after the task work.
fn epilogue(sc: &mut Scene, at: i64, user: &'static str) {
    let mut t = at;
    if sc.rng.chance(0.35) {
        // Retracted only after the decision it supported.
        t += sc.dt(100, 2000);
        let (f, fact_id) = sc.fact(t, "verified");
        t += sc.dt(100, 2000);
        sc.decide(t, user, None, &[f]);
        t += sc.dt(100, 5000);
        let cite = sc.rng.chance(0.5);
        sc.retract(t, f, fact_id, cite);
    }
    if sc.rng.chance(0.35) {
        // Conflict resolved by belief.revised before the decision.
        t += sc.dt(100, 2000);
        let (f, _) = sc.fact(t, "attested");
        t += sc.dt(100, 2000);
        let c = sc.conflict(t, f);
        t += sc.dt(100, 3000);
        sc.revise(t, c);
        t += sc.dt(100, 2000);
        sc.decide(t, user, None, &[f]);
    }
}

/// 0.2-only families (adaptation, state, query, command), none tied to a task.
fn extras_02(sc: &mut Scene, at: i64, user: &'static str) -> i64 {
    let mut t = at + sc.dt(20, 500);
    let budget = sc.new_id(Kind::Budget);
    sc.ev(t, "adaptation.budget.established", "runtime:budget")
        .s("target", user)
        .pay()
        .id("budget_id", budget)
        .raw("limit_usd", "25")
        .s("period", "session")
        .end();
    let pairs: [(&str, &str, &str); 3] = [
        (
            "state.snapshot.requested",
            "state.snapshot.ready",
            "runtime:state",
        ),
        ("query.requested", "query.response", "runtime:query"),
        ("command.requested", "command.completed", "runtime:command"),
    ];
    let (ask, answer, svc) = pairs[sc.rng.below(3) as usize];
    t += sc.dt(20, 800);
    let req = sc
        .ev(t, ask, user)
        .s("target", svc)
        .pay()
        .s("name", "workspace")
        .end();
    t += sc.dt(20, 1500);
    sc.ev(t, answer, svc)
        .s("target", user)
        .id("causation_id", req)
        .pay()
        .s("status", "ok")
        .end();
    t
}
