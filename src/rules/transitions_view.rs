//! The `irregular_transitions` view (queries/views/14_irregular_transitions.sql)
//! computed in one pass over `ev`, for an audit that keeps its views in
//! memory.
//!
//! The SQL form is the reference, as for `tasks` (`tasks_view`). It sorts
//! every lifecycle event of the log by task and time for one window, then
//! joins each with the lifecycle table; on a 1 GB log that was the second
//! longest view. Here each task's lifecycle events are put in order with
//! integers, each step is looked up in the lifecycle table's pairs, and
//! only the irregular steps are written out. tests/tasks_view.rs holds the
//! two forms to the same rows.

use super::tasks_view::{At, gather, laid_out, per_type, task_numbers};
use datafusion::arrow::array::{
    Array, ArrayRef, AsArray, BooleanArray, Int64Array, RecordBatch, StringArray,
};
use datafusion::arrow::compute::cast;
use datafusion::arrow::datatypes::{DataType, Int64Type, SchemaRef};
use datafusion::error::{DataFusionError, Result};
use datafusion::prelude::SessionContext;
use std::sync::Arc;

/// The columns of `ev` the view reads (every row: a filter would copy the
/// text of the rows it keeps, a projection shares the table's buffers).
const INPUT: &str = "SELECT seq, task_key, type, created_ns, created_at, id, task_id FROM ev";

/// The lifecycle types, the only events whose steps are checked, then the
/// two delegation acceptances; a type's code is its place here plus one.
const TYPES: [&str; 12] = [
    "task.submitted",
    "task.accepted",
    "task.started",
    "task.progress",
    "task.output",
    "task.blocked",
    "task.completed",
    "task.failed",
    "task.cancelled",
    "task.timed_out",
    "delegation.accepted",
    "delegation.handoff.completed",
];
const LIFECYCLE: u8 = 10;
const SUBMITTED: u8 = 1;
const ACCEPTED: u8 = 2;
const STARTED: u8 = 3;
/// The step "from" nothing: a task's first lifecycle event.
const NONE: u8 = 0;

/// A type's code (0 for a type not in [`TYPES`]).
fn code(t: &str) -> u8 {
    TYPES
        .iter()
        .position(|n| *n == t)
        .map_or(0, |i| i as u8 + 1)
}

/// The type of a code, as the view names it (`(none)` for [`NONE`]).
fn name(code: u8) -> &'static str {
    match code {
        NONE => "(none)",
        _ => TYPES[code as usize - 1],
    }
}

/// The steps `lifecycle_next` allows, by code: `[from][to]`, from [`NONE`]
/// for a task's first lifecycle event.
type Legal = [[bool; LIFECYCLE as usize + 1]; LIFECYCLE as usize + 1];

/// A lifecycle event of a task.
#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
struct Step {
    task: u32,
    at: At,
    code: u8,
}

/// An irregular step, as the view shows it.
struct Irregular {
    at: At,
    /// The step it follows: the task's lifecycle event before it, or its
    /// delegation acceptance (with that event's type).
    from: Option<At>,
    from_delegation: Option<u8>,
    from_type: &'static str,
    /// The previous lifecycle event's type (not for a delegation).
    prev_code: Option<u8>,
    legal: bool,
    skipped_accept: bool,
}

/// The rows of the `irregular_transitions` view over `ctx`'s `ev` and
/// `lifecycle_next`, laid out as `schema` (the view's planned schema).
pub async fn irregular_transitions(
    ctx: &SessionContext,
    schema: &SchemaRef,
) -> Result<Vec<RecordBatch>> {
    let input = ctx.sql(INPUT).await?.collect().await?;
    let legal = legal_steps(ctx).await?;
    let steps = irregular(&input, &legal)?;
    let ats = || steps.iter().map(|s| Some(s.at));
    let froms = || steps.iter().map(|s| s.from);
    let mut columns = Vec::with_capacity(schema.fields().len());
    for field in schema.fields() {
        let column: ArrayRef =
            match field.name().as_str() {
                c @ ("seq" | "id" | "task_id" | "task_key" | "type" | "created_ns"
                | "created_at") => gather(&input, c, ats())?,
                "from_type" => Arc::new(StringArray::from_iter_values(
                    steps.iter().map(|s| s.from_type),
                )),
                "from_seq" => Arc::new(Int64Array::from_iter(froms().map(|f| f.map(|f| f.seq)))),
                "from_at" => gather(&input, "created_at", froms())?,
                "from_label" => {
                    let ids = gather(&input, "id", froms())?;
                    let ids = cast(&ids, &DataType::Utf8)?;
                    let ids = ids.as_string::<i32>();
                    let labels = steps.iter().enumerate().map(|(i, s)| {
                        match (s.from_delegation, s.prev_code) {
                            (Some(d), _) => Some(format!(
                                "{} (counts as submitted + accepted)",
                                log_value(name(d))
                            )),
                            (None, Some(p)) => Some(format!(
                                "{} {}",
                                log_value(name(p)),
                                log_value(if ids.is_null(i) { "" } else { ids.value(i) })
                            )),
                            (None, None) => None,
                        }
                    });
                    Arc::new(StringArray::from_iter(labels))
                }
                "legal" => Arc::new(BooleanArray::from_iter(steps.iter().map(|s| Some(s.legal)))),
                "skipped_accept" => Arc::new(BooleanArray::from_iter(
                    steps.iter().map(|s| Some(s.skipped_accept)),
                )),
                other => {
                    return Err(DataFusionError::Plan(format!(
                        "irregular_transitions: no native form of column {other}"
                    )));
                }
            };
        columns.push(column);
    }
    laid_out(schema, columns)
}

/// The (from, to) pairs of `lifecycle_next`, by code (a pair of other
/// types is never looked up).
async fn legal_steps(ctx: &SessionContext) -> Result<Legal> {
    let rows = ctx
        .sql("SELECT from_type, to_type FROM lifecycle_next")
        .await?
        .collect()
        .await?;
    let mut legal: Legal = Default::default();
    let lifecycle = |t: &str| Some(code(t)).filter(|c| (1..=LIFECYCLE).contains(c));
    for b in &rows {
        let (from, to) = (
            cast(b.column(0), &DataType::Utf8)?,
            cast(b.column(1), &DataType::Utf8)?,
        );
        let (from, to) = (from.as_string::<i32>(), to.as_string::<i32>());
        for r in 0..b.num_rows() {
            if from.is_null(r) || to.is_null(r) {
                continue;
            }
            let from = match from.value(r) {
                "(none)" => Some(NONE),
                other => lifecycle(other),
            };
            if let (Some(from), Some(to)) = (from, lifecycle(to.value(r))) {
                legal[from as usize][to as usize] = true;
            }
        }
    }
    Ok(legal)
}

/// Every lifecycle step of `input` that is illegal or skips task.accepted.
fn irregular(input: &[RecordBatch], legal: &Legal) -> Result<Vec<Irregular>> {
    let Some(first) = input.first() else {
        return Ok(Vec::new());
    };
    let at = |name: &str| first.schema().index_of(name);
    let (key, seq, ns, ty) = (at("task_key")?, at("seq")?, at("created_ns")?, at("type")?);
    let numbers = task_numbers(input, key)?;
    let mut steps: Vec<Step> = Vec::new();
    // Per task, its first delegation acceptance.
    let mut delegated: Vec<Option<(At, u8)>> = Vec::new();
    for (j, (b, numbers)) in input.iter().zip(&numbers).enumerate() {
        let codes = per_type(b.column(ty), code)?;
        let seq = b.column(seq).as_primitive::<Int64Type>();
        let ns = b.column(ns).as_primitive::<Int64Type>();
        for (r, task) in numbers.iter().enumerate() {
            let (Some(task), code) = (*task, codes[r]) else {
                continue;
            };
            let at = At {
                ns: ns.value(r),
                seq: seq.value(r),
                batch: j as u32,
                row: r as u32,
            };
            match code {
                0 => {}
                1..=LIFECYCLE => steps.push(Step { task, at, code }),
                _ => {
                    if delegated.len() <= task as usize {
                        delegated.resize(task as usize + 1, None);
                    }
                    let first = &mut delegated[task as usize];
                    if first.is_none_or(|(d, _)| at < d) {
                        *first = Some((at, code));
                    }
                }
            }
        }
    }
    steps.sort_unstable();
    let mut out = Vec::new();
    for (i, step) in steps.iter().enumerate() {
        let prev = (i > 0 && steps[i - 1].task == step.task).then(|| steps[i - 1]);
        // A task's first lifecycle event after it was delegated counts as
        // following task.accepted, unless it is task.submitted.
        let delegation = match prev {
            None if step.code != SUBMITTED => delegated
                .get(step.task as usize)
                .copied()
                .flatten()
                .filter(|(d, _)| *d < step.at),
            _ => None,
        };
        let from = match (delegation, prev) {
            (Some(_), _) => ACCEPTED,
            (None, Some(p)) => p.code,
            (None, None) => NONE,
        };
        let is_legal = legal[from as usize][step.code as usize];
        let skipped_accept = prev.is_some_and(|p| p.code == SUBMITTED) && step.code == STARTED;
        if is_legal && !skipped_accept {
            continue;
        }
        out.push(Irregular {
            at: step.at,
            from: delegation.map(|(d, _)| d).or(prev.map(|p| p.at)),
            from_delegation: delegation.map(|(_, code)| code),
            from_type: name(from),
            prev_code: prev.map(|p| p.code),
            legal: is_legal,
            skipped_accept,
        });
    }
    Ok(out)
}

/// A value as the rules' `log_value` helper shows it in a message
/// (`rules::helpers`): past 80 characters, the first 40, the length and
/// the start of the value's BLAKE3.
fn log_value(s: &str) -> String {
    let length = s.chars().count();
    if length <= 80 {
        return s.to_string();
    }
    let head: String = s.chars().take(40).collect();
    let hash = blake3::hash(s.as_bytes()).to_hex();
    format!("{head}…[{length} characters, blake3 {}]", &hash[..16])
}
