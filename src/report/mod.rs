//! Report renderers, one a file. Every renderer reads the same `Report` and
//! writes deterministic output: findings keep the report's order and every
//! map is ordered, so two runs on the same input give identical bytes. The
//! one exception is the HTML header's generation time (`Provenance`), which
//! `SOURCE_DATE_EPOCH` fixes.

pub(crate) mod html;
mod json;
mod jsonl;
mod junit;
pub(crate) mod markdown;
pub mod model;
mod parquet;
mod provenance;
mod sarif;
mod text;

use model::Report;
use std::fmt;
use std::io::Write;
use std::str::FromStr;

pub use parquet::{findings_batches, inputs_batch};
pub use provenance::{Configuration, Provenance, command_line, generation_time};
pub use text::{PIPED_WIDTH, TextOptions, render_text, terminal_width};

/// The line that says some rejected lines are counted but not listed.
fn unlisted_note(total: &crate::InputSummary) -> String {
    format!(
        "{} bad lines are counted but not listed (only the first of each input are, \
         --max-bad-lines); --bad-lines FILE writes every one",
        total.bad_lines_unlisted
    )
}

/// An output format of `hvaudit audit`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum ReportFormat {
    Text,
    Json,
    Jsonl,
    #[value(name = "md", alias = "markdown")]
    Markdown,
    Html,
    Sarif,
    /// JUnit XML: one test case per rule, its findings as the failure.
    Junit,
    /// Parquet: one row per finding (for polars, DuckDB); binary, so to
    /// `-o FILE` or a pipe, never a terminal.
    Parquet,
}

impl ReportFormat {
    pub fn as_str(self) -> &'static str {
        match self {
            ReportFormat::Text => "text",
            ReportFormat::Json => "json",
            ReportFormat::Jsonl => "jsonl",
            ReportFormat::Markdown => "md",
            ReportFormat::Html => "html",
            ReportFormat::Sarif => "sarif",
            ReportFormat::Junit => "junit",
            ReportFormat::Parquet => "parquet",
        }
    }
}

impl fmt::Display for ReportFormat {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl FromStr for ReportFormat {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        use clap::ValueEnum;
        <ReportFormat as ValueEnum>::from_str(s.trim(), true).map_err(|_| {
            // Each name with its aliases: "md (markdown)".
            let names: Vec<String> = ReportFormat::value_variants()
                .iter()
                .filter_map(|f| f.to_possible_value())
                .map(|v| {
                    let aliases: Vec<&str> = v.get_name_and_aliases().skip(1).collect();
                    match aliases.as_slice() {
                        [] => v.get_name().to_string(),
                        more => format!("{} ({})", v.get_name(), more.join(", ")),
                    }
                })
                .collect();
            format!(
                "unknown report format '{s}'; use one of {}",
                names.join(", ")
            )
        })
    }
}

/// The JSON report's fields but the findings (inputs, span, counts,
/// accounting, rules, rule errors, gate), in its key order, as the HTML
/// page reads them; the Python module's `Report.summary`.
pub fn summary_json(report: &Report) -> serde_json::Result<String> {
    serde_json::to_string(&json::ReportJson::summary(report))
}

/// Writes `report` to `out` in `format`. Text output is plain (no color);
/// call [`render_text`] directly to choose terminal options.
pub fn render(report: &Report, format: ReportFormat, out: &mut dyn Write) -> anyhow::Result<()> {
    render_with(report, format, &RenderOptions::default(), out)
}

/// What the command adds to a report: the text's width and color, the
/// command line and generation time the HTML header states, and the
/// configuration file every format states.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct RenderOptions {
    pub text: TextOptions,
    pub provenance: Provenance,
}

/// As [`render`], with the command's options.
pub fn render_with(
    report: &Report,
    format: ReportFormat,
    opts: &RenderOptions,
    out: &mut dyn Write,
) -> anyhow::Result<()> {
    let config = opts.provenance.configuration.as_ref();
    match format {
        ReportFormat::Text => text::render(report, &opts.text, config, out)?,
        ReportFormat::Json => json::render(report, config, out)?,
        ReportFormat::Jsonl => jsonl::render(report, out)?,
        ReportFormat::Markdown => markdown::render(report, config, out)?,
        ReportFormat::Html => html::render(report, &opts.provenance, out)?,
        ReportFormat::Sarif => sarif::render(report, config, out)?,
        ReportFormat::Junit => junit::render(report, config, out)?,
        ReportFormat::Parquet => parquet::render(report, config, out)?,
    }
    out.flush()?;
    Ok(())
}

/// The gate's verdict in one sentence: passed or failed, and why.
fn verdict(report: &Report) -> String {
    let Some(level) = report.gate.fail_on else {
        return "not gated: findings never fail the run (--fail-on none)".into();
    };
    let (among, option) = if report.gate.new_only {
        (" new", "--fail-on-new")
    } else {
        ("", "--fail-on")
    };
    let suppressed = match report.suppressed() {
        0 => String::new(),
        n => format!("; {n} suppressed finding(s) not counted"),
    };
    match report.failing() {
        0 => {
            format!("PASSED: no{among} finding at or above {level} ({option} {level}){suppressed}")
        }
        n => format!(
            "FAILED: {n}{among} finding(s) at or above {level} ({option} {level}){suppressed}"
        ),
    }
}

/// The gate's notes beside the verdict: no events, the suppression file
/// and its expired or unused entries, the baseline's counts. Plain text;
/// each renderer escapes it its own way.
fn gate_notes(report: &Report) -> Vec<String> {
    let mut notes = Vec::new();
    if report.no_events() {
        notes.push("No events: the inputs hold no events, so nothing was audited.".into());
    }
    if let Some(s) = &report.gate.suppressions {
        notes.push(format!(
            "Suppressions from {}: {} finding(s) suppressed by {} entries.",
            s.file,
            report.suppressed(),
            s.entries.len()
        ));
        for e in &s.entries {
            if e.expired {
                notes.push(format!(
                    "Suppression entry {} ({}) expired on {}: it suppresses nothing now.",
                    e.entry,
                    e.matches,
                    e.expires.as_deref().unwrap_or_default()
                ));
            } else if e.suppressed == 0 {
                notes.push(format!(
                    "Suppression entry {} ({}) matched no finding (unused).",
                    e.entry, e.matches
                ));
            }
        }
    }
    if let Some(b) = &report.gate.baseline {
        notes.push(format!(
            "Against the baseline {}: {} new, {} unchanged, {} absent (fixed).",
            b.file,
            b.new,
            b.unchanged,
            b.absent.len()
        ));
    }
    notes
}

/// A finding's gate state in words: suppressed (with the entry's reason,
/// owner and expiry) and its baseline state; empty when neither applies.
fn finding_state(f: &crate::Finding) -> Vec<String> {
    let mut out = Vec::new();
    if let Some(s) = &f.suppression {
        let mut said = format!("suppressed by entry {}: {}", s.entry, s.reason);
        if let Some(o) = &s.owner {
            said.push_str(&format!(" (owner {o})"));
        }
        if let Some(e) = &s.expires {
            said.push_str(&format!(" (until {e})"));
        }
        out.push(said);
    }
    if let Some(b) = f.baseline_state {
        out.push(format!("baseline: {}", b.as_str()));
    }
    out.extend(rests_on_note(f));
    out
}

/// What a finding that rests on a conflicting copy says of it.
pub fn rests_on_note(f: &crate::Finding) -> Option<String> {
    let v = f.rests_on_version?;
    Some(format!(
        "rests on a conflicting copy: it arises when version {v} of the conflicting event ids \
         it cites is read instead of version 1 (see integrity.conflicting_duplicate)"
    ))
}

/// What the readings of later versions were, when the log held
/// conflicting ids.
pub fn readings_note(report: &Report) -> Option<String> {
    let made = report.readings?;
    let mut note = format!(
        "{} event id{} held conflicting copies: besides version 1, the rules read version{} \
         2{} of {} ({} reading{}); findings only such a reading yields rest on a conflicting copy",
        made.ids,
        if made.ids == 1 { "" } else { "s" },
        if made.readings == 1 { "" } else { "s" },
        match made.readings {
            0 | 1 => String::new(),
            n => format!("..{}", n + 1),
        },
        if made.ids == 1 { "it" } else { "them" },
        made.readings,
        if made.readings == 1 { "" } else { "s" },
    );
    if made.past_the_last > 0 {
        note.push_str(&format!(
            "; {} id{} more than {} versions: readings past version {} were not made",
            made.past_the_last,
            if made.past_the_last == 1 {
                " has"
            } else {
                "s have"
            },
            model::MAX_READING,
            model::MAX_READING
        ));
    }
    Some(note)
}

/// How many tasks the "top tasks" tables list.
const TOP_TASKS: usize = 5;

/// The tasks with the most findings, most first.
fn top_agents(report: &Report) -> Vec<(String, usize)> {
    let mut agents = report.counts_by(|f| f.agent);
    agents.truncate(TOP_TASKS);
    agents
}

fn top_tasks(report: &Report) -> Vec<(String, usize)> {
    let mut tasks = report.counts_by(|f| f.task_id);
    tasks.truncate(TOP_TASKS);
    tasks
}

/// The accounting identity over the whole run: every input balances and so
/// does the total (two inputs could otherwise hide opposite errors).
/// With `--since`/`--until`: how many findings were left out, said so
/// that a window never hides a finding silently.
pub fn window_note(report: &Report) -> Option<String> {
    let n = report.outside_window?;
    Some(format!(
        "{n} finding{} left out: none of the events {} cites lies in the --since/--until window",
        if n == 1 { "" } else { "s" },
        if n == 1 { "it" } else { "they" }
    ))
}

/// The accounting's term for conflicting copies (later versions of an id),
/// written only when there are some: ` + N conflicting copies`.
pub fn copies_term(i: &crate::InputSummary) -> String {
    match i.conflicting_copies {
        0 => String::new(),
        n => format!(" + {n} conflicting cop{}", if n == 1 { "y" } else { "ies" }),
    }
}

fn identity_holds(report: &Report) -> bool {
    report.inputs.iter().all(|i| i.identity_holds()) && report.totals().identity_holds()
}

/// "OK" or "MISMATCH", the word every human-readable format uses.
fn identity_word(holds: bool) -> &'static str {
    if holds { "OK" } else { "MISMATCH" }
}

/// `file:line` of a location, the way every format cites evidence.
fn file_line(file: &str, line: u64) -> String {
    format!("{file}:{line}")
}

/// Every character a terminal or viewer could act on (controls, bidi
/// overrides, line separators) or that is invisible (zero-width and joiner
/// characters, soft hyphen, byte order mark) as a visible escape: a log
/// value can neither drive the display nor pass for another id.
// `clean`: text that may already hold escapes (paths as shown, errors,
// notes); `log_text`: what a log said (messages, ids), its backslashes
// escaped too (src/escape.rs).
pub(crate) use crate::escape::hidden_escaped as clean;
pub(crate) use crate::escape::log_value;
pub(crate) use crate::escape::visible as log_text;

/// An id from a log as the text report shows it: [`log_value`], and, when
/// it may be taken for another id, why and its code points
/// (`escape::look_alike`, of the whole id).
pub(crate) fn shown_id(id: &str) -> std::borrow::Cow<'_, str> {
    match crate::escape::look_alike(id) {
        None => log_value(id),
        Some(why) => format!("{} [{why}]", log_value(id)).into(),
    }
}
