//! `hvaudit sql`: ad hoc SQL over the normalized tables.

use super::sql_output::Results;
use super::sql_statement::{Limit, Power, on_time, query, refusal, split_statements};
use crate::cli::{SqlArgs, SqlFormat};
use datafusion::prelude::SessionContext;
use hvaudit::audit::block_on;
use hvaudit::engine::{self, RuleSettings};
use hvaudit::output::Output;
use hvaudit::rules::{self, catalog::Catalog};
use hvaudit::tables::{Purpose, Tables};
use std::path::Path;

pub fn run(args: SqlArgs, quiet: bool) -> anyhow::Result<u8> {
    let power = power(&args);
    let script = match (&args.query, &args.file) {
        (Some(q), _) => Some(q.clone()),
        (None, Some(f)) => Some(
            std::fs::read_to_string(f)
                .map_err(|e| anyhow::anyhow!("cannot read {}: {e}; check the path", f.display()))?,
        ),
        (None, None) => None,
    };
    // A statement the run may not make is refused before the log is read.
    if let Some(s) = &script {
        let statements = split_statements(s);
        for (i, stmt) in statements.iter().enumerate() {
            if let Some(why) = refusal(stmt, power) {
                anyhow::bail!("statement {} of {}: {why}", i + 1, statements.len());
            }
        }
    }
    if script.is_none() && args.input.paths.iter().any(|p| p.as_os_str() == "-") {
        anyhow::bail!(
            "standard input (`-`) is the log here, so it cannot also be the prompt; \
             give the queries with -e QUERY or -f FILE"
        );
    }
    if args.format == SqlFormat::Parquet {
        if script.is_none() {
            anyhow::bail!(
                "--format parquet writes a file, not a prompt: give the query with -e or -f, and -o FILE"
            );
        }
        hvaudit::output::refuse_binary_to_terminal(args.output.as_deref())?;
    }
    if let (Some(out), Some(file)) = (&args.output, &args.file)
        && same_file(out, file)
    {
        anyhow::bail!(
            "-o {} is the query file; writing it would destroy the queries; choose another output path",
            hvaudit::ingest::inputs::shown_path(out)
        );
    }
    let reading = crate::translate::sql(&args, quiet)?;
    // Each statement within --timeout (on a cluster, the connection too,
    // and a default one).
    let limit = match (&args.cluster, args.timeout) {
        (Some(url), given) => Some(Limit {
            cluster: Some(url.as_str()),
            timeout: crate::cli::cluster_timeout(given),
        }),
        (None, Some(timeout)) => Some(Limit {
            cluster: None,
            timeout,
        }),
        (None, None) => None,
    };
    // Loaded, on disk (too large for memory; the scratch directory lives
    // as long as the session), in place or on a cluster.
    let tables = Tables::open(&reading, Purpose::Query)?;
    block_on(async {
        // A cluster's place for what the executors read that the client
        // wrote, kept as long as the session.
        let (ctx, _scratch) = on_time(limit, tables.session()).await?;
        engine::register_settings(
            &ctx,
            &RuleSettings {
                token_format: reading.ingest.token_format,
                ..Default::default()
            },
        )?;
        // The rules' shared views (tasks, ...) are handy for exploration too;
        // as plain views they cost nothing until a query reads them.
        if let Ok(catalog) = Catalog::embedded() {
            rules::register_views(&ctx, &catalog, &rules::Materialize::Never).await;
        }
        match script {
            Some(s) => {
                let path = args.output.as_deref().unwrap_or(Path::new("-"));
                run_script(&ctx, &s, args.format, path, limit, power).await?;
                Ok(0)
            }
            None => super::sql_shell::shell(&ctx, args.format, limit, power).await,
        }
    })
}

/// What the statements may do: `--read-only` and `-f FILE` (a file from a
/// shared repository is code) take queries only, unless `--allow-writes`;
/// `-e` and the prompt run anything.
fn power(args: &SqlArgs) -> Power {
    if args.read_only {
        Power::ReadOnly {
            allow: "leave out --read-only to run it",
        }
    } else if args.file.is_some() && !args.allow_writes {
        Power::ReadOnly {
            allow: "pass --allow-writes to run it (-f FILE runs queries only by default)",
        }
    } else {
        Power::Full
    }
}

/// Run every statement of `script`, their results written to `path` as one
/// document. A regular file is only replaced when all of them succeeded.
async fn run_script(
    ctx: &SessionContext,
    script: &str,
    format: SqlFormat,
    path: &Path,
    limit: Option<Limit<'_>>,
    power: Power,
) -> anyhow::Result<()> {
    let statements = split_statements(script);
    let mut out = Output::create(path)?;
    let mut results = Results::new(format, statements.len());
    let to_stdout = path.as_os_str() == "-";
    let filled = async {
        for stmt in &statements {
            if to_stdout && hvaudit::output::stdout_closed() {
                break; // the reader went away (`| head`)
            }
            let batches = on_time(limit, query(ctx, stmt, power)).await?;
            results.write(&batches, out.writer())?;
        }
        results.finish(out.writer())
    }
    .await;
    out.close(filled)
}

/// Whether two paths name one existing file.
fn same_file(a: &Path, b: &Path) -> bool {
    use std::os::unix::fs::MetadataExt;
    match (std::fs::metadata(a), std::fs::metadata(b)) {
        (Ok(a), Ok(b)) => a.dev() == b.dev() && a.ino() == b.ino(),
        _ => false,
    }
}
