//! The `tasks` view (queries/views/10_tasks.sql) computed in one pass over
//! `ev`, for an audit that keeps its views in memory.
//!
//! The SQL form is the reference: what users read, and what an in-place or
//! cluster audit runs. It finds each task's first events by the minimum of
//! a 39-digit decimal per group, and that aggregate was the longest view of
//! a loaded audit (1.4 s of 9 on a 1 GB log), on the path every lifecycle,
//! orphan and parent rule waits on. Here the same firsts are kept per task
//! as (created_ns, seq) pairs while the rows stream by, and the columns of
//! the chosen rows are gathered once. tests/tasks_view.rs holds the two
//! forms to the same rows on generated logs; every fixture's audit runs
//! through this one.

use datafusion::arrow::array::{
    Array, ArrayRef, AsArray, RecordBatch, StringArray, new_null_array,
};
use datafusion::arrow::compute::{cast, interleave};
use datafusion::arrow::datatypes::{DataType, Int64Type, SchemaRef, UInt32Type};
use datafusion::arrow::row::{RowConverter, SortField};
use datafusion::error::{DataFusionError, Result};
use datafusion::prelude::SessionContext;
use std::sync::Arc;

/// The columns of `ev` the view reads. Rows without a task are skipped
/// here, not filtered by the engine: a filter would copy the text of every
/// row, where a projection shares the table's buffers.
const INPUT: &str = "SELECT task_key, task_id, parent_key, parent_task_id, session_id, dialect, \
     seq, created_ns, created_at, type, id, causation_id FROM ev";

/// A task's first event of each kind, in the view's order of kinds.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub(super) enum Kind {
    /// The first event with a parent link.
    Parent,
    /// The first event with a session.
    Session,
    /// The first event of any type.
    First,
    /// The first `task.*` event other than `task.cancel.requested`.
    State,
    /// The first `delegation.accepted` or `delegation.handoff.completed`.
    Deleg,
    /// The first terminal event.
    Term,
}

/// Where an output column comes from.
enum Source {
    /// A column of the task's first event of a kind.
    Of(Kind, &'static str),
    /// Of the state or the delegation event, whichever made it active.
    Active(&'static str),
    /// `coalesce(settings.spec_override, log_dialect)`.
    Dialect,
}

/// The rows of the `tasks` view over `ctx`'s `ev` and `settings`, laid out
/// as `schema` (the view's planned schema).
pub async fn tasks(ctx: &SessionContext, schema: &SchemaRef) -> Result<Vec<RecordBatch>> {
    let sources = schema
        .fields()
        .iter()
        .map(|f| source(f.name()))
        .collect::<Result<Vec<_>>>()?;
    let input = ctx.sql(INPUT).await?.collect().await?;
    let spec = spec_override(ctx).await?;
    let firsts = Firsts::of(&input)?;
    let tasks = firsts.per_task.len();
    let mut columns = Vec::with_capacity(sources.len());
    for source in &sources {
        let column = match (source, &spec) {
            (Source::Dialect, Some(spec)) => {
                Arc::new(StringArray::from(vec![spec.as_str(); tasks])) as ArrayRef
            }
            (Source::Dialect, None) => firsts.gather(&input, Kind::First, "dialect")?,
            (Source::Of(kind, name), _) => firsts.gather(&input, *kind, name)?,
            (Source::Active(name), _) => firsts.gather_active(&input, name)?,
        };
        columns.push(column);
    }
    laid_out(schema, columns)
}

/// Where the view's column `name` comes from.
fn source(name: &str) -> Result<Source> {
    let event_column = |suffix: &str| -> Option<&'static str> {
        Some(match suffix {
            "seq" => "seq",
            "ns" => "created_ns",
            "at" => "created_at",
            "type" => "type",
            "id" => "id",
            "causation_id" => "causation_id",
            _ => return None,
        })
    };
    let of = |kind: Kind, suffix: &str| event_column(suffix).map(|c| Source::Of(kind, c));
    let found = match name {
        "dialect" => Some(Source::Dialect),
        "log_dialect" => Some(Source::Of(Kind::First, "dialect")),
        "task_key" => Some(Source::Of(Kind::First, "task_key")),
        "task_id" => Some(Source::Of(Kind::First, "task_id")),
        "parent_key" => Some(Source::Of(Kind::Parent, "parent_key")),
        "parent_task_id" => Some(Source::Of(Kind::Parent, "parent_task_id")),
        "session_id" => Some(Source::Of(Kind::Session, "session_id")),
        _ => match name.split_once('_') {
            Some(("first", s)) => of(Kind::First, s),
            Some(("state", s)) => of(Kind::State, s),
            Some(("deleg", s)) => of(Kind::Deleg, s),
            Some(("term", s)) => of(Kind::Term, s),
            Some(("active", s)) => event_column(s).map(Source::Active),
            _ => None,
        },
    };
    found.ok_or_else(|| DataFusionError::Plan(format!("tasks: no native form of column {name}")))
}

/// `settings.spec_override`: the dialect `--spec` sets for every task.
async fn spec_override(ctx: &SessionContext) -> Result<Option<String>> {
    let rows = ctx
        .sql("SELECT spec_override FROM settings")
        .await?
        .collect()
        .await?;
    let Some(row) = rows.iter().find(|b| b.num_rows() > 0) else {
        return Ok(None);
    };
    let spec = cast(row.column(0), &DataType::Utf8)?;
    let spec = spec.as_string::<i32>();
    Ok((!spec.is_null(0)).then(|| spec.value(0).to_string()))
}

/// An event of the input: its order, and where it is.
#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Debug)]
pub(super) struct At {
    pub ns: i64,
    pub seq: i64,
    pub batch: u32,
    pub row: u32,
}

/// Per task (in the order of their numbers, `task_numbers`), its first
/// event of each kind.
struct Firsts {
    per_task: Vec<[Option<At>; 6]>,
}

impl Firsts {
    fn of(input: &[RecordBatch]) -> Result<Firsts> {
        let Some(first) = input.first() else {
            return Ok(Firsts {
                per_task: Vec::new(),
            });
        };
        let at = |name: &str| first.schema().index_of(name);
        let (key, parent, session, seq, ns, ty) = (
            at("task_key")?,
            at("parent_task_id")?,
            at("session_id")?,
            at("seq")?,
            at("created_ns")?,
            at("type")?,
        );
        let numbers = task_numbers(input, key)?;
        let mut per_task: Vec<[Option<At>; 6]> = Vec::new();
        for (j, (b, numbers)) in input.iter().zip(&numbers).enumerate() {
            let kinds = type_kinds(b.column(ty))?;
            let (parent, session) = (b.column(parent), b.column(session));
            let seq = b.column(seq).as_primitive::<Int64Type>();
            let ns = b.column(ns).as_primitive::<Int64Type>();
            for (r, t) in numbers.iter().enumerate() {
                let Some(t) = *t else { continue };
                if per_task.len() <= t as usize {
                    per_task.resize(t as usize + 1, [None; 6]);
                }
                let here = At {
                    ns: ns.value(r),
                    seq: seq.value(r),
                    batch: j as u32,
                    row: r as u32,
                };
                let mask = kinds[r]
                    | bit(Kind::First)
                    | if parent.is_valid(r) {
                        bit(Kind::Parent)
                    } else {
                        0
                    }
                    | if session.is_valid(r) {
                        bit(Kind::Session)
                    } else {
                        0
                    };
                for (k, slot) in per_task[t as usize].iter_mut().enumerate() {
                    if mask & (1 << k) != 0 && slot.is_none_or(|s| here < s) {
                        *slot = Some(here);
                    }
                }
            }
        }
        // Numbers no row of `ev` holds (the audit's keys number ids of
        // later versions too) are no task.
        per_task.retain(|firsts| firsts[Kind::First as usize].is_some());
        Ok(Firsts { per_task })
    }

    /// Column `name` of each task's first event of `kind` (null without one).
    fn gather(&self, input: &[RecordBatch], kind: Kind, name: &str) -> Result<ArrayRef> {
        self.gather_by(input, name, |firsts| firsts[kind as usize])
    }

    /// Column `name` of the event that made each task active: its state
    /// event unless a delegation acceptance came first (docs/protocol.md).
    fn gather_active(&self, input: &[RecordBatch], name: &str) -> Result<ArrayRef> {
        self.gather_by(input, name, |firsts| {
            let (state, deleg) = (firsts[Kind::State as usize], firsts[Kind::Deleg as usize]);
            let state_first = match (state, deleg) {
                (_, None) => true,
                (None, Some(_)) => false,
                (Some(s), Some(d)) => (s.ns, s.seq) < (d.ns, d.seq),
            };
            if state_first { state } else { deleg }
        })
    }

    fn gather_by(
        &self,
        input: &[RecordBatch],
        name: &str,
        pick: impl Fn(&[Option<At>; 6]) -> Option<At>,
    ) -> Result<ArrayRef> {
        gather(input, name, self.per_task.iter().map(pick))
    }
}

/// Column `name` of the rows `picks` (null for none) of `input`.
pub(super) fn gather(
    input: &[RecordBatch],
    name: &str,
    picks: impl Iterator<Item = Option<At>>,
) -> Result<ArrayRef> {
    let columns = input
        .iter()
        .map(|b| b.column_by_name(name).cloned())
        .collect::<Option<Vec<_>>>()
        .ok_or_else(|| DataFusionError::Plan(format!("ev has no column {name}")))?;
    let data_type = columns
        .first()
        .map_or(DataType::Null, |c| c.data_type().clone());
    let null = new_null_array(&data_type, 1);
    let mut arrays: Vec<&dyn Array> = columns.iter().map(|c| c.as_ref()).collect();
    arrays.push(null.as_ref());
    let none = (columns.len(), 0);
    let indices: Vec<(usize, usize)> = picks
        .map(|at| at.map_or(none, |at| (at.batch as usize, at.row as usize)))
        .collect();
    Ok(interleave(&arrays, &indices)?)
}

/// `columns` cast to `schema`, in batches of the engine's usual size, so
/// that the readers spread them over their partitions.
pub(super) fn laid_out(schema: &SchemaRef, columns: Vec<ArrayRef>) -> Result<Vec<RecordBatch>> {
    let columns = (schema.fields().iter().zip(columns))
        .map(|(field, column)| cast(&column, field.data_type()))
        .collect::<std::result::Result<Vec<_>, _>>()?;
    let all = RecordBatch::try_new(schema.clone(), columns)?;
    const ROWS: usize = 8192;
    Ok((0..all.num_rows())
        .step_by(ROWS)
        .map(|at| all.slice(at, ROWS.min(all.num_rows() - at)))
        .collect())
}

/// Per row of each batch, its task's number (none without a task): the
/// audit's integer keys as they are (`ev_table` numbers the ids from 0),
/// other keys numbered as they first appear. Tasks come out in the order
/// of their numbers.
pub(super) fn task_numbers(input: &[RecordBatch], key: usize) -> Result<Vec<Vec<Option<u32>>>> {
    let key_type = input.first().map(|b| b.column(key).data_type().clone());
    // Dense as `ev_table` numbers them, at most two ids a row (a `ev` of
    // the user's own may number them otherwise: then they are hashed).
    let rows: usize = input.iter().map(RecordBatch::num_rows).sum();
    let dense = key_type == Some(DataType::UInt32)
        && input.iter().all(|b| {
            let keys = b.column(key).as_primitive::<UInt32Type>();
            datafusion::arrow::compute::max(keys).is_none_or(|m| (m as usize) < 2 * rows)
        });
    if dense {
        return Ok(input
            .iter()
            .map(|b| {
                let keys = b.column(key).as_primitive::<UInt32Type>();
                keys.iter().collect()
            })
            .collect());
    }
    let converter = RowConverter::new(vec![SortField::new(key_type.unwrap_or(DataType::Null))])?;
    let mut index: foldhash::HashMap<_, u32> = foldhash::HashMap::default();
    let rows = input
        .iter()
        .map(|b| converter.convert_columns(&[b.column(key).clone()]))
        .collect::<std::result::Result<Vec<_>, _>>()?;
    let mut numbers = Vec::with_capacity(input.len());
    for (b, rows) in input.iter().zip(&rows) {
        let keys = b.column(key);
        numbers.push(
            (0..b.num_rows())
                .map(|r| {
                    let next = index.len() as u32;
                    (!keys.is_null(r)).then(|| *index.entry(rows.row(r)).or_insert(next))
                })
                .collect(),
        );
    }
    Ok(numbers)
}

pub(super) fn bit(kind: Kind) -> u8 {
    1 << kind as u8
}

/// Per row, the kinds its event type makes it (state, delegation, terminal).
fn type_kinds(types: &ArrayRef) -> Result<Vec<u8>> {
    per_type(types, |t| match t {
        "task.cancel.requested" => 0,
        "task.completed" | "task.failed" | "task.cancelled" | "task.timed_out" => {
            bit(Kind::State) | bit(Kind::Term)
        }
        "delegation.accepted" | "delegation.handoff.completed" => bit(Kind::Deleg),
        t if t.starts_with("task.") => bit(Kind::State),
        _ => 0,
    })
}

/// Per row, `of` its event type (0 for a null type). A dictionary's names
/// are judged once each.
pub(super) fn per_type(types: &ArrayRef, of: impl Fn(&str) -> u8) -> Result<Vec<u8>> {
    if let Some(dict) = types.as_any_dictionary_opt() {
        let names = cast(dict.values(), &DataType::Utf8)?;
        let names = names.as_string::<i32>();
        let per_name: Vec<u8> = (0..names.len())
            .map(|i| {
                if names.is_null(i) {
                    0
                } else {
                    of(names.value(i))
                }
            })
            .collect();
        let keys = cast(dict.keys(), &DataType::UInt64)?;
        let keys = keys.as_primitive::<datafusion::arrow::datatypes::UInt64Type>();
        return Ok((0..keys.len())
            .map(|r| match types.is_valid(r) {
                true => per_name[keys.value(r) as usize],
                false => 0,
            })
            .collect());
    }
    let names = cast(types, &DataType::Utf8)?;
    let names = names.as_string::<i32>();
    Ok((0..names.len())
        .map(|r| {
            if names.is_null(r) {
                0
            } else {
                of(names.value(r))
            }
        })
        .collect())
}
