//! `hvaudit diff OLD.json NEW.json`: the findings of two reports as new,
//! unchanged and absent (fixed), matched by fingerprint as `--baseline`
//! matches them.

use crate::cli::{DiffArgs, DiffFormat};
use hvaudit::finding::{BaselineState, Finding};
use hvaudit::gate::baseline::{Baseline, classify};
use hvaudit::output::write_output;
use serde::Serialize;
use std::io::Write;

#[derive(Serialize)]
struct Diff<'a> {
    old: &'a str,
    new: &'a str,
    counts: Counts,
    new_findings: Vec<&'a Finding>,
    absent_findings: Vec<&'a Finding>,
    unchanged_findings: Vec<&'a Finding>,
}

#[derive(Serialize)]
struct Counts {
    new: usize,
    unchanged: usize,
    absent: usize,
}

pub fn run(args: DiffArgs) -> anyhow::Result<u8> {
    let old = Baseline::load(&args.old)?;
    let new = Baseline::load(&args.new)?;
    let (states, absent) = classify(
        old.findings.iter().map(|f| f.fingerprint.as_str()),
        new.findings.iter().map(|f| f.fingerprint.as_str()),
    );
    let with = |s: BaselineState| -> Vec<&Finding> {
        new.findings
            .iter()
            .zip(&states)
            .filter(|(_, x)| **x == s)
            .map(|(f, _)| f)
            .collect()
    };
    let diff = Diff {
        old: &old.file,
        new: &new.file,
        counts: Counts {
            new: with(BaselineState::New).len(),
            unchanged: with(BaselineState::Unchanged).len(),
            absent: absent.len(),
        },
        new_findings: with(BaselineState::New),
        absent_findings: absent.iter().map(|i| &old.findings[*i]).collect(),
        unchanged_findings: with(BaselineState::Unchanged),
    };
    write_output(std::path::Path::new("-"), |w| match args.format {
        DiffFormat::Json => {
            serde_json::to_writer_pretty(&mut *w, &diff)?;
            writeln!(w)?;
            Ok(())
        }
        DiffFormat::Text => text(&diff, w),
    })?;
    let failing = args.fail_on_new.is_some_and(|s| {
        diff.new_findings
            .iter()
            .any(|f| f.severity >= s && f.suppression.is_none())
    });
    Ok(u8::from(failing))
}

fn text(d: &Diff, w: &mut dyn Write) -> anyhow::Result<()> {
    use hvaudit::escape::hidden_escaped as clean;
    writeln!(w, "{} -> {}", clean(d.old), clean(d.new))?;
    writeln!(
        w,
        "  {} new, {} unchanged, {} absent (fixed)",
        d.counts.new, d.counts.unchanged, d.counts.absent
    )?;
    for (title, list) in [
        ("new", &d.new_findings),
        ("absent (fixed)", &d.absent_findings),
    ] {
        if list.is_empty() {
            continue;
        }
        writeln!(w, "\n{title}:")?;
        for f in list.iter() {
            let place = f
                .locations
                .first()
                .map(|l| format!("{}:{}", l.file, l.line))
                .unwrap_or_default();
            writeln!(
                w,
                "  {:<8} {:<36} {}  {}",
                f.severity.as_str().to_uppercase(),
                clean(&f.rule),
                clean(&place),
                clean(&f.fingerprint)
            )?;
            writeln!(w, "           {}", clean(&f.message))?;
        }
    }
    Ok(())
}
