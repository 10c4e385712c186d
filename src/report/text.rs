//! `--format text`: the terminal report. Every log-derived string goes
//! through `clean` so a hostile log cannot emit terminal control codes; the
//! only escape sequences written are our own colors, and only when asked.

use super::{
    clean, file_line, finding_state, gate_notes, identity_holds, identity_word, top_agents,
    top_tasks, verdict,
};
use crate::finding::{Finding, Severity, fmt_instant};
use crate::report_model::{InputSummary, Report};
use chrono::{DateTime, Utc};
use std::io::{self, Write};

/// Options of the terminal renderer.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct TextOptions {
    /// Color severities and headings with ANSI SGR codes (for a terminal).
    pub color: bool,
}

/// Widest a table column grows; longer cells overflow instead of pushing
/// every other row to the right.
const MAX_COL: usize = 48;

/// Writes the terminal report.
pub fn render_text(report: &Report, opts: &TextOptions, out: &mut dyn Write) -> io::Result<()> {
    let st = Style(opts.color);
    writeln!(
        out,
        "{}",
        st.bold(&format!(
            "{} {} audit report",
            clean(&report.tool),
            clean(&report.version)
        ))
    )?;
    inputs(report, st, out)?;
    overview(report, st, out)?;
    counts(report, st, out)?;
    writeln!(out)?;
    writeln!(out, "{}", st.bold("Findings"))?;
    if report.findings.is_empty() {
        writeln!(out, "  none")?;
    }
    for f in report.findings.iter() {
        finding(&f, st, out)?;
    }
    if !report.absent().is_empty() {
        writeln!(out)?;
        writeln!(out, "{}", st.bold("Absent since the baseline (fixed)"))?;
        for f in report.absent() {
            finding(f, st, out)?;
        }
    }
    // The verdict again at the end, where a long report is read last.
    writeln!(out)?;
    writeln!(out, "{}", st.bold(&clean(&verdict(report))))?;
    Ok(())
}

fn inputs(report: &Report, st: Style, out: &mut dyn Write) -> io::Result<()> {
    writeln!(out)?;
    writeln!(out, "{}", st.bold("Inputs"))?;
    let row = |i: &InputSummary, format: &str, holds: bool| {
        vec![
            clean(&i.path).into_owned(),
            format.to_string(),
            i.lines.to_string(),
            i.events.to_string(),
            i.redeliveries.to_string(),
            i.bad_lines.to_string(),
            i.blank_lines.to_string(),
            identity_word(holds).to_string(),
        ]
    };
    let mut rows: Vec<Vec<String>> = report
        .inputs
        .iter()
        .map(|i| row(i, &clean(&i.format), i.identity_holds()))
        .collect();
    let total = report.totals();
    let holds = identity_holds(report);
    rows.push(row(&total, "", holds));
    let head = [
        "path",
        "format",
        "lines",
        "events",
        "redeliveries",
        "bad lines",
        "blank",
        "identity",
    ];
    let right = [false, false, true, true, true, true, true, false];
    table(out, &head, &right, &rows)?;
    for i in report.inputs.iter() {
        if let Some(e) = &i.error {
            writeln!(
                out,
                "  {} {}: {}",
                st.red("error"),
                clean(&i.path),
                clean(e)
            )?;
        }
    }
    writeln!(
        out,
        "Accounting: lines {} = events {} + redeliveries {} + bad lines {}: {} (blank lines skipped: {})",
        total.lines,
        total.events,
        total.redeliveries,
        total.bad_lines,
        if holds {
            st.green("OK")
        } else {
            st.red("MISMATCH")
        },
        total.blank_lines
    )?;
    if total.bad_lines_unlisted > 0 {
        writeln!(out, "{}", super::unlisted_note(&total))?;
    }
    Ok(())
}

fn overview(report: &Report, st: Style, out: &mut dyn Write) -> io::Result<()> {
    writeln!(out)?;
    writeln!(
        out,
        "Span: {} .. {}",
        instant(report.span.from),
        instant(report.span.to)
    )?;
    writeln!(
        out,
        "Rules: {} run, {} failed",
        report.rules.len(),
        report.rule_errors.len()
    )?;
    for (rule, error) in &report.rule_errors {
        writeln!(
            out,
            "  {} {}: {}",
            st.red("error"),
            clean(rule),
            clean(error)
        )?;
    }
    writeln!(
        out,
        "Unresolved decision-basis references: {}",
        report.unresolved_basis
    )
}

fn counts(report: &Report, st: Style, out: &mut dyn Write) -> io::Result<()> {
    writeln!(out)?;
    let by_sev: Vec<String> = report
        .counts_by_severity()
        .into_iter()
        .map(|(s, n)| format!("{} {n}", st.severity(s, s.as_str())))
        .collect();
    writeln!(
        out,
        "{} {} ({})",
        st.bold("Findings:"),
        report.findings.len(),
        by_sev.join(", ")
    )?;
    writeln!(out, "Verdict: {}", clean(&verdict(report)))?;
    for note in gate_notes(report) {
        writeln!(out, "  {}", clean(&note))?;
    }
    let sections: [(&str, Vec<(String, usize)>); 4] = [
        ("By family", report.counts_by(|f| Some(f.family))),
        ("By rule", report.counts_by(|f| Some(f.rule))),
        ("Top tasks", top_tasks(report)),
        ("Top agents", top_agents(report)),
    ];
    for (title, counts) in sections {
        if counts.is_empty() {
            continue;
        }
        writeln!(out, "{title}")?;
        let rows: Vec<Vec<String>> = counts
            .iter()
            .map(|(k, n)| vec![clean(k).into_owned(), n.to_string()])
            .collect();
        table(out, &[], &[false, true], &rows)?;
    }
    Ok(())
}

fn finding(f: &Finding, st: Style, out: &mut dyn Write) -> io::Result<()> {
    writeln!(out)?;
    let label = format!("[{}]", f.severity.as_str().to_ascii_uppercase());
    writeln!(
        out,
        "{} {} ({}) {}",
        st.severity(f.severity, &label),
        st.bold(&clean(&f.rule)),
        clean(&f.family),
        instant(f.at)
    )?;
    writeln!(out, "  {}", clean(&f.message))?;
    if let Some(task) = &f.task_id {
        writeln!(out, "  task: {}", clean(task))?;
    }
    if !f.event_ids.is_empty() {
        let ids: Vec<_> = f.event_ids.iter().map(|e| clean(e)).collect();
        writeln!(out, "  events: {}", ids.join(", "))?;
    }
    for l in &f.locations {
        let at = clean(&file_line(&l.file, l.line)).into_owned();
        match &l.event_id {
            Some(e) => writeln!(out, "  at {at} (event {})", clean(e))?,
            None => writeln!(out, "  at {at}")?,
        }
    }
    writeln!(out, "  fingerprint: {}", clean(&f.fingerprint))?;
    for state in finding_state(f) {
        writeln!(out, "  {}", clean(&state))?;
    }
    if f.timeline.is_empty() {
        return Ok(());
    }
    writeln!(out, "  timeline:")?;
    let rows: Vec<Vec<String>> = f
        .timeline
        .iter()
        .map(|t| {
            vec![
                instant(t.at),
                clean(&t.event_id).into_owned(),
                clean(&t.event_type).into_owned(),
                t.task_id
                    .as_deref()
                    .map(|t| clean(t).into_owned())
                    .unwrap_or_default(),
                clean(&file_line(&t.file, t.line)).into_owned(),
            ]
        })
        .collect();
    table(out, &[], &[false; 5], &rows)
}

fn instant(t: Option<DateTime<Utc>>) -> String {
    t.as_ref().map_or_else(|| "-".to_string(), fmt_instant)
}

/// Writes rows as aligned columns: a headed table indented two spaces, a
/// headless one (a list under a heading) four. Cells must already be cleaned.
fn table(
    out: &mut dyn Write,
    head: &[&str],
    right: &[bool],
    rows: &[Vec<String>],
) -> io::Result<()> {
    let head: Vec<String> = head.iter().map(|h| h.to_uppercase()).collect();
    let mut width = vec![0usize; right.len()];
    for r in std::iter::once(&head).chain(rows) {
        for (c, cell) in r.iter().enumerate() {
            width[c] = width[c].max(columns(cell).min(MAX_COL));
        }
    }
    let indent = if head.is_empty() { "    " } else { "  " };
    let line = |cells: &[String]| {
        let parts: Vec<String> = cells
            .iter()
            .enumerate()
            .map(|(c, cell)| {
                let pad = " ".repeat(width[c].saturating_sub(columns(cell)));
                if right[c] {
                    pad + cell
                } else {
                    cell.clone() + &pad
                }
            })
            .collect();
        format!("{indent}{}", parts.join("  ").trim_end())
    };
    if !head.is_empty() {
        writeln!(out, "{}", line(&head))?;
    }
    for r in rows {
        writeln!(out, "{}", line(r))?;
    }
    Ok(())
}

/// Terminal columns a cleaned string takes: East Asian wide characters
/// and most emoji take two, so a table of Japanese task ids stays aligned.
fn columns(s: &str) -> usize {
    s.chars()
        .map(|c| match c as u32 {
            0x1100..=0x115f
            | 0x2e80..=0x303e
            | 0x3041..=0xa4cf
            | 0xac00..=0xd7a3
            | 0xf900..=0xfaff
            | 0xfe30..=0xfe4f
            | 0xff00..=0xff60
            | 0xffe0..=0xffe6
            | 0x1f300..=0x1f64f
            | 0x1f900..=0x1f9ff
            | 0x20000..=0x3fffd => 2,
            _ => 1,
        })
        .sum()
}

/// ANSI styling that is a no-op unless color was asked for.
#[derive(Clone, Copy)]
struct Style(bool);

impl Style {
    fn paint(self, code: &str, s: &str) -> String {
        if self.0 {
            format!("\x1b[{code}m{s}\x1b[0m")
        } else {
            s.to_string()
        }
    }
    fn bold(self, s: &str) -> String {
        self.paint("1", s)
    }
    fn red(self, s: &str) -> String {
        self.paint("31", s)
    }
    fn green(self, s: &str) -> String {
        self.paint("32", s)
    }
    fn severity(self, sev: Severity, s: &str) -> String {
        let code = match sev {
            Severity::Critical => "1;31",
            Severity::High => "31",
            Severity::Medium => "33",
            Severity::Low => "36",
            Severity::Info => "2",
        };
        self.paint(code, s)
    }
}
