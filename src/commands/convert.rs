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
use datafusion::arrow::array::{Int64Array, RecordBatch, UInt32Array};
use datafusion::arrow::compute::take_record_batch;
use datafusion::arrow::datatypes::SchemaRef;
use datafusion::parquet::arrow::ArrowWriter;
use datafusion::parquet::file::metadata::KeyValue;
use hvaudit::ingest::parquet::{RUN_KEY, TABLE_KEY};
use hvaudit::ingest::schema::{
    BAD_LINES, EVENTS, EVIDENCE, LAYOUT_KEY, LAYOUT_VERSION, events_col,
};
use hvaudit::ingest::time::day_of_us;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

/// Rows per row group: the unit readers decode and scan in parallel.
const ROW_GROUP_ROWS: usize = 128 * 1024;

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
    let (found, skipped) =
        hvaudit::ingest::inputs::expand(&args.input.paths, args.input.allow_empty)?;
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
    let outputs = [("-o", args.output.as_path())];
    let implied = match args.input.memory_limit {
        Some(_) => None,
        None => super::too_large_for(&args.input, &found, &outputs, 15),
    };
    if let Some(how) = implied.as_ref().filter(|_| !quiet) {
        eprintln!(
            "hvaudit: the log would not fit the {} MiB this machine has available: its rows \
             are spilled as they are read (give --memory-limit to choose)",
            how.available.unwrap_or(how.limit) >> 20
        );
    }
    let spill = (args.input.memory_limit.is_some() || implied.is_some()).then(|| {
        match &args.input.spill_dir {
            Some(dir) => dir.clone(),
            None if remote => std::env::temp_dir(),
            None => out_dir.clone(),
        }
    });
    // The archive keeps every rejected line unless told otherwise.
    let mut ingested = super::load_found(
        &args.input,
        found,
        skipped,
        quiet,
        &outputs,
        usize::MAX,
        spill,
    )?;
    let written = write_tables(&mut ingested, out, single, args.shard)?;
    if !quiet {
        eprintln!(
            "hvaudit: wrote {written} Parquet file(s) to {}",
            out.display()
        );
    }
    Ok(0)
}

/// Write the ingested tables as `convert` lays them out (`out` a directory,
/// or a FILE.parquet when `single`), spilled rows read back a group at a
/// time; how many files. Nothing is in place until every file is complete.
pub(super) fn write_tables(
    ingested: &mut hvaudit::ingest::Ingested,
    out: &Path,
    single: bool,
    shard: u16,
) -> anyhow::Result<usize> {
    let run_id = run_id();
    let path_for = |table: &str, day: Option<&str>| -> PathBuf {
        match (single, table, day) {
            (true, "events", _) => out.to_path_buf(),
            (true, _, _) => {
                let stem = out.file_stem().unwrap_or_default().to_string_lossy();
                out.with_file_name(format!("{stem}.{table}.parquet"))
            }
            (false, "events", Some(day)) => out
                .join("events")
                .join(format!("day={day}"))
                .join(format!("events-{run_id}.parquet")),
            (false, _, _) => out.join(table).join(format!("{table}-{run_id}.parquet")),
        }
    };
    let mut files = Files::new(&run_id);
    let write_events = |files: &mut Files, mut batches: Vec<RecordBatch>| -> anyhow::Result<()> {
        shift_seqs(&mut batches, "seq", shard)?;
        if single {
            for b in &batches {
                files.write(path_for("events", None), "events", &EVENTS, b)?;
            }
            return Ok(());
        }
        for (day, parts) in split_by_day(&batches)? {
            for b in &parts {
                files.write(path_for("events", Some(&day)), "events", &EVENTS, b)?;
            }
        }
        Ok(())
    };
    let write_evidence = |files: &mut Files, mut batches: Vec<RecordBatch>| -> anyhow::Result<()> {
        shift_seqs(&mut batches, "event_seq", shard)?;
        for b in batches.iter().filter(|b| b.num_rows() > 0) {
            files.write(path_for("evidence", None), "evidence", &EVIDENCE, b)?;
        }
        Ok(())
    };
    write_events(&mut files, std::mem::take(&mut ingested.events))?;
    write_evidence(&mut files, std::mem::take(&mut ingested.evidence))?;
    // Spilled rows come back a group at a time, with their evidence.
    let spill_failure = |e: std::io::Error| {
        anyhow::anyhow!("cannot read back the event rows from the spill directory: {e}")
    };
    for group in std::mem::take(&mut ingested.spilled) {
        let events = group.load().map_err(spill_failure)?;
        let evidence = hvaudit::ingest::evidence::explode(&events);
        write_events(&mut files, vec![events])?;
        write_evidence(&mut files, vec![evidence])?;
    }
    let mut bad_lines = std::mem::take(&mut ingested.bad_lines);
    shift_seqs(&mut bad_lines, "seq", shard)?;
    for b in bad_lines.iter().filter(|b| b.num_rows() > 0) {
        files.write(path_for("bad_lines", None), "bad_lines", &BAD_LINES, b)?;
    }
    // Siblings of a FILE.parquet that an earlier run left and this one
    // does not replace (it had rejected lines, this run has none) would
    // pair this run's events with that run's rows: removed once this run
    // is in place.
    let stale: Vec<PathBuf> = match single {
        true => ["evidence", "bad_lines"]
            .map(|table| path_for(table, None))
            .into_iter()
            .filter(|p| !files.has(p) && is_convert_file(p))
            .collect(),
        false => Vec::new(),
    };
    if single && !files.has(&path_for("events", None)) {
        // A log without events still gives its (empty) events file.
        files.write(
            path_for("events", None),
            "events",
            &EVENTS,
            &RecordBatch::new_empty(EVENTS.clone()),
        )?;
    }
    let written = files.finish()?;
    for path in stale {
        std::fs::remove_file(&path).map_err(|e| {
            anyhow::anyhow!(
                "cannot remove {}, which an earlier run left: {e}; remove it by hand",
                hvaudit::ingest::inputs::shown_path(&path)
            )
        })?;
    }
    Ok(written)
}

/// A regular file (not a link or anything else) that `convert` wrote.
fn is_convert_file(path: &Path) -> bool {
    path.symlink_metadata().is_ok_and(|m| m.is_file())
        && hvaudit::ingest::inputs::expand(&[path.to_path_buf()], true).is_ok_and(|(found, _)| {
            matches!(found.as_slice(), [file] if hvaudit::ingest::parquet::describe_own(file).is_ok())
        })
}

/// The output files of a run, each written under a temp name as its rows
/// come and renamed into place when all of them are complete.
struct Files {
    run_id: String,
    open: BTreeMap<PathBuf, Open>,
    /// Batches written so far, the clock of `Open::last`.
    writes: u64,
}

struct Open {
    /// The local temp file (None for an object, which is an upload).
    temp: Option<hvaudit::signals::Temp>,
    writer: ArrowWriter<Sink>,
    /// When it last got rows (in `Files::writes`).
    last: u64,
}

/// A file's row group is closed early past this many buffered bytes.
const ROW_GROUP_BYTES: usize = 32 << 20;
/// The row group of a file that got no rows for this many batches is
/// closed: one file per day stays open to the end, and a day that is over
/// should not hold a row group's page buffers (tens of MB) meanwhile.
const IDLE_WRITES: u64 = 16;

impl Files {
    fn new(run_id: &str) -> Files {
        Files {
            run_id: run_id.to_string(),
            open: BTreeMap::new(),
            writes: 0,
        }
    }

    fn has(&self, path: &Path) -> bool {
        self.open.contains_key(path)
    }

    fn write(
        &mut self,
        path: PathBuf,
        table: &str,
        schema: &SchemaRef,
        batch: &RecordBatch,
    ) -> anyhow::Result<()> {
        if !self.open.contains_key(&path) {
            let (temp, sink) = if is_object_url(&path) {
                let url = path.to_str().expect("a URL given as text");
                (
                    None,
                    Sink::Object(hvaudit::ingest::remote::ObjectWriter::create(url)?),
                )
            } else {
                let dir = path
                    .parent()
                    .filter(|p| !p.as_os_str().is_empty())
                    .unwrap_or(Path::new("."));
                std::fs::create_dir_all(dir)?;
                // Registered: an interrupt removes it (see signals.rs).
                let tmp = hvaudit::signals::temp_in(dir)?;
                let file = tmp.reopen()?;
                (Some(tmp), Sink::File(file))
            };
            let props = hvaudit::output::parquet_properties()
                .set_max_row_group_row_count(Some(ROW_GROUP_ROWS))
                .set_key_value_metadata(Some(vec![
                    KeyValue::new(LAYOUT_KEY.into(), LAYOUT_VERSION.to_string()),
                    KeyValue::new(TABLE_KEY.into(), table.to_string()),
                    KeyValue::new(RUN_KEY.into(), self.run_id.clone()),
                ]))
                .build();
            let writer = ArrowWriter::try_new(sink, schema.clone(), Some(props))?;
            let open = Open {
                temp,
                writer,
                last: 0,
            };
            self.open.insert(path.clone(), open);
        }
        self.writes += 1;
        let now = self.writes;
        let file = self.open.get_mut(&path).expect("opened above");
        file.last = now;
        file.writer.write(batch)?;
        if file.writer.in_progress_size() > ROW_GROUP_BYTES {
            file.writer.flush()?;
        }
        for idle in self.open.values_mut() {
            if now - idle.last == IDLE_WRITES && idle.writer.in_progress_rows() > 0 {
                idle.writer.flush()?;
            }
        }
        Ok(())
    }

    /// Close every file and rename them all into place (objects: complete
    /// their uploads); how many.
    fn finish(self) -> anyhow::Result<usize> {
        let mut temps = Vec::new();
        let mut paths = Vec::new();
        let mut uploads = Vec::new();
        let count = self.open.len();
        for (path, file) in self.open {
            match file.temp {
                Some(temp) => {
                    file.writer.close()?;
                    temps.push(temp);
                    paths.push(path);
                }
                None => match file.writer.into_inner()? {
                    Sink::Object(upload) => uploads.push(upload),
                    Sink::File(_) => unreachable!("a file sink has its temp"),
                },
            }
        }
        // Dropping an unpersisted temp file deletes it (an unfinished upload
        // is aborted), so an error above leaves nothing behind; only a
        // complete set is renamed into place or completed. An interrupt
        // during the renames waits for them (see signals.rs).
        hvaudit::signals::persist_all(temps.into_iter().zip(paths.iter().map(PathBuf::as_path)))?;
        for upload in uploads {
            upload.finish()?;
        }
        Ok(count)
    }
}

/// Where a Parquet file's bytes go: a local temp file, or an object upload.
enum Sink {
    File(std::fs::File),
    Object(hvaudit::ingest::remote::ObjectWriter),
}

impl std::io::Write for Sink {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        match self {
            Sink::File(f) => f.write(buf),
            Sink::Object(o) => o.write(buf),
        }
    }

    fn flush(&mut self) -> std::io::Result<()> {
        match self {
            Sink::File(f) => f.flush(),
            Sink::Object(o) => o.flush(),
        }
    }
}

/// Whether `-o` names an object (`s3://bucket/prefix/`) rather than a path.
fn is_object_url(path: &Path) -> bool {
    path.to_str().is_some_and(hvaudit::ingest::remote::is_url)
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
    use hvaudit::ingest::inputs::Format;
    use hvaudit::ingest::parquet::{OwnTable, describe_own};
    let found = if is_object_url(out) {
        // A prefix with no object yet holds no run.
        match hvaudit::ingest::inputs::expand(&[out.to_path_buf()], true) {
            Ok((found, _)) => found,
            Err(hvaudit::ingest::inputs::InputError::RemoteMissing { .. }) => Vec::new(),
            Err(e) => return Err(e.into()),
        }
    } else if out.is_dir() {
        hvaudit::ingest::inputs::expand(&[out.to_path_buf()], true)?.0
    } else {
        Vec::new()
    };
    let mut ranges = Vec::new();
    for input in found.iter().filter(|i| i.format == Format::Parquet) {
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

/// Put the shard number in the top bits of every seq (`col`: events' and
/// bad lines' `seq`, evidence rows' `event_seq`), so shards converted apart
/// never share one.
fn shift_seqs(batches: &mut [RecordBatch], col: &str, shard: u16) -> anyhow::Result<()> {
    use datafusion::arrow::array::Array;
    if shard == 0 {
        return Ok(());
    }
    let offset = i64::from(shard) << SHARD_SHIFT;
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
