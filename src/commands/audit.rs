//! `hvaudit audit`: ingest, run the rules, render the report.

use crate::audit::{AuditConfig, audit_ingested, block_on};
use crate::cli::AuditArgs;
use crate::output::write_atomic;
use crate::report::{self, Format};
use std::io::Write;

pub fn run(args: AuditArgs, quiet: bool) -> anyhow::Result<u8> {
    // An interrupt removes the report's temp file (see signals.rs).
    crate::signals::install();
    if let Some(url) = &args.cluster {
        anyhow::bail!(
            "--cluster {url}: this build has no cluster support yet; run without --cluster, \
             or convert the logs to Parquet and query them locally"
        );
    }
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
    let ingested = super::load(&args.input, quiet)?;
    let report = block_on(audit_ingested(&cfg, &catalog, &ingested))?;
    for (rule, error) in &report.rule_errors {
        eprintln!("hvaudit: rule {rule} failed: {error}");
    }
    match &args.output {
        Some(path) => write_atomic(path, |w| report::render(&report, format, w))?,
        None => {
            let stdout = std::io::stdout();
            let mut out = stdout.lock();
            report::render(&report, format, &mut out)?;
            out.flush()?;
        }
    }
    if !report.rule_errors.is_empty() {
        // A rule that could not run means the audit is incomplete.
        return Ok(2);
    }
    let failing = report.findings.iter().any(|f| f.severity >= args.fail_on);
    Ok(u8::from(failing))
}
