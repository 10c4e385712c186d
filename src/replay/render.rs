//! Writing a `Replay` as text (terminal) or one self-contained HTML page
//! (Markdown is in `markdown.rs`, the choice of format in `mod.rs`). Every log-derived string goes through `clean` (text) or minijinja's
//! autoescaping (HTML), as in the audit report.

use super::{BasisRef, EventKind, Replay, ReplayEvent, Role, TaskState};
use crate::finding::{Finding, fmt_instant};
use crate::report::clean;
use crate::report::html::from_json;
use chrono::{DateTime, Utc};
use std::fmt::Write as _;
use std::io::Write;

pub(super) fn instant(t: Option<DateTime<Utc>>) -> String {
    t.as_ref().map_or_else(|| "-".to_string(), fmt_instant)
}

fn opt(s: &Option<String>) -> String {
    s.as_deref()
        .map(|s| clean(s).into_owned())
        .unwrap_or_default()
}

/// The finding labels `F1`, `F2`, ... of a list of indexes.
pub(super) fn labels(ids: &[usize]) -> String {
    ids.iter()
        .map(|i| format!("F{}", i + 1))
        .collect::<Vec<_>>()
        .join(" ")
}

/// Pads to `width` characters (left-aligned).
fn pad(s: &str, width: usize) -> String {
    let n = s.chars().count();
    format!("{s}{}", " ".repeat(width.saturating_sub(n)))
}

pub(super) fn text(r: &Replay) -> String {
    let mut o = String::new();
    let _ = writeln!(
        o,
        "{} replay: {} {}",
        clean(&r.tool),
        r.scope.kind(),
        clean(r.scope.id())
    );
    let _ = writeln!(
        o,
        "State at {}{}; log span {} .. {}",
        instant(r.instant),
        if r.instant_is_end {
            ", the end of the log"
        } else {
            ""
        },
        instant(r.span.from),
        instant(r.span.to)
    );
    tasks_text(r, &mut o);
    tokens_text(r, &mut o);
    timeline_text(r, &mut o);
    findings_text(r, &mut o);
    o
}

/// Tree guides are drawn for this many levels; a deeper row says how many
/// more it is nested, so each row's prefix stays short (a 50,000-deep chain
/// drawn in full was gigabytes of indentation).
const DRAWN_LEVELS: usize = 24;

/// `├─ `/`└─ ` prefixes for the depth-first task list.
pub(super) fn tree_prefixes(tasks: &[TaskState]) -> Vec<String> {
    // Whether each row is the last of its siblings, from the end: `later[d]`
    // says the nearest following row at depth d or less is at depth d. (Depth
    // rises by one at most from row to row, so the resizes are linear.)
    let mut last = vec![true; tasks.len()];
    let mut later: Vec<bool> = Vec::new();
    for (i, t) in tasks.iter().enumerate().rev() {
        let d = t.depth;
        last[i] = !later.get(d).copied().unwrap_or(false);
        later.truncate(d);
        later.resize(d + 1, false);
        later[d] = true;
    }
    let mut open: Vec<bool> = Vec::new();
    tasks
        .iter()
        .enumerate()
        .map(|(i, t)| {
            open.truncate(t.depth);
            let mut p = String::new();
            if t.depth > 0 {
                let drawn = t.depth.min(DRAWN_LEVELS);
                for k in 1..drawn {
                    p.push_str(if open.get(k).copied().unwrap_or(false) {
                        "│  "
                    } else {
                        "   "
                    });
                }
                if t.depth > drawn {
                    let _ = write!(p, "(+{} levels) ", t.depth - drawn);
                }
                p.push_str(if last[i] { "└─ " } else { "├─ " });
            }
            open.resize(t.depth, false);
            open.push(!last[i]);
            p
        })
        .collect()
}

/// A task's state with its flags, e.g. `started, cancel requested`.
pub(super) fn state_label(t: &TaskState) -> String {
    let mut s = clean(&t.state).into_owned();
    if t.cancel_requested {
        s.push_str(", cancel requested");
    }
    if let Some(i) = &t.interruption {
        let _ = write!(s, ", {}", clean(i));
    }
    s
}

fn tasks_text(r: &Replay, o: &mut String) {
    let _ = writeln!(o);
    let _ = writeln!(o, "Tasks ({})", r.tasks.len());
    let prefixes = tree_prefixes(&r.tasks);
    let names: Vec<String> = r
        .tasks
        .iter()
        .zip(&prefixes)
        .map(|(t, p)| {
            let role = match t.role {
                Role::Focus => " *",
                _ => "",
            };
            format!("{p}{}{role}", clean(&t.task_id))
        })
        .collect();
    let states: Vec<String> = r.tasks.iter().map(state_label).collect();
    let w_name = names
        .iter()
        .map(|n| n.chars().count())
        .max()
        .unwrap_or(0)
        .max(4);
    let w_state = states
        .iter()
        .map(|s| s.chars().count())
        .max()
        .unwrap_or(0)
        .max(5);
    let _ = writeln!(
        o,
        "  {}  {}  {:<24}  BY",
        pad("TASK", w_name),
        pad("STATE", w_state),
        "SINCE",
    );
    for ((t, name), state) in r.tasks.iter().zip(&names).zip(&states) {
        let (since, by) = match &t.state_event {
            Some(e) => (
                instant(e.at),
                format!("{} {}:{}", clean(&e.event_type), clean(&e.file), e.line),
            ),
            None => (String::new(), String::new()),
        };
        let marks = if t.findings.is_empty() {
            String::new()
        } else {
            format!("  [{}]", labels(&t.findings))
        };
        let line = format!(
            "  {}  {}  {:<24}  {by}{marks}",
            pad(name, w_name),
            pad(state, w_state),
            since
        );
        let _ = writeln!(o, "{}", line.trim_end());
    }
    if r.tasks.iter().any(|t| t.role == Role::Focus) {
        let _ = writeln!(o, "  (* the asked task)");
    }
}

fn tokens_text(r: &Replay, o: &mut String) {
    if r.tokens.is_empty() {
        return;
    }
    let _ = writeln!(o);
    let _ = writeln!(o, "Handoff tokens ({})", r.tokens.len());
    for t in &r.tokens {
        let issued = t.issued.as_ref().map_or_else(
            || "issue not in this timeline".to_string(),
            |e| format!("issued {} {}:{}", instant(e.at), clean(&e.file), e.line),
        );
        let _ = writeln!(
            o,
            "  {}  {} -> {}  task {}  {issued}, presented {}x",
            clean(&t.token),
            opt(&t.delegated_by),
            opt(&t.delegated_to),
            opt(&t.task_id),
            t.presented
        );
    }
}

/// What the timeline shows after the event type: delegation parties and
/// token, checkpoint, interruption policy, conflicting version.
fn detail(e: &ReplayEvent) -> String {
    detail_parts(e).join(", ")
}

/// The parts of [`detail`], each kept on one line by the HTML page.
pub(super) fn detail_parts(e: &ReplayEvent) -> Vec<String> {
    let mut d: Vec<String> = Vec::new();
    if e.delegated_by.is_some() || e.delegated_to.is_some() {
        d.push(format!(
            "{} -> {}",
            opt(&e.delegated_by),
            opt(&e.delegated_to)
        ));
    }
    if let Some(t) = &e.token {
        d.push(format!("token {}", clean(t)));
    }
    if let Some(p) = &e.interruption_policy {
        d.push(format!("policy {}", clean(p)));
    }
    if let Some(c) = &e.checkpoint_id {
        d.push(format!("checkpoint {}", clean(c)));
    }
    if e.version != 1 {
        d.push(format!("conflicting version {}", e.version));
    }
    d
}

pub(super) fn basis_text(b: &BasisRef) -> String {
    let via = match b.pos {
        Some(p) => format!("evidence[{p}]"),
        None => clean(&b.via).into_owned(),
    };
    let source = b
        .source
        .as_deref()
        .map(|s| format!(" from {}", clean(s)))
        .unwrap_or_default();
    match &b.event {
        Some(e) => format!(
            "{via} {}{source}: {} {} {}:{}",
            clean(&b.ref_id),
            clean(&e.event_type),
            instant(e.at),
            clean(&e.file),
            e.line
        ),
        None => format!("{via} {}{source}: not in the input", clean(&b.ref_id)),
    }
}

fn timeline_text(r: &Replay, o: &mut String) {
    let _ = writeln!(o);
    let _ = writeln!(
        o,
        "Timeline ({} events, by created_at then input order)",
        r.timeline.len()
    );
    let w_task = r
        .timeline
        .iter()
        .map(|e| opt(&e.task_id).chars().count())
        .max()
        .unwrap_or(0)
        .max(4);
    let w_type = r
        .timeline
        .iter()
        .map(|e| clean(&e.event_type).chars().count())
        .max()
        .unwrap_or(0)
        .max(5);
    let w_where = r
        .timeline
        .iter()
        .map(|e| format!("{}:{}", clean(&e.file), e.line).chars().count())
        .max()
        .unwrap_or(0)
        .max(5);
    let marker = format!(
        "  ---- {} {} ----",
        instant(r.instant),
        if r.instant_is_end {
            "end of log"
        } else {
            "the instant: states above, later events below"
        }
    );
    let mut marked = false;
    for e in &r.timeline {
        if e.after_instant && !marked {
            let _ = writeln!(o, "{marker}");
            marked = true;
        }
        let line = format!(
            "  {:<24}  {}  {}  {}  {}",
            instant(e.at),
            pad(&opt(&e.task_id), w_task),
            pad(&clean(&e.event_type), w_type),
            pad(&format!("{}:{}", clean(&e.file), e.line), w_where),
            detail(e)
        );
        let _ = writeln!(o, "{}", line.trim_end());
        let indent = " ".repeat(28);
        if e.kind == EventKind::Decision {
            if e.basis.is_empty() {
                let _ = writeln!(o, "{indent}basis: none recorded");
            }
            for b in &e.basis {
                let _ = writeln!(o, "{indent}basis {}", basis_text(b));
            }
        }
        for i in &e.findings {
            let f = &r.findings[*i];
            let _ = writeln!(
                o,
                "{indent}<< F{} {} {}",
                i + 1,
                f.severity.as_str().to_ascii_uppercase(),
                clean(&f.rule)
            );
        }
    }
    if !marked {
        let _ = writeln!(o, "{marker}");
    }
}

fn findings_text(r: &Replay, o: &mut String) {
    let _ = writeln!(o);
    let _ = writeln!(o, "Findings touching these tasks ({})", r.findings.len());
    if r.findings.is_empty() {
        let _ = writeln!(o, "  none");
    }
    for (i, f) in r.findings.iter().enumerate() {
        finding_text(i, f, o);
    }
}

fn finding_text(i: usize, f: &Finding, o: &mut String) {
    let _ = writeln!(
        o,
        "  F{} [{}] {} {} task {}",
        i + 1,
        f.severity.as_str().to_ascii_uppercase(),
        clean(&f.rule),
        instant(f.at),
        opt(&f.task_id)
    );
    let _ = writeln!(o, "     {}", clean(&f.message));
    let at: Vec<String> = f
        .locations
        .iter()
        .map(|l| format!("{}:{}", clean(&l.file), l.line))
        .collect();
    if !at.is_empty() {
        let _ = writeln!(o, "     at {}", at.join(", "));
    }
}

const TEMPLATE: &str = include_str!("replay.html");
/// The `.html` suffix turns minijinja's autoescaping on.
const NAME: &str = "replay.html";

pub(super) fn html(r: &Replay, out: &mut dyn Write) -> anyhow::Result<()> {
    let mut env = minijinja::Environment::new();
    env.add_template(NAME, TEMPLATE)?;
    let prefixes: Vec<String> = tree_prefixes(&r.tasks);
    let states: Vec<String> = r.tasks.iter().map(state_label).collect();
    let details: Vec<Vec<String>> = r.timeline.iter().map(detail_parts).collect();
    let basis: Vec<Vec<String>> = r
        .timeline
        .iter()
        .map(|e| e.basis.iter().map(basis_text).collect())
        .collect();
    let first_after = r.timeline.iter().position(|e| e.after_instant);
    let ctx = minijinja::context! {
        r => from_json(&serde_json::to_value(r)?),
        scope_kind => r.scope.kind(),
        scope_id => from_json(&serde_json::Value::from(r.scope.id())),
        prefixes => prefixes,
        states => from_json(&serde_json::to_value(states)?),
        details => from_json(&serde_json::to_value(details)?),
        basis => from_json(&serde_json::to_value(basis)?),
        first_after => first_after,
    };
    let page = env.get_template(NAME)?.render(ctx)?;
    out.write_all(page.as_bytes())?;
    Ok(())
}
