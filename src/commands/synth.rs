//! `hvaudit synth`: a deterministic log with planted violations.

use crate::cli::SynthArgs;
use crate::output::write_atomic;
use crate::synth::{SynthOptions, generate};
use std::io::Write;

pub fn run(args: SynthArgs, quiet: bool) -> anyhow::Result<u8> {
    let opts = SynthOptions {
        seed: args.seed,
        target_bytes: args.size,
        dialect_mix: args.aep_share.clamp(0.0, 1.0),
        violations: !args.clean,
        redelivery_rate: args.redelivery_rate.clamp(0.0, 1.0),
    };
    let mut truth_buf: Vec<u8> = Vec::new();
    let stats = match &args.output {
        Some(path) => {
            let mut stats = None;
            write_atomic(path, |w| {
                stats = Some(generate(&opts, w, &mut truth_buf)?);
                Ok(())
            })?;
            stats.expect("generate ran")
        }
        None => {
            let stdout = std::io::stdout();
            let mut out = std::io::BufWriter::new(stdout.lock());
            let s = generate(&opts, &mut out, &mut truth_buf)?;
            out.flush()?;
            s
        }
    };
    if let Some(t) = &args.truth {
        write_atomic(t, |w| Ok(w.write_all(&truth_buf)?))?;
    }
    if !quiet {
        eprintln!(
            "hvaudit: generated {} lines ({} events, {} bytes), {} planted violations",
            stats.lines, stats.events, stats.bytes, stats.planted
        );
    }
    Ok(0)
}
