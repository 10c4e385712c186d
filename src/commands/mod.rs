//! One function per subcommand; each returns the process exit code.

pub mod audit;
#[cfg(feature = "cluster")]
pub mod cluster;
pub mod config;
pub mod convert;
pub mod diff;
pub mod generate;
mod memory;
pub mod replay;
pub mod rules;
pub mod sql;
mod sql_output;
mod sql_shell;
pub mod sql_statement;
pub mod synth;

use crate::cli::InputArgs;
use hvaudit::ingest::{IngestFailure, IngestOptions, Ingested, ingest_inputs_into, inputs};
use hvaudit::output::{Output, refuse_inputs};
use std::path::Path;

/// Rejected lines listed per input by default (the rest are counted).
pub const MAX_BAD_LINES: usize = 1000;

/// The least memory limit a run takes when it keeps to the machine's
/// available memory by itself: below it the engine's sorts, each
/// reserving 10 MiB to spill, cannot run side by side.
const LEAST_IMPLIED_LIMIT: u64 = 64 << 20;

/// Why a log is read through Parquet on disk rather than loaded.
pub struct TooLarge<'a> {
    pub input: &'a InputArgs,
    pub outputs: &'a [(&'a str, &'a Path)],
    /// The loaded table's estimated bytes (None: a stream of unknown size).
    pub estimate: Option<u64>,
    /// The memory limit the run keeps to: `--memory-limit`, or, without
    /// one, half of the memory `available` (at least
    /// `LEAST_IMPLIED_LIMIT`).
    pub limit: u64,
    /// The machine's available memory, when no limit was given and the
    /// loaded table would not fit it.
    pub available: Option<u64>,
}

impl TooLarge<'_> {
    /// The limit for the query engine (the in-place run).
    pub fn engine_limit(&self) -> Option<usize> {
        Some(usize::try_from(self.limit).unwrap_or(usize::MAX))
    }
}

/// Whether the loaded tables of `found` would not fit `--memory-limit`
/// (half of it is left to the query engine), or, without a limit, the
/// memory this machine has available (`memory::available`; a stream of
/// unknown size is then loaded). `need` is the loaded run's bytes per
/// byte of the table estimate, in tenths (10: an audit).
pub fn too_large_for<'a>(
    input: &'a InputArgs,
    found: &[inputs::Input],
    outputs: &'a [(&'a str, &'a Path)],
    need: u64,
) -> Option<TooLarge<'a>> {
    let estimate = table_estimate(found);
    let (limit, available) = match input.memory_limit {
        Some(limit) => {
            if estimate.is_some_and(|e| e <= limit / 2) {
                return None;
            }
            (limit, None)
        }
        None => {
            let available = memory::available()?;
            if estimate?.saturating_mul(need) / 10 <= available {
                return None;
            }
            ((available / 2).max(LEAST_IMPLIED_LIMIT), Some(available))
        }
    };
    Some(TooLarge {
        input,
        outputs,
        estimate,
        limit,
        available,
    })
}

/// [`too_large_for`] an audit, `sql` session or replay.
pub fn too_large<'a>(
    input: &'a InputArgs,
    found: &[inputs::Input],
    outputs: &'a [(&'a str, &'a Path)],
) -> Option<TooLarge<'a>> {
    too_large_for(input, found, outputs, 10)
}

/// A log read into Parquet in a scratch directory (removed when this is
/// dropped, also on an error or an interrupt).
pub struct OnDisk {
    /// The inputs' accounting (the tables themselves are on disk).
    pub ingested: Ingested,
    /// `convert`'s layout of the tables, in the scratch directory.
    pub tables: std::path::PathBuf,
    _scratch: hvaudit::signals::TempDir,
}

/// Read `found` with its rows spilled and write it as `convert` does into
/// a scratch directory in the spill directory, for a command to use in
/// place; `then` says what comes next, for the stderr line.
pub fn read_to_disk(
    found: Vec<inputs::Input>,
    skipped: Vec<inputs::Skipped>,
    how: &TooLarge,
    quiet: bool,
    then: &str,
) -> anyhow::Result<OnDisk> {
    let parent = how
        .input
        .spill_dir
        .clone()
        .unwrap_or_else(std::env::temp_dir);
    report_stale(&parent, quiet, false);
    let scratch = hvaudit::signals::temp_dir_in(&parent).map_err(|e| {
        anyhow::anyhow!(
            "cannot make a scratch directory in {}: {e}; choose another with --spill-dir",
            inputs::shown_path(&parent)
        )
    })?;
    if !quiet {
        let size = how
            .estimate
            .map(|e| format!("about {} MiB", e >> 20))
            .unwrap_or_else(|| "of unknown size (a stream)".into());
        let room = match how.available {
            Some(available) => format!(
                "the {} MiB this machine has available (without --memory-limit, the run keeps \
                 to {} MiB)",
                available >> 20,
                how.limit >> 20
            ),
            None => format!("--memory-limit {} MiB", how.limit >> 20),
        };
        eprintln!(
            "hvaudit: the loaded table ({size}) would not fit {room}: reading it to {} and {then}",
            inputs::shown_path(scratch.path())
        );
    }
    let mut ingested = load_found(
        how.input,
        found,
        skipped,
        quiet,
        how.outputs,
        MAX_BAD_LINES,
        Some(scratch.path().to_path_buf()),
    )?;
    let tables = scratch.path().join("tables");
    std::fs::create_dir_all(&tables)?;
    let spinner = hvaudit::progress::phase_spinner(quiet, "spilling: writing the rows as Parquet");
    convert::write_tables(&mut ingested, &tables, false, 0)?;
    drop(spinner);
    Ok(OnDisk {
        ingested,
        tables,
        _scratch: scratch,
    })
}

/// The bytes a loaded run over `inputs` would take in memory, about:
/// twice the NDJSON (a loaded audit of a generated log peaks at 1.7-1.8x:
/// the table about 1.0x, the rule phase the rest), compressed input
/// counting 10x its size, Parquet 10x; None when a stream's size cannot be
/// known before it is read.
pub fn table_estimate(inputs: &[inputs::Input]) -> Option<u64> {
    use inputs::Format;
    inputs.iter().try_fold(0u64, |sum, i| {
        if i.stream.is_some() {
            return None;
        }
        let factor = match i.format {
            Format::Ndjson => 2,
            Format::Gzip | Format::Zstd => 10,
            Format::Parquet => 10,
        };
        Some(sum.saturating_add(i.bytes.saturating_mul(factor)))
    })
}

/// `load_found` as `audit` and `sql` load a log that fits: in memory, with
/// the default number of rejected lines listed.
pub fn load_held(
    args: &InputArgs,
    found: Vec<inputs::Input>,
    skipped: Vec<inputs::Skipped>,
    quiet: bool,
    outputs: &[(&str, &Path)],
) -> anyhow::Result<Ingested> {
    load_found(args, found, skipped, quiet, outputs, MAX_BAD_LINES, None)
}

/// Read the inputs named on the command line, already expanded, with the
/// shared options. `outputs` are the command's output files (option,
/// path): none may be one of the inputs. `max_bad_default` is the command's
/// number of rejected lines listed per input when `--max-bad-lines` is not
/// given; the event rows are spilled to files in `spill` as they are read
/// when it is given (`Ingested::spilled`).
pub fn load_found(
    args: &InputArgs,
    found: Vec<inputs::Input>,
    skipped: Vec<inputs::Skipped>,
    quiet: bool,
    outputs: &[(&str, &Path)],
    max_bad_default: usize,
    spill: Option<std::path::PathBuf>,
) -> anyhow::Result<Ingested> {
    let opts = reading_options(args, max_bad_default, spill);
    read_found(args, opts, found, skipped, quiet, outputs)
}

/// How the shared input options read logs; `max_bad_default` is the
/// command's number of rejected lines listed per input when
/// `--max-bad-lines` is not given, `spill` where the rows go as they are
/// read, if anywhere.
pub fn reading_options(
    args: &InputArgs,
    max_bad_default: usize,
    spill: Option<std::path::PathBuf>,
) -> IngestOptions {
    IngestOptions {
        spill_dir: spill,
        token_format: args.token_format.into(),
        max_line_bytes: usize::try_from(args.max_line_bytes).unwrap_or(usize::MAX),
        keep_bad_raw: args.bad_lines.is_some(),
        max_bad_lines: args.max_bad_lines.unwrap_or(max_bad_default),
        allow_empty: args.allow_empty,
        ..Default::default()
    }
}

/// Read inputs already expanded with `opts`, with a progress bar, the
/// `--bad-lines` output and the accounting on stderr.
pub fn read_found(
    args: &InputArgs,
    opts: IngestOptions,
    found: Vec<inputs::Input>,
    skipped: Vec<inputs::Skipped>,
    quiet: bool,
    outputs: &[(&str, &Path)],
) -> anyhow::Result<Ingested> {
    let mut outputs = outputs.to_vec();
    if let Some(path) = &args.bad_lines {
        outputs.push(("--bad-lines", path));
    }
    refuse_inputs(&outputs, &found)?;
    let mut bad_out = args.bad_lines.as_deref().map(Output::create).transpose()?;
    let phase = if opts.spill_dir.is_some() {
        "reading, spilling rows"
    } else {
        "reading"
    };
    let total = found.iter().map(|i| i.bytes).sum();
    let bar = hvaudit::progress::ingest_bar(quiet, phase, total, &opts.progress);
    let ingested = ingest_inputs_into(&found, skipped, &opts, bad_out.as_mut().map(Output::writer))
        .map_err(|e| match e {
            IngestFailure::BadLinesOut(e) => {
                let path = args.bad_lines.as_deref().unwrap_or(Path::new("-"));
                anyhow::anyhow!("cannot write --bad-lines {}: {e}", inputs::shown_path(path))
            }
            other => anyhow::Error::new(other),
        })?;
    drop(bar);
    if let Some(out) = bad_out {
        out.finish()?;
    }
    if quiet {
        // The summary is off, but an input that could not be read whole
        // is still said.
        for i in ingested.inputs.iter().filter(|i| i.error.is_some()) {
            eprintln!(
                "hvaudit: warning: {}: {}",
                i.path,
                i.error.as_deref().unwrap_or_default()
            );
        }
    } else {
        eprint!("{}", accounting(&ingested));
    }
    Ok(ingested)
}

/// The "nothing silently lost" summary: lines = events + redeliveries + bad.
pub fn accounting(ing: &Ingested) -> String {
    let mut out = String::new();
    let line = |out: &mut String, i: &hvaudit::InputSummary| {
        let mark = if i.identity_holds() { "" } else { "  MISMATCH" };
        out.push_str(&format!(
            "  {}: {} lines = {} events{} + {} redeliveries + {} bad lines ({} blank skipped){mark}\n",
            i.path,
            i.lines,
            i.events,
            hvaudit::report::copies_term(i),
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

/// Remove the temp files a killed run of ours left in `dir` and say so;
/// with `list_foreign`, list those that another host's run may be writing.
pub fn report_stale(dir: &Path, quiet: bool, list_foreign: bool) {
    let stale = hvaudit::signals::sweep_stale(dir);
    for p in &stale.removed {
        if !quiet {
            eprintln!(
                "hvaudit: removed {}, left by an interrupted run",
                inputs::shown_path(p)
            );
        }
    }
    for p in stale.kept.iter().filter(|_| list_foreign) {
        eprintln!(
            "hvaudit: note: {} is a temp file of another host's run (or an older \
             version's); remove it if no run is writing there",
            inputs::shown_path(p)
        );
    }
}
