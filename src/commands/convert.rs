//! `hvaudit convert`: normalized events to Parquet (zstd). A directory
//! output gets `events/day=YYYY-MM-DD/events-RUN.parquet` (one file per day
//! of created_at), `evidence/evidence-RUN.parquet` and
//! `bad_lines/bad_lines-RUN.parquet`, RUN unique per run so shards converted
//! on many machines can share one directory (each with its own `--shard`, so
//! their seqs differ too). Every file is written under a temporary name and
//! renamed only when all of them are complete.

use crate::cli::ConvertArgs;
use crate::ingest::parquet::{RUN_KEY, TABLE_KEY};
use crate::ingest::schema::{BAD_LINES, EVENTS, EVIDENCE, LAYOUT_KEY, LAYOUT_VERSION, events_col};
use crate::ingest::time::day_of_us;
use datafusion::arrow::array::{Int64Array, RecordBatch, UInt32Array};
use datafusion::arrow::compute::take_record_batch;
use datafusion::arrow::datatypes::SchemaRef;
use datafusion::parquet::arrow::ArrowWriter;
use datafusion::parquet::basic::{Compression, ZstdLevel};
use datafusion::parquet::file::metadata::KeyValue;
use datafusion::parquet::file::properties::WriterProperties;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

/// Rows per row group: the unit readers decode and scan in parallel.
const ROW_GROUP_ROWS: usize = 128 * 1024;

pub fn run(args: ConvertArgs, quiet: bool) -> anyhow::Result<u8> {
    crate::signals::install();
    // The archive keeps every rejected line unless told otherwise.
    let outputs = [("-o", args.output.as_path())];
    let mut ingested = super::load(&args.input, quiet, &outputs, usize::MAX)?;
    if args.shard > 0 {
        shift_seqs(&mut ingested, args.shard)?;
    }
    let run_id = run_id();
    let out = &args.output;
    let single = out.extension().is_some_and(|x| x == "parquet");
    let mut plan: Vec<(PathBuf, &'static str, SchemaRef, Vec<RecordBatch>)> = Vec::new();
    if single {
        plan.push((
            out.clone(),
            "events",
            EVENTS.clone(),
            ingested.events.clone(),
        ));
        let stem = out.file_stem().unwrap_or_default().to_string_lossy();
        if !ingested.evidence.is_empty() {
            plan.push((
                out.with_file_name(format!("{stem}.evidence.parquet")),
                "evidence",
                EVIDENCE.clone(),
                ingested.evidence.clone(),
            ));
        }
        if !ingested.bad_lines.is_empty() {
            plan.push((
                out.with_file_name(format!("{stem}.bad_lines.parquet")),
                "bad_lines",
                BAD_LINES.clone(),
                ingested.bad_lines.clone(),
            ));
        }
    } else {
        std::fs::create_dir_all(out).map_err(|e| {
            anyhow::anyhow!(
                "cannot create {}: {e}; pass a writable directory or a FILE.parquet",
                out.display()
            )
        })?;
        for (day, batches) in split_by_day(&ingested.events)? {
            let dir = out.join("events").join(format!("day={day}"));
            plan.push((
                dir.join(format!("events-{run_id}.parquet")),
                "events",
                EVENTS.clone(),
                batches,
            ));
        }
        if !ingested.evidence.is_empty() {
            plan.push((
                out.join("evidence")
                    .join(format!("evidence-{run_id}.parquet")),
                "evidence",
                EVIDENCE.clone(),
                ingested.evidence.clone(),
            ));
        }
        if !ingested.bad_lines.is_empty() {
            let path = out
                .join("bad_lines")
                .join(format!("bad_lines-{run_id}.parquet"));
            plan.push((
                path,
                "bad_lines",
                BAD_LINES.clone(),
                ingested.bad_lines.clone(),
            ));
        }
    }
    sweep(out, single, quiet);
    write_all(&plan, &run_id)?;
    if !quiet {
        eprintln!(
            "hvaudit: wrote {} Parquet file(s) to {}",
            plan.len(),
            out.display()
        );
    }
    Ok(0)
}

/// Remove what killed runs left where this one writes: the output file's
/// directory, or every directory of the output tree (a run of other days
/// wrote elsewhere in it).
fn sweep(out: &Path, single: bool, quiet: bool) {
    if single {
        let dir = out.parent().filter(|p| !p.as_os_str().is_empty());
        super::report_stale(dir.unwrap_or(Path::new(".")), quiet, true);
        return;
    }
    let dirs = walkdir::WalkDir::new(out)
        .max_depth(3)
        .sort_by_file_name()
        .into_iter()
        .filter_map(Result::ok)
        .filter(|e| e.file_type().is_dir());
    for d in dirs {
        super::report_stale(d.path(), quiet, true);
    }
}

/// Bits of a seq below the shard number: file index (12 bits) and line.
const SHARD_SHIFT: u32 = 52;

/// Put the shard number in the top bits of every seq (events, their
/// evidence rows, bad lines), so shards converted apart never share one.
fn shift_seqs(ing: &mut crate::ingest::Ingested, shard: u16) -> anyhow::Result<()> {
    use datafusion::arrow::array::Array;
    let offset = i64::from(shard) << SHARD_SHIFT;
    let shift = |batches: &mut Vec<RecordBatch>, col: &str| -> anyhow::Result<()> {
        for b in batches.iter_mut() {
            let at = b.schema().index_of(col)?;
            let old = b
                .column(at)
                .as_any()
                .downcast_ref::<Int64Array>()
                .expect("seq is Int64");
            if old.values().iter().any(|v| *v >> SHARD_SHIFT != 0) {
                anyhow::bail!(
                    "--shard needs fewer than 4096 input files per run; convert the shard in parts, \
                     each with its own --shard"
                );
            }
            let new: Int64Array = old.values().iter().map(|v| v | offset).collect();
            let mut cols = b.columns().to_vec();
            cols[at] = std::sync::Arc::new(new);
            *b = RecordBatch::try_new(b.schema(), cols)?;
        }
        Ok(())
    };
    shift(&mut ing.events, "seq")?;
    shift(&mut ing.evidence, "event_seq")?;
    shift(&mut ing.bad_lines, "seq")
}

/// A name part unique across machines and runs: host, process and time.
fn run_id() -> String {
    let host = std::fs::read_to_string("/etc/hostname").unwrap_or_default();
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_nanos())
        .unwrap_or_default();
    let key = format!("{}/{}/{nanos}", host.trim(), std::process::id());
    format!("{:016x}", xxhash_rust::xxh3::xxh3_64(key.as_bytes()))
}

fn split_by_day(batches: &[RecordBatch]) -> anyhow::Result<BTreeMap<String, Vec<RecordBatch>>> {
    let mut days: BTreeMap<String, Vec<RecordBatch>> = BTreeMap::new();
    for b in batches {
        let us = b.column(events_col("created_us"));
        let us = us
            .as_any()
            .downcast_ref::<Int64Array>()
            .expect("created_us is Int64");
        let mut rows: BTreeMap<String, Vec<u32>> = BTreeMap::new();
        for (r, v) in us.values().iter().enumerate() {
            rows.entry(day_of_us(*v).to_string())
                .or_default()
                .push(r as u32);
        }
        for (day, idx) in rows {
            let taken = take_record_batch(b, &UInt32Array::from(idx))?;
            days.entry(day).or_default().push(taken);
        }
    }
    Ok(days)
}

/// Write every planned file to a temp name, then rename them all.
fn write_all(
    plan: &[(PathBuf, &str, SchemaRef, Vec<RecordBatch>)],
    run_id: &str,
) -> anyhow::Result<()> {
    let mut done: Vec<(crate::signals::Temp, &Path)> = Vec::new();
    for (path, table, schema, batches) in plan {
        let dir = path
            .parent()
            .filter(|p| !p.as_os_str().is_empty())
            .unwrap_or(Path::new("."));
        std::fs::create_dir_all(dir)?;
        // Registered: an interrupt removes it (see signals.rs).
        let tmp = crate::signals::temp_in(dir)?;
        let props = WriterProperties::builder()
            .set_compression(Compression::ZSTD(ZstdLevel::try_new(3)?))
            .set_max_row_group_row_count(Some(ROW_GROUP_ROWS))
            .set_key_value_metadata(Some(vec![
                KeyValue::new(LAYOUT_KEY.into(), LAYOUT_VERSION.to_string()),
                KeyValue::new(TABLE_KEY.into(), table.to_string()),
                KeyValue::new(RUN_KEY.into(), run_id.to_string()),
            ]))
            .build();
        let mut w = ArrowWriter::try_new(tmp.reopen()?, schema.clone(), Some(props))?;
        for b in batches {
            w.write(b)?;
        }
        w.close()?;
        done.push((tmp, path));
    }
    // Dropping an unpersisted temp file deletes it, so an error above leaves
    // nothing behind; only a complete set is renamed into place.
    // An interrupt during the renames waits for them (see signals.rs).
    crate::signals::persist_all(done)?;
    Ok(())
}
