//! `convert`'s Parquet used where it lies: each file registered as part of a
//! listing table (`events`, `evidence`, `bad_lines`) that every query scans
//! from disk, instead of being loaded into memory. A Ballista cluster reads
//! the tables this way, and so does a local `audit --in-place`, for logs
//! larger than memory.

use super::inputs::{self, Format, Skipped};
use super::parquet::{OwnTable, describe_own};
use super::schema::{BAD_LINES, EVENTS, EVIDENCE};
use crate::InputSummary;
use datafusion::arrow::datatypes::SchemaRef;
use datafusion::common::DFSchema;
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
    pub inputs: Vec<InputSummary>,
    pub skipped: Vec<Skipped>,
}

/// Find and describe the Parquet files under `paths`. Each must be
/// `convert`'s output, and files from different convert runs must not
/// share seqs (each shard converted with its own `--shard`).
pub fn scan_inputs(paths: &[PathBuf]) -> anyhow::Result<ParquetInputs> {
    let (found, skipped) = inputs::expand(paths)?;
    let mut out = ParquetInputs {
        skipped,
        ..Default::default()
    };
    let mut ranges: Vec<(Option<String>, (i64, i64), String)> = Vec::new();
    for input in &found {
        if input.format != Format::Parquet {
            anyhow::bail!(
                "{}: a cluster or --in-place reads Parquet written by `hvaudit convert`, not {}; \
                 convert it first (hvaudit convert LOGS -o DIR), for a cluster to storage every executor can read",
                input.display,
                input.format.name()
            );
        }
        let file = describe_own(input).map_err(|e| anyhow::anyhow!("{}: {e}", input.display))?;
        // Executors open the files themselves: give them absolute paths.
        let path = std::fs::canonicalize(&input.path)?;
        let table = match file.table {
            OwnTable::Events => "events",
            OwnTable::Evidence => "evidence",
            OwnTable::BadLines => "bad_lines",
        };
        out.tables.entry(table).or_default().push(path);
        if let (Some(seqs), OwnTable::Events | OwnTable::BadLines) = (file.seqs, file.table) {
            ranges.push((file.run.clone(), seqs, input.display.clone()));
        }
        out.inputs.push(file.summary);
    }
    check_seqs_disjoint(&ranges)?;
    Ok(out)
}

/// Seqs identify events in every rule; files of one run never share one,
/// but two runs without distinct `--shard` numbers would.
fn check_seqs_disjoint(ranges: &[(Option<String>, (i64, i64), String)]) -> anyhow::Result<()> {
    for (i, (run_a, (lo_a, hi_a), a)) in ranges.iter().enumerate() {
        for (run_b, (lo_b, hi_b), b) in &ranges[i + 1..] {
            if run_a != run_b && lo_a <= hi_b && lo_b <= hi_a {
                anyhow::bail!(
                    "{a} and {b} come from different convert runs with overlapping seqs; \
                     convert each shard with its own --shard N (0..2047) so events keep distinct seqs"
                );
            }
        }
    }
    Ok(())
}

/// Register the three tables over the files (an empty table when a run
/// wrote none, e.g. no rejected lines).
pub async fn register_tables(ctx: &SessionContext, files: &ParquetInputs) -> Result<()> {
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
        ctx.register_table(name, Arc::new(listing(&paths, schema)?))?;
    }
    Ok(())
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
