//! `ev` over the loaded events, indexed by event type.
//!
//! Nearly every rule reads `ev` for a few event types, and a scan that
//! compares the `type` of every row was a fifth of an audit's CPU. This
//! table knows where each type's first-version rows are, so a query whose
//! filters settle the type gets only those rows. The filters stay with the
//! engine as well (pushdown is inexact): the index only leaves out rows that
//! could not pass. Rows keep their input order.
//!
//! It also numbers the task ids: `task_key` and `parent_key` are integer
//! codes of `task_id` and `parent_task_id` (one numbering for both), so
//! that the views group, sort and join tasks on integers, not text. The
//! plain view's keys are the ids themselves; the rules only compare keys.
//! And `type` has one dictionary over all batches (each batch of `events`
//! has its own): the filters on it that remain (in scans of most rows)
//! compare a few names, not every row's.

use crate::ingest::schema::{EVENTS, category_type, events_col};
use async_trait::async_trait;
use datafusion::arrow::array::{
    Array, ArrayRef, AsArray, BooleanArray, DictionaryArray, Int32Array, RecordBatch,
    RecordBatchOptions, StringArray, UInt32Array,
};
use datafusion::arrow::compute::{filter_record_batch, take};
use datafusion::arrow::datatypes::{DataType, Field, Int32Type, Schema, SchemaRef};
use datafusion::catalog::{Session, TableProvider};
use datafusion::common::tree_node::{Transformed, TreeNode};
use datafusion::common::{Column, DFSchema};
use datafusion::datasource::{MemTable, TableType};
use datafusion::error::Result;
use datafusion::logical_expr::{Expr, TableProviderFilterPushDown};
use datafusion::physical_plan::ExecutionPlan;
use datafusion::prelude::SessionContext;
use std::sync::Arc;

/// A query reading more than this share of the rows scans them all instead:
/// copying most of the table buys nothing over filtering it.
const MOST_ROWS: f64 = 0.25;

pub struct EvTable {
    /// The `events` batches with `task_key` and `parent_key` appended.
    batches: Vec<RecordBatch>,
    /// The distinct event types.
    types: Arc<StringArray>,
    /// Per batch, per type (index into `types`): its first-version rows.
    rows: Vec<Vec<Vec<u32>>>,
    /// First-version rows per type, over all batches.
    counts: Vec<usize>,
    /// `batches WHERE version = 1`, for queries that need most rows.
    all: Arc<MemTable>,
}

impl EvTable {
    /// Index and key `events` (the `events` table's batches) for `ctx`.
    pub fn new(ctx: &SessionContext, events: &[RecordBatch]) -> Result<EvTable> {
        // The two passes are independent: run them side by side.
        let (keys, index) = std::thread::scope(|s| {
            let keys = s.spawn(|| task_keys(events));
            let index = TypeIndex::new(events);
            (
                keys.join().expect("numbering task ids does not panic"),
                index,
            )
        });
        let TypeIndex {
            types,
            rows,
            counts,
            codes,
        } = index;
        let base = events
            .first()
            .map_or_else(|| EVENTS.clone(), |b| b.schema());
        let type_col = events_col("type");
        let schema = keyed(&base);
        let batches = events
            .iter()
            .zip(keys)
            .zip(codes)
            .map(|((batch, [task, parent]), codes)| {
                let mut columns = batch.columns().to_vec();
                let codes = Int32Array::from(codes);
                columns[type_col] = Arc::new(DictionaryArray::try_new(codes, types.clone())?);
                columns.extend([task, parent]);
                RecordBatch::try_new(schema.clone(), columns)
            })
            .collect::<std::result::Result<Vec<_>, _>>()?;
        // Split as `events` is, so that full scans keep their parallelism.
        let parts = ctx.state().config().target_partitions().max(1);
        let mut partitions: Vec<Vec<RecordBatch>> = vec![Vec::new(); parts];
        for (i, b) in first_versions(&batches)?.into_iter().enumerate() {
            partitions[i % parts].push(b);
        }
        let all = Arc::new(MemTable::try_new(schema, partitions)?);
        Ok(EvTable {
            batches,
            types,
            rows,
            counts,
            all,
        })
    }

    /// Which types can pass the filters that read nothing but `type`.
    fn types_passing(&self, state: &dyn Session, filters: &[Expr]) -> Result<Vec<bool>> {
        let mut pass = vec![true; self.types.len()];
        // Each name once, typed as the table's column is.
        let schema = Arc::new(Schema::new(vec![Field::new(
            "type",
            category_type(),
            false,
        )]));
        let df_schema = DFSchema::try_from(schema.as_ref().clone())?;
        let codes = Int32Array::from_iter_values(0..self.types.len() as i32);
        let names = DictionaryArray::try_new(codes, self.types.clone())?;
        let batch = RecordBatch::try_new(schema, vec![Arc::new(names)])?;
        for filter in filters {
            let columns = filter.column_refs();
            if columns.is_empty() || columns.iter().any(|c| c.name != "type") {
                continue;
            }
            // A filter that cannot be judged on the type names alone (it
            // fails on one) prunes nothing; the engine still applies it.
            let Some(verdict) = judge(state, filter, &df_schema, &batch) else {
                continue;
            };
            for (p, v) in pass.iter_mut().zip(verdict) {
                *p &= v;
            }
        }
        Ok(pass)
    }
}

/// `ev`'s layout over `events` laid out as `base`: its columns, then the
/// task keys.
pub(super) fn keyed(base: &Schema) -> SchemaRef {
    let mut fields = base.fields().to_vec();
    for name in ["task_key", "parent_key"] {
        fields.push(Arc::new(Field::new(name, DataType::UInt32, true)));
    }
    Arc::new(Schema::new(fields))
}

/// Whether each row of `batch` (laid out as `schema`) passes `filter`, its
/// columns named without their table: None when the filter cannot be
/// judged on these rows alone (volatile, or it fails to plan or to run).
/// A null verdict does not pass.
pub(super) fn judge(
    state: &dyn Session,
    filter: &Expr,
    schema: &DFSchema,
    batch: &RecordBatch,
) -> Option<Vec<bool>> {
    if filter.is_volatile() {
        return None;
    }
    let unqualified = (filter.clone())
        .transform(|e| {
            Ok(match e {
                Expr::Column(c) => Transformed::yes(Expr::Column(Column::new_unqualified(c.name))),
                other => Transformed::no(other),
            })
        })
        .ok()?
        .data;
    let physical = state.create_physical_expr(unqualified, schema).ok()?;
    let verdict = (physical.evaluate(batch))
        .and_then(|v| v.into_array(batch.num_rows()))
        .ok()?;
    let verdict = verdict.as_boolean_opt()?;
    Some(
        (0..batch.num_rows())
            .map(|i| verdict.is_valid(i) && verdict.value(i))
            .collect(),
    )
}

/// Where each event type's first-version rows are, and every row's type as
/// a code into the distinct names.
struct TypeIndex {
    types: Arc<StringArray>,
    rows: Vec<Vec<Vec<u32>>>,
    counts: Vec<usize>,
    /// Per batch, per row (any version): its type's index into `types`.
    codes: Vec<Vec<i32>>,
}

impl TypeIndex {
    fn new(batches: &[RecordBatch]) -> TypeIndex {
        let mut numbering = Numbering::default();
        let mut rows: Vec<Vec<Vec<u32>>> = Vec::with_capacity(batches.len());
        let mut codes = Vec::with_capacity(batches.len());
        for batch in batches {
            // Each batch's own codes, renumbered into one list of names.
            let types = batch
                .column(events_col("type"))
                .as_dictionary::<Int32Type>();
            let names = types.values().as_string::<i32>();
            let local: Vec<u32> = (0..names.len())
                .map(|i| numbering.code(names.value(i)))
                .collect();
            let versions = batch
                .column(events_col("version"))
                .as_primitive::<Int32Type>();
            let mut per_type: Vec<Vec<u32>> = vec![Vec::new(); numbering.names.len()];
            let mut batch_codes = Vec::with_capacity(batch.num_rows());
            for (row, &key) in types.keys().values().iter().enumerate() {
                let id = local[key as usize] as usize;
                batch_codes.push(id as i32);
                if versions.is_null(row) || versions.value(row) != 1 {
                    continue;
                }
                if id >= per_type.len() {
                    per_type.resize(id + 1, Vec::new());
                }
                per_type[id].push(row as u32);
            }
            rows.push(per_type);
            codes.push(batch_codes);
        }
        let mut counts = vec![0; numbering.names.len()];
        for per_type in &rows {
            for (id, r) in per_type.iter().enumerate() {
                counts[id] += r.len();
            }
        }
        TypeIndex {
            types: Arc::new(StringArray::from(numbering.names)),
            rows,
            counts,
            codes,
        }
    }
}

/// Distinct strings numbered 0, 1, ... in order of first appearance.
#[derive(Default)]
struct Numbering<'a> {
    codes: foldhash::HashMap<&'a str, u32>,
    /// The strings, by code.
    names: Vec<&'a str>,
    /// Runs of one string are common (a task's events, a type's): the last
    /// one is looked up once per run.
    last: Option<(&'a str, u32)>,
}

impl<'a> Numbering<'a> {
    fn code(&mut self, s: &'a str) -> u32 {
        if let Some((last, code)) = self.last
            && last == s
        {
            return code;
        }
        let next = self.names.len() as u32;
        let code = *self.codes.entry(s).or_insert(next);
        if code == next {
            self.names.push(s);
        }
        self.last = Some((s, code));
        code
    }
}

/// The rows of `batches` that are first versions (`version = 1`): a batch
/// whose first versions lie in a few runs as slices of it (no copy), any
/// other as one batch of its first versions (a copy). Later versions
/// spread over the log (1 % of the rows in every batch) would otherwise cut
/// each batch into hundreds of slices, and every operator pays per batch:
/// the 1 GB log's rules then took 3.5 times as long and twice the memory.
fn first_versions(batches: &[RecordBatch]) -> Result<Vec<RecordBatch>> {
    let mut kept = Vec::with_capacity(batches.len());
    for batch in batches {
        let versions = batch
            .column(events_col("version"))
            .as_primitive::<Int32Type>();
        let first = |row: usize| versions.is_valid(row) && versions.value(row) == 1;
        let mut runs = Vec::new();
        let mut start = 0;
        for row in 0..=batch.num_rows() {
            if row == batch.num_rows() || !first(row) {
                if row > start {
                    runs.push((start, row - start));
                }
                start = row + 1;
            }
        }
        if runs.len() <= SLICES_KEPT {
            kept.extend(runs.into_iter().map(|(at, len)| batch.slice(at, len)));
        } else {
            let mask: BooleanArray = (0..batch.num_rows()).map(|r| Some(first(r))).collect();
            kept.push(filter_record_batch(batch, &mask)?);
        }
    }
    Ok(kept)
}

/// Past this many runs of first versions, a batch is copied rather than
/// sliced.
const SLICES_KEPT: usize = 4;

/// Per batch, the codes of its `task_id` and `parent_task_id`: one
/// numbering for both columns, in order of first appearance; null for null.
fn task_keys(batches: &[RecordBatch]) -> Vec<[ArrayRef; 2]> {
    let mut numbering = Numbering::default();
    let mut keyed = Vec::with_capacity(batches.len());
    for batch in batches {
        let pair = ["task_id", "parent_task_id"].map(|name| {
            let ids = batch.column(events_col(name));
            // Plain text, or views where the log holds long text.
            let keys: UInt32Array = match ids.as_string_view_opt() {
                Some(ids) => ids
                    .iter()
                    .map(|id| id.map(|id| numbering.code(id)))
                    .collect(),
                None => ids
                    .as_string::<i32>()
                    .iter()
                    .map(|id| id.map(|id| numbering.code(id)))
                    .collect(),
            };
            Arc::new(keys) as ArrayRef
        });
        keyed.push(pair);
    }
    keyed
}

impl std::fmt::Debug for EvTable {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("EvTable")
            .field("types", &self.types.len())
            .finish()
    }
}

#[async_trait]
impl TableProvider for EvTable {
    fn schema(&self) -> SchemaRef {
        self.all.schema()
    }

    fn table_type(&self) -> TableType {
        TableType::Base
    }

    fn supports_filters_pushdown(
        &self,
        filters: &[&Expr],
    ) -> Result<Vec<TableProviderFilterPushDown>> {
        Ok(vec![TableProviderFilterPushDown::Inexact; filters.len()])
    }

    async fn scan(
        &self,
        state: &dyn Session,
        projection: Option<&Vec<usize>>,
        filters: &[Expr],
        limit: Option<usize>,
    ) -> Result<Arc<dyn ExecutionPlan>> {
        let pass = self.types_passing(state, filters)?;
        let total: usize = self.counts.iter().sum();
        let passing: usize = (0..pass.len())
            .filter(|&i| pass[i])
            .map(|i| self.counts[i])
            .sum();
        if passing as f64 > MOST_ROWS * total as f64 {
            return self.all.scan(state, projection, filters, limit).await;
        }
        let schema = self.schema();
        let columns: Vec<usize> = match projection {
            Some(p) => p.clone(),
            None => (0..schema.fields().len()).collect(),
        };
        let projected = Arc::new(schema.project(&columns)?);
        let mut batches = Vec::new();
        for (batch, per_type) in self.batches.iter().zip(&self.rows) {
            let mut rows: Vec<u32> = per_type
                .iter()
                .enumerate()
                .filter(|(id, _)| pass[*id])
                .flat_map(|(_, r)| r.iter().copied())
                .collect();
            if rows.is_empty() {
                continue;
            }
            // Input order, as a scan of the whole table would give.
            rows.sort_unstable();
            let indices = UInt32Array::from(rows);
            let taken = columns
                .iter()
                .map(|&c| take(batch.column(c).as_ref(), &indices, None))
                .collect::<std::result::Result<Vec<_>, _>>()?;
            // `count(*)` projects no column: the batch still has rows.
            let options = RecordBatchOptions::new().with_row_count(Some(indices.len()));
            batches.push(RecordBatch::try_new_with_options(
                projected.clone(),
                taken,
                &options,
            )?);
        }
        let table = MemTable::try_new(projected, vec![batches])?;
        table.scan(state, None, &[], limit).await
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use datafusion::arrow::array::{Int64Array, new_null_array};

    /// A batch laid out as `events`: `seq` 0.., `version` 2 at `later`,
    /// 1 elsewhere, every other column null.
    fn events(rows: usize, later: &[usize]) -> RecordBatch {
        let fields: Vec<Field> = EVENTS
            .fields()
            .iter()
            .map(|f| f.as_ref().clone().with_nullable(true))
            .collect();
        let schema = Arc::new(Schema::new(fields));
        let columns = schema
            .fields()
            .iter()
            .map(|f| -> ArrayRef {
                match f.name().as_str() {
                    "seq" => Arc::new(Int64Array::from_iter_values(0..rows as i64)),
                    "version" => Arc::new(Int32Array::from_iter_values(
                        (0..rows).map(|r| if later.contains(&r) { 2 } else { 1 }),
                    )),
                    _ => new_null_array(f.data_type(), rows),
                }
            })
            .collect();
        RecordBatch::try_new(schema, columns).unwrap()
    }

    fn seqs(batches: &[RecordBatch]) -> Vec<i64> {
        batches
            .iter()
            .flat_map(|b| {
                let seq = b
                    .column(events_col("seq"))
                    .as_primitive::<datafusion::arrow::datatypes::Int64Type>();
                seq.values().to_vec()
            })
            .collect()
    }

    #[test]
    fn later_versions_spread_over_a_batch_leave_one_batch_not_hundreds() {
        let spread: Vec<usize> = (5..1000).step_by(10).collect();
        let kept = first_versions(&[events(1000, &spread)]).unwrap();
        assert_eq!(kept.len(), 1);
        let expected: Vec<i64> = (0..1000)
            .filter(|r| !spread.contains(&(*r as usize)))
            .collect();
        assert_eq!(seqs(&kept), expected);
    }

    #[test]
    fn a_few_later_versions_leave_slices_in_input_order() {
        let kept = first_versions(&[events(10, &[3, 7]), events(4, &[])]).unwrap();
        assert_eq!(kept.len(), 4);
        assert_eq!(seqs(&kept), [0, 1, 2, 4, 5, 6, 8, 9, 0, 1, 2, 3]);
        // The last row a later version: no empty slice after it.
        assert_eq!(first_versions(&[events(3, &[2])]).unwrap().len(), 1);
    }
}
