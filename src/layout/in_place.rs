//! `convert`'s Parquet used where it lies: each file registered as part of a
//! listing table (`events`, `evidence`, `bad_lines`) that every query scans
//! from disk, instead of being loaded into memory. A Ballista cluster reads
//! the tables this way, and so does a local `audit --in-place`, for logs
//! larger than memory.

use crate::InputSummary;
use crate::ingest::authentic::authenticate_each;
use crate::ingest::inputs::{self, LogFormat, Skipped};
use crate::ingest::parquet::{OwnTable, check_seqs_disjoint, describe_own};
use crate::ingest::runs::{self, Overlap};
use crate::ingest::schema::{BAD_LINES, EVENTS, EVIDENCE, NS_COLUMNS};
use crate::store_key::{KeySource, Unauthenticated};
use datafusion::arrow::datatypes::SchemaRef;
use datafusion::arrow::record_batch::RecordBatch;
use datafusion::common::{Column, DFSchema};
use datafusion::datasource::file_format::parquet::ParquetFormat;
use datafusion::datasource::listing::{
    ListingOptions, ListingTable, ListingTableConfig, ListingTableUrl,
};
use datafusion::error::{DataFusionError, Result};
use datafusion::logical_expr::{EmptyRelation, LogicalPlan};
use datafusion::prelude::{DataFrame, SessionContext};
use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::Arc;

/// `convert`'s files named on the command line, sorted by table, with the
/// accounting a local read of the same files would report.
#[derive(Debug, Default)]
pub struct ParquetInputs {
    pub tables: BTreeMap<&'static str, Vec<PathBuf>>,
    /// Some events file is of a layout before 3 (no nanosecond columns).
    pub micros_only: bool,
    pub inputs: Vec<InputSummary>,
    pub skipped: Vec<Skipped>,
    /// The convert runs the events files come from (a file of no recorded
    /// run counts as one of its own).
    runs: usize,
    /// Per events file: its seqs' range and its input's index.
    seq_ranges: Vec<(i64, i64, usize)>,
    /// Ids kept by more than one run, once looked up (`runs::overlap`).
    overlap: tokio::sync::OnceCell<Option<Arc<Overlap>>>,
    /// Where a cluster reads their kept rows from, once written.
    kept_at: tokio::sync::OnceCell<String>,
}

/// Writes the kept rows of ids stored by more than one run where a
/// cluster's executors read them, and says where.
pub type PlaceRows<'a> = &'a (dyn Fn(&[RecordBatch]) -> Result<String> + Sync);

impl ParquetInputs {
    /// The inputs' accounting as a read of them together gives it: with
    /// repeats across runs counted once (after `register_tables`).
    pub fn inputs_as_read(&self) -> Vec<InputSummary> {
        let mut inputs = self.inputs.clone();
        if let Some(Some(overlap)) = self.overlap.get() {
            overlap.apply(&mut inputs);
        }
        inputs
    }

    fn input_of(&self, seq: i64) -> Option<usize> {
        self.seq_ranges
            .iter()
            .find(|(lo, hi, _)| (*lo..=*hi).contains(&seq))
            .map(|(_, _, input)| *input)
    }
}

/// Find and describe the Parquet files under `paths`. Each must be
/// `convert`'s output, and files from different convert runs must not
/// share seqs (each shard converted with its own `--shard`).
pub fn scan_inputs(
    paths: &[PathBuf],
    allow_empty: bool,
    allow_unreadable: bool,
    keys: &KeySource,
) -> anyhow::Result<ParquetInputs> {
    let (found, skipped) = inputs::expand(paths, allow_empty, allow_unreadable)?;
    let mut out = ParquetInputs {
        skipped,
        ..Default::default()
    };
    let mut ranges: Vec<(Option<String>, (i64, i64), String)> = Vec::new();
    let mut runs = std::collections::BTreeSet::new();
    for input in &found {
        if input.stream.is_some() {
            anyhow::bail!(
                "{}: a cluster or --in-place reads Parquet files, not a stream; convert it first \
                 (`hvaudit convert - -o DIR`), then audit DIR",
                input.display
            );
        }
        if input.format != LogFormat::Parquet {
            anyhow::bail!(
                "{}: a cluster or --in-place reads Parquet written by `hvaudit convert`, not {}; \
                 convert it first (hvaudit convert LOGS -o DIR), for a cluster to storage every executor can read",
                input.display,
                input.format.name()
            );
        }
    }
    let started = std::time::Instant::now();
    let mut checks = authenticate_each(&found, keys).into_iter();
    crate::progress::timing("in place", "authenticate", started);
    for input in &found {
        let file = describe_own(input).map_err(|e| anyhow::anyhow!("{}: {e}", input.display))?;
        // The files are queried as they are stored, their claims believed:
        // only those convert is shown to have written.
        match checks.next().expect("a check per input") {
            Ok(()) => {}
            Err(Unauthenticated::Missing(why)) => anyhow::bail!(
                "{}: in convert's layout, but {why}; a cluster or --in-place reads only files \
                 convert is shown to have written (a loaded audit, without --in-place, reads \
                 it as Parquet from elsewhere, with every check)",
                input.display
            ),
            Err(Unauthenticated::Failed(why)) => {
                anyhow::bail!("{} is in convert's layout, but {why}", input.display)
            }
        }
        // Executors open the files themselves: give them absolute paths
        // (objects by their URL, read through `object_storage::UrlStores`).
        let path = match &input.object {
            Some(object) => PathBuf::from(&object.url),
            None => std::fs::canonicalize(&input.path)?,
        };
        let table = match file.table {
            OwnTable::Events => "events",
            OwnTable::Evidence => "evidence",
            OwnTable::BadLines => "bad_lines",
        };
        out.tables.entry(table).or_default().push(path);
        out.micros_only |= file.micros_only;
        if let (Some(seqs), OwnTable::Events | OwnTable::BadLines) = (file.seqs, file.table) {
            ranges.push((file.run.clone(), seqs, input.display.clone()));
        }
        if let (Some((lo, hi)), OwnTable::Events) = (file.seqs, file.table) {
            out.seq_ranges.push((lo, hi, out.inputs.len()));
            runs.insert(file.run.clone().unwrap_or_else(|| input.display.clone()));
        }
        out.inputs.push(file.summary);
    }
    check_seqs_disjoint(&ranges)?;
    out.runs = runs.len();
    Ok(out)
}

/// Register the three tables over the files (an empty table when a run
/// wrote none, e.g. no rejected lines); ids kept by more than one run are
/// read as one read of the runs together keeps them, their kept rows held
/// in memory.
pub async fn register_tables(ctx: &SessionContext, files: &ParquetInputs) -> Result<()> {
    register_tables_placing(ctx, files, None).await
}

/// `register_tables`, with the kept rows of ids stored by more than one
/// run written by `place` (a cluster's executors cannot read rows held by
/// the client).
pub async fn register_tables_placing(
    ctx: &SessionContext,
    files: &ParquetInputs,
    place: Option<PlaceRows<'_>>,
) -> Result<()> {
    register_stored(ctx, files)?;
    if files.runs < 2 {
        return Ok(());
    }
    let overlap = files
        .overlap
        .get_or_try_init(|| async {
            let found = runs::overlap(ctx, |seq| files.input_of(seq)).await?;
            Ok::<_, datafusion::error::DataFusionError>(found.map(Arc::new))
        })
        .await?;
    let Some(overlap) = overlap else {
        return Ok(());
    };
    let kept: Arc<dyn datafusion::catalog::TableProvider> = match place {
        None => Arc::new(datafusion::datasource::MemTable::try_new(
            EVENTS.clone(),
            vec![overlap.rows.clone()],
        )?),
        Some(place) => {
            let at = files
                .kept_at
                .get_or_try_init(|| async { place(&overlap.rows) })
                .await?;
            Arc::new(listing(&[PathBuf::from(at)], EVENTS.clone())?)
        }
    };
    for (name, view) in [
        (
            "events",
            runs::events_view("events_stored", "events_kept", overlap),
        ),
        ("evidence", runs::evidence_view("evidence_stored", overlap)),
    ] {
        if let Some(stored) = ctx.deregister_table(name)? {
            ctx.register_table(format!("{name}_stored").as_str(), stored)?;
        }
        if name == "events" {
            ctx.register_table("events_kept", Arc::clone(&kept))?;
        }
        ctx.register_table(name, ctx.sql(&view).await?.into_view())?;
    }
    Ok(())
}

/// The three tables over the files as stored.
fn register_stored(ctx: &SessionContext, files: &ParquetInputs) -> Result<()> {
    for (name, schema) in [
        ("events", EVENTS.clone()),
        ("evidence", EVIDENCE.clone()),
        ("bad_lines", BAD_LINES.clone()),
    ] {
        let paths = files.tables.get(name).cloned().unwrap_or_default();
        ctx.deregister_table(name)?;
        if paths.is_empty() {
            let empty = LogicalPlan::EmptyRelation(EmptyRelation {
                produce_one_row: false,
                schema: Arc::new(DFSchema::try_from(schema.as_ref().clone())?),
            });
            ctx.register_table(name, DataFrame::new(ctx.state(), empty).into_view())?;
            continue;
        }
        if name == "events" && files.micros_only {
            ctx.register_table(name, with_nanoseconds_of_micros(ctx, &paths)?)?;
            continue;
        }
        ctx.register_table(name, Arc::new(listing(&paths, schema)?))?;
    }
    Ok(())
}

/// `events` over files some of which predate the nanosecond columns
/// (layouts 1 and 2): those read as null there, and a view fills each with
/// its microsecond column times 1000, past i64 its nearest end, as a loaded
/// read of the same files does (`parquet::as_events_layout`). Only such
/// inputs pay for the view.
fn with_nanoseconds_of_micros(
    ctx: &SessionContext,
    paths: &[PathBuf],
) -> Result<Arc<dyn datafusion::catalog::TableProvider>> {
    use datafusion::arrow::datatypes::{DataType, Field, Schema};
    use datafusion::prelude::{cast, coalesce, col, lit, when};
    let stored = EVENTS
        .fields()
        .iter()
        .map(|f| match NS_COLUMNS.iter().any(|(ns, _)| f.name() == ns) {
            true => Arc::new(Field::new(f.name(), DataType::Int64, true)),
            false => Arc::clone(f),
        })
        .collect::<Vec<_>>();
    let table = listing(paths, Arc::new(Schema::new(stored)))?;
    let columns = EVENTS.fields().iter().map(|f| {
        let name = f.name().as_str();
        match NS_COLUMNS.iter().find(|(ns, _)| *ns == name) {
            Some((ns, us)) => {
                let us = cast(col(Column::from_name(*us)), DataType::Int64);
                let ns_of_us = when(us.clone().gt(lit(i64::MAX / 1000)), lit(i64::MAX))
                    .when(us.clone().lt(lit(i64::MIN / 1000)), lit(i64::MIN))
                    .otherwise(us * lit(1000i64))
                    .expect("a CASE with branches");
                coalesce(vec![col(Column::from_name(*ns)), ns_of_us]).alias(*ns)
            }
            None => col(Column::from_name(name)),
        }
    });
    let view = ctx
        .read_table(Arc::new(table))?
        .select(columns.collect::<Vec<_>>())?;
    Ok(view.into_view())
}

fn listing(paths: &[PathBuf], schema: SchemaRef) -> Result<ListingTable> {
    let urls = paths
        .iter()
        .map(|p| {
            let text = p.to_str().ok_or_else(|| {
                DataFusionError::Plan(format!("{}: path is not UTF-8", p.display()))
            })?;
            ListingTableUrl::parse(text)
        })
        .collect::<Result<Vec<_>>>()?;
    let options =
        ListingOptions::new(Arc::new(ParquetFormat::default())).with_file_extension(".parquet");
    let config = ListingTableConfig::new_with_multi_paths(urls)
        .with_listing_options(options)
        .with_schema(schema);
    ListingTable::try_new(config)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every pair, as the check was written before the sweep.
    fn any_clash(ranges: &[(Option<String>, (i64, i64), String)]) -> bool {
        ranges
            .iter()
            .enumerate()
            .any(|(i, (run_a, (lo_a, hi_a), _))| {
                ranges[i + 1..]
                    .iter()
                    .any(|(run_b, (lo_b, hi_b), _)| run_a != run_b && lo_a <= hi_b && lo_b <= hi_a)
            })
    }

    #[test]
    fn the_sweep_finds_exactly_the_overlaps_of_different_runs() {
        let mut state = 0x9e37_79b9_7f4a_7c15u64;
        let mut next = |n: u64| {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            state % n
        };
        let (mut clashes, mut clean) = (0, 0);
        for _ in 0..3000 {
            let count = 1 + next(6) as usize;
            let ranges: Vec<_> = (0..count)
                .map(|i| {
                    let run = match next(4) {
                        0 => None,
                        r => Some(format!("run{r}")),
                    };
                    let lo = next(40) as i64;
                    (run, (lo, lo + next(8) as i64), format!("f{i}"))
                })
                .collect();
            let expected = any_clash(&ranges);
            assert_eq!(
                check_seqs_disjoint(&ranges).is_err(),
                expected,
                "{ranges:?}"
            );
            if expected {
                clashes += 1;
            } else {
                clean += 1;
            }
        }
        assert!(clashes > 100 && clean > 100, "{clashes} / {clean}");
    }
}
