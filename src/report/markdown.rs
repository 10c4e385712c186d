//! `--format md`: a Markdown report for tickets, wikis and pull requests.
//! Every log-derived value goes through `md` so it renders as the literal
//! text it is: no table breaks, no emphasis, no links, no embedded HTML.

use super::Configuration;
use super::model::{InputSummary, Report};
use super::{
    clean, file_line, finding_state, gate_notes, identity_holds, identity_word, log_text,
    log_value, top_tasks, verdict,
};
use crate::finding::{Finding, Severity, fmt_instant};
use chrono::{DateTime, Utc};
use std::collections::BTreeMap;
use std::io::{self, Write};

pub(super) fn render(
    report: &Report,
    config: Option<&Configuration>,
    out: &mut dyn Write,
) -> io::Result<()> {
    writeln!(out, "# {} audit report", md(&report.tool))?;
    writeln!(out)?;
    writeln!(out, "{} {}", md(&report.tool), md(&report.version))?;
    writeln!(out)?;
    if let Some(c) = config {
        writeln!(out, "**Configuration:** {}", md(&c.summary()))?;
        writeln!(out)?;
    }
    writeln!(out, "**Verdict:** {}", md(&verdict(report)))?;
    let notes = gate_notes(report);
    if !notes.is_empty() {
        writeln!(out)?;
    }
    for note in &notes {
        writeln!(out, "- {}", md(note))?;
    }
    inputs(report, out)?;
    writeln!(out, "## Span")?;
    writeln!(out)?;
    writeln!(out, "| From | To |")?;
    writeln!(out, "|---|---|")?;
    writeln!(
        out,
        "| {} | {} |",
        instant(report.span.from),
        instant(report.span.to)
    )?;
    writeln!(out)?;
    rules(report, out)?;
    counts(report, out)?;
    findings(report, out)
}

fn inputs(report: &Report, out: &mut dyn Write) -> io::Result<()> {
    writeln!(out)?;
    writeln!(out, "## Inputs")?;
    writeln!(out)?;
    // Conflicting copies get a column only in a log that has them.
    let copies = report.totals().conflicting_copies > 0;
    let (head, rule) = if copies {
        (" Conflicting copies |", "--:|")
    } else {
        ("", "")
    };
    writeln!(
        out,
        "| Input | Format | Lines | Events |{head} Redeliveries | Bad lines | Blank lines | Identity | Error |"
    )?;
    writeln!(out, "|---|---|--:|--:|{rule}--:|--:|--:|---|---|")?;
    let row = |out: &mut dyn Write, i: &InputSummary, holds: bool| {
        let versions = if copies {
            format!(" {} |", i.conflicting_copies)
        } else {
            String::new()
        };
        writeln!(
            out,
            "| {} | {} | {} | {} |{versions} {} | {} | {} | {} | {} |",
            md(&i.path),
            md(&i.format),
            i.lines,
            i.events,
            i.redeliveries,
            i.bad_lines,
            i.blank_lines,
            identity_word(holds),
            i.error.as_deref().map(md).unwrap_or_default()
        )
    };
    for i in &report.inputs {
        row(out, i, i.identity_holds())?;
    }
    let total = report.totals();
    let holds = identity_holds(report);
    row(out, &total, holds)?;
    writeln!(out)?;
    let (term, value) = if copies {
        (
            " + conflicting copies",
            format!(" + {}", total.conflicting_copies),
        )
    } else {
        ("", String::new())
    };
    writeln!(
        out,
        "Accounting identity (lines = events{term} + redeliveries + bad lines): {} = {}{value} + {} + {}: **{}**",
        total.lines,
        total.events,
        total.redeliveries,
        total.bad_lines,
        identity_word(holds)
    )?;
    if total.bad_lines_unlisted > 0 {
        writeln!(out)?;
        writeln!(out, "{}", md(&super::unlisted_note(&total)))?;
    }
    writeln!(out)
}

fn rules(report: &Report, out: &mut dyn Write) -> io::Result<()> {
    writeln!(out, "## Rules")?;
    writeln!(out)?;
    writeln!(
        out,
        "{} rules run, {} failed. Unresolved decision-basis references: {}.",
        report.rules.len(),
        report.rule_errors.len(),
        report.unresolved_basis
    )?;
    writeln!(out)?;
    if report.rule_errors.is_empty() {
        return Ok(());
    }
    writeln!(out, "| Rule | Error |")?;
    writeln!(out, "|---|---|")?;
    for (rule, error) in &report.rule_errors {
        writeln!(out, "| {} | {} |", md(rule), md(error))?;
    }
    writeln!(out)
}

fn counts(report: &Report, out: &mut dyn Write) -> io::Result<()> {
    writeln!(out, "## Counts")?;
    writeln!(out)?;
    writeln!(out, "{} findings.", report.findings.len())?;
    for note in super::window_note(report)
        .into_iter()
        .chain(super::readings_note(report))
    {
        writeln!(out)?;
        writeln!(out, "{}", md(&note))?;
    }
    let by_sev = report
        .counts_by_severity()
        .into_iter()
        .map(|(s, n)| (s.as_str().to_string(), n))
        .collect();
    let tables = [
        ("By severity", "Severity", by_sev),
        ("By family", "Family", report.counts_by(|f| Some(f.family))),
        ("By rule", "Rule", report.counts_by(|f| Some(f.rule))),
        ("Top tasks", "Task", top_tasks(report)),
    ];
    for (title, key, counts) in tables {
        if counts.is_empty() {
            continue;
        }
        writeln!(out)?;
        writeln!(out, "### {title}")?;
        writeln!(out)?;
        writeln!(out, "| {key} | Findings |")?;
        writeln!(out, "|---|--:|")?;
        for (k, n) in &counts {
            writeln!(out, "| {} | {n} |", md(k))?;
        }
    }
    writeln!(out)
}

fn findings(report: &Report, out: &mut dyn Write) -> io::Result<()> {
    writeln!(out, "## Findings")?;
    if report.findings.is_empty() {
        writeln!(out)?;
        writeln!(out, "None.")?;
    }
    // Report order puts the most severe first, so each severity is one run.
    let counts: BTreeMap<Severity, usize> = report.counts_by_severity().into_iter().collect();
    let mut current = None;
    let mut n = 0;
    for f in report.findings.iter() {
        if current != Some(f.severity) {
            current = Some(f.severity);
            n = 0;
            writeln!(out)?;
            writeln!(
                out,
                "### {} ({})",
                title_case(f.severity),
                counts.get(&f.severity).copied().unwrap_or(0)
            )?;
        }
        n += 1;
        writeln!(out)?;
        finding(n, &f, out)?;
    }
    if !report.absent().is_empty() {
        writeln!(out)?;
        writeln!(out, "## Absent since the baseline (fixed)")?;
        for (n, f) in report.absent().iter().enumerate() {
            writeln!(out)?;
            finding(n + 1, f, out)?;
        }
    }
    Ok(())
}

/// One finding as a numbered list item; continuation lines are indented
/// past the marker so they stay inside the item.
fn finding(n: usize, f: &Finding, out: &mut dyn Write) -> io::Result<()> {
    let pad = " ".repeat(format!("{n}. ").len());
    writeln!(
        out,
        "{n}. **{}** · {} · {}<br>",
        md(&f.rule),
        md(&f.family),
        instant(f.at)
    )?;
    writeln!(out, "{pad}{}", md_log(&f.message))?;
    writeln!(out)?;
    if let Some(task) = &f.task_id {
        writeln!(out, "{pad}- Task: {}", md_value(task))?;
    }
    if !f.event_ids.is_empty() {
        let ids: Vec<String> = f.event_ids.iter().map(|e| md_value(e)).collect();
        writeln!(out, "{pad}- Events: {}", ids.join(", "))?;
    }
    let locs: Vec<String> = f
        .locations
        .iter()
        .map(|l| match &l.event_id {
            Some(e) => format!("{} ({})", md(&file_line(&l.file, l.line)), md_value(e)),
            None => md(&file_line(&l.file, l.line)),
        })
        .collect();
    if !locs.is_empty() {
        writeln!(out, "{pad}- Locations: {}", locs.join("; "))?;
    }
    writeln!(out, "{pad}- Fingerprint: {}", md(&f.fingerprint))?;
    for state in finding_state(f) {
        writeln!(out, "{pad}- {}", md(&state))?;
    }
    if f.timeline.is_empty() {
        return Ok(());
    }
    writeln!(out, "{pad}- Timeline:")?;
    for t in &f.timeline {
        let task = t
            .task_id
            .as_deref()
            .map(|t| format!(" (task {})", md_value(t)))
            .unwrap_or_default();
        writeln!(
            out,
            "{pad}  - {} {} {}{task} at {}",
            instant(t.at),
            md_value(&t.event_id),
            md_value(&t.event_type),
            md(&file_line(&t.file, t.line))
        )?;
    }
    Ok(())
}

fn title_case(s: Severity) -> String {
    let name = s.as_str();
    name[..1].to_ascii_uppercase() + &name[1..]
}

fn instant(t: Option<DateTime<Utc>>) -> String {
    t.as_ref().map_or_else(|| "-".to_string(), fmt_instant)
}

/// Escapes a log-derived value for inline Markdown (also inside table
/// cells): HTML-escapes `<>&` so no tag renders, backslash-escapes the
/// Markdown punctuation, turns line breaks into `<br>` and control
/// characters into visible escapes.
pub(crate) fn md(s: &str) -> String {
    md_with(s, clean)
}

/// [`md`] for what a log said (a message, an id): its backslashes escaped
/// as well, so that an escape typed into it reads apart from the character
/// it names.
fn md_log(s: &str) -> String {
    md_with(s, log_text)
}

/// An id, type or task from the log, cut as `log_value` cuts it.
fn md_value(s: &str) -> String {
    md_with(s, log_value)
}

fn md_with(s: &str, escape: fn(&str) -> std::borrow::Cow<'_, str>) -> String {
    let mut out = String::with_capacity(s.len() + 8);
    for (n, line) in s.split('\n').enumerate() {
        if n > 0 {
            out.push_str("<br>");
        }
        for c in escape(line.strip_suffix('\r').unwrap_or(line)).chars() {
            match c {
                '&' => out.push_str("&amp;"),
                '<' => out.push_str("&lt;"),
                '>' => out.push_str("&gt;"),
                '\\' | '`' | '*' | '_' | '[' | ']' | '|' | '~' | '#' | '!' => {
                    out.push('\\');
                    out.push(c);
                }
                c => out.push(c),
            }
        }
    }
    out
}
