//! Rule and view files: the embedded set and the user's own, with their
//! metadata headers.

use crate::finding::{RuleMeta, Severity};
use std::path::Path;

mod embedded {
    include!(concat!(env!("OUT_DIR"), "/embedded_queries.rs"));
}

/// A shared view: registered under `name` before any rule runs.
#[derive(Debug, Clone)]
pub struct View {
    pub name: String,
    pub file: String,
    pub sql: String,
    /// Computed once and kept, for views that many rules read.
    pub materialize: bool,
}

/// A rule: its metadata and its query.
#[derive(Debug, Clone)]
pub struct Rule {
    pub meta: RuleMeta,
    pub file: String,
    pub sql: String,
}

/// All views (by file name; each registers after the views it reads) and
/// rules (sorted by id).
#[derive(Debug, Clone, Default)]
pub struct Catalog {
    pub views: Vec<View>,
    pub rules: Vec<Rule>,
}

/// A rule or view file that cannot be used, by name.
#[derive(Debug, Clone, thiserror::Error)]
#[error("{file}: {reason}")]
pub struct FileError {
    pub file: String,
    pub reason: String,
}

impl Catalog {
    /// The embedded rules and views.
    pub fn embedded() -> Result<Catalog, Vec<FileError>> {
        let mut c = Catalog::default();
        let mut errors = Vec::new();
        for (name, text) in embedded::VIEWS {
            c.views.push(parse_view(name, text));
        }
        for (name, text) in embedded::RULES {
            match parse_rule(name, text) {
                Ok(r) => c.rules.push(r),
                Err(e) => errors.push(e),
            }
        }
        c.finish();
        if errors.is_empty() {
            Ok(c)
        } else {
            Err(errors)
        }
    }

    /// Remove the view `name` if it is still the embedded one (not replaced
    /// from a user directory), for a caller that registers its own table of
    /// the same meaning; whether it did.
    pub fn remove_embedded_view(&mut self, name: &str) -> bool {
        let Some(at) = self.views.iter().position(|v| v.name == name) else {
            return false;
        };
        let embedded = embedded::VIEWS
            .iter()
            .any(|(file, text)| *file == self.views[at].file && *text == self.views[at].sql);
        if embedded {
            self.views.remove(at);
        }
        embedded
    }

    /// Add a user directory: `*.sql` files are rules, except those under a
    /// `views/` subdirectory. A rule with an existing id replaces it.
    pub fn add_dir(&mut self, dir: &Path) -> Result<(), Vec<FileError>> {
        let (views, rules) = read_dir(dir).map_err(|e| vec![e])?;
        let mut errors = Vec::new();
        for (name, text) in views {
            // A view of the same name replaces the built-in one.
            let view = parse_view(&name, &text);
            self.views.retain(|v| v.name != view.name);
            self.views.push(view);
        }
        for (name, text) in rules {
            match parse_rule(&name, &text) {
                Ok(r) => {
                    self.rules.retain(|x| x.meta.id != r.meta.id);
                    self.rules.push(r);
                }
                Err(e) => errors.push(e),
            }
        }
        self.finish();
        if errors.is_empty() {
            Ok(())
        } else {
            Err(errors)
        }
    }

    fn finish(&mut self) {
        self.views.sort_by(|a, b| a.file.cmp(&b.file));
        self.rules.sort_by(|a, b| a.meta.id.cmp(&b.meta.id));
    }

    /// Keep only rules whose id matches the glob (e.g. "orphan.*").
    pub fn select(&mut self, pattern: &str) -> Result<(), String> {
        let pats: Vec<glob::Pattern> = pattern
            .split(',')
            .map(|p| glob::Pattern::new(p.trim()))
            .collect::<Result<_, _>>()
            .map_err(|e| format!("bad --rules pattern {pattern:?}: {e}"))?;
        self.rules
            .retain(|r| pats.iter().any(|p| p.matches(&r.meta.id)));
        if self.rules.is_empty() {
            return Err(format!(
                "--rules {pattern:?} matches no rule; see `hvaudit rules list`"
            ));
        }
        Ok(())
    }

    pub fn rule(&self, id: &str) -> Option<&Rule> {
        self.rules.iter().find(|r| r.meta.id == id)
    }
}

type Files = Vec<(String, String)>;

fn read_dir(dir: &Path) -> Result<(Files, Files), FileError> {
    let err = |reason: String| FileError {
        file: dir.display().to_string(),
        reason,
    };
    if !dir.is_dir() {
        return Err(err("not a directory".into()));
    }
    let (mut views, mut rules) = (Vec::new(), Vec::new());
    for entry in walkdir::WalkDir::new(dir).sort_by_file_name() {
        let entry = entry.map_err(|e| err(e.to_string()))?;
        let path = entry.path();
        if !entry.file_type().is_file() || path.extension().is_none_or(|x| x != "sql") {
            continue;
        }
        let text = std::fs::read_to_string(path).map_err(|e| FileError {
            file: path.display().to_string(),
            reason: e.to_string(),
        })?;
        let in_views = path
            .parent()
            .and_then(|p| p.file_name())
            .is_some_and(|n| n == "views");
        let name = path
            .file_name()
            .unwrap_or_default()
            .to_string_lossy()
            .into_owned();
        if in_views {
            views.push((name, text));
        } else {
            rules.push((name, text));
        }
    }
    Ok((views, rules))
}

/// `-- key: value` lines at the top; `explain:` continues over indented
/// comment lines.
fn header(text: &str) -> Vec<(String, String)> {
    let mut out: Vec<(String, String)> = Vec::new();
    for line in text.lines() {
        let Some(c) = line.trim_start().strip_prefix("--") else {
            if line.trim().is_empty() {
                continue;
            }
            break;
        };
        let indented = c.starts_with("  ");
        match c.trim().split_once(':') {
            Some((k, v))
                if !indented
                    && !k.is_empty()
                    && k.chars().all(|ch| ch.is_ascii_alphanumeric() || ch == '_') =>
            {
                out.push((k.to_string(), v.trim().to_string()));
            }
            _ => {
                if let Some((k, v)) = out.last_mut()
                    && k == "explain"
                {
                    if !v.is_empty() {
                        v.push('\n');
                    }
                    v.push_str(c.trim());
                }
            }
        }
    }
    out
}

fn parse_view(file: &str, text: &str) -> View {
    let stem = file.trim_end_matches(".sql");
    let name = stem
        .trim_start_matches(|c: char| c.is_ascii_digit())
        .trim_start_matches('_');
    let materialize = header(text)
        .iter()
        .any(|(k, v)| k == "materialize" && v == "true");
    View {
        name: name.to_string(),
        file: file.to_string(),
        sql: text.to_string(),
        materialize,
    }
}

/// Parse a rule file's header; every field is required.
pub fn parse_rule(file: &str, text: &str) -> Result<Rule, FileError> {
    let h = header(text);
    let err = |reason: String| FileError {
        file: file.to_string(),
        reason,
    };
    let get = |k: &str| {
        h.iter()
            .find(|(key, _)| key == k)
            .map(|(_, v)| v.clone())
            .filter(|v| !v.is_empty())
            .ok_or_else(|| err(format!("header lacks `-- {k}: ...`")))
    };
    let id = get("id")?;
    let severity: Severity = get("severity")?.parse().map_err(err)?;
    let dialect = get("dialect")?;
    if !["any", "0.1", "0.2"].contains(&dialect.as_str()) {
        return Err(err(format!("dialect {dialect:?} is not any, 0.1 or 0.2")));
    }
    let stem = file.trim_end_matches(".sql");
    if stem != id {
        return Err(err(format!("file name should be {id}.sql to match its id")));
    }
    Ok(Rule {
        meta: RuleMeta {
            family: get("family")?,
            summary: get("summary")?,
            spec: get("spec")?,
            explain: get("explain")?,
            id,
            severity,
            dialect,
        },
        file: file.to_string(),
        sql: text.to_string(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_query_file_is_embedded() {
        // Guards the build script: an empty catalog would audit nothing and
        // report a clean log.
        let on_disk = |dir: &str| {
            std::fs::read_dir(
                Path::new(env!("CARGO_MANIFEST_DIR"))
                    .join("queries")
                    .join(dir),
            )
            .unwrap()
            .filter(|e| {
                e.as_ref()
                    .unwrap()
                    .path()
                    .extension()
                    .is_some_and(|x| x == "sql")
            })
            .count()
        };
        let c = Catalog::embedded().unwrap();
        assert_eq!(c.rules.len(), on_disk("rules"));
        assert_eq!(c.views.len(), on_disk("views"));
        assert!(c.rules.len() >= 35, "{}", c.rules.len());
    }
}
