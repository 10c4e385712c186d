//! The DataFusion session: memory pool with spill to disk, the normalized
//! tables, the settings tables the rules read, the JSON functions for ad hoc
//! SQL, extra settings from `HVAUDIT_SESSION_SETTINGS`, and the join-key
//! casts that let every join strategy run on the category columns.

use crate::ingest::Ingested;
use crate::ingest::schema::{BAD_LINES, EVENTS, EVIDENCE};
use crate::protocol::{SpecMode, TokenFormat};
use datafusion::arrow::array::{ArrayRef, AsArray};
use datafusion::arrow::datatypes::{DataType, SchemaRef};
use datafusion::arrow::record_batch::RecordBatch;
use datafusion::common::ScalarValue;
use datafusion::common::tree_node::Transformed;
use datafusion::datasource::MemTable;
use datafusion::error::{DataFusionError, Result};
use datafusion::execution::runtime_env::RuntimeEnvBuilder;
use datafusion::logical_expr::{Expr, ExprSchemable, LogicalPlan, LogicalPlanBuilder, cast};
use datafusion::optimizer::{ApplyOrder, OptimizerConfig, OptimizerRule};
use datafusion::prelude::{DataFrame, SessionConfig, SessionContext, col, lit};
use std::path::PathBuf;
use std::sync::Arc;

/// The decision and irreversible-action types when the user names none.
pub const DEFAULT_DECISION_TYPES: [&str; 5] = [
    "agent.decision.recorded",
    "tool.call.requested",
    "command.requested",
    "delegation.handoff.completed",
    "compensation.requested",
];

/// The query engine's memory.
#[derive(Debug, Clone, Default)]
pub struct MemoryOptions {
    /// Bytes for the query engine; beyond it, it spills to disk.
    pub limit: Option<u64>,
    /// Where spill files, the views computed in place and a log read to
    /// disk go (default: the system temp directory).
    pub spill_dir: Option<PathBuf>,
    /// The memory this machine has available, when the caller knows
    /// better than the system (None: `tables::memory::available`); without a
    /// `limit`, a log whose loaded table would not fit it is read to disk.
    pub available: Option<u64>,
}

impl MemoryOptions {
    /// `spill_dir`, else the system temp directory.
    pub fn spill_dir_or_default(&self) -> PathBuf {
        self.spill_dir.clone().unwrap_or_else(std::env::temp_dir)
    }

    /// The engine's settings (partitions: one per core).
    pub fn engine(&self) -> EngineOptions {
        EngineOptions {
            memory: self.clone(),
            partitions: None,
        }
    }
}

/// Session-wide settings.
#[derive(Debug, Clone, Default)]
pub struct EngineOptions {
    /// The memory pool's size and where operators spill beyond it.
    pub memory: MemoryOptions,
    /// Partitions per query; by default one per core.
    pub partitions: Option<usize>,
}

/// What the rules read from the `settings` and `decision_types` tables.
#[derive(Debug, Clone, Default)]
pub struct RuleSettings {
    pub spec: SpecMode,
    pub horizon_ms: Option<i64>,
    pub token_format: TokenFormat,
    pub decision_types: Option<Vec<String>>,
}

/// A fresh session with our configuration and the JSON functions (and,
/// under a memory limit, the functions that could build more than it
/// refusing to).
pub fn session(opts: &EngineOptions) -> Result<SessionContext> {
    // s3://, gs://, az:// and https:// tables (`--in-place` over objects).
    let mut runtime = RuntimeEnvBuilder::new()
        .with_object_store_registry(Arc::new(crate::object_storage::UrlStores::default()));
    if let Some(limit) = opts.memory.limit {
        runtime = runtime.with_memory_limit(usize::try_from(limit).unwrap_or(usize::MAX), 1.0);
    }
    if let Some(dir) = &opts.memory.spill_dir {
        runtime = runtime.with_temp_file_path(dir.clone());
    }
    let cores = std::thread::available_parallelism().map_or(2, |n| n.get());
    let config = SessionConfig::new()
        .with_target_partitions(opts.partitions.unwrap_or(cores).max(1))
        .with_information_schema(true);
    let config = with_extra_settings(config)?;
    let mut ctx = SessionContext::new_with_config_rt(config, runtime.build_arc()?);
    ctx.add_optimizer_rule(Arc::new(SortableJoinKeys));
    datafusion_functions_json::register_all(&mut ctx)?;
    crate::amplifying_functions::register(&ctx, opts.memory.limit)?;
    Ok(ctx)
}

/// The environment variable with extra DataFusion settings for every session
/// hvaudit opens (local or cluster): `key=value` pairs separated by commas,
/// e.g. `datafusion.optimizer.prefer_hash_join=false,datafusion.execution.batch_size=64`.
/// They apply after hvaudit's own choices (one partition per rule query),
/// and a cluster client sends them to the scheduler with every job. For
/// trying other plans: the tests run the rules with the plans big inputs
/// get (sort-merge joins, many partitions, small batches) this way.
pub const SETTINGS_VAR: &str = "HVAUDIT_SESSION_SETTINGS";

/// `config` with the settings of `HVAUDIT_SESSION_SETTINGS` applied; an
/// unknown key or a bad value is an error that names the variable.
pub fn with_extra_settings(mut config: SessionConfig) -> Result<SessionConfig> {
    let Ok(text) = std::env::var(SETTINGS_VAR) else {
        return Ok(config);
    };
    for pair in text.split(',').map(str::trim).filter(|p| !p.is_empty()) {
        let bad = |why: String| {
            DataFusionError::Configuration(format!("{SETTINGS_VAR}: {pair:?}: {why}"))
        };
        let (key, value) = pair
            .split_once('=')
            .ok_or_else(|| bad("expected key=value".into()))?;
        config
            .options_mut()
            .set(key.trim(), value.trim())
            .map_err(|e| bad(e.to_string()))?;
    }
    Ok(config)
}

/// Casts equi-join keys that DataFusion's sort-merge join cannot compare
/// (it fails with "Unsupported data type in sort merge join comparator") to
/// types it can, with the same equality: a dictionary (the category columns
/// `type`, `source`, `dialect`, ...) to its values, a timestamp with a time
/// zone to its number. Only where a sort-merge join may be planned, i.e.
/// when the session does not prefer hash joins (a Ballista session's
/// default: its planner sorts and merges the joins whose sides are too big
/// to broadcast); hash joins take these keys as they are, and faster.
#[derive(Debug, Default)]
pub struct SortableJoinKeys;

impl SortableJoinKeys {
    /// The type a key of type `t` is compared as, when `t` needs a cast.
    fn comparable(t: &DataType) -> Option<DataType> {
        match t {
            DataType::Dictionary(_, values) => {
                Some(Self::comparable(values).unwrap_or_else(|| values.as_ref().clone()))
            }
            DataType::Timestamp(_, Some(_)) => Some(DataType::Int64),
            _ => None,
        }
    }
}

impl OptimizerRule for SortableJoinKeys {
    fn name(&self) -> &str {
        "hvaudit_sortable_join_keys"
    }

    fn apply_order(&self) -> Option<ApplyOrder> {
        Some(ApplyOrder::BottomUp)
    }

    fn rewrite(
        &self,
        plan: LogicalPlan,
        config: &dyn OptimizerConfig,
    ) -> Result<Transformed<LogicalPlan>> {
        if config.options().optimizer.prefer_hash_join {
            return Ok(Transformed::no(plan));
        }
        let LogicalPlan::Join(mut join) = plan else {
            return Ok(Transformed::no(plan));
        };
        let (left, right) = (join.left.schema().clone(), join.right.schema().clone());
        let mut changed = false;
        for (l, r) in &mut join.on {
            let (lt, rt) = (l.get_type(&left)?, r.get_type(&right)?);
            let Some(target) = Self::comparable(&lt).or_else(|| Self::comparable(&rt)) else {
                continue;
            };
            // Both sides as one type, whichever needed the cast.
            if lt != target {
                *l = cast(l.clone(), target.clone());
            }
            if rt != target {
                *r = cast(r.clone(), target);
            }
            changed = true;
        }
        // The keys are not output columns: the join's schema stays.
        Ok(if changed {
            Transformed::yes(LogicalPlan::Join(join))
        } else {
            Transformed::no(LogicalPlan::Join(join))
        })
    }
}

/// Register `events`, `evidence` and `bad_lines`, split into partitions so
/// scans run on every core.
pub fn register_tables(ctx: &SessionContext, ingested: &Ingested) -> Result<()> {
    let parts = ctx.state().config().target_partitions().max(1);
    register(ctx, "events", EVENTS.clone(), &ingested.events, parts)?;
    register(ctx, "evidence", EVIDENCE.clone(), &ingested.evidence, parts)?;
    register(ctx, "bad_lines", BAD_LINES.clone(), &ingested.bad_lines, 1)?;
    Ok(())
}

fn register(
    ctx: &SessionContext,
    name: &str,
    schema: SchemaRef,
    batches: &[RecordBatch],
    parts: usize,
) -> Result<()> {
    // The batches' own types, where long text made views of some columns.
    let schema = batches.first().map_or(schema, |b| b.schema());
    let mut partitions: Vec<Vec<RecordBatch>> = vec![Vec::new(); parts];
    for (i, b) in batches.iter().enumerate() {
        partitions[i % parts].push(b.clone());
    }
    let table = MemTable::try_new(schema, partitions)?;
    ctx.deregister_table(name)?;
    ctx.register_table(name, Arc::new(table))?;
    Ok(())
}

/// A text value longer than this is moved by a join, a sort or a copy of
/// rows as a 16-byte view into the column's bytes, not as itself.
const LONG_TEXT_BYTES: usize = 1024;

/// `batches` with every text column that holds a value past
/// [`LONG_TEXT_BYTES`] cast to string views; the other columns, and so
/// every column of a log without such values, as they are.
///
/// A join copies the text of every row it outputs: a 16 MiB id that 200
/// findings cite was 3.2 GiB of copies, outside the memory pool. As views
/// it is held once. Views cost 16 bytes a row, so only the columns that
/// need them pay. (`HVAUDIT_TIMING` names them.)
pub(crate) fn long_text_as_views(batches: &[RecordBatch]) -> Result<Vec<RecordBatch>> {
    let started = std::time::Instant::now();
    let Some(schema) = batches.first().map(|b| b.schema()) else {
        return Ok(Vec::new());
    };
    let long: Vec<bool> = (0..schema.fields().len())
        .map(|i| batches.iter().any(|b| has_long_text(b.column(i))))
        .collect();
    if !long.contains(&true) {
        crate::progress::timing("long text", "as string views: none", started);
        return Ok(batches.to_vec());
    }
    let names: Vec<&str> = schema
        .fields()
        .iter()
        .zip(&long)
        .filter_map(|(f, &long)| long.then_some(f.name().as_str()))
        .collect();
    let fields: Vec<_> = schema
        .fields()
        .iter()
        .zip(&long)
        .map(|(f, &long)| match long {
            true => Arc::new(f.as_ref().clone().with_data_type(DataType::Utf8View)),
            false => Arc::clone(f),
        })
        .collect();
    let viewed = Arc::new(datafusion::arrow::datatypes::Schema::new_with_metadata(
        fields,
        schema.metadata().clone(),
    ));
    let batches = batches
        .iter()
        .map(|b| {
            let columns = b
                .columns()
                .iter()
                .zip(&long)
                .map(|(c, &long)| match long {
                    // The cast shares the text's bytes; it writes the views.
                    true => datafusion::arrow::compute::cast(c, &DataType::Utf8View),
                    false => Ok(Arc::clone(c)),
                })
                .collect::<std::result::Result<Vec<_>, _>>()?;
            Ok(RecordBatch::try_new(Arc::clone(&viewed), columns)?)
        })
        .collect::<Result<Vec<_>>>();
    let what = format!("as string views: {}", names.join(", "));
    crate::progress::timing("long text", &what, started);
    batches
}

/// Whether a plain text column holds a value past [`LONG_TEXT_BYTES`].
fn has_long_text(column: &ArrayRef) -> bool {
    let Some(text) = column.as_string_opt::<i32>() else {
        return false;
    };
    let offsets = text.value_offsets();
    // No value is longer than all of them together.
    (offsets[offsets.len() - 1] - offsets[0]) as usize > LONG_TEXT_BYTES
        && offsets
            .windows(2)
            .any(|w| (w[1] - w[0]) as usize > LONG_TEXT_BYTES)
}

/// Register the one-row `settings` view and `decision_types`. They are views
/// over VALUES, not in-memory tables, so the same plans run on a cluster.
pub fn register_settings(ctx: &SessionContext, s: &RuleSettings) -> Result<()> {
    let spec = match s.spec {
        SpecMode::Auto => None,
        SpecMode::V01 => Some("0.1".to_string()),
        SpecMode::V02 => Some("0.2".to_string()),
    };
    let token = match s.token_format {
        TokenFormat::Opaque => "opaque",
        TokenFormat::Structured => "structured",
    };
    let row = vec![
        lit(ScalarValue::Utf8(spec)),
        lit(ScalarValue::Int64(s.horizon_ms)),
        lit(token),
    ];
    let settings = LogicalPlanBuilder::values(vec![row])?
        .project(vec![
            col("column1").alias("spec_override"),
            col("column2").alias("horizon_ms"),
            col("column3").alias("token_format"),
        ])?
        .build()?;
    register_view(ctx, "settings", settings)?;

    let types: Vec<String> = match &s.decision_types {
        Some(t) => t.clone(),
        None => DEFAULT_DECISION_TYPES
            .iter()
            .map(|t| t.to_string())
            .collect(),
    };
    // VALUES needs a row: an empty list is one null row filtered out.
    let rows: Vec<Vec<Expr>> = if types.is_empty() {
        vec![vec![lit(ScalarValue::Utf8(None))]]
    } else {
        types.into_iter().map(|t| vec![lit(t)]).collect()
    };
    let decision_types = LogicalPlanBuilder::values(rows)?
        .filter(col("column1").is_not_null())?
        .project(vec![col("column1").alias("type")])?
        .build()?;
    register_view(ctx, "decision_types", decision_types)
}

fn register_view(ctx: &SessionContext, name: &str, plan: LogicalPlan) -> Result<()> {
    let view = DataFrame::new(ctx.state(), plan).into_view();
    ctx.deregister_table(name)?;
    ctx.register_table(name, view)?;
    Ok(())
}
