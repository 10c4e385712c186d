//! Planted handoff-token cases. Each is a parent with one delegated child,
//! finished in the order its dialect requires, legal but for the token fault.

use super::delegation::Claims;
use super::scene::{Kind, Scene};
use super::tasks::{SUPERVISOR, Step, Task, WORKERS};
use super::violations_tasks::{end_pair, progress, root};

const INTRUDER: &str = "agent:intruder";
const STRUCTURED: Option<&str> = Some("structured-tokens");

/// A delegated child that is active (accepted) but not handed off yet.
fn accepted_child(sc: &mut Scene, p: &Task, at: i64) -> (Task, i64) {
    let id = sc.new_id(Kind::Task);
    let w = sc.rng.pick(WORKERS);
    let req = sc.deleg_request(at, p.agent, w, id, p.id, Some(p.last));
    let t = at + sc.dt(20, 800);
    (sc.delegation_accepted(t, p, w, id, req), t)
}

/// The same token issued on two handoff events (same binding).
pub(crate) fn token_replayed(sc: &mut Scene, at: i64) {
    let (mut p, t) = root(sc, at);
    let (mut c, t) = accepted_child(sc, &p, t + sc.dt(20, 500));
    let t = t + sc.dt(20, 600);
    let tok = sc.token(t, &c, Claims::Valid);
    let acc = c.last;
    let h1 = sc.handoff(t, &c, &tok, acc);
    let t = t + sc.dt(500, 5000);
    let h2 = sc.handoff(t, &c, &tok, h1);
    c.last = h2;
    c.token = Some(tok);
    let t = t + sc.dt(20, 900);
    sc.step_present(t, &mut c, Step::Started);
    let t = progress(sc, &mut c, t);
    end_pair(sc, &mut p, &mut c, t);
    sc.plant("token.replayed", h2, Some(c.id));
}

/// The token presented by someone else than its delegate. Its claims then
/// necessarily disagree with the event (sub ≠ delegated_to) under the
/// structured option, so that is recorded too.
pub(crate) fn token_rebound(sc: &mut Scene, at: i64) {
    let (mut p, t) = root(sc, at);
    let (mut c, t) = sc.start_delegated(t + sc.dt(20, 500), &p, sc.rng.pick(WORKERS));
    let mut rogue = c.clone();
    rogue.agent = INTRUDER;
    let t = t + sc.dt(100, 3000);
    let x = sc.step_present(t, &mut rogue, Step::Progress(40));
    c.last = x;
    end_pair(sc, &mut p, &mut c, t);
    sc.plant("token.rebound", x, Some(c.id));
    sc.plant_req("token.claims_invalid", x, Some(c.id), STRUCTURED);
}

/// The old token presented after the delegation was escalated.
pub(crate) fn token_superseded(sc: &mut Scene, at: i64) {
    let (mut p, t) = root(sc, at);
    let (mut c, t) = sc.start_delegated(t + sc.dt(20, 500), &p, sc.rng.pick(WORKERS));
    let t = t + sc.dt(200, 3000);
    sc.deleg(
        t,
        "delegation.escalated",
        c.owner,
        SUPERVISOR,
        c.id,
        p.id,
        Some(c.last),
    )
    .pay()
    .s("reason", "worker unresponsive")
    .frac("progress_so_far", 20)
    .end();
    let t = t + sc.dt(100, 3000);
    let x = sc.step_present(t, &mut c, Step::Progress(45));
    end_pair(sc, &mut p, &mut c, t);
    sc.plant("token.superseded", x, Some(c.id));
}

/// The worker refuses a follow-up delegation of its task, then keeps
/// presenting its token for that (task, worker) pair.
pub(crate) fn token_after_rejection(sc: &mut Scene, at: i64) {
    let (mut p, t) = root(sc, at);
    let (mut c, t) = sc.start_delegated(t + sc.dt(20, 500), &p, sc.rng.pick(WORKERS));
    let t = progress(sc, &mut c, t) + sc.dt(100, 2000);
    let req = sc.deleg_request(t, p.agent, c.agent, c.id, p.id, Some(c.last));
    let t = t + sc.dt(20, 900);
    sc.deleg(
        t,
        "delegation.rejected",
        p.agent,
        c.agent,
        c.id,
        p.id,
        Some(req),
    )
    .pay()
    .s("reason", "scope change refused")
    .end();
    let t = t + sc.dt(100, 3000);
    let x = sc.step_present(t, &mut c, Step::Progress(60));
    end_pair(sc, &mut p, &mut c, t);
    sc.plant("token.after_rejection", x, Some(c.id));
}

/// A handoff whose structured token has one bad claim (never presented
/// again, so only the issuing event fails the check); or, with `opaque`, a
/// token that does not decode. Both are findings only under the option.
pub(crate) fn token_bad(sc: &mut Scene, at: i64, opaque: bool) {
    let (mut p, t) = root(sc, at);
    let (mut c, t) = accepted_child(sc, &p, t + sc.dt(20, 500));
    let t = t + sc.dt(20, 600);
    let tok = match opaque {
        true => format!(
            "ht_{:016x}{:08x}",
            sc.rng.next_u64(),
            sc.rng.next_u64() as u32
        )
        .into(),
        false => {
            let bad = [
                Claims::Expired,
                Claims::NoExpiry,
                Claims::WrongIssuer,
                Claims::FutureIssue,
            ];
            let bad = sc.rng.pick(&bad);
            sc.token(t, &c, bad)
        }
    };
    let acc = c.last;
    let h = sc.handoff(t, &c, &tok, acc);
    c.last = h;
    let t = t + sc.dt(20, 900);
    sc.step(t, &mut c, Step::Started);
    let t = progress(sc, &mut c, t);
    end_pair(sc, &mut p, &mut c, t);
    let rule = if opaque {
        "token.undecodable"
    } else {
        "token.claims_invalid"
    };
    sc.plant_req(rule, h, Some(c.id), STRUCTURED);
}
