//! `hvaudit audit`: ingest, run the rules, render the report.

use crate::audit::{AuditConfig, audit_in_place, audit_ingested, block_on};
use crate::cli::AuditArgs;
use crate::output::write_output;
use crate::report::{self, Format};
use crate::rules::catalog::Catalog;

pub fn run(args: AuditArgs, quiet: bool) -> anyhow::Result<u8> {
    // An interrupt removes the report's temp file (see signals.rs).
    crate::signals::install();
    let format: Format = args.format.parse().map_err(anyhow::Error::msg)?;
    let cfg = AuditConfig {
        inputs: args.input.paths.clone(),
        spec: args.spec.into(),
        token_format: args.input.token_format.into(),
        horizon_ms: args.horizon,
        decision_types: args.decision_types.clone(),
        rules_glob: args.rules.clone(),
        rules_dir: args.rules_dir.clone(),
        since: args.since,
        until: args.until,
        memory_limit: args.input.memory_limit.map(|m| m as usize),
        spill_dir: args.input.spill_dir.clone(),
        progress: !quiet,
    };
    let catalog = cfg.catalog()?;
    if let Some(out) = &args.output
        && (args.in_place || args.cluster.is_some())
    {
        // The loaded path checks when it expands the inputs.
        let (found, _) = crate::ingest::inputs::expand(&cfg.inputs)?;
        crate::output::refuse_inputs(&[("-o", out)], &found)?;
    }
    if args.in_place {
        super::report_stale(&cfg.spill_dir_or_default(), quiet, false);
    }
    let report = match &args.cluster {
        Some(url) => on_cluster(&cfg, &catalog, url, args.timeout, quiet)?,
        None if args.in_place => block_on(audit_in_place(&cfg, &catalog))?,
        None => {
            let outputs: Vec<(&str, &std::path::Path)> =
                args.output.iter().map(|p| ("-o", p.as_path())).collect();
            let ingested = super::load(&args.input, quiet, &outputs, super::MAX_BAD_LINES)?;
            block_on(audit_ingested(&cfg, &catalog, &ingested))?
        }
    };
    for (rule, error) in &report.rule_errors {
        eprintln!("hvaudit: rule {rule} failed: {error}");
    }
    let path = args.output.as_deref().unwrap_or(std::path::Path::new("-"));
    write_output(path, |w| report::render(&report, format, w))?;
    if !report.rule_errors.is_empty() {
        // A rule that could not run means the audit is incomplete.
        return Ok(2);
    }
    let failing = report.findings.keys().any(|f| f.severity >= args.fail_on);
    Ok(u8::from(failing))
}

#[cfg(feature = "cluster")]
fn on_cluster(
    cfg: &AuditConfig,
    catalog: &Catalog,
    url: &str,
    timeout: Option<std::time::Duration>,
    quiet: bool,
) -> anyhow::Result<crate::Report> {
    let timeout = crate::cli::cluster_timeout(timeout);
    // The views' directories that interrupted runs (and their jobs) left.
    if let Ok(dir) = crate::audit::cluster_scratch_parent(cfg) {
        super::report_stale(&dir, quiet, false);
    }
    let report = block_on(crate::audit::audit_cluster(cfg, catalog, url, timeout))?;
    if !quiet {
        let total = crate::InputSummary::total(&report.inputs);
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
    _: &AuditConfig,
    _: &Catalog,
    url: &str,
    _: Option<std::time::Duration>,
    _: bool,
) -> anyhow::Result<crate::Report> {
    anyhow::bail!(
        "--cluster {url}: this build has no cluster support; rebuild with the `cluster` feature"
    )
}
