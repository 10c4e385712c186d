//! The readings of later versions over a neighbourhood, planned once.
//!
//! Over a neighbourhood of a few rows, a reading is all planning: turning
//! each rule's SQL into an optimized plan costs far more than running it.
//! So the views and rules are planned once, over tables whose rows each
//! reading replaces (`events`, and the views kept as tables), and every
//! reading runs the same plans again, each run with fresh operator state
//! (DataFusion's `reset_plan_states`).
//!
//! And a reading runs only the queries that can see a row it swaps. The
//! optimized plan of a query holds the filters pushed to each of its scans
//! of `events`; a query none of whose scans lets a swapped row through
//! (either version, numbered as either reading numbers it), and that reads
//! no view that does, reads in this reading exactly what it read in the
//! reading of version 1, and finds nothing new. A rule that no reading can
//! change is not planned past that point, nor run in the reading of
//! version 1: what it finds there is never told apart from anything.

use super::catalog::Catalog;
use super::readings::{Neighbourhood, Swaps, swapped_batches};
use crate::finding_store::{FindingRow, Interner};
use async_trait::async_trait;
use datafusion::arrow::array::RecordBatch;
use datafusion::arrow::datatypes::SchemaRef;
use datafusion::catalog::{Session, TableProvider};
use datafusion::common::DFSchema;
use datafusion::common::tree_node::TreeNodeRecursion;
use datafusion::datasource::TableType;
use datafusion::datasource::source_as_provider;
use datafusion::error::{DataFusionError, Result};
use datafusion::execution::{SendableRecordBatchStream, TaskContext};
use datafusion::logical_expr::{Expr, LogicalPlan, TableProviderFilterPushDown};
use datafusion::physical_expr::EquivalenceProperties;
use datafusion::physical_plan::execution_plan::reset_plan_states;
use datafusion::physical_plan::execution_plan::{Boundedness, EmissionType};
use datafusion::physical_plan::memory::MemoryStream;
use datafusion::physical_plan::{
    DisplayAs, DisplayFormatType, ExecutionPlan, Partitioning, PhysicalExpr, PlanProperties,
    ReplaceChildrenOptions, execute_stream,
};
use datafusion::prelude::SessionContext;
use std::sync::{Arc, Mutex, RwLock};

/// Rows a reading replaces; the plans read whatever it holds when they run.
#[derive(Debug)]
struct Slot {
    schema: SchemaRef,
    rows: RwLock<Vec<RecordBatch>>,
}

impl Slot {
    fn new(schema: SchemaRef, rows: Vec<RecordBatch>) -> Arc<Slot> {
        Arc::new(Slot {
            schema,
            rows: RwLock::new(rows),
        })
    }

    fn set(&self, rows: Vec<RecordBatch>) {
        *self.rows.write().unwrap_or_else(|e| e.into_inner()) = rows;
    }

    fn get(&self) -> Vec<RecordBatch> {
        self.rows.read().unwrap_or_else(|e| e.into_inner()).clone()
    }
}

/// A table over a [`Slot`]. Filters are taken (inexactly: the engine still
/// applies them) only so that the plans name them, for `events`.
#[derive(Debug)]
struct SlotTable {
    slot: Arc<Slot>,
    /// Whether this is `events`, whose scans tell what a query can see.
    events: bool,
}

#[async_trait]
impl TableProvider for SlotTable {
    fn schema(&self) -> SchemaRef {
        self.slot.schema.clone()
    }

    fn table_type(&self) -> TableType {
        TableType::Base
    }

    fn supports_filters_pushdown(
        &self,
        filters: &[&Expr],
    ) -> Result<Vec<TableProviderFilterPushDown>> {
        Ok(vec![TableProviderFilterPushDown::Inexact; filters.len()])
    }

    async fn scan(
        &self,
        _state: &dyn Session,
        projection: Option<&Vec<usize>>,
        _filters: &[Expr],
        _limit: Option<usize>,
    ) -> Result<Arc<dyn ExecutionPlan>> {
        Ok(Arc::new(SlotExec::new(self.slot.clone(), projection)?))
    }
}

/// The leaf of a plan over a [`Slot`]: its rows as they are when it runs.
#[derive(Debug)]
struct SlotExec {
    slot: Arc<Slot>,
    projection: Option<Vec<usize>>,
    properties: Arc<PlanProperties>,
}

impl SlotExec {
    fn new(slot: Arc<Slot>, projection: Option<&Vec<usize>>) -> Result<SlotExec> {
        let schema = match projection {
            Some(p) => Arc::new(slot.schema.project(p)?),
            None => slot.schema.clone(),
        };
        let properties = Arc::new(PlanProperties::new(
            EquivalenceProperties::new(schema),
            Partitioning::UnknownPartitioning(1),
            EmissionType::Incremental,
            Boundedness::Bounded,
        ));
        Ok(SlotExec {
            slot,
            projection: projection.cloned(),
            properties,
        })
    }
}

impl DisplayAs for SlotExec {
    fn fmt_as(&self, _: DisplayFormatType, f: &mut std::fmt::Formatter) -> std::fmt::Result {
        write!(f, "SlotExec")
    }
}

impl ExecutionPlan for SlotExec {
    fn name(&self) -> &str {
        "SlotExec"
    }

    fn properties(&self) -> &Arc<PlanProperties> {
        &self.properties
    }

    fn children(&self) -> Vec<&Arc<dyn ExecutionPlan>> {
        Vec::new()
    }

    fn apply_expressions(
        &self,
        _f: &mut dyn FnMut(&Arc<dyn PhysicalExpr>) -> Result<TreeNodeRecursion>,
    ) -> Result<TreeNodeRecursion> {
        Ok(TreeNodeRecursion::Continue)
    }

    fn replace_children(
        self: Arc<Self>,
        _children: Vec<Arc<dyn ExecutionPlan>>,
        _options: ReplaceChildrenOptions,
    ) -> Result<Arc<dyn ExecutionPlan>> {
        Ok(self)
    }

    fn with_new_children(
        self: Arc<Self>,
        _children: Vec<Arc<dyn ExecutionPlan>>,
    ) -> Result<Arc<dyn ExecutionPlan>> {
        Ok(self)
    }

    fn execute(
        &self,
        _partition: usize,
        _context: Arc<TaskContext>,
    ) -> Result<SendableRecordBatchStream> {
        let rows = self.slot.get();
        let rows = match &self.projection {
            Some(p) => rows
                .iter()
                .map(|b| b.project(p))
                .collect::<std::result::Result<Vec<_>, _>>()?,
            None => rows,
        };
        let schema = self.properties.eq_properties.schema().clone();
        Ok(Box::pin(MemoryStream::try_new(rows, schema, None)?))
    }
}

/// A query planned once: its plan (or why it has none), the filters of its
/// scans of `events`, the kept views it reads (directly or through plain
/// views; by index into [`Planned::views`]), and whether any reading can
/// change what it reads (if not, it has no plan and never runs).
struct Query {
    plan: std::result::Result<Arc<dyn ExecutionPlan>, String>,
    scans: Vec<Vec<Expr>>,
    views: Vec<usize>,
    changeable: bool,
}

/// A view kept as a table: its query, its rows in the reading of version
/// 1, and the slot readings fill.
struct KeptView {
    file: String,
    query: Query,
    first: Vec<RecordBatch>,
    slot: Arc<Slot>,
}

/// The catalog planned over a neighbourhood.
pub(super) struct Planned {
    ctx: SessionContext,
    events: Arc<Slot>,
    /// The neighbourhood's rows, numbered as the reading of version 1 reads them.
    rows: Vec<RecordBatch>,
    views: Vec<KeptView>,
    /// Per rule of the catalog, its query.
    rules: Vec<Query>,
    catalog: Catalog,
    labels: Vec<u32>,
}

/// What a run gave: rows, errors (by rule id or view file), and how many
/// of the rules and views ran.
pub(super) struct Run {
    pub rows: Vec<FindingRow>,
    pub errors: Vec<(String, String)>,
    pub rules_run: usize,
    pub views_run: usize,
}

impl Planned {
    /// Plan `catalog` (its rules labelled `labels`) over `part` in `ctx`
    /// (a session over the neighbourhood's tables): `events` becomes a
    /// slot, the views marked to be kept become slots, the others plain.
    /// `swapped` holds the rows some reading swaps, numbered both ways
    /// ([`Neighbourhood::swapped_rows`] of every reading): a rule none of
    /// whose scans lets one through, reading no view that can, is left
    /// unplanned.
    pub async fn new(
        ctx: SessionContext,
        part: &Neighbourhood,
        catalog: &Catalog,
        labels: &[u32],
        swapped: &[RecordBatch],
    ) -> Result<(Planned, Vec<(String, String)>)> {
        let schema = crate::ingest::schema::EVENTS.clone();
        let events = Slot::new(schema, part.events.clone());
        ctx.deregister_table("events")?;
        let table = SlotTable {
            slot: events.clone(),
            events: true,
        };
        ctx.register_table("events", Arc::new(table))?;
        let reads = super::jobs::Dependencies::of(&ctx, catalog);
        let mut errors = Vec::new();
        let mut views: Vec<KeptView> = Vec::new();
        // Per view of the catalog, where it is among the kept ones.
        let mut kept_at: Vec<Option<usize>> = vec![None; catalog.views.len()];
        for (i, v) in catalog.views.iter().enumerate() {
            let under = kept_below(&reads, &kept_at, &reads.views[i]);
            if !v.materialize {
                let planned = crate::read_only::plan(&ctx, &v.sql).await;
                let registered = planned.and_then(|df| ctx.register_table(&v.name, df.into_view()));
                if let Err(e) = registered {
                    errors.push((v.file.clone(), e.to_string()));
                }
                continue;
            }
            let query = plan_query(&ctx, &v.sql, under, |_, _| true).await;
            let rows = match &query.plan {
                Ok(plan) => collect(plan.clone(), &ctx).await,
                Err(e) => Err(DataFusionError::Plan(e.clone())),
            };
            let kept = rows.and_then(|rows| {
                let plan = query.plan.as_ref().expect("planned: it ran");
                let slot = Slot::new(plan.schema(), relabel(rows, &plan.schema())?);
                let table = SlotTable {
                    slot: slot.clone(),
                    events: false,
                };
                ctx.register_table(&v.name, Arc::new(table))?;
                Ok(slot)
            });
            match kept {
                Ok(slot) => {
                    kept_at[i] = Some(views.len());
                    views.push(KeptView {
                        file: v.file.clone(),
                        first: slot.get(),
                        query,
                        slot,
                    });
                }
                Err(e) => errors.push((v.file.clone(), e.to_string())),
            }
        }
        // What some reading can change, view by view.
        let mut changeable: Vec<bool> = Vec::with_capacity(views.len());
        for view in &views {
            let query = &view.query;
            let change = can_change(&ctx, &changeable, swapped, &query.scans, &query.views);
            changeable.push(change);
        }
        // The rules, planned side by side: over a neighbourhood, planning
        // is most of a reading's time, and each rule's is its own.
        let swapped = Arc::new(swapped.to_vec());
        let changeable = Arc::new(changeable);
        let planning: Vec<_> = (catalog.rules.iter().enumerate())
            .map(|(r, rule)| {
                let under = kept_below(&reads, &kept_at, &reads.rules[r]);
                let (ctx, sql) = (ctx.clone(), rule.sql.clone());
                let (swapped, changeable) = (swapped.clone(), changeable.clone());
                super::jobs::AbortOnDrop(tokio::spawn(async move {
                    let wanted = |scans: &[Vec<Expr>], views: &[usize]| {
                        can_change(&ctx, &changeable, &swapped, scans, views)
                    };
                    plan_query(&ctx, &sql, under, wanted).await
                }))
            })
            .collect();
        let mut rules = Vec::with_capacity(planning.len());
        for mut handle in planning {
            let planned = (&mut handle.0).await;
            rules.push(planned.map_err(|e| DataFusionError::External(Box::new(e)))?);
        }
        let planned = Planned {
            ctx,
            events,
            rows: part.events.clone(),
            views,
            rules,
            catalog: catalog.clone(),
            labels: labels.to_vec(),
        };
        Ok((planned, errors))
    }

    /// Run every rule some reading can change over the rows as the reading
    /// of version 1 reads them.
    pub async fn first(&self, strings: &Arc<Mutex<Interner>>) -> Run {
        let changeable: Vec<bool> = self.rules.iter().map(|q| q.changeable).collect();
        self.run_rules(&changeable, strings).await
    }

    /// Run the reading `swaps` (over `part`, the neighbourhood planned):
    /// the rules that can read one of its swapped rows, and the views they
    /// read that can.
    pub async fn reading(
        &self,
        part: &Neighbourhood,
        swaps: &Swaps,
        strings: &Arc<Mutex<Interner>>,
    ) -> Result<Run> {
        let probe = part.swapped_rows(swaps)?;
        let sees = |query: &Query| passes(&self.ctx, &query.scans, &probe);
        self.events.set(swapped_batches(&self.rows, swaps));
        let mut changed = vec![false; self.views.len()];
        let mut errors = Vec::new();
        let mut views_run = 0;
        for (i, view) in self.views.iter().enumerate() {
            changed[i] = sees(&view.query) || view.query.views.iter().any(|&w| changed[w]);
            if !changed[i] {
                view.slot.set(view.first.clone());
                continue;
            }
            views_run += 1;
            let rows = match &view.query.plan {
                Ok(plan) => async { collect(reset_plan_states(plan.clone())?, &self.ctx).await }
                    .await
                    .and_then(|rows| relabel(rows, &view.slot.schema)),
                Err(e) => Err(DataFusionError::Plan(e.clone())),
            };
            match rows {
                Ok(rows) => view.slot.set(rows),
                Err(e) => {
                    // Its readers report it failing too; say which view.
                    view.slot.set(Vec::new());
                    errors.push((view.file.clone(), e.to_string()));
                }
            }
        }
        let wanted: Vec<bool> = (self.rules.iter())
            .map(|q| q.changeable && (sees(q) || q.views.iter().any(|&w| changed[w])))
            .collect();
        let mut run = self.run_rules(&wanted, strings).await;
        run.errors.extend(errors);
        run.views_run = views_run;
        Ok(run)
    }

    /// Run the rules `wanted` marks (at most a few at once, each in a task).
    async fn run_rules(&self, wanted: &[bool], strings: &Arc<Mutex<Interner>>) -> Run {
        use futures::StreamExt;
        let limit = self.ctx.runtime_env().memory_pool.memory_limit();
        let limited = matches!(
            limit,
            datafusion::execution::memory_pool::MemoryLimit::Finite(_)
        );
        let at_once = super::jobs::jobs_at_once(limited);
        let mut run = Run {
            rows: Vec::new(),
            errors: Vec::new(),
            rules_run: 0,
            views_run: 0,
        };
        let mut jobs = Vec::new();
        for (r, query) in self.rules.iter().enumerate() {
            if !wanted[r] {
                continue;
            }
            run.rules_run += 1;
            let rule = self.catalog.rules[r].clone();
            let plan = match &query.plan {
                Ok(plan) => plan.clone(),
                Err(e) => {
                    run.errors.push((rule.meta.id.clone(), e.clone()));
                    continue;
                }
            };
            let (label, strings, task) = (self.labels[r], strings.clone(), self.ctx.task_ctx());
            let limit = self.catalog.timeout;
            jobs.push(async move {
                let handle = tokio::spawn(async move {
                    let plan = reset_plan_states(plan)?;
                    let mut batches = execute_stream(plan, task)?;
                    let mut rows = Vec::new();
                    while let Some(b) = batches.next().await {
                        let mut strings = strings.lock().unwrap_or_else(|e| e.into_inner());
                        super::jobs::add_rows(&b?, &rule, label, &mut strings, &mut rows)?;
                    }
                    Ok::<_, DataFusionError>(rows)
                });
                let mut handle = super::jobs::AbortOnDrop(handle);
                (r, super::jobs::outcome(limit, &mut handle).await)
            });
        }
        let mut done: Vec<_> = futures::stream::iter(jobs)
            .buffer_unordered(at_once)
            .collect()
            .await;
        // In catalog order, as an evaluation of the catalog gives them.
        done.sort_by_key(|(r, _)| *r);
        for (r, outcome) in done {
            match outcome {
                Ok(mut rows) => run.rows.append(&mut rows),
                Err(e) => run
                    .errors
                    .push((self.catalog.rules[r].meta.id.clone(), e.to_string())),
            }
        }
        run
    }
}

/// The kept views among `direct` and the views below them (through plain
/// ones), by index into the kept views.
fn kept_below(
    reads: &super::jobs::Dependencies,
    kept_at: &[Option<usize>],
    direct: &[usize],
) -> Vec<usize> {
    let mut found = std::collections::BTreeSet::new();
    let mut todo: Vec<usize> = direct.to_vec();
    let mut visited = std::collections::HashSet::new();
    while let Some(v) = todo.pop() {
        if !visited.insert(v) {
            continue;
        }
        match kept_at[v] {
            // A kept view's own rows already account for what is below it.
            Some(k) => {
                found.insert(k);
            }
            None => todo.extend(reads.views[v].iter().copied()),
        }
    }
    found.into_iter().collect()
}

/// Plan `sql` with the filters of its scans of `events`, as far as its
/// optimized logical plan; on to its physical plan only if `wanted` says so
/// of those scans and of the kept views it reads.
async fn plan_query(
    ctx: &SessionContext,
    sql: &str,
    views: Vec<usize>,
    wanted: impl FnOnce(&[Vec<Expr>], &[usize]) -> bool,
) -> Query {
    let logical = async {
        let (state, plan) = crate::read_only::plan(ctx, sql).await?.into_parts();
        let plan = state.optimize(&plan)?;
        Ok::<_, DataFusionError>((state, plan))
    }
    .await;
    let (state, logical) = match logical {
        Ok(planned) => planned,
        // Run, to report its error.
        Err(e) => {
            return Query {
                plan: Err(e.to_string()),
                scans: Vec::new(),
                views,
                changeable: true,
            };
        }
    };
    let scans = event_scans(&logical);
    if !wanted(&scans, &views) {
        return Query {
            plan: Err("not planned: no reading changes what it reads".into()),
            scans,
            views,
            changeable: false,
        };
    }
    // Optimized already: the planner alone, not the optimizer again.
    let plan = (state.query_planner())
        .create_physical_plan(&logical, &state)
        .await
        .map_err(|e| e.to_string());
    Query {
        plan,
        scans,
        views,
        changeable: true,
    }
}

/// The filters of every scan of `events` in `plan` (its subqueries too).
fn event_scans(plan: &LogicalPlan) -> Vec<Vec<Expr>> {
    let mut scans = Vec::new();
    let _ = plan.apply_with_subqueries(|node| {
        if let LogicalPlan::TableScan(scan) = node {
            let provider = source_as_provider(&scan.source).ok();
            let table = provider
                .as_deref()
                .and_then(|p| p.downcast_ref::<SlotTable>());
            if table.is_some_and(|t| t.events) {
                scans.push(scan.filters.clone());
            }
        }
        Ok(TreeNodeRecursion::Continue)
    });
    scans
}

async fn collect(plan: Arc<dyn ExecutionPlan>, ctx: &SessionContext) -> Result<Vec<RecordBatch>> {
    datafusion::physical_plan::collect(plan, ctx.task_ctx()).await
}

/// `rows` under `schema` (a plan's batches may be stricter about nulls
/// than the plan says).
fn relabel(rows: Vec<RecordBatch>, schema: &SchemaRef) -> Result<Vec<RecordBatch>> {
    rows.into_iter()
        .map(|b| Ok(RecordBatch::try_new(schema.clone(), b.columns().to_vec())?))
        .collect()
}

/// Whether some reading can change what a query reads: a row of `swapped`
/// passes one of its `scans` of `events`, or it reads a kept view that is
/// `changeable` (each kept view comes after the views it reads).
fn can_change(
    ctx: &SessionContext,
    changeable: &[bool],
    swapped: &[RecordBatch],
    scans: &[Vec<Expr>],
    views: &[usize],
) -> bool {
    views.iter().any(|&w| changeable[w]) || passes(ctx, scans, swapped)
}

/// Whether a row of `probe` can pass one of `scans` (every filter of the
/// scan): a scan without filters, or with one that cannot be judged here,
/// passes.
fn passes(ctx: &SessionContext, scans: &[Vec<Expr>], probe: &[RecordBatch]) -> bool {
    let state = ctx.state();
    let Ok(schema) = DFSchema::try_from(crate::ingest::schema::EVENTS.as_ref().clone()) else {
        return true;
    };
    scans.iter().any(|filters| {
        probe.iter().any(|batch| {
            let mut pass: Vec<bool> = vec![true; batch.num_rows()];
            for filter in filters {
                let Some(verdict) = super::ev_table::judge(&state, filter, &schema, batch) else {
                    return true;
                };
                for (p, v) in pass.iter_mut().zip(verdict) {
                    *p &= v;
                }
            }
            pass.iter().any(|p| *p)
        })
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ingest::schema::EVENTS;
    use datafusion::arrow::array::{
        ArrayRef, AsArray, DictionaryArray, Int64Array, StringArray, new_null_array,
    };
    use datafusion::arrow::datatypes::{Field, Int32Type, Schema};

    /// Rows laid out as `events`: (seq, type, task_id), every other column null.
    fn rows(of: &[(i64, &str, &str)]) -> RecordBatch {
        let fields: Vec<Field> = (EVENTS.fields().iter())
            .map(|f| f.as_ref().clone().with_nullable(true))
            .collect();
        let schema = Arc::new(Schema::new(fields));
        let columns = (schema.fields().iter())
            .map(|f| -> ArrayRef {
                match f.name().as_str() {
                    "seq" => Arc::new(Int64Array::from_iter_values(of.iter().map(|r| r.0))),
                    "type" => Arc::new(
                        of.iter()
                            .map(|r| r.1)
                            .collect::<DictionaryArray<Int32Type>>(),
                    ),
                    "task_id" => Arc::new(StringArray::from_iter_values(of.iter().map(|r| r.2))),
                    _ => new_null_array(f.data_type(), of.len()),
                }
            })
            .collect();
        RecordBatch::try_new(schema, columns).unwrap()
    }

    fn session_over(batch: &RecordBatch) -> (SessionContext, Arc<Slot>) {
        let config = datafusion::prelude::SessionConfig::new().with_target_partitions(1);
        let ctx = SessionContext::new_with_config(config);
        let slot = Slot::new(batch.schema(), vec![batch.clone()]);
        let table = SlotTable {
            slot: slot.clone(),
            events: true,
        };
        ctx.register_table("events", Arc::new(table)).unwrap();
        (ctx, slot)
    }

    async fn pairs(plan: &Arc<dyn ExecutionPlan>, ctx: &SessionContext) -> Vec<(i64, i64)> {
        let plan = reset_plan_states(plan.clone()).unwrap();
        let batches = collect(plan, ctx).await.unwrap();
        let mut out = Vec::new();
        for b in &batches {
            let (a, c) = (
                b.column(0)
                    .as_primitive::<datafusion::arrow::datatypes::Int64Type>(),
                b.column(1)
                    .as_primitive::<datafusion::arrow::datatypes::Int64Type>(),
            );
            out.extend((0..b.num_rows()).map(|r| (a.value(r), c.value(r))));
        }
        out.sort_unstable();
        out
    }

    /// A plan made once reads the rows its slot holds when it runs: a
    /// hash join's build side, kept by the plan after a run, is built
    /// again for the next.
    #[tokio::test]
    async fn a_plan_run_again_reads_the_rows_of_its_reading() {
        let first = rows(&[
            (1, "task.started", "t1"),
            (2, "task.completed", "t1"),
            (3, "task.started", "t2"),
        ]);
        let (ctx, slot) = session_over(&first);
        let sql = "SELECT a.seq, b.seq FROM events a JOIN events b \
                   ON a.task_id = b.task_id AND a.seq < b.seq \
                   WHERE a.type = 'task.started'";
        let query = plan_query(&ctx, sql, Vec::new(), |_, _| true).await;
        let plan = query.plan.unwrap();
        assert_eq!(pairs(&plan, &ctx).await, [(1, 2)]);
        slot.set(vec![rows(&[
            (1, "task.started", "t2"),
            (5, "task.failed", "t2"),
            (3, "task.started", "t2"),
        ])]);
        assert_eq!(pairs(&plan, &ctx).await, [(1, 3), (1, 5), (3, 5)]);
        slot.set(vec![first]);
        assert_eq!(pairs(&plan, &ctx).await, [(1, 2)]);
        // Both scans recorded their filters.
        assert_eq!(query.scans.len(), 2);
    }

    fn rule(id: &str, event_type: &str) -> crate::rules::catalog::Rule {
        let text = format!(
            "-- id: {id}\n-- severity: low\n-- family: t\n-- dialect: any\n-- summary: s\n\
             -- spec: s\n-- explain: e\n\
             SELECT task_id, type AS message, make_array(seq) AS seqs FROM events \
             WHERE type = '{event_type}'"
        );
        crate::rules::catalog::parse_rule(&format!("{id}.sql"), &text).unwrap()
    }

    /// A rule whose scans let no swapped row through, in any reading, has
    /// no plan and runs in no reading, that of version 1 included; the
    /// rule beside it that reads the swapped rows runs in both.
    #[tokio::test]
    async fn a_rule_no_reading_can_change_is_neither_planned_nor_run() {
        let all = rows(&[
            (1, "task.started", "t1"),
            (2, "task.progress", "t1"),
            (3, "task.started", "t1"),
        ]);
        let (ctx, _) = session_over(&all);
        let part = Neighbourhood {
            events: vec![all],
            evidence: Vec::new(),
            log_end: Vec::new(),
        };
        let catalog = Catalog {
            rules: vec![
                rule("t.started", "task.started"),
                rule("t.progress", "task.progress"),
            ],
            ..Default::default()
        };
        let swaps = vec![(1, 3, 2)];
        let swapped = part.swapped_rows(&swaps).unwrap();
        let (planned, errors) = Planned::new(ctx, &part, &catalog, &[0, 1], &swapped)
            .await
            .unwrap();
        assert!(errors.is_empty());
        assert!(planned.rules[0].changeable && planned.rules[0].plan.is_ok());
        assert!(!planned.rules[1].changeable && planned.rules[1].plan.is_err());
        let strings = Arc::new(Mutex::new(Interner::default()));
        let first = planned.first(&strings).await;
        assert!(first.errors.is_empty(), "{:?}", first.errors);
        assert_eq!((first.rules_run, first.rows.len()), (1, 2));
        let reading = planned.reading(&part, &swaps, &strings).await.unwrap();
        assert_eq!((reading.rules_run, reading.rows.len()), (1, 2));
        // Swapping progress rows instead: the other way round.
        let swapped = part.swapped_rows(&vec![(2, 2, 1)]).unwrap();
        let (ctx, _) = session_over(&part.events[0]);
        let (planned, _) = Planned::new(ctx, &part, &catalog, &[0, 1], &swapped)
            .await
            .unwrap();
        assert!(!planned.rules[0].changeable && planned.rules[1].changeable);
    }

    #[tokio::test]
    async fn a_query_sees_a_swapped_row_only_if_a_scan_of_it_lets_it_through() {
        let all = rows(&[(1, "task.started", "t1")]);
        let (ctx, _) = session_over(&all);
        let scans = |sql: &'static str| {
            let ctx = ctx.clone();
            async move { plan_query(&ctx, sql, Vec::new(), |_, _| true).await.scans }
        };
        let started = rows(&[(9, "task.started", "t9")]);
        let progress = rows(&[(9, "task.progress", "t9")]);
        let by_type = scans("SELECT seq FROM events WHERE type = 'task.started'").await;
        assert!(passes(&ctx, &by_type, std::slice::from_ref(&started)));
        assert!(!passes(&ctx, &by_type, std::slice::from_ref(&progress)));
        // Every filter of a scan must hold; any scan may let it through.
        let both = scans(
            "SELECT a.seq FROM events a WHERE a.type = 'task.started' AND a.task_id = 't1' \
             UNION ALL SELECT seq FROM events WHERE task_id LIKE 't%' AND type <> 'task.started'",
        )
        .await;
        assert!(!passes(&ctx, &both, std::slice::from_ref(&started)));
        assert!(passes(&ctx, &both, std::slice::from_ref(&progress)));
        // A scan without filters reads every row.
        let every = scans("SELECT count(*) FROM events").await;
        assert!(passes(&ctx, &every, std::slice::from_ref(&progress)));
        // None swapped: nothing to see.
        assert!(!passes(&ctx, &by_type, &[]));
    }
}
