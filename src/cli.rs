//! The command line's definitions (clap derive): every subcommand and its
//! options, the parsers of their values (sizes, instants, durations,
//! severities) and the enums of their choices. `config` fills in what a
//! configuration file sets; `translate` turns both into the library's
//! options, which `commands/` hand to the library.

use clap::{Args, Parser, Subcommand, ValueEnum};
use hvaudit::finding::Severity;
use hvaudit::report::ReportFormat;
use hvaudit::rule_cases::parse_horizon;
pub use hvaudit::tables::memory::parse_size;
use std::path::PathBuf;

#[derive(Parser, Debug)]
#[command(
    name = "hvaudit",
    version,
    about = "Audit Harmovela / AEP agent-runtime event logs with SQL rules",
    long_about = "Audit Harmovela / AEP agent-runtime event logs (NDJSON, .gz, .zst or Parquet) \
                  for orphaned tasks, parents ending early, reused handoff tokens, lost \
                  checkpoints and decisions on unverified information; or query them with SQL."
)]
pub struct Cli {
    #[command(subcommand)]
    pub command: Command,
    /// No progress bars and no summary on stderr (errors still print).
    #[arg(long, short, global = true)]
    pub quiet: bool,
    /// Read option defaults from this file (else the file HVAUDIT_CONFIG
    /// names, else ./hvaudit.toml when it exists and the working directory
    /// is not among the inputs); options on the command line win.
    #[arg(long, global = true, value_name = "FILE")]
    pub config: Option<PathBuf>,
    /// Read no configuration file (neither --config, HVAUDIT_CONFIG nor
    /// ./hvaudit.toml).
    #[arg(long, global = true, conflicts_with = "config")]
    pub no_config: bool,
}

impl Cli {
    /// The `--memory-limit` the command was given, if it takes one.
    pub fn memory_limit(&self) -> Option<u64> {
        match &self.command {
            #[cfg(feature = "cluster")]
            Command::Executor(a) => a.memory_limit,
            _ => self.input().and_then(|i| i.memory_limit),
        }
    }

    /// The input options of a command that reads logs.
    pub fn input(&self) -> Option<&InputArgs> {
        match &self.command {
            Command::Audit(a) => Some(&a.input),
            Command::Sql(a) => Some(&a.input),
            Command::Convert(a) => Some(&a.input),
            Command::Replay(a) => Some(&a.input),
            _ => None,
        }
    }
}

#[derive(Subcommand, Debug)]
pub enum Command {
    /// Run the audit rules and write a report.
    Audit(AuditArgs),
    /// Query the normalized tables with SQL (events, evidence, bad_lines).
    Sql(SqlArgs),
    /// Write the normalized events as Parquet (zstd), partitioned by day.
    ///
    /// Each file gets a MAC beside it (`.hvaudit-NAME.mac`), made with the
    /// store key: HVAUDIT_STORE_KEY (64 hex digits), else
    /// ~/.config/hvaudit/store.key, which the first convert makes. Audits
    /// believe a file's stored claims only when its MAC checks with that key.
    Convert(ConvertArgs),
    /// List, explain or check rule files.
    Rules {
        #[command(subcommand)]
        action: RulesAction,
    },
    /// Generate a synthetic log with planted violations and a truth file.
    Synth(SynthArgs),
    /// Replay a task's tree (or a session): states at an instant, timeline, findings.
    Replay(ReplayArgs),
    /// Compare two JSON reports: new, unchanged and absent (fixed) findings.
    Diff(DiffArgs),
    /// Show the configuration file in effect and the options it sets.
    Config {
        #[command(subcommand)]
        action: ConfigAction,
    },
    /// Write a shell completion script to stdout.
    Completions {
        /// The shell to complete for.
        #[arg(value_enum)]
        shell: clap_complete::Shell,
    },
    /// Write the man page (roff) to stdout, or every command's page to a
    /// directory.
    Man {
        /// Write hvaudit.1 and one page per subcommand (hvaudit-audit.1,
        /// ...) into this directory.
        #[arg(long, value_name = "DIR")]
        dir: Option<PathBuf>,
    },
    /// Run a Ballista scheduler (for `--cluster df://HOST:PORT`).
    #[cfg(feature = "cluster")]
    Scheduler(SchedulerArgs),
    /// Run a Ballista executor that joins a scheduler.
    #[cfg(feature = "cluster")]
    Executor(ExecutorArgs),
}

#[cfg(feature = "cluster")]
#[derive(Args, Debug)]
pub struct SchedulerArgs {
    /// Address to listen on.
    #[arg(long, default_value = "127.0.0.1:50050")]
    pub bind: std::net::SocketAddr,
    /// Host name executors and clients use to reach this scheduler.
    #[arg(long)]
    pub external_host: Option<String>,
}

#[cfg(feature = "cluster")]
#[derive(Args, Debug)]
pub struct ExecutorArgs {
    /// The scheduler to join (HOST:PORT or df://HOST:PORT).
    #[arg(long, default_value = "127.0.0.1:50050")]
    pub scheduler: String,
    /// Host to listen on.
    #[arg(long, default_value = "127.0.0.1")]
    pub bind_host: String,
    /// Host name the scheduler and other executors use to reach this one.
    #[arg(long)]
    pub external_host: Option<String>,
    /// Port of the data (Arrow Flight) service.
    #[arg(long, default_value_t = 50051)]
    pub port: u16,
    /// Port of the task (gRPC) service.
    #[arg(long, default_value_t = 50052)]
    pub grpc_port: u16,
    /// Directory for shuffle files (default: a fresh temp directory).
    #[arg(long, value_name = "DIR")]
    pub work_dir: Option<PathBuf>,
    /// Tasks run at once (default: every core).
    #[arg(long, default_value_t = 0)]
    pub vcores: usize,
    /// Memory pool for query operators (e.g. 4G); beyond it they spill.
    #[arg(long, value_parser = parse_size)]
    pub memory_limit: Option<u64>,
}

/// Options shared by every command that reads logs.
#[derive(Args, Debug, Clone)]
pub struct InputArgs {
    /// Log files, directories (read recursively), glob patterns, or
    /// objects: s3://BUCKET/KEY, a prefix (s3://BUCKET/logs/), a glob on
    /// keys, gs://, az:// or https:// URLs. `-` (or no PATH, from a pipe)
    /// reads standard input.
    #[arg(value_name = "PATH")]
    pub paths: Vec<PathBuf>,
    /// The endpoint of an S3-compatible store for s3:// URLs (default:
    /// AWS_ENDPOINT_URL; plain http also needs AWS_ALLOW_HTTP=true).
    #[arg(long, value_name = "URL")]
    pub endpoint: Option<String>,
    /// How the runtime encodes handoff tokens; opaque tokens are never decoded.
    #[arg(long, value_enum, default_value_t = TokenArg::Opaque)]
    pub token_format: TokenArg,
    /// Reject lines longer than this many bytes (e.g. 16M).
    #[arg(long, value_parser = parse_line_cap, default_value = "16M")]
    pub max_line_bytes: u64,
    /// Write every rejected line, verbatim, to this file (`-`: stdout).
    #[arg(long, value_name = "FILE")]
    pub bad_lines: Option<PathBuf>,
    /// Rejected lines listed per input in bad_lines and the report; the
    /// rest are counted (the library's default; convert keeps every one).
    #[arg(long, value_name = "N", help = max_bad_lines_help())]
    pub max_bad_lines: Option<usize>,
    /// Memory for the query engine (e.g. 2G); beyond it, it spills to disk.
    #[arg(long, value_parser = parse_size)]
    pub memory_limit: Option<u64>,
    /// Directory for spill files and, with --in-place, the computed views
    /// (default: the system temp directory).
    #[arg(long, value_name = "DIR", value_parser = existing_dir)]
    pub spill_dir: Option<PathBuf>,
    /// Accept inputs that hold no log (an empty directory, a pattern that
    /// matches nothing) and logs without events; otherwise they exit 2.
    #[arg(long)]
    pub allow_empty: bool,
    /// Audit the rest when a log in a walked directory or a pattern's
    /// matches cannot be read, listing it as skipped; otherwise exit 2.
    #[arg(long)]
    pub allow_unreadable: bool,
}

#[derive(Args, Debug)]
pub struct AuditArgs {
    #[command(flatten)]
    pub input: InputArgs,
    /// Report format (parquet: one row per finding, to -o FILE or a pipe).
    #[arg(long, value_enum, default_value_t = ReportFormat::Text)]
    pub format: ReportFormat,
    /// Write the report here instead of stdout (a file is replaced
    /// atomically; `-` is stdout).
    #[arg(short, long, value_name = "FILE")]
    pub output: Option<PathBuf>,
    #[command(flatten)]
    pub selection: RuleSelection,
    /// Add rule files (and views/ under it) of the same form as the built-in ones.
    #[arg(long, value_name = "DIR")]
    pub rules_dir: Option<PathBuf>,
    /// Which runtime semantics apply: by each task's version field, or forced.
    #[arg(long, value_enum, default_value_t = SpecArg::Auto)]
    pub spec: SpecArg,
    /// Report only findings at or after this instant (RFC 3339).
    #[arg(long, value_parser = parse_instant)]
    pub since: Option<chrono::DateTime<chrono::Utc>>,
    /// Report only findings at or before this instant (RFC 3339).
    #[arg(long, value_parser = parse_instant)]
    pub until: Option<chrono::DateTime<chrono::Utc>>,
    /// Only flag a wait when at least this much log follows it (e.g. 5m, PT5M).
    #[arg(long, value_parser = parse_horizon)]
    pub horizon: Option<i64>,
    /// Exit 1 when a finding (not suppressed) is at or above this severity;
    /// `none`: findings never fail the run.
    #[arg(long, default_value = "high", value_name = "SEVERITY", value_parser = parse_fail_on)]
    pub fail_on: FailOn,
    /// With --baseline: exit 1 only when a new finding is at or above this
    /// severity (instead of --fail-on).
    #[arg(
        long,
        value_name = "SEVERITY",
        value_parser = parse_severity,
        requires = "baseline",
        conflicts_with = "fail_on"
    )]
    pub fail_on_new: Option<Severity>,
    /// Reviewed findings that do not fail the run (TOML; see docs/gate.md).
    #[arg(long, value_name = "FILE")]
    pub suppressions: Option<PathBuf>,
    /// Exit 1 when an entry of the suppression file matched no finding.
    #[arg(long, requires = "suppressions")]
    pub error_on_unused_suppressions: bool,
    /// An earlier `--format json` report: mark each finding new or
    /// unchanged, and list the absent (fixed) ones.
    #[arg(long, value_name = "REPORT.json")]
    pub baseline: Option<PathBuf>,
    /// Event types that count as decisions (comma-separated).
    #[arg(long, value_delimiter = ',', value_name = "LIST")]
    pub decision_types: Option<Vec<String>>,
    /// Run on a Ballista cluster (df://HOST:PORT) over Parquet from `convert`.
    #[arg(long, value_name = "URL", conflicts_with = "in_place")]
    pub cluster: Option<String>,
    /// With --cluster: give the audit up (exit 2) when it has not finished
    /// after this long (e.g. 90s, 45m, 2h).
    #[arg(long, value_name = "DURATION", value_parser = parse_timeout, requires = "cluster")]
    pub timeout: Option<std::time::Duration>,
    /// Scan `convert`'s Parquet from disk in every rule instead of loading it
    /// into memory: for logs larger than RAM, with --memory-limit.
    #[arg(long)]
    pub in_place: bool,
    /// Stop a rule or view still running after this long (e.g. 10m) and
    /// exit 2 naming it, so that a query that never ends cannot hold a
    /// scheduled audit.
    #[arg(long, value_name = "DURATION", value_parser = parse_timeout)]
    pub rule_timeout: Option<std::time::Duration>,
}

/// Which rules run: `--rules` and `--exclude-rules`.
#[derive(Args, Debug, Clone, Default)]
pub struct RuleSelection {
    /// Rules to run, by id glob, comma-separated; `-GLOB` leaves rules out
    /// ("orphan.*,token.*", "*,-token.*"). Default: every rule.
    #[arg(long, value_name = "GLOBS", allow_hyphen_values = true)]
    pub rules: Option<String>,
    /// Rules to leave out, by id glob, comma-separated ("token.*").
    #[arg(long, value_name = "GLOBS")]
    pub exclude_rules: Option<String>,
}

/// `--fail-on`: a severity, or none.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FailOn(pub Option<Severity>);

#[derive(Args, Debug)]
pub struct DiffArgs {
    /// The earlier report (`--format json`).
    pub old: PathBuf,
    /// The later report (`--format json`).
    pub new: PathBuf,
    /// Output format.
    #[arg(long, value_enum, default_value_t = DiffFormat::Text)]
    pub format: DiffFormat,
    /// Exit 1 when a new finding is at or above this severity.
    #[arg(long, value_name = "SEVERITY", value_parser = parse_severity)]
    pub fail_on_new: Option<Severity>,
}

#[derive(ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
pub enum DiffFormat {
    Text,
    Json,
}

#[derive(Subcommand, Debug)]
pub enum ConfigAction {
    /// The file in effect, the `audit` options it sets and the rule overrides.
    Show,
}

#[derive(Args, Debug)]
#[command(group(clap::ArgGroup::new("script").args(["query", "file"])))]
pub struct SqlArgs {
    #[command(flatten)]
    pub input: InputArgs,
    /// The query to run (several separated by ';').
    #[arg(
        short = 'e',
        long = "execute",
        value_name = "QUERY",
        conflicts_with = "file"
    )]
    pub query: Option<String>,
    /// Run the queries in this file (separated by ';').
    #[arg(short, long, value_name = "FILE")]
    pub file: Option<PathBuf>,
    /// Output format. Several statements make one document: in json an
    /// array of each statement's array, in csv one header and its rows per
    /// statement with a blank line between, in ndjson all rows in order;
    /// parquet takes one statement that returns rows.
    #[arg(long, value_enum, default_value_t = SqlFormat::Table)]
    pub format: SqlFormat,
    /// With -e or -f: write the results here instead of stdout (a file is
    /// replaced atomically once every statement ran; `-` is stdout).
    #[arg(short, long, value_name = "FILE", requires = "script")]
    pub output: Option<PathBuf>,
    /// Run on a Ballista cluster (df://HOST:PORT) over Parquet from `convert`.
    #[arg(long, value_name = "URL", conflicts_with = "in_place")]
    pub cluster: Option<String>,
    /// Give a statement up (exit 2) when it has not finished after this
    /// long (e.g. 90s, 45m, 2h); with --cluster, 30 minutes unless given.
    #[arg(long, value_name = "DURATION", value_parser = parse_timeout)]
    pub timeout: Option<std::time::Duration>,
    /// Query `convert`'s Parquet from disk instead of loading it into memory.
    #[arg(long)]
    pub in_place: bool,
    /// Run queries only (SELECT, WITH, VALUES), as rule files: no statement
    /// that writes or reads files (COPY ... TO, CREATE EXTERNAL TABLE,
    /// INSERT) or changes the session. The default for -f FILE.
    #[arg(long, conflicts_with = "allow_writes")]
    pub read_only: bool,
    /// With -f FILE: run every statement, also those that write or read
    /// files (-e and the prompt run them without it).
    #[arg(long)]
    pub allow_writes: bool,
}

/// `--timeout`, or the default for a cluster run.
pub fn cluster_timeout(given: Option<std::time::Duration>) -> std::time::Duration {
    given.unwrap_or_else(|| std::time::Duration::from_millis(DEFAULT_TIMEOUT_MS))
}

/// `--timeout` when not given: 30 minutes, far above the few minutes a
/// cluster audit of a 1 GB log takes, and short enough that a cluster that
/// cannot run the jobs (no executor, all lost, a job stuck) is noticed.
pub const DEFAULT_TIMEOUT_MS: u64 = 30 * 60 * 1000;

#[derive(Args, Debug)]
#[command(group(clap::ArgGroup::new("scope").required(true).args(["task", "session"])))]
pub struct ReplayArgs {
    #[command(flatten)]
    pub input: InputArgs,
    /// The task: its ancestors up to the root and all its descendants.
    #[arg(long, value_name = "ID")]
    pub task: Option<String>,
    /// The session: every task with an event in it.
    #[arg(long, value_name = "ID")]
    pub session: Option<String>,
    /// The instant to show states at (RFC 3339; default: the end of the log).
    #[arg(long, value_name = "INSTANT", value_parser = parse_instant)]
    pub at: Option<chrono::DateTime<chrono::Utc>>,
    /// Output format.
    #[arg(long, value_enum, default_value_t = hvaudit::replay::ReplayFormat::Text)]
    pub format: hvaudit::replay::ReplayFormat,
    /// Write the replay here instead of stdout (a file is replaced
    /// atomically; `-` is stdout).
    #[arg(short, long, value_name = "FILE")]
    pub output: Option<PathBuf>,
    /// Which runtime semantics the audit applies (for the findings).
    #[arg(long, value_enum, default_value_t = SpecArg::Auto)]
    pub spec: SpecArg,
    /// Event types that count as decisions (comma-separated).
    #[arg(long, value_delimiter = ',', value_name = "LIST")]
    pub decision_types: Option<Vec<String>>,
}

#[derive(Args, Debug)]
pub struct ConvertArgs {
    #[command(flatten)]
    pub input: InputArgs,
    /// Output: a directory (files partitioned by day) or a FILE.parquet.
    #[arg(short, long, value_name = "DIR_OR_FILE")]
    pub output: PathBuf,
    /// This shard's number (0..2047) when several convert runs fill one
    /// directory for a cluster: each run needs its own, so seqs stay unique.
    #[arg(long, default_value_t = 0, value_parser = clap::value_parser!(u16).range(0..2048))]
    pub shard: u16,
}

#[derive(Subcommand, Debug)]
pub enum RulesAction {
    /// List every rule with its severity and summary.
    List {
        /// Also list rules from this directory.
        #[arg(long, value_name = "DIR")]
        rules_dir: Option<PathBuf>,
        /// List what this selection resolves to (as `audit` takes it).
        #[command(flatten)]
        selection: RuleSelection,
        /// `text`: one line per rule; `md`: the Markdown reference with every
        /// rule's explanation (docs/rules.md).
        #[arg(long, value_enum, default_value_t = RulesListFormat::Text)]
        format: RulesListFormat,
    },
    /// Show a rule's condition, interpretation choices and an example.
    Explain { id: String },
    /// Check rule files in a directory: headers parse, each file is one
    /// query, and the SQL plans (nothing runs).
    Lint { dir: PathBuf },
    /// Run the rules' test cases: DIR/tests/RULE_ID/CASE.ndjson, each
    /// audited with its rule, against CASE.expected (queries/README.md).
    Test {
        /// A rule directory (as --rules-dir takes), with tests/ under it.
        dir: PathBuf,
        /// Write each case's findings to its .expected file instead of
        /// comparing them.
        #[arg(long)]
        bless: bool,
    },
}

#[derive(ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
pub enum RulesListFormat {
    Text,
    Md,
}

#[derive(Args, Debug)]
pub struct SynthArgs {
    /// Seed for the generator (same seed, same log).
    #[arg(long, default_value_t = 1)]
    pub seed: u64,
    /// Approximate size of the log (e.g. 100M, 1G).
    #[arg(long, value_parser = parse_size, default_value = "10M")]
    pub size: u64,
    /// Share of sessions written as AEP 0.1 (0.0 to 1.0).
    #[arg(long, default_value_t = 0.2)]
    pub aep_share: f64,
    /// Share of lines delivered twice.
    #[arg(long, default_value_t = 0.01)]
    pub redelivery_rate: f64,
    /// Only benign traffic (no planted violations).
    #[arg(long)]
    pub clean: bool,
    /// Where to write the log (default stdout).
    #[arg(short, long, value_name = "FILE")]
    pub output: Option<PathBuf>,
    /// Where to write the expected findings (JSON lines).
    #[arg(long, value_name = "FILE")]
    pub truth: Option<PathBuf>,
}

#[derive(ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
pub enum TokenArg {
    Opaque,
    Structured,
}

#[derive(ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
pub enum SpecArg {
    Auto,
    #[value(name = "0.1")]
    V01,
    #[value(name = "0.2")]
    V02,
}

#[derive(ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
pub enum SqlFormat {
    Table,
    Csv,
    Json,
    Ndjson,
    /// One statement's result as a Parquet file (zstd); needs -o FILE or
    /// a stdout that is not a terminal.
    Parquet,
}

/// A directory that exists, checked before any input is read.
fn existing_dir(s: &str) -> Result<PathBuf, String> {
    let path = PathBuf::from(s);
    if path.is_dir() {
        Ok(path)
    } else {
        Err(format!(
            "{s:?} is not a directory; create it or choose another"
        ))
    }
}

/// `--max-bad-lines`'s help, with the library's default.
fn max_bad_lines_help() -> String {
    format!(
        "Rejected lines listed per input in bad_lines and the report; the rest are counted \
         (default {}; convert keeps every one)",
        hvaudit::ingest::DEFAULT_MAX_BAD_LINES
    )
}

/// A line cap: a size of at most 1G, so that a chunk's text column (a
/// few MB of lines plus one long line) stays within Arrow's 2 GiB offsets.
fn parse_line_cap(s: &str) -> Result<u64, String> {
    let cap = parse_size(s)?;
    if cap > 1 << 30 {
        return Err(format!("{s:?} is above the largest line cap, 1G"));
    }
    Ok(cap)
}

fn parse_instant(s: &str) -> Result<chrono::DateTime<chrono::Utc>, String> {
    hvaudit::ingest::time::parse_instant_us(s)
        .ok()
        .and_then(chrono::DateTime::from_timestamp_micros)
        .ok_or_else(|| format!("{s:?} is not an RFC 3339 instant (e.g. 2026-07-14T12:30:00Z)"))
}

fn parse_severity(s: &str) -> Result<Severity, String> {
    s.parse()
}

fn parse_fail_on(s: &str) -> Result<FailOn, String> {
    if s.trim().eq_ignore_ascii_case("none") {
        return Ok(FailOn(None));
    }
    s.parse()
        .map(|s| FailOn(Some(s)))
        .map_err(|e: String| format!("{e}, or none"))
}

/// A timeout: a duration above zero, as `--horizon` takes them.
fn parse_timeout(s: &str) -> Result<std::time::Duration, String> {
    match parse_horizon(s)? {
        ms if ms > 0 => Ok(std::time::Duration::from_millis(ms as u64)),
        _ => Err(format!("{s:?}: a timeout must be above zero")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_memory_limit_is_read_from_the_command_that_takes_it() {
        let with = Cli::try_parse_from(["hvaudit", "audit", "--memory-limit", "2G", "x"]).unwrap();
        assert_eq!(with.memory_limit(), Some(2 << 30));
        let without = Cli::try_parse_from(["hvaudit", "sql", "x", "-e", "SELECT 1"]).unwrap();
        assert_eq!(without.memory_limit(), None);
    }

    #[test]
    fn an_audits_timeout_needs_the_cluster_and_defaults_to_30_minutes() {
        let given = Cli::try_parse_from([
            "hvaudit",
            "audit",
            "x",
            "--cluster",
            "df://h:1",
            "--timeout",
            "5s",
        ])
        .unwrap();
        let Command::Audit(a) = given.command else {
            panic!("audit")
        };
        assert_eq!(a.timeout, Some(std::time::Duration::from_secs(5)));
        assert!(Cli::try_parse_from(["hvaudit", "audit", "x", "--timeout", "5s"]).is_err());
        // A statement's timeout applies without a cluster too.
        assert!(Cli::try_parse_from(["hvaudit", "sql", "x", "--timeout", "5s"]).is_ok());
        assert!(
            Cli::try_parse_from([
                "hvaudit",
                "audit",
                "x",
                "--cluster",
                "df://h:1",
                "--timeout",
                "0s"
            ])
            .is_err()
        );
        assert_eq!(cluster_timeout(None).as_secs(), 30 * 60);
    }

    #[test]
    fn the_line_cap_is_at_most_1g() {
        assert_eq!(parse_line_cap("1G"), Ok(1 << 30));
        assert!(parse_line_cap("1025M").is_err());
    }
}
