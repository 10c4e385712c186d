//! One function per subcommand; each returns the process exit code.

pub mod audit;
#[cfg(feature = "cluster")]
pub mod cluster;
pub mod convert;
pub mod replay;
pub mod rules;
pub mod sql;
pub mod synth;

use crate::cli::InputArgs;
use crate::ingest::{IngestOptions, Ingested, ingest};
use crate::output::write_atomic;

/// Read the inputs named on the command line, with the shared options.
pub fn load(args: &InputArgs, quiet: bool) -> anyhow::Result<Ingested> {
    let opts = IngestOptions {
        token_format: args.token_format.into(),
        max_line_bytes: usize::try_from(args.max_line_bytes).unwrap_or(usize::MAX),
        keep_bad_raw: args.bad_lines.is_some(),
        ..Default::default()
    };
    let bar = crate::progress::ingest_bar(quiet, &args.paths, &opts.progress);
    let ingested = ingest(&args.paths, &opts)?;
    drop(bar);
    if let Some(path) = &args.bad_lines {
        write_atomic(path, |w| {
            for line in &ingested.bad_raw {
                w.write_all(line)?;
                w.write_all(b"\n")?;
            }
            Ok(())
        })?;
    }
    if !quiet {
        eprint!("{}", accounting(&ingested));
    }
    Ok(ingested)
}

/// The "nothing silently lost" summary: lines = events + redeliveries + bad.
pub fn accounting(ing: &Ingested) -> String {
    let mut out = String::new();
    let line = |out: &mut String, i: &crate::InputSummary| {
        let mark = if i.identity_holds() { "" } else { "  MISMATCH" };
        out.push_str(&format!(
            "  {}: {} lines = {} events + {} redeliveries + {} bad lines ({} blank skipped){mark}\n",
            i.path, i.lines, i.events, i.redeliveries, i.bad_lines, i.blank_lines
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
    for s in &ing.skipped {
        out.push_str(&format!("  skipped {}: {}\n", s.path, s.reason));
    }
    if ing.total().bad_lines > 0 {
        out.push_str("  rejected lines are in the bad_lines table (hvaudit sql ... -e 'SELECT * FROM bad_lines')\n");
    }
    out
}
