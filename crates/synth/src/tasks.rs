//! Task lifecycle and interruption flows, as building blocks for benign
//! sessions and planted cases alike (delegation is in `delegation`).

use super::emit::Ev;
use super::scene::{Id, Kind, Scene};
use std::rc::Rc;

// The cast: who asks for work, who plans it, who does it.
pub(crate) const USERS: &[&str] = &[
    "user:console",
    "agent:orchestrator",
    "agent:assistant",
    "service:scheduler",
];
pub(crate) const PLANNERS: &[&str] = &[
    "agent:planner",
    "agent:researcher",
    "agent:coder",
    "agent:analyst",
];
pub(crate) const WORKERS: &[&str] = &[
    "agent:worker-1",
    "agent:worker-2",
    "agent:worker-3",
    "agent:worker-4",
    "agent:reviewer",
    "tool:web_crawler",
    "tool:indexer",
];
pub(crate) const SUPERVISOR: &str = "agent:supervisor";

/// A task as its flow sees it; `last` is the causation of its next event.
#[derive(Clone)]
pub(crate) struct Task {
    pub id: Id,
    pub parent: Option<Id>,
    /// Performs the task: source of its events (delegated_to when delegated).
    pub agent: &'static str,
    /// Asked for it (delegated_by when delegated).
    pub owner: &'static str,
    pub last: Id,
    /// The handoff token its agent presents, when it was delegated.
    pub token: Option<Rc<str>>,
    /// A delegation of it was rejected once: escalating it now would be
    /// delegation.escalated_after_rejection.
    pub was_rejected: bool,
}

#[derive(Clone, Copy)]
pub(crate) enum Step {
    Accepted,
    Started,
    Progress(u32),
    Output,
    Blocked,
    Completed,
    Failed(&'static str),
    TimedOut,
    CancelRequested,
    /// With the causation to name instead of the task's last event.
    Cancelled(Option<Id>),
}

const MESSAGES: &[&str] = &[
    "Indexed 12 pages",
    "Parsed 3 of 7 documents",
    "Waiting on rate limit window",
    "Merged partial results",
    "Validated schema for batch 2",
    "Retrying flaky upstream (attempt 2)",
    "Summarized section \"Risks\"",
    "Fetched 48 rows from warehouse",
];
pub(super) const DESCRIPTIONS: &[&str] = &[
    "crawl docs.example.org and index changed pages",
    "summarize Q3 incident reports",
    "draft migration plan for the billing schema",
    "review pull request #4821 for data races",
    "collect pricing for 12 vendors — résumé format",
    "reconcile ledger exports with \"bank\" statements",
    "build evaluation set from support tickets",
    "translate onboarding guide to German",
];

impl Scene {
    pub fn submit(
        &mut self,
        at: i64,
        owner: &'static str,
        agent: &'static str,
        parent: Option<Id>,
    ) -> Task {
        let id = self.new_id(Kind::Task);
        let desc = self.rng.pick(DESCRIPTIONS);
        let last = self
            .ev(at, "task.submitted", owner)
            .s("target", agent)
            .tagged("topic", "tasks.", id)
            .id("task_id", id)
            .opt_id("parent_task_id", parent)
            .pay()
            .id("task_id", id)
            .s("state", "submitted")
            .s("description", desc)
            .opt_id("parent_task_id", parent)
            .end();
        Task {
            id,
            parent,
            agent,
            owner,
            last,
            token: None,
            was_rejected: false,
        }
    }

    /// submitted → accepted → started; returns the task and the time after.
    pub fn start_direct(
        &mut self,
        at: i64,
        owner: &'static str,
        agent: &'static str,
        parent: Option<Id>,
    ) -> (Task, i64) {
        let mut t = self.submit(at, owner, agent, parent);
        let a = at + self.dt(20, 900);
        self.step(a, &mut t, Step::Accepted);
        let s = a + self.dt(20, 1500);
        self.step(s, &mut t, Step::Started);
        (t, s)
    }

    pub fn step(&mut self, at: i64, t: &mut Task, s: Step) -> Id {
        t.last = self.task_ev(at, t, s, false).end();
        t.last
    }

    /// A step that also presents the task's handoff token with its binding.
    pub fn step_present(&mut self, at: i64, t: &mut Task, s: Step) -> Id {
        t.last = self.task_ev(at, t, s, true).end();
        t.last
    }

    /// The event of a step, payload open so callers may add to it.
    pub fn task_ev(&mut self, at: i64, t: &Task, s: Step, present: bool) -> Ev<'_> {
        let msg = self.rng.pick(MESSAGES);
        let n = self.rng.range(1, 60);
        let (ty, state) = match s {
            Step::Accepted => ("task.accepted", "accepted"),
            Step::Started => ("task.started", "started"),
            Step::Progress(_) => ("task.progress", "progress"),
            Step::Output => ("task.output", "output"),
            Step::Blocked => ("task.blocked", "blocked"),
            Step::Completed => ("task.completed", "completed"),
            Step::Failed(_) => ("task.failed", "failed"),
            Step::TimedOut => ("task.timed_out", "timed_out"),
            Step::CancelRequested => ("task.cancel.requested", ""),
            Step::Cancelled(_) => ("task.cancelled", "cancelled"),
        };
        let (src, dst) = match s {
            Step::CancelRequested => (t.owner, t.agent),
            _ => (t.agent, t.owner),
        };
        let cause = match s {
            Step::Cancelled(Some(c)) => c,
            _ => t.last,
        };
        let mut e = self
            .ev(at, ty, src)
            .s("target", dst)
            .tagged("topic", "tasks.", t.id)
            .id("task_id", t.id);
        if let (true, Some(tok)) = (present, &t.token) {
            e = e
                .opt_id("parent_task_id", t.parent)
                .s("delegated_by", t.owner)
                .s("delegated_to", t.agent)
                .s("handoff_token", tok);
        }
        e = e.id("causation_id", cause).pay().id("task_id", t.id);
        if !state.is_empty() {
            e = e.s("state", state);
        }
        match s {
            Step::Progress(p) => e.s("message", msg).frac("progress", p),
            Step::Output => e.s("message", msg).open("result").int("items", n).close(),
            Step::Blocked => e.s("reason", "waiting for dependency"),
            Step::Completed => e.s("result", "complete"),
            Step::Failed(code) => e
                .open("error")
                .s("code", code)
                .s("message", msg)
                .raw("retryable", "false")
                .close(),
            Step::TimedOut => e
                .open("error")
                .s("code", "task_timeout")
                .s("message", "deadline exceeded")
                .raw("retryable", "true")
                .close(),
            Step::CancelRequested => e.s("reason", "user requested cancellation"),
            Step::Cancelled(_) => e.s("reason", "cancellation confirmed"),
            Step::Accepted | Step::Started => e,
        }
    }

    pub fn int_request(&mut self, at: i64, t: &Task, policy: &str, grace_ms: i64) -> Id {
        self.ev(at, "interruption.requested", "runtime:main")
            .s("target", t.agent)
            .id("task_id", t.id)
            .id("causation_id", t.last)
            .s("interruption_policy", policy)
            .pay()
            .s("reason", "node drain for maintenance")
            .int("grace_period_ms", grace_ms)
            .end()
    }

    pub fn int_ack(&mut self, at: i64, t: &Task, policy: &str, req: Id) -> Id {
        self.ev(at, "interruption.acknowledged", t.agent)
            .s("target", "runtime:main")
            .id("task_id", t.id)
            .id("causation_id", req)
            .s("interruption_policy", policy)
            .pay()
            .end()
    }

    pub fn int_saved(&mut self, at: i64, t: &Task, ckpt: Id, cause: Id) -> Id {
        let bytes = self.rng.range(1, 64) * 4096;
        self.ev(at, "interruption.saved", t.agent)
            .s("target", "runtime:main")
            .id("task_id", t.id)
            .id("checkpoint_id", ckpt)
            .ts("checkpoint_at", at)
            .id("causation_id", cause)
            .pay()
            .int("bytes_saved", bytes)
            .tagged("location", "s3://checkpoints/", ckpt)
            .end()
    }

    pub fn int_resumed(&mut self, at: i64, t: &Task, ckpt: Option<Id>, cause: Id) -> Id {
        self.ev(at, "interruption.resumed", "runtime:main")
            .s("target", t.agent)
            .id("task_id", t.id)
            .opt_id("checkpoint_id", ckpt)
            .id("causation_id", cause)
            .pay()
            .end()
    }

    /// A save_and_stop interruption done right: saved within the grace period
    /// (sometimes exactly at its end, which is on time), resumed from that
    /// checkpoint, then work goes on. Returns the time of the resume.
    pub fn pause(&mut self, at: i64, t: &mut Task) -> i64 {
        let grace = self.rng.pick(&[2000, 5000, 10_000]);
        let req = self.int_request(at, t, "save_and_stop", grace);
        let ack = self.int_ack(at + self.dt(5, 400), t, "save_and_stop", req);
        let saved_at = match self.rng.below(3) {
            0 => at + grace,
            1 => at + grace - 1,
            _ => at + self.dt(450, grace - 2),
        };
        let ckpt = self.new_id(Kind::Ckpt);
        let saved = self.int_saved(saved_at, t, ckpt, ack);
        let resumed_at = saved_at + self.dt(1000, 30_000);
        t.last = self.int_resumed(resumed_at, t, Some(ckpt), saved);
        resumed_at
    }

    /// A resume naming a checkpoint that was never saved, after which the task
    /// fails with checkpoint_missing as the spec requires (legal). Returns the
    /// resume time; the caller ends the task with `Step::Failed("checkpoint_missing")`.
    pub fn pause_lost_checkpoint(&mut self, at: i64, t: &mut Task) -> i64 {
        let req = self.int_request(at, t, "save_and_stop", 5000);
        let ack = self.int_ack(at + self.dt(5, 400), t, "save_and_stop", req);
        let saved_at = at + self.dt(450, 4000);
        let ckpt = self.new_id(Kind::Ckpt);
        let saved = self.int_saved(saved_at, t, ckpt, ack);
        let lost = self.new_id(Kind::Ckpt);
        let resumed_at = saved_at + self.dt(1000, 20_000);
        t.last = self.int_resumed(resumed_at, t, Some(lost), saved);
        resumed_at
    }
}
