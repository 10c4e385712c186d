//! What rule and view files (and `hvaudit sql --read-only`) may run: one
//! query (`SELECT`, `WITH`, `VALUES`). The text is checked when it is read,
//! before anything runs ([`check`]), and planned with DataFusion's
//! `SQLOptions` refusing DDL, DML and other statements ([`plan`]), so a
//! rule can neither write a file (`COPY ... TO`, `INSERT`), read one outside
//! the tables (`CREATE EXTERNAL TABLE`), nor change the session (`SET`).

use datafusion::dataframe::DataFrame;
use datafusion::error::Result;
use datafusion::execution::context::SQLOptions;
use datafusion::prelude::{SessionConfig, SessionContext};
use datafusion::sql::parser::{DFParserBuilder, Statement};
use datafusion::sql::sqlparser::ast::Statement as SqlStatement;
use datafusion::sql::sqlparser::dialect::dialect_from_str;

/// Planning options that refuse everything but queries.
pub fn options() -> SQLOptions {
    SQLOptions::new()
        .with_allow_ddl(false)
        .with_allow_dml(false)
        .with_allow_statements(false)
}

/// `sql` planned as a query, refused when its plan holds DDL, DML or
/// another statement. Nothing has run when this returns: a DataFrame runs
/// when it is collected or streamed.
pub async fn plan(ctx: &SessionContext, sql: &str) -> Result<DataFrame> {
    ctx.sql_with_options(sql, options()).await
}

/// Why a text is not one query.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum NotAQuery {
    #[error("syntax error: {0}")]
    Syntax(String),
    #[error("it holds no statement; a rule or view is one query (SELECT, WITH or VALUES)")]
    Empty,
    #[error("it holds {0} statements; a rule or view is one query (SELECT, WITH or VALUES)")]
    Several(usize),
    /// The statement's kind, as `COPY ... TO`, `CREATE EXTERNAL TABLE`, `INSERT`.
    #[error(
        "it is a {0} statement, not a query; rules and views may only read the tables \
         (SELECT, WITH or VALUES)"
    )]
    Statement(String),
}

/// Whether `sql` is exactly one query, parsed with DataFusion's parser in
/// the dialect sessions use (`datafusion.sql_parser.dialect`, which
/// `HVAUDIT_SESSION_SETTINGS` may set).
pub fn check(sql: &str) -> std::result::Result<(), NotAQuery> {
    match statements(sql)?.as_slice() {
        [] => Err(NotAQuery::Empty),
        [one] => match kind(one) {
            None => Ok(()),
            Some(kind) => Err(NotAQuery::Statement(kind)),
        },
        more => Err(NotAQuery::Several(more.len())),
    }
}

/// The statements of `sql` as sessions parse them.
fn statements(sql: &str) -> std::result::Result<Vec<Statement>, NotAQuery> {
    let config = crate::engine::with_extra_settings(SessionConfig::new())
        .unwrap_or_else(|_| SessionConfig::new());
    let parser = &config.options().sql_parser;
    let dialect = dialect_from_str(parser.dialect)
        .unwrap_or_else(|| dialect_from_str("generic").expect("the generic dialect exists"));
    let syntax = |e: datafusion::error::DataFusionError| {
        NotAQuery::Syntax(
            e.strip_backtrace()
                .split_whitespace()
                .collect::<Vec<_>>()
                .join(" "),
        )
    };
    let parsed = DFParserBuilder::new(sql)
        .with_dialect(dialect.as_ref())
        .with_recursion_limit(parser.recursion_limit.get())
        .build()
        .map_err(syntax)?
        .parse_statements()
        .map_err(syntax)?;
    Ok(parsed.into_iter().collect())
}

/// The kind of a statement that is not a query, in SQL's words; None for
/// a query.
pub fn kind(statement: &Statement) -> Option<String> {
    match statement {
        Statement::Statement(s) => match s.as_ref() {
            SqlStatement::Query(_) => None,
            other => Some(sql_kind(other)),
        },
        Statement::CreateExternalTable(_) => Some("CREATE EXTERNAL TABLE".into()),
        Statement::CopyTo(_) => Some("COPY ... TO".into()),
        Statement::Explain(_) => Some("EXPLAIN".into()),
        Statement::Reset(_) => Some("RESET".into()),
    }
}

/// `CreateView` -> `CREATE VIEW`: the variant's name, in SQL's words.
fn sql_kind(s: &SqlStatement) -> String {
    let debug = format!("{s:?}");
    let name = debug
        .split(|c: char| !c.is_ascii_alphanumeric())
        .next()
        .unwrap_or_default();
    let mut words = String::new();
    for (i, c) in name.char_indices() {
        if i > 0 && c.is_ascii_uppercase() {
            words.push(' ');
        }
        words.push(c.to_ascii_uppercase());
    }
    match words.as_str() {
        "COPY" => "COPY".into(),
        "" => "non-query".into(),
        _ => words,
    }
}

/// The kinds of the statements of `sql` that are not queries, by position
/// (1-based), for `hvaudit sql --read-only`; a syntax error is left for
/// the engine to report.
pub fn refused_in(sql: &str) -> Option<(usize, String)> {
    let parsed = statements(sql).ok()?;
    parsed
        .iter()
        .enumerate()
        .find_map(|(i, s)| kind(s).map(|k| (i + 1, k)))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_one_query_passes() {
        assert_eq!(check("SELECT 1"), Ok(()));
        assert_eq!(check("WITH a AS (SELECT 1 AS x) SELECT x FROM a;"), Ok(()));
        assert_eq!(check("VALUES (1), (2)"), Ok(()));
        assert_eq!(check("-- only a comment\n"), Err(NotAQuery::Empty));
        assert_eq!(check("SELECT 1; SELECT 2"), Err(NotAQuery::Several(2)));
        let kind_of = |sql: &str| match check(sql) {
            Err(NotAQuery::Statement(k)) => k,
            other => panic!("{sql}: {other:?}"),
        };
        assert_eq!(kind_of("COPY (SELECT 1) TO 'x.csv'"), "COPY ... TO");
        assert_eq!(
            kind_of("CREATE EXTERNAL TABLE s (a TEXT) STORED AS CSV LOCATION 'secret.txt'"),
            "CREATE EXTERNAL TABLE"
        );
        assert_eq!(kind_of("INSERT INTO t VALUES (1)"), "INSERT");
        assert_eq!(kind_of("CREATE VIEW v AS SELECT 1"), "CREATE VIEW");
        assert_eq!(kind_of("SET datafusion.execution.batch_size = 1"), "SET");
        assert_eq!(kind_of("EXPLAIN SELECT 1"), "EXPLAIN");
        assert_eq!(kind_of("DROP TABLE t"), "DROP");
        assert!(matches!(check("SELEC 1"), Err(NotAQuery::Syntax(_))));
    }

    #[test]
    fn planning_refuses_what_writes_reads_files_or_sets() {
        let ctx = SessionContext::new();
        let dir = tempfile::tempdir().unwrap();
        let target = dir.path().join("x.csv");
        let refused = |sql: String| {
            let runtime = tokio::runtime::Runtime::new().unwrap();
            runtime
                .block_on(async { plan(&ctx, &sql).await.map(drop) })
                .unwrap_err()
        };
        let copy = refused(format!("COPY (SELECT 1) TO '{}'", target.display()));
        assert!(copy.to_string().contains("DML not supported"), "{copy}");
        let table = refused(format!(
            "CREATE EXTERNAL TABLE s (a TEXT) STORED AS CSV LOCATION '{}'",
            target.display()
        ));
        assert!(table.to_string().contains("DDL not supported"), "{table}");
        let set = refused("SET datafusion.execution.batch_size = 1".into());
        assert!(set.to_string().contains("not supported"), "{set}");
        assert!(!target.exists(), "nothing was written");
        // A path is not a table: no URL table reads a file.
        let file = refused(format!("SELECT * FROM '{}'", target.display()));
        assert!(file.to_string().contains("not found"), "{file}");
    }
}
