//! Building a `Replay`: find the tasks with SQL, fetch their events, then
//! derive the states at the instant, the token holders and the findings.

use super::query::{Cols, int, placeholders, rows, texts};
use super::state;
use super::{
    BasisRef, EventKind, EventRef, LIFECYCLE, Replay, ReplayError, ReplayEvent, ReplayRequest,
    Role, Scope, abbreviate_token,
};
use crate::audit::AuditConfig;
use crate::engine::{self, DEFAULT_DECISION_TYPES};
use crate::finding::{Finding, Report, Span};
use crate::findings::Findings;
use crate::ingest::Ingested;
use chrono::DateTime;
use datafusion::error::Result;
use datafusion::prelude::SessionContext;
use std::collections::{BTreeMap, BTreeSet, HashMap};

/// Guards the parent walk against cycles in hostile logs.
const MAX_DEPTH: usize = 10_000;

pub(super) async fn build(
    cfg: &AuditConfig,
    ingested: &Ingested,
    request: &ReplayRequest,
    report: Report,
) -> std::result::Result<Replay, ReplayError> {
    let ctx = engine::session(&cfg.engine_options())?;
    engine::register_tables(&ctx, ingested)?;
    let (members, roles) = members(&ctx, &request.scope).await?;
    let mut timeline = events(&ctx, &members, &request.scope).await?;
    let span = Span {
        from: report.span.from,
        to: report.span.to,
    };
    let instant = request.at.or(span.to);
    let at_us = instant.map_or(i64::MAX, |t| t.timestamp_micros());
    for e in &mut timeline {
        e.after_instant = e.at.is_none_or(|t| t.timestamp_micros() > at_us);
    }
    let decision_types: Vec<String> = match &cfg.decision_types {
        Some(t) => t.clone(),
        None => DEFAULT_DECISION_TYPES
            .iter()
            .map(|t| t.to_string())
            .collect(),
    };
    for e in &mut timeline {
        if decision_types.contains(&e.event_type) {
            e.kind = EventKind::Decision;
        }
    }
    basis(&ctx, &mut timeline).await?;
    let findings = touching(&report.findings, &members, &timeline);
    mark_events(&mut timeline, &findings);
    let tasks = state::tree(&members, &roles, &timeline, &findings);
    let tokens = state::tokens(&timeline);
    for e in &mut timeline {
        e.token = e.token.as_deref().map(abbreviate_token);
    }
    Ok(Replay {
        tool: report.tool,
        version: report.version,
        scope: request.scope.clone(),
        instant,
        instant_is_end: request.at.is_none(),
        span,
        tasks,
        timeline,
        tokens,
        findings,
    })
}

/// The tasks in scope and the role of each.
async fn members(
    ctx: &SessionContext,
    scope: &Scope,
) -> std::result::Result<(BTreeSet<String>, BTreeMap<String, Role>), ReplayError> {
    let unknown = || ReplayError::Unknown {
        kind: scope.kind(),
        id: scope.id().to_string(),
    };
    let mut roles = BTreeMap::new();
    match scope {
        Scope::Task(id) => {
            let n = int(
                ctx,
                "SELECT count(*) FROM events WHERE task_id = $1 OR parent_task_id = $1",
                &[id],
            )
            .await?;
            if n.unwrap_or(0) == 0 {
                return Err(unknown());
            }
            roles.insert(id.clone(), Role::Focus);
            let mut cur = id.clone();
            for _ in 0..MAX_DEPTH {
                let parent = texts(
                    ctx,
                    "SELECT parent_task_id FROM events \
                     WHERE version = 1 AND task_id = $1 AND parent_task_id IS NOT NULL \
                       AND parent_task_id <> $1 \
                     ORDER BY created_us, seq LIMIT 1",
                    &[&cur],
                )
                .await?;
                match parent.into_iter().next() {
                    Some(p) if !roles.contains_key(&p) => {
                        roles.insert(p.clone(), Role::Ancestor);
                        cur = p;
                    }
                    _ => break,
                }
            }
            let mut level = vec![id.clone()];
            while !level.is_empty() {
                let sql = format!(
                    "SELECT DISTINCT task_id FROM events \
                     WHERE version = 1 AND task_id IS NOT NULL AND task_id <> parent_task_id \
                       AND parent_task_id IN ({}) ORDER BY task_id",
                    placeholders(1, level.len())
                );
                let params: Vec<&str> = level.iter().map(String::as_str).collect();
                let children = texts(ctx, &sql, &params).await?;
                level = children
                    .into_iter()
                    .filter(|c| !roles.contains_key(c))
                    .collect();
                for c in &level {
                    roles.insert(c.clone(), Role::Descendant);
                }
            }
        }
        Scope::Session(id) => {
            let n = int(
                ctx,
                "SELECT count(*) FROM events WHERE session_id = $1",
                &[id],
            )
            .await?;
            if n.unwrap_or(0) == 0 {
                return Err(unknown());
            }
            let tasks = texts(
                ctx,
                "SELECT DISTINCT task_id FROM events \
                 WHERE version = 1 AND session_id = $1 AND task_id IS NOT NULL ORDER BY task_id",
                &[id],
            )
            .await?;
            for t in tasks {
                roles.insert(t, Role::Member);
            }
        }
    }
    Ok((roles.keys().cloned().collect(), roles))
}

/// Every event of the member tasks (all versions), plus the session's own
/// events for a session, by (created_us, seq).
async fn events(
    ctx: &SessionContext,
    members: &BTreeSet<String>,
    scope: &Scope,
) -> Result<Vec<ReplayEvent>> {
    let mut params: Vec<&str> = members.iter().map(String::as_str).collect();
    let mut cond = if members.is_empty() {
        "FALSE".to_string()
    } else {
        format!("task_id IN ({})", placeholders(1, members.len()))
    };
    if let Scope::Session(id) = scope {
        params.push(id);
        cond = format!("{cond} OR session_id = ${}", params.len());
    }
    let sql = format!(
        "SELECT seq, id, type, task_id, parent_task_id, session_id, source, target, \
                created_us, src_file, src_line, version, causation_id, delegated_by, \
                delegated_to, handoff_token, coalesce(checkpoint_id, p_checkpoint_id) AS checkpoint_id, \
                interruption_policy \
         FROM events WHERE {cond} ORDER BY created_us, seq"
    );
    let mut out = Vec::new();
    for b in rows(ctx, &sql, &params).await? {
        let c = Cols::new(&b);
        let (seq, id, ty, task, parent, session) = (
            c.int("seq")?,
            c.text("id")?,
            c.text("type")?,
            c.text("task_id")?,
            c.text("parent_task_id")?,
            c.text("session_id")?,
        );
        let (source, target, us, file, line, version) = (
            c.text("source")?,
            c.text("target")?,
            c.int("created_us")?,
            c.text("src_file")?,
            c.int("src_line")?,
            c.int("version")?,
        );
        let (causation, by, to, token, checkpoint, policy) = (
            c.text("causation_id")?,
            c.text("delegated_by")?,
            c.text("delegated_to")?,
            c.text("handoff_token")?,
            c.text("checkpoint_id")?,
            c.text("interruption_policy")?,
        );
        for r in 0..c.len() {
            let event_type = ty[r].clone().unwrap_or_default();
            out.push(ReplayEvent {
                seq: seq[r].unwrap_or_default(),
                at: us[r].and_then(DateTime::from_timestamp_micros),
                event_id: id[r].clone().unwrap_or_default(),
                kind: kind_of(&event_type),
                event_type,
                task_id: task[r].clone(),
                parent_task_id: parent[r].clone(),
                session_id: session[r].clone(),
                source: source[r].clone().unwrap_or_default(),
                target: target[r].clone(),
                file: file[r].clone().unwrap_or_default(),
                line: line[r].unwrap_or_default().max(0) as u64,
                version: version[r].unwrap_or(1) as i32,
                after_instant: false,
                causation_id: causation[r].clone(),
                delegated_by: by[r].clone(),
                delegated_to: to[r].clone(),
                token: token[r].clone(),
                checkpoint_id: checkpoint[r].clone(),
                interruption_policy: policy[r].clone(),
                basis: Vec::new(),
                findings: Vec::new(),
            });
        }
    }
    // One ORDER BY holds within a collected result; sort again anyway so
    // the order never depends on how the engine split the batches.
    out.sort_by_key(|e| (e.at, e.seq, e.version));
    Ok(out)
}

fn kind_of(event_type: &str) -> EventKind {
    if LIFECYCLE.iter().any(|(t, _)| *t == event_type) || event_type == "task.cancel.requested" {
        EventKind::Lifecycle
    } else if event_type.starts_with("delegation.") {
        EventKind::Delegation
    } else if event_type.starts_with("interruption.") {
        EventKind::Interruption
    } else {
        EventKind::Other
    }
}

/// Fills in each decision's basis: its causation_id and evidence entries,
/// resolved to the events they name.
async fn basis(ctx: &SessionContext, timeline: &mut [ReplayEvent]) -> Result<()> {
    let seqs: Vec<String> = timeline
        .iter()
        .filter(|e| e.kind == EventKind::Decision && e.version == 1)
        .map(|e| e.seq.to_string())
        .collect();
    if seqs.is_empty() {
        return Ok(());
    }
    // Seqs are our own integers, not log text: safe to list inline.
    let sql = format!(
        "SELECT event_seq, pos, source, ref_id FROM evidence \
         WHERE event_seq IN ({}) ORDER BY event_seq, pos",
        seqs.join(", ")
    );
    let mut chains: BTreeMap<i64, Vec<BasisRef>> = BTreeMap::new();
    for b in rows(ctx, &sql, &[]).await? {
        let c = Cols::new(&b);
        let (seq, pos, source, ref_id) = (
            c.int("event_seq")?,
            c.int("pos")?,
            c.text("source")?,
            c.text("ref_id")?,
        );
        for r in 0..c.len() {
            chains
                .entry(seq[r].unwrap_or_default())
                .or_default()
                .push(BasisRef {
                    ref_id: ref_id[r].clone().unwrap_or_default(),
                    via: "evidence_chain".into(),
                    pos: pos[r],
                    source: source[r].clone(),
                    event: None,
                });
        }
    }
    for e in timeline
        .iter_mut()
        .filter(|e| e.kind == EventKind::Decision && e.version == 1)
    {
        if let Some(c) = e.causation_id.clone().filter(|c| *c != e.event_id) {
            e.basis.push(BasisRef {
                ref_id: c,
                via: "causation_id".into(),
                pos: None,
                source: None,
                event: None,
            });
        }
        if let Some(chain) = chains.remove(&e.seq) {
            e.basis
                .extend(chain.into_iter().filter(|b| b.ref_id != e.event_id));
        }
    }
    let ids: BTreeSet<&str> = timeline
        .iter()
        .flat_map(|e| e.basis.iter().map(|b| b.ref_id.as_str()))
        .collect();
    if ids.is_empty() {
        return Ok(());
    }
    let sql = format!(
        "SELECT id, type, created_us, src_file, src_line FROM events \
         WHERE version = 1 AND id IN ({}) ORDER BY created_us, seq",
        placeholders(1, ids.len())
    );
    let params: Vec<&str> = ids.into_iter().collect();
    let mut found: HashMap<String, EventRef> = HashMap::new();
    for b in rows(ctx, &sql, &params).await? {
        let c = Cols::new(&b);
        let (id, ty, us, file, line) = (
            c.text("id")?,
            c.text("type")?,
            c.int("created_us")?,
            c.text("src_file")?,
            c.int("src_line")?,
        );
        for r in 0..c.len() {
            let key = id[r].clone().unwrap_or_default();
            found.entry(key.clone()).or_insert(EventRef {
                event_id: key,
                event_type: ty[r].clone().unwrap_or_default(),
                at: us[r].and_then(DateTime::from_timestamp_micros),
                file: file[r].clone().unwrap_or_default(),
                line: line[r].unwrap_or_default().max(0) as u64,
            });
        }
    }
    for e in timeline.iter_mut() {
        for b in &mut e.basis {
            b.event = found.get(&b.ref_id).cloned();
        }
    }
    Ok(())
}

/// The findings that name a member task or cite an event of the timeline,
/// in report order.
fn touching(
    findings: &Findings,
    members: &BTreeSet<String>,
    timeline: &[ReplayEvent],
) -> Vec<Finding> {
    let places: BTreeSet<(&str, u64)> =
        timeline.iter().map(|e| (e.file.as_str(), e.line)).collect();
    findings
        .iter()
        .filter(|f| {
            f.task_id.as_ref().is_some_and(|t| members.contains(t))
                || f.timeline
                    .iter()
                    .any(|t| t.task_id.as_ref().is_some_and(|t| members.contains(t)))
                || f.locations
                    .iter()
                    .any(|l| places.contains(&(l.file.as_str(), l.line)))
        })
        .map(std::borrow::Cow::into_owned)
        .collect()
}

/// Each event lists the findings citing it (by file and line).
fn mark_events(timeline: &mut [ReplayEvent], findings: &[Finding]) {
    let mut by_place: HashMap<(&str, u64), Vec<usize>> = HashMap::new();
    for (i, f) in findings.iter().enumerate() {
        for l in &f.locations {
            let v = by_place.entry((l.file.as_str(), l.line)).or_default();
            if !v.contains(&i) {
                v.push(i);
            }
        }
    }
    for e in timeline.iter_mut() {
        if let Some(v) = by_place.get(&(e.file.as_str(), e.line)) {
            e.findings = v.clone();
        }
    }
}
