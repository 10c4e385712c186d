//! Running the rule queries and turning their rows into findings.

pub mod catalog;

use crate::finding::{Finding, Location, Severity, TimelineEntry};
use catalog::Catalog;
use chrono::{DateTime, Utc};
use datafusion::arrow::array::{Array, AsArray, ListArray, RecordBatch, StringArray};
use datafusion::arrow::datatypes::{DataType, Int64Type};
use datafusion::datasource::MemTable;
use datafusion::error::DataFusionError;
use datafusion::prelude::SessionContext;
use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

/// A rule row before its events are looked up.
#[derive(Debug, Clone)]
struct RawFinding {
    rule: usize,
    severity: Severity,
    task_id: Option<String>,
    message: String,
    seqs: Vec<i64>,
}

/// What the rules produced.
pub struct RuleRun {
    pub findings: Vec<Finding>,
    /// (rule or view file, error) for everything that failed.
    pub errors: Vec<(String, String)>,
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
        timing("view", &v.name, started);
    }
    errors
}

/// Run every rule of the catalog and assemble sorted findings.
pub async fn run(
    ctx: &SessionContext,
    catalog: &Catalog,
    progress: &indicatif::ProgressBar,
) -> RuleRun {
    use futures::StreamExt;
    let mut raw = Vec::new();
    let mut errors = Vec::new();
    // A few rules at once: each query has serial stretches (planning, the
    // final merge) that leave cores idle. `buffered` keeps catalog order,
    // so the output does not depend on which rule finishes first.
    let mut results = futures::stream::iter(catalog.rules.iter().enumerate())
        .map(|(i, rule)| async move {
            let started = std::time::Instant::now();
            let result = run_one(ctx, rule, i).await;
            timing("rule", &rule.meta.id, started);
            (rule, result)
        })
        .buffered(rules_at_once());
    while let Some((rule, result)) = results.next().await {
        progress.set_message(rule.meta.id.clone());
        match result {
            Ok(mut rows) => raw.append(&mut rows),
            Err(e) => errors.push((rule.meta.id.clone(), e.to_string())),
        }
        progress.inc(1);
    }
    progress.finish_and_clear();
    let started = std::time::Instant::now();
    let resolved = resolve(ctx, catalog, raw).await;
    timing("resolve", "(locating events)", started);
    match resolved {
        Ok(findings) => RuleRun { findings, errors },
        Err(e) => {
            errors.push(("(locating events)".into(), e.to_string()));
            RuleRun {
                findings: Vec::new(),
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

/// With `HVAUDIT_TIMING` set, how long each view and rule took, on stderr.
fn timing(kind: &str, name: &str, started: std::time::Instant) {
    if std::env::var_os("HVAUDIT_TIMING").is_some() {
        eprintln!(
            "timing {kind} {name} {:.3}s",
            started.elapsed().as_secs_f64()
        );
    }
}

async fn run_one(
    ctx: &SessionContext,
    rule: &catalog::Rule,
    index: usize,
) -> datafusion::error::Result<Vec<RawFinding>> {
    let batches = ctx.sql(&rule.sql).await?.collect().await?;
    let mut out = Vec::new();
    for b in &batches {
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
            DataFusionError::Plan(
                "seqs must be a list of Int64 (use make_array or array_agg)".into(),
            )
        })?;
        let severity = match b.column_by_name("severity") {
            Some(c) => Some(string_column(c, "severity")?),
            None => None,
        };
        for r in 0..b.num_rows() {
            let sev = match &severity {
                Some(s) if !s.is_null(r) => s.value(r).parse().map_err(DataFusionError::Plan)?,
                _ => rule.meta.severity,
            };
            let list = seqs.value(r);
            let list = datafusion::arrow::compute::cast(&list, &DataType::Int64)?;
            let list = list.as_primitive::<Int64Type>();
            out.push(RawFinding {
                rule: index,
                severity: sev,
                task_id: (!task.is_null(r)).then(|| task.value(r).to_string()),
                message: if message.is_null(r) {
                    String::new()
                } else {
                    message.value(r).to_string()
                },
                seqs: list.iter().flatten().collect(),
            });
        }
    }
    Ok(out)
}

fn string_column(a: &Arc<dyn Array>, name: &str) -> datafusion::error::Result<StringArray> {
    let cast = datafusion::arrow::compute::cast(a, &DataType::Utf8)
        .map_err(|e| DataFusionError::Plan(format!("column {name} must be text: {e}")))?;
    Ok(cast.as_string::<i32>().clone())
}

/// One event or bad line, as a finding shows it.
#[derive(Debug, Clone)]
struct Place {
    id: Option<String>,
    source: Option<String>,
    event_type: String,
    task_id: Option<String>,
    file: String,
    line: u64,
    at: Option<DateTime<Utc>>,
}

/// Look up the seqs of every raw finding, then build the findings.
async fn resolve(
    ctx: &SessionContext,
    catalog: &Catalog,
    raw: Vec<RawFinding>,
) -> datafusion::error::Result<Vec<Finding>> {
    let wanted: BTreeSet<i64> = raw.iter().flat_map(|f| f.seqs.iter().copied()).collect();
    let places = lookup(ctx, &wanted).await?;
    let mut findings: Vec<Finding> = raw
        .into_iter()
        .map(|f| {
            let meta = &catalog.rules[f.rule].meta;
            let found: Vec<&Place> = f.seqs.iter().filter_map(|s| places.get(s)).collect();
            let mut event_ids: Vec<String> = Vec::new();
            for p in &found {
                if let Some(id) = &p.id
                    && !event_ids.contains(id)
                {
                    event_ids.push(id.clone());
                }
            }
            let locations = found
                .iter()
                .map(|p| Location {
                    file: p.file.clone(),
                    line: p.line,
                    event_id: p.id.clone(),
                })
                .collect();
            let at = found.iter().filter_map(|p| p.at).min();
            let mut timeline: Vec<TimelineEntry> = found
                .iter()
                .filter_map(|p| {
                    Some(TimelineEntry {
                        at: p.at,
                        event_id: p.id.clone()?,
                        event_type: p.event_type.clone(),
                        task_id: p.task_id.clone(),
                        file: p.file.clone(),
                        line: p.line,
                    })
                })
                .collect();
            timeline.sort_by(|a, b| (a.at, &a.file, a.line).cmp(&(b.at, &b.file, b.line)));
            timeline.dedup();
            let fingerprint = fingerprint(
                &meta.id,
                f.task_id.as_deref(),
                &event_ids,
                &f.message,
                &found,
            );
            Finding {
                rule: meta.id.clone(),
                severity: f.severity,
                family: meta.family.clone(),
                message: f.message,
                task_id: f.task_id,
                agent: found.first().and_then(|p| p.source.clone()),
                event_ids,
                locations,
                at,
                fingerprint,
                timeline,
            }
        })
        .collect();
    findings.sort_by(|a, b| a.sort_key().cmp(&b.sort_key()));
    Ok(findings)
}

/// Stable across runs: the rule, the task, the events (by id) and the
/// message, never seq numbers. One rule may report several checks on the same
/// events (one message each), so the message is part of it. When one id
/// stands for several versions (conflicting duplicates) or for rejected lines,
/// their file:line places tell the findings apart.
fn fingerprint(
    rule: &str,
    task: Option<&str>,
    ids: &[String],
    message: &str,
    places: &[&Place],
) -> String {
    let mut key = format!("{rule}\u{0}{}\u{0}{message}", task.unwrap_or(""));
    let mut sorted = ids.to_vec();
    sorted.sort();
    for id in &sorted {
        key.push('\u{0}');
        key.push_str(id);
    }
    if places.len() > ids.len() {
        let mut at: Vec<String> = places
            .iter()
            .map(|p| format!("{}:{}", p.file, p.line))
            .collect();
        at.sort();
        for a in at {
            key.push('\u{0}');
            key.push_str(&a);
        }
    }
    format!("{:032x}", xxhash_rust::xxh3::xxh3_128(key.as_bytes()))
}

/// Fetch id, type, task, file, line and instant for the given seqs from
/// `events` and `bad_lines`, a bounded IN list at a time.
async fn lookup(
    ctx: &SessionContext,
    seqs: &BTreeSet<i64>,
) -> datafusion::error::Result<BTreeMap<i64, Place>> {
    let mut out = BTreeMap::new();
    let all: Vec<i64> = seqs.iter().copied().collect();
    for part in all.chunks(4096) {
        let list = part
            .iter()
            .map(i64::to_string)
            .collect::<Vec<_>>()
            .join(",");
        let sql = format!(
            "SELECT seq, id, type, task_id, src_file, src_line, created_us, source FROM events WHERE seq IN ({list}) \
             UNION ALL SELECT seq, id, type, CAST(NULL AS VARCHAR), src_file, src_line, CAST(NULL AS BIGINT), \
             CAST(NULL AS VARCHAR) FROM bad_lines WHERE seq IN ({list})"
        );
        for b in ctx.sql(&sql).await?.collect().await? {
            add_places(&b, &mut out)?;
        }
    }
    Ok(out)
}

fn add_places(b: &RecordBatch, out: &mut BTreeMap<i64, Place>) -> datafusion::error::Result<()> {
    // The engine may hand text back as Utf8View; cast to the plain types.
    let i64s = |n: usize| -> datafusion::error::Result<_> {
        Ok(
            datafusion::arrow::compute::cast(b.column(n), &DataType::Int64)?
                .as_primitive::<Int64Type>()
                .clone(),
        )
    };
    let strs = |n: usize| -> datafusion::error::Result<_> {
        Ok(
            datafusion::arrow::compute::cast(b.column(n), &DataType::Utf8)?
                .as_string::<i32>()
                .clone(),
        )
    };
    let source = strs(7)?;
    let (seq, id, ty, task, file, line, us) = (
        i64s(0)?,
        strs(1)?,
        strs(2)?,
        strs(3)?,
        strs(4)?,
        i64s(5)?,
        i64s(6)?,
    );
    let opt = |a: &StringArray, r: usize| (!a.is_null(r)).then(|| a.value(r).to_string());
    for r in 0..b.num_rows() {
        // A conflicting version shares the seq space; the first row wins.
        out.entry(seq.value(r)).or_insert_with(|| Place {
            id: opt(&id, r),
            source: opt(&source, r),
            event_type: opt(&ty, r).unwrap_or_default(),
            task_id: opt(&task, r),
            file: file.value(r).to_string(),
            line: line.value(r).max(0) as u64,
            at: (!us.is_null(r))
                .then(|| DateTime::from_timestamp_micros(us.value(r)))
                .flatten(),
        });
    }
    Ok(())
}
