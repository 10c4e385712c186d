//! The command line, translated: each subcommand's arguments (`cli`) and
//! the configuration file (`config`) become the library's options here,
//! and nowhere else (ripgrep's `hiargs.rs` is the model). The commands
//! take these options, call the library and render what it returns.

use crate::cli::{AuditArgs, ConvertArgs, InputArgs, ReplayArgs, SpecArg, SqlArgs, TokenArg};
use crate::config::Config;
use hvaudit::audit::AuditConfig;
use hvaudit::ingest::IngestOptions;
use hvaudit::protocol::{SpecMode, TokenFormat};
use hvaudit::tables::{Location, MemoryOptions, Notices, ReadingOptions};
use std::path::PathBuf;

impl From<TokenArg> for TokenFormat {
    fn from(t: TokenArg) -> Self {
        match t {
            TokenArg::Opaque => TokenFormat::Opaque,
            TokenArg::Structured => TokenFormat::Structured,
        }
    }
}

impl From<SpecArg> for SpecMode {
    fn from(s: SpecArg) -> Self {
        match s {
            SpecArg::Auto => SpecMode::Auto,
            SpecArg::V01 => SpecMode::V01,
            SpecArg::V02 => SpecMode::V02,
        }
    }
}

/// `hvaudit audit`'s options.
pub fn audit(args: &AuditArgs, config: &Config, quiet: bool) -> anyhow::Result<AuditConfig> {
    let location = location(&args.cluster, args.timeout, args.in_place)?;
    Ok(AuditConfig {
        reading: reading(&args.input, outputs(&args.output), location, quiet),
        spec: args.spec.into(),
        horizon_ms: args.horizon,
        decision_types: args.decision_types.clone(),
        rules_glob: args.selection.rules.clone(),
        exclude_rules: args.selection.exclude_rules.clone(),
        rule_overrides: config.rules.clone(),
        rules_dir: args.rules_dir.clone(),
        since: args.since,
        until: args.until,
        rule_timeout: args.rule_timeout,
    })
}

/// `hvaudit sql`'s reading options.
pub fn sql(args: &SqlArgs, quiet: bool) -> anyhow::Result<ReadingOptions> {
    let location = location(&args.cluster, args.timeout, args.in_place)?;
    Ok(reading(&args.input, outputs(&args.output), location, quiet))
}

/// `hvaudit replay`'s options (the audit it runs for the findings).
pub fn replay(args: &ReplayArgs, quiet: bool) -> AuditConfig {
    AuditConfig {
        reading: reading(&args.input, outputs(&args.output), Location::BySize, quiet),
        spec: args.spec.into(),
        decision_types: args.decision_types.clone(),
        ..Default::default()
    }
}

/// `hvaudit convert`'s reading options: the archive keeps every rejected
/// line unless told otherwise.
pub fn convert(args: &ConvertArgs, quiet: bool) -> ReadingOptions {
    let mut reading = reading(
        &args.input,
        outputs(&Some(args.output.clone())),
        Location::BySize,
        quiet,
    );
    reading.ingest.max_bad_lines = args.input.max_bad_lines.unwrap_or(usize::MAX);
    reading
}

/// `-o FILE`, which no input may be.
fn outputs(output: &Option<PathBuf>) -> Vec<(&'static str, PathBuf)> {
    output.iter().map(|p| ("-o", p.clone())).collect()
}

/// How the shared input options read logs, for a run that writes
/// `outputs` (option, path) and puts its tables at `location`.
fn reading(
    args: &InputArgs,
    outputs: Vec<(&'static str, PathBuf)>,
    location: Location,
    quiet: bool,
) -> ReadingOptions {
    let defaults = IngestOptions::default();
    ReadingOptions {
        inputs: args.paths.clone(),
        ingest: IngestOptions {
            token_format: args.token_format.into(),
            max_line_bytes: usize::try_from(args.max_line_bytes).unwrap_or(usize::MAX),
            max_bad_lines: args.max_bad_lines.unwrap_or(defaults.max_bad_lines),
            allow_empty: args.allow_empty,
            allow_unreadable: args.allow_unreadable,
            ..defaults
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
fn location(
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
