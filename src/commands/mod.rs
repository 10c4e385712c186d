//! One function per subcommand; each returns the process exit code.

pub mod audit;
#[cfg(feature = "cluster")]
pub mod cluster;
pub mod config;
pub mod convert;
pub mod diff;
pub mod generate;
pub mod replay;
pub mod rules;
pub mod sql;
mod sql_output;
mod sql_shell;
mod sql_statement;
pub mod synth;

use crate::cli::InputArgs;
use hvaudit::ingest::IngestOptions;
use hvaudit::tables::{Location, MemoryOptions, Notices, ReadingOptions};
use std::path::PathBuf;

/// Rejected lines listed per input by default (the rest are counted).
pub const MAX_BAD_LINES: usize = 1000;

/// How the shared input options read logs, for a run that writes
/// `outputs` (option, path) and puts its tables at `location`.
pub fn reading_options(
    args: &InputArgs,
    outputs: Vec<(&'static str, PathBuf)>,
    location: Location,
    quiet: bool,
) -> ReadingOptions {
    ReadingOptions {
        inputs: args.paths.clone(),
        ingest: IngestOptions {
            token_format: args.token_format.into(),
            max_line_bytes: usize::try_from(args.max_line_bytes).unwrap_or(usize::MAX),
            max_bad_lines: args.max_bad_lines.unwrap_or(MAX_BAD_LINES),
            allow_empty: args.allow_empty,
            ..Default::default()
        },
        bad_lines_out: args.bad_lines.clone(),
        memory: MemoryOptions {
            limit: args.memory_limit,
            spill_dir: args.spill_dir.clone(),
            available: None,
        },
        location,
        outputs,
        notices: if quiet {
            Notices::Warnings
        } else {
            Notices::All
        },
    }
}

/// Where `--cluster URL` (given up after `--timeout`) or `--in-place`
/// put the tables; by default, where they fit.
pub fn location(
    cluster: &Option<String>,
    timeout: Option<std::time::Duration>,
    in_place: bool,
) -> anyhow::Result<Location> {
    match cluster {
        #[cfg(feature = "cluster")]
        Some(url) => Ok(Location::Cluster {
            url: url.clone(),
            timeout: crate::cli::cluster_timeout(timeout),
        }),
        #[cfg(not(feature = "cluster"))]
        Some(url) => {
            let _ = timeout;
            anyhow::bail!(
                "--cluster {url}: this build has no cluster support; rebuild with the `cluster` \
                 feature"
            )
        }
        None if in_place => Ok(Location::InPlace),
        None => Ok(Location::BySize),
    }
}
