//! `hvaudit replay --format md`: the replay as Markdown for a ticket or a
//! pull request. Every log-derived value goes through the audit report's
//! `md` escaping, so it renders as the literal text it is.

use super::render::{basis_text, detail_parts, instant, labels, state_label, tree_prefixes};
use super::{EventKind, Replay, Role};
use crate::report::markdown::md;
use std::io::{self, Write};

pub(super) fn render(r: &Replay, out: &mut dyn Write) -> io::Result<()> {
    writeln!(
        out,
        "# {} replay: {} {}",
        md(&r.tool),
        r.scope.kind(),
        md(r.scope.id())
    )?;
    writeln!(out)?;
    writeln!(
        out,
        "State at **{}**{}; log span {} .. {}. {} tasks, {} events, {} findings.",
        instant(r.instant),
        if r.instant_is_end {
            " (the end of the log)"
        } else {
            ""
        },
        instant(r.span.from),
        instant(r.span.to),
        r.tasks.len(),
        r.timeline.len(),
        r.findings.len()
    )?;
    tasks(r, out)?;
    tokens(r, out)?;
    timeline(r, out)?;
    findings(r, out)
}

/// An optional value escaped, or nothing.
fn opt(s: &Option<String>) -> String {
    s.as_deref().map(md).unwrap_or_default()
}

fn tasks(r: &Replay, out: &mut dyn Write) -> io::Result<()> {
    writeln!(out)?;
    writeln!(out, "## Tasks ({})", r.tasks.len())?;
    writeln!(out)?;
    writeln!(
        out,
        "| Task | State | Since | By event | Session | Findings |"
    )?;
    writeln!(out, "|---|---|---|---|---|---|")?;
    for (t, prefix) in r.tasks.iter().zip(tree_prefixes(&r.tasks)) {
        // The tree guides are ours; no-break spaces keep their indentation,
        // which a table cell would trim.
        let prefix = prefix.replace(' ', "\u{a0}");
        let focus = if t.role == Role::Focus {
            " (the asked task)"
        } else {
            ""
        };
        let (since, by) = match &t.state_event {
            Some(e) => (
                instant(e.at),
                format!("{} {}:{}", md(&e.event_type), md(&e.file), e.line),
            ),
            None => (String::new(), String::new()),
        };
        writeln!(
            out,
            "| {prefix}{}{focus} | {} | {since} | {by} | {} | {} |",
            md(&t.task_id),
            md(&state_label(t)),
            opt(&t.session_id),
            labels(&t.findings)
        )?;
    }
    Ok(())
}

fn tokens(r: &Replay, out: &mut dyn Write) -> io::Result<()> {
    if r.tokens.is_empty() {
        return Ok(());
    }
    writeln!(out)?;
    writeln!(out, "## Handoff tokens ({})", r.tokens.len())?;
    writeln!(out)?;
    writeln!(
        out,
        "| Token | Delegated by | Delegated to | Task | Issued | Presented |"
    )?;
    writeln!(out, "|---|---|---|---|---|--:|")?;
    for t in &r.tokens {
        let issued = t.issued.as_ref().map_or_else(
            || "not in this timeline".to_string(),
            |e| format!("{} {}:{}", instant(e.at), md(&e.file), e.line),
        );
        writeln!(
            out,
            "| {} | {} | {} | {} | {issued} | {} |",
            md(&t.token),
            opt(&t.delegated_by),
            opt(&t.delegated_to),
            opt(&t.task_id),
            t.presented
        )?;
    }
    Ok(())
}

fn timeline(r: &Replay, out: &mut dyn Write) -> io::Result<()> {
    writeln!(out)?;
    writeln!(
        out,
        "## Timeline ({} events, by created_at then input order)",
        r.timeline.len()
    )?;
    writeln!(out)?;
    writeln!(out, "| At | Task | Event | Where | Detail | Findings |")?;
    writeln!(out, "|---|---|---|---|---|---|")?;
    let marker = format!(
        "| **{}** | | **{}** | | | |",
        instant(r.instant),
        if r.instant_is_end {
            "the end of the log"
        } else {
            "the instant: states above, later events below"
        }
    );
    let mut marked = false;
    for e in &r.timeline {
        if e.after_instant && !marked {
            writeln!(out, "{marker}")?;
            marked = true;
        }
        let mut detail: Vec<String> = detail_parts(e).iter().map(|d| md(d)).collect();
        if e.kind == EventKind::Decision {
            if e.basis.is_empty() {
                detail.push("basis: none recorded".into());
            }
            detail.extend(
                e.basis
                    .iter()
                    .map(|b| format!("basis {}", md(&basis_text(b)))),
            );
        }
        writeln!(
            out,
            "| {} | {} | {} | {}:{} | {} | {} |",
            instant(e.at),
            opt(&e.task_id),
            md(&e.event_type),
            md(&e.file),
            e.line,
            detail.join("<br>"),
            labels(&e.findings)
        )?;
    }
    if !marked {
        writeln!(out, "{marker}")?;
    }
    Ok(())
}

fn findings(r: &Replay, out: &mut dyn Write) -> io::Result<()> {
    writeln!(out)?;
    writeln!(
        out,
        "## Findings touching these tasks ({})",
        r.findings.len()
    )?;
    writeln!(out)?;
    if r.findings.is_empty() {
        writeln!(out, "None.")?;
    }
    for (i, f) in r.findings.iter().enumerate() {
        let at: Vec<String> = f
            .locations
            .iter()
            .map(|l| format!("{}:{}", md(&l.file), l.line))
            .collect();
        writeln!(
            out,
            "- **F{}** {} {} at {}, task {}: {}{}",
            i + 1,
            f.severity.as_str().to_ascii_uppercase(),
            md(&f.rule),
            instant(f.at),
            opt(&f.task_id),
            md(&f.message),
            if at.is_empty() {
                String::new()
            } else {
                format!(" ({})", at.join(", "))
            }
        )?;
    }
    Ok(())
}
