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

use crate::cli::Cli;
use crate::finding::Severity;
use crate::ingest::inputs::shown_path;
use crate::rules::catalog::RuleOverride;
use clap::parser::ValueSource;
use clap::{ArgAction, CommandFactory, Parser};
use std::ffi::OsString;
use std::path::{Path, PathBuf};

/// Read from the working directory when `--config` is not given.
pub const DEFAULT_FILE: &str = "hvaudit.toml";

/// The commands whose options a file may set, by table name.
const COMMANDS: [&str; 4] = ["audit", "sql", "convert", "replay"];

/// What the configuration file said, beside the options it set.
#[derive(Debug, Clone, Default)]
pub struct Config {
    /// The file read, as messages show it; None when there was none.
    pub file: Option<String>,
    /// `[rules."GLOB"]` entries, in file order.
    pub rules: Vec<RuleOverride>,
    /// The running command's options that came from the file (long names).
    pub set_by_file: Vec<String>,
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

/// The command line with the file's options for the command inserted
/// right after the command's name, but none the command line gives.
fn merged(argv: Vec<OsString>) -> Result<(Vec<OsString>, Config), ArgsError> {
    let matches = Cli::command().try_get_matches_from(&argv)?;
    let file = config_file(
        matches.get_one::<PathBuf>("config").map(PathBuf::as_path),
        matches.get_flag("no_config"),
    );
    let Some(path) = file else {
        return Ok((argv, Config::default()));
    };
    let loaded = Loaded::read(&path)?;
    let mut config = loaded.config.clone();
    let Some((name, sub)) = matches.subcommand() else {
        return Ok((argv, config));
    };
    let mut tokens = Vec::new();
    let mut cmd = Cli::command();
    cmd.build();
    let sub_cmd = cmd
        .find_subcommand(name)
        .expect("the running command exists");
    let given = |id: &str| sub.value_source(id) == Some(ValueSource::CommandLine);
    for (key, value) in loaded.options(name) {
        let id = key.replace('-', "_");
        let arg = option_of(name, key).map_err(|e| loaded.error(e))?;
        // The command line wins, also over an option it rules out (a
        // given --fail-on over the file's fail-on-new).
        let ruled_out = sub_cmd
            .get_arg_conflicts_with(&arg)
            .iter()
            .any(|other| given(other.get_id().as_str()));
        if given(&id) || ruled_out {
            continue;
        }
        config.set_by_file.push(id.replace('_', "-"));
        tokens.extend(loaded.tokens(name, key, value)?);
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

/// `--config FILE`, else ./hvaudit.toml if it exists (unless --no-config).
fn config_file(given: Option<&Path>, skip: bool) -> Option<PathBuf> {
    match given {
        Some(p) => Some(p.to_path_buf()),
        None if !skip && Path::new(DEFAULT_FILE).is_file() => Some(PathBuf::from(DEFAULT_FILE)),
        None => None,
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
    fn read(path: &Path) -> Result<Loaded, ArgsError> {
        let shown = shown_path(path);
        let fail = |e: String| ArgsError::Config(format!("configuration file {shown}: {e}"));
        let text = std::fs::read_to_string(path)
            .map_err(|e| fail(format!("cannot read it ({e}); check --config")))?;
        let table: toml::Table = text
            .parse()
            .map_err(|e: toml::de::Error| fail(e.to_string()))?;
        let mut rules = Vec::new();
        for (section, value) in &table {
            match (section.as_str(), value) {
                ("rules", toml::Value::Table(t)) => rules = rule_overrides(t).map_err(fail)?,
                (name, toml::Value::Table(t)) if COMMANDS.contains(&name) => {
                    for key in t.keys() {
                        option_of(name, key).map_err(fail)?;
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
                rules,
                set_by_file: Vec::new(),
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

/// The option `key` of `command`, if a file may set it.
fn option_of(command: &str, key: &str) -> Result<clap::Arg, String> {
    let cmd = Cli::command();
    let sub = cmd
        .find_subcommand(command)
        .expect("the commands a file may configure exist");
    let id = key.replace('-', "_");
    let settable =
        |a: &&clap::Arg| !a.is_positional() && !a.is_global_set() && a.get_long().is_some();
    sub.get_arguments()
        .filter(settable)
        .find(|a| a.get_id() == id.as_str())
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
/// configuration applies (`config_file`, else ./hvaudit.toml), and where
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
    argv.push(command.into());
    argv.push("PATH".into());
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
            crate::report::Format::Json,
            "the command line wins"
        );
        assert!(a.input.allow_empty);
        assert_eq!(a.decision_types.unwrap(), ["a.b", "c.d"]);
        assert_eq!(config.rules[0].severity, Some(Severity::Info));
        assert!(config.set_by_file.contains(&"fail-on".to_string()));
        assert!(!config.set_by_file.contains(&"format".to_string()));
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
