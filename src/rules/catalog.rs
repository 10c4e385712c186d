//! Rule and view files: the embedded set and the user's own, with their
//! metadata headers.

use crate::finding::Severity;
use crate::report::model::RuleMeta;
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
    /// Computed in Rust instead, where the views are kept in memory
    /// ([`Catalog::use_native_views`]).
    pub native: bool,
}

/// A rule: its metadata and its query.
#[derive(Debug, Clone)]
pub struct Rule {
    pub meta: RuleMeta,
    pub file: String,
    pub sql: String,
    /// A severity set by the configuration: it wins over the one the rule
    /// gives per row.
    pub forced_severity: Option<Severity>,
    /// The rows of `events` it reads, when its header says (`-- rows:`).
    pub rows: Option<ReadRows>,
}

/// Which rows of `events` a rule reads, as its header says: a loaded audit
/// keeps the columns that only such rules name in those rows alone
/// (`audit::let_go_of_unread_columns`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ReadRows {
    /// `versions`: the rows of ids with more than one version.
    Versions,
    /// `type NAME`: the rows of one event type.
    OfType(String),
}

impl std::str::FromStr for ReadRows {
    type Err = String;

    fn from_str(text: &str) -> Result<ReadRows, String> {
        match text.split_whitespace().collect::<Vec<_>>()[..] {
            ["versions"] => Ok(ReadRows::Versions),
            ["type", name] => Ok(ReadRows::OfType(name.to_string())),
            _ => Err(format!(
                "rows {text:?} is neither `versions` nor `type EVENT_TYPE`"
            )),
        }
    }
}

/// The embedded views and rules, parsed once.
static SHIPPED: std::sync::LazyLock<Catalog> =
    std::sync::LazyLock::new(|| Catalog::embedded().unwrap_or_default());

/// Whether the view or rule file `file` holding `sql` is one hvaudit ships
/// as it ships it (not the user's own, nor replaced by the user).
fn is_shipped(file: &str, sql: &str) -> bool {
    let views = SHIPPED.views.iter().map(|v| (&v.file, &v.sql));
    let mut all = views.chain(SHIPPED.rules.iter().map(|r| (&r.file, &r.sql)));
    all.any(|(f, s)| f == file && s == sql)
}

/// A configuration entry for the rules whose id matches `pattern`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RuleOverride {
    pub pattern: String,
    pub severity: Option<Severity>,
    /// false: the rules do not run.
    pub enabled: bool,
}

impl RuleOverride {
    /// The entry as one says what a configuration set:
    /// `token.* severity=low`, `x.y enabled=false`.
    pub fn said(&self) -> String {
        let mut out = self.pattern.clone();
        if let Some(s) = self.severity {
            out.push_str(&format!(" severity={s}"));
        }
        if !self.enabled {
            out.push_str(" enabled=false");
        }
        out
    }
}

/// All views (by file name; each registers after the views it reads) and
/// rules (sorted by id).
#[derive(Debug, Clone, Default)]
pub struct Catalog {
    pub views: Vec<View>,
    pub rules: Vec<Rule>,
    /// `--rule-timeout`: how long one view or rule may run before it is
    /// stopped and reported as failed (None: as long as it takes).
    pub timeout: Option<std::time::Duration>,
}

/// A rule or view file that cannot be used, by name.
#[derive(Debug, Clone, thiserror::Error)]
#[error("{file}: {reason}")]
pub struct FileError {
    pub file: String,
    pub reason: String,
}

impl Catalog {
    /// Every word the views and rules use (lower-cased), the rules named
    /// in `except` left out, or None when a query cannot be read into words
    /// (then any name may be used).
    pub fn words(&self, except: &[&str]) -> Option<std::collections::HashSet<String>> {
        let mut all = std::collections::HashSet::new();
        let rules = self
            .rules
            .iter()
            .filter(|r| !except.contains(&r.meta.id.as_str()));
        let texts = self.views.iter().map(|v| &v.sql);
        for sql in texts.chain(rules.map(|r| &r.sql)) {
            all.extend(super::helpers::words(sql)?);
        }
        Some(all)
    }

    /// Leave out the built-in views that no rule reads, directly or
    /// through other views, so that a narrowed rule set (`--rules`) skips
    /// their work. The user's own views always run (their errors are
    /// reported), with the views they read, and so do those the caller's
    /// own `queries` read. Views are told apart by their names among a
    /// query's words, which may keep one too many, never one too few.
    pub fn drop_unread_views(&mut self, queries: &[&str]) {
        let mut read: Vec<bool> = self
            .views
            .iter()
            .map(|v| !is_shipped(&v.file, &v.sql))
            .collect();
        let mut words = std::collections::HashSet::new();
        let own_views = self.views.iter().zip(&read).filter(|(_, own)| **own);
        let rules = self.rules.iter().map(|r| r.sql.as_str());
        let own_views = own_views.map(|(v, _)| v.sql.as_str());
        for sql in rules.chain(own_views).chain(queries.iter().copied()) {
            let Some(w) = super::helpers::words(sql) else {
                return;
            };
            words.extend(w);
        }
        loop {
            let newly: Vec<usize> = (0..self.views.len())
                .filter(|&i| !read[i] && words.contains(&self.views[i].name.to_lowercase()))
                .collect();
            if newly.is_empty() {
                break;
            }
            for i in newly {
                read[i] = true;
                let Some(w) = super::helpers::words(&self.views[i].sql) else {
                    return;
                };
                words.extend(w);
            }
        }
        let mut read = read.into_iter();
        self.views.retain(|_| read.next().unwrap_or(true));
    }

    /// Whether a view or rule not shipped with hvaudit may read columns it
    /// does not name: one holding a `*` other than `count(*)` (taking a
    /// product for one only keeps more), or one that cannot be tokenized.
    pub fn user_query_may_read_unnamed(&self) -> bool {
        let views = self.views.iter().map(|v| (&v.file, &v.sql));
        views
            .chain(self.rules.iter().map(|r| (&r.file, &r.sql)))
            .filter(|(file, sql)| !is_shipped(file, sql))
            .any(|(_, sql)| super::helpers::has_wildcard(sql))
    }

    /// The embedded rules and views.
    pub fn embedded() -> Result<Catalog, Vec<FileError>> {
        let mut c = Catalog::default();
        let mut errors = Vec::new();
        for (name, text) in embedded::VIEWS {
            match parse_view(name, text) {
                Ok(v) => c.views.push(v),
                Err(e) => errors.push(e),
            }
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

    /// Whether every view and rule is one hvaudit ships, as it ships it
    /// (none of the user's own, none replaced).
    pub fn all_shipped(&self) -> bool {
        let views = self.views.iter().map(|v| (&v.file, &v.sql));
        let mut all = views.chain(self.rules.iter().map(|r| (&r.file, &r.sql)));
        all.all(|(f, s)| is_shipped(f, s))
    }

    /// Remove the view `name` if it is still the embedded one (not replaced
    /// from a user directory), for a caller that registers its own table of
    /// the same meaning; whether it did.
    pub fn remove_embedded_view(&mut self, name: &str) -> bool {
        let Some(at) = self.views.iter().position(|v| v.name == name) else {
            return false;
        };
        let embedded = embedded::VIEWS.iter().any(|(file, text)| {
            *file == self.views[at].file
                && parse_view(file, text).is_ok_and(|v| v.sql == self.views[at].sql)
        });
        if embedded {
            self.views.remove(at);
        }
        embedded
    }

    /// Mark the shipped views that have a form in Rust to be computed in
    /// it (`rules::tasks_view`, `rules::transitions_view`): each where it
    /// and the views it reads are as shipped, for an audit whose `ev` is
    /// the shipped one, indexed.
    pub fn use_native_views(&mut self) {
        let shipped = |views: &[View], name: &str| {
            views
                .iter()
                .any(|v| v.name == name && is_shipped(&v.file, &v.sql))
        };
        let tasks = shipped(&self.views, "tasks");
        let transitions = tasks
            && shipped(&self.views, "lifecycle_next")
            && shipped(&self.views, "irregular_transitions");
        for view in &mut self.views {
            view.native = match view.name.as_str() {
                "tasks" => tasks,
                "irregular_transitions" => transitions,
                _ => false,
            };
        }
    }

    /// Put the embedded view `name` back, first, where the catalog lacks a
    /// view of that name (for one that reads no other view, as `ev`).
    pub fn restore_embedded_view(&mut self, name: &str) {
        if self.views.iter().any(|v| v.name == name) {
            return;
        }
        let embedded = (embedded::VIEWS.iter())
            .filter_map(|(file, text)| parse_view(file, text).ok())
            .find(|v| v.name == name);
        if let Some(view) = embedded {
            self.views.insert(0, view);
        }
    }

    /// Add a user directory: `*.sql` files are rules, except those under a
    /// `views/` subdirectory. A rule with an existing id replaces it.
    pub fn add_dir(&mut self, dir: &Path) -> Result<(), Vec<FileError>> {
        let (views, rules) = read_dir(dir).map_err(|e| vec![e])?;
        let mut errors = Vec::new();
        for (name, text) in views {
            // A view of the same name replaces the built-in one.
            match parse_view(&name, &text) {
                Ok(view) => {
                    self.views.retain(|v| v.name != view.name);
                    self.views.push(view);
                }
                Err(e) => errors.push(e),
            }
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

    /// Keep the rules `--rules` and `--exclude-rules` select: ids matching
    /// an include glob (all when there is none) and no exclude glob (`-GLOB`
    /// in `include`, or any glob of `exclude`). A glob that matches no rule
    /// is an error: a typo must not pass as a smaller rule set.
    pub fn select(&mut self, include: Option<&str>, exclude: Option<&str>) -> Result<(), String> {
        let mut takes = Vec::new();
        let mut leaves = Vec::new();
        let items = |list: Option<&str>| {
            list.unwrap_or_default()
                .split(',')
                .map(str::trim)
                .filter(|p| !p.is_empty())
                .map(str::to_string)
                .collect::<Vec<_>>()
        };
        for item in items(include) {
            match item.strip_prefix('-') {
                Some(left_out) => leaves.push(("--rules", left_out.trim().to_string())),
                None => takes.push(("--rules", item)),
            }
        }
        leaves.extend(items(exclude).into_iter().map(|p| ("--exclude-rules", p)));
        let takes = self.patterns(&takes)?;
        let leaves = self.patterns(&leaves)?;
        self.rules.retain(|r| {
            (takes.is_empty() || takes.iter().any(|p| p.matches(&r.meta.id)))
                && !leaves.iter().any(|p| p.matches(&r.meta.id))
        });
        if self.rules.is_empty() {
            return Err(format!(
                "the rule selection (--rules {:?}{}) leaves no rule to run; see `hvaudit rules list`",
                include.unwrap_or("*"),
                exclude
                    .map(|e| format!(", --exclude-rules {e:?}"))
                    .unwrap_or_default()
            ));
        }
        Ok(())
    }

    /// The globs `(option, text)`, each checked to match at least one rule.
    fn patterns(&self, globs: &[(&str, String)]) -> Result<Vec<glob::Pattern>, String> {
        globs
            .iter()
            .map(|(option, text)| {
                let p = glob::Pattern::new(text)
                    .map_err(|e| format!("bad {option} pattern {text:?}: {e}"))?;
                if !self.rules.iter().any(|r| p.matches(&r.meta.id)) {
                    return Err(format!(
                        "{option} pattern {text:?} matches no rule; rule ids are FAMILY.NAME with \
                         the families {}; see `hvaudit rules list`",
                        self.families().join(", ")
                    ));
                }
                Ok(p)
            })
            .collect()
    }

    /// The rule families, sorted.
    pub fn families(&self) -> Vec<&str> {
        let mut f: Vec<&str> = self.rules.iter().map(|r| r.meta.family.as_str()).collect();
        f.sort_unstable();
        f.dedup();
        f
    }

    /// Apply the configuration's rule entries, in order: a severity for
    /// every rule a pattern matches, or leave the rules out. A pattern that
    /// matches no rule is an error. Patterns are checked against every
    /// rule: call it before `select`; the rules left out are removed after.
    pub fn apply_overrides(
        &mut self,
        overrides: &[RuleOverride],
        then_select: impl FnOnce(&mut Catalog) -> Result<(), String>,
    ) -> Result<(), String> {
        let mut disabled = Vec::new();
        for o in overrides {
            let option = format!("[rules.{:?}] of the configuration", o.pattern);
            let p = self
                .patterns(&[(option.as_str(), o.pattern.clone())])?
                .remove(0);
            for r in self.rules.iter_mut().filter(|r| p.matches(&r.meta.id)) {
                if let Some(s) = o.severity {
                    r.meta.severity = s;
                    r.forced_severity = Some(s);
                }
            }
            if !o.enabled {
                disabled.push(p);
            }
        }
        then_select(self)?;
        self.rules
            .retain(|r| !disabled.iter().any(|p| p.matches(&r.meta.id)));
        if self.rules.is_empty() {
            return Err("the configuration's [rules] entries leave no selected rule to run".into());
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

/// A view file, its helpers expanded (helpers.rs).
fn parse_view(file: &str, text: &str) -> Result<View, FileError> {
    let stem = file.trim_end_matches(".sql");
    let name = stem
        .trim_start_matches(|c: char| c.is_ascii_digit())
        .trim_start_matches('_');
    let materialize = header(text)
        .iter()
        .any(|(k, v)| k == "materialize" && v == "true");
    Ok(View {
        name: name.to_string(),
        file: file.to_string(),
        sql: expand_helpers(file, text)?,
        materialize,
        native: false,
    })
}

/// The file's SQL with its helpers expanded, refused unless it is one
/// query: a rule or view that writes or reads files (`COPY ... TO`,
/// `CREATE EXTERNAL TABLE`) or sets anything stops here, before any runs.
fn expand_helpers(file: &str, text: &str) -> Result<String, FileError> {
    let err = |reason: String| FileError {
        file: file.to_string(),
        reason,
    };
    let sql = super::helpers::expand(text).map_err(err)?;
    crate::read_only::check(&sql).map_err(|e| err(e.to_string()))?;
    Ok(sql)
}

/// Parse a rule file's header (every field is required) and expand its
/// helpers.
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
    let rows = h
        .iter()
        .find(|(k, _)| k == "rows")
        .map(|(_, v)| v.parse::<ReadRows>())
        .transpose()
        .map_err(err)?;
    Ok(Rule {
        forced_severity: None,
        rows,
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
        sql: expand_helpers(file, text)?,
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

    #[test]
    fn only_the_views_the_chosen_rules_read_are_kept() {
        let names = |c: &Catalog| c.views.iter().map(|v| v.name.clone()).collect::<Vec<_>>();
        let mut all = Catalog::embedded().unwrap();
        let every = names(&all);
        all.drop_unread_views(&[]);
        assert_eq!(
            names(&all),
            every
                .iter()
                .filter(|v| *v != "unresolved_basis")
                .cloned()
                .collect::<Vec<_>>(),
            "every built-in view but the one the report counts is read by a rule"
        );

        let mut orphan = Catalog::embedded().unwrap();
        orphan.select(Some("orphan.dangling_parent"), None).unwrap();
        orphan.drop_unread_views(&[]);
        // That rule reads tasks, and tasks reads ev and settings.
        assert_eq!(names(&orphan), ["ev", "tasks"]);

        // A view of the user's own runs, with what it reads.
        let mut own = Catalog::embedded().unwrap();
        own.select(Some("orphan.dangling_parent"), None).unwrap();
        own.views
            .push(parse_view("90_mine.sql", "SELECT * FROM token_uses").unwrap());
        own.drop_unread_views(&["SELECT count(*) FROM log_end"]);
        assert_eq!(
            names(&own),
            ["ev", "log_end", "tasks", "token_uses", "mine"]
        );
    }

    #[test]
    fn a_rule_may_say_which_rows_it_reads() {
        let rule = |rows: &str| {
            parse_rule(
                "x.y.sql",
                &format!(
                    "-- id: x.y\n-- severity: low\n-- family: x\n-- dialect: any\n\
                     -- summary: s\n-- spec: p\n{rows}-- explain:\n--   e\nSELECT 1\n"
                ),
            )
        };
        assert_eq!(rule("").unwrap().rows, None);
        assert_eq!(
            rule("-- rows: versions\n").unwrap().rows,
            Some(ReadRows::Versions)
        );
        assert_eq!(
            rule("-- rows: type task.created\n").unwrap().rows,
            Some(ReadRows::OfType("task.created".into()))
        );
        let bad = rule("-- rows: all of them\n").unwrap_err();
        assert!(bad.to_string().contains("neither `versions`"), "{bad}");
    }
}
