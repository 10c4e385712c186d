//! Running the rule queries and turning their rows into findings.

pub mod catalog;

use crate::findings::{Compact, Findings, Interner, Place, Places, Row, RuleLabel};
use catalog::Catalog;
use chrono::{DateTime, Utc};
use datafusion::arrow::array::{Array, AsArray, BooleanArray, ListArray, RecordBatch, StringArray};
use datafusion::arrow::datatypes::{DataType, Int64Type};
use datafusion::datasource::MemTable;
use datafusion::error::DataFusionError;
use datafusion::prelude::SessionContext;
use std::sync::{Arc, Mutex};

/// What the rules produced.
pub struct RuleRun {
    pub findings: Findings,
    /// (rule or view file, error) for everything that failed.
    pub errors: Vec<(String, String)>,
}

/// Report only findings whose first event lies in `[since, until]`.
#[derive(Debug, Clone, Copy, Default)]
pub struct Window {
    pub since: Option<DateTime<Utc>>,
    pub until: Option<DateTime<Utc>>,
}

/// Register the catalog's views; a view that fails is reported, not fatal
/// (the rules that use it fail and are reported by name too). With
/// `materialize` off (on a cluster, where a client-side table cannot be
/// shipped to executors) every view stays a plain view.
pub async fn register_views(
    ctx: &SessionContext,
    catalog: &Catalog,
    materialize: bool,
) -> Vec<(String, String)> {
    let mut errors = Vec::new();
    for v in &catalog.views {
        let started = std::time::Instant::now();
        let result = async {
            let df = ctx.sql(&v.sql).await?;
            if v.materialize && materialize {
                let planned = df.schema().inner().clone();
                let batches = df.collect().await?;
                // The batches may be stricter about nulls than the plan
                // (e.g. a window over a non-null column); keep theirs.
                let schema = batches.first().map_or(planned, |b| b.schema());
                ctx.register_table(&v.name, Arc::new(MemTable::try_new(schema, vec![batches])?))?;
            } else {
                ctx.register_table(&v.name, df.into_view())?;
            }
            Ok::<_, DataFusionError>(())
        };
        if let Err(e) = result.await {
            errors.push((v.file.clone(), e.to_string()));
        }
        crate::progress::timing("view", &v.name, started);
    }
    errors
}

/// Run every rule of the catalog and assemble sorted findings.
pub async fn run(
    ctx: &SessionContext,
    catalog: &Catalog,
    progress: &indicatif::ProgressBar,
    window: Window,
) -> RuleRun {
    use futures::StreamExt;
    let mut rows = Vec::new();
    let mut errors = Vec::new();
    // One copy of each task id, shared with the places looked up later.
    let strings = Mutex::new(Interner::default());
    // A few rules at once: each query has serial stretches (planning, the
    // final merge) that leave cores idle. `buffered` keeps catalog order,
    // so the output does not depend on which rule finishes first.
    let mut results = futures::stream::iter(catalog.rules.iter().enumerate())
        .map(|(i, rule)| {
            let strings = &strings;
            async move {
                let started = std::time::Instant::now();
                let result = run_one(ctx, rule, i as u32, strings).await;
                crate::progress::timing("rule", &rule.meta.id, started);
                (rule, result)
            }
        })
        .buffered(rules_at_once());
    while let Some((rule, result)) = results.next().await {
        progress.set_message(rule.meta.id.clone());
        match result {
            // The first rule with rows hands its vector over (no copy).
            Ok(added) if rows.is_empty() => rows = added,
            Ok(mut added) => rows.append(&mut added),
            Err(e) => errors.push((rule.meta.id.clone(), e.to_string())),
        }
        progress.inc(1);
    }
    drop(results);
    let strings = strings.into_inner().unwrap_or_else(|e| e.into_inner());
    progress.finish_and_clear();
    let started = std::time::Instant::now();
    let resolved = resolve(ctx, catalog, rows, strings, window).await;
    crate::progress::timing("resolve", "(locating events)", started);
    match resolved {
        Ok(findings) => RuleRun {
            findings: findings.into(),
            errors,
        },
        Err(e) => {
            errors.push(("(locating events)".into(), e.to_string()));
            RuleRun {
                findings: Findings::default(),
                errors,
            }
        }
    }
}

/// How many rule queries run concurrently: 3 (measured in benches/README.md),
/// or `HVAUDIT_RULES_AT_ONCE` for measuring others.
fn rules_at_once() -> usize {
    std::env::var("HVAUDIT_RULES_AT_ONCE")
        .ok()
        .and_then(|v| v.parse().ok())
        .filter(|n| *n > 0)
        .unwrap_or(3)
}

/// One rule's rows, turned into compact rows batch by batch as the query
/// streams them (a rule with a million findings is never held as batches).
async fn run_one(
    ctx: &SessionContext,
    rule: &catalog::Rule,
    index: u32,
    strings: &Mutex<Interner>,
) -> datafusion::error::Result<Vec<Row>> {
    use futures::StreamExt;
    let mut batches = ctx.sql(&rule.sql).await?.execute_stream().await?;
    let mut rows = Vec::new();
    while let Some(b) = batches.next().await {
        let mut strings = strings.lock().unwrap_or_else(|e| e.into_inner());
        add_rows(&b?, rule, index, &mut strings, &mut rows)?;
    }
    Ok(rows)
}

/// Append the rows of one result batch to `rows`, checking the columns a
/// rule must return.
fn add_rows(
    b: &RecordBatch,
    rule: &catalog::Rule,
    index: u32,
    strings: &mut Interner,
    rows: &mut Vec<Row>,
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
            Some(s) if !s.is_null(r) => s.value(r).parse().map_err(DataFusionError::Plan)?,
            _ => rule.meta.severity,
        };
        let (from, to) = (offsets[r] as usize, offsets[r + 1] as usize);
        rows.push(Row::new(
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

/// Look up the events every row cites, then resolve, filter and sort the
/// rows into findings.
async fn resolve(
    ctx: &SessionContext,
    catalog: &Catalog,
    rows: Vec<Row>,
    mut strings: Interner,
    window: Window,
) -> datafusion::error::Result<Compact> {
    let mut wanted: Vec<i64> = rows.iter().flat_map(|r| r.seqs.iter().copied()).collect();
    wanted.sort_unstable();
    wanted.dedup();
    let mut places = Places::new(wanted);
    lookup(ctx, &mut places, &mut strings).await?;
    let labels = catalog
        .rules
        .iter()
        .map(|r| RuleLabel {
            id: strings.get(&r.meta.id),
            family: strings.get(&r.meta.family),
        })
        .collect();
    Ok(Compact::new(
        labels,
        rows,
        places,
        window.since,
        window.until,
    ))
}

/// Up to this many seqs are fetched with one `IN` list (which prunes Parquet
/// row groups and stays small on a cluster); more are picked out of one scan.
const IN_LIST_SEQS: usize = 4096;

/// Fetch id, type, task, file, line and instant for the wanted seqs from
/// `events` and `bad_lines`.
async fn lookup(
    ctx: &SessionContext,
    places: &mut Places,
    strings: &mut Interner,
) -> datafusion::error::Result<()> {
    use futures::StreamExt;
    let wanted = places.wanted();
    if wanted.is_empty() {
        return Ok(());
    }
    let filter = if wanted.len() <= IN_LIST_SEQS {
        let list = wanted
            .iter()
            .map(i64::to_string)
            .collect::<Vec<_>>()
            .join(",");
        format!("WHERE seq IN ({list})")
    } else {
        format!(
            "WHERE seq BETWEEN {} AND {}",
            wanted[0],
            wanted[wanted.len() - 1]
        )
    };
    let sql = format!(
        "SELECT seq, id, type, task_id, src_file, src_line, created_us, source FROM events {filter} \
         UNION ALL SELECT seq, id, type, CAST(NULL AS VARCHAR), src_file, src_line, CAST(NULL AS BIGINT), \
         CAST(NULL AS VARCHAR) FROM bad_lines {filter}"
    );
    let mut batches = ctx.sql(&sql).await?.execute_stream().await?;
    while let Some(b) = batches.next().await {
        add_places(&b?, places, strings)?;
    }
    Ok(())
}

/// The text at row `r`, if any.
fn text(a: &StringArray, r: usize) -> Option<&str> {
    (!a.is_null(r)).then(|| a.value(r))
}

/// Keep the rows of `b` whose seq is wanted as places.
fn add_places(
    b: &RecordBatch,
    places: &mut Places,
    strings: &mut Interner,
) -> datafusion::error::Result<()> {
    let wanted = places.wanted();
    use datafusion::arrow::compute::{cast, filter_record_batch};
    let seq = cast(b.column(0), &DataType::Int64)?;
    let keep: BooleanArray = seq
        .as_primitive::<Int64Type>()
        .iter()
        .map(|s| Some(s.is_some_and(|s| wanted.binary_search(&s).is_ok())))
        .collect();
    let b = filter_record_batch(b, &keep)?;
    // The engine may hand text back as Utf8View; cast to the plain types.
    let i64s = |n: usize| -> datafusion::error::Result<_> {
        Ok(cast(b.column(n), &DataType::Int64)?
            .as_primitive::<Int64Type>()
            .clone())
    };
    let strs = |n: usize| -> datafusion::error::Result<_> {
        Ok(cast(b.column(n), &DataType::Utf8)?
            .as_string::<i32>()
            .clone())
    };
    let (seq, id, ty, task, file, line, us, source) = (
        i64s(0)?,
        strs(1)?,
        strs(2)?,
        strs(3)?,
        strs(4)?,
        i64s(5)?,
        i64s(6)?,
        strs(7)?,
    );
    for r in 0..b.num_rows() {
        places.offer(seq.value(r), || Place {
            id: text(&id, r).map(Box::from),
            source: text(&source, r).map(|s| strings.get(s)),
            event_type: strings.get(text(&ty, r).unwrap_or_default()),
            task_id: text(&task, r).map(|s| strings.get(s)),
            file: strings.get(file.value(r)),
            line: line.value(r).max(0) as u64,
            at: (!us.is_null(r))
                .then(|| DateTime::from_timestamp_micros(us.value(r)))
                .flatten(),
        });
    }
    Ok(())
}
