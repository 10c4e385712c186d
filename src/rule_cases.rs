//! Rule test cases (`hvaudit rules test DIR`): sample logs beside the
//! findings each must produce, one directory per rule:
//!
//! ```text
//! DIR/tests/RULE_ID/CASE.ndjson     a small log
//! DIR/tests/RULE_ID/CASE.expected   the rule's findings on it, one a line
//! ```
//!
//! A case is audited with the rule alone (the built-in rules and views and
//! DIR's own), and the rule's findings are compared with the expected file,
//! as lines that say what a finding is and not where the log lies:
//!
//! ```text
//! # options: --token-format structured
//! high token.replayed task="task_2" events=["e1","e3"] lines=[1,3]
//! ```
//!
//! Lines starting with `#` are comments; `# options:` gives the audit's
//! options for the case (`--spec`, `--token-format`, `--horizon`,
//! `--decision-types`). An expected file without a finding line says the
//! rule stays silent on that log (a legal look-alike).

use crate::audit::{Audit, AuditConfig};
use crate::protocol::{SpecMode, TokenFormat};
use crate::report::model::Report;
use std::path::{Path, PathBuf};

/// The directory of the cases under a rule directory.
pub const TESTS_DIR: &str = "tests";
/// A case's log and expected findings, by extension.
pub const LOG_EXT: &str = "ndjson";
pub const EXPECTED_EXT: &str = "expected";
/// The comment line that gives a case's audit options.
const OPTIONS: &str = "# options:";

/// One case: a log and the file of the findings it must give.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Case {
    pub rule: String,
    /// The file stem, unique within the rule.
    pub name: String,
    pub log: PathBuf,
    pub expected: PathBuf,
}

impl Case {
    /// `RULE_ID/CASE`, as the results name it.
    pub fn label(&self) -> String {
        format!("{}/{}", self.rule, self.name)
    }
}

/// How a case went.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Outcome {
    Passed,
    /// The findings differ: a unified diff from the expected to the found.
    Failed(String),
    /// No expected file yet (`--bless` writes it).
    NoExpected,
    /// The expected file was written (`--bless`).
    Blessed,
}

/// Every case under `dir/tests`, sorted by rule and name; an error (a
/// usage error) when there is none, or when a directory names no rule
/// of `rules`.
pub fn cases(dir: &Path, rules: &[&str]) -> Result<Vec<Case>, String> {
    let root = dir.join(TESTS_DIR);
    let shown = crate::ingest::inputs::shown_path(&root);
    let entries = std::fs::read_dir(&root).map_err(|e| {
        format!("cannot read {shown}: {e}; put each rule's cases in {shown}/RULE_ID/CASE.ndjson")
    })?;
    let mut out = Vec::new();
    let mut rule_dirs: Vec<PathBuf> = entries
        .filter_map(Result::ok)
        .map(|e| e.path())
        .filter(|p| p.is_dir())
        .collect();
    rule_dirs.sort();
    for rule_dir in rule_dirs {
        let rule = rule_dir
            .file_name()
            .unwrap_or_default()
            .to_string_lossy()
            .into_owned();
        if !rules.contains(&rule.as_str()) {
            return Err(format!(
                "{}: no rule has the id {rule:?}; a case directory is named after its rule \
                 (see `hvaudit rules list --rules-dir {}`)",
                crate::ingest::inputs::shown_path(&rule_dir),
                crate::ingest::inputs::shown_path(dir)
            ));
        }
        let mut logs: Vec<PathBuf> = std::fs::read_dir(&rule_dir)
            .map_err(|e| format!("cannot read {}: {e}", rule_dir.display()))?
            .filter_map(Result::ok)
            .map(|e| e.path())
            .filter(|p| p.extension().is_some_and(|x| x == LOG_EXT))
            .collect();
        logs.sort();
        for log in logs {
            out.push(Case {
                rule: rule.clone(),
                name: log
                    .file_stem()
                    .unwrap_or_default()
                    .to_string_lossy()
                    .into_owned(),
                expected: log.with_extension(EXPECTED_EXT),
                log,
            });
        }
    }
    if out.is_empty() {
        return Err(format!(
            "{shown} holds no case; put each rule's cases in {shown}/RULE_ID/CASE.ndjson"
        ));
    }
    Ok(out)
}

/// The rules of `rules` that have no case in `dir/tests`.
pub fn untested<'a>(dir: &Path, rules: &[&'a str]) -> Vec<&'a str> {
    rules
        .iter()
        .copied()
        .filter(|rule| {
            let at = dir.join(TESTS_DIR).join(rule);
            !std::fs::read_dir(at).is_ok_and(|mut entries| {
                entries.any(|e| e.is_ok_and(|e| e.path().extension().is_some_and(|x| x == LOG_EXT)))
            })
        })
        .collect()
}

/// Audit `case` with its rule alone (the built-in set and `rules_dir`'s
/// files), and compare the findings with the expected file; with `bless`,
/// write them there instead. An error is a case that cannot be run (an
/// unreadable file, a bad options line, a rule that fails).
pub fn run(case: &Case, rules_dir: &Path, bless: bool) -> Result<Outcome, String> {
    let expected = match std::fs::read_to_string(&case.expected) {
        Ok(text) => Some(text),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => None,
        Err(e) => return Err(format!("cannot read {}: {e}", case.expected.display())),
    };
    let comments: Vec<&str> = expected
        .as_deref()
        .unwrap_or_default()
        .lines()
        .filter(|l| l.starts_with('#'))
        .collect();
    let mut cfg = AuditConfig {
        rules_dir: Some(rules_dir.to_path_buf()),
        rules_glob: Some(glob::Pattern::escape(&case.rule)),
        ..AuditConfig::of(vec![case.log.clone()])
    };
    cfg.reading.ingest.allow_empty = true;
    for line in &comments {
        if let Some(words) = line.strip_prefix(OPTIONS) {
            apply_options(&mut cfg, words)
                .map_err(|e| format!("{}: {e}", case.expected.display()))?;
        }
    }
    let report = Audit::new(cfg)
        .run()
        .map_err(|e| format!("{}: {e}", case.log.display()))?;
    if let Some((rule, error)) = report.rule_errors.first() {
        return Err(format!("{}: {rule} failed: {error}", case.log.display()));
    }
    let found = findings_text(&report, &case.rule);
    if bless {
        let mut text: String = comments.iter().map(|c| format!("{c}\n")).collect();
        text.push_str(&found);
        if expected.as_deref() != Some(text.as_str()) {
            std::fs::write(&case.expected, text)
                .map_err(|e| format!("cannot write {}: {e}", case.expected.display()))?;
            return Ok(Outcome::Blessed);
        }
        return Ok(Outcome::Passed);
    }
    let Some(expected) = expected else {
        return Ok(Outcome::NoExpected);
    };
    let want: String = expected
        .lines()
        .filter(|l| !l.starts_with('#') && !l.trim().is_empty())
        .map(|l| format!("{}\n", l.trim_end()))
        .collect();
    if want == found {
        return Ok(Outcome::Passed);
    }
    let diff = similar::TextDiff::from_lines(&want, &found)
        .unified_diff()
        .context_radius(3)
        .header(&case.expected.display().to_string(), "found")
        .to_string();
    Ok(Outcome::Failed(diff))
}

/// The case's audit options from an `# options:` line.
fn apply_options(cfg: &mut AuditConfig, words: &str) -> Result<(), String> {
    let mut words = words.split_whitespace();
    while let Some(option) = words.next() {
        let mut value = || {
            words
                .next()
                .ok_or_else(|| format!("{option} needs a value"))
        };
        match option {
            "--spec" => {
                cfg.spec = match value()? {
                    "auto" => SpecMode::Auto,
                    "0.1" => SpecMode::V01,
                    "0.2" => SpecMode::V02,
                    other => return Err(format!("--spec {other}: use auto, 0.1 or 0.2")),
                }
            }
            "--token-format" => {
                cfg.reading.ingest.token_format = match value()? {
                    "opaque" => TokenFormat::Opaque,
                    "structured" => TokenFormat::Structured,
                    other => {
                        return Err(format!("--token-format {other}: use opaque or structured"));
                    }
                }
            }
            "--horizon" => cfg.horizon_ms = Some(parse_horizon(value()?)?),
            "--decision-types" => {
                cfg.decision_types = Some(value()?.split(',').map(str::to_string).collect())
            }
            other => {
                return Err(format!(
                    "unknown option {other} in `{OPTIONS}`; a case takes --spec, \
                     --token-format, --horizon and --decision-types"
                ));
            }
        }
    }
    Ok(())
}

/// The findings of `rule` in `report`, one line each in report order:
/// severity, rule, task, the event ids and the lines they cite. Never a
/// path or a fingerprint, so a case's file may move.
pub fn findings_text(report: &Report, rule: &str) -> String {
    let quoted = |s: &str| serde_json::to_string(s).unwrap_or_default();
    let mut out = String::new();
    for f in report.findings.iter().filter(|f| f.rule == rule) {
        let task = f.task_id.as_deref().map_or("null".into(), quoted);
        let ids: Vec<String> = f.event_ids.iter().map(|i| quoted(i)).collect();
        let lines: Vec<String> = f.locations.iter().map(|l| l.line.to_string()).collect();
        out.push_str(&format!(
            "{} {} task={task} events=[{}] lines=[{}]\n",
            f.severity.as_str(),
            f.rule,
            ids.join(","),
            lines.join(",")
        ));
    }
    out
}

/// Durations as `--horizon` takes them, on the command line and in a
/// case's options: ISO 8601 (PT5M) or short forms (90s, 5m, 2h, 1d, 500ms).
pub fn parse_horizon(s: &str) -> Result<i64, String> {
    let t = s.trim();
    if t.starts_with(['P', 'p']) {
        return crate::ingest::time::parse_duration_ms(t);
    }
    let split = t.find(|c: char| !c.is_ascii_digit()).unwrap_or(t.len());
    let (num, unit) = t.split_at(split);
    if num.is_empty() {
        return Err(format!("{s:?} is not a duration; use e.g. 5m or PT5M"));
    }
    // All digits: only too many of them fail to parse, longer than any log.
    let n: i64 = num.parse().unwrap_or(i64::MAX);
    let ms = match unit {
        "ms" => 1,
        "s" | "" => 1000,
        "m" => 60_000,
        "h" => 3_600_000,
        "d" => 86_400_000,
        _ => return Err(format!("{s:?}: unknown unit; use ms, s, m, h or d")),
    };
    // Longer than i64 milliseconds is still "longer than any log".
    Ok(n.saturating_mul(ms))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn options_set_the_audit() {
        let mut cfg = AuditConfig::default();
        apply_options(
            &mut cfg,
            " --spec 0.1 --token-format structured --horizon 30s --decision-types a.b,c.d",
        )
        .unwrap();
        assert_eq!(cfg.spec, SpecMode::V01);
        assert_eq!(cfg.reading.ingest.token_format, TokenFormat::Structured);
        assert_eq!(cfg.horizon_ms, Some(30_000));
        assert_eq!(cfg.decision_types.unwrap(), ["a.b", "c.d"]);
        let bad = apply_options(&mut AuditConfig::default(), "--rules x").unwrap_err();
        assert!(bad.contains("unknown option --rules"), "{bad}");
        let bad = apply_options(&mut AuditConfig::default(), "--spec").unwrap_err();
        assert!(bad.contains("needs a value"), "{bad}");
    }

    #[test]
    fn horizons_past_i64_milliseconds_are_the_longest_one() {
        assert_eq!(parse_horizon("9999999999999999d"), Ok(i64::MAX));
        assert_eq!(parse_horizon("99999999999999999999999s"), Ok(i64::MAX));
        assert_eq!(parse_horizon("P99999999999999D"), Ok(i64::MAX));
        assert_eq!(parse_horizon("90s"), Ok(90_000));
        assert!(parse_horizon("d").is_err());
        assert!(parse_horizon("-5m").is_err());
    }
}
