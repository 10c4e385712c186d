//! Report renderers, one a file. Every renderer reads the same `Report` and
//! writes deterministic output: findings keep the report's order and every
//! map is ordered, so two runs on the same input give identical bytes.

pub(crate) mod html;
mod json;
mod jsonl;
mod markdown;
mod sarif;
mod text;

use crate::finding::Report;
use std::fmt;
use std::io::Write;
use std::str::FromStr;

pub use text::{TextOptions, render_text};

/// The line that says some rejected lines are counted but not listed.
fn unlisted_note(total: &crate::InputSummary) -> String {
    format!(
        "{} bad lines are counted but not listed (only the first of each input are, \
         --max-bad-lines); --bad-lines FILE writes every one",
        total.bad_lines_unlisted
    )
}

/// An output format of `hvaudit audit`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Format {
    Text,
    Json,
    Jsonl,
    Markdown,
    Html,
    Sarif,
}

impl Format {
    /// The accepted names, for help and error messages.
    pub const NAMES: &'static str = "text, json, jsonl, md (markdown), html, sarif";

    pub fn as_str(self) -> &'static str {
        match self {
            Format::Text => "text",
            Format::Json => "json",
            Format::Jsonl => "jsonl",
            Format::Markdown => "md",
            Format::Html => "html",
            Format::Sarif => "sarif",
        }
    }
}

impl fmt::Display for Format {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl FromStr for Format {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s.trim().to_ascii_lowercase().as_str() {
            "text" => Ok(Format::Text),
            "json" => Ok(Format::Json),
            "jsonl" => Ok(Format::Jsonl),
            "md" | "markdown" => Ok(Format::Markdown),
            "html" => Ok(Format::Html),
            "sarif" => Ok(Format::Sarif),
            other => Err(format!(
                "unknown report format '{other}'; use one of {}",
                Format::NAMES
            )),
        }
    }
}

/// Writes `report` to `out` in `format`. Text output is plain (no color);
/// call [`render_text`] directly to choose terminal options.
pub fn render(report: &Report, format: Format, out: &mut dyn Write) -> anyhow::Result<()> {
    match format {
        Format::Text => render_text(report, &TextOptions::default(), out)?,
        Format::Json => json::render(report, out)?,
        Format::Jsonl => jsonl::render(report, out)?,
        Format::Markdown => markdown::render(report, out)?,
        Format::Html => html::render(report, out)?,
        Format::Sarif => sarif::render(report, out)?,
    }
    out.flush()?;
    Ok(())
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
pub(crate) use crate::escape::visible as clean;
