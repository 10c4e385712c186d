//! `audit`, `Session` and `replay`: the CLI's commands up to the point
//! where they would render, keeping what they computed for Python. The
//! options are the CLI's (`translate`); the tables are opened, audited,
//! queried and replayed by the library, as the binary does.

use crate::arrow::ArrowStream;
use crate::cli::{self, Command, InputArgs};
use crate::config::{self, ArgsError};
use crate::translate;
use crate::{HvauditError, InputError, RuleError, UsageError};
use datafusion::arrow::datatypes::Schema;
use datafusion::arrow::record_batch::RecordBatch;
use datafusion::prelude::SessionContext;
use hvaudit::audit::{Audit, AuditError};
use hvaudit::engine::{self, RuleSettings};
use hvaudit::gate::{GateOptions, baseline::Baseline, suppressions::Suppressions};
use hvaudit::ingest::inputs;
use hvaudit::interrupt::Interrupt;
use hvaudit::replay::{ReplayError, ReplayRequest, Scope};
use hvaudit::report;
use hvaudit::tables::{Place, Purpose, Tables, TablesError};
use pyo3::prelude::*;
use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

/// Why a call failed, and so which exception it raises.
#[derive(Debug)]
pub enum Failure {
    Usage(String),
    Input(String),
    Rule(String),
    Other(String),
}

impl From<Failure> for PyErr {
    fn from(f: Failure) -> PyErr {
        match f {
            Failure::Usage(m) => UsageError::new_err(m),
            Failure::Input(m) => InputError::new_err(m),
            Failure::Rule(m) => RuleError::new_err(m),
            Failure::Other(m) => HvauditError::new_err(m),
        }
    }
}

impl From<AuditError> for Failure {
    fn from(e: AuditError) -> Failure {
        let kind = match &e {
            AuditError::Usage(_) => Failure::Usage,
            AuditError::Rules(_) => Failure::Rule,
            AuditError::Input(_) => Failure::Input,
            _ => Failure::Other,
        };
        kind(cli_message(e))
    }
}

impl From<TablesError> for Failure {
    fn from(e: TablesError) -> Failure {
        AuditError::from(e).into()
    }
}

impl From<ReplayError> for Failure {
    fn from(e: ReplayError) -> Failure {
        match e {
            ReplayError::Audit(a) => a.into(),
            e @ ReplayError::Unknown { .. } => Failure::Usage(cli_message(e)),
            e @ ReplayError::Engine(_) => Failure::Other(cli_message(e)),
        }
    }
}

/// The message the CLI prints after `hvaudit: ` for `e` (its causes too).
fn cli_message(e: impl std::error::Error + Send + Sync + 'static) -> String {
    format!("{:#}", anyhow::Error::new(e))
}

/// Any other error, as `HvauditError`.
pub fn other(e: impl std::fmt::Display) -> PyErr {
    HvauditError::new_err(e.to_string())
}

/// The exception of an error the CLI would print as `hvaudit: {e:#}` (exit
/// 2), by what failed; `otherwise` when nothing says.
fn classify(e: anyhow::Error, otherwise: fn(String) -> Failure) -> Failure {
    let e = match e.downcast::<AuditError>() {
        Ok(a) => return a.into(),
        Err(e) => e,
    };
    let message = format!("{e:#}");
    if e.downcast_ref::<inputs::InputError>().is_some()
        || e.downcast_ref::<hvaudit::ingest::IngestFailure>().is_some()
    {
        Failure::Input(message)
    } else {
        otherwise(message)
    }
}

/// The command line `hvaudit WORDS...` parsed as the binary parses it,
/// with the configuration file it names merged in.
fn parse(words: &[OsString]) -> Result<(cli::Cli, config::Config), Failure> {
    let argv = std::iter::once(OsString::from("hvaudit")).chain(words.iter().cloned());
    config::parse_command_line(argv).map_err(|e| match e {
        ArgsError::Clap(e) => Failure::Usage(clap_message(&e)),
        ArgsError::Config(m) => Failure::Usage(m),
    })
}

/// clap's message without its `error: ` prefix and the usage lines that
/// follow it (they name the CLI's flags, which the message already does).
fn clap_message(e: &clap::Error) -> String {
    let text = e.to_string();
    let text = text.strip_prefix("error: ").unwrap_or(&text);
    let end = ["\n\nUsage:", "\n\nFor more information"]
        .iter()
        .filter_map(|m| text.find(m))
        .min()
        .unwrap_or(text.len());
    text[..end].trim_end().to_string()
}

/// Point the object stores at `--endpoint`, as the binary does at start.
fn configure_stores(input: &InputArgs) {
    use hvaudit::object_storage::{StoreOptions, configure};
    configure(StoreOptions {
        endpoint: input.endpoint.clone(),
    });
}

/// Run `work` on a thread of its own while this one, the GIL released,
/// waits for it; every 50 ms Python may run its signal handlers, so Ctrl-C
/// raises `KeyboardInterrupt` here at once. The interrupted work is then
/// abandoned: its thread finishes on its own and drops what it made (its
/// scratch files are removed as they are dropped); `cancel`, if given, is
/// called to stop it sooner.
pub fn wait<T: Send + 'static>(
    py: Python<'_>,
    cancel: Option<&dyn Fn()>,
    work: impl FnOnce() -> T + Send + 'static,
) -> PyResult<T> {
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::Builder::new()
        .name("hvaudit".into())
        .spawn(move || {
            let _ = tx.send(work());
        })
        .map_err(other)?;
    let mut rx = rx;
    loop {
        let (got, back) = py.detach(move || (rx.recv_timeout(Duration::from_millis(50)), rx));
        rx = back;
        match got {
            Ok(done) => return Ok(done),
            Err(std::sync::mpsc::RecvTimeoutError::Timeout) => {
                if let Err(e) = py.check_signals() {
                    if let Some(cancel) = cancel {
                        cancel();
                    }
                    return Err(e);
                }
            }
            Err(std::sync::mpsc::RecvTimeoutError::Disconnected) => {
                return Err(HvauditError::new_err(
                    "the work stopped without an answer (a panic; see stderr)",
                ));
            }
        }
    }
}

/// [`wait`] for `work`, handing it an interrupt that Ctrl-C sets: the work
/// itself stops (its ingest and queries), not only the wait for it.
fn interruptible<T: Send + 'static>(
    py: Python<'_>,
    work: impl FnOnce(Interrupt) -> T + Send + 'static,
) -> PyResult<T> {
    let interrupt = Interrupt::default();
    let stop = interrupt.clone();
    wait(py, Some(&move || stop.interrupt()), move || work(interrupt))
}

/// The tables an audit read besides the events, for `Report`.
#[derive(Default)]
struct Side {
    evidence: Vec<RecordBatch>,
    bad_lines: Vec<RecordBatch>,
}

/// `evidence` and `bad_lines` of `tables`: the loaded batches, or read
/// from the Parquet files (on disk or in place); none from a cluster.
fn side_tables(tables: &Tables) -> anyhow::Result<Side> {
    match &tables.place {
        Place::Loaded(ingested) => {
            return Ok(Side {
                evidence: ingested.evidence.clone(),
                bad_lines: ingested.bad_lines.clone(),
            });
        }
        #[cfg(feature = "cluster")]
        Place::Cluster(_) => return Ok(Side::default()),
        Place::OnDisk(_) | Place::InPlace(_) => {}
    }
    hvaudit::audit::block_on(async {
        let (ctx, _) = tables.session().await?;
        let all = |table: &'static str| {
            let ctx = ctx.clone();
            async move {
                anyhow::Ok(
                    ctx.sql(&format!("SELECT * FROM {table}"))
                        .await?
                        .collect()
                        .await?,
                )
            }
        };
        Ok(Side {
            evidence: all("evidence").await?,
            bad_lines: all("bad_lines").await?,
        })
    })
}

/// What `audit` hands to Python.
struct Audited {
    report: hvaudit::Report,
    exit_code: u8,
    side: Side,
    /// The command line the options make (the HTML header states it).
    command: Vec<String>,
    configuration: Option<report::Configuration>,
}

/// `hvaudit audit WORDS...`, as src/commands/audit.rs runs it, up to the
/// report: the same options, gate, tables and exit code; `quiet` unless
/// progress was asked for.
fn run_audit(words: Vec<OsString>, quiet: bool, interrupt: Interrupt) -> Result<Audited, Failure> {
    let (cli, config) = parse(&words)?;
    let Command::Audit(args) = cli.command else {
        return Err(Failure::Usage("not an audit command line".into()));
    };
    configure_stores(&args.input);
    let usage = |e: anyhow::Error| classify(e, Failure::Usage);
    let mut cfg = translate::audit(&args, &config, quiet).map_err(usage)?;
    cfg.reading.ingest.interrupt = interrupt;
    let audit = Audit::new(cfg);
    let catalog = audit.catalog()?;
    let gate_options = GateOptions {
        fail_on: args.fail_on.0,
        fail_on_new: args.fail_on_new,
        suppressions: args
            .suppressions
            .as_deref()
            .map(Suppressions::load)
            .transpose()
            .map_err(usage)?,
        baseline: args
            .baseline
            .as_deref()
            .map(Baseline::load)
            .transpose()
            .map_err(usage)?,
        today: None,
    };
    let mut tables = Tables::open(&audit.config().reading, Purpose::Audit)?;
    // Before the audit: a loaded one lets go of what no rule reads.
    let side = side_tables(&tables).map_err(|e| classify(e, Failure::Input))?;
    let mut report = audit.run_on(&catalog, &mut tables)?;
    drop(tables);
    hvaudit::gate::apply(&mut report, gate_options);
    if report.rule_errors.is_empty() && report.no_events() && !args.input.allow_empty {
        return Err(Failure::Input(
            "the inputs hold no events, so nothing was audited; check the inputs \
             or pass allow_empty=True to accept it"
                .into(),
        ));
    }
    let (_, unused) = hvaudit::gate::stale_entries(&report);
    let exit_code = if !report.rule_errors.is_empty() {
        2
    } else if args.error_on_unused_suppressions && !unused.is_empty() {
        1
    } else {
        u8::from(report.failing() > 0)
    };
    let argv = std::iter::once(OsString::from("hvaudit")).chain(words);
    Ok(Audited {
        report,
        exit_code,
        side,
        command: report::command_line(argv),
        configuration: config.applied(),
    })
}

/// Run an audit: `words` are the `hvaudit audit` command line's words
/// after `audit` (python/hvaudit/__init__.py makes them).
#[pyfunction]
#[pyo3(signature = (words, progress = false))]
pub fn audit(py: Python<'_>, words: Vec<OsString>, progress: bool) -> PyResult<Report> {
    let audited = interruptible(py, move |stop| run_audit(words, !progress, stop))??;
    Ok(Report {
        inner: Arc::new(audited),
    })
}

/// An audit's outcome (python/hvaudit/__init__.py wraps it).
#[pyclass(frozen, module = "hvaudit._hvaudit")]
pub struct Report {
    inner: Arc<Audited>,
}

#[pymethods]
impl Report {
    /// The CLI's exit code for this audit: 0, 1 (findings at or above
    /// fail_on) or 2 (a rule failed).
    #[getter]
    fn exit_code(&self) -> u8 {
        self.inner.exit_code
    }

    /// The rules that failed, as (rule, error).
    #[getter]
    fn rule_errors(&self) -> Vec<(String, String)> {
        self.inner.report.rule_errors.clone()
    }

    /// The JSON report without its findings, as a JSON text.
    fn summary_json(&self) -> PyResult<String> {
        report::summary_json(&self.inner.report).map_err(other)
    }

    /// The findings as `--format parquet` writes them, as an Arrow stream.
    fn findings_arrow(&self) -> PyResult<ArrowStream> {
        let (schema, batches) = report::findings_batches(&self.inner.report).map_err(other)?;
        Ok(ArrowStream::new(&schema, batches))
    }

    /// One row per input with its accounting, as an Arrow stream.
    fn inputs_arrow(&self) -> PyResult<ArrowStream> {
        let batch = report::inputs_batch(&self.inner.report.inputs).map_err(other)?;
        Ok(ArrowStream::new(&batch.schema(), vec![batch]))
    }

    /// The `evidence` table of the audited log, as an Arrow stream.
    fn evidence_arrow(&self) -> ArrowStream {
        let empty = Arc::new(Schema::empty());
        ArrowStream::new(&empty, self.inner.side.evidence.clone())
    }

    /// The `bad_lines` table of the audited log, as an Arrow stream.
    fn bad_lines_arrow(&self) -> ArrowStream {
        let empty = Arc::new(Schema::empty());
        ArrowStream::new(&empty, self.inner.side.bad_lines.clone())
    }

    /// Write the report to `path` in `format`, as `hvaudit audit --format
    /// FORMAT -o PATH` does; the text is `columns` wide (Python's `COLUMNS`:
    /// the process's own may be readline's), else as wide as a file's.
    #[pyo3(signature = (path, format, columns = None))]
    fn write(
        &self,
        py: Python<'_>,
        path: PathBuf,
        format: &str,
        columns: Option<usize>,
    ) -> PyResult<()> {
        let format =
            <report::ReportFormat as clap::ValueEnum>::from_str(format, true).map_err(|_| {
                let names: Vec<String> =
                    <report::ReportFormat as clap::ValueEnum>::value_variants()
                        .iter()
                        .filter_map(clap::ValueEnum::to_possible_value)
                        .map(|v| v.get_name().to_string())
                        .collect();
                UsageError::new_err(format!(
                    "invalid value '{format}' for format; possible values: {}",
                    names.join(", ")
                ))
            })?;
        let inner = self.inner.clone();
        let written = wait(py, None, move || {
            let opts = report::RenderOptions {
                text: report::TextOptions {
                    color: false,
                    width: columns.unwrap_or(report::PIPED_WIDTH).max(20),
                },
                provenance: report::Provenance {
                    command: inner.command.clone(),
                    configuration: inner.configuration.clone(),
                    generated_at: Some(report::generation_time()),
                },
            };
            hvaudit::output::write_output(&path, |w| {
                report::render_with(&inner.report, format, &opts, w)
            })
        })?;
        written.map_err(|e| Failure::Usage(format!("{e:#}")).into())
    }
}

/// A `sql` session: the log read once, queried many times.
#[pyclass(frozen, module = "hvaudit._hvaudit")]
pub struct Session {
    ctx: SessionContext,
    runtime: Arc<tokio::runtime::Runtime>,
    /// The tables the session reads: a log too large to load, read into
    /// Parquet on disk, is removed when the session goes.
    _tables: Tables,
}

/// `hvaudit sql WORDS...`'s session, as src/commands/sql.rs makes it.
fn open_session(
    words: Vec<OsString>,
    quiet: bool,
    interrupt: Interrupt,
) -> Result<(SessionContext, Tables), Failure> {
    let (cli, _) = parse(&words)?;
    let Command::Sql(args) = cli.command else {
        return Err(Failure::Usage("not a sql command line".into()));
    };
    if let Some(url) = &args.cluster {
        return Err(Failure::Input(format!(
            "--cluster {url}: a Python session runs locally; query a cluster with `hvaudit sql`"
        )));
    }
    configure_stores(&args.input);
    let mut reading = translate::sql(&args, quiet).map_err(|e| classify(e, Failure::Usage))?;
    reading.ingest.interrupt = interrupt;
    let tables = Tables::open(&reading, Purpose::Query)?;
    let made: anyhow::Result<SessionContext> = hvaudit::audit::block_on(async {
        let (ctx, _) = tables.session().await?;
        engine::register_settings(
            &ctx,
            &RuleSettings {
                token_format: reading.ingest.token_format,
                ..Default::default()
            },
        )?;
        if let Ok(catalog) = hvaudit::rules::catalog::Catalog::embedded() {
            hvaudit::rules::register_views(&ctx, &catalog, &hvaudit::rules::Materialize::Never)
                .await;
        }
        Ok(ctx)
    });
    let ctx = made.map_err(|e| classify(e, Failure::Input))?;
    Ok((ctx, tables))
}

#[pymethods]
impl Session {
    /// Read the log: `words` are the `hvaudit sql` command line's words
    /// after `sql`.
    #[new]
    #[pyo3(signature = (words, progress = false))]
    fn new(py: Python<'_>, words: Vec<OsString>, progress: bool) -> PyResult<Session> {
        let (ctx, tables) = interruptible(py, move |stop| open_session(words, !progress, stop))??;
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .enable_all()
            .build()
            .map_err(other)?;
        Ok(Session {
            ctx,
            runtime: Arc::new(runtime),
            _tables: tables,
        })
    }

    /// Run `query` (several statements separated by `;` run in order) and
    /// return the last one's rows as an Arrow stream.
    fn sql(&self, py: Python<'_>, query_text: String) -> PyResult<ArrowStream> {
        let ctx = self.ctx.clone();
        let task = self.runtime.spawn(async move {
            use crate::sql_statement::{Power, query, split_statements};
            let mut last = None;
            for stmt in split_statements(&query_text) {
                last = Some(
                    query(&ctx, &stmt, Power::Full)
                        .await
                        .map_err(|e| classify(e, Failure::Usage))?,
                );
            }
            last.ok_or_else(|| Failure::Usage("no statement in the query".into()))
        });
        let abort = task.abort_handle();
        let runtime = self.runtime.clone();
        let done = wait(py, Some(&move || abort.abort()), move || {
            runtime.block_on(task)
        })?;
        let batches = done.map_err(|e| other(format!("the query stopped: {e}")))??;
        let empty = Arc::new(Schema::empty());
        Ok(ArrowStream::new(&empty, batches))
    }
}

/// What `replay` hands to Python: the replay and how to render it.
#[pyclass(frozen, module = "hvaudit._hvaudit")]
pub struct Replay {
    replay: Arc<hvaudit::replay::Replay>,
}

/// `hvaudit replay WORDS...`, as src/commands/replay.rs builds it.
fn run_replay(
    words: Vec<OsString>,
    quiet: bool,
    interrupt: Interrupt,
) -> Result<hvaudit::replay::Replay, Failure> {
    let (cli, _) = parse(&words)?;
    let Command::Replay(args) = cli.command else {
        return Err(Failure::Usage("not a replay command line".into()));
    };
    configure_stores(&args.input);
    let scope = match (&args.task, &args.session) {
        (Some(t), None) => Scope::Task(t.clone()),
        (None, Some(s)) => Scope::Session(s.clone()),
        _ => {
            return Err(Failure::Usage(
                "name what to replay: task=ID or session=ID".into(),
            ));
        }
    };
    let mut cfg = translate::replay(&args, quiet);
    cfg.reading.ingest.interrupt = interrupt;
    let request = ReplayRequest { scope, at: args.at };
    Ok(hvaudit::replay::replay(&cfg, &request)?)
}

/// Replay a task's tree or a session: `words` are the `hvaudit replay`
/// command line's words after `replay`.
#[pyfunction]
#[pyo3(signature = (words, progress = false))]
pub fn replay(py: Python<'_>, words: Vec<OsString>, progress: bool) -> PyResult<Replay> {
    let replay = interruptible(py, move |stop| run_replay(words, !progress, stop))??;
    Ok(Replay {
        replay: Arc::new(replay),
    })
}

#[pymethods]
impl Replay {
    /// The replay as `hvaudit replay --format json` writes it.
    fn json(&self) -> PyResult<String> {
        serde_json::to_string(&*self.replay).map_err(other)
    }

    /// Write the replay to `path` in `format` (text, json, html, md).
    fn write(&self, path: PathBuf, format: &str) -> PyResult<()> {
        let format = <hvaudit::replay::ReplayFormat as clap::ValueEnum>::from_str(format, true)
            .map_err(|_| {
                UsageError::new_err(format!(
                    "invalid value '{format}' for format; possible values: text, json, html, md"
                ))
            })?;
        hvaudit::output::write_output(Path::new(&path), |w| {
            hvaudit::replay::render(&self.replay, format, w)
        })
        .map_err(|e| Failure::Usage(format!("{e:#}")).into())
    }
}
