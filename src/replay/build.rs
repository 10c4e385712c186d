//! Building a `Replay`: find the tasks with SQL, fetch their events, then
//! derive the states at the instant, the token holders and the findings.

use super::query::{Cols, int, list_table, rows, texts, texts_array};
use super::state;
use super::{
    BasisRef, EventKind, EventRef, LIFECYCLE, Replay, ReplayError, ReplayEvent, ReplayRequest,
    Role, Scope, abbreviate_token,
};
use crate::audit::{AuditConfig, AuditError};
use crate::engine::DEFAULT_DECISION_TYPES;
use crate::finding::Finding;
use crate::finding_store::Findings;
use crate::report::model::{Report, Span};
use chrono::DateTime;
use datafusion::arrow::array::Int64Array;
use datafusion::error::Result;
use datafusion::prelude::SessionContext;
use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::sync::Arc;

/// Tables of the values a replay query looks up (`value` column).
const MEMBERS: &str = "replay_members";
const DECISIONS: &str = "replay_decisions";
const REFS: &str = "replay_refs";

pub(super) async fn build(
    cfg: &AuditConfig,
    tables: &crate::tables::Tables,
    request: &ReplayRequest,
    report: Report,
) -> std::result::Result<Replay, ReplayError> {
    let (ctx, _scratch) = tables
        .session()
        .await
        .map_err(|e| AuditError::Usage(format!("{e:#}")))?;
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
            let links = links(ctx).await?;
            // Up the first parent links; a cycle ends at a task already
            // taken, so no depth cap is needed.
            let mut cur = id.clone();
            while let Some(p) = links.first_parent.get(&cur) {
                if roles.contains_key(p) {
                    break;
                }
                roles.insert(p.clone(), Role::Ancestor);
                cur = p.clone();
            }
            // Down every parent link, breadth first.
            let mut queue = std::collections::VecDeque::from([id.clone()]);
            while let Some(t) = queue.pop_front() {
                for c in links.children.get(&t).into_iter().flatten() {
                    if !roles.contains_key(c) {
                        roles.insert(c.clone(), Role::Descendant);
                        queue.push_back(c.clone());
                    }
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

/// The parent links of the whole log, read with one query and walked in
/// memory: a query per tree level made a 50,000-deep chain or a 100 k-wide
/// tree take minutes.
struct Links {
    /// Each task's parent on its first event (by created_ns, seq) that names
    /// one other than itself.
    first_parent: HashMap<String, String>,
    /// Every task naming each parent on some event.
    children: HashMap<String, Vec<String>>,
}

async fn links(ctx: &SessionContext) -> Result<Links> {
    // One row per (task, parent) pair, in the order of each pair's first
    // event: the first row of a task is its first parent link.
    let sql = "SELECT task_id, parent_task_id FROM ( \
                 SELECT task_id, parent_task_id, \
                        first_value(created_ns ORDER BY created_ns, seq) AS first_ns, \
                        first_value(seq ORDER BY created_ns, seq) AS first_seq \
                 FROM events \
                 WHERE version = 1 AND task_id IS NOT NULL AND parent_task_id IS NOT NULL \
                   AND task_id <> parent_task_id \
                 GROUP BY task_id, parent_task_id) \
               ORDER BY first_ns, first_seq";
    let mut links = Links {
        first_parent: HashMap::new(),
        children: HashMap::new(),
    };
    for b in rows(ctx, sql, &[]).await? {
        let c = Cols::new(&b);
        let (task, parent) = (c.text("task_id")?, c.text("parent_task_id")?);
        for (t, p) in task.into_iter().zip(parent) {
            let (Some(t), Some(p)) = (t, p) else { continue };
            links.children.entry(p.clone()).or_default().push(t.clone());
            links.first_parent.entry(t).or_insert(p);
        }
    }
    Ok(links)
}

/// Every event of the member tasks (all versions), plus the session's own
/// events for a session, by (created_ns, seq).
async fn events(
    ctx: &SessionContext,
    members: &BTreeSet<String>,
    scope: &Scope,
) -> Result<Vec<ReplayEvent>> {
    // The members as a table, not an IN list of one parameter each: a tree
    // of 100 k tasks is one join.
    list_table(
        ctx,
        MEMBERS,
        texts_array(members.iter().map(String::as_str)),
    )?;
    let mut params: Vec<&str> = Vec::new();
    let mut cond = format!("task_id IN (SELECT value FROM {MEMBERS})");
    if let Scope::Session(id) = scope {
        params.push(id);
        cond = format!("{cond} OR session_id = ${}", params.len());
    }
    let sql = format!(
        "SELECT seq, id, type, task_id, parent_task_id, session_id, source, target, \
                created_us, created_ns, src_file, src_line, version, causation_id, delegated_by, \
                delegated_to, handoff_token, coalesce(checkpoint_id, p_checkpoint_id) AS checkpoint_id, \
                interruption_policy \
         FROM events WHERE {cond} ORDER BY created_ns, seq"
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
        let ns = c.int("created_ns")?;
        for r in 0..c.len() {
            let event_type = ty[r].clone().unwrap_or_default();
            out.push(ReplayEvent {
                seq: seq[r].unwrap_or_default(),
                at: us[r].and_then(DateTime::from_timestamp_micros),
                at_ns: ns[r].unwrap_or_default(),
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
    out.sort_by_key(|e| (e.at_ns, e.seq, e.version));
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
    let seqs: Vec<i64> = timeline
        .iter()
        .filter(|e| e.kind == EventKind::Decision && e.version == 1)
        .map(|e| e.seq)
        .collect();
    if seqs.is_empty() {
        return Ok(());
    }
    list_table(ctx, DECISIONS, Arc::new(Int64Array::from(seqs)))?;
    let sql = format!(
        "SELECT event_seq, pos, source, ref_id FROM evidence \
         WHERE event_seq IN (SELECT value FROM {DECISIONS}) ORDER BY event_seq, pos"
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
    list_table(ctx, REFS, texts_array(ids.into_iter()))?;
    let sql = format!(
        "SELECT id, type, created_us, src_file, src_line FROM events \
         WHERE version = 1 AND id IN (SELECT value FROM {REFS}) ORDER BY created_ns, seq"
    );
    let mut found: HashMap<String, EventRef> = HashMap::new();
    for b in rows(ctx, &sql, &[]).await? {
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
            // Findings come in order: a repeat can only be the last one (a
            // scan of the list was quadratic when 100 k findings cite one
            // parent's event).
            if v.last() != Some(&i) {
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ingest::{IngestOptions, ingest};

    /// A task of spec version 0.2 with an optional parent.
    fn line(n: usize, task: &str, parent: Option<&str>) -> String {
        let mut v = serde_json::json!({
            "spec_version": "0.2", "id": format!("e{n}"), "type": "task.submitted",
            "source": "agent:a", "task_id": task, "payload": {},
            "created_at": format!("2026-01-01T00:00:{:02}.{:06}Z", n / 1_000_000 % 60, n % 1_000_000),
        });
        if let Some(p) = parent {
            v["parent_task_id"] = serde_json::json!(p);
        }
        v.to_string()
    }

    /// The queries run to find the tree of `focus`, and its tasks.
    fn tree_of(lines: &[String], focus: &str) -> (usize, BTreeMap<String, Role>) {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("log.ndjson");
        std::fs::write(&path, lines.join("\n") + "\n").unwrap();
        let ingested = ingest(&[path], &IngestOptions::default()).unwrap();
        let ctx = crate::engine::session(&AuditConfig::default().engine_options()).unwrap();
        crate::engine::register_tables(&ctx, &ingested).unwrap();
        crate::audit::block_on(async {
            super::super::query::QUERIES.with(|n| n.set(0));
            let (_, roles) = members(&ctx, &Scope::Task(focus.into())).await.unwrap();
            (super::super::query::QUERIES.with(|n| n.get()), roles)
        })
    }

    fn chain(n: usize) -> Vec<String> {
        (0..n)
            .map(|i| {
                let parent = (i > 0).then(|| format!("t{}", i - 1));
                line(i, &format!("t{i}"), parent.as_deref())
            })
            .collect()
    }

    fn wide(n: usize) -> Vec<String> {
        std::iter::once(line(0, "root", None))
            .chain((1..=n).map(|i| line(i, &format!("c{i}"), Some("root"))))
            .collect()
    }

    #[test]
    fn the_tree_takes_as_many_queries_at_any_depth_or_width() {
        // A query per level (or per ancestor) made a deep chain cost one
        // scan of the log per task.
        let (deep, roles) = tree_of(&chain(400), "t200");
        assert_eq!(roles.len(), 400);
        assert_eq!(roles["t0"], Role::Ancestor);
        assert_eq!(roles["t399"], Role::Descendant);
        let (deeper, roles) = tree_of(&chain(1600), "t800");
        assert_eq!(roles.len(), 1600);
        assert_eq!(deep, deeper, "queries for a chain 4x as deep");
        let (broad, roles) = tree_of(&wide(400), "root");
        assert_eq!(roles.len(), 401);
        let (broader, roles) = tree_of(&wide(1600), "root");
        assert_eq!(roles.len(), 1601);
        assert_eq!(broad, broader, "queries for a tree 4x as wide");
        assert!(deep <= 3 && broad <= 3, "{deep} and {broad} queries");
    }
}
