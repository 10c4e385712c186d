//! `--format text`: the terminal report. Every log-derived string goes
//! through `clean` so a hostile log cannot emit terminal control codes; the
//! only escape sequences written are our own colors, and only when asked.
//!
//! Lines are laid out to the width of the terminal (`TextOptions::width`)
//! and broken only at spaces between words or between table cells: an
//! identifier, a rule id or a path is never cut, and a path longer than a
//! whole line breaks after a `/`.

use super::Configuration;
use super::model::{InputSummary, Report};
use super::{
    clean, file_line, finding_state, gate_notes, identity_holds, identity_word, log_text,
    log_value, shown_id, top_agents, top_tasks, verdict,
};
use crate::finding::{Finding, Severity, fmt_instant};
use chrono::{DateTime, Utc};
use std::io::{self, Write};
use unicode_width::UnicodeWidthStr;

/// Options of the terminal renderer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TextOptions {
    /// Color severities and headings with ANSI SGR codes (for a terminal).
    pub color: bool,
    /// Columns to fit the lines in (see [`terminal_width`]).
    pub width: usize,
}

impl Default for TextOptions {
    fn default() -> Self {
        TextOptions {
            color: false,
            width: PIPED_WIDTH,
        }
    }
}

/// The width of a report that goes to a file or a pipe.
pub const PIPED_WIDTH: usize = 100;
/// Narrower than this, every word would sit on its own line.
const MIN_WIDTH: usize = 20;

/// The width to lay the report out in: `COLUMNS` when set to a number,
/// else the terminal's when `to_terminal` (stdout is the report's
/// destination) and stdout is one, else [`PIPED_WIDTH`].
pub fn terminal_width(to_terminal: bool) -> usize {
    let columns = std::env::var("COLUMNS")
        .ok()
        .and_then(|c| c.trim().parse::<usize>().ok())
        .filter(|c| *c > 0);
    let tty = || {
        to_terminal
            .then(|| console::Term::stdout().size_checked())
            .flatten()
            .map(|(_, cols)| usize::from(cols))
    };
    columns.or_else(tty).unwrap_or(PIPED_WIDTH).max(MIN_WIDTH)
}

/// Widest a table column grows; longer cells overflow instead of pushing
/// every other row to the right.
const MAX_COL: usize = 48;

/// Writes the terminal report.
pub fn render_text(report: &Report, opts: &TextOptions, out: &mut dyn Write) -> io::Result<()> {
    render(report, opts, None, out)
}

/// The terminal report, stating the configuration file applied, if any.
pub(super) fn render(
    report: &Report,
    opts: &TextOptions,
    config: Option<&Configuration>,
    out: &mut dyn Write,
) -> io::Result<()> {
    let mut o = Out {
        out,
        st: Style(opts.color),
        width: opts.width.max(MIN_WIDTH),
    };
    let title = format!(
        "{} {} audit report",
        clean(&report.tool),
        clean(&report.version)
    );
    let title: Vec<Token> = title
        .split(' ')
        .map(|w| Token::styled(o.st.bold(w), w))
        .collect();
    o.fill(&title, "", "  ")?;
    inputs(report, &mut o)?;
    overview(report, config, &mut o)?;
    counts(report, &mut o)?;
    o.blank()?;
    o.line(&o.st.bold("Findings"))?;
    if report.findings.is_empty() {
        o.line("  none")?;
    }
    for f in report.findings.iter() {
        finding(&f, &mut o)?;
    }
    if !report.absent().is_empty() {
        o.blank()?;
        o.line(&o.st.bold("Absent since the baseline (fixed)"))?;
        for f in report.absent() {
            finding(f, &mut o)?;
        }
    }
    // The counts and the verdict again at the end, where a long report
    // is read last.
    summary(report, &mut o)
}

/// The output with its style and width.
struct Out<'a> {
    out: &'a mut dyn Write,
    st: Style,
    width: usize,
}

impl Out<'_> {
    fn line(&mut self, s: &str) -> io::Result<()> {
        writeln!(self.out, "{s}")
    }

    fn blank(&mut self) -> io::Result<()> {
        writeln!(self.out)
    }

    /// Writes `tokens` filled to the width: `first` before the first line,
    /// `rest` before the others.
    fn fill(&mut self, tokens: &[Token], first: &str, rest: &str) -> io::Result<()> {
        for l in fill(tokens, first, rest, self.width) {
            writeln!(self.out, "{}", l.trim_end())?;
        }
        Ok(())
    }

    /// Writes prose (words split at spaces) filled to the width.
    fn para(&mut self, text: &str, first: &str, rest: &str) -> io::Result<()> {
        self.fill(&words(text), first, rest)
    }
}

/// A piece of a line that is never broken: a word, a table cell, an id.
/// `text` is what is written (with color codes when styled), `width` the
/// terminal columns it takes.
#[derive(Debug, Clone)]
struct Token {
    text: String,
    width: usize,
    /// Plain text may break after a `/` when longer than a whole line.
    plain: bool,
}

impl Token {
    fn plain(s: impl Into<String>) -> Token {
        let text = s.into();
        Token {
            width: columns(&text),
            text,
            plain: true,
        }
    }

    /// `styled` is `plain` with color codes around it.
    fn styled(styled: String, plain: &str) -> Token {
        Token {
            text: styled,
            width: columns(plain),
            plain: false,
        }
    }
}

/// Prose as tokens: the words between spaces.
fn words(text: &str) -> Vec<Token> {
    text.split(' ')
        .filter(|w| !w.is_empty())
        .map(Token::plain)
        .collect()
}

/// Lays `tokens` out in lines of at most `width` columns, one space
/// between tokens, `first` before the first line and `rest` before the
/// others. A token that does not fit on the current line starts the next.
/// One longer than a whole line breaks after its slashes (a path), where
/// the width asks; without a slash it is left whole and overlong: cutting
/// it would make an identifier that does not exist.
fn fill(tokens: &[Token], first: &str, rest: &str, width: usize) -> Vec<String> {
    let mut lines = Vec::new();
    let mut line = first.to_string();
    let mut used = columns(first);
    let mut empty = true;
    let rest_used = columns(rest);
    for t in tokens {
        let pieces: Vec<&str> = if t.plain && rest_used + t.width > width {
            t.text.split_inclusive('/').collect()
        } else {
            vec![&t.text]
        };
        let whole = pieces.len() == 1;
        for (i, piece) in pieces.into_iter().enumerate() {
            let w = if whole { t.width } else { columns(piece) };
            let space = usize::from(!empty && i == 0);
            if !empty && used + space + w > width {
                lines.push(std::mem::replace(&mut line, rest.to_string()));
                used = rest_used;
                empty = true;
            }
            if !empty && i == 0 {
                line.push(' ');
                used += 1;
            }
            line.push_str(piece);
            used += w;
            empty = false;
        }
    }
    lines.push(line);
    lines
}

fn inputs(report: &Report, o: &mut Out) -> io::Result<()> {
    let st = o.st;
    o.blank()?;
    o.line(&st.bold("Inputs"))?;
    // Conflicting copies get a column only in a log that has them.
    let copies = report.totals().conflicting_copies > 0;
    let row = |i: &InputSummary, format: &str, holds: bool| {
        let mut cells = vec![
            clean(&i.path).into_owned(),
            format.to_string(),
            i.lines.to_string(),
            i.events.to_string(),
        ];
        if copies {
            cells.push(i.conflicting_copies.to_string());
        }
        cells.extend([
            i.redeliveries.to_string(),
            i.bad_lines.to_string(),
            i.blank_lines.to_string(),
            identity_word(holds).to_string(),
        ]);
        cells
    };
    let mut rows: Vec<Vec<String>> = report
        .inputs
        .iter()
        .map(|i| row(i, &clean(&i.format), i.identity_holds()))
        .collect();
    let total = report.totals();
    let holds = identity_holds(report);
    rows.push(row(&total, "", holds));
    let mut head = vec!["path", "format", "lines", "events"];
    let mut right = vec![false, false, true, true];
    if copies {
        head.push("copies");
        right.push(true);
    }
    head.extend(["redeliveries", "bad lines", "blank", "identity"]);
    right.extend([true, true, true, false]);
    table(o, &head, &right, &rows)?;
    for i in report.inputs.iter() {
        if let Some(e) = &i.error {
            let mut tokens = vec![
                Token::styled(st.red("error"), "error"),
                Token::plain(format!("{}:", clean(&i.path))),
            ];
            tokens.extend(words(&clean(e)));
            o.fill(&tokens, "  ", "    ")?;
        }
    }
    let word = identity_word(holds);
    let colored = if holds { st.green(word) } else { st.red(word) };
    let mut tokens = words(&format!(
        "Accounting: lines {} = events {}{} + redeliveries {} + bad lines {}:",
        total.lines,
        total.events,
        match total.conflicting_copies {
            0 => String::new(),
            n => format!(" + conflicting copies {n}"),
        },
        total.redeliveries,
        total.bad_lines,
    ));
    tokens.push(Token::styled(colored, word));
    tokens.extend(words(&format!(
        "(blank lines skipped: {})",
        total.blank_lines
    )));
    o.fill(&tokens, "", "  ")?;
    if total.bad_lines_unlisted > 0 {
        o.para(&super::unlisted_note(&total), "", "  ")?;
    }
    Ok(())
}

fn overview(report: &Report, config: Option<&Configuration>, o: &mut Out) -> io::Result<()> {
    o.blank()?;
    if let Some(c) = config {
        o.para(&clean(&c.summary()), "Configuration: ", "  ")?;
    }
    o.para(
        &format!(
            "Span: {} .. {}",
            instant(report.span.from),
            instant(report.span.to)
        ),
        "",
        "  ",
    )?;
    o.para(
        &format!(
            "Rules: {} run, {} failed",
            report.rules.len(),
            report.rule_errors.len()
        ),
        "",
        "  ",
    )?;
    for (rule, error) in &report.rule_errors {
        let mut tokens = vec![
            Token::styled(o.st.red("error"), "error"),
            Token::plain(format!("{}:", clean(rule))),
        ];
        tokens.extend(words(&clean(error)));
        o.fill(&tokens, "  ", "    ")?;
    }
    o.para(
        &format!(
            "Unresolved decision-basis references: {}",
            report.unresolved_basis
        ),
        "",
        "  ",
    )
}

/// "Findings: 4 (critical 1, high 2, ...)" with the severities colored.
fn findings_line(report: &Report, st: Style) -> Vec<Token> {
    let mut tokens = vec![
        Token::styled(st.bold("Findings:"), "Findings:"),
        Token::plain(report.findings.len().to_string()),
    ];
    let by_sev = report.counts_by_severity();
    let last = by_sev.len().saturating_sub(1);
    for (i, (s, n)) in by_sev.into_iter().enumerate() {
        let open = if i == 0 { "(" } else { "" };
        let close = if i == last { ")" } else { "," };
        let plain = format!("{open}{} {n}{close}", s.as_str());
        let styled = format!("{open}{} {n}{close}", st.severity(s, s.as_str()));
        tokens.push(Token::styled(styled, &plain));
    }
    tokens
}

fn counts(report: &Report, o: &mut Out) -> io::Result<()> {
    o.blank()?;
    o.fill(&findings_line(report, o.st), "", "  ")?;
    o.para(&clean(&verdict(report)), "Verdict: ", "  ")?;
    for note in gate_notes(report) {
        o.para(&clean(&note), "  ", "    ")?;
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
        o.line(title)?;
        let rows: Vec<Vec<String>> = counts
            .iter()
            .map(|(k, n)| vec![clean(k).into_owned(), n.to_string()])
            .collect();
        table(o, &[], &[false, true], &rows)?;
    }
    Ok(())
}

/// The end of the report: the counts, the accounting and the verdict,
/// so a reader of the last screen need not scroll back for them.
fn summary(report: &Report, o: &mut Out) -> io::Result<()> {
    let st = o.st;
    o.blank()?;
    o.line(&st.bold("Summary"))?;
    o.fill(&findings_line(report, st), "  ", "    ")?;
    for note in super::window_note(report)
        .into_iter()
        .chain(super::readings_note(report))
    {
        o.fill(&words(&note), "  ", "    ")?;
    }
    let by_rule = report.counts_by(|f| Some(f.rule));
    if !by_rule.is_empty() {
        let mut tokens = vec![Token::plain("By rule:")];
        let last = by_rule.len() - 1;
        for (i, (rule, n)) in by_rule.iter().enumerate() {
            // A rule id and its count stay together.
            let sep = if i == last { "" } else { "," };
            tokens.push(Token::plain(format!("{} {n}{sep}", clean(rule))));
        }
        o.fill(&tokens, "  ", "    ")?;
    }
    let holds = identity_holds(report);
    let word = identity_word(holds);
    let colored = if holds { st.green(word) } else { st.red(word) };
    o.fill(
        &[Token::plain("Accounting:"), Token::styled(colored, word)],
        "  ",
        "    ",
    )?;
    let verdict = clean(&verdict(report)).into_owned();
    let mut tokens = vec![Token::plain("Verdict:")];
    tokens.extend(
        verdict
            .split(' ')
            .filter(|w| !w.is_empty())
            .map(|w| Token::styled(st.bold(w), w)),
    );
    o.fill(&tokens, "  ", "    ")
}

fn finding(f: &Finding, o: &mut Out) -> io::Result<()> {
    let st = o.st;
    o.blank()?;
    let label = format!("[{}]", f.severity.as_str().to_ascii_uppercase());
    let rule = clean(&f.rule);
    let head = [
        Token::styled(st.severity(f.severity, &label), &label),
        Token::styled(st.bold(&rule), &rule),
        Token::plain(format!("({})", clean(&f.family))),
        Token::plain(instant(f.at)),
    ];
    o.fill(&head, "", "  ")?;
    o.para(&log_text(&f.message), "  ", "  ")?;
    if let Some(task) = &f.task_id {
        o.fill(
            &[Token::plain("task:"), Token::plain(shown_id(task))],
            "  ",
            "    ",
        )?;
    }
    if !f.event_ids.is_empty() {
        let mut tokens = vec![Token::plain("events:")];
        let last = f.event_ids.len() - 1;
        for (i, e) in f.event_ids.iter().enumerate() {
            let sep = if i == last { "" } else { "," };
            tokens.push(Token::plain(format!("{}{sep}", shown_id(e))));
        }
        o.fill(&tokens, "  ", "    ")?;
    }
    for l in &f.locations {
        // A path may hold spaces: it is one token all the same.
        let mut tokens = vec![
            Token::plain("at"),
            Token::plain(clean(&file_line(&l.file, l.line))),
        ];
        if let Some(e) = &l.event_id {
            tokens.push(Token::plain("(event"));
            tokens.push(Token::plain(format!("{})", shown_id(e))));
        }
        o.fill(&tokens, "  ", "    ")?;
    }
    o.fill(
        &[
            Token::plain("fingerprint:"),
            Token::plain(clean(&f.fingerprint)),
        ],
        "  ",
        "    ",
    )?;
    for state in finding_state(f) {
        o.para(&clean(&state), "  ", "    ")?;
    }
    if f.timeline.is_empty() {
        return Ok(());
    }
    o.line("  timeline:")?;
    let rows: Vec<Vec<String>> = f
        .timeline
        .iter()
        .map(|t| {
            vec![
                instant(t.at),
                log_value(&t.event_id).into_owned(),
                log_value(&t.event_type).into_owned(),
                t.task_id
                    .as_deref()
                    .map(|t| log_value(t).into_owned())
                    .unwrap_or_default(),
                clean(&file_line(&t.file, t.line)).into_owned(),
            ]
        })
        .collect();
    table(o, &[], &[false; 5], &rows)
}

fn instant(t: Option<DateTime<Utc>>) -> String {
    t.as_ref().map_or_else(|| "-".to_string(), fmt_instant)
}

/// Columns between table cells.
const GAP: usize = 2;
/// Narrowest the first column of a table is shrunk to before the table
/// gives up its columns.
const MIN_FIRST: usize = 8;

/// Writes rows as aligned columns: a headed table indented two spaces, a
/// headless one (a list under a heading) four. Cells must already be
/// cleaned; none is ever cut.
///
/// When the columns are wider than the line, the first (a path, a rule
/// id, a task id: the one that varies) gives way: a cell wider than its
/// column gets a line of its own, the rest of the row follows aligned.
/// When even that does not fit, each row is written as a record: the
/// first cell, then the others filled below it (with their heading).
fn table(o: &mut Out, head: &[&str], right: &[bool], rows: &[Vec<String>]) -> io::Result<()> {
    let head: Vec<String> = head.iter().map(|h| h.to_uppercase()).collect();
    let mut width = vec![0usize; right.len()];
    for r in std::iter::once(&head).chain(rows) {
        for (c, cell) in r.iter().enumerate() {
            width[c] = width[c].max(columns(cell).min(MAX_COL));
        }
    }
    let indent = if head.is_empty() { "    " } else { "  " };
    let total =
        |width: &[usize]| indent.len() + width.iter().sum::<usize>() + GAP * (width.len() - 1);
    if total(&width) > o.width {
        let others = total(&width) - width[0];
        let least = head.first().map_or(0, |h| columns(h)).max(MIN_FIRST);
        if others + least > o.width {
            return records(o, &head, rows, indent);
        }
        width[0] = o.width - others;
    }
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
        format!("{indent}{}", parts.join(&" ".repeat(GAP)))
            .trim_end()
            .to_string()
    };
    if !head.is_empty() {
        o.line(&line(&head))?;
    }
    for r in rows {
        let l = line(r);
        if columns(&l) <= o.width {
            o.line(&l)?;
            continue;
        }
        let mut r = r.clone();
        if columns(&r[0]) > width[0] {
            o.fill(&[Token::plain(std::mem::take(&mut r[0]))], indent, indent)?;
        }
        let l = line(&r);
        if columns(&l) <= o.width {
            o.line(&l)?;
        } else {
            // A cell past MAX_COL pushed the row out: fill it instead.
            let cells: Vec<Token> = r
                .iter()
                .filter(|c| !c.is_empty())
                .map(|c| Token::plain(c.clone()))
                .collect();
            o.fill(&cells, indent, &format!("{indent}    "))?;
        }
    }
    Ok(())
}

/// A table too wide for the line, one record a row: the first cell, then
/// the others as "heading value" (or the bare values of a headless
/// table), filled below it.
fn records(o: &mut Out, head: &[String], rows: &[Vec<String>], indent: &str) -> io::Result<()> {
    let below = format!("{indent}    ");
    for r in rows {
        let Some((first, others)) = r.split_first() else {
            continue;
        };
        let n = others.len();
        let cells: Vec<Token> = others
            .iter()
            .enumerate()
            .filter(|(_, c)| !c.is_empty())
            .map(|(i, c)| {
                let sep = if i + 1 == n { "" } else { "," };
                match head.get(i + 1) {
                    Some(h) => Token::plain(format!("{} {c}{sep}", h.to_lowercase())),
                    None => Token::plain(c.clone()),
                }
            })
            .collect();
        if head.is_empty() {
            let mut all = vec![Token::plain(first.clone())];
            all.extend(cells);
            o.fill(&all, indent, &below)?;
        } else {
            o.fill(&[Token::plain(first.clone())], indent, indent)?;
            o.fill(&cells, &below, &below)?;
        }
    }
    Ok(())
}

/// Terminal columns a cleaned string takes: East Asian wide characters
/// and most emoji take two, so a table of Japanese task ids stays aligned.
fn columns(s: &str) -> usize {
    s.width()
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

#[cfg(test)]
mod tests {
    use super::*;

    fn plain(words: &[&str]) -> Vec<Token> {
        words.iter().map(|w| Token::plain(*w)).collect()
    }

    #[test]
    fn words_move_whole_to_the_next_line() {
        let lines = fill(&plain(&["alpha", "beta", "gamma_delta"]), "  ", "    ", 14);
        assert_eq!(lines, ["  alpha beta", "    gamma_delta"]);
    }

    #[test]
    fn a_path_longer_than_a_line_breaks_after_slashes_only() {
        let lines = fill(
            &plain(&["at", "logs/2025/run_one.ndjson:3"]),
            "  ",
            "  ",
            16,
        );
        assert_eq!(lines, ["  at logs/2025/", "  run_one.ndjson:3"]);
        // A path that fits on a line of its own is not broken.
        let lines = fill(&plain(&["at", "logs/run.ndjson:3"]), "", "", 19);
        assert_eq!(lines, ["at", "logs/run.ndjson:3"]);
    }

    #[test]
    fn an_identifier_longer_than_a_line_stays_whole() {
        let id = "checkpoint.resume_without_id";
        let lines = fill(&plain(&["rule", id, "x"]), "", "  ", 10);
        assert_eq!(lines, ["rule".to_string(), format!("  {id}"), "  x".into()]);
    }

    #[test]
    fn wide_characters_count_twice() {
        let lines = fill(&plain(&["日本語", "日本語"]), "", "", 12);
        assert_eq!(lines, ["日本語", "日本語"]);
    }
}
