//! Planted cases about tasks: orphans, parents ending early,
//! checkpoints, lifecycle and delegation (tokens are in `violations_tokens`).
//! Each case is a small tree that is legal except for the one fault it
//! plants (or, where the rule definitions overlap, the faults it records
//! together).

use super::scene::{Dialect, Id, Kind, Scene};
use super::tasks::{PLANNERS, SUPERVISOR, Step, Task, WORKERS};

const USER: &str = "agent:orchestrator";

pub(super) fn root(sc: &mut Scene, at: i64) -> (Task, i64) {
    let planner = sc.rng.pick(PLANNERS);
    sc.start_direct(at, USER, planner, None)
}

fn child(sc: &mut Scene, p: &Task, at: i64) -> (Task, i64) {
    let w = sc.rng.pick(WORKERS);
    sc.start_direct(at + sc.dt(20, 500), p.agent, w, Some(p.id))
}

pub(super) fn progress(sc: &mut Scene, t: &mut Task, at: i64) -> i64 {
    let at = at + sc.dt(100, 2000);
    sc.step(at, t, Step::Progress(sc.rng.range(10, 90) as u32));
    at
}

/// Completes parent and child in the order the dialect requires.
pub(super) fn end_pair(sc: &mut Scene, p: &mut Task, c: &mut Task, at: i64) {
    let (first, second) = match sc.dialect {
        Dialect::V02 => (c, p),
        Dialect::V01 => (p, c),
    };
    let at = at + sc.dt(100, 2000);
    sc.step(at, first, Step::Completed);
    sc.step(at + sc.dt(20, 1500), second, Step::Completed);
}

/// Parent cancelled while its child runs; the child then completes. In 0.2
/// that is also parent.terminated_early (the cascade exception fails).
pub(crate) fn cancel_not_cascaded(sc: &mut Scene, at: i64) {
    let (mut p, t) = root(sc, at);
    let (mut c, t) = child(sc, &p, t);
    let t = progress(sc, &mut c, t) + sc.dt(20, 900);
    let req = sc.step(t, &mut p, Step::CancelRequested);
    let t = t + sc.dt(20, 900);
    let x = sc.step(t, &mut p, Step::Cancelled(Some(req)));
    sc.step(t + sc.dt(100, 3000), &mut c, Step::Completed);
    sc.plant("orphan.cancel_not_cascaded", x, Some(c.id));
    if sc.dialect == Dialect::V02 {
        sc.plant("parent.terminated_early", x, Some(p.id));
    }
}

/// Parent completes while its child runs. 0.1: the child never ends. 0.2:
/// the child reports progress afterwards, then completes; that is also
/// parent.terminated_early by definition.
pub(crate) fn outlived_parent(sc: &mut Scene, at: i64) {
    let (mut p, t) = root(sc, at);
    let (mut c, t) = child(sc, &p, t);
    let t = progress(sc, &mut c, t) + sc.dt(20, 900);
    let x = sc.step(t, &mut p, Step::Completed);
    let t = progress(sc, &mut c, t);
    sc.plant("orphan.outlived_parent", x, Some(c.id));
    if sc.dialect == Dialect::V02 {
        sc.step(t + sc.dt(100, 3000), &mut c, Step::Completed);
        sc.plant("parent.terminated_early", x, Some(p.id));
    }
}

/// A cascaded child cancellation that names its own last event as cause.
pub(crate) fn cascade_unlinked(sc: &mut Scene, at: i64) {
    let (mut p, t) = root(sc, at);
    let (mut c, t) = child(sc, &p, t);
    let t = progress(sc, &mut c, t) + sc.dt(20, 900);
    let req = sc.step(t, &mut p, Step::CancelRequested);
    let t = t + sc.dt(20, 900);
    sc.step(t, &mut p, Step::Cancelled(Some(req)));
    let y = sc.step(t + sc.dt(20, 900), &mut c, Step::Cancelled(None));
    sc.plant("orphan.cascade_unlinked", y, Some(c.id));
}

/// A task whose parent never appears as a task anywhere.
pub(crate) fn dangling_parent(sc: &mut Scene, at: i64) {
    let ghost = sc.new_id(Kind::Task);
    let mut c = sc.submit(at, USER, sc.rng.pick(WORKERS), Some(ghost));
    let x = c.last;
    let t = at + sc.dt(20, 900);
    sc.step(t, &mut c, Step::Accepted);
    let t = t + sc.dt(20, 900);
    sc.step(t, &mut c, Step::Started);
    let t = progress(sc, &mut c, t);
    sc.step(t + sc.dt(100, 2000), &mut c, Step::Completed);
    sc.plant("orphan.dangling_parent", x, Some(c.id));
}

/// 0.2: the parent completes while its child runs; the child's next event
/// is its terminal one, so it is no orphan.
pub(crate) fn terminated_early(sc: &mut Scene, at: i64) {
    let (mut p, t) = root(sc, at);
    let (mut c, t) = child(sc, &p, t);
    let t = progress(sc, &mut c, t) + sc.dt(20, 900);
    let x = sc.step(t, &mut p, Step::Completed);
    sc.step(t + sc.dt(100, 3000), &mut c, Step::Completed);
    sc.plant("parent.terminated_early", x, Some(p.id));
}

/// 0.1: the child completes before its (uncancelled) parent.
pub(crate) fn child_terminated_first(sc: &mut Scene, at: i64) {
    let (mut p, t) = root(sc, at);
    let (mut c, t) = child(sc, &p, t);
    let t = progress(sc, &mut c, t) + sc.dt(20, 900);
    let y = sc.step(t, &mut c, Step::Completed);
    sc.step(t + sc.dt(100, 3000), &mut p, Step::Completed);
    sc.plant("parent.child_terminated_first", y, Some(c.id));
}

/// The checkpoint faults, each on a solo task; each plants the event its
/// rule names.
#[derive(Clone, Copy)]
pub(crate) enum Ckpt {
    Missing,
    Late,
    ResumeUnknown,
    ResumeWithoutId,
    NotStopped,
}

pub(crate) fn checkpoint(sc: &mut Scene, at: i64, fault: Ckpt) {
    let (mut p, t) = root(sc, at);
    let t = progress(sc, &mut p, t) + sc.dt(100, 2000);
    let force = matches!(fault, Ckpt::NotStopped) && sc.rng.chance(0.5);
    let (policy, grace) = if force {
        ("force_stop", 0)
    } else {
        ("save_and_stop", sc.rng.pick(&[2000, 5000]))
    };
    let req = sc.int_request(t, &p, policy, grace);
    let ack_at = t + sc.dt(5, 400);
    let ack = sc.int_ack(ack_at, &p, policy, req);
    if force {
        // Work goes on after a force_stop was acknowledged.
        let x = sc.step(ack_at + sc.dt(100, 2000), &mut p, Step::Output);
        sc.step(
            ack_at + sc.dt(2500, 5000),
            &mut p,
            Step::Failed("interrupted"),
        );
        sc.plant("checkpoint.not_stopped", x, Some(p.id));
        return;
    }
    if let Ckpt::Missing = fault {
        sc.step(
            t + grace + sc.dt(100, 3000),
            &mut p,
            Step::Failed("interrupted"),
        );
        sc.plant("checkpoint.missing", req, Some(p.id));
        return;
    }
    let saved_at = match fault {
        Ckpt::Late => t + grace + sc.dt(1, 5000),
        _ => t + sc.dt(450, grace - 1),
    };
    let ckpt = sc.new_id(Kind::Ckpt);
    let saved = sc.int_saved(saved_at, &p, ckpt, ack);
    let mut r_at = saved_at + sc.dt(1000, 20_000);
    if let Ckpt::NotStopped = fault {
        let x = sc.step(saved_at + sc.dt(100, 900), &mut p, Step::Progress(70));
        sc.plant("checkpoint.not_stopped", x, Some(p.id));
        r_at += 1000;
    }
    let named = match fault {
        Ckpt::ResumeUnknown => Some(sc.new_id(Kind::Ckpt)),
        Ckpt::ResumeWithoutId => None,
        _ => Some(ckpt),
    };
    let resumed = sc.int_resumed(r_at, &p, named, saved);
    p.last = resumed;
    let t = progress(sc, &mut p, r_at);
    sc.step(t + sc.dt(100, 2000), &mut p, Step::Completed);
    match fault {
        Ckpt::Late => sc.plant("checkpoint.late", saved, Some(p.id)),
        Ckpt::ResumeUnknown => sc.plant("checkpoint.resume_unknown", resumed, Some(p.id)),
        Ckpt::ResumeWithoutId => sc.plant("checkpoint.resume_without_id", resumed, Some(p.id)),
        Ckpt::Missing | Ckpt::NotStopped => {}
    }
}

/// One illegal step in an otherwise legal solo task (four kinds).
pub(crate) fn illegal_transition(sc: &mut Scene, at: i64) {
    let mut p = sc.submit(at, USER, sc.rng.pick(PLANNERS), None);
    let mut t = at;
    let mut next = |sc: &mut Scene, p: &mut Task, s: Step| {
        t += sc.dt(20, 1500);
        sc.step(t, p, s)
    };
    let x = match sc.rng.below(4) {
        0 => {
            for s in [
                Step::Accepted,
                Step::Started,
                Step::Progress(50),
                Step::Completed,
            ] {
                next(sc, &mut p, s);
            }
            next(sc, &mut p, Step::Cancelled(None))
        }
        1 => {
            for s in [Step::Accepted, Step::Started, Step::Blocked] {
                next(sc, &mut p, s);
            }
            let x = next(sc, &mut p, Step::Output);
            next(sc, &mut p, Step::Completed);
            x
        }
        2 => {
            next(sc, &mut p, Step::Accepted);
            next(sc, &mut p, Step::Started);
            let x = next(sc, &mut p, Step::Accepted);
            next(sc, &mut p, Step::Started);
            next(sc, &mut p, Step::Completed);
            x
        }
        _ => {
            let x = next(sc, &mut p, Step::Progress(20));
            next(sc, &mut p, Step::Progress(80));
            next(sc, &mut p, Step::Completed);
            x
        }
    };
    sc.plant("lifecycle.illegal_transition", x, Some(p.id));
}

/// task.started straight after task.submitted.
pub(crate) fn skipped_accept(sc: &mut Scene, at: i64) {
    let mut p = sc.submit(at, USER, sc.rng.pick(PLANNERS), None);
    let t = at + sc.dt(20, 1500);
    let x = sc.step(t, &mut p, Step::Started);
    let t = progress(sc, &mut p, t);
    sc.step(t + sc.dt(100, 2000), &mut p, Step::Completed);
    sc.plant("lifecycle.skipped_accept", x, Some(p.id));
}

/// A progress event whose payload.task_id is missing or names another task.
pub(crate) fn task_id_mismatch(sc: &mut Scene, at: i64) {
    let (mut p, t) = root(sc, at);
    let t = t + sc.dt(100, 2000);
    let other = sc.rng.chance(0.5).then(|| sc.new_id(Kind::Task));
    let x = sc
        .ev(t, "task.progress", p.agent)
        .s("target", p.owner)
        .tagged("topic", "tasks.", p.id)
        .id("task_id", p.id)
        .id("causation_id", p.last)
        .pay()
        .opt_id("task_id", other)
        .s("state", "progress")
        .frac("progress", 40)
        .end();
    p.last = x;
    sc.step(t + sc.dt(100, 2000), &mut p, Step::Completed);
    sc.plant("lifecycle.task_id_mismatch", x, Some(p.id));
}

/// 0.2: a child whose later event names a second (existing) parent; both
/// parents finish after it, so no parent rule applies whichever counts.
pub(crate) fn conflicting_parent(sc: &mut Scene, at: i64) {
    let (mut p1, t) = root(sc, at);
    let (mut p2, t) = root(sc, t + sc.dt(20, 500));
    let (mut c, t) = child(sc, &p1, t);
    let t = t + sc.dt(100, 2000);
    let x = sc
        .ev(t, "task.progress", c.agent)
        .s("target", c.owner)
        .tagged("topic", "tasks.", c.id)
        .id("task_id", c.id)
        .id("parent_task_id", p2.id)
        .id("causation_id", c.last)
        .pay()
        .id("task_id", c.id)
        .s("state", "progress")
        .frac("progress", 50)
        .end();
    c.last = x;
    let t = t + sc.dt(100, 2000);
    sc.step(t, &mut c, Step::Completed);
    sc.step(t + sc.dt(20, 900), &mut p1, Step::Completed);
    sc.step(t + sc.dt(20, 900), &mut p2, Step::Completed);
    sc.plant("lifecycle.conflicting_parent", x, Some(c.id));
}

/// Rejected, then escalated anyway (the task never becomes active).
pub(crate) fn escalated_after_rejection(sc: &mut Scene, at: i64) {
    let (mut p, t) = root(sc, at);
    let id: Id = sc.new_id(Kind::Task);
    let w = sc.rng.pick(WORKERS);
    let req = sc.deleg_request(t + sc.dt(20, 500), p.agent, w, id, p.id, Some(p.last));
    let t = t + sc.dt(600, 1500);
    let rej = sc
        .deleg(t, "delegation.rejected", p.agent, w, id, p.id, Some(req))
        .pay()
        .s("reason", "worker is at capacity")
        .end();
    let t = t + sc.dt(20, 900);
    let x = sc
        .deleg(
            t,
            "delegation.escalated",
            p.agent,
            SUPERVISOR,
            id,
            p.id,
            Some(rej),
        )
        .pay()
        .s("reason", "escalating the rejected work")
        .end();
    let t = progress(sc, &mut p, t);
    sc.step(t + sc.dt(100, 2000), &mut p, Step::Completed);
    sc.plant("delegation.escalated_after_rejection", x, Some(id));
}
