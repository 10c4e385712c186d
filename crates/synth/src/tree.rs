//! Benign task trees, 1 to 4 levels: children finish before their parent
//! in 0.2 and after it in 0.1; cancellations cascade with a causation link;
//! children are asked for directly or delegated (sometimes after a
//! rejection, or escalated before or after the first token).

use super::delegation::Claims;
use super::records::{Kb, Ref};
use super::scene::{Dialect, Id, Kind, Scene};
use super::tasks::{SUPERVISOR, Step, Task, WORKERS};

enum Spawn<'p> {
    Root(&'static str, &'static str),
    Child(&'p Task),
}

#[derive(Clone, Copy, PartialEq)]
enum Ending {
    Completed,
    Failed,
    TimedOut,
    Cancelled,
    LostCheckpoint,
}

/// A task subtree cut short by a cancellation, waiting for its cascade.
struct Pending {
    task: Task,
    kids: Vec<Pending>,
}

pub(super) struct Tree<'k> {
    kb: &'k Kb,
    nodes_left: u32,
    max_depth: u32,
}

impl<'k> Tree<'k> {
    pub fn new(kb: &'k Kb, max_depth: u32) -> Self {
        Tree {
            kb,
            nodes_left: 10,
            max_depth,
        }
    }

    /// A root task of the session and its subtree.
    pub fn root(&mut self, sc: &mut Scene, owner: &'static str, agent: &'static str, at: i64) {
        self.run(sc, &Spawn::Root(owner, agent), at, 0, 1);
    }

    /// Runs a task and its subtree. `not_before` is the parent's terminal
    /// time in 0.1 (a child ends after it). Returns the time by which the
    /// subtree is done (0.2) or the task's terminal time (0.1).
    fn run(&mut self, sc: &mut Scene, how: &Spawn, at: i64, not_before: i64, depth: u32) -> i64 {
        let (mut task, started) = spawn(sc, how, at);
        let n_kids = match depth < self.max_depth {
            true => (sc.rng.range(1, 3) as u32).min(self.nodes_left),
            false => 0,
        };
        self.nodes_left -= n_kids;
        if n_kids > 0 && sc.rng.chance(0.12) {
            return self.cancelled(sc, task, started, n_kids, not_before, depth);
        }
        let ending = pick_ending(sc, n_kids == 0);
        // Children are asked for right after the start; `view` keeps the
        // parent's started event as their causation.
        let view = task.clone();
        let mut kid_at = started;
        let kid_starts: Vec<i64> = (0..n_kids)
            .map(|_| {
                kid_at += sc.dt(30, 1500);
                kid_at
            })
            .collect();
        let work_end = self.work(sc, &mut task, started, ending);
        match sc.dialect {
            // 0.2: children finish first, then the parent.
            Dialect::V02 => {
                let mut end = work_end;
                for &k in &kid_starts {
                    end = end.max(self.run(sc, &Spawn::Child(&view), k, 0, depth + 1));
                }
                let at = end + sc.dt(20, 2000);
                finish(sc, &mut task, at, ending)
            }
            // 0.1: the parent finishes first, then its children.
            Dialect::V01 => {
                let last_kid = kid_starts.last().map_or(0, |k| k + 500);
                let at = work_end.max(not_before).max(last_kid) + sc.dt(20, 2000);
                let end = finish(sc, &mut task, at, ending);
                for &k in &kid_starts {
                    self.run(sc, &Spawn::Child(&view), k, end, depth + 1);
                }
                end
            }
        }
    }

    /// The task's own work: progress, maybe a block and resume, a decision
    /// with a tool call, a save_and_stop pause, an output.
    fn work(&mut self, sc: &mut Scene, task: &mut Task, at: i64, ending: Ending) -> i64 {
        let mut t = at;
        let mut p = 0;
        for i in 0..sc.rng.range(1, 3) {
            t += sc.dt(200, 4000);
            p = (p + sc.rng.range(10, 30) as u32).min(95);
            let can_escalate =
                task.token.is_some() && task.agent != SUPERVISOR && !task.was_rejected;
            if i == 1 && can_escalate && sc.rng.chance(0.3) {
                t = reissue_after_escalation(sc, task, t);
                sc.step_present(t, task, Step::Progress(p));
            } else {
                sc.step(t, task, Step::Progress(p));
            }
        }
        if sc.rng.chance(0.2) {
            t += sc.dt(100, 3000);
            sc.step(t, task, Step::Blocked);
            t += sc.dt(500, 8000);
            sc.step(t, task, Step::Started);
        }
        if sc.rng.chance(0.35) {
            let fact = self.kb.facts[sc.rng.below(self.kb.facts.len() as u64) as usize];
            // Mixed trust (one unverified, one verified) is not a finding.
            let chain: &[Ref] = match sc.rng.chance(0.3) {
                true => &[self.kb.obs, fact],
                false => &[fact],
            };
            t += sc.dt(100, 2000);
            let d = sc.decide(t, task.agent, Some(task.id), chain);
            if sc.rng.chance(0.6) {
                t = sc.tool_call(t + sc.dt(20, 500), task.agent, task.id, d, fact);
            }
        }
        if sc.rng.chance(0.12) {
            t = sc.pause(t + sc.dt(100, 2000), task);
            t += sc.dt(50, 1000);
            sc.step(t, task, Step::Progress((p + 2).min(99)));
        }
        if sc.rng.chance(0.3) {
            t += sc.dt(100, 3000);
            sc.step(t, task, Step::Output);
        }
        if ending == Ending::LostCheckpoint {
            t = sc.pause_lost_checkpoint(t + sc.dt(100, 2000), task);
        }
        t
    }

    /// The task's children start; then the task is cancelled and the cancel
    /// cascades down, each child naming its parent's cancellation.
    fn cancelled(
        &mut self,
        sc: &mut Scene,
        task: Task,
        started: i64,
        n_kids: u32,
        not_before: i64,
        depth: u32,
    ) -> i64 {
        let mut latest = started;
        let mut kids = Vec::new();
        for _ in 0..n_kids {
            let at = started + sc.dt(30, 1500);
            let (kid, l) = self.shallow(sc, &task, at, depth + 1);
            latest = latest.max(l);
            kids.push(kid);
        }
        let pending = Pending { task, kids };
        let at = latest.max(not_before) + sc.dt(100, 3000);
        let mut task = pending.task;
        let req = sc.step(at, &mut task, Step::CancelRequested);
        let at = at + sc.dt(20, 1000);
        let cancelled = sc.step(at, &mut task, Step::Cancelled(Some(req)));
        // Either the parent's cancellation or its cancel request is a link.
        let cause = if sc.rng.chance(0.5) { cancelled } else { req };
        let mut end = at;
        for kid in pending.kids {
            let k_at = at + sc.dt(5, 800);
            end = end.max(cascade(sc, kid, cause, k_at));
        }
        end
    }

    /// A child that only gets going (and maybe its own child) before the cancel.
    fn shallow(&mut self, sc: &mut Scene, parent: &Task, at: i64, depth: u32) -> (Pending, i64) {
        let (mut task, mut t) = spawn(sc, &Spawn::Child(parent), at);
        if sc.rng.chance(0.6) {
            t += sc.dt(100, 2000);
            sc.step(t, &mut task, Step::Progress(sc.rng.range(5, 40) as u32));
        }
        let mut kids = Vec::new();
        if depth < self.max_depth && self.nodes_left > 0 && sc.rng.chance(0.4) {
            self.nodes_left -= 1;
            let (kid, l) = self.shallow(sc, &task, t + sc.dt(30, 1000), depth + 1);
            t = t.max(l);
            kids.push(kid);
        }
        (Pending { task, kids }, t)
    }
}

fn cascade(sc: &mut Scene, p: Pending, cause: Id, at: i64) -> i64 {
    let mut task = p.task;
    let c = sc.step(at, &mut task, Step::Cancelled(Some(cause)));
    let mut end = at;
    for kid in p.kids {
        let k_at = at + sc.dt(5, 800);
        end = end.max(cascade(sc, kid, c, k_at));
    }
    end
}

fn pick_ending(sc: &mut Scene, leaf: bool) -> Ending {
    let r = sc.rng.below(100);
    match (leaf, r) {
        (true, 0..6) => Ending::Failed,
        (true, 6..11) => Ending::TimedOut,
        (true, 11..17) => Ending::Cancelled,
        (true, 17..21) => Ending::LostCheckpoint,
        (false, 0..8) => Ending::Failed,
        _ => Ending::Completed,
    }
}

/// Creates a task directly or by delegation; returns it and its start time.
fn spawn(sc: &mut Scene, how: &Spawn, at: i64) -> (Task, i64) {
    match *how {
        Spawn::Root(owner, agent) => sc.start_direct(at, owner, agent, None),
        Spawn::Child(p) => {
            let w = sc.rng.pick(WORKERS);
            match sc.rng.below(5) {
                0 | 1 => sc.start_direct(at, p.agent, w, Some(p.id)),
                2 => sc.start_delegated(at, p, w),
                3 => {
                    // Rejected by one worker, then delegated to another: the
                    // rejection binds (task, first worker) only.
                    let id = sc.new_id(Kind::Task);
                    let req = sc.deleg_request(at, p.agent, w, id, p.id, Some(p.last));
                    let t = at + sc.dt(20, 800);
                    let rej = sc
                        .deleg(t, "delegation.rejected", p.agent, w, id, p.id, Some(req))
                        .pay()
                        .s("reason", "worker is at capacity")
                        .ts("retry_after", t + 3_600_000)
                        .end();
                    let w2 = WORKERS
                        [(WORKERS.iter().position(|x| *x == w).unwrap_or(0) + 1) % WORKERS.len()];
                    let t = t + sc.dt(20, 800);
                    let req2 = sc.deleg_request(t, p.agent, w2, id, p.id, Some(rej));
                    let t = t + sc.dt(20, 800);
                    let (mut task, t) = sc.accept_delegation(t, p, w2, id, req2);
                    task.was_rejected = true;
                    (task, t)
                }
                _ => {
                    // Escalated to a supervisor before any token was issued.
                    let id = sc.new_id(Kind::Task);
                    let req = sc.deleg_request(at, p.agent, w, id, p.id, Some(p.last));
                    let t = at + sc.dt(200, 3000);
                    let esc = sc
                        .deleg(
                            t,
                            "delegation.escalated",
                            p.agent,
                            SUPERVISOR,
                            id,
                            p.id,
                            Some(req),
                        )
                        .pay()
                        .s("reason", "task exceeds worker capability")
                        .frac("progress_so_far", 0)
                        .end();
                    let t = t + sc.dt(20, 800);
                    sc.accept_delegation(t, p, SUPERVISOR, id, esc)
                }
            }
        }
    }
}

/// Escalation of a running delegated task: the supervisor gets a new token
/// and presents only that one from here on (the old one is superseded).
fn reissue_after_escalation(sc: &mut Scene, task: &mut Task, at: i64) -> i64 {
    let parent = task.parent.expect("delegated tasks have a parent");
    let esc = sc
        .deleg(
            at,
            "delegation.escalated",
            task.owner,
            SUPERVISOR,
            task.id,
            parent,
            Some(task.last),
        )
        .pay()
        .s("reason", "needs elevated permissions")
        .frac("progress_so_far", 30)
        .end();
    let t = at + sc.dt(20, 800);
    let acc = sc
        .deleg(
            t,
            "delegation.accepted",
            task.owner,
            SUPERVISOR,
            task.id,
            parent,
            Some(esc),
        )
        .pay()
        .end();
    task.agent = SUPERVISOR;
    let t = t + sc.dt(20, 600);
    let tok = sc.token(t, task, Claims::Valid);
    task.last = sc.handoff(t, task, &tok, acc);
    task.token = Some(tok);
    t + sc.dt(50, 1500)
}

/// Ends a task; sometimes the owner acknowledges the terminal event, and
/// sometimes it is redelivered (an exact duplicate, not a finding).
fn finish(sc: &mut Scene, task: &mut Task, at: i64, ending: Ending) -> i64 {
    let (end, last) = match ending {
        Ending::Completed => (at, sc.step(at, task, Step::Completed)),
        Ending::Failed => (at, sc.step(at, task, Step::Failed("tool_error"))),
        Ending::TimedOut => (at, sc.step(at, task, Step::TimedOut)),
        Ending::LostCheckpoint => (at, sc.step(at, task, Step::Failed("checkpoint_missing"))),
        Ending::Cancelled => {
            let req = sc.step(at, task, Step::CancelRequested);
            let t = at + sc.dt(20, 1000);
            (t, sc.step(t, task, Step::Cancelled(Some(req))))
        }
    };
    if sc.rng.chance(0.3) {
        sc.ev(end + sc.dt(5, 500), "event.acknowledged", task.owner)
            .s("target", task.agent)
            .id("causation_id", last)
            .pay()
            .id("acknowledged_event_id", last)
            .end();
    }
    if sc.rng.chance(0.15) {
        let again = end + sc.dt(1000, 30_000);
        sc.redeliver(last, again);
        sc.ev(again, "event.redelivered", task.agent)
            .s("target", task.owner)
            .pay()
            .id("original_event_id", last)
            .int("attempt", 2)
            .end();
    }
    end
}
