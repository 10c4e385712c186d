//! Writing the normalized tables in `convert`'s Parquet layout: a
//! directory gets `events/day=YYYY-MM-DD/events-RUN.parquet` (one file per
//! day of created_at), `evidence/evidence-RUN.parquet` and
//! `bad_lines/bad_lines-RUN.parquet`, RUN unique per run; a FILE.parquet
//! gets its events, with `FILE.evidence.parquet` and
//! `FILE.bad_lines.parquet` beside it. Every file is written under a
//! temporary name and renamed only when all of them are complete. Used by
//! `hvaudit convert` and by a log read to disk because it would not fit in
//! memory (see `Tables::open`).

use crate::ingest::parquet::{RUN_KEY, TABLE_KEY};
use crate::ingest::schema::{BAD_LINES, EVENTS, EVIDENCE, LAYOUT_KEY, LAYOUT_VERSION, events_col};
use crate::ingest::time::day_of_us;
use crate::store_key::{Macced, Signed, StoreKey, mac_path};
use datafusion::arrow::array::{Int64Array, RecordBatch, UInt32Array};
use datafusion::arrow::compute::take_record_batch;
use datafusion::arrow::datatypes::SchemaRef;
use datafusion::parquet::arrow::ArrowWriter;
use datafusion::parquet::file::metadata::KeyValue;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

/// Rows per row group: the unit readers decode and scan in parallel.
const ROW_GROUP_ROWS: usize = 128 * 1024;

/// Write the ingested tables as `convert` lays them out (`out` a directory,
/// or a FILE.parquet when `single`), spilled rows read back a group at a
/// time; how many files. Nothing is in place until every file is complete.
pub fn write_tables(
    ingested: &mut crate::ingest::Ingested,
    out: &Path,
    single: bool,
    shard: u16,
    key: &StoreKey,
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
    let mut files = Files::new(&run_id, key);
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
        let evidence = crate::ingest::evidence::explode(&events);
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
        // Its MAC file first: a MAC without its part is harmless.
        match std::fs::remove_file(mac_path(&path)) {
            Err(e) if e.kind() != std::io::ErrorKind::NotFound => {
                anyhow::bail!(
                    "cannot remove {}, which an earlier run left: {e}; remove it by hand",
                    crate::ingest::inputs::shown_path(&mac_path(&path))
                )
            }
            _ => {}
        }
        std::fs::remove_file(&path).map_err(|e| {
            anyhow::anyhow!(
                "cannot remove {}, which an earlier run left: {e}; remove it by hand",
                crate::ingest::inputs::shown_path(&path)
            )
        })?;
    }
    Ok(written)
}

/// A regular file (not a link or anything else) that `convert` wrote.
fn is_convert_file(path: &Path) -> bool {
    path.symlink_metadata().is_ok_and(|m| m.is_file())
        && crate::ingest::inputs::expand(&[path.to_path_buf()], true, false).is_ok_and(|(found, _)| {
            matches!(found.as_slice(), [file] if crate::ingest::parquet::describe_own(file).is_ok())
        })
}

/// The output files of a run, each written under a temp name as its rows
/// come and renamed into place when all of them are complete.
struct Files {
    run_id: String,
    /// Each file's MAC is made with it as it is written (`store_key`).
    key: StoreKey,
    open: BTreeMap<PathBuf, Open>,
    /// Batches written so far, the clock of `Open::last`.
    writes: u64,
}

struct Open {
    /// The local temp file (None for an object, which is an upload).
    temp: Option<crate::signals::Temp>,
    writer: ArrowWriter<Macced<Sink>>,
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
    fn new(run_id: &str, key: &StoreKey) -> Files {
        Files {
            run_id: run_id.to_string(),
            key: key.clone(),
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
                    Sink::Object(crate::object_storage::ObjectWriter::create(url)?),
                )
            } else {
                let dir = path
                    .parent()
                    .filter(|p| !p.as_os_str().is_empty())
                    .unwrap_or(Path::new("."));
                std::fs::create_dir_all(dir)?;
                // Registered: an interrupt removes it (see signals.rs).
                let tmp = crate::signals::temp_in(dir)?;
                let file = tmp.reopen()?;
                (Some(tmp), Sink::File(file))
            };
            let props = crate::parquet_output::properties()
                .set_max_row_group_row_count(Some(ROW_GROUP_ROWS))
                .set_key_value_metadata(Some(vec![
                    KeyValue::new(LAYOUT_KEY.into(), LAYOUT_VERSION.to_string()),
                    KeyValue::new(TABLE_KEY.into(), table.to_string()),
                    KeyValue::new(RUN_KEY.into(), self.run_id.clone()),
                ]))
                .build();
            let sink = Macced::new(sink, &self.key, Signed::Part);
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
    /// their uploads), each after its MAC file; how many.
    fn finish(self) -> anyhow::Result<usize> {
        let mut temps = Vec::new();
        let mut uploads = Vec::new();
        let count = self.open.len();
        for (path, file) in self.open {
            let sink = file.writer.into_inner()?;
            let (len, mac) = sink.mac().expect("a part is written with its key");
            let mac_text = self.key.mac_text(Signed::Part, len, &mac);
            match (file.temp, sink.inner) {
                (Some(temp), Sink::File(_)) => {
                    let dir = path
                        .parent()
                        .filter(|p| !p.as_os_str().is_empty())
                        .unwrap_or(Path::new("."));
                    let mac_temp = crate::signals::temp_in(dir)?;
                    std::fs::write(mac_temp.path(), &mac_text)?;
                    // A part is never in place before its MAC: a run cut
                    // between the two renames leaves a MAC without a part.
                    temps.push((mac_temp, mac_path(&path)));
                    temps.push((temp, path));
                }
                (None, Sink::Object(upload)) => uploads.push((path, upload, mac_text)),
                _ => unreachable!("a file sink has its temp, an upload none"),
            }
        }
        let paths: Vec<PathBuf> = temps.iter().map(|(_, p)| p.clone()).collect();
        // Dropping an unpersisted temp file deletes it (an unfinished upload
        // is aborted), so an error above leaves nothing behind; only a
        // complete set is renamed into place or completed. An interrupt
        // during the renames waits for them (see signals.rs).
        crate::signals::persist_all(
            temps
                .into_iter()
                .map(|(t, _)| t)
                .zip(paths.iter().map(PathBuf::as_path)),
        )?;
        for (path, upload, mac_text) in uploads {
            let url = mac_path(&path);
            let url = url.to_str().expect("a URL given as text");
            let mut mac_upload = crate::object_storage::ObjectWriter::create(url)?;
            std::io::Write::write_all(&mut mac_upload, mac_text.as_bytes())?;
            mac_upload.finish()?;
            upload.finish()?;
        }
        Ok(count)
    }
}

/// Where a Parquet file's bytes go: a local temp file, or an object upload.
enum Sink {
    File(std::fs::File),
    Object(crate::object_storage::ObjectWriter),
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
pub fn is_object_url(path: &Path) -> bool {
    path.to_str().is_some_and(crate::object_storage::is_url)
}

/// Bits of a seq below the shard number: file index (12 bits) and line.
pub const SHARD_SHIFT: u32 = 52;

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
