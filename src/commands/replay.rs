//! `hvaudit replay`: the state of a task's tree (or a session) at an
//! instant, its timeline and the findings that touch it.

use crate::cli::ReplayArgs;
use hvaudit::output::write_output;
use hvaudit::replay::{ReplayError, ReplayRequest, Scope, render, replay};

pub fn run(args: ReplayArgs, quiet: bool) -> anyhow::Result<u8> {
    let format = args.format;
    let scope = match (&args.task, &args.session) {
        (Some(t), None) => Scope::Task(t.clone()),
        (None, Some(s)) => Scope::Session(s.clone()),
        _ => anyhow::bail!("name what to replay: --task ID or --session ID"),
    };
    let cfg = crate::translate::replay(&args, quiet);
    let request = ReplayRequest { scope, at: args.at };
    // A log whose table would not fit in memory is replayed from Parquet
    // on disk, as `audit` audits it.
    let replayed = replay(&cfg, &request);
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
