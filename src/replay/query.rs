//! The replay's SQL: plain queries over `events` and `evidence`, with every
//! log-derived value bound as a parameter (`$1`, `$2`, ...) or held in a
//! table of values, never spliced into the query text.

use datafusion::arrow::array::{Array, ArrayRef, AsArray, RecordBatch, StringArray};
use datafusion::arrow::datatypes::{DataType, Field, Int64Type, Schema};
use datafusion::common::ScalarValue;
use datafusion::datasource::MemTable;
use datafusion::error::Result;
use datafusion::prelude::SessionContext;
use std::sync::Arc;

#[cfg(test)]
thread_local! {
    /// Queries run on this thread, for tests that count them.
    pub(super) static QUERIES: std::cell::Cell<usize> = const { std::cell::Cell::new(0) };
}

/// Runs `sql` with `params` bound to `$1..$n`.
pub(super) async fn rows(
    ctx: &SessionContext,
    sql: &str,
    params: &[&str],
) -> Result<Vec<RecordBatch>> {
    #[cfg(test)]
    QUERIES.with(|n| n.set(n.get() + 1));
    let mut df = ctx.sql(sql).await?;
    if !params.is_empty() {
        let values: Vec<ScalarValue> = params
            .iter()
            .map(|p| ScalarValue::Utf8(Some(p.to_string())))
            .collect();
        df = df.with_param_values(values)?;
    }
    df.collect().await
}

/// Registers `values` as table `name` of one column, `value`, for
/// `IN (SELECT value FROM name)`: log values stay data, never query text,
/// and a list of any length is one hash join rather than an expression of
/// one parameter each.
pub(super) fn list_table(ctx: &SessionContext, name: &str, values: ArrayRef) -> Result<()> {
    let schema = Arc::new(Schema::new(vec![Field::new(
        "value",
        values.data_type().clone(),
        true,
    )]));
    let batch = RecordBatch::try_new(schema.clone(), vec![values])?;
    ctx.deregister_table(name)?;
    ctx.register_table(
        name,
        Arc::new(MemTable::try_new(schema, vec![vec![batch]])?),
    )?;
    Ok(())
}

/// Text values as an array for [`list_table`].
pub(super) fn texts_array<'a>(values: impl Iterator<Item = &'a str>) -> ArrayRef {
    Arc::new(StringArray::from_iter_values(values))
}

/// Typed access to one batch's columns by name (text may come back as
/// Utf8View; everything is cast to the plain types).
pub(super) struct Cols<'a> {
    batch: &'a RecordBatch,
}

impl<'a> Cols<'a> {
    pub(super) fn new(batch: &'a RecordBatch) -> Self {
        Cols { batch }
    }

    pub(super) fn len(&self) -> usize {
        self.batch.num_rows()
    }

    fn column(&self, name: &str, to: &DataType) -> Result<std::sync::Arc<dyn Array>> {
        let col = self.batch.column_by_name(name).ok_or_else(|| {
            datafusion::error::DataFusionError::Internal(format!("replay query lacks {name}"))
        })?;
        Ok(datafusion::arrow::compute::cast(col, to)?)
    }

    /// A text column as owned optional values.
    pub(super) fn text(&self, name: &str) -> Result<Vec<Option<String>>> {
        let a = self.column(name, &DataType::Utf8)?;
        let a = a.as_string::<i32>();
        Ok((0..a.len())
            .map(|r| (!a.is_null(r)).then(|| a.value(r).to_string()))
            .collect())
    }

    /// An integer column as optional values.
    pub(super) fn int(&self, name: &str) -> Result<Vec<Option<i64>>> {
        let a = self.column(name, &DataType::Int64)?;
        let a = a.as_primitive::<Int64Type>();
        Ok((0..a.len())
            .map(|r| (!a.is_null(r)).then(|| a.value(r)))
            .collect())
    }
}

/// The single text column of every row.
pub(super) async fn texts(ctx: &SessionContext, sql: &str, params: &[&str]) -> Result<Vec<String>> {
    let mut out = Vec::new();
    for b in rows(ctx, sql, params).await? {
        let c = Cols::new(&b);
        let name = b.schema().field(0).name().clone();
        out.extend(c.text(&name)?.into_iter().flatten());
    }
    Ok(out)
}

/// The first column of the first row, as an integer.
pub(super) async fn int(ctx: &SessionContext, sql: &str, params: &[&str]) -> Result<Option<i64>> {
    for b in rows(ctx, sql, params).await? {
        if b.num_rows() > 0 {
            let name = b.schema().field(0).name().clone();
            return Ok(Cols::new(&b).int(&name)?[0]);
        }
    }
    Ok(None)
}
