//! `hvaudit convert`: normalized events to Parquet (zstd). A directory
//! output gets `events/day=YYYY-MM-DD/events-RUN.parquet` (one file per day
//! of created_at), `evidence/evidence-RUN.parquet` and
//! `bad_lines/bad_lines-RUN.parquet`, RUN unique per run so shards converted
//! on many machines can share one directory (each with its own `--shard`, so
//! their seqs differ too); a second run of a shard the directory holds is
//! refused, and so is one started while another run of that shard writes
//! there (a lock file, below). Every file is written under a temporary name
//! and renamed only when all of them are complete.

use crate::cli::ConvertArgs;
use hvaudit::layout::{SHARD_SHIFT, is_object_url, write_tables};
use std::path::{Path, PathBuf};

pub fn run(args: ConvertArgs, quiet: bool) -> anyhow::Result<u8> {
    hvaudit::signals::install();
    let out = &args.output;
    let single = out.extension().is_some_and(|x| x == "parquet");
    let out_dir = if single {
        out.parent()
            .filter(|p| !p.as_os_str().is_empty())
            .unwrap_or(Path::new("."))
            .to_path_buf()
    } else {
        out.clone()
    };
    // An output that is an input is refused before anything is made.
    let (found, skipped) = hvaudit::ingest::inputs::expand(
        &args.input.paths,
        args.input.allow_empty,
        args.input.allow_unreadable,
    )?;
    let remote = is_object_url(out);
    if !remote {
        hvaudit::output::refuse_inputs(&[("-o", out.as_path())], &found)?;
        std::fs::create_dir_all(&out_dir).map_err(|e| {
            anyhow::anyhow!(
                "cannot create {}: {e}; pass a writable directory or a FILE.parquet",
                out_dir.display()
            )
        })?;
    }
    // Held to the end of the run: a second convert of the shard into the
    // directory, started meanwhile, is refused as one started after.
    let _lock = match !single && !remote {
        true => Some(lock_shard(out, args.shard)?),
        false => None,
    };
    if !single {
        refuse_same_shard(out, args.shard)?;
    }
    if !remote {
        sweep(out, single, quiet);
    }
    // Under a memory limit the rows are spilled as they are read (to
    // --spill-dir, else beside a local output, which must hold them
    // anyway), and memory holds the redelivery table, not the log. So they
    // are without one when the log would not fit the memory available: a
    // held convert takes about 3x the NDJSON (the table and its encoding;
    // 14.9 GiB for a 6 GB log), 1.5x the table estimate.
    let implied = match args.input.memory_limit {
        Some(_) => None,
        None => hvaudit::tables::SpillPlan::decide(&found, &Default::default(), 15),
    };
    if let Some(how) = implied.as_ref().filter(|_| !quiet) {
        eprintln!(
            "hvaudit: the log would not fit the {} MiB this machine has available: its rows \
             are spilled as they are read (give --memory-limit to choose)",
            how.available.unwrap_or(how.limit) >> 20
        );
    }
    let spill_dir = || match &args.input.spill_dir {
        Some(dir) => dir.clone(),
        None if remote => std::env::temp_dir(),
        None => out_dir.clone(),
    };
    let spilled = args.input.memory_limit.is_some() || implied.is_some();
    // A held run whose compressed input decodes past what its size
    // promised is read again, spilled.
    let budget = match spilled {
        true => None,
        false => hvaudit::tables::SpillPlan::decoded_budget(&found, &Default::default(), 15),
    };
    let reading = crate::translate::convert(&args, quiet);
    let ingest = hvaudit::ingest::IngestOptions {
        spill_dir: spilled.then(spill_dir),
        decoded_budget: budget.as_ref().map(|(b, _)| *b),
        ..reading.ingest.clone()
    };
    // The key is settled before anything is read: a run that cannot
    // authenticate its output writes none.
    let (key, made) = hvaudit::store_key::StoreKey::for_writing().map_err(anyhow::Error::msg)?;
    let again = budget.is_some().then(|| (found.clone(), skipped.clone()));
    let mut ingested = match hvaudit::tables::read(&reading, ingest.clone(), found, skipped) {
        Err(hvaudit::tables::TablesError::OverBudget) => {
            let (found, skipped) = again.expect("a budget was set");
            if !quiet {
                eprintln!(
                    "hvaudit: the compressed input decoded past {} MiB, more than its size \
                     promised: reading it again, its rows spilled as they are read",
                    budget.map_or(0, |(b, _)| b >> 20)
                );
            }
            reading
                .ingest
                .progress
                .store(0, std::sync::atomic::Ordering::Relaxed);
            let ingest = hvaudit::ingest::IngestOptions {
                spill_dir: Some(spill_dir()),
                decoded_budget: None,
                ..ingest
            };
            hvaudit::tables::read(&reading, ingest, found, skipped)?
        }
        read => read?,
    };
    let written = write_tables(&mut ingested, out, single, args.shard, &key)?;
    if let Some(made) = made.filter(|_| !quiet) {
        eprintln!("{made}");
    }
    if !quiet {
        eprintln!(
            "hvaudit: wrote {written} Parquet file(s) to {}",
            out.display()
        );
    }
    Ok(0)
}

/// The lock file of a shard's runs in a directory: a dot-file, which
/// readers pass over like every name starting with `.`; not named like
/// the temp files (`.hvaudit-*`), which sweeps and scratch listings take.
fn lock_path(out: &Path, shard: u16) -> PathBuf {
    out.join(format!(".hvaudit.convert-shard-{shard}.lock"))
}

/// Lock the shard in the directory `out` for this run: an advisory lock
/// (flock) on its lock file, which the system releases when the process
/// ends however it ends, so a killed run blocks no later one. A run that
/// finds it held is refused with the message of a run that comes after
/// (`refuse_same_shard`). The file stays; it holds nothing.
fn lock_shard(out: &Path, shard: u16) -> anyhow::Result<std::fs::File> {
    let path = lock_path(out, shard);
    let file = std::fs::OpenOptions::new()
        .create(true)
        .truncate(false)
        .write(true)
        .open(&path)
        .map_err(|e| {
            anyhow::anyhow!(
                "cannot make the lock file {}: {e}; pass a writable directory",
                hvaudit::ingest::inputs::shown_path(&path)
            )
        })?;
    match file.try_lock() {
        Ok(()) => Ok(file),
        Err(std::fs::TryLockError::WouldBlock) => {
            let (_, mut in_use) = runs_in(out)?;
            in_use.insert(i64::from(shard));
            Err(same_shard(out, shard, &in_use))
        }
        Err(std::fs::TryLockError::Error(e)) => Err(anyhow::anyhow!(
            "cannot lock {}: {e}; write to a local directory, or one whose filesystem supports \
             locks",
            hvaudit::ingest::inputs::shown_path(&path)
        )),
    }
}

/// A directory that already holds a convert run takes another only of a
/// different `--shard`: a second run of one shard repeats its seqs, so its
/// events would count twice, and every reader (loaded, `--in-place`, a
/// cluster) refuses such a directory. Decided by the readers' own check.
fn refuse_same_shard(out: &Path, shard: u16) -> anyhow::Result<()> {
    let (mut ranges, in_use) = runs_in(out)?;
    // Every seq this run can give; its run id is written later, and a
    // label no stored id equals stands for it.
    let first = i64::from(shard) << SHARD_SHIFT;
    let this_run = format!("this run (--shard {shard})");
    ranges.push((
        Some(this_run.clone()),
        (first, first | ((1 << SHARD_SHIFT) - 1)),
        this_run,
    ));
    if hvaudit::ingest::parquet::check_seqs_disjoint(&ranges).is_err() {
        return Err(same_shard(out, shard, &in_use));
    }
    Ok(())
}

/// The seq ranges of the convert runs in `out` (run id, seqs, file) and
/// the shards they use.
type Runs = (
    Vec<(Option<String>, (i64, i64), String)>,
    std::collections::BTreeSet<i64>,
);

fn runs_in(out: &Path) -> anyhow::Result<Runs> {
    use hvaudit::ingest::inputs::LogFormat;
    use hvaudit::ingest::parquet::{OwnTable, describe_own};
    let found = if is_object_url(out) {
        // A prefix with no object yet holds no run.
        match hvaudit::ingest::inputs::expand(&[out.to_path_buf()], true, false) {
            Ok((found, _)) => found,
            Err(hvaudit::ingest::inputs::InputError::RemoteMissing { .. }) => Vec::new(),
            Err(e) => return Err(e.into()),
        }
    } else if out.is_dir() {
        hvaudit::ingest::inputs::expand(&[out.to_path_buf()], true, false)?.0
    } else {
        Vec::new()
    };
    let mut ranges = Vec::new();
    for input in found.iter().filter(|i| i.format == LogFormat::Parquet) {
        // Files not of a convert run are no run to meet.
        let Ok(file) = describe_own(input) else {
            continue;
        };
        if let (Some(seqs), OwnTable::Events | OwnTable::BadLines) = (file.seqs, file.table) {
            ranges.push((file.run, seqs, input.display.clone()));
        }
    }
    let in_use = ranges
        .iter()
        .flat_map(|(_, (lo, hi), _)| [lo >> SHARD_SHIFT, hi >> SHARD_SHIFT])
        .collect();
    Ok((ranges, in_use))
}

/// The refusal of a second run of `shard` in `out`, whether the first has
/// finished or still writes.
fn same_shard(out: &Path, shard: u16, in_use: &std::collections::BTreeSet<i64>) -> anyhow::Error {
    let in_use: Vec<String> = in_use.iter().map(i64::to_string).collect();
    anyhow::anyhow!(
        "{} already holds a convert run of --shard {shard}: a second run of one shard repeats \
         its seqs, and audit, sql and a cluster refuse the directory; write to a new \
         directory, or give this run a shard not in use there (--shard N, 0..2047; in use: {})",
        hvaudit::ingest::inputs::shown_path(out),
        in_use.join(", ")
    )
}

/// Remove what killed runs left where this one writes: the output file's
/// directory, or every directory of the output tree (a run of other days
/// wrote elsewhere in it).
fn sweep(out: &Path, single: bool, quiet: bool) {
    if single {
        let dir = out.parent().filter(|p| !p.as_os_str().is_empty());
        hvaudit::tables::sweep_stale(dir.unwrap_or(Path::new(".")), quiet, true);
        return;
    }
    let dirs = walkdir::WalkDir::new(out)
        .max_depth(3)
        .sort_by_file_name()
        .into_iter()
        .filter_map(Result::ok)
        .filter(|e| e.file_type().is_dir());
    for d in dirs {
        hvaudit::tables::sweep_stale(d.path(), quiet, true);
    }
}
