//! One statement of `hvaudit sql`, as the script runner and the prompt
//! both run it: a script split on `;`, `SHOW TABLES` answered in the
//! prompt's order, the rule files' helpers expanded, errors on one line a
//! user reads, and the cluster's timeout.

use datafusion::arrow::record_batch::RecordBatch;
use datafusion::error::DataFusionError;
use datafusion::prelude::SessionContext;
use datafusion::sql::sqlparser::parser::ParserError;
use std::collections::BTreeSet;

/// Split a script on ';' outside quotes and comments.
pub fn split_statements(script: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut cur = String::new();
    let mut chars = script.chars().peekable();
    let mut quote: Option<char> = None;
    while let Some(c) = chars.next() {
        match (quote, c) {
            (Some(q), _) if c == q => quote = None,
            (Some(_), _) => {}
            (None, '\'' | '"') => quote = Some(c),
            (None, '-') if chars.peek() == Some(&'-') => {
                // A comment runs to the end of the line.
                for d in chars.by_ref() {
                    if d == '\n' {
                        break;
                    }
                }
                cur.push('\n');
                continue;
            }
            (None, ';') => {
                if !cur.trim().is_empty() {
                    out.push(cur.trim().to_string());
                }
                cur.clear();
                continue;
            }
            _ => {}
        }
        cur.push(c);
    }
    if !cur.trim().is_empty() {
        out.push(cur.trim().to_string());
    }
    out
}

/// What statements a run of `hvaudit sql` may run.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Power {
    /// Any: `COPY ... TO` writes files, `CREATE EXTERNAL TABLE` reads any
    /// file the user can (`-e`, the prompt).
    Full,
    /// Queries only, as rule files (`--read-only`; `-f FILE` unless
    /// `--allow-writes`): the hint says how to allow more.
    ReadOnly { allow: &'static str },
}

/// The statement as the engine gets it: `SHOW TABLES` answered in the
/// prompt's order, the rule files' helpers (`instant_text`, ...) expanded.
fn prepared(sql: &str) -> anyhow::Result<String> {
    let sql = show_tables(sql).unwrap_or_else(|| sql.to_string());
    hvaudit::rules::helpers::expand(&sql).map_err(|e| anyhow::anyhow!("query failed: {e}"))
}

/// Why `power` refuses the statement `sql`, naming its kind and how to
/// allow it; None when it may run.
pub fn refusal(sql: &str, power: Power) -> Option<String> {
    let Power::ReadOnly { allow } = power else {
        return None;
    };
    let (_, kind) = hvaudit::read_only::refused_in(&prepared(sql).ok()?)?;
    Some(format!(
        "a {kind} statement is refused: it is not a query, and this run takes queries only \
         (SELECT, WITH, VALUES), which cannot write or read files or change the session; {allow}"
    ))
}

/// One statement's result: at least one batch, so that an empty result
/// still has its columns (a CSV header, table heads).
pub async fn query(
    ctx: &SessionContext,
    sql: &str,
    power: Power,
) -> anyhow::Result<Vec<RecordBatch>> {
    let failed = |e| anyhow::anyhow!("query failed: {}", readable(&e));
    if let Some(why) = refusal(sql, power) {
        anyhow::bail!(why);
    }
    let sql = prepared(sql)?;
    let df = match power {
        Power::Full => ctx.sql(&sql).await,
        Power::ReadOnly { .. } => hvaudit::read_only::plan(ctx, &sql).await,
    }
    .map_err(failed)?;
    let schema = std::sync::Arc::new(df.schema().as_arrow().clone());
    let mut batches = df.collect().await.map_err(failed)?;
    if batches.is_empty() {
        batches.push(RecordBatch::new_empty(schema));
    }
    Ok(batches)
}

/// How long one statement may take (`--timeout`): on a cluster (its URL,
/// for the message) or here.
#[derive(Clone, Copy)]
pub struct Limit<'a> {
    pub cluster: Option<&'a str>,
    pub timeout: std::time::Duration,
}

/// `work`, given up after the statement's `--timeout`, if one applies.
pub async fn on_time<T>(
    limit: Option<Limit<'_>>,
    work: impl std::future::Future<Output = anyhow::Result<T>>,
) -> anyhow::Result<T> {
    match limit {
        Some(Limit {
            cluster: Some(url),
            timeout,
        }) => hvaudit::cluster::within(url, timeout, work).await?,
        Some(Limit {
            cluster: None,
            timeout,
        }) => tokio::time::timeout(timeout, work).await.map_err(|_| {
            anyhow::anyhow!(
                "the statement did not finish within {} (--timeout): a query that does not end \
                 (an endless recursive query, a series too long to make), or one too large for \
                 that time; fix it, or raise --timeout",
                hvaudit::cluster::humanize(&timeout)
            )
        })?,
        None => work.await,
    }
}

pub fn builtin_views() -> BTreeSet<String> {
    hvaudit::rules::catalog::Catalog::embedded()
        .map(|c| c.views.into_iter().map(|v| v.name).collect())
        .unwrap_or_default()
}

pub fn builtin_file(name: &str) -> Option<String> {
    let c = hvaudit::rules::catalog::Catalog::embedded().ok()?;
    c.views.into_iter().find(|v| v.name == name).map(|v| v.file)
}

/// `SHOW TABLES` as DataFusion answers it, but sorted, with the log's
/// tables and the user's first, the built-in views after them (marked as
/// such) and the information schema last.
pub fn show_tables(statement: &str) -> Option<String> {
    let words: Vec<String> = statement
        .split_whitespace()
        .map(str::to_ascii_lowercase)
        .collect();
    if words != ["show", "tables"] {
        return None;
    }
    let builtin = builtin_views()
        .iter()
        .map(|n| format!("'{}'", n.replace('\'', "''")))
        .collect::<Vec<_>>()
        .join(", ");
    let builtin = if builtin.is_empty() {
        "NULL".to_string()
    } else {
        builtin
    };
    Some(format!(
        "SELECT table_catalog, table_schema, table_name, \
           CASE WHEN table_schema <> 'information_schema' AND table_name IN ({builtin}) \
                THEN 'BUILT-IN VIEW' ELSE table_type END AS table_type \
         FROM information_schema.tables \
         ORDER BY CASE WHEN table_schema = 'information_schema' THEN 2 \
                       WHEN table_name IN ({builtin}) THEN 1 ELSE 0 END, \
                  table_schema, table_name"
    ))
}

/// An engine error as one line a user reads: the innermost cause, a
/// syntax error as the parser's message (no `ParserError("...")`), no
/// backtrace, no line breaks.
pub fn readable(e: &DataFusionError) -> String {
    let root = e.find_root();
    let text = match root {
        DataFusionError::SQL(parser, _) => match parser.as_ref() {
            ParserError::ParserError(m) | ParserError::TokenizerError(m) => {
                format!("syntax error: {m}")
            }
            ParserError::RecursionLimitExceeded => {
                "syntax error: the statement nests too deeply".to_string()
            }
        },
        // Its message goes on to ask for a bug report over several lines.
        DataFusionError::Internal(m) => format!("internal error: {m}"),
        other => other.strip_backtrace(),
    };
    text.split_whitespace().collect::<Vec<_>>().join(" ")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn statements_split_outside_quotes_and_comments() {
        let s = split_statements("SELECT ';' AS a; -- c; d\nSELECT 2;\n");
        assert_eq!(s, vec!["SELECT ';' AS a", "SELECT 2"]);
    }

    #[test]
    fn show_tables_is_sorted_and_marks_the_built_in_views() {
        let sql = show_tables("show  TABLES").unwrap();
        assert!(sql.contains("'BUILT-IN VIEW'"), "{sql}");
        assert!(sql.contains("'tasks'"), "{sql}");
        assert!(sql.contains("ORDER BY"), "{sql}");
        assert_eq!(show_tables("SHOW COLUMNS FROM events"), None);
        assert_eq!(show_tables("SELECT 1"), None);
    }

    #[test]
    fn engine_errors_read_as_one_line() {
        let ctx = SessionContext::new();
        let err = |sql: &str| {
            hvaudit::audit::block_on(async {
                match ctx.sql(sql).await {
                    Ok(df) => df.collect().await.map(drop),
                    Err(e) => Err(e),
                }
            })
            .unwrap_err()
        };
        let syntax = readable(&err("SELEC 1"));
        assert!(syntax.starts_with("syntax error: "), "{syntax}");
        assert!(!syntax.contains("ParserError"), "{syntax}");
        assert!(!syntax.contains('"'), "{syntax}");
        let missing = readable(&err("SELECT * FROM nowhere"));
        assert!(missing.contains("nowhere"), "{missing}");
        assert!(!missing.contains('\n'), "{missing}");
        let internal = readable(&DataFusionError::Internal("x broke".into()));
        assert_eq!(internal, "internal error: x broke");
    }
}
