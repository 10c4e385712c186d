//! The `hvaudit sql LOGS` prompt: statements end at ';'; backslash and dot
//! meta-commands as psql and the sqlite/duckdb shells have them; tab
//! completion of keywords, tables, views, columns and functions; rows and
//! elapsed time after each result; errors on one readable line.

use super::sql_output::Results;
use super::sql_statement::{
    Limit, Power, builtin_file, builtin_views, on_time, query, split_statements,
};
use crate::cli::SqlFormat;
use datafusion::arrow::datatypes::SchemaRef;
use datafusion::datasource::TableType;
use datafusion::prelude::SessionContext;
use rustyline::completion::{Completer, Pair};
use rustyline::highlight::Highlighter;
use rustyline::hint::Hinter;
use rustyline::validate::Validator;
use std::collections::BTreeSet;
use std::io::IsTerminal;
use std::time::{Duration, Instant};

/// A line the shell handles itself instead of adding it to the statement.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Meta {
    /// `\d`, `.tables`: every table and view, grouped.
    List(Listing),
    /// `\d NAME`, `.schema NAME`: the columns of one table or view.
    Describe(String),
    /// `.schema`: the columns of the log's tables.
    Schema,
    /// `\?`, `help`, `.help`.
    Help,
    /// `\timing [on|off]`: show the elapsed time (toggles without a word).
    Timing(Option<bool>),
    /// `\q`, `.quit`, `.exit`, `quit`, `exit`.
    Quit,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Listing {
    All,
    Tables,
    Views,
}

pub const HELP: &str = "\
Statements end with ';' and may span lines. Ctrl-C clears the statement, Ctrl-D quits.
  \\d            tables and views (the log's tables, yours, the built-in views)
  \\d NAME       columns of a table or view   (also .schema NAME)
  \\dt           tables                       (.tables lists everything)
  \\dv           views
  .schema       columns of the log's tables
  \\timing       elapsed time after each result on or off (\\timing on|off)
  \\?            this help                    (also help, .help)
  \\q            quit                         (also .quit, .exit, quit, exit)
Tab completes keywords, tables, views, columns (table.column too) and functions.";

/// The meta-command on `line`, if it is one: `Err` for a backslash or dot
/// command the shell does not know. `help`, `quit` and `exit` and the dot
/// commands count only at the start of a statement (`fresh`); a backslash
/// always starts a meta-command.
pub fn parse_meta(line: &str, fresh: bool) -> Option<Result<Meta, String>> {
    let line = line.trim().trim_end_matches(';').trim_end();
    let (word, rest) = match line.split_once(char::is_whitespace) {
        Some((w, r)) => (w, r.trim()),
        None => (line, ""),
    };
    let arg = (!rest.is_empty()).then(|| rest.to_string());
    if word.starts_with('\\') {
        return Some(match (word, arg) {
            ("\\d", None) => Ok(Meta::List(Listing::All)),
            ("\\d" | "\\d+", Some(name)) => Ok(Meta::Describe(name)),
            ("\\dt", _) => Ok(Meta::List(Listing::Tables)),
            ("\\dv", _) => Ok(Meta::List(Listing::Views)),
            ("\\?" | "\\h" | "\\help", _) => Ok(Meta::Help),
            ("\\q" | "\\quit", _) => Ok(Meta::Quit),
            ("\\timing", None) => Ok(Meta::Timing(None)),
            ("\\timing", Some(a)) => match a.to_ascii_lowercase().as_str() {
                "on" => Ok(Meta::Timing(Some(true))),
                "off" => Ok(Meta::Timing(Some(false))),
                _ => Err(format!("\\timing takes on or off, not {a:?}")),
            },
            (other, _) => Err(format!("unknown command {other}; \\? lists the commands")),
        });
    }
    if !fresh {
        return None;
    }
    if word.starts_with('.') {
        return Some(match (word, arg) {
            (".tables", _) => Ok(Meta::List(Listing::All)),
            (".schema", None) => Ok(Meta::Schema),
            (".schema", Some(name)) => Ok(Meta::Describe(name)),
            (".help", _) => Ok(Meta::Help),
            (".quit" | ".exit", _) => Ok(Meta::Quit),
            (other, _) => Err(format!("unknown command {other}; \\? lists the commands")),
        });
    }
    match (word.to_ascii_lowercase().as_str(), &arg) {
        ("help", None) => Some(Ok(Meta::Help)),
        ("quit" | "exit", None) => Some(Ok(Meta::Quit)),
        _ => None,
    }
}

/// What a name in the session is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Kind {
    /// The log's tables (events, evidence, bad_lines, settings, ...).
    Table,
    /// Made in this session (CREATE TABLE / VIEW).
    Yours(bool),
    /// The rules' shared views (queries/views/).
    BuiltIn,
}

/// One table or view and its columns.
#[derive(Debug, Clone)]
pub struct Object {
    pub name: String,
    pub kind: Kind,
    pub schema: SchemaRef,
}

/// The session's tables and views, sorted by kind and name.
#[derive(Debug, Clone, Default)]
pub struct Objects(pub Vec<Object>);

impl Objects {
    /// Read them from `ctx`; `log_tables` are the names there before the
    /// shell started that are not built-in views.
    pub async fn read(ctx: &SessionContext, log_tables: &BTreeSet<String>) -> Objects {
        let builtin = builtin_views();
        let mut out = Vec::new();
        let state = ctx.state();
        let defaults = &state.config().options().catalog;
        let schema = ctx
            .catalog(&defaults.default_catalog)
            .and_then(|c| c.schema(&defaults.default_schema));
        let Some(schema) = schema else {
            return Objects::default();
        };
        for name in schema.table_names() {
            let Ok(Some(table)) = schema.table(&name).await else {
                continue;
            };
            let kind = if log_tables.contains(&name) {
                Kind::Table
            } else if builtin.contains(&name) {
                Kind::BuiltIn
            } else {
                Kind::Yours(table.table_type() == TableType::View)
            };
            out.push(Object {
                name,
                kind,
                schema: table.schema(),
            });
        }
        out.sort_by(|a, b| (a.kind, &a.name).cmp(&(b.kind, &b.name)));
        Objects(out)
    }

    /// The listing of `\d`, `\dt` or `\dv`: one group per kind.
    pub fn listing(&self, which: Listing) -> String {
        const GROUPS: [(&str, Kind); 4] = [
            ("tables", Kind::Table),
            ("your tables", Kind::Yours(false)),
            ("your views", Kind::Yours(true)),
            ("built-in views (queries/views/)", Kind::BuiltIn),
        ];
        let shown = |k: Kind| match which {
            Listing::All => true,
            Listing::Tables => matches!(k, Kind::Table | Kind::Yours(false)),
            Listing::Views => matches!(k, Kind::Yours(true) | Kind::BuiltIn),
        };
        let mut out = String::new();
        for (title, kind) in GROUPS.into_iter().filter(|(_, k)| shown(*k)) {
            let names: Vec<&str> = self
                .0
                .iter()
                .filter(|o| o.kind == kind)
                .map(|o| o.name.as_str())
                .collect();
            if names.is_empty() {
                continue;
            }
            out.push_str(&format!("{title}:\n"));
            out.push_str(&wrap(&names, 78));
        }
        if out.is_empty() {
            out.push_str("none\n");
        }
        out
    }

    /// The columns of `name` (exact, else case-insensitive), as `\d NAME`.
    pub fn describe(&self, name: &str) -> Result<String, String> {
        let found = self
            .0
            .iter()
            .find(|o| o.name == name)
            .or_else(|| self.0.iter().find(|o| o.name.eq_ignore_ascii_case(name)));
        let Some(o) = found else {
            return Err(format!("no table or view {name:?}; \\d lists them"));
        };
        let what = match o.kind {
            Kind::Table => "table".to_string(),
            Kind::Yours(true) => "view".to_string(),
            Kind::Yours(false) => "table".to_string(),
            Kind::BuiltIn => match builtin_file(&o.name) {
                Some(file) => format!("built-in view, queries/views/{file}"),
                None => "built-in view".to_string(),
            },
        };
        let width = o
            .schema
            .fields()
            .iter()
            .map(|f| f.name().chars().count())
            .max()
            .unwrap_or(0);
        let mut out = format!("{} ({what})\n", hvaudit::escape::visible(&o.name));
        for f in o.schema.fields() {
            let null = if f.is_nullable() { "" } else { " not null" };
            out.push_str(&format!(
                "  {:<width$}  {}{null}\n",
                hvaudit::escape::visible(f.name()),
                f.data_type()
            ));
        }
        Ok(out)
    }

    /// `.schema`: the columns of every table of the log.
    pub fn schema(&self) -> String {
        self.0
            .iter()
            .filter(|o| o.kind == Kind::Table)
            .filter_map(|o| self.describe(&o.name).ok())
            .collect::<Vec<_>>()
            .join("\n")
    }
}

/// Names in lines of at most `width` columns, two spaces in.
fn wrap(names: &[&str], width: usize) -> String {
    let mut out = String::new();
    let mut line = String::from(" ");
    for n in names {
        if line.len() + 1 + n.len() > width && line.len() > 1 {
            out.push_str(&line);
            out.push('\n');
            line = String::from(" ");
        }
        line.push(' ');
        line.push_str(&hvaudit::escape::visible(n));
    }
    out.push_str(&line);
    out.push('\n');
    out
}

/// What tab completion offers.
#[derive(Debug, Clone, Default)]
pub struct Words {
    keywords: Vec<String>,
    functions: Vec<String>,
    /// Tables and views with their columns.
    objects: Vec<(String, Vec<String>)>,
}

impl Words {
    pub fn new(ctx: &SessionContext, objects: &Objects) -> Words {
        use datafusion::sql::sqlparser::keywords::ALL_KEYWORDS;
        let state = ctx.state();
        let mut functions: Vec<String> = state
            .scalar_functions()
            .keys()
            .chain(state.aggregate_functions().keys())
            .chain(state.window_functions().keys())
            .cloned()
            .collect();
        functions.sort();
        functions.dedup();
        Words {
            keywords: ALL_KEYWORDS.iter().map(|k| k.to_string()).collect(),
            functions,
            objects: objects
                .0
                .iter()
                .map(|o| {
                    let cols = o.schema.fields().iter().map(|f| f.name().clone()).collect();
                    (o.name.clone(), cols)
                })
                .collect(),
        }
    }

    /// The completions of the word that ends at `pos` in `line`: where it
    /// starts and the candidates, sorted. After `\d` or `.schema` only
    /// tables and views; after `NAME.` that table's columns; otherwise
    /// tables, columns, functions and keywords (in the case typed).
    pub fn complete(&self, line: &str, pos: usize) -> (usize, Vec<String>) {
        let before = &line[..pos];
        let start = before
            .char_indices()
            .rev()
            .find(|(_, c)| !(c.is_alphanumeric() || *c == '_' || *c == '.'))
            .map_or(0, |(i, c)| i + c.len_utf8());
        let word = &before[start..];
        let head = before[..start].trim_start();
        let mut out: BTreeSet<String> = BTreeSet::new();
        let matches = |cand: &str| {
            cand.len() >= word.len()
                && cand.is_char_boundary(word.len())
                && cand[..word.len()].eq_ignore_ascii_case(word)
        };
        if let Some((table, col)) = word.rsplit_once('.') {
            for (name, cols) in &self.objects {
                if name.eq_ignore_ascii_case(table) {
                    let col_matches = |c: &str| {
                        c.len() >= col.len()
                            && c.is_char_boundary(col.len())
                            && c[..col.len()].eq_ignore_ascii_case(col)
                    };
                    out.extend(
                        cols.iter()
                            .filter(|c| col_matches(c))
                            .map(|c| format!("{table}.{c}")),
                    );
                }
            }
            return (start, out.into_iter().collect());
        }
        let names_only = ["\\d", "\\d+", ".schema"].contains(&head.trim_end());
        for (name, cols) in &self.objects {
            if matches(name) {
                out.insert(name.clone());
            }
            if !names_only {
                out.extend(cols.iter().filter(|c| matches(c)).cloned());
            }
        }
        if !names_only && !word.is_empty() {
            out.extend(self.functions.iter().filter(|f| matches(f)).cloned());
            let upper = word.chars().next().is_some_and(char::is_uppercase);
            out.extend(self.keywords.iter().filter(|k| matches(k)).map(|k| {
                if upper {
                    k.clone()
                } else {
                    k.to_ascii_lowercase()
                }
            }));
        }
        (start, out.into_iter().collect())
    }
}

/// rustyline's view of the shell: completion only.
struct Helper {
    words: Words,
}

impl Completer for Helper {
    type Candidate = Pair;

    fn complete(
        &self,
        line: &str,
        pos: usize,
        _: &rustyline::Context<'_>,
    ) -> rustyline::Result<(usize, Vec<Pair>)> {
        let (start, words) = self.words.complete(line, pos);
        let pairs = words
            .into_iter()
            .map(|w| Pair {
                display: w.clone(),
                replacement: w,
            })
            .collect();
        Ok((start, pairs))
    }
}

impl Hinter for Helper {
    type Hint = String;
}
impl Highlighter for Helper {}
impl Validator for Helper {}
impl rustyline::Helper for Helper {}

/// "3 rows", with " in 0.012 s" when timing is on; "OK" for a statement
/// without columns.
pub fn status(rows: Option<usize>, elapsed: Option<Duration>) -> String {
    let what = match rows {
        None => "OK".to_string(),
        Some(1) => "1 row".to_string(),
        Some(n) => format!("{n} rows"),
    };
    match elapsed {
        Some(d) => format!("{what} in {:.3} s", d.as_secs_f64()),
        None => what,
    }
}

/// The prompt: history (on a terminal), multi-line statements ending at
/// ';', meta-commands, completion. Results go to stdout; the row count,
/// time and errors to stderr.
pub async fn shell(
    ctx: &SessionContext,
    format: SqlFormat,
    limit: Option<Limit<'_>>,
    power: Power,
) -> anyhow::Result<u8> {
    let builtin = builtin_views();
    let log_tables: BTreeSet<String> = Objects::read(ctx, &BTreeSet::new())
        .await
        .0
        .into_iter()
        .map(|o| o.name)
        .filter(|n| !builtin.contains(n))
        .collect();
    let mut objects = Objects::read(ctx, &log_tables).await;
    // As bash and psql: Tab completes the common prefix, a second Tab lists.
    let config = rustyline::Config::builder()
        .completion_type(rustyline::CompletionType::List)
        .build();
    let mut rl =
        rustyline::Editor::<Helper, rustyline::history::DefaultHistory>::with_config(config)?;
    rl.set_helper(Some(Helper {
        words: Words::new(ctx, &objects),
    }));
    // Lines piped in are a script, not a session to remember.
    let terminal = std::io::stdin().is_terminal();
    let history = std::env::var_os("HOME")
        .filter(|_| terminal)
        .map(|h| std::path::PathBuf::from(h).join(".hvaudit_history"));
    if let Some(h) = &history {
        let _ = rl.load_history(h);
    }
    if terminal {
        eprintln!(
            "tables: events, evidence, bad_lines (\\d lists the views too); end statements with ';'; \
             \\? for help, \\q to quit"
        );
    }
    let mut timing = true;
    let mut buf = String::new();
    loop {
        let prompt = if buf.is_empty() {
            "hvaudit> "
        } else {
            "     ..> "
        };
        let line = match rl.readline(prompt) {
            Ok(line) => line,
            Err(rustyline::error::ReadlineError::Interrupted) => {
                buf.clear();
                continue;
            }
            Err(_) => break,
        };
        if let Some(meta) = parse_meta(&line, buf.trim().is_empty()) {
            let _ = rl.add_history_entry(line.trim());
            match meta {
                Ok(Meta::Quit) => break,
                Ok(Meta::Help) => println!("{HELP}"),
                Ok(Meta::List(which)) => print!("{}", objects.listing(which)),
                Ok(Meta::Schema) => print!("{}", objects.schema()),
                Ok(Meta::Describe(name)) => match objects.describe(&name) {
                    Ok(text) => print!("{text}"),
                    Err(e) => eprintln!("error: {e}"),
                },
                Ok(Meta::Timing(on)) => {
                    timing = on.unwrap_or(!timing);
                    eprintln!("timing {}", if timing { "on" } else { "off" });
                }
                Err(e) => eprintln!("error: {e}"),
            }
            continue;
        }
        buf.push_str(&line);
        buf.push('\n');
        if !line.trim_end().ends_with(';') {
            continue;
        }
        let _ = rl.add_history_entry(buf.trim());
        for stmt in split_statements(&buf) {
            let started = Instant::now();
            let ran = async {
                let batches = on_time(limit, query(ctx, &stmt, power)).await?;
                let mut results = Results::new(format, 1).without_row_note();
                hvaudit::output::to_stdout(|out| results.write(&batches, out))?;
                let columns = batches.first().is_some_and(|b| b.num_columns() > 0);
                Ok::<_, anyhow::Error>(
                    columns.then(|| batches.iter().map(|b| b.num_rows()).sum::<usize>()),
                )
            }
            .await;
            match ran {
                Ok(rows) => {
                    eprintln!("{}", status(rows, timing.then(|| started.elapsed())));
                    if rows.is_none() {
                        // CREATE or DROP: names to list and complete changed.
                        objects = Objects::read(ctx, &log_tables).await;
                        if let Some(h) = rl.helper_mut() {
                            h.words = Words::new(ctx, &objects);
                        }
                    }
                }
                Err(e) => eprintln!("error: {}", shell_error(&e)),
            }
        }
        buf.clear();
    }
    if let Some(h) = &history {
        let _ = rl.save_history(h);
    }
    Ok(0)
}

/// A failed statement's error on one line. The engine's list of every
/// valid column of a wide table is left to `\d TABLE`.
pub fn shell_error(e: &anyhow::Error) -> String {
    let text = format!("{e:#}");
    let text = text.strip_prefix("query failed: ").unwrap_or(&text);
    let mut line = text.split_whitespace().collect::<Vec<_>>().join(" ");
    if let Some(at) = line.find(" Valid fields are ")
        && line.len() > 200
    {
        line.truncate(at);
        line.push_str(" (\\d TABLE lists the columns)");
    }
    line
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn meta_commands_are_read_and_sql_is_not() {
        assert_eq!(parse_meta("\\d", true), Some(Ok(Meta::List(Listing::All))));
        assert_eq!(
            parse_meta(" \\dt ", false),
            Some(Ok(Meta::List(Listing::Tables)))
        );
        assert_eq!(
            parse_meta("\\dv", true),
            Some(Ok(Meta::List(Listing::Views)))
        );
        assert_eq!(
            parse_meta("\\d events;", true),
            Some(Ok(Meta::Describe("events".into())))
        );
        assert_eq!(
            parse_meta(".schema tasks", true),
            Some(Ok(Meta::Describe("tasks".into())))
        );
        assert_eq!(parse_meta(".schema", true), Some(Ok(Meta::Schema)));
        assert_eq!(
            parse_meta(".tables", true),
            Some(Ok(Meta::List(Listing::All)))
        );
        for help in ["\\?", "help", "HELP;", ".help"] {
            assert_eq!(parse_meta(help, true), Some(Ok(Meta::Help)), "{help}");
        }
        for quit in ["\\q", "quit", "exit", ".quit", ".exit"] {
            assert_eq!(parse_meta(quit, true), Some(Ok(Meta::Quit)), "{quit}");
        }
        assert_eq!(parse_meta("\\timing", true), Some(Ok(Meta::Timing(None))));
        assert_eq!(
            parse_meta("\\timing off", true),
            Some(Ok(Meta::Timing(Some(false))))
        );
        assert!(matches!(parse_meta("\\timing maybe", true), Some(Err(_))));
        assert!(matches!(parse_meta("\\x", true), Some(Err(e)) if e.contains("\\?")));
        assert!(matches!(parse_meta(".foo", true), Some(Err(_))));
        // SQL, and words inside a statement, go to the statement.
        assert_eq!(parse_meta("SELECT 1;", true), None);
        assert_eq!(parse_meta("help", false), None);
        assert_eq!(parse_meta(".5 AS x;", false), None);
        assert_eq!(parse_meta("exit_code", true), None);
        assert_eq!(parse_meta("help me", true), None);
    }

    fn words() -> Words {
        Words {
            keywords: vec!["SELECT".into(), "SET".into(), "FROM".into()],
            functions: vec!["json_get".into(), "json_get_str".into(), "count".into()],
            objects: vec![
                (
                    "events".into(),
                    vec!["id".into(), "seq".into(), "type".into()],
                ),
                ("evidence".into(), vec!["event_id".into(), "pos".into()]),
                ("tasks".into(), vec!["task_id".into(), "term_seq".into()]),
            ],
        }
    }

    #[test]
    fn completion_offers_keywords_tables_columns_and_functions() {
        let w = words();
        assert_eq!(w.complete("SEL", 3), (0, vec!["SELECT".into()]));
        // Keywords in the case typed.
        assert_eq!(w.complete("sel", 3), (0, vec!["select".into()]));
        assert_eq!(
            w.complete("SELECT * FROM ev", 16),
            (
                14,
                vec!["event_id".into(), "events".into(), "evidence".into()]
            )
        );
        assert_eq!(
            w.complete("SELECT json_g", 13),
            (7, vec!["json_get".into(), "json_get_str".into()])
        );
        // table.column
        assert_eq!(
            w.complete("SELECT events.s FROM events", 15),
            (7, vec!["events.seq".into()])
        );
        assert_eq!(
            w.complete("SELECT tasks.", 13),
            (7, vec!["tasks.task_id".into(), "tasks.term_seq".into()])
        );
        // After \d only names.
        assert_eq!(w.complete("\\d ta", 5), (3, vec!["tasks".into()]));
        assert_eq!(w.complete("\\d ", 3).1.len(), 3);
        // Mid-line: only the word before the cursor.
        assert_eq!(
            w.complete("SELECT se FROM events", 9),
            (7, vec!["select".into(), "seq".into(), "set".into()])
        );
    }

    #[test]
    fn a_long_list_of_valid_columns_is_left_to_describe() {
        let fields: Vec<String> = (0..40).map(|i| format!("events.column_{i}")).collect();
        let e = anyhow::anyhow!(
            "query failed: Schema error: No field named nope. Did you mean 'events.type'? \
             Valid fields are {}.",
            fields.join(", ")
        );
        assert_eq!(
            shell_error(&e),
            "Schema error: No field named nope. Did you mean 'events.type'? (\\d TABLE lists the columns)"
        );
        let short = anyhow::anyhow!("query failed: Error during planning: table\n 'x' not found");
        assert_eq!(
            shell_error(&short),
            "Error during planning: table 'x' not found"
        );
    }

    #[test]
    fn the_status_line_counts_rows_and_time() {
        assert_eq!(status(Some(1), None), "1 row");
        assert_eq!(status(Some(0), None), "0 rows");
        assert_eq!(
            status(Some(12), Some(Duration::from_millis(1500))),
            "12 rows in 1.500 s"
        );
        assert_eq!(status(None, None), "OK");
    }
}
