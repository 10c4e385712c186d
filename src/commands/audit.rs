//! `hvaudit audit`: ingest, run the rules, render the report.

use crate::cli::AuditArgs;
use crate::config::Config;
use hvaudit::audit::Audit;
use hvaudit::gate::{GateOptions, baseline::Baseline, suppressions::Suppressions};
use hvaudit::output::write_output;
use hvaudit::report;

pub fn run(args: AuditArgs, config: &Config, quiet: bool) -> anyhow::Result<u8> {
    // An interrupt removes the report's temp file (see signals.rs).
    hvaudit::signals::install();
    let cfg = crate::translate::audit(&args, config, quiet)?;
    if args.format == report::ReportFormat::Parquet {
        hvaudit::output::refuse_binary_to_terminal(args.output.as_deref())?;
    }
    let audit = Audit::new(cfg);
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
    let mut report = audit.run_with(&catalog)?;
    if let Some(url) = &args.cluster
        && !quiet
    {
        let total = hvaudit::InputSummary::total(&report.inputs);
        eprintln!(
            "hvaudit: on {url}: {} Parquet file(s), {} events, {} bad lines",
            report.inputs.len(),
            total.events,
            total.bad_lines
        );
    }
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
