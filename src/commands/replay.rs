//! `hvaudit replay`: the state of a task's tree (or a session) at an
//! instant, its timeline and the findings that touch it.

use crate::cli::ReplayArgs;
use hvaudit::audit::AuditConfig;
use hvaudit::output::write_output;
use hvaudit::replay::{ReplayError, ReplayRequest, Scope, Tables, render, replay};

pub fn run(args: ReplayArgs, quiet: bool) -> anyhow::Result<u8> {
    let format = args.format;
    let scope = match (&args.task, &args.session) {
        (Some(t), None) => Scope::Task(t.clone()),
        (None, Some(s)) => Scope::Session(s.clone()),
        _ => anyhow::bail!("name what to replay: --task ID or --session ID"),
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
    let outputs: Vec<(&str, &std::path::Path)> =
        args.output.iter().map(|p| ("-o", p.as_path())).collect();
    let request = ReplayRequest { scope, at: args.at };
    let (found, skipped) =
        hvaudit::ingest::inputs::expand(&args.input.paths, args.input.allow_empty)?;
    // A log whose table would not fit --memory-limit is replayed from
    // Parquet on disk, as `audit` audits it.
    let replayed = match super::too_large(&args.input, &found, &outputs) {
        Some(how) => {
            let on_disk = super::read_to_disk(found, skipped, &how, quiet, "replaying it there")?;
            let files = hvaudit::ingest::in_place::scan_inputs(
                std::slice::from_ref(&on_disk.tables),
                true,
            )?;
            let cfg = AuditConfig {
                memory_limit: how.engine_limit(),
                ..cfg
            };
            replay(&cfg, Tables::InPlace(&files), &request)
        }
        None => {
            let ingested = super::load_held(&args.input, found, skipped, quiet, &outputs)?;
            replay(&cfg, Tables::Loaded(&ingested), &request)
        }
    };
    let replay = match replayed {
        Ok(r) => r,
        Err(e @ ReplayError::Unknown { .. }) => {
            let paths: Vec<String> = args
                .input
                .paths
                .iter()
                .map(|p| shell_word(&p.to_string_lossy()))
                .collect();
            let (table, column) = match request.scope {
                Scope::Task(_) => ("tasks", "task_id"),
                Scope::Session(_) => ("tasks", "DISTINCT session_id"),
            };
            eprintln!(
                "hvaudit: {e}; list them with: hvaudit sql {} -e \"SELECT {column} FROM {table}\"",
                paths.join(" ")
            );
            return Ok(2);
        }
        Err(e) => return Err(e.into()),
    };
    let path = args.output.as_deref().unwrap_or(std::path::Path::new("-"));
    write_output(path, |w| render(&replay, format, w))?;
    Ok(0)
}

/// Quotes a path for the suggested command when it needs it.
fn shell_word(s: &str) -> String {
    if !s.is_empty()
        && s.chars()
            .all(|c| c.is_ascii_alphanumeric() || "/._-+:@,=".contains(c))
    {
        s.to_string()
    } else {
        format!("'{}'", s.replace('\'', r"'\''"))
    }
}
