//! The built-in functions whose result can be far larger than their
//! arguments: `repeat('x', 2000000000)` is 2 GB from 25 bytes of SQL.
//! DataFusion builds a function's result outside the memory pool, so
//! `--memory-limit` alone does not bound it. Under a memory limit, these
//! functions are registered again, wrapped: before a call builds its
//! result, the result's size is worked out from the arguments, and a call
//! that would build more than the whole limit fails with an error naming
//! the function, instead of taking the machine's memory.

use datafusion::arrow::array::{Array, ArrayRef, AsArray};
use datafusion::arrow::compute::{cast, kernels::length::length};
use datafusion::arrow::datatypes::{DataType, FieldRef, Int64Type};
use datafusion::common::ScalarValue;
use datafusion::error::{DataFusionError, Result};
use datafusion::execution::FunctionRegistry;
use datafusion::logical_expr::simplify::{ExprSimplifyResult, SimplifyContext};
use datafusion::logical_expr::{
    ColumnarValue, Expr, ReturnFieldArgs, ScalarFunctionArgs, ScalarUDF, ScalarUDFImpl, Signature,
};
use datafusion::prelude::SessionContext;
use std::sync::Arc;

/// How a function's result grows with its arguments.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
enum Growth {
    /// `repeat(text, n)`: the text's bytes, n times.
    Repeat,
    /// `lpad`/`rpad(text, n [, fill])`: n characters, of at most 4 bytes.
    Pad,
    /// `array_repeat(element, n)`: the element, n times.
    ArrayRepeat,
}

const WRAPPED: [(&str, Growth); 4] = [
    ("repeat", Growth::Repeat),
    ("lpad", Growth::Pad),
    ("rpad", Growth::Pad),
    ("array_repeat", Growth::ArrayRepeat),
];

/// Register the wrapped functions in `ctx` when there is a `limit` (bytes).
pub(crate) fn register(ctx: &SessionContext, limit: Option<u64>) -> Result<()> {
    let Some(limit) = limit else { return Ok(()) };
    for (name, growth) in WRAPPED {
        let Ok(inner) = ctx.udf(name) else { continue };
        ctx.register_udf(ScalarUDF::new_from_impl(Bounded {
            inner,
            growth,
            limit,
        }));
    }
    Ok(())
}

/// A built-in function that refuses to build a result over `limit` bytes.
#[derive(Debug, PartialEq, Eq, Hash)]
struct Bounded {
    inner: Arc<ScalarUDF>,
    growth: Growth,
    limit: u64,
}

impl Bounded {
    /// An upper bound of the bytes the call would build, over all its rows.
    fn result_bytes(&self, args: &ScalarFunctionArgs) -> Result<u128> {
        let rows = args.number_rows;
        let times = match args.args.get(1) {
            Some(n) => PerRow::counts(n)?,
            None => return Ok(0),
        };
        let unit = match self.growth {
            Growth::Repeat => PerRow::text_bytes(&args.args[0])?,
            Growth::Pad => PerRow::Same(4),
            Growth::ArrayRepeat => PerRow::value_bytes(&args.args[0], rows),
        };
        Ok((0..rows).map(|r| unit.get(r) * times.get(r)).sum())
    }
}

/// One number per row, or the same for every row (a scalar argument).
enum PerRow {
    Same(u128),
    Each(Vec<u128>),
}

impl PerRow {
    fn get(&self, row: usize) -> u128 {
        match self {
            PerRow::Same(n) => *n,
            PerRow::Each(v) => v.get(row).copied().unwrap_or(0),
        }
    }

    /// A count argument, negative and null counting as 0.
    fn counts(v: &ColumnarValue) -> Result<PerRow> {
        let whole = |n: Option<i64>| n.unwrap_or(0).max(0) as u128;
        Ok(match v {
            ColumnarValue::Scalar(s) => match s.cast_to(&DataType::Int64)? {
                ScalarValue::Int64(n) => PerRow::Same(whole(n)),
                _ => PerRow::Same(0),
            },
            ColumnarValue::Array(a) => {
                let a = cast(a, &DataType::Int64)?;
                PerRow::Each(a.as_primitive::<Int64Type>().iter().map(whole).collect())
            }
        })
    }

    /// The bytes of a text argument.
    fn text_bytes(v: &ColumnarValue) -> Result<PerRow> {
        Ok(match v {
            ColumnarValue::Scalar(s) => {
                PerRow::Same(s.try_as_str().flatten().map_or(0, |t| t.len() as u128))
            }
            ColumnarValue::Array(a) => {
                let lengths: ArrayRef = cast(&length(a)?, &DataType::Int64)?;
                let lengths = lengths.as_primitive::<Int64Type>();
                PerRow::Each(
                    lengths
                        .iter()
                        .map(|n| n.unwrap_or(0).max(0) as u128)
                        .collect(),
                )
            }
        })
    }

    /// About the bytes of one value of any type (an array's average).
    fn value_bytes(v: &ColumnarValue, rows: usize) -> PerRow {
        match v {
            ColumnarValue::Scalar(s) => PerRow::Same(s.size() as u128),
            ColumnarValue::Array(a) => {
                PerRow::Same((a.get_array_memory_size() / rows.max(1)).max(1) as u128)
            }
        }
    }
}

impl ScalarUDFImpl for Bounded {
    fn name(&self) -> &str {
        self.inner.name()
    }

    fn aliases(&self) -> &[String] {
        self.inner.aliases()
    }

    fn signature(&self) -> &Signature {
        self.inner.signature()
    }

    fn return_type(&self, arg_types: &[DataType]) -> Result<DataType> {
        self.inner.return_type(arg_types)
    }

    fn return_field_from_args(&self, args: ReturnFieldArgs) -> Result<FieldRef> {
        self.inner.return_field_from_args(args)
    }

    fn coerce_types(&self, arg_types: &[DataType]) -> Result<Vec<DataType>> {
        self.inner.coerce_types(arg_types)
    }

    fn simplify(&self, args: Vec<Expr>, info: &SimplifyContext) -> Result<ExprSimplifyResult> {
        self.inner.simplify(args, info)
    }

    fn documentation(&self) -> Option<&datafusion::logical_expr::Documentation> {
        self.inner.documentation()
    }

    fn invoke_with_args(&self, args: ScalarFunctionArgs) -> Result<ColumnarValue> {
        let bytes = self.result_bytes(&args)?;
        if bytes > u128::from(self.limit) {
            return Err(DataFusionError::ResourcesExhausted(format!(
                "{}() would build {bytes} bytes in one call, more than the memory limit \
                 ({} bytes); ask for less, or raise --memory-limit",
                self.name(),
                self.limit
            )));
        }
        self.inner.invoke_with_args(args)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    async fn run(limit: Option<u64>, sql: &str) -> Result<usize> {
        let ctx = SessionContext::new();
        register(&ctx, limit)?;
        let batches = ctx.sql(sql).await?.collect().await?;
        Ok(batches.iter().map(|b| b.num_rows()).sum())
    }

    #[tokio::test]
    async fn a_result_past_the_limit_is_refused_and_one_within_it_is_made() {
        let limit = Some(1 << 20);
        for sql in [
            "SELECT repeat('ab', 600000)",
            "SELECT lpad('x', 300000)",
            "SELECT rpad('x', 300000, 'é')",
            "SELECT array_repeat(1, 200000)",
            // Counts from a column, summed over the batch's rows.
            "SELECT repeat('abcd', n) FROM (VALUES (100000), (100000), (100000)) t(n)",
            "SELECT repeat(s, 3) FROM (VALUES (repeat('x', 400000))) t(s)",
        ] {
            let err = run(limit, sql).await.unwrap_err().to_string();
            assert!(err.contains("more than the memory limit"), "{sql}: {err}");
        }
        for (sql, rows) in [
            ("SELECT repeat('ab', 500000)", 1),
            ("SELECT lpad('x', 200000)", 1),
            (
                "SELECT repeat('abcd', n) FROM (VALUES (100000), (-5), (NULL)) t(n)",
                3,
            ),
            ("SELECT repeat(NULL, 3)", 1),
        ] {
            assert_eq!(run(limit, sql).await.unwrap(), rows, "{sql}");
        }
        // No limit: the built-in, unchanged.
        assert_eq!(run(None, "SELECT repeat('ab', 600000)").await.unwrap(), 1);
    }
}
