//! `hvaudit audit`: ingest, run the rules, render the report.

use crate::cli::AuditArgs;
use crate::config::Config;
use hvaudit::audit::{Audit, AuditConfig, Mode};
use hvaudit::gate::{GateOptions, baseline::Baseline, suppressions::Suppressions};
use hvaudit::ingest::inputs;
use hvaudit::output::write_output;
use hvaudit::report;
use hvaudit::rules::catalog::Catalog;

pub fn run(args: AuditArgs, config: &Config, quiet: bool) -> anyhow::Result<u8> {
    // An interrupt removes the report's temp file (see signals.rs).
    hvaudit::signals::install();
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
    if args.format == report::Format::Parquet {
        hvaudit::output::refuse_binary_to_terminal(args.output.as_deref())?;
    }
    let audit = Audit::new(cfg).reading(super::reading_options(
        &args.input,
        super::MAX_BAD_LINES,
        None,
    ));
    let cfg = audit.config();
    let catalog = audit.catalog()?;
    // The gate's files are read before the audit: a typo in one must not
    // wait for a long run to be said.
    let gate_options = GateOptions {
        fail_on: args.fail_on.0,
        fail_on_new: args.fail_on_new,
        suppressions: args
            .suppressions
            .as_deref()
            .map(Suppressions::load)
            .transpose()?,
        baseline: args.baseline.as_deref().map(Baseline::load).transpose()?,
        today: None,
    };
    if let Some(out) = &args.output
        && (args.in_place || args.cluster.is_some())
    {
        // The loaded path checks when it expands the inputs.
        let (found, _) = hvaudit::ingest::inputs::expand(&cfg.inputs, true)?;
        hvaudit::output::refuse_inputs(&[("-o", out)], &found)?;
    }
    if args.in_place {
        super::report_stale(&cfg.spill_dir_or_default(), quiet, false);
    }
    let mut report = match &args.cluster {
        Some(url) => on_cluster(audit, &catalog, url, args.timeout, quiet)?,
        None if args.in_place => audit.mode(Mode::InPlace).run_with(&catalog)?,
        None => {
            let outputs: Vec<(&str, &std::path::Path)> =
                args.output.iter().map(|p| ("-o", p.as_path())).collect();
            let (found, skipped) = inputs::expand(&args.input.paths, args.input.allow_empty)?;
            match super::too_large(&args.input, &found, &outputs) {
                Some(how) => audit_spilled(cfg, &catalog, found, skipped, how, quiet)?,
                None => {
                    let reading = audit.ingest_options().clone();
                    let mut ingested =
                        super::read_found(&args.input, reading, found, skipped, quiet, &outputs)?;
                    audit.rules_over(&catalog, &mut ingested)?
                }
            }
        }
    };
    hvaudit::gate::apply(&mut report, gate_options);
    for (rule, error) in &report.rule_errors {
        eprintln!("hvaudit: rule {rule} failed: {error}");
    }
    let path = args.output.as_deref().unwrap_or(std::path::Path::new("-"));
    let opts = report::RenderOptions {
        text: report::TextOptions {
            color: false,
            width: report::terminal_width(path == std::path::Path::new("-")),
        },
        provenance: report::Provenance {
            configuration: config.applied(),
            ..report::Provenance::of_this_process()
        },
    };
    write_output(path, |w| {
        report::render_with(&report, args.format, &opts, w)
    })?;
    if !quiet {
        eprint!("{}", gate_summary(&report));
        for note in report::window_note(&report)
            .into_iter()
            .chain(report::readings_note(&report))
        {
            eprintln!("hvaudit: {note}");
        }
    }
    if !report.rule_errors.is_empty() {
        // A rule that could not run means the audit is incomplete.
        return Ok(2);
    }
    if report.no_events() && !args.input.allow_empty {
        eprintln!(
            "hvaudit: the inputs hold no events, so nothing was audited; check the inputs \
             or pass --allow-empty to accept it"
        );
        return Ok(2);
    }
    let (expired, unused) = hvaudit::gate::stale_entries(&report);
    for e in &expired {
        eprintln!(
            "hvaudit: suppression entry {} ({}) expired on {}: it suppresses nothing now",
            e.entry,
            e.matches,
            e.expires.as_deref().unwrap_or_default()
        );
    }
    if args.error_on_unused_suppressions && !unused.is_empty() {
        for e in &unused {
            eprintln!(
                "hvaudit: suppression entry {} ({}) matched no finding; remove it \
                 (--error-on-unused-suppressions)",
                e.entry, e.matches
            );
        }
        return Ok(1);
    }
    Ok(u8::from(report.failing() > 0))
}

/// Audit logs whose loaded table would not fit the memory limit through
/// Parquet on disk (`super::read_to_disk`), in place. The report is the
/// loaded audit's: the same findings, and the accounting of the inputs as
/// read (not of the scratch files).
fn audit_spilled(
    cfg: &AuditConfig,
    catalog: &Catalog,
    found: Vec<inputs::Input>,
    skipped: Vec<inputs::Skipped>,
    how: super::TooLarge,
    quiet: bool,
) -> anyhow::Result<hvaudit::Report> {
    let on_disk = super::read_to_disk(found, skipped, &how, quiet, "auditing it there")?;
    let in_place = AuditConfig {
        inputs: vec![on_disk.tables.clone()],
        allow_empty: true,
        memory_limit: how.engine_limit(),
        ..cfg.clone()
    };
    let mut report = Audit::new(in_place).mode(Mode::InPlace).run_with(catalog)?;
    report.inputs = on_disk.ingested.inputs.clone();
    report.inputs.extend(
        on_disk
            .ingested
            .skipped
            .iter()
            .map(hvaudit::audit::skipped_input),
    );
    Ok(report)
}

/// The gate's lines of the stderr summary: suppressed, new, absent.
fn gate_summary(report: &hvaudit::Report) -> String {
    let mut out = String::new();
    if let Some(s) = &report.gate.suppressions {
        let (expired, unused) = hvaudit::gate::stale_entries(report);
        out.push_str(&format!(
            "hvaudit: {} finding(s) suppressed by {} ({} entries, {} expired, {} unused)\n",
            report.suppressed(),
            s.file,
            s.entries.len(),
            expired.len(),
            unused.len()
        ));
    }
    if let Some(b) = &report.gate.baseline {
        out.push_str(&format!(
            "hvaudit: against {}: {} new, {} unchanged, {} absent (fixed)\n",
            b.file,
            b.new,
            b.unchanged,
            b.absent.len()
        ));
    }
    out
}

#[cfg(feature = "cluster")]
fn on_cluster(
    audit: Audit,
    catalog: &Catalog,
    url: &str,
    timeout: Option<std::time::Duration>,
    quiet: bool,
) -> anyhow::Result<hvaudit::Report> {
    let timeout = crate::cli::cluster_timeout(timeout);
    // The views' directories that interrupted runs (and their jobs) left.
    if let Ok(dir) = hvaudit::audit::cluster_scratch_parent(audit.config()) {
        super::report_stale(&dir, quiet, false);
    }
    let url = url.to_string();
    let report = audit
        .mode(Mode::Cluster {
            url: url.clone(),
            timeout,
        })
        .run_with(catalog)?;
    if !quiet {
        let total = hvaudit::InputSummary::total(&report.inputs);
        eprintln!(
            "hvaudit: on {url}: {} Parquet file(s), {} events, {} bad lines",
            report.inputs.len(),
            total.events,
            total.bad_lines
        );
    }
    Ok(report)
}

#[cfg(not(feature = "cluster"))]
fn on_cluster(
    _: Audit,
    _: &Catalog,
    url: &str,
    _: Option<std::time::Duration>,
    _: bool,
) -> anyhow::Result<hvaudit::Report> {
    anyhow::bail!(
        "--cluster {url}: this build has no cluster support; rebuild with the `cluster` feature"
    )
}
