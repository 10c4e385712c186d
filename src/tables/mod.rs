//! Where a run's tables live: the one choice an audit, a `sql` session and
//! a replay make alike.
//!
//! [`Tables::open`] expands the inputs and puts `events`, `evidence` and
//! `bad_lines` where [`ReadingOptions`] says, or, by default, where they
//! fit: loaded in memory, or, when the loaded table would not fit the
//! memory limit (or, without one, the memory this machine has available:
//! [`memory::available`]), read to `convert`'s Parquet layout in a
//! scratch directory and queried there. `convert`'s Parquet is queried
//! where it lies with [`Location::InPlace`], and on a Ballista cluster
//! with `Location::Cluster`. [`Tables::session`] gives a DataFusion
//! session over them.

pub mod memory;

use crate::engine;
pub use crate::engine::MemoryOptions;
use crate::ingest::inputs::{self, Input, Skipped, shown_path};
use crate::ingest::{IngestFailure, IngestOptions, Ingested, ingest_inputs_into};
use crate::layout::in_place::{self, ParquetInputs};
use crate::output::{Output, refuse_inputs};
use crate::report::model::InputSummary;
use crate::rules::Materialize;
use datafusion::prelude::SessionContext;
use std::path::{Path, PathBuf};

/// Why the tables could not be opened (exit code 2).
#[derive(Debug, thiserror::Error)]
pub enum TablesError {
    #[error(transparent)]
    Input(#[from] inputs::InputError),
    #[error("{0}")]
    Usage(String),
    /// Compressed input decoded past `IngestOptions::decoded_budget`.
    #[error("compressed input decoded past its budget")]
    OverBudget,
}

/// The least memory limit a run takes when it keeps to the machine's
/// available memory by itself: below it the engine's sorts, each
/// reserving 10 MiB to spill, cannot run side by side.
const LEAST_IMPLIED_LIMIT: u64 = 64 << 20;

/// What a run says on standard error while it reads.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum Notices {
    /// Nothing (a library caller's default).
    #[default]
    Silent,
    /// Only inputs that could not be read whole (`hvaudit -q`).
    Warnings,
    /// Progress bars (on a terminal), the accounting of every input, what
    /// was spilled and why.
    All,
}

/// Where the tables are to be.
#[derive(Debug, Clone, Default)]
pub enum Location {
    /// Loaded in memory when they fit, else read to Parquet on disk and
    /// queried there.
    #[default]
    BySize,
    /// `convert`'s Parquet, queried where it lies.
    InPlace,
    /// `convert`'s Parquet, queried on a Ballista cluster (`df://HOST:PORT`);
    /// a run that has not finished after `timeout` is given up.
    #[cfg(feature = "cluster")]
    Cluster {
        url: String,
        timeout: std::time::Duration,
    },
}

/// How to read the logs of a run, and where their tables go.
#[derive(Debug, Clone, Default)]
pub struct ReadingOptions {
    /// Log files, directories (read recursively), glob patterns, object
    /// URLs, `-` for standard input.
    pub inputs: Vec<PathBuf>,
    /// How lines are read: token format, line cap, rejected lines listed,
    /// whether inputs without logs are accepted.
    pub ingest: IngestOptions,
    /// Write every rejected line, verbatim, here (`-`: standard output).
    pub bad_lines_out: Option<PathBuf>,
    pub memory: MemoryOptions,
    pub location: Location,
    /// The files the run writes (option, path): none may be an input.
    pub outputs: Vec<(&'static str, PathBuf)>,
    pub notices: Notices,
}

impl ReadingOptions {
    /// `inputs` read with the defaults.
    pub fn new(inputs: Vec<PathBuf>) -> ReadingOptions {
        ReadingOptions {
            inputs,
            ..Default::default()
        }
    }

    fn quiet(&self) -> bool {
        self.notices != Notices::All
    }
}

/// What the tables are opened for, as the stderr line of a log read to
/// disk says.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Purpose {
    Audit,
    Query,
    Replay,
}

impl Purpose {
    fn then(self) -> &'static str {
        match self {
            Purpose::Audit => "auditing it there",
            Purpose::Query => "querying it there",
            Purpose::Replay => "replaying it there",
        }
    }
}

/// The plan for a log whose loaded table would not fit in memory: read it
/// with its rows spilled, into Parquet on disk, and query it there.
#[derive(Debug, Clone)]
pub struct SpillPlan {
    /// The loaded table's estimated bytes (None: a stream of unknown size).
    pub estimate: Option<u64>,
    /// The memory limit the run keeps to: the one given, or, without one,
    /// half of the memory `available` (at least 64 MiB).
    pub limit: u64,
    /// The machine's available memory, when no limit was given and the
    /// loaded table would not fit it.
    pub available: Option<u64>,
    /// Decided only once compressed input, loaded, decoded past this many
    /// bytes (its size promised less): read again, to disk.
    pub expanded_past: Option<u64>,
}

impl SpillPlan {
    /// The plan for `found` when its loaded tables would not fit the
    /// memory limit (half of it is left to the query engine), or, without
    /// one, the memory this machine has available (`memory.available`,
    /// else [`memory::available`]; a stream
    /// of unknown size is then loaded); None when they fit. `need` is the
    /// loaded run's bytes per byte of the table estimate, in tenths (10:
    /// an audit, a `sql` session or a replay).
    pub fn decide(found: &[Input], memory: &MemoryOptions, need: u64) -> Option<SpillPlan> {
        let estimate = table_estimate(found);
        let (limit, available) = match memory.limit {
            Some(limit) => {
                if estimate.is_some_and(|e| e <= limit / 2) {
                    return None;
                }
                (limit, None)
            }
            None => {
                let available = memory.available.or_else(memory::available)?;
                if estimate?.saturating_mul(need) / 10 <= available {
                    return None;
                }
                ((available / 2).max(LEAST_IMPLIED_LIMIT), Some(available))
            }
        };
        Some(SpillPlan {
            estimate,
            limit,
            available,
            expanded_past: None,
        })
    }

    /// For a read of `found` that [`SpillPlan::decide`] loads: the bytes
    /// its compressed inputs may decode to before the loaded table (2x the
    /// NDJSON they hold, where `decide` counted 10x their size) would not
    /// fit after all, and the plan to read them to disk then. None without
    /// compressed input, or with a stream (which cannot be read again).
    pub fn decoded_budget(
        found: &[Input],
        memory: &MemoryOptions,
        need: u64,
    ) -> Option<(u64, SpillPlan)> {
        use inputs::LogFormat;
        let compressed = |i: &Input| matches!(i.format, LogFormat::Gzip | LogFormat::Zstd);
        if !found.iter().any(compressed) || found.iter().any(|i| i.stream.is_some()) {
            return None;
        }
        let (room, limit, available) = match memory.limit {
            Some(limit) => (limit / 2, limit, None),
            None => {
                let available = memory.available.or_else(memory::available)?;
                let room = available.saturating_mul(10) / need.max(1);
                (
                    room,
                    (available / 2).max(LEAST_IMPLIED_LIMIT),
                    Some(available),
                )
            }
        };
        let plain: Vec<Input> = found.iter().filter(|i| !compressed(i)).cloned().collect();
        let others = table_estimate(&plain)?;
        let budget = room.saturating_sub(others) / 2;
        let plan = SpillPlan {
            estimate: None,
            limit,
            available,
            expanded_past: Some(budget),
        };
        Some((budget, plan))
    }
}

/// The bytes a loaded run over `inputs` would take in memory, about:
/// twice the NDJSON (a loaded audit of a generated log peaks at 1.7-1.8x:
/// the table about 1.0x, the rule phase the rest), compressed input
/// counting 10x its size, Parquet 10x; None when a stream's size cannot be
/// known before it is read.
pub fn table_estimate(inputs: &[Input]) -> Option<u64> {
    use inputs::LogFormat;
    inputs.iter().try_fold(0u64, |sum, i| {
        if i.stream.is_some() {
            return None;
        }
        let factor = match i.format {
            LogFormat::Ndjson => 2,
            LogFormat::Gzip | LogFormat::Zstd => 10,
            LogFormat::Parquet => 10,
        };
        Some(sum.saturating_add(i.bytes.saturating_mul(factor)))
    })
}

/// A log read into Parquet in a scratch directory (removed when this is
/// dropped, also on an error or an interrupt).
pub struct OnDisk {
    /// `convert`'s layout of the tables, in the scratch directory.
    pub files: ParquetInputs,
    /// The inputs' accounting as read (not of the scratch files).
    pub read: Vec<InputSummary>,
    /// Why it is on disk, and the memory limit the run keeps to.
    pub plan: SpillPlan,
    _scratch: crate::signals::TempDir,
}

/// `convert`'s Parquet on a Ballista cluster.
#[cfg(feature = "cluster")]
pub struct OnCluster {
    /// The scheduler, `df://HOST:PORT`.
    pub url: String,
    /// A run not finished after this long is given up.
    pub timeout: std::time::Duration,
    pub files: ParquetInputs,
    /// The inputs as given, near which the views are written.
    inputs: Vec<PathBuf>,
}

/// Where the tables are.
pub enum Place {
    /// Read into memory.
    Loaded(Ingested),
    /// Read into Parquet on disk, because they would not fit in memory.
    OnDisk(OnDisk),
    /// `convert`'s Parquet, where it lies.
    InPlace(ParquetInputs),
    /// `convert`'s Parquet on a Ballista cluster.
    #[cfg(feature = "cluster")]
    Cluster(OnCluster),
}

/// A run's tables `events`, `evidence` and `bad_lines`, where they are,
/// with the memory the query engine may take over them.
pub struct Tables {
    pub place: Place,
    /// The engine's memory over them: the given limit, or a spill plan's.
    pub memory: MemoryOptions,
}

impl Tables {
    /// Expand `opts.inputs` and put the tables where `opts.location` says;
    /// `purpose` is said on stderr when a log is read to disk.
    pub fn open(opts: &ReadingOptions, purpose: Purpose) -> Result<Tables, TablesError> {
        let usage = |e: anyhow::Error| TablesError::Usage(format!("{e:#}"));
        let memory = opts.memory.clone();
        let place = match &opts.location {
            Location::InPlace => {
                refuse_outputs(opts)?;
                sweep_stale(&memory.spill_dir_or_default(), opts.quiet(), false);
                let files = in_place::scan_inputs(
                    &opts.inputs,
                    opts.ingest.allow_empty,
                    opts.ingest.allow_unreadable,
                    &opts.ingest.store_key,
                )
                .map_err(usage)?;
                Place::InPlace(files)
            }
            #[cfg(feature = "cluster")]
            Location::Cluster { url, timeout } => {
                refuse_outputs(opts)?;
                // The views' directories that interrupted runs (and their
                // jobs) left.
                if let Ok(dir) =
                    crate::cluster::scratch_parent(memory.spill_dir.as_deref(), &opts.inputs)
                {
                    sweep_stale(&dir, opts.quiet(), false);
                }
                crate::cluster::scheduler_address(url).map_err(TablesError::Usage)?;
                let files = in_place::scan_inputs(
                    &opts.inputs,
                    opts.ingest.allow_empty,
                    opts.ingest.allow_unreadable,
                    &opts.ingest.store_key,
                )
                .map_err(usage)?;
                Place::Cluster(OnCluster {
                    url: url.clone(),
                    timeout: *timeout,
                    files,
                    inputs: opts.inputs.clone(),
                })
            }
            Location::BySize => {
                let (found, skipped) = inputs::expand(
                    &opts.inputs,
                    opts.ingest.allow_empty,
                    opts.ingest.allow_unreadable,
                )?;
                let on_disk = |found, skipped, plan: SpillPlan| -> Result<Tables, TablesError> {
                    let on_disk =
                        read_to_disk(opts, found, skipped, plan, purpose.then()).map_err(usage)?;
                    Ok(Tables {
                        memory: MemoryOptions {
                            limit: Some(on_disk.plan.limit),
                            ..memory.clone()
                        },
                        place: Place::OnDisk(on_disk),
                    })
                };
                match SpillPlan::decide(&found, &memory, 10) {
                    Some(plan) => return on_disk(found, skipped, plan),
                    None => {
                        let budget = SpillPlan::decoded_budget(&found, &memory, 10);
                        let ingest = IngestOptions {
                            decoded_budget: budget.as_ref().map(|(b, _)| *b),
                            ..opts.ingest.clone()
                        };
                        let again = budget.is_some().then(|| (found.clone(), skipped.clone()));
                        match read(opts, ingest, found, skipped) {
                            Err(TablesError::OverBudget) => {
                                let (plan, (found, skipped)) =
                                    budget.map(|(_, p)| p).zip(again).expect("a budget was set");
                                // Read again from the start: none of the
                                // first read is kept.
                                opts.ingest
                                    .progress
                                    .store(0, std::sync::atomic::Ordering::Relaxed);
                                return on_disk(found, skipped, plan);
                            }
                            read => Place::Loaded(read?),
                        }
                    }
                }
            }
        };
        Ok(Tables { place, memory })
    }

    /// Tables already read into memory, with the default engine memory.
    pub fn loaded(ingested: Ingested) -> Tables {
        Tables {
            place: Place::Loaded(ingested),
            memory: MemoryOptions::default(),
        }
    }

    /// The inputs' accounting as the reports list it: each input as read,
    /// then the paths skipped.
    pub fn inputs(&self) -> Vec<InputSummary> {
        let (mut inputs, skipped) = match &self.place {
            Place::Loaded(ingested) => (ingested.inputs.clone(), &ingested.skipped),
            Place::OnDisk(disk) => return disk.read.clone(),
            Place::InPlace(files) => (files.inputs_as_read(), &files.skipped),
            #[cfg(feature = "cluster")]
            Place::Cluster(c) => (c.files.inputs_as_read(), &c.files.skipped),
        };
        inputs.extend(skipped.iter().map(skipped_input));
        inputs
    }

    /// A DataFusion session over the tables, with one partition per core
    /// (on a cluster: a client session of the scheduler; the `Materialize`
    /// is then where the executors read what the client writes, to keep
    /// as long as the session).
    pub async fn session(&self) -> anyhow::Result<(SessionContext, Materialize)> {
        let local = || engine::session(&self.memory.engine());
        match &self.place {
            Place::Loaded(ingested) => {
                let ctx = local()?;
                engine::register_tables(&ctx, ingested)?;
                Ok((ctx, Materialize::Never))
            }
            Place::OnDisk(OnDisk { files, .. }) | Place::InPlace(files) => {
                let ctx = local()?;
                in_place::register_tables(&ctx, files).await?;
                Ok((ctx, Materialize::Never))
            }
            #[cfg(feature = "cluster")]
            Place::Cluster(c) => {
                // With a place where the executors read rows the client
                // wrote (ids kept by more than one convert run), as an
                // audit's.
                let spill_dir = self.memory.spill_dir.as_deref();
                let (ctx, scratch) = crate::cluster::session(&c.url, spill_dir, &c.inputs).await?;
                let scratch = Materialize::OnCluster(scratch);
                register_files(&ctx, &c.files, &scratch).await?;
                Ok((ctx, scratch))
            }
        }
    }
}

/// `convert`'s files registered in `ctx`; on a cluster, the kept rows of
/// ids stored by more than one run are written to the run's scratch
/// place for the executors to read.
pub async fn register_files(
    ctx: &SessionContext,
    files: &ParquetInputs,
    materialize: &Materialize,
) -> datafusion::error::Result<()> {
    use crate::layout::in_place::register_tables_placing;
    match materialize {
        #[cfg(feature = "cluster")]
        Materialize::OnCluster(scratch) => {
            let place = |rows: &[datafusion::arrow::record_batch::RecordBatch]| {
                scratch.write_rows("events_kept", rows)
            };
            register_tables_placing(ctx, files, Some(&place)).await
        }
        _ => register_tables_placing(ctx, files, None).await,
    }
}

/// A path a walk skipped, as the reports list it among the inputs.
pub fn skipped_input(s: &Skipped) -> InputSummary {
    InputSummary {
        path: s.path.clone(),
        format: "skipped".into(),
        error: Some(s.reason.clone()),
        ..Default::default()
    }
}

/// None of the run's outputs may be an input (read in place or on a
/// cluster; a log read here is checked as it is read).
fn refuse_outputs(opts: &ReadingOptions) -> Result<(), TablesError> {
    if opts.outputs.is_empty() {
        return Ok(());
    }
    let (found, _) = inputs::expand(&opts.inputs, true, true)?;
    let outputs: Vec<(&str, &Path)> = opts
        .outputs
        .iter()
        .map(|(o, p)| (*o, p.as_path()))
        .collect();
    refuse_inputs(&outputs, &found).map_err(|e| TablesError::Usage(format!("{e:#}")))
}

/// Read `found` with its rows spilled and write it as `convert` does into
/// a scratch directory in the spill directory; `then` says what comes
/// next, for the stderr line.
fn read_to_disk(
    opts: &ReadingOptions,
    found: Vec<Input>,
    skipped: Vec<Skipped>,
    plan: SpillPlan,
    then: &str,
) -> anyhow::Result<OnDisk> {
    let quiet = opts.quiet();
    let parent = opts.memory.spill_dir_or_default();
    sweep_stale(&parent, quiet, false);
    let scratch = crate::signals::temp_dir_in(&parent).map_err(|e| {
        anyhow::anyhow!(
            "cannot make a scratch directory in {}: {e}; choose another with --spill-dir",
            shown_path(&parent)
        )
    })?;
    if !quiet {
        let size = match (plan.estimate, plan.expanded_past) {
            (Some(e), _) => format!("about {} MiB", e >> 20),
            (None, Some(past)) => format!(
                "larger than thought: its compressed input decoded past {} MiB",
                past >> 20
            ),
            (None, None) => "of unknown size (a stream)".into(),
        };
        let room = match plan.available {
            Some(available) => format!(
                "the {} MiB this machine has available (without --memory-limit, the run keeps \
                 to {} MiB)",
                available >> 20,
                plan.limit >> 20
            ),
            None => format!("--memory-limit {} MiB", plan.limit >> 20),
        };
        eprintln!(
            "hvaudit: the loaded table ({size}) would not fit {room}: reading it to {} and {then}",
            shown_path(scratch.path())
        );
    }
    let reading = IngestOptions {
        spill_dir: Some(scratch.path().to_path_buf()),
        ..opts.ingest.clone()
    };
    let mut ingested = read(opts, reading, found, skipped).map_err(anyhow::Error::new)?;
    let tables = scratch.path().join("tables");
    std::fs::create_dir_all(&tables)?;
    let spinner = crate::progress::phase_spinner(quiet, "spilling: writing the rows as Parquet");
    // Written and read back by this process alone: a key of its own.
    let key = crate::store_key::StoreKey::ephemeral().map_err(anyhow::Error::msg)?;
    crate::layout::write_tables(&mut ingested, &tables, false, 0, &key)?;
    drop(spinner);
    let files = in_place::scan_inputs(
        std::slice::from_ref(&tables),
        true,
        false,
        &crate::store_key::KeySource::Given(key),
    )?;
    let mut read = ingested.inputs;
    read.extend(ingested.skipped.iter().map(skipped_input));
    Ok(OnDisk {
        files,
        read,
        plan,
        _scratch: scratch,
    })
}

/// Read inputs already expanded with `ingest`, with a progress bar, the
/// rejected lines written to `opts.bad_lines_out` and the accounting on
/// stderr (`opts.notices`).
pub fn read(
    opts: &ReadingOptions,
    ingest: IngestOptions,
    found: Vec<Input>,
    skipped: Vec<Skipped>,
) -> Result<Ingested, TablesError> {
    let usage = |e: anyhow::Error| TablesError::Usage(format!("{e:#}"));
    let quiet = opts.quiet();
    let mut outputs: Vec<(&str, &Path)> = opts
        .outputs
        .iter()
        .map(|(o, p)| (*o, p.as_path()))
        .collect();
    if let Some(path) = &opts.bad_lines_out {
        outputs.push(("--bad-lines", path));
    }
    refuse_inputs(&outputs, &found).map_err(usage)?;
    let mut bad_out = opts
        .bad_lines_out
        .as_deref()
        .map(Output::create)
        .transpose()
        .map_err(usage)?;
    let ingest = IngestOptions {
        keep_bad_raw: ingest.keep_bad_raw || bad_out.is_some(),
        ..ingest
    };
    let phase = if ingest.spill_dir.is_some() {
        "reading, spilling rows"
    } else {
        "reading"
    };
    let total = found.iter().map(|i| i.bytes).sum();
    let bar = crate::progress::ingest_bar(quiet, phase, total, &ingest.progress);
    let ingested = ingest_inputs_into(
        &found,
        skipped,
        &ingest,
        bad_out.as_mut().map(Output::writer),
    )
    .map_err(|e| match e {
        IngestFailure::BadLinesOut(e) => {
            let path = opts.bad_lines_out.as_deref().unwrap_or(Path::new("-"));
            TablesError::Usage(format!(
                "cannot write --bad-lines {}: {e}",
                shown_path(path)
            ))
        }
        IngestFailure::Inputs(e) => TablesError::Input(e),
        IngestFailure::OverBudget(_) => TablesError::OverBudget,
        other => TablesError::Usage(other.to_string()),
    })?;
    drop(bar);
    if let Some(out) = bad_out {
        out.finish().map_err(usage)?;
    }
    match opts.notices {
        Notices::All => eprint!("{}", accounting(&ingested)),
        // The summary is off, but an input that could not be read whole
        // is still said.
        Notices::Warnings => {
            for i in ingested.inputs.iter().filter(|i| i.error.is_some()) {
                eprintln!(
                    "hvaudit: warning: {}: {}",
                    i.path,
                    i.error.as_deref().unwrap_or_default()
                );
            }
        }
        Notices::Silent => {}
    }
    Ok(ingested)
}

/// The "nothing silently lost" summary: lines = events + redeliveries + bad.
pub fn accounting(ing: &Ingested) -> String {
    let mut out = String::new();
    let line = |out: &mut String, i: &InputSummary| {
        let mark = if i.identity_holds() { "" } else { "  MISMATCH" };
        out.push_str(&format!(
            "  {}: {} lines = {} events{} + {} redeliveries + {} bad lines ({} blank skipped){mark}\n",
            i.path,
            i.lines,
            i.events,
            crate::report::copies_term(i),
            i.redeliveries,
            i.bad_lines,
            i.blank_lines
        ));
        if let Some(e) = &i.error {
            out.push_str(&format!("    warning: {e}\n"));
        }
    };
    out.push_str("hvaudit: read\n");
    // Many inputs (a day-partitioned tree): list only those with something
    // to say; the reports carry every input's figures.
    let many = ing.inputs.len() > 20;
    if ing.inputs.len() > 1 {
        for i in &ing.inputs {
            if !many || i.bad_lines > 0 || i.error.is_some() || !i.identity_holds() {
                line(&mut out, i);
            }
        }
    }
    if many {
        out.push_str(&format!(
            "  ({} inputs; the audit report lists each)\n",
            ing.inputs.len()
        ));
    }
    line(&mut out, &ing.total());
    if let [only] = ing.inputs.as_slice()
        && let Some(e) = &only.error
    {
        // The total line carries no input's error: say it here.
        out.push_str(&format!("    warning: {}: {e}\n", only.path));
    }
    for s in &ing.skipped {
        out.push_str(&format!("  skipped {}: {}\n", s.path, s.reason));
    }
    let total = ing.total();
    if total.bad_lines > 0 {
        out.push_str("  rejected lines are in the bad_lines table (hvaudit sql ... -e 'SELECT * FROM bad_lines')\n");
    }
    if total.bad_lines_unlisted > 0 {
        out.push_str(&format!(
            "  {} of them are counted but not listed (past the first of each input, --max-bad-lines); \
             --bad-lines FILE writes every one\n",
            total.bad_lines_unlisted
        ));
    }
    out
}

/// Remove the temp files a killed run of ours left in `dir` and say so
/// (unless `quiet`); with `list_foreign`, list those that another host's
/// run may be writing.
pub fn sweep_stale(dir: &Path, quiet: bool, list_foreign: bool) {
    let stale = crate::signals::sweep_stale(dir);
    for p in &stale.removed {
        if !quiet {
            eprintln!(
                "hvaudit: removed {}, left by an interrupted run",
                shown_path(p)
            );
        }
    }
    for p in stale.kept.iter().filter(|_| list_foreign) {
        eprintln!(
            "hvaudit: note: {} is a temp file of another host's run (or an older \
             version's); remove it if no run is writing there",
            shown_path(p)
        );
    }
}
