//! The configuration file (`hvaudit.toml`): defaults for any command's
//! options, one table per command, and per-rule severities or rules left
//! out. Options given on the command line win.
//!
//! ```toml
//! [audit]
//! format = "sarif"
//! fail-on = "medium"
//! rules = "*,-subscription.*"
//! suppressions = "audit/suppressions.toml"
//!
//! [rules."token.replayed"]
//! severity = "critical"
//!
//! [rules."envelope.legacy_version_field"]
//! enabled = false
//! ```
//!
//! A key is an option's long name (`fail-on` or `fail_on`). The file's
//! values are handed to the same parser as the command line, so they are
//! checked the same way and a wrong key or value is an error naming it.
//!
//! The configuration is the operator's, never the logs'. It is looked for
//! in this order: `--config FILE`, the `HVAUDIT_CONFIG` environment
//! variable (both *explicit*), then `hvaudit.toml` in the working directory
//! (*discovered*; parent directories are not searched). `--no-config`
//! reads none. A file beside the logs may have come with them from the host
//! that wrote them, so:
//!
//! - a discovered file is passed over (stderr says so and why) when the
//!   working directory is, or lies inside, the directory of an input: a
//!   directory given, the directory of a file given, or the literal
//!   directory part of a glob (object URLs and streams have none);
//! - an explicit file that lies inside such a directory is refused;
//! - a discovered file may not set the options in [`EXPLICIT_ONLY`], which
//!   write files, choose the code that runs or send the logs elsewhere;
//!   an explicit file may set every option.
//!
//! Every run that applies a file says so on stderr, even under `--quiet`,
//! with what it set; every report format states it too.

use crate::cli::Cli;
use clap::parser::ValueSource;
use clap::{ArgAction, ArgMatches, CommandFactory, Parser};
use hvaudit::finding::Severity;
use hvaudit::ingest::inputs::shown_path;
use hvaudit::report::Configuration;
use hvaudit::rules::catalog::RuleOverride;
use std::ffi::OsString;
use std::path::{Path, PathBuf};

/// Read from the working directory when no file is named.
pub const DEFAULT_FILE: &str = "hvaudit.toml";

/// The environment variable that names a configuration file.
pub const ENV_VAR: &str = "HVAUDIT_CONFIG";

/// The commands whose options a file may set, by table name.
const COMMANDS: [&str; 4] = ["audit", "sql", "convert", "replay"];

/// Options a discovered file may not set, with why: only a file the
/// operator names (`--config`, `HVAUDIT_CONFIG`) may.
pub const EXPLICIT_ONLY: [(&str, &str); 10] = [
    ("output", "writes a file"),
    ("bad-lines", "writes a file"),
    ("spill-dir", "chooses where files are written"),
    ("rules-dir", "chooses the rule files that run"),
    ("execute", "is SQL that runs"),
    ("file", "chooses the SQL that runs"),
    ("allow-writes", "lets SQL write and read files"),
    ("cluster", "sends the logs' audit to another machine"),
    ("endpoint", "chooses where object URLs are read from"),
    (
        "allow-unreadable",
        "lets a log that cannot be read go unaudited",
    ),
];

/// How a configuration file was found.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Found {
    /// `--config FILE`.
    Flag,
    /// `HVAUDIT_CONFIG`.
    Env,
    /// `./hvaudit.toml`.
    WorkingDirectory,
}

impl Found {
    pub fn as_str(self) -> &'static str {
        match self {
            Found::Flag => "--config",
            Found::Env => ENV_VAR,
            Found::WorkingDirectory => "working directory",
        }
    }
}

/// What the configuration file said, beside the options it set.
#[derive(Debug, Clone, Default)]
pub struct Config {
    /// The file read, as messages show it; None when there was none.
    pub file: Option<String>,
    /// How it was found.
    pub found: Option<Found>,
    /// `[rules."GLOB"]` entries, in file order.
    pub rules: Vec<RuleOverride>,
    /// The running command's options that came from the file (long names).
    pub set_by_file: Vec<String>,
    /// The line stderr shows: the file applied and what it set, or the
    /// file passed over and why.
    pub notice: Option<String>,
}

impl Config {
    /// The file applied, as the reports state it.
    pub fn applied(&self) -> Option<Configuration> {
        Some(Configuration {
            file: self.file.clone()?,
            found: self.found?.as_str().to_string(),
            options: self.set_by_file.clone(),
            rules: self.rules.iter().map(RuleOverride::said).collect(),
        })
    }
}

/// Why the command line could not be read.
#[derive(Debug)]
pub enum ArgsError {
    /// A usage error clap prints itself (with --help and --version).
    Clap(clap::Error),
    /// The configuration file could not be read or holds a wrong entry.
    Config(String),
}

impl From<clap::Error> for ArgsError {
    fn from(e: clap::Error) -> Self {
        ArgsError::Clap(e)
    }
}

/// Parse the command line with the configuration file's options for the
/// command put in front of it (so the command line wins).
pub fn parse_command_line(
    argv: impl IntoIterator<Item = OsString>,
) -> Result<(Cli, Config), ArgsError> {
    let (argv, config) = merged(argv.into_iter().collect())?;
    Ok((Cli::try_parse_from(argv)?, config))
}

/// Whether the command `name` reads the configuration, and whether a run
/// of it applies one (says so on stderr): `config show` reads it to show
/// it; commands that neither read logs nor list rules read none.
fn reads_configuration(name: &str, sub: &ArgMatches) -> Option<bool> {
    match name {
        n if COMMANDS.contains(&n) => Some(true),
        "rules" if sub.subcommand_name() == Some("list") => Some(true),
        "config" => Some(false),
        _ => None,
    }
}

/// The command line with the file's options for the command inserted
/// right after the command's name, but none the command line gives.
fn merged(argv: Vec<OsString>) -> Result<(Vec<OsString>, Config), ArgsError> {
    let matches = Cli::command().try_get_matches_from(&argv)?;
    let Some((name, sub)) = matches.subcommand() else {
        return Ok((argv, Config::default()));
    };
    let Some(announce) = reads_configuration(name, sub) else {
        return Ok((argv, Config::default()));
    };
    let inputs: Vec<PathBuf> = match sub.try_get_many::<PathBuf>("paths") {
        Ok(Some(paths)) => paths.cloned().collect(),
        _ => Vec::new(),
    };
    let given = matches.get_one::<PathBuf>("config").map(PathBuf::as_path);
    let env = std::env::var_os(ENV_VAR).filter(|v| !v.is_empty());
    let (path, found) = match discover(given, env, matches.get_flag("no_config"), &inputs)? {
        Discovery::None => return Ok((argv, Config::default())),
        Discovery::PassedOver(note) => {
            let config = Config {
                notice: Some(note),
                ..Config::default()
            };
            return Ok((argv, config));
        }
        Discovery::File(path, found) => (path, found),
    };
    let loaded = Loaded::read(&path, found)?;
    let mut config = loaded.config.clone();
    let mut tokens = Vec::new();
    if COMMANDS.contains(&name) {
        let mut cmd = Cli::command();
        cmd.build();
        let sub_cmd = cmd
            .find_subcommand(name)
            .expect("the running command exists");
        let given = |id: &str| sub.value_source(id) == Some(ValueSource::CommandLine);
        for (key, value) in loaded.options(name) {
            let arg = option_of(name, key).map_err(|e| loaded.error(e))?;
            let id = arg.get_id().as_str();
            // The command line wins, also over an option it rules out (a
            // given --fail-on over the file's fail-on-new).
            let ruled_out = sub_cmd
                .get_arg_conflicts_with(&arg)
                .iter()
                .any(|other| given(other.get_id().as_str()));
            if given(id) || ruled_out {
                continue;
            }
            config
                .set_by_file
                .push(arg.get_long().unwrap_or(key).to_string());
            tokens.extend(loaded.tokens(name, key, value)?);
        }
    }
    if !["audit", "rules", "config"].contains(&name) {
        // Severities and rules left out concern the commands that run or
        // list rules; the line says what this run applies.
        config.rules.clear();
    }
    if announce {
        config.notice = config
            .applied()
            .map(|c| format!("hvaudit: configuration {}", c.summary()));
    }
    let at = command_position(&argv, name);
    let argv = argv[..=at]
        .iter()
        .cloned()
        .chain(tokens)
        .chain(argv[at + 1..].iter().cloned())
        .collect();
    Ok((argv, config))
}

/// Where the configuration comes from, if anywhere.
enum Discovery {
    None,
    /// The working directory's file, not taken: the stderr line saying why.
    PassedOver(String),
    File(PathBuf, Found),
}

/// `--config FILE`, else `HVAUDIT_CONFIG`, else ./hvaudit.toml if it
/// exists (none with `--no-config`), checked against the directories of
/// the command's `inputs`.
fn discover(
    given: Option<&Path>,
    env: Option<OsString>,
    no_config: bool,
    inputs: &[PathBuf],
) -> Result<Discovery, ArgsError> {
    if no_config {
        return Ok(Discovery::None);
    }
    let explicit = match (given, env) {
        (Some(p), _) => Some((p.to_path_buf(), Found::Flag)),
        (None, Some(v)) => Some((PathBuf::from(v), Found::Env)),
        (None, None) => None,
    };
    let dirs = input_dirs(inputs);
    if let Some((path, found)) = explicit {
        if let Some(dir) = containing(&path, &dirs) {
            let how = match found {
                Found::Flag => "--config",
                _ => ENV_VAR,
            };
            return Err(ArgsError::Config(format!(
                "configuration file {} ({how}) lies inside the input {}, where a file may have \
                 come with the logs; move it out of the logs' directory and name it there",
                shown_path(&path),
                shown_path(dir)
            )));
        }
        return Ok(Discovery::File(path, found));
    }
    let here = Path::new(".").join(DEFAULT_FILE);
    if !here.is_file() {
        return Ok(Discovery::None);
    }
    match containing(&here, &dirs) {
        Some(dir) => Ok(Discovery::PassedOver(format!(
            "hvaudit: ignoring {}: the working directory lies in the input {}, and a file \
             beside the logs does not configure their audit (name a file outside the logs with \
             --config FILE)",
            shown_path(&here),
            shown_path(dir)
        ))),
        None => Ok(Discovery::File(here, Found::WorkingDirectory)),
    }
}

/// The first of `dirs` (canonical) that holds `file`, if any: a file
/// that does not exist lies where its nearest existing directory does.
fn containing<'a>(file: &Path, dirs: &'a [PathBuf]) -> Option<&'a PathBuf> {
    let at = file
        .ancestors()
        .map(|a| match a.as_os_str().is_empty() {
            true => Path::new("."),
            false => a,
        })
        .find_map(|a| std::fs::canonicalize(a).ok())?;
    dirs.iter().find(|d| at.starts_with(d))
}

/// The directories the inputs live in, canonical: a directory given, a
/// file's directory, a glob's literal directory part (the components
/// before the first with `*`, `?` or `[`). Object URLs, `-` and streams
/// (FIFOs, devices) live in none.
fn input_dirs(inputs: &[PathBuf]) -> Vec<PathBuf> {
    let mut dirs = Vec::new();
    for p in inputs {
        let text = p.to_string_lossy();
        if text == "-" || hvaudit::object_storage::is_url(&text) {
            continue;
        }
        let dir = match std::fs::metadata(p) {
            Ok(m) if m.is_dir() => p.clone(),
            Ok(m) if m.is_file() => parent_of(p),
            Ok(_) => continue,
            Err(_) if text.contains(['*', '?', '[']) => literal_prefix(p),
            Err(_) => parent_of(p),
        };
        if let Ok(dir) = std::fs::canonicalize(&dir) {
            dirs.push(dir);
        }
    }
    dirs
}

fn parent_of(p: &Path) -> PathBuf {
    match p.parent() {
        Some(d) if !d.as_os_str().is_empty() => d.to_path_buf(),
        _ => PathBuf::from("."),
    }
}

/// The components of a glob before the first that holds a wildcard.
fn literal_prefix(glob: &Path) -> PathBuf {
    let literal: PathBuf = glob
        .components()
        .take_while(|c| !c.as_os_str().to_string_lossy().contains(['*', '?', '[']))
        .collect();
    if literal.as_os_str().is_empty() {
        PathBuf::from(".")
    } else {
        literal
    }
}

/// Index in `argv` of the subcommand's name: the first word after the
/// global options (`-q`, `--config FILE`, `--no-config`).
fn command_position(argv: &[OsString], name: &str) -> usize {
    let mut i = 1;
    while i < argv.len() {
        let word = argv[i].to_string_lossy();
        if word == "--config" {
            i += 2;
            continue;
        }
        if word == name {
            return i;
        }
        i += 1;
    }
    argv.len() - 1
}

/// A configuration file, read and checked against the commands' options.
struct Loaded {
    shown: String,
    table: toml::Table,
    config: Config,
}

impl Loaded {
    fn read(path: &Path, found: Found) -> Result<Loaded, ArgsError> {
        let shown = shown_path(path);
        let fail = |e: String| ArgsError::Config(format!("configuration file {shown}: {e}"));
        let text = hvaudit::operator_files::read_text(path, hvaudit::operator_files::TEXT_LIMIT)
            .map_err(|e| fail(format!("cannot read it ({e}); check --config")))?;
        // The parser quotes the offending line: its controls are escaped.
        let table: toml::Table = text
            .parse()
            .map_err(|e: toml::de::Error| fail(hvaudit::escape::visible_lines(&e.to_string())))?;
        let mut rules = Vec::new();
        for (section, value) in &table {
            match (section.as_str(), value) {
                ("rules", toml::Value::Table(t)) => rules = rule_overrides(t).map_err(fail)?,
                (name, toml::Value::Table(t)) if COMMANDS.contains(&name) => {
                    for key in t.keys() {
                        let arg = option_of(name, key).map_err(fail)?;
                        if found == Found::WorkingDirectory {
                            explicit_only(name, key, &arg, &shown).map_err(fail)?;
                        }
                    }
                }
                (other, _) => {
                    return Err(fail(format!(
                        "unknown table [{other}]; use [{}] or [rules.\"RULE-GLOB\"]",
                        COMMANDS.join("], [")
                    )));
                }
            }
        }
        Ok(Loaded {
            config: Config {
                file: Some(shown.clone()),
                found: Some(found),
                rules,
                ..Config::default()
            },
            shown,
            table,
        })
    }

    /// The `[command]` table's entries.
    fn options(&self, command: &str) -> Vec<(&str, &toml::Value)> {
        match self.table.get(command) {
            Some(toml::Value::Table(t)) => t.iter().map(|(k, v)| (k.as_str(), v)).collect(),
            _ => Vec::new(),
        }
    }

    /// The command-line words that say `key = value`.
    fn tokens(
        &self,
        command: &str,
        key: &str,
        value: &toml::Value,
    ) -> Result<Vec<OsString>, ArgsError> {
        let arg = option_of(command, key).map_err(|e| self.error(e))?;
        let long = format!("--{}", arg.get_long().unwrap_or(key));
        let wrong = |what: &str| self.error(format!("[{command}] {key}: {what}"));
        let scalar = |v: &toml::Value| match v {
            toml::Value::String(s) => Ok(s.clone()),
            toml::Value::Integer(n) => Ok(n.to_string()),
            toml::Value::Float(x) => Ok(x.to_string()),
            toml::Value::Datetime(d) => Ok(d.to_string()),
            toml::Value::Boolean(b) => Ok(b.to_string()),
            _ => Err(wrong("expected a string, number or list of them")),
        };
        let flag = matches!(arg.get_action(), ArgAction::SetTrue);
        Ok(match value {
            toml::Value::Boolean(on) if flag => {
                if *on {
                    vec![long.into()]
                } else {
                    Vec::new()
                }
            }
            _ if flag => return Err(wrong("expected true or false")),
            toml::Value::Array(items) => {
                let texts = items.iter().map(scalar).collect::<Result<Vec<_>, _>>()?;
                if arg.get_value_delimiter().is_some() {
                    vec![format!("{long}={}", texts.join(",")).into()]
                } else {
                    texts
                        .into_iter()
                        .map(|t| format!("{long}={t}").into())
                        .collect()
                }
            }
            v => vec![format!("{long}={}", scalar(v)?).into()],
        })
    }

    fn error(&self, e: String) -> ArgsError {
        ArgsError::Config(format!("configuration file {}: {e}", self.shown))
    }
}

/// An error when the option `arg` (`[command] key`) is one only an
/// explicit file may set; `shown` is the file as messages name it.
fn explicit_only(command: &str, key: &str, arg: &clap::Arg, shown: &str) -> Result<(), String> {
    let long = arg.get_long().unwrap_or(key);
    match EXPLICIT_ONLY.iter().find(|(name, _)| *name == long) {
        Some((_, why)) => Err(format!(
            "[{command}] {key} {why}, and a file found in the working directory may not set it; \
             pass the file with --config {shown} to allow it, or give the option on the command \
             line"
        )),
        None => Ok(()),
    }
}

/// The option `key` of `command`, if a file may set it.
fn option_of(command: &str, key: &str) -> Result<clap::Arg, String> {
    let cmd = Cli::command();
    let sub = cmd
        .find_subcommand(command)
        .expect("the commands a file may configure exist");
    // By the long name the command line takes (`execute` is the option
    // `-e`), with `_` for `-` as TOML keys often have it.
    let long = key.replace('_', "-");
    let settable =
        |a: &&clap::Arg| !a.is_positional() && !a.is_global_set() && a.get_long().is_some();
    sub.get_arguments()
        .filter(settable)
        .find(|a| a.get_long() == Some(long.as_str()))
        .cloned()
        .ok_or_else(|| {
            let known: Vec<&str> = sub
                .get_arguments()
                .filter(settable)
                .filter_map(|a| a.get_long())
                .filter(|l| !["help", "version", "quiet", "config", "no-config"].contains(l))
                .collect();
            format!(
                "[{command}] has no option {key:?}; the options are {}",
                known.join(", ")
            )
        })
}

/// `[rules."GLOB"]` tables: `severity = "low"`, `enabled = false`.
fn rule_overrides(table: &toml::Table) -> Result<Vec<RuleOverride>, String> {
    table
        .iter()
        .map(|(pattern, v)| {
            let at = format!("[rules.{pattern:?}]");
            let toml::Value::Table(t) = v else {
                return Err(format!("{at} must be a table (severity = \"low\", enabled = false)"));
            };
            let mut o = RuleOverride {
                pattern: pattern.clone(),
                severity: None,
                enabled: true,
            };
            for (key, value) in t {
                match (key.as_str(), value) {
                    ("severity", toml::Value::String(s)) => {
                        o.severity = Some(s.parse::<Severity>().map_err(|e| format!("{at}: {e}"))?)
                    }
                    ("enabled", toml::Value::Boolean(b)) => o.enabled = *b,
                    (other, _) => {
                        return Err(format!(
                            "{at}: unknown or mistyped key {other:?}; use severity = \"low\" or enabled = false"
                        ));
                    }
                }
            }
            Ok(o)
        })
        .collect()
}

/// An option in effect: its long name, its value, where the value is from.
pub type Effective = (String, String, &'static str);

/// Every option of `command` with its value in effect when only the
/// configuration applies (`config_file`, else `HVAUDIT_CONFIG`, else
/// ./hvaudit.toml), and where
/// the value comes from; and the configuration read.
pub fn effective(
    command: &str,
    config_file: Option<&Path>,
    no_config: bool,
) -> Result<(Vec<Effective>, Config), ArgsError> {
    let mut argv: Vec<OsString> = vec!["hvaudit".into()];
    if let Some(f) = config_file {
        argv.push("--config".into());
        argv.push(f.into());
    }
    if no_config {
        argv.push("--no-config".into());
    }
    // No input: the file is shown as a run from here without one takes it.
    argv.push(command.into());
    let (words, config) = merged(argv)?;
    let matches = Cli::command().try_get_matches_from(&words)?;
    let (_, sub) = matches.subcommand().expect("a command was given");
    let cmd = Cli::command();
    let sub_cmd = cmd.find_subcommand(command).expect("the command exists");
    let mut out = Vec::new();
    for a in sub_cmd.get_arguments() {
        let Some(long) = a.get_long() else { continue };
        if a.is_positional() || ["help", "version"].contains(&long) || a.is_global_set() {
            continue;
        }
        let id = a.get_id().as_str();
        let value = sub
            .get_raw(id)
            .map(|v| {
                v.map(|s| s.to_string_lossy().into_owned())
                    .collect::<Vec<_>>()
                    .join(",")
            })
            .unwrap_or_default();
        let value = match (a.get_action(), value.as_str()) {
            (ArgAction::SetTrue, _) => sub.get_flag(id).to_string(),
            (_, "") => "(not set)".to_string(),
            _ => value,
        };
        let source = if config.set_by_file.iter().any(|s| s == long) {
            "configuration file"
        } else {
            "default"
        };
        out.push((long.to_string(), value, source));
    }
    Ok((out, config))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(file: &str, args: &[&str]) -> Result<(Cli, Config), ArgsError> {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("c.toml");
        std::fs::write(&path, file).unwrap();
        let mut argv: Vec<OsString> = vec!["hvaudit".into(), "--config".into(), path.into()];
        argv.extend(args.iter().map(OsString::from));
        parse_command_line(argv)
    }

    fn audit(cli: Cli) -> crate::cli::AuditArgs {
        match cli.command {
            crate::cli::Command::Audit(a) => a,
            other => panic!("not audit: {other:?}"),
        }
    }

    #[test]
    fn the_file_sets_options_and_the_command_line_wins() {
        let file = "[audit]\nfail-on = \"low\"\nformat = \"sarif\"\nallow_empty = true\n\
                    decision-types = [\"a.b\", \"c.d\"]\n[rules.\"token.*\"]\nseverity = \"info\"\n";
        let (cli, config) = parse(file, &["audit", "log", "--format", "json"]).unwrap();
        let a = audit(cli);
        assert_eq!(a.fail_on.0, Some(Severity::Low));
        assert_eq!(
            a.format,
            hvaudit::report::ReportFormat::Json,
            "the command line wins"
        );
        assert!(a.input.allow_empty);
        assert_eq!(a.decision_types.unwrap(), ["a.b", "c.d"]);
        assert_eq!(config.rules[0].severity, Some(Severity::Info));
        assert!(config.set_by_file.contains(&"fail-on".to_string()));
        assert!(!config.set_by_file.contains(&"format".to_string()));
    }

    #[test]
    fn a_glob_lives_in_its_literal_directory() {
        let p = |s: &str| literal_prefix(Path::new(s));
        assert_eq!(p("logs/2026-07-*/x.ndjson"), Path::new("logs"));
        assert_eq!(p("*.ndjson"), Path::new("."));
        assert_eq!(p("/var/log/[ab]?/x"), Path::new("/var/log"));
    }

    #[test]
    fn a_file_lives_in_its_directory_and_urls_and_streams_in_none() {
        let dir = tempfile::tempdir().unwrap();
        let log = dir.path().join("x.ndjson");
        std::fs::write(&log, "").unwrap();
        let canonical = std::fs::canonicalize(dir.path()).unwrap();
        let glob = dir.path().join("*.ndjson");
        for input in [dir.path().to_path_buf(), log.clone(), glob] {
            let dirs = input_dirs(std::slice::from_ref(&input));
            assert_eq!(dirs, std::slice::from_ref(&canonical), "{input:?}");
        }
        let none = [
            "-",
            "s3://bucket/logs/",
            "https://host/x.ndjson",
            "/dev/null",
        ];
        assert!(input_dirs(&none.map(PathBuf::from)).is_empty());
        let config = dir.path().join("sub").join("hvaudit.toml");
        assert!(containing(&config, &input_dirs(&[log])).is_some());
    }

    #[test]
    fn a_discovered_file_sets_no_option_that_writes_or_picks_code() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("hvaudit.toml");
        let read = |text: &str, found: Found| {
            std::fs::write(&path, text).unwrap();
            Loaded::read(&path, found).map(drop)
        };
        for (table, key) in [("audit", "bad-lines"), ("sql", "execute"), ("sql", "file")] {
            let text = format!("[{table}]\n{key} = \"x\"\n");
            let Err(ArgsError::Config(m)) = read(&text, Found::WorkingDirectory) else {
                panic!("{key} accepted");
            };
            assert!(
                m.contains(&format!("[{table}] {key} ")) && m.contains("--config"),
                "{m}"
            );
            assert!(
                read(&text, Found::Flag).is_ok(),
                "{key}: an explicit file may"
            );
        }
        assert!(read("[audit]\nfail-on = \"low\"\n", Found::WorkingDirectory).is_ok());
    }

    #[test]
    fn a_wrong_entry_is_an_error_naming_it() {
        let msg = |file: &str| match parse(file, &["audit", "log"]) {
            Err(ArgsError::Config(m)) => m,
            Err(ArgsError::Clap(e)) => e.to_string(),
            Ok(_) => panic!("accepted {file:?}"),
        };
        assert!(msg("[audit]\nfail_onn = \"low\"\n").contains("has no option \"fail_onn\""));
        assert!(msg("[audti]\n").contains("unknown table [audti]"));
        assert!(msg("[audit]\nfail-on = \"loud\"\n").contains("loud"));
        assert!(msg("[audit]\nallow-empty = \"yes\"\n").contains("expected true or false"));
        assert!(msg("[rules.\"x\"]\nseverity = \"bad\"\n").contains("unknown severity"));
        assert!(msg("[audit\n").contains("c.toml"));
    }
}
