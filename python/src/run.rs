//! `audit`, `Session` and `replay`: the CLI's commands up to the point
//! where they would render, keeping what they computed for Python.

use crate::cli::{self, Command, InputArgs};
use crate::commands;
use crate::config::{self, ArgsError};
use crate::{HvauditError, InputError, RuleError, UsageError};
use datafusion::arrow::datatypes::Schema;
use datafusion::arrow::record_batch::RecordBatch;
use datafusion::prelude::SessionContext;
use hvaudit::audit::{Audit, AuditConfig, AuditError, Mode};
use hvaudit::engine::{self, EngineOptions, RuleSettings};
use hvaudit::gate::{GateOptions, baseline::Baseline, suppressions::Suppressions};
use hvaudit::ingest::inputs;
use hvaudit::replay::{ReplayError, ReplayRequest, Scope, Tables};
use hvaudit::report;
use pyo3::prelude::*;
use pyo3::types::PyBytes;
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

/// Any other error, as `HvauditError`.
pub fn other(e: impl std::fmt::Display) -> PyErr {
    HvauditError::new_err(e.to_string())
}

/// The exception of an error the CLI would print as `hvaudit: {e:#}` (exit
/// 2), by what failed; `otherwise` when nothing says.
fn classify(e: anyhow::Error, otherwise: fn(String) -> Failure) -> Failure {
    let message = format!("{e:#}");
    let of_audit = |a: &AuditError| match a {
        AuditError::Usage(_) => Failure::Usage,
        AuditError::Rules(_) => Failure::Rule,
        AuditError::Input(_) => Failure::Input,
        _ => Failure::Other,
    };
    let kind = if let Some(a) = e.downcast_ref::<AuditError>() {
        of_audit(a)
    } else if let Some(r) = e.downcast_ref::<ReplayError>() {
        match r {
            ReplayError::Unknown { .. } => Failure::Usage,
            ReplayError::Audit(a) => of_audit(a),
            ReplayError::Engine(_) => Failure::Other,
        }
    } else if e.downcast_ref::<inputs::InputError>().is_some()
        || e.downcast_ref::<hvaudit::ingest::IngestFailure>().is_some()
    {
        Failure::Input
    } else {
        otherwise
    };
    kind(message)
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
    hvaudit::ingest::remote::configure(hvaudit::ingest::remote::StoreOptions {
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

/// The tables an audit read besides the events, for `Report`.
#[derive(Default)]
struct Side {
    evidence: Vec<RecordBatch>,
    bad_lines: Vec<RecordBatch>,
}

/// `evidence` and `bad_lines` of `convert`'s Parquet at `paths`.
fn side_tables(paths: &[PathBuf], allow_empty: bool) -> anyhow::Result<Side> {
    let files = hvaudit::ingest::in_place::scan_inputs(paths, allow_empty)?;
    hvaudit::audit::block_on(async {
        let ctx = engine::session(&EngineOptions::default())?;
        hvaudit::ingest::in_place::register_tables(&ctx, &files).await?;
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
/// report: the same configuration, gate, loaded or spilled read and exit
/// code; `quiet` unless progress was asked for.
fn run_audit(words: Vec<OsString>, quiet: bool) -> Result<Audited, Failure> {
    let (cli, config) = parse(&words)?;
    let Command::Audit(args) = cli.command else {
        return Err(Failure::Usage("not an audit command line".into()));
    };
    configure_stores(&args.input);
    let usage = |e: anyhow::Error| classify(e, Failure::Usage);
    let input = |e: anyhow::Error| classify(e, Failure::Input);
    let cfg = AuditConfig {
        inputs: args.input.paths.clone(),
        spec: args.spec.into(),
        token_format: args.input.token_format.into(),
        horizon_ms: args.horizon,
        decision_types: args.decision_types.clone(),
        rules_glob: args.selection.rules.clone(),
        exclude_rules: args.selection.exclude_rules.clone(),
        rule_overrides: config.rules.clone(),
        allow_empty: args.input.allow_empty,
        rules_dir: args.rules_dir.clone(),
        since: args.since,
        until: args.until,
        memory_limit: args.input.memory_limit.map(|m| m as usize),
        spill_dir: args.input.spill_dir.clone(),
        progress: !quiet,
    };
    let audit = Audit::new(cfg).reading(commands::reading_options(
        &args.input,
        commands::MAX_BAD_LINES,
        None,
    ));
    let cfg = audit.config().clone();
    let catalog = audit.catalog().map_err(|e| usage(e.into()))?;
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
    let (mut report, side) = match &args.cluster {
        Some(url) => {
            let report = on_cluster(audit, &catalog, url, args.timeout).map_err(input)?;
            (report, Side::default())
        }
        None if args.in_place => {
            commands::report_stale(&cfg.spill_dir_or_default(), quiet, false);
            let report = audit
                .mode(Mode::InPlace)
                .run_with(&catalog)
                .map_err(|e| input(e.into()))?;
            let side = side_tables(&cfg.inputs, cfg.allow_empty).map_err(input)?;
            (report, side)
        }
        None => {
            let (found, skipped) = inputs::expand(&args.input.paths, args.input.allow_empty)
                .map_err(|e| input(e.into()))?;
            match commands::too_large(&args.input, &found, &[]) {
                Some(how) => {
                    // src/commands/audit.rs's audit_spilled, keeping the
                    // evidence and the rejected lines (read from disk).
                    let on_disk =
                        commands::read_to_disk(found, skipped, &how, quiet, "auditing it there")
                            .map_err(input)?;
                    let in_place = AuditConfig {
                        inputs: vec![on_disk.tables.clone()],
                        allow_empty: true,
                        memory_limit: how.engine_limit(),
                        ..cfg.clone()
                    };
                    let mut report = Audit::new(in_place)
                        .mode(Mode::InPlace)
                        .run_with(&catalog)
                        .map_err(|e| input(e.into()))?;
                    report.inputs = on_disk.ingested.inputs.clone();
                    report.inputs.extend(
                        on_disk
                            .ingested
                            .skipped
                            .iter()
                            .map(hvaudit::audit::skipped_input),
                    );
                    let side =
                        side_tables(std::slice::from_ref(&on_disk.tables), true).map_err(input)?;
                    (report, side)
                }
                None => {
                    let reading = audit.ingest_options().clone();
                    let mut ingested =
                        commands::read_found(&args.input, reading, found, skipped, quiet, &[])
                            .map_err(input)?;
                    let side = Side {
                        evidence: ingested.evidence.clone(),
                        bad_lines: ingested.bad_lines.clone(),
                    };
                    let report = audit
                        .rules_over(&catalog, &mut ingested)
                        .map_err(|e| input(e.into()))?;
                    (report, side)
                }
            }
        }
    };
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

#[cfg(feature = "cluster")]
fn on_cluster(
    audit: Audit,
    catalog: &hvaudit::rules::catalog::Catalog,
    url: &str,
    timeout: Option<Duration>,
) -> anyhow::Result<hvaudit::Report> {
    let timeout = cli::cluster_timeout(timeout);
    Ok(audit
        .mode(Mode::Cluster {
            url: url.to_string(),
            timeout,
        })
        .run_with(catalog)?)
}

#[cfg(not(feature = "cluster"))]
fn on_cluster(
    _: Audit,
    _: &hvaudit::rules::catalog::Catalog,
    url: &str,
    _: Option<Duration>,
) -> anyhow::Result<hvaudit::Report> {
    anyhow::bail!(
        "--cluster {url}: this build has no cluster support; rebuild with the `cluster` feature"
    )
}

/// Run an audit: `words` are the `hvaudit audit` command line's words
/// after `audit` (python/hvaudit/__init__.py makes them).
#[pyfunction]
#[pyo3(signature = (words, progress = false))]
pub fn audit(py: Python<'_>, words: Vec<OsString>, progress: bool) -> PyResult<Report> {
    let audited = wait(py, None, move || run_audit(words, !progress))??;
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

    /// The findings as `--format parquet` writes them, as an Arrow IPC stream.
    fn findings_ipc<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyBytes>> {
        let (schema, batches) = report::findings_batches(&self.inner.report).map_err(other)?;
        crate::arrow::to_py(py, &schema, &batches)
    }

    /// The `evidence` table of the audited log, as an Arrow IPC stream.
    fn evidence_ipc<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyBytes>> {
        let empty = Arc::new(Schema::empty());
        crate::arrow::to_py(py, &empty, &self.inner.side.evidence)
    }

    /// The `bad_lines` table of the audited log, as an Arrow IPC stream.
    fn bad_lines_ipc<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyBytes>> {
        let empty = Arc::new(Schema::empty());
        crate::arrow::to_py(py, &empty, &self.inner.side.bad_lines)
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
        let format = <report::Format as clap::ValueEnum>::from_str(format, true).map_err(|_| {
            let names: Vec<String> = <report::Format as clap::ValueEnum>::value_variants()
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
    /// A log too large to load, read into Parquet on disk: removed when the
    /// session goes.
    _on_disk: Option<commands::OnDisk>,
}

/// `hvaudit sql WORDS...`'s session, as src/commands/sql.rs makes it.
fn open_session(
    words: Vec<OsString>,
    quiet: bool,
) -> Result<(SessionContext, Option<commands::OnDisk>), Failure> {
    let (cli, _) = parse(&words)?;
    let Command::Sql(args) = cli.command else {
        return Err(Failure::Usage("not a sql command line".into()));
    };
    configure_stores(&args.input);
    let input = |e: anyhow::Error| classify(e, Failure::Input);
    let mut on_disk = None;
    let made: anyhow::Result<SessionContext> = hvaudit::audit::block_on(async {
        let local = |memory_limit: Option<usize>| {
            engine::session(&EngineOptions {
                memory_limit,
                spill_dir: args.input.spill_dir.clone(),
                partitions: None,
            })
        };
        let given = args.input.memory_limit.map(|m| m as usize);
        let ctx = if let Some(url) = &args.cluster {
            anyhow::bail!(
                "--cluster {url}: a Python session runs locally; query a cluster with `hvaudit sql`"
            )
        } else if args.in_place {
            let files =
                hvaudit::ingest::in_place::scan_inputs(&args.input.paths, args.input.allow_empty)?;
            let ctx = local(given)?;
            hvaudit::ingest::in_place::register_tables(&ctx, &files).await?;
            ctx
        } else {
            let (found, skipped) = inputs::expand(&args.input.paths, args.input.allow_empty)?;
            match commands::too_large(&args.input, &found, &[]) {
                Some(how) => {
                    let ctx = local(how.engine_limit())?;
                    let disk =
                        commands::read_to_disk(found, skipped, &how, quiet, "querying it there")?;
                    let files = hvaudit::ingest::in_place::scan_inputs(
                        std::slice::from_ref(&disk.tables),
                        true,
                    )?;
                    hvaudit::ingest::in_place::register_tables(&ctx, &files).await?;
                    on_disk = Some(disk);
                    ctx
                }
                None => {
                    let ctx = local(given)?;
                    let ingested = commands::load_held(&args.input, found, skipped, quiet, &[])?;
                    engine::register_tables(&ctx, &ingested)?;
                    ctx
                }
            }
        };
        engine::register_settings(
            &ctx,
            &RuleSettings {
                token_format: args.input.token_format.into(),
                ..Default::default()
            },
        )?;
        if let Ok(catalog) = hvaudit::rules::catalog::Catalog::embedded() {
            hvaudit::rules::register_views(&ctx, &catalog, &hvaudit::rules::Materialize::Never)
                .await;
        }
        Ok(ctx)
    });
    Ok((made.map_err(input)?, on_disk))
}

#[pymethods]
impl Session {
    /// Read the log: `words` are the `hvaudit sql` command line's words
    /// after `sql`.
    #[new]
    #[pyo3(signature = (words, progress = false))]
    fn new(py: Python<'_>, words: Vec<OsString>, progress: bool) -> PyResult<Session> {
        let (ctx, on_disk) = wait(py, None, move || open_session(words, !progress))??;
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .enable_all()
            .build()
            .map_err(other)?;
        Ok(Session {
            ctx,
            runtime: Arc::new(runtime),
            _on_disk: on_disk,
        })
    }

    /// Run `query` (several statements separated by `;` run in order) and
    /// return the last one's rows as an Arrow IPC stream.
    fn sql<'py>(&self, py: Python<'py>, query_text: String) -> PyResult<Bound<'py, PyBytes>> {
        let ctx = self.ctx.clone();
        let task = self.runtime.spawn(async move {
            use commands::sql_statement::{Power, query, split_statements};
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
        crate::arrow::to_py(py, &empty, &batches)
    }
}

/// What `replay` hands to Python: the replay and how to render it.
#[pyclass(frozen, module = "hvaudit._hvaudit")]
pub struct Replay {
    replay: Arc<hvaudit::replay::Replay>,
}

/// `hvaudit replay WORDS...`, as src/commands/replay.rs builds it.
fn run_replay(words: Vec<OsString>, quiet: bool) -> Result<hvaudit::replay::Replay, Failure> {
    let (cli, _) = parse(&words)?;
    let Command::Replay(args) = cli.command else {
        return Err(Failure::Usage("not a replay command line".into()));
    };
    configure_stores(&args.input);
    let input = |e: anyhow::Error| classify(e, Failure::Input);
    let scope = match (&args.task, &args.session) {
        (Some(t), None) => Scope::Task(t.clone()),
        (None, Some(s)) => Scope::Session(s.clone()),
        _ => {
            return Err(Failure::Usage(
                "name what to replay: task=ID or session=ID".into(),
            ));
        }
    };
    let cfg = AuditConfig {
        inputs: args.input.paths.clone(),
        spec: args.spec.into(),
        token_format: args.input.token_format.into(),
        decision_types: args.decision_types.clone(),
        memory_limit: args.input.memory_limit.map(|m| m as usize),
        spill_dir: args.input.spill_dir.clone(),
        progress: !quiet,
        ..Default::default()
    };
    let request = ReplayRequest { scope, at: args.at };
    let (found, skipped) =
        inputs::expand(&args.input.paths, args.input.allow_empty).map_err(|e| input(e.into()))?;
    let replayed = match commands::too_large(&args.input, &found, &[]) {
        Some(how) => {
            let on_disk = commands::read_to_disk(found, skipped, &how, quiet, "replaying it there")
                .map_err(input)?;
            let files =
                hvaudit::ingest::in_place::scan_inputs(std::slice::from_ref(&on_disk.tables), true)
                    .map_err(input)?;
            let cfg = AuditConfig {
                memory_limit: how.engine_limit(),
                ..cfg
            };
            hvaudit::replay::replay(&cfg, Tables::InPlace(&files), &request)
        }
        None => {
            let ingested =
                commands::load_held(&args.input, found, skipped, quiet, &[]).map_err(input)?;
            hvaudit::replay::replay(&cfg, Tables::Loaded(&ingested), &request)
        }
    };
    replayed.map_err(|e| input(e.into()))
}

/// Replay a task's tree or a session: `words` are the `hvaudit replay`
/// command line's words after `replay`.
#[pyfunction]
#[pyo3(signature = (words, progress = false))]
pub fn replay(py: Python<'_>, words: Vec<OsString>, progress: bool) -> PyResult<Replay> {
    let replay = wait(py, None, move || run_replay(words, !progress))??;
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
