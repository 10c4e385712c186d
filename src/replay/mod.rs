//! `hvaudit replay`: what was the state of everything under a task (or in a
//! session) at an instant, how it got there, and which findings name it.
//!
//! The model is built with plain SQL over the registered tables (`query`),
//! the findings come from running the audit on the same ingested data, and
//! `render` writes it as text, JSON, Markdown or one self-contained HTML
//! page.

mod build;
mod markdown;
mod query;
mod render;
mod state;

use crate::audit::{AuditConfig, AuditError, audit_tables, block_on};
use crate::finding::{Finding, fmt_instant};
use crate::report::model::Span;
use crate::tables::{Purpose, Tables};
use chrono::{DateTime, Utc};
use serde::{Serialize, Serializer};

pub use state::SEEN;

/// What to replay: one task's tree, or everything in one session.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Scope {
    /// The task, its ancestors up to the root and all its descendants.
    Task(String),
    /// Every task with an event in the session, and the session's own events.
    Session(String),
}

impl Scope {
    fn kind(&self) -> &'static str {
        match self {
            Scope::Task(_) => "task",
            Scope::Session(_) => "session",
        }
    }

    fn id(&self) -> &str {
        match self {
            Scope::Task(id) | Scope::Session(id) => id,
        }
    }
}

/// A replay question: the scope and the instant (None = end of the log).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ReplayRequest {
    pub scope: Scope,
    pub at: Option<DateTime<Utc>>,
}

/// Why a replay could not be built.
#[derive(Debug, thiserror::Error)]
pub enum ReplayError {
    /// The task or session appears nowhere in the input (exit code 2).
    #[error("no {kind} {id:?} in the input{}", if *.kind == "task" { " (neither as task_id nor as parent_task_id)" } else { "" })]
    Unknown { kind: &'static str, id: String },
    #[error(transparent)]
    Audit(#[from] AuditError),
    #[error("query engine: {0}")]
    Engine(#[from] datafusion::error::DataFusionError),
}

/// Where a task sits relative to the question.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Role {
    /// Above the asked task, up to the root.
    Ancestor,
    /// The asked task.
    Focus,
    /// Below the asked task.
    Descendant,
    /// A task of the asked session.
    Member,
}

/// The lifecycle states a task.* event puts a task in, by event type.
pub const LIFECYCLE: [(&str, &str); 10] = [
    ("task.submitted", "submitted"),
    ("task.accepted", "accepted"),
    ("task.started", "started"),
    ("task.progress", "progress"),
    ("task.output", "output"),
    ("task.blocked", "blocked"),
    ("task.completed", "completed"),
    ("task.failed", "failed"),
    ("task.cancelled", "cancelled"),
    ("task.timed_out", "timed_out"),
];

/// The state of a task whose only events so far are delegation events.
pub const DELEGATED: &str = "delegated";
/// The state of a task with no event at or before the instant.
pub const NOT_YET_SEEN: &str = "not yet seen";

/// A reference to one event of the timeline, as states and tokens cite it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct EventRef {
    pub event_id: String,
    #[serde(rename = "type")]
    pub event_type: String,
    #[serde(serialize_with = "instant")]
    pub at: Option<DateTime<Utc>>,
    pub file: String,
    pub line: u64,
}

/// One task of the tree, with its state at the instant.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct TaskState {
    pub task_id: String,
    /// The first parent link seen on the task's events.
    pub parent_task_id: Option<String>,
    /// Depth in the displayed tree (roots are 0).
    pub depth: usize,
    pub role: Role,
    pub session_id: Option<String>,
    /// A lifecycle state (`started`, `completed`, ...); `delegated` when
    /// only delegation events exist; `seen` when only other events (e.g.
    /// interruptions) exist; `not yet seen` when none is at or before the
    /// instant.
    pub state: String,
    /// The event that put the task in `state` (none for `not yet seen`).
    pub state_event: Option<EventRef>,
    /// A task.cancel.requested at or before the instant, while not terminal.
    pub cancel_requested: bool,
    /// The last interruption.* event type at or before the instant, unless
    /// the task has resumed (or ended) since.
    pub interruption: Option<String>,
    /// The task's first event of any type.
    #[serde(serialize_with = "instant")]
    pub first_at: Option<DateTime<Utc>>,
    /// Events of the task in the timeline (all instants).
    pub events: usize,
    /// Indexes into `Replay::findings` of the findings naming the task.
    pub findings: Vec<usize>,
}

impl TaskState {
    /// Completed, failed, cancelled or timed out at the instant.
    pub fn is_terminal(&self) -> bool {
        matches!(
            self.state.as_str(),
            "completed" | "failed" | "cancelled" | "timed_out"
        )
    }
}

/// What an event is, for grouping and display.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum EventKind {
    Lifecycle,
    Delegation,
    Interruption,
    Decision,
    Other,
}

/// One entry of a decision's basis: its causation_id or an evidence_chain
/// entry, resolved to the event it names when that is in the input.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct BasisRef {
    pub ref_id: String,
    /// "causation_id" or "evidence_chain".
    pub via: String,
    /// Position in the evidence chain.
    pub pos: Option<i64>,
    /// The evidence entry's `source`.
    pub source: Option<String>,
    /// The named event; None when it is not in the input (unresolved).
    pub event: Option<EventRef>,
}

/// One event of the timeline.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ReplayEvent {
    pub seq: i64,
    #[serde(serialize_with = "instant")]
    pub at: Option<DateTime<Utc>>,
    /// `created_ns`: the timeline's order (`at` is shown to the millisecond).
    #[serde(skip)]
    pub at_ns: i64,
    pub event_id: String,
    #[serde(rename = "type")]
    pub event_type: String,
    pub kind: EventKind,
    pub task_id: Option<String>,
    pub parent_task_id: Option<String>,
    pub session_id: Option<String>,
    pub source: String,
    pub target: Option<String>,
    pub file: String,
    pub line: u64,
    /// 1 for the first content under the id, 2.. for conflicting versions
    /// (which never change a state).
    pub version: i32,
    /// Later than the instant (shown after the instant marker).
    pub after_instant: bool,
    pub causation_id: Option<String>,
    pub delegated_by: Option<String>,
    pub delegated_to: Option<String>,
    /// The handoff token, abbreviated (tokens are bearer credentials).
    pub token: Option<String>,
    pub checkpoint_id: Option<String>,
    pub interruption_policy: Option<String>,
    /// For decisions: the causation_id and every evidence_chain entry.
    pub basis: Vec<BasisRef>,
    /// Indexes into `Replay::findings` of the findings citing this event.
    pub findings: Vec<usize>,
}

/// Who held a handoff token: issued by `delegated_by` to `delegated_to`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct TokenHolding {
    /// Abbreviated token value.
    pub token: String,
    pub task_id: Option<String>,
    pub delegated_by: Option<String>,
    pub delegated_to: Option<String>,
    /// The delegation.handoff.completed that issued it, if in the timeline.
    pub issued: Option<EventRef>,
    /// Events presenting it (other than the issue), at any instant.
    pub presented: usize,
}

/// The answer to a replay question.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Replay {
    pub tool: String,
    pub version: String,
    pub scope: Scope,
    /// The instant the states are for.
    #[serde(serialize_with = "instant")]
    pub instant: Option<DateTime<Utc>>,
    /// True when no instant was asked for (the end of the log).
    pub instant_is_end: bool,
    /// The audited log's span.
    pub span: Span,
    /// The tree, depth first: each task after its parent, siblings by
    /// their first event.
    pub tasks: Vec<TaskState>,
    /// The tasks' events by (created_ns, seq).
    pub timeline: Vec<ReplayEvent>,
    pub tokens: Vec<TokenHolding>,
    /// The audit's findings touching these tasks, in report order.
    pub findings: Vec<Finding>,
}

/// Replay `cfg.reading`'s log: open its tables ([`Tables::open`]: loaded,
/// or, too large for memory, on disk), run the audit for the findings and
/// build the replay on the same tables.
pub fn replay(cfg: &AuditConfig, request: &ReplayRequest) -> Result<Replay, ReplayError> {
    let catalog = cfg.catalog()?;
    let tables = Tables::open(&cfg.reading, Purpose::Replay).map_err(AuditError::from)?;
    replay_in(cfg, &catalog, &tables, request)
}

/// [`replay`] over tables already opened (`cfg.reading` is not read again).
pub fn replay_on(
    cfg: &AuditConfig,
    tables: &Tables,
    request: &ReplayRequest,
) -> Result<Replay, ReplayError> {
    replay_in(cfg, &cfg.catalog()?, tables, request)
}

fn replay_in(
    cfg: &AuditConfig,
    catalog: &crate::rules::catalog::Catalog,
    tables: &Tables,
    request: &ReplayRequest,
) -> Result<Replay, ReplayError> {
    block_on(async {
        let report = audit_tables(cfg, catalog, tables).await?;
        build::build(cfg, tables, request, report).await
    })
}

/// Abbreviates a token to its first and last six characters: enough to
/// tell tokens apart (JWTs share their first ones), too little to reuse.
pub fn abbreviate_token(token: &str) -> String {
    let chars: Vec<char> = token.chars().collect();
    if chars.len() <= 16 {
        return token.to_string();
    }
    let head: String = chars[..6].iter().collect();
    let tail: String = chars[chars.len() - 6..].iter().collect();
    format!("{head}…{tail}")
}

fn instant<S: Serializer>(t: &Option<DateTime<Utc>>, s: S) -> Result<S::Ok, S::Error> {
    match t {
        Some(t) => s.serialize_str(&fmt_instant(t)),
        None => s.serialize_none(),
    }
}

/// An output format of `hvaudit replay`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum ReplayFormat {
    Text,
    Json,
    Html,
    /// Markdown, for a ticket or a pull request.
    #[value(name = "md", alias = "markdown")]
    Markdown,
}

/// Writes `replay` to `out` in `format`.
pub fn render(
    replay: &Replay,
    format: ReplayFormat,
    out: &mut dyn std::io::Write,
) -> anyhow::Result<()> {
    match format {
        ReplayFormat::Text => out.write_all(render::text(replay).as_bytes())?,
        ReplayFormat::Json => {
            serde_json::to_writer_pretty(&mut *out, replay)?;
            out.write_all(b"\n")?;
        }
        ReplayFormat::Html => render::html(replay, out)?,
        ReplayFormat::Markdown => markdown::render(replay, out)?,
    }
    out.flush()?;
    Ok(())
}
