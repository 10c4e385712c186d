//! What the versions of each conflicting id differ in, and which rules can
//! read it: the readings of later versions split by it.
//!
//! A reading puts version k of each conflicting id where version 1 was.
//! To a rule that reads none of the columns in which the two versions
//! differ, that is only a new `seq` for the same row: its findings are
//! those of the reading without that swap, citing the chosen version's
//! seq. That holds when the new seq keeps the row's place in the order
//! every built-in query sorts and compares events by, (created_ns, seq):
//! where another event of the same instant lies between the two seqs, the
//! pair counts as differing in `created_ns` too. (The built-in queries
//! compare seqs only in that order or for equality; user queries never
//! take this path.)
//!
//! So when most conflicting ids differ in the same few columns (a payload
//! member more, say), the rules that read none of them are read with the
//! other ids' swaps alone, over those ids' neighbourhood, their rows'
//! seqs then moved to the versions chosen; and the few rules that read
//! those columns are read with every swap, as before.

use super::catalog::Catalog;
use super::readings::Conflicts;
use crate::finding_store::FindingRow;
use datafusion::arrow::array::{AsArray, RecordBatch, make_comparator};
use datafusion::arrow::compute::SortOptions;
use datafusion::arrow::datatypes::{DataType, Int64Type};
use datafusion::common::tree_node::TreeNodeRecursion;
use datafusion::datasource::MemTable;
use datafusion::error::Result;
use datafusion::logical_expr::LogicalPlan;
use datafusion::prelude::SessionContext;
use std::collections::{BTreeSet, HashMap};
use std::sync::Arc;

/// The columns of `events` a query reads through `ev` or `evidence`, or
/// None when it may read any (it reads `events`' version numbers, or
/// could not be planned).
pub(super) type Read = Option<BTreeSet<String>>;

/// What a rule reads: its columns, and whether it reads each event by
/// itself (one scan of `ev`, filtered and projected, nothing joined,
/// grouped or windowed): then a reading can change its rows only for the
/// events it swaps.
#[derive(Debug, Clone, Default)]
pub(super) struct RuleReads {
    pub columns: Read,
    pub row_by_row: bool,
}

/// Per rule of `catalog` (all shipped), the columns it reads, its views'
/// included: each rule planned and optimized over empty tables in `empty`
/// (a session with the log's tables registered, no rows), so that the
/// scans of its optimized plan name every column its result depends on.
pub(super) async fn columns_read(empty: &SessionContext, catalog: &Catalog) -> Vec<RuleReads> {
    let unknown = || vec![RuleReads::default(); catalog.rules.len()];
    let mut views = catalog.clone();
    views.restore_embedded_view("log_end");
    // `ev` is a table here, not its view: its scans are what a reading
    // swaps rows of.
    let schema = super::ev_table::keyed(&crate::ingest::schema::EVENTS);
    let ev = MemTable::try_new(schema, vec![Vec::new()]);
    let registered = ev.and_then(|ev| empty.register_table("ev", Arc::new(ev)));
    if registered.is_err() {
        return unknown();
    }
    for v in views.views.iter().filter(|v| v.name != "ev") {
        let view = crate::read_only::plan(empty, &v.sql).await;
        let registered = view.and_then(|df| empty.register_table(&v.name, df.into_view()));
        if registered.is_err() {
            return unknown();
        }
    }
    let planning: Vec<_> = (catalog.rules.iter())
        .map(|rule| {
            let (ctx, sql) = (empty.clone(), rule.sql.clone());
            super::jobs::AbortOnDrop(tokio::spawn(async move {
                let (state, plan) = crate::read_only::plan(&ctx, &sql).await?.into_parts();
                let plan = state.optimize(&plan)?;
                Ok::<_, datafusion::error::DataFusionError>(RuleReads {
                    columns: scanned(&plan),
                    row_by_row: row_by_row(&plan),
                })
            }))
        })
        .collect();
    let mut read = Vec::with_capacity(planning.len());
    for mut handle in planning {
        read.push(match (&mut handle.0).await {
            Ok(Ok(reads)) => reads,
            _ => RuleReads::default(),
        });
    }
    read
}

/// The columns the scans of `plan` (its subqueries too) read, as
/// [`Read`] says.
fn scanned(plan: &LogicalPlan) -> Read {
    let mut columns = BTreeSet::new();
    let mut any = false;
    let _ = plan.apply_with_subqueries(|node| {
        let LogicalPlan::TableScan(scan) = node else {
            return Ok(TreeNodeRecursion::Continue);
        };
        let mut names: BTreeSet<String> = (scan.projected_schema.fields().iter())
            .map(|f| f.name().clone())
            .collect();
        for filter in &scan.filters {
            names.extend(filter.column_refs().into_iter().map(|c| c.name.clone()));
        }
        match scan.table_name.table() {
            "ev" => columns.extend(names.into_iter().map(|name| match name.as_str() {
                "task_key" => "task_id".to_string(),
                "parent_key" => "parent_task_id".to_string(),
                _ => name,
            })),
            // Every version is in `events` in every reading; only their
            // numbers change.
            "events" => any |= names.contains("version"),
            // An event's entries are its `evidence_chain`, under its seq.
            "evidence" => {
                columns.insert("evidence_chain".to_string());
            }
            // `bad_lines` and the settings: the same in every reading.
            _ => {}
        }
        Ok(TreeNodeRecursion::Continue)
    });
    (!any).then_some(columns)
}

/// Whether `plan` reads each row of `ev` by itself: one scan, of `ev`,
/// under nothing but filters, projections, aliases and a sort.
fn row_by_row(plan: &LogicalPlan) -> bool {
    let mut scans = 0;
    let mut other = false;
    let _ = plan.apply_with_subqueries(|node| {
        match node {
            LogicalPlan::TableScan(scan) => {
                scans += 1;
                other |= scan.table_name.table() != "ev" || scan.fetch.is_some();
            }
            LogicalPlan::Sort(sort) => other |= sort.fetch.is_some(),
            LogicalPlan::Projection(_) | LogicalPlan::Filter(_) | LogicalPlan::SubqueryAlias(_) => {
            }
            _ => other = true,
        }
        Ok(TreeNodeRecursion::Continue)
    });
    scans == 1 && !other
}

/// Per conflicting id (in the order of [`Conflicts::versions`]), the
/// columns of `events` in which one of its first 16 versions differs from
/// the first, besides `seq` and `version`; `created_ns` too where the
/// version's seq would pass another event of the same instant. And those
/// versions' rows, which were compared.
pub(super) async fn differences(
    ctx: &SessionContext,
    conflicts: &Conflicts,
) -> Result<(Vec<BTreeSet<String>>, RecordBatch)> {
    let max = super::readings::MAX_READING as usize;
    let rows = rows_of(ctx, &conflicts.read_versions()).await?;
    let schema = rows.schema();
    let seqs = rows.column_by_name("seq").expect("events have seq");
    let seqs = datafusion::arrow::compute::cast(seqs, &DataType::Int64)?;
    let seqs = seqs.as_primitive::<Int64Type>();
    let at: HashMap<i64, usize> = (0..rows.num_rows()).map(|r| (seqs.value(r), r)).collect();
    let ns = rows
        .column_by_name("created_ns")
        .expect("events have created_ns");
    let ns = datafusion::arrow::compute::cast(ns, &DataType::Int64)?;
    let ns = ns.as_primitive::<Int64Type>();
    let compared: Vec<(String, _)> = (schema.fields().iter().enumerate())
        .filter(|(_, f)| !matches!(f.name().as_str(), "seq" | "version"))
        .map(|(c, f)| {
            let column = rows.column(c);
            let cmp = make_comparator(column, column, SortOptions::default());
            (f.name().clone(), cmp)
        })
        .collect();
    let mut out = Vec::with_capacity(conflicts.ids());
    let mut same_instant = Vec::new();
    for versions in conflicts.versions() {
        let mut differ = BTreeSet::new();
        let Some(&first) = at.get(&versions[0]) else {
            // Not found: nothing can be said to be the same.
            differ.extend(schema.fields().iter().map(|f| f.name().clone()));
            out.push(differ);
            continue;
        };
        for &later in versions.iter().take(max).skip(1) {
            let Some(&other) = at.get(&later) else {
                differ.extend(schema.fields().iter().map(|f| f.name().clone()));
                continue;
            };
            for (name, cmp) in &compared {
                match cmp {
                    Ok(cmp) if cmp(first, other).is_eq() => {}
                    _ => {
                        differ.insert(name.clone());
                    }
                }
            }
            if ns.value(first) == ns.value(other) {
                same_instant.push((out.len(), ns.value(first), versions[0], later));
            }
        }
        out.push(differ);
    }
    // The seqs of the instants the moved rows share, to see whether a
    // move passes one.
    let instants: BTreeSet<i64> = same_instant.iter().map(|&(_, ns, _, _)| ns).collect();
    let at_instant = seqs_at(ctx, &instants).await?;
    for (id, instant, a, b) in same_instant {
        let (low, high) = (a.min(b), a.max(b));
        let passes = at_instant
            .get(&instant)
            .is_some_and(|s| s.range(low + 1..high).next().is_some());
        if passes {
            out[id].insert("created_ns".to_string());
        }
    }
    Ok((out, rows))
}

/// The rows of `events` with these seqs, in one batch.
async fn rows_of(ctx: &SessionContext, seqs: &BTreeSet<i64>) -> Result<RecordBatch> {
    let batches = super::readings::matching(ctx, "seq", seqs)
        .await?
        .collect()
        .await?;
    let schema = match batches.first() {
        Some(b) => b.schema(),
        None => ctx.table("events").await?.schema().inner().clone(),
    };
    Ok(datafusion::arrow::compute::concat_batches(
        &schema, &batches,
    )?)
}

/// Per instant, the seqs of the events created at it.
async fn seqs_at(
    ctx: &SessionContext,
    instants: &BTreeSet<i64>,
) -> Result<HashMap<i64, BTreeSet<i64>>> {
    use datafusion::prelude::{cast, col};
    let mut out: HashMap<i64, BTreeSet<i64>> = HashMap::new();
    let rows = super::readings::matching(ctx, "created_ns", instants)
        .await?
        .select(vec![
            cast(col("created_ns"), DataType::Int64),
            cast(col("seq"), DataType::Int64),
        ])?;
    for b in rows.collect().await? {
        let (ns, seq) = (
            b.column(0).as_primitive::<Int64Type>(),
            b.column(1).as_primitive::<Int64Type>(),
        );
        for r in 0..b.num_rows() {
            out.entry(ns.value(r)).or_default().insert(seq.value(r));
        }
    }
    Ok(out)
}

/// How the readings split: the columns most conflicting ids differ in
/// (`narrow`), which ids differ in nothing else (`within`, per id), and
/// which rules read none of those columns (`blind`, per rule).
pub(super) struct Split {
    pub narrow: BTreeSet<String>,
    pub within: Vec<bool>,
    pub blind: Vec<bool>,
}

impl Split {
    /// What it leaves out, in words (for `HVAUDIT_TIMING`).
    pub fn describe(&self) -> String {
        let count = |marks: &[bool]| marks.iter().filter(|m| **m).count();
        let names: Vec<&str> = self.narrow.iter().map(String::as_str).collect();
        format!(
            "{} of {} ids differ only in [{}], which {} of {} rules read",
            count(&self.within),
            self.within.len(),
            names.join(", "),
            self.blind.len() - count(&self.blind),
            self.blind.len()
        )
    }

    /// The split of `differ` (per id) for rules reading `read`, or None
    /// when it leaves nothing out: no rule blind to what most ids differ
    /// in, or no id that differs in nothing else.
    pub fn of(differ: &[BTreeSet<String>], read: &[RuleReads]) -> Option<Split> {
        // What no rule reads is no difference to any.
        let mut read_by_any = BTreeSet::new();
        for r in read {
            match &r.columns {
                Some(r) => read_by_any.extend(r.iter().cloned()),
                None => return None,
            }
        }
        let differ: Vec<BTreeSet<String>> = (differ.iter())
            .map(|d| d.intersection(&read_by_any).cloned().collect())
            .collect();
        let mut counts: HashMap<&BTreeSet<String>, usize> = HashMap::new();
        for d in &differ {
            *counts.entry(d).or_default() += 1;
        }
        // The most common set of differences (on a tie, the smaller one,
        // then the first in order: the same split every run).
        let narrow = (counts.into_iter())
            .max_by(|a, b| (a.1.cmp(&b.1).then(b.0.len().cmp(&a.0.len()))).then(b.0.cmp(a.0)))?
            .0
            .clone();
        let within: Vec<bool> = differ.iter().map(|d| d.is_subset(&narrow)).collect();
        let blind: Vec<bool> = (read.iter())
            .map(|r| (r.columns.as_ref()).is_some_and(|r| r.is_disjoint(&narrow)))
            .collect();
        (within.contains(&true) && blind.contains(&true)).then_some(Split {
            narrow,
            within,
            blind,
        })
    }
}

/// Rows of a reading that left the swaps `moved` out (first seq -> the
/// chosen version's) as that reading would give them: each cited first
/// seq moved to its chosen version's.
pub(super) fn move_seqs(rows: &mut [FindingRow], moved: &HashMap<i64, i64>) {
    for row in rows {
        if row.seqs.iter().any(|s| moved.contains_key(s)) {
            let seqs: Vec<i64> = row
                .seqs
                .iter()
                .map(|s| *moved.get(s).unwrap_or(s))
                .collect();
            row.seqs = seqs.into();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use datafusion::arrow::datatypes::{Field, Schema};

    fn set(names: &[&str]) -> BTreeSet<String> {
        names.iter().map(|s| s.to_string()).collect()
    }

    fn reads(columns: &[Option<&[&str]>]) -> Vec<RuleReads> {
        (columns.iter())
            .map(|c| RuleReads {
                columns: c.map(set),
                row_by_row: false,
            })
            .collect()
    }

    /// Plans over `ev` (columns a and b) and `other`.
    async fn optimized(sql: &str) -> LogicalPlan {
        let ctx = SessionContext::new();
        let schema = Arc::new(Schema::new(vec![
            Field::new("a", DataType::Int64, true),
            Field::new("b", DataType::Int64, true),
        ]));
        for name in ["ev", "other"] {
            let table = MemTable::try_new(schema.clone(), vec![Vec::new()]).unwrap();
            ctx.register_table(name, Arc::new(table)).unwrap();
        }
        let (state, plan) = ctx.sql(sql).await.unwrap().into_parts();
        state.optimize(&plan).unwrap()
    }

    #[tokio::test]
    async fn a_rule_reads_row_by_row_only_with_one_scan_of_ev_and_nothing_across_rows() {
        let by_row = |sql: &'static str| async move { row_by_row(&optimized(sql).await) };
        assert!(by_row("SELECT a + 1 AS x FROM ev e WHERE b > 2 ORDER BY x").await);
        for across in [
            "SELECT a FROM ev WHERE b > 2 LIMIT 3",
            "SELECT count(*) FROM ev",
            "SELECT a, lag(a) OVER (ORDER BY b) FROM ev",
            "SELECT DISTINCT a FROM ev",
            "SELECT x.a FROM ev x JOIN ev y ON x.a = y.b",
            "SELECT a FROM ev WHERE a IN (SELECT b FROM ev)",
            "SELECT a FROM other",
        ] {
            assert!(!by_row(across).await, "{across}");
        }
        let columns = scanned(&optimized("SELECT a FROM ev WHERE a > 1").await);
        assert_eq!(columns, Some(set(&["a"])));
    }

    #[test]
    fn the_split_leaves_out_what_most_ids_differ_in_for_the_rules_blind_to_it() {
        let differ = vec![
            set(&["payload"]),
            set(&["payload"]),
            set(&["created_ns", "payload"]),
            set(&[]),
        ];
        let read = reads(&[Some(&["payload", "seq"]), Some(&["created_ns", "seq"])]);
        let split = Split::of(&differ, &read).unwrap();
        assert_eq!(split.within, [true, true, false, true]);
        assert_eq!(split.blind, [false, true]);
        assert_eq!(split.narrow, set(&["payload"]));
        // Every rule reads it: nothing to split.
        assert!(Split::of(&differ, &read[..1]).is_none());
        assert!(Split::of(&[], &read).is_none());
        // A rule that may read anything: nothing is left out.
        let any = RuleReads::default();
        assert!(Split::of(&differ, &[read[1].clone(), any]).is_none());
    }

    #[test]
    fn what_no_rule_reads_is_no_difference() {
        let differ = vec![
            set(&["digest", "payload"]),
            set(&["digest", "payload", "redeliveries"]),
            set(&["digest", "src_line", "type"]),
        ];
        let read = reads(&[Some(&["payload"]), Some(&["type"])]);
        let split = Split::of(&differ, &read).unwrap();
        assert_eq!(split.narrow, set(&["payload"]));
        assert_eq!(split.within, [true, true, false]);
        assert_eq!(split.blind, [false, true]);
    }

    #[test]
    fn moved_seqs_keep_their_place_in_the_row() {
        let mut rows = vec![FindingRow::new(
            0,
            crate::finding::Severity::High,
            None,
            "m".into(),
            vec![7, 3, 9].into(),
        )];
        move_seqs(&mut rows, &HashMap::from([(3, 30)]));
        assert_eq!(&*rows[0].seqs, [7, 30, 9]);
    }
}
