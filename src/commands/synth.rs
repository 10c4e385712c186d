//! `hvaudit synth`: a deterministic log with planted violations.

use crate::cli::SynthArgs;
use hvaudit::output::write_output;
use hvaudit_synth::{SynthOptions, generate};

pub fn run(args: SynthArgs, quiet: bool) -> anyhow::Result<u8> {
    let opts = SynthOptions {
        seed: args.seed,
        target_bytes: args.size,
        dialect_mix: args.aep_share.clamp(0.0, 1.0),
        violations: !args.clean,
        redelivery_rate: args.redelivery_rate.clamp(0.0, 1.0),
    };
    let mut truth_buf: Vec<u8> = Vec::new();
    let path = args.output.as_deref().unwrap_or(std::path::Path::new("-"));
    let mut stats = None;
    write_output(path, |w| {
        stats = Some(generate(&opts, w, &mut truth_buf)?);
        Ok(())
    })?;
    let Some(stats) = stats else {
        return Ok(0); // the reader of standard output went away
    };
    if let Some(t) = &args.truth {
        write_output(t, |w| Ok(w.write_all(&truth_buf)?))?;
    }
    if !quiet {
        eprintln!(
            "hvaudit: generated {} lines ({} events, {} bytes), {} planted violations",
            stats.lines, stats.events, stats.bytes, stats.planted
        );
    }
    Ok(0)
}
