//! Delegation flows and handoff tokens (structured: base64url JSON claims).

use super::emit::{Ev, json_str, ts_text};
use super::scene::{Id, Kind, Scene};
use super::tasks::{DESCRIPTIONS, Step, Task};
use base64::Engine;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use std::rc::Rc;

/// What a token's claims get wrong (planted `token.claims_invalid`).
#[derive(Clone, Copy, PartialEq)]
pub(crate) enum Claims {
    Valid,
    Expired,
    NoExpiry,
    WrongIssuer,
    FutureIssue,
}

const JWT_HEADER: &str = "eyJhbGciOiJFZERTQSIsInR5cCI6IkpXVCJ9";

impl Scene {
    /// A delegation.* event up to its envelope; callers add fields and payload.
    #[allow(clippy::too_many_arguments)]
    pub fn deleg(
        &mut self,
        at: i64,
        ty: &str,
        by: &'static str,
        to: &'static str,
        task: Id,
        parent: Id,
        cause: Option<Id>,
    ) -> Ev<'_> {
        let from_delegate = matches!(ty, "delegation.accepted" | "delegation.rejected");
        let (src, dst) = if from_delegate { (to, by) } else { (by, to) };
        self.ev(at, ty, src)
            .s("target", dst)
            .s("delegated_by", by)
            .s("delegated_to", to)
            .id("parent_task_id", parent)
            .id("task_id", task)
            .opt_id("causation_id", cause)
    }

    pub fn deleg_request(
        &mut self,
        at: i64,
        by: &'static str,
        to: &'static str,
        task: Id,
        parent: Id,
        cause: Option<Id>,
    ) -> Id {
        let desc = self.rng.pick(DESCRIPTIONS);
        let prio = self.rng.pick(&["low", "normal", "high"]);
        self.deleg(at, "delegation.requested", by, to, task, parent, cause)
            .pay()
            .s("work_description", desc)
            .ts("deadline", at + 7_200_000)
            .s("priority", prio)
            .end()
    }

    /// delegation.handoff.completed issuing `token`.
    pub fn handoff(&mut self, at: i64, t: &Task, token: &str, cause: Id) -> Id {
        let parent = t.parent.expect("delegated tasks have a parent");
        self.deleg(
            at,
            "delegation.handoff.completed",
            t.owner,
            t.agent,
            t.id,
            parent,
            Some(cause),
        )
        .s("handoff_token", token)
        .pay()
        .end()
    }

    /// requested → accepted → handoff (token) → started, presenting the token.
    pub fn start_delegated(&mut self, at: i64, parent: &Task, to: &'static str) -> (Task, i64) {
        let id = self.new_id(Kind::Task);
        let req = self.deleg_request(at, parent.agent, to, id, parent.id, Some(parent.last));
        self.accept_delegation(at + self.dt(20, 800), parent, to, id, req)
    }

    /// delegation.accepted: from here on the task is active, held by `to`.
    pub fn delegation_accepted(
        &mut self,
        at: i64,
        parent: &Task,
        to: &'static str,
        id: Id,
        req: Id,
    ) -> Task {
        let acc = self
            .deleg(
                at,
                "delegation.accepted",
                parent.agent,
                to,
                id,
                parent.id,
                Some(req),
            )
            .pay()
            .end();
        Task {
            id,
            parent: Some(parent.id),
            agent: to,
            owner: parent.agent,
            last: acc,
            token: None,
            was_rejected: false,
        }
    }

    /// accepted → handoff → started for a requested delegation.
    pub fn accept_delegation(
        &mut self,
        at: i64,
        parent: &Task,
        to: &'static str,
        id: Id,
        req: Id,
    ) -> (Task, i64) {
        let mut t = self.delegation_accepted(at, parent, to, id, req);
        let acc = t.last;
        let h = at + self.dt(20, 600);
        let tok = self.token(h, &t, Claims::Valid);
        t.last = self.handoff(h, &t, &tok, acc);
        t.token = Some(tok);
        let s = h + self.dt(20, 900);
        self.step_present(s, &mut t, Step::Started);
        (t, s)
    }

    /// A structured token: base64url JSON claims, alone or as the middle of a
    /// compact three-part token (then with numeric times).
    pub fn token(&mut self, at: i64, t: &Task, c: Claims) -> Rc<str> {
        let jti = self.new_id(Kind::Jti);
        let compact = self.rng.chance(0.4);
        let (iat, exp) = match c {
            Claims::Expired => (at - 7_200_000, Some(at - 3_600_000)),
            Claims::NoExpiry => (at, None),
            Claims::FutureIssue => (at + 600_000, Some(at + 21_600_000)),
            Claims::Valid | Claims::WrongIssuer => (at, Some(at + 21_600_000)),
        };
        let iss = if c == Claims::WrongIssuer {
            "agent:impostor"
        } else {
            t.owner
        };
        let time = |b: &mut Vec<u8>, ms: i64| match compact {
            true => b.extend_from_slice(ms.div_euclid(1000).to_string().as_bytes()),
            false => json_str(b, &ts_text(ms)),
        };
        let mut b = Vec::with_capacity(256);
        b.extend_from_slice(b"{\"iss\":");
        json_str(&mut b, iss);
        b.extend_from_slice(b",\"sub\":");
        json_str(&mut b, t.agent);
        b.extend_from_slice(b",\"task_id\":\"");
        t.id.write(&mut b);
        b.extend_from_slice(b"\",\"parent_task_id\":\"");
        t.parent
            .expect("delegated tasks have a parent")
            .write(&mut b);
        b.extend_from_slice(b"\",\"iat\":");
        time(&mut b, iat);
        if let Some(exp) = exp {
            b.extend_from_slice(b",\"exp\":");
            time(&mut b, exp);
        }
        b.extend_from_slice(b",\"jti\":\"");
        jti.write(&mut b);
        b.extend_from_slice(b"\"}");
        let claims = URL_SAFE_NO_PAD.encode(&b);
        if compact {
            let sig: [u8; 32] = std::array::from_fn(|_| self.rng.next_u64() as u8);
            format!("{JWT_HEADER}.{claims}.{}", URL_SAFE_NO_PAD.encode(sig)).into()
        } else {
            claims.into()
        }
    }
}
