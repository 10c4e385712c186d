//! Session framing, memory facts, observations, beliefs and decisions.

use super::scene::{Id, Kind, Scene};

/// An emitted event that later events cite (causation, evidence_chain).
#[derive(Clone, Copy)]
pub(crate) struct Ref {
    pub id: Id,
    pub at: i64,
    pub source: &'static str,
}

/// The stable knowledge of a benign session: one unverified observation and
/// verified/attested facts that stay fresh, unretracted and uncontested.
pub(crate) struct Kb {
    pub obs: Ref,
    pub facts: Vec<Ref>,
}

const FACTS: &[&str] = &[
    "billing-db primary is in eu-west-1",
    "customer 4411 is on the enterprise plan",
    "release 2.8 froze on 2026-07-10",
    "the vendor API allows 600 requests per minute",
    "ticket backlog is 1,284 open items",
];
const DECISIONS: &[&str] = &[
    "retry failed batch with smaller pages",
    "route refund request to finance queue",
    "schedule migration for Saturday window",
    "escalate anomaly to on-call",
    "use cached index instead of recrawl",
];
const TOOLS: &[&str] = &[
    "tool:sql_runner",
    "tool:http_fetch",
    "tool:shell",
    "tool:vector_search",
];
pub(crate) const HARNESS: &str = "harness:aep";

impl Scene {
    /// session.opened, ready, a filtered subscription and its confirmation.
    /// Returns the time after and the subscription id.
    pub fn open_session(&mut self, at: i64, user: &'static str) -> (i64, Id) {
        let (session, version) = (self.session, self.dialect.version());
        self.ev(at, "session.opened", user)
            .s("target", HARNESS)
            .pay()
            .id("session_id", session)
            .s("version", version)
            .end();
        let t = at + self.dt(5, 300);
        self.ev(t, "session.ready", HARNESS)
            .s("target", user)
            .pay()
            .id("session_id", session)
            .open("capabilities")
            .s("protocol", "harmovela")
            .strs("transports", &["stdio", "websocket"])
            .close()
            .end();
        let sub = self.new_id(Kind::Sub);
        let types: &[&str] = match self.rng.below(3) {
            0 => &["task.*", "delegation.*"],
            1 => &["task.*", "memory.*", "belief.*"],
            _ => &["task.*", "interruption.*", "session.*"],
        };
        let t = t + self.dt(5, 300);
        let req = self
            .ev(t, "subscription.requested", user)
            .s("target", HARNESS)
            .pay()
            .strs("types", types)
            .s("target", user)
            .end();
        let t = t + self.dt(5, 200);
        self.ev(t, "subscription.created", HARNESS)
            .s("target", user)
            .id("causation_id", req)
            .pay()
            .id("subscription_id", sub)
            .open("filter")
            .strs("types", types)
            .s("target", user)
            .close()
            .end();
        (t, sub)
    }

    /// Heartbeats through the session, then unsubscribe and close after its
    /// last event so far.
    pub fn close_session(&mut self, start: i64, user: &'static str, sub: Id) {
        let end = self.last_at();
        let session = self.session;
        let mut t = start + self.dt(8000, 20_000);
        while t < end {
            self.ev(t, "session.heartbeat", HARNESS)
                .s("target", user)
                .pay()
                .id("session_id", session)
                .end();
            t += self.dt(15_000, 40_000);
        }
        let t = end + self.dt(50, 2000);
        self.ev(t, "subscription.cancelled", user)
            .s("target", HARNESS)
            .pay()
            .id("subscription_id", sub)
            .end();
        let t = t + self.dt(5, 300);
        self.ev(t, "session.closed", user)
            .s("target", HARNESS)
            .pay()
            .id("session_id", session)
            .s("reason", "done")
            .end();
    }

    /// memory.fact.added with a source_trust and validity; returns the event
    /// and its fact_id.
    pub fn fact_ex(
        &mut self,
        at: i64,
        trust: &str,
        valid_until: i64,
        stale_after: &str,
    ) -> (Ref, Id) {
        let fact_id = self.new_id(Kind::Fact);
        let value = self.rng.pick(FACTS);
        let source = "memory:main";
        let id = self
            .ev(at, "memory.fact.added", source)
            .s("belief_status", "asserted")
            .s("belief_scope", "fact")
            .frac("confidence", 90)
            .s("source_trust", trust)
            .ts("valid_until", valid_until)
            .s("stale_after", stale_after)
            .pay()
            .id("fact_id", fact_id)
            .s("value", value)
            .s("source", "user_input")
            .end();
        (Ref { id, at, source }, fact_id)
    }

    /// A fact that stays fresh for hours (sessions last minutes).
    pub fn fact(&mut self, at: i64, trust: &str) -> (Ref, Id) {
        self.fact_ex(at, trust, at + 14_400_000, "PT2H")
    }

    /// environment.observed from an unverified sensor.
    pub fn observe(&mut self, at: i64) -> Ref {
        let source = "sensor:web-monitor";
        let id = self
            .ev(at, "environment.observed", source)
            .s("belief_scope", "observation")
            .s("source_trust", "unverified")
            .frac("confidence", 55)
            .pay()
            .s("observation", "status page reports degraded latency")
            .s("resource", "https://status.example.org")
            .end();
        Ref { id, at, source }
    }

    /// agent.decision.recorded whose basis is `chain` (origin first; the last
    /// entry is its causation).
    pub fn decide(&mut self, at: i64, actor: &'static str, task: Option<Id>, chain: &[Ref]) -> Ref {
        let what = self.rng.pick(DECISIONS);
        let cause = chain.last().expect("a decision has a basis").id;
        let entries: Vec<(&str, Id)> = chain.iter().map(|r| (r.source, r.id)).collect();
        let id = self
            .ev(at, "agent.decision.recorded", actor)
            .opt_id("task_id", task)
            .id("causation_id", cause)
            .chain(&entries)
            .pay()
            .s("decision", what)
            .s("rationale", "consistent with current facts")
            .end();
        Ref {
            id,
            at,
            source: actor,
        }
    }

    /// tool.call.requested (an action based on a decision and its fact),
    /// then accepted, started, completed. Returns the time after.
    pub fn tool_call(
        &mut self,
        at: i64,
        actor: &'static str,
        task: Id,
        decision: Ref,
        fact: Ref,
    ) -> i64 {
        let tool = self.rng.pick(TOOLS);
        let call = self.new_id(Kind::Call);
        let req = self
            .ev(at, "tool.call.requested", actor)
            .s("target", tool)
            .id("task_id", task)
            .id("causation_id", decision.id)
            .chain(&[(fact.source, fact.id), (decision.source, decision.id)])
            .pay()
            .id("call_id", call)
            .s("tool", tool)
            .open("arguments")
            .s("query", "SELECT count(*) FROM orders WHERE status = 'open'")
            .close()
            .end();
        let mut t = at;
        let mut cause = req;
        for (ty, lo, hi) in [
            ("tool.call.accepted", 5, 200),
            ("tool.call.started", 5, 200),
            ("tool.call.completed", 100, 5000),
        ] {
            t += self.dt(lo, hi);
            let e = self
                .ev(t, ty, tool)
                .s("target", actor)
                .id("task_id", task)
                .id("causation_id", cause)
                .pay()
                .id("call_id", call);
            cause = match ty {
                "tool.call.completed" => e.open("result").int("rows", 42).close().end(),
                _ => e.end(),
            };
        }
        t
    }

    /// belief.conflict.detected about a basis event (named as its causation).
    pub fn conflict(&mut self, at: i64, basis: Ref) -> Id {
        self.ev(at, "belief.conflict.detected", "agent:verifier")
            .id("causation_id", basis.id)
            .pay()
            .s("subject", "vendor rate limit")
            .open_arr("claims")
            .item()
            .s("source", basis.source)
            .s("value", "600 rpm")
            .frac("confidence", 90)
            .close()
            .item()
            .s("source", "agent:crawler")
            .s("value", "300 rpm")
            .frac("confidence", 60)
            .close()
            .close_arr()
            .end()
    }

    /// belief.revised resolving a conflict.
    pub fn revise(&mut self, at: i64, conflict: Id) -> Id {
        self.ev(at, "belief.revised", "agent:verifier")
            .s("belief_status", "revised")
            .s("belief_scope", "fact")
            .id("causation_id", conflict)
            .pay()
            .s("previous", "vendor allows 300 rpm")
            .s("corrected", "vendor allows 600 rpm")
            .end()
    }

    /// memory.fact.invalidated with belief_status retracted.
    pub fn retract(&mut self, at: i64, fact: Ref, fact_id: Id, cite: bool) -> Id {
        let e = self
            .ev(at, "memory.fact.invalidated", "memory:main")
            .s("belief_status", "retracted");
        let e = if cite {
            e.id("causation_id", fact.id)
        } else {
            e
        };
        e.pay()
            .id("fact_id", fact_id)
            .s("reason", "source withdrew the statement")
            .end()
    }

    /// provenance.attestation.added over a chain (last entry = causation).
    pub fn attest(&mut self, at: i64, chain: &[Ref]) -> Id {
        let cause = chain.last().expect("an attestation cites something").id;
        let entries: Vec<(&str, Id)> = chain.iter().map(|r| (r.source, r.id)).collect();
        self.ev(at, "provenance.attestation.added", "agent:verifier")
            .id("causation_id", cause)
            .chain(&entries)
            .s("source_trust", "attested")
            .raw("attestation_count", "1")
            .pay()
            .s("attestor", "agent:verifier")
            .s("method", "cross_reference")
            .end()
    }
}

impl Kb {
    /// An observation, then two or three facts, sometimes attested.
    pub fn seed(sc: &mut Scene, at: &mut i64) -> Kb {
        *at += sc.dt(20, 800);
        let obs = sc.observe(*at);
        let mut facts = Vec::new();
        for _ in 0..sc.rng.range(2, 3) {
            *at += sc.dt(20, 800);
            let trust = sc.rng.pick(&["verified", "attested"]);
            facts.push(sc.fact(*at, trust).0);
        }
        if sc.rng.chance(0.3) {
            *at += sc.dt(20, 800);
            sc.attest(*at, &[obs, facts[0]]);
        }
        Kb { obs, facts }
    }
}
