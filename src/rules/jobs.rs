//! What running a view or rule takes, for an evaluation of the catalog
//! (`running`) and for readings planned once (`planned`): which views each
//! query reads, how many run at once, a task that stops when dropped, and
//! a result batch turned into finding rows.

use super::catalog::{self, Catalog};
use crate::finding_store::{FindingRow, Interner};
use datafusion::arrow::array::{Array, AsArray, ListArray, RecordBatch, StringArray};
use datafusion::arrow::datatypes::{DataType, Int64Type};
use datafusion::error::DataFusionError;
use datafusion::prelude::SessionContext;
use std::sync::Arc;

/// One unit of work: a view to register or a rule to run.
#[derive(Clone, Copy)]
pub(super) enum Job {
    View(usize),
    Rule(usize),
}

/// A spawned query that stops when its run is dropped (e.g. a cluster audit
/// given up at its --timeout), instead of running on in the background.
pub(super) struct AbortOnDrop<T>(pub(super) tokio::task::JoinHandle<T>);

impl<T> Drop for AbortOnDrop<T> {
    fn drop(&mut self) {
        self.0.abort();
    }
}

/// What a spawned query gave: its result, an error if its task died, or,
/// past `limit` (`--rule-timeout`), an error that says so. The limit is
/// kept here, outside the query's task, so that it holds however the
/// query runs (one that never yields included); the task is stopped when
/// its handle is dropped.
pub(super) async fn outcome<T>(
    limit: Option<std::time::Duration>,
    handle: &mut AbortOnDrop<datafusion::error::Result<T>>,
) -> datafusion::error::Result<T> {
    let joined = match limit {
        None => (&mut handle.0).await,
        Some(limit) => match tokio::time::timeout(limit, &mut handle.0).await {
            Ok(joined) => joined,
            Err(_) => {
                return Err(DataFusionError::Execution(format!(
                    "stopped after {} (--rule-timeout): the query did not finish (a query that \
                     does not end, or a log too large for that time); fix the query, or raise \
                     --rule-timeout",
                    crate::cluster::humanize(&limit)
                )));
            }
        },
    };
    joined.unwrap_or_else(|e| {
        Err(DataFusionError::Execution(format!(
            "the query stopped: {e}"
        )))
    })
}

/// Which views each view and rule reads (by index into the catalog's
/// views), from the table names in its SQL. A query that does not parse
/// depends on nothing; running it reports the parse error.
pub(super) struct Dependencies {
    pub(super) views: Vec<Vec<usize>>,
    pub(super) rules: Vec<Vec<usize>>,
}

impl Dependencies {
    pub(super) fn of(ctx: &SessionContext, catalog: &Catalog) -> Dependencies {
        let state = ctx.state();
        let dialect = state.config().options().sql_parser.dialect;
        let reads = |sql: &str, itself: Option<usize>| -> Vec<usize> {
            let Ok(statement) = state.sql_to_statement(sql, &dialect) else {
                return Vec::new();
            };
            let tables = state
                .resolve_table_references(&statement)
                .unwrap_or_default();
            catalog
                .views
                .iter()
                .enumerate()
                .filter(|&(i, v)| Some(i) != itself && tables.iter().any(|t| t.table() == v.name))
                .map(|(i, _)| i)
                .collect()
        };
        Dependencies {
            views: catalog
                .views
                .iter()
                .enumerate()
                .map(|(i, v)| reads(&v.sql, Some(i)))
                .collect(),
            rules: catalog.rules.iter().map(|r| reads(&r.sql, None)).collect(),
        }
    }

    pub(super) fn of_job(&self, job: Job) -> &[usize] {
        match job {
            Job::View(i) => &self.views[i],
            Job::Rule(i) => &self.rules[i],
        }
    }
}

/// How many views and rules run concurrently: one more than the cores, at
/// least 3 (each query runs on one core; on 2 cores 3 measured best, 2 and
/// 4 slower, benches/README.md), or `HVAUDIT_RULES_AT_ONCE` for measuring
/// others. Under a memory limit, one per core: each query also holds memory
/// the pool does not count (decoded Parquet pages, streamed batches), and
/// the 6 GB in-place audit under 2G peaked at 3.0-4.5 GB with 3 at once,
/// 2.35 GB with 2, in the same time.
pub(super) fn jobs_at_once(memory_limited: bool) -> usize {
    let given = std::env::var("HVAUDIT_RULES_AT_ONCE").ok().and_then(|v| {
        let n = v.parse().ok().filter(|n| *n > 0);
        if n.is_none() {
            eprintln!(
                "hvaudit: warning: HVAUDIT_RULES_AT_ONCE={v:?} is not a count above 0; \
                 the default is used"
            );
        }
        n
    });
    given.unwrap_or_else(|| {
        let cores = std::thread::available_parallelism().map_or(2, |n| n.get());
        if memory_limited {
            cores
        } else {
            (cores + 1).max(3)
        }
    })
}

/// Append the rows of one result batch to `rows`, checking the columns a
/// rule must return.
pub(super) fn add_rows(
    b: &RecordBatch,
    rule: &catalog::Rule,
    index: u32,
    strings: &mut Interner,
    rows: &mut Vec<FindingRow>,
) -> datafusion::error::Result<()> {
    let col = |name: &str| {
        b.column_by_name(name).cloned().ok_or_else(|| {
            DataFusionError::Plan(format!("the rule must return a column named {name}"))
        })
    };
    let message = col("message")?;
    let message = string_column(&message, "message")?;
    let task = col("task_id")?;
    let task = string_column(&task, "task_id")?;
    let seqs = col("seqs")?;
    let seqs: &ListArray = seqs.as_list_opt().ok_or_else(|| {
        DataFusionError::Plan("seqs must be a list of Int64 (use make_array or array_agg)".into())
    })?;
    // The seq values of every row, cast once for the whole batch.
    let offsets = seqs.value_offsets();
    let values = datafusion::arrow::compute::cast(seqs.values(), &DataType::Int64)?;
    let values = values.as_primitive::<Int64Type>();
    let severity = match b.column_by_name("severity") {
        Some(c) => Some(string_column(c, "severity")?),
        None => None,
    };
    for r in 0..b.num_rows() {
        let sev = match &severity {
            _ if rule.forced_severity.is_some() => rule.meta.severity,
            Some(s) if !s.is_null(r) => s.value(r).parse().map_err(DataFusionError::Plan)?,
            _ => rule.meta.severity,
        };
        let (from, to) = (offsets[r] as usize, offsets[r + 1] as usize);
        rows.push(FindingRow::new(
            index,
            sev,
            (!task.is_null(r)).then(|| strings.get(task.value(r))),
            if message.is_null(r) {
                Box::default()
            } else {
                message.value(r).into()
            },
            (from..to)
                .filter(|&i| !values.is_null(i))
                .map(|i| values.value(i))
                .collect(),
        ));
    }
    Ok(())
}

fn string_column(a: &Arc<dyn Array>, name: &str) -> datafusion::error::Result<StringArray> {
    let cast = datafusion::arrow::compute::cast(a, &DataType::Utf8)
        .map_err(|e| DataFusionError::Plan(format!("column {name} must be text: {e}")))?;
    Ok(cast.as_string::<i32>().clone())
}
