//! What a report says about its own making: the command that wrote it,
//! the configuration file it applied, and when. The HTML header shows all
//! three; every other format states the configuration (its header, its
//! metadata), and only when one applied, so a report of a run without one
//! is the same bytes as before.

use chrono::{DateTime, Utc};
use std::ffi::OsString;
use std::path::Path;

/// The command line and generation time a report states in its header.
/// The default states neither (a report rendered by a library call).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Provenance {
    /// The command's words as typed, each shell-quoted (joined by spaces
    /// they make a shell line), credentials in URLs hidden; empty when
    /// not known.
    pub command: Vec<String>,
    /// The configuration file applied and what it set (options the
    /// command line lacks).
    pub configuration: Option<Configuration>,
    pub generated_at: Option<DateTime<Utc>>,
}

impl Provenance {
    /// This process: its command line and [`generation_time`].
    pub fn of_this_process() -> Provenance {
        Provenance {
            command: command_line(std::env::args_os()),
            configuration: None,
            generated_at: Some(generation_time()),
        }
    }
}

/// A configuration file a run applied: which, how it was found and what
/// it set, as stderr and every report format state it.
#[derive(Debug, Clone, Default, PartialEq, Eq, serde::Serialize)]
pub struct Configuration {
    /// The file, as messages show it.
    pub file: String,
    /// How it was found: `--config`, `HVAUDIT_CONFIG` or `working directory`.
    pub found: String,
    /// The running command's options it set (long names), in file order.
    pub options: Vec<String>,
    /// Its `[rules."GLOB"]` entries: `GLOB severity=LEVEL`, `GLOB enabled=false`.
    pub rules: Vec<String>,
}

impl Configuration {
    /// One line: `./hvaudit.toml (working directory) set: fail-on-new,
    /// suppressions; [rules] token.replayed severity=critical`.
    pub fn summary(&self) -> String {
        let mut set = Vec::new();
        if !self.options.is_empty() {
            set.push(self.options.join(", "));
        }
        if !self.rules.is_empty() {
            set.push(format!("[rules] {}", self.rules.join(", ")));
        }
        let set = match set.is_empty() {
            true => "nothing this command uses".to_string(),
            false => set.join("; "),
        };
        format!("{} ({}) set: {set}", self.file, self.found)
    }
}

/// Now, unless `SOURCE_DATE_EPOCH` (seconds since 1970, the
/// reproducible-builds convention) names another instant: two runs with
/// it set write byte-identical reports.
pub fn generation_time() -> DateTime<Utc> {
    std::env::var("SOURCE_DATE_EPOCH")
        .ok()
        .and_then(|s| s.trim().parse::<i64>().ok())
        .and_then(|secs| DateTime::from_timestamp(secs, 0))
        .unwrap_or_else(Utc::now)
}

/// `args` (the program first) as shell words: the program by its file
/// name, each argument quoted when it needs it, and the user,
/// password and query of a URL argument replaced by `redacted` (a
/// presigned URL's query is a credential).
pub fn command_line(args: impl IntoIterator<Item = OsString>) -> Vec<String> {
    let mut args = args.into_iter();
    let program = args
        .next()
        .map(|p| {
            Path::new(&p)
                .file_name()
                .unwrap_or(p.as_os_str())
                .to_string_lossy()
                .into_owned()
        })
        .unwrap_or_else(|| "hvaudit".into());
    let mut words = vec![program];
    words.extend(args.map(|a| hide_credentials(&a.to_string_lossy())));
    words
        .iter()
        .map(|w| shlex::try_quote(w).map_or_else(|_| w.clone(), |q| q.into_owned()))
        .collect()
}

/// An argument with any URL in it (`--opt=URL` too) stripped of its
/// user, password and query.
fn hide_credentials(arg: &str) -> String {
    let Some(scheme_at) = arg.find("://") else {
        return arg.to_string();
    };
    // The URL starts after the `=` of `--opt=URL`, if there is one before it.
    let start = arg[..scheme_at].rfind('=').map_or(0, |i| i + 1);
    let Ok(mut url) = url::Url::parse(&arg[start..]) else {
        return arg.to_string();
    };
    let mut hidden = false;
    if !url.username().is_empty() || url.password().is_some() {
        hidden |= url.set_username("redacted").is_ok();
        let _ = url.set_password(None);
    }
    if url.query().is_some() {
        url.set_query(Some("redacted"));
        hidden = true;
    }
    if !hidden {
        return arg.to_string();
    }
    format!("{}{}", &arg[..start], url)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn line(args: &[&str]) -> String {
        command_line(args.iter().map(OsString::from)).join(" ")
    }

    #[test]
    fn the_command_is_quoted_and_named_by_its_file() {
        assert_eq!(
            line(&[
                "/opt/bin/hvaudit",
                "audit",
                "--fail-on",
                "high",
                "logs/run a.ndjson"
            ]),
            "hvaudit audit --fail-on high 'logs/run a.ndjson'"
        );
    }

    #[test]
    fn a_configuration_is_one_line_of_what_it_set() {
        let mut c = Configuration {
            file: "./hvaudit.toml".into(),
            found: "working directory".into(),
            options: vec!["fail-on-new".into(), "suppressions".into()],
            rules: vec!["token.replayed severity=critical".into()],
        };
        assert_eq!(
            c.summary(),
            "./hvaudit.toml (working directory) set: fail-on-new, suppressions; \
             [rules] token.replayed severity=critical"
        );
        c.options.clear();
        c.rules.clear();
        assert_eq!(
            c.summary(),
            "./hvaudit.toml (working directory) set: nothing this command uses"
        );
    }

    #[test]
    fn url_credentials_and_queries_are_hidden() {
        let l = line(&[
            "hvaudit",
            "audit",
            "https://user:pw@host/log.ndjson?X-Amz-Signature=abc",
            "--cluster=df://h:50050",
        ]);
        assert!(
            !l.contains("pw") && !l.contains("abc") && !l.contains("user"),
            "{l}"
        );
        assert!(
            l.contains("host/log.ndjson?redacted") && l.contains("--cluster=df://h:50050"),
            "{l}"
        );
    }
}
