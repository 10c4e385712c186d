//! Deriving from the fetched timeline what it says at the instant: each
//! task's state and place in the tree, and who held which handoff token.

use super::{
    DELEGATED, EventKind, EventRef, LIFECYCLE, NOT_YET_SEEN, ReplayEvent, Role, TaskState,
    TokenHolding, abbreviate_token,
};
use crate::finding::Finding;
use chrono::{DateTime, Utc};
use std::collections::{BTreeMap, BTreeSet, HashMap};

/// The state of a task that has events at the instant, but neither a
/// lifecycle nor a delegation event among them.
pub const SEEN: &str = "seen";

fn event_ref(e: &ReplayEvent) -> EventRef {
    EventRef {
        event_id: e.event_id.clone(),
        event_type: e.event_type.clone(),
        at: e.at,
        file: e.file.clone(),
        line: e.line,
    }
}

/// What the events at or before the instant say about one task.
#[derive(Default)]
struct Facts {
    parent: Option<String>,
    parent_in_scope: Option<String>,
    session: Option<String>,
    first: Option<(Option<DateTime<Utc>>, i64)>,
    events: usize,
    lifecycle: Option<usize>,
    delegation: Option<usize>,
    last: Option<usize>,
    cancel_requested: bool,
    interruption: Option<String>,
}

/// The tasks in display order (depth first from the roots) with their
/// states at the instant (events marked `after_instant` do not count).
pub(super) fn tree<'a>(
    members: &'a BTreeSet<String>,
    roles: &BTreeMap<String, Role>,
    timeline: &[ReplayEvent],
    findings: &[Finding],
) -> Vec<TaskState> {
    let mut facts: BTreeMap<&'a str, Facts> = members
        .iter()
        .map(|m| (m.as_str(), Facts::default()))
        .collect();
    for (i, e) in timeline.iter().enumerate() {
        let Some(task) = e.task_id.as_deref() else {
            continue;
        };
        let Some(f) = facts.get_mut(task) else {
            continue;
        };
        f.events += 1;
        if e.version != 1 {
            continue;
        }
        if f.first.is_none() {
            f.first = Some((e.at, e.seq));
        }
        if f.session.is_none() {
            f.session = e.session_id.clone();
        }
        if let Some(p) = e.parent_task_id.as_deref().filter(|p| *p != task) {
            if f.parent.is_none() {
                f.parent = Some(p.to_string());
            }
            if f.parent_in_scope.is_none() && members.contains(p) {
                f.parent_in_scope = Some(p.to_string());
            }
        }
        if e.after_instant {
            continue;
        }
        f.last = Some(i);
        if LIFECYCLE.iter().any(|(t, _)| *t == e.event_type) {
            f.lifecycle = Some(i);
            if matches!(
                e.event_type.as_str(),
                "task.completed" | "task.failed" | "task.cancelled" | "task.timed_out"
            ) {
                f.interruption = None;
            }
        } else if e.event_type == "task.cancel.requested" {
            f.cancel_requested = true;
        } else if e.kind == EventKind::Delegation {
            f.delegation = Some(i);
        } else if e.event_type.starts_with("interruption.") {
            f.interruption = (e.event_type != "interruption.resumed").then(|| e.event_type.clone());
        }
    }
    let state_of = |f: &Facts| -> (String, Option<EventRef>) {
        if let Some(i) = f.lifecycle {
            let e = &timeline[i];
            let name = LIFECYCLE
                .iter()
                .find(|(t, _)| *t == e.event_type)
                .map_or("", |(_, s)| s);
            (name.to_string(), Some(event_ref(e)))
        } else if let Some(i) = f.delegation {
            (DELEGATED.to_string(), Some(event_ref(&timeline[i])))
        } else if let Some(i) = f.last {
            (SEEN.to_string(), Some(event_ref(&timeline[i])))
        } else {
            (NOT_YET_SEEN.to_string(), None)
        }
    };
    // Display parent: the first link to a task in scope (an ancestor's is
    // its link up the chain); tasks without one are roots.
    let mut children: BTreeMap<Option<&'a str>, Vec<&'a str>> = BTreeMap::new();
    for (task, f) in &facts {
        children
            .entry(
                f.parent_in_scope
                    .as_ref()
                    .and_then(|p| members.get(p))
                    .map(String::as_str),
            )
            .or_default()
            .push(task);
    }
    for list in children.values_mut() {
        list.sort_by_key(|t| {
            let f = &facts[t];
            (f.first.is_none(), f.first, *t)
        });
    }
    let mut order: Vec<(&'a str, usize)> = Vec::new();
    let mut seen: BTreeSet<&'a str> = BTreeSet::new();
    let roots: Vec<&str> = children.get(&None).cloned().unwrap_or_default();
    for r in roots {
        walk(r, &children, &mut order, &mut seen);
    }
    // Members only reachable through a cycle of parent links.
    let rest: Vec<&str> = facts
        .keys()
        .copied()
        .filter(|t| !seen.contains(t))
        .collect();
    for r in rest {
        walk(r, &children, &mut order, &mut seen);
    }
    // The findings naming each task, in report order, indexed once rather
    // than searched per task (100 k tasks x 100 k findings).
    let mut naming: HashMap<&str, Vec<usize>> = HashMap::new();
    for (i, x) in findings.iter().enumerate() {
        let named = x
            .task_id
            .as_deref()
            .into_iter()
            .chain(x.timeline.iter().filter_map(|e| e.task_id.as_deref()));
        for task in named {
            let v = naming.entry(task).or_default();
            if v.last() != Some(&i) {
                v.push(i);
            }
        }
    }
    order
        .into_iter()
        .map(|(task, depth)| {
            let f = &facts[task];
            let (state, state_event) = state_of(f);
            let terminal = matches!(
                state.as_str(),
                "completed" | "failed" | "cancelled" | "timed_out"
            );
            let task_findings = naming.get(task).cloned().unwrap_or_default();
            TaskState {
                task_id: task.to_string(),
                parent_task_id: f.parent.clone(),
                depth,
                role: roles.get(task).copied().unwrap_or(Role::Member),
                session_id: f.session.clone(),
                state,
                state_event,
                cancel_requested: f.cancel_requested && !terminal,
                interruption: f.interruption.clone().filter(|_| !terminal),
                first_at: f.first.and_then(|(at, _)| at),
                events: f.events,
                findings: task_findings,
            }
        })
        .collect()
}

/// Depth-first from `root`, children in their listed order; a task is
/// visited once even when parent links form a cycle.
fn walk<'a>(
    root: &'a str,
    children: &BTreeMap<Option<&'a str>, Vec<&'a str>>,
    order: &mut Vec<(&'a str, usize)>,
    seen: &mut BTreeSet<&'a str>,
) {
    let mut stack = vec![(root, 0usize)];
    while let Some((t, d)) = stack.pop() {
        if !seen.insert(t) {
            continue;
        }
        order.push((t, d));
        if let Some(kids) = children.get(&Some(t)) {
            for k in kids.iter().rev() {
                stack.push((k, d + 1));
            }
        }
    }
}

/// Every handoff token in the timeline: who issued it to whom, and how
/// often it was presented.
pub(super) fn tokens(timeline: &[ReplayEvent]) -> Vec<TokenHolding> {
    let mut order: Vec<&str> = Vec::new();
    let mut by_token: HashMap<&str, Vec<&ReplayEvent>> = HashMap::new();
    for e in timeline.iter().filter(|e| e.version == 1) {
        if let Some(t) = e.token.as_deref() {
            let v = by_token.entry(t).or_default();
            if v.is_empty() {
                order.push(t);
            }
            v.push(e);
        }
    }
    order
        .into_iter()
        .map(|t| {
            let uses = &by_token[t];
            let issue = uses
                .iter()
                .find(|e| e.event_type == "delegation.handoff.completed");
            let main = issue.unwrap_or(&uses[0]);
            TokenHolding {
                token: abbreviate_token(t),
                task_id: main.task_id.clone(),
                delegated_by: main.delegated_by.clone(),
                delegated_to: main.delegated_to.clone(),
                issued: issue.map(|e| event_ref(e)),
                presented: uses.len() - usize::from(issue.is_some()),
            }
        })
        .collect()
}
