//! The front door: configure an audit, run it, get a `Report`.

use crate::cluster::{Disturbed, Stalled};
use crate::engine::{self, EngineOptions, RuleSettings};
use crate::finding_store::Findings;
use crate::ingest::Ingested;
use crate::ingest::inputs::InputError;
use crate::protocol::SpecMode;
use crate::report::model::{InputSummary, Report, Span, TimeBucket};
use crate::rules::{
    self, Materialize,
    catalog::{Catalog, FileError},
};
use crate::tables::{Notices, Place, Purpose, ReadingOptions, Tables};
use chrono::{DateTime, Utc};
use datafusion::arrow::array::{Array, AsArray};
use datafusion::arrow::datatypes::Int64Type;
use datafusion::prelude::SessionContext;
use futures::future::BoxFuture;
use std::path::PathBuf;
use std::sync::Arc;

mod unread_columns;
pub use unread_columns::let_go_of_unread_columns;

/// Everything an audit run needs to know.
#[derive(Debug, Clone, Default)]
pub struct AuditConfig {
    /// The logs, how they are read and where their tables go.
    pub reading: ReadingOptions,
    pub spec: SpecMode,
    /// Only flag a wait when at least this much log follows its opening event.
    pub horizon_ms: Option<i64>,
    /// Event types that count as decisions; None = the default set.
    pub decision_types: Option<Vec<String>>,
    /// Run only rules whose id matches these globs (e.g. "orphan.*,-orphan.x").
    pub rules_glob: Option<String>,
    /// Leave out rules whose id matches these globs.
    pub exclude_rules: Option<String>,
    /// Severities and rules left out, from the configuration file.
    pub rule_overrides: Vec<crate::rules::catalog::RuleOverride>,
    /// Extra rule files (and views) of the same form as queries/.
    pub rules_dir: Option<PathBuf>,
    /// Report only findings whose first event lies in [since, until].
    pub since: Option<DateTime<Utc>>,
    pub until: Option<DateTime<Utc>>,
    /// `--rule-timeout`: a view or rule still running after this long is
    /// stopped, and the audit fails naming it.
    pub rule_timeout: Option<std::time::Duration>,
}

impl AuditConfig {
    /// An audit of `inputs` with the defaults.
    pub fn of(inputs: Vec<PathBuf>) -> AuditConfig {
        AuditConfig {
            reading: ReadingOptions::new(inputs),
            ..Default::default()
        }
    }

    /// Where spill files and in-place views go: `--spill-dir`, else the
    /// system temp directory.
    pub fn spill_dir_or_default(&self) -> PathBuf {
        self.reading.memory.spill_dir_or_default()
    }

    pub fn engine_options(&self) -> EngineOptions {
        self.reading.memory.engine()
    }

    /// The engine for the rule set: one partition per query. The rules run
    /// side by side, one more than the cores, and keep them busy; splitting
    /// each query as well only adds repartitioning (benches/README.md).
    fn rule_engine_options(&self) -> EngineOptions {
        EngineOptions {
            partitions: Some(1),
            ..self.engine_options()
        }
    }

    fn rule_settings(&self) -> RuleSettings {
        RuleSettings {
            spec: self.spec,
            horizon_ms: self.horizon_ms,
            token_format: self.reading.ingest.token_format,
            decision_types: self.decision_types.clone(),
        }
    }

    /// The rule set this configuration runs.
    pub fn catalog(&self) -> Result<Catalog, AuditError> {
        let mut catalog = Catalog::embedded().map_err(AuditError::Rules)?;
        if let Some(dir) = &self.rules_dir {
            catalog.add_dir(dir).map_err(AuditError::Rules)?;
        }
        catalog
            .apply_overrides(&self.rule_overrides, |c| {
                c.select(self.rules_glob.as_deref(), self.exclude_rules.as_deref())
            })
            .map_err(AuditError::Usage)?;
        catalog.drop_unread_views(&[UNRESOLVED_BASES]);
        catalog.timeout = self.rule_timeout;
        Ok(catalog)
    }
}

/// Why an audit could not run at all (exit code 2).
#[derive(Debug, thiserror::Error)]
pub enum AuditError {
    #[error(transparent)]
    Input(#[from] InputError),
    #[error("{}", .0.iter().map(|e| e.to_string()).collect::<Vec<_>>().join("\n"))]
    Rules(Vec<FileError>),
    #[error("{0}")]
    Usage(String),
    #[error("query engine: {0}")]
    Engine(#[from] datafusion::error::DataFusionError),
    #[error(transparent)]
    Stalled(#[from] Stalled),
    #[error(transparent)]
    Disturbed(#[from] Disturbed),
    /// The caller's [`Interrupt`](crate::interrupt::Interrupt) was set.
    #[error("interrupted")]
    Interrupted,
}

/// One audit, from its inputs to a `Report`: the configuration (rules,
/// engine, time window, how the inputs are read and where their tables
/// go). A log too large for memory is read to Parquet on disk and audited
/// there ([`Tables::open`]):
///
/// ```no_run
/// # use hvaudit::audit::{Audit, AuditConfig};
/// let report = Audit::new(AuditConfig::of(vec!["samples/incident".into()])).run()?;
/// # Ok::<(), hvaudit::audit::AuditError>(())
/// ```
#[derive(Debug, Clone)]
pub struct Audit {
    config: AuditConfig,
}

impl Audit {
    pub fn new(config: AuditConfig) -> Audit {
        Audit { config }
    }

    pub fn config(&self) -> &AuditConfig {
        &self.config
    }

    /// The rule set the configuration selects.
    pub fn catalog(&self) -> Result<Catalog, AuditError> {
        self.config.catalog()
    }

    /// Run it end to end with the configuration's rule set.
    pub fn run(&self) -> Result<Report, AuditError> {
        self.run_with(&self.catalog()?)
    }

    /// Run it end to end with `catalog`: open the tables where the
    /// configuration says (or where they fit), then run the rules.
    pub fn run_with(&self, catalog: &Catalog) -> Result<Report, AuditError> {
        let mut tables = Tables::open(&self.config.reading, Purpose::Audit)?;
        self.run_on(catalog, &mut tables)
    }

    /// The rules over tables already opened. Loaded tables first let go
    /// of the columns no view or rule reads ([`let_go_of_unread_columns`]).
    pub fn run_on(&self, catalog: &Catalog, tables: &mut Tables) -> Result<Report, AuditError> {
        let interrupt = self.config.reading.ingest.interrupt.clone();
        if interrupt.is_set() {
            return Err(AuditError::Interrupted);
        }
        if let Place::Loaded(ingested) = &mut tables.place {
            let_go_of_unread_columns(ingested, catalog);
        }
        // Interrupted, the audit's future is dropped: its queries stop.
        block_on(async {
            tokio::select! {
                report = audit_tables(&self.config, catalog, tables) => report,
                () = interrupt.wait() => Err(AuditError::Interrupted),
            }
        })
    }
}

/// A multi-threaded runtime for the query engine, for callers without one.
pub fn block_on<F: std::future::Future>(f: F) -> F::Output {
    tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .expect("tokio runtime starts")
        .block_on(f)
}

/// Run the rules over `tables`, wherever they are.
pub(crate) async fn audit_tables(
    cfg: &AuditConfig,
    catalog: &Catalog,
    tables: &Tables,
) -> Result<Report, AuditError> {
    // The engine keeps to the tables' memory (a spill plan's limit).
    let cfg = &AuditConfig {
        reading: ReadingOptions {
            memory: tables.memory.clone(),
            ..cfg.reading.clone()
        },
        ..cfg.clone()
    };
    match &tables.place {
        Place::Loaded(ingested) => audit_ingested(cfg, catalog, ingested, tables.inputs()).await,
        Place::OnDisk(disk) => audit_parquet_inputs(cfg, catalog, &disk.files, tables).await,
        Place::InPlace(files) => audit_parquet_inputs(cfg, catalog, files, tables).await,
        #[cfg(feature = "cluster")]
        Place::Cluster(c) => {
            let url = c.url.as_str();
            let rules = async |ctx: SessionContext, scratch| {
                let views = Materialize::OnCluster(scratch);
                audit_files(cfg, catalog, &ctx, &c.files, tables, &views, Some(url)).await
            };
            let spill_dir = cfg.reading.memory.spill_dir.as_deref();
            crate::cluster::audit(url, c.timeout, spill_dir, &cfg.reading.inputs, rules).await
        }
    }
}

/// Run the rules over tables already ingested.
async fn audit_ingested(
    cfg: &AuditConfig,
    catalog: &Catalog,
    ingested: &Ingested,
    inputs: Vec<InputSummary>,
) -> Result<Report, AuditError> {
    let mut catalog = catalog.clone();
    // `ev` as a table indexed by event type, with integer task keys,
    // unless a user view replaced it.
    let indexed = catalog.remove_embedded_view("ev");
    if indexed {
        catalog.use_native_views();
    }
    let ctx = loaded_session(cfg, &ingested.events, ingested, indexed)?;
    let later = LoadedReadings {
        cfg,
        ingested,
        indexed,
    };
    audit_session(cfg, &catalog, &ctx, inputs, &Materialize::InMemory, &later).await
}

/// A session over loaded tables whose `events` are `events` (the log's,
/// or a reading's of them), with `ev` indexed when `indexed`.
fn loaded_session(
    cfg: &AuditConfig,
    events: &[datafusion::arrow::record_batch::RecordBatch],
    ingested: &Ingested,
    indexed: bool,
) -> Result<SessionContext, AuditError> {
    let ctx = engine::session(&cfg.rule_engine_options())?;
    // Long text as views: a join then copies 16 bytes of it, not the text.
    let events = engine::long_text_as_views(events)?;
    let evidence = engine::long_text_as_views(&ingested.evidence)?;
    let tables = Ingested {
        events,
        evidence,
        bad_lines: ingested.bad_lines.clone(),
        ..Default::default()
    };
    engine::register_tables(&ctx, &tables)?;
    if indexed {
        let started = std::time::Instant::now();
        let table = rules::ev_table::EvTable::new(&ctx, &tables.events)?;
        crate::progress::timing("view", "ev (indexed)", started);
        ctx.register_table("ev", Arc::new(table))?;
    }
    engine::register_settings(&ctx, &cfg.rule_settings())?;
    Ok(ctx)
}

/// The readings of later versions of a loaded audit: the loaded batches,
/// their version numbers swapped.
struct LoadedReadings<'a> {
    cfg: &'a AuditConfig,
    ingested: &'a Ingested,
    indexed: bool,
}

impl rules::readings::Sessions for LoadedReadings<'_> {
    fn session<'a>(
        &'a self,
        swaps: &'a rules::readings::Swaps,
        _reading: u32,
    ) -> BoxFuture<'a, datafusion::error::Result<(SessionContext, Materialize)>> {
        Box::pin(async move {
            let events = rules::readings::swapped_batches(&self.ingested.events, swaps);
            let ctx = loaded_session(self.cfg, &events, self.ingested, self.indexed)
                .map_err(|e| datafusion::error::DataFusionError::External(Box::new(e)))?;
            Ok((ctx, Materialize::InMemory))
        })
    }

    fn reduced<'a>(
        &'a self,
        part: &'a rules::readings::Neighbourhood,
    ) -> BoxFuture<'a, datafusion::error::Result<SessionContext>> {
        Box::pin(async move { reduced_session(self.cfg, part) })
    }
}

/// A session in memory over a reading's neighbourhood, `log_end` the whole
/// log's (`readings::Neighbourhood`).
fn reduced_session(
    cfg: &AuditConfig,
    part: &rules::readings::Neighbourhood,
) -> datafusion::error::Result<SessionContext> {
    let tables = Ingested {
        evidence: part.evidence.clone(),
        ..Default::default()
    };
    let ctx = loaded_session(cfg, &part.events, &tables, false)
        .map_err(|e| datafusion::error::DataFusionError::External(Box::new(e)))?;
    if let Some(first) = part.log_end.first() {
        let table =
            datafusion::datasource::MemTable::try_new(first.schema(), vec![part.log_end.clone()])?;
        ctx.register_table("log_end", Arc::new(table))?;
    }
    Ok(ctx)
}

/// Run the rules over `convert`'s Parquet where it lies: every query scans
/// the files and nothing is loaded up front. The engine's memory limit
/// bounds the query operators; the materialized views (per task, token or
/// lifecycle event) are written as Parquet beside the spill files.
async fn audit_parquet_inputs(
    cfg: &AuditConfig,
    catalog: &Catalog,
    files: &crate::layout::in_place::ParquetInputs,
    tables: &Tables,
) -> Result<Report, AuditError> {
    let ctx = engine::session(&cfg.rule_engine_options())?;
    let dir = cfg.spill_dir_or_default();
    let views = Materialize::OnDisk(Arc::new(rules::ViewFiles::in_dir(dir)));
    audit_files(cfg, catalog, &ctx, files, tables, &views, None).await
}

/// Register `convert`'s files found by `scan_inputs` in `ctx` and audit them.
async fn audit_files(
    cfg: &AuditConfig,
    catalog: &Catalog,
    ctx: &SessionContext,
    files: &crate::layout::in_place::ParquetInputs,
    tables: &Tables,
    materialize: &Materialize,
    cluster: Option<&str>,
) -> Result<Report, AuditError> {
    crate::tables::register_files(ctx, files, materialize).await?;
    // After the registration: repeats across convert runs counted once.
    let inputs = tables.inputs();
    engine::register_settings(ctx, &cfg.rule_settings())?;
    let later = FileReadings {
        cfg,
        files,
        cluster,
    };
    audit_session(cfg, catalog, ctx, inputs, materialize, &later).await
}

/// The readings of later versions of an audit of `convert`'s files (in
/// place or on a cluster): `events` a view over the files, its version
/// numbers swapped, and the views written to a place of the reading's own.
struct FileReadings<'a> {
    cfg: &'a AuditConfig,
    files: &'a crate::layout::in_place::ParquetInputs,
    /// The cluster's scheduler, when the audit runs on one.
    cluster: Option<&'a str>,
}

impl rules::readings::Sessions for FileReadings<'_> {
    fn session<'a>(
        &'a self,
        swaps: &'a rules::readings::Swaps,
        _reading: u32,
    ) -> BoxFuture<'a, datafusion::error::Result<(SessionContext, Materialize)>> {
        use datafusion::error::DataFusionError;
        Box::pin(async move {
            let (ctx, materialize) = match self.cluster {
                #[cfg(feature = "cluster")]
                Some(url) => {
                    let failed = |e: anyhow::Error| DataFusionError::Execution(format!("{e:#}"));
                    let spill_dir = self.cfg.reading.memory.spill_dir.as_deref();
                    let (ctx, scratch) =
                        crate::cluster::session(url, spill_dir, &self.cfg.reading.inputs)
                            .await
                            .map_err(failed)?;
                    (ctx, Materialize::OnCluster(scratch))
                }
                _ => {
                    let ctx = engine::session(&self.cfg.rule_engine_options())?;
                    let dir = self.cfg.spill_dir_or_default();
                    let views = Materialize::OnDisk(Arc::new(rules::ViewFiles::in_dir(dir)));
                    (ctx, views)
                }
            };
            crate::tables::register_files(&ctx, self.files, &materialize).await?;
            if let Some(all) = ctx.deregister_table("events")? {
                ctx.register_table("events_every_version", all)?;
                let view = rules::readings::swapped_view("events_every_version", swaps);
                ctx.register_table("events", ctx.sql(&view).await?.into_view())?;
            }
            engine::register_settings(&ctx, &self.cfg.rule_settings())
                .map_err(|e| DataFusionError::External(Box::new(e)))?;
            Ok((ctx, materialize))
        })
    }

    fn reduced<'a>(
        &'a self,
        part: &'a rules::readings::Neighbourhood,
    ) -> BoxFuture<'a, datafusion::error::Result<SessionContext>> {
        // In memory, as a loaded audit's.
        Box::pin(async move { reduced_session(self.cfg, part) })
    }
}

/// How a cluster audit makes and reads an audit's errors.
#[cfg(feature = "cluster")]
impl crate::cluster::AuditFailure for AuditError {
    fn setup(e: anyhow::Error) -> AuditError {
        AuditError::Usage(format!("{e:#}"))
    }

    fn engine_message(&self) -> Option<String> {
        match self {
            AuditError::Engine(e) => Some(e.to_string()),
            _ => None,
        }
    }
}

impl From<crate::tables::TablesError> for AuditError {
    fn from(e: crate::tables::TablesError) -> AuditError {
        match e {
            crate::tables::TablesError::Input(e) => AuditError::Input(e),
            crate::tables::TablesError::Usage(e) => AuditError::Usage(e),
            // Handled where the tables are placed (read again, to disk).
            e @ crate::tables::TablesError::OverBudget => AuditError::Usage(e.to_string()),
        }
    }
}

/// The report's count of decision bases that name no event: read whatever
/// rules run.
const UNRESOLVED_BASES: &str = "SELECT count(*) FROM unresolved_basis";

/// The rules, the span and the histogram over a session whose `events`,
/// `evidence` and `bad_lines` are registered.
async fn audit_session(
    cfg: &AuditConfig,
    catalog: &Catalog,
    ctx: &SessionContext,
    inputs: Vec<InputSummary>,
    materialize: &Materialize,
    later: &dyn rules::readings::Sessions,
) -> Result<Report, AuditError> {
    let bar = crate::progress::rules_bar(cfg.reading.notices == Notices::All, catalog.rules.len());
    let window = rules::Window {
        since: cfg.since,
        until: cfg.until,
    };
    let first = rules::first_reading(ctx, catalog, materialize, &bar).await;
    // Counted while the views are registered (the readings may let go of
    // them). A count that fails is reported beside the rules that failed
    // (the run then fails too), not shown as none.
    let unresolved_basis = count(ctx, UNRESOLVED_BASES).await;
    let run = rules::finish(ctx, catalog, first, window, Some(later)).await;
    let windowed = cfg.since.is_some() || cfg.until.is_some();
    let outside_window = windowed.then_some(run.outside_window);
    let mut rule_errors = run.errors;
    let findings = run.findings;
    let unresolved_basis = match unresolved_basis {
        Ok(n) => n,
        Err(e) => {
            let error = format!("counting the unresolved decision bases: {e}");
            rule_errors.push(("unresolved_basis".into(), error));
            0
        }
    };
    let span = span(ctx).await?;
    let timeline_buckets = buckets(ctx, &span, &findings).await?;
    Ok(Report {
        gate: Default::default(),
        tool: "hvaudit".into(),
        version: env!("CARGO_PKG_VERSION").into(),
        inputs,
        span,
        rules: catalog.rules.iter().map(|r| r.meta.clone()).collect(),
        unresolved_basis,
        findings,
        rule_errors,
        timeline_buckets,
        outside_window,
        readings: run.readings,
    })
}

/// How many buckets the events-over-time histogram aims for.
const BUCKETS: i64 = 60;

/// Events (one SQL query) and findings (by `at`) in about `BUCKETS` equal
/// buckets over the span, each a whole number of milliseconds wide.
async fn buckets(
    ctx: &SessionContext,
    span: &Span,
    findings: &Findings,
) -> datafusion::error::Result<Vec<TimeBucket>> {
    let (Some(from), Some(to)) = (span.from, span.to) else {
        return Ok(Vec::new());
    };
    let (min, max) = (from.timestamp_micros(), to.timestamp_micros());
    let range = max - min + 1;
    let width = ((range + BUCKETS - 1) / BUCKETS + 999) / 1000 * 1000;
    let n = ((range + width - 1) / width) as usize;
    let sql = format!(
        "SELECT (created_us - {min}) / {width} AS bucket, count(*) AS n \
         FROM events WHERE version = 1 GROUP BY (created_us - {min}) / {width}"
    );
    let mut out: Vec<TimeBucket> = (0..n)
        .map(|i| {
            let start = min + i as i64 * width;
            TimeBucket {
                from: DateTime::from_timestamp_micros(start),
                to: DateTime::from_timestamp_micros(start + width),
                events: 0,
                findings: 0,
            }
        })
        .collect();
    for b in ctx.sql(&sql).await?.collect().await? {
        let bucket = b.column(0).as_primitive::<Int64Type>();
        let count = b.column(1).as_primitive::<Int64Type>();
        for r in 0..b.num_rows() {
            let i = bucket.value(r).clamp(0, n as i64 - 1) as usize;
            out[i].events += count.value(r).max(0) as u64;
        }
    }
    for f in findings.keys() {
        if let Some(at) = f.at {
            let i = ((at.timestamp_micros() - min) / width).clamp(0, n as i64 - 1) as usize;
            out[i].findings += 1;
        }
    }
    Ok(out)
}

async fn count(ctx: &SessionContext, sql: &str) -> datafusion::error::Result<u64> {
    let batches = ctx.sql(sql).await?.collect().await?;
    // count(*) is one row of one int64, whatever the table holds.
    let n = batches
        .iter()
        .find(|b| b.num_rows() > 0)
        .map(|b| b.column(0).as_primitive::<Int64Type>().value(0))
        .expect("count(*) gives a row");
    Ok(n.max(0) as u64)
}

async fn span(ctx: &SessionContext) -> datafusion::error::Result<Span> {
    let batches = ctx
        .sql("SELECT min(created_us), max(created_us) FROM events")
        .await?
        .collect()
        .await?;
    let at = |col: usize| {
        batches.first().and_then(|b| {
            let a = b.column(col).as_primitive::<Int64Type>();
            (!a.is_null(0))
                .then(|| DateTime::from_timestamp_micros(a.value(0)))
                .flatten()
        })
    };
    Ok(Span {
        from: at(0),
        to: at(1),
    })
}
