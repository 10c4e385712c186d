//! A loaded audit keeps only the columns its queries read.
//!
//! Ingest fills every column of `events` (`sql` and `replay` show them all),
//! but an audit reads a column only through a query that names it: the raw
//! JSON text (checked at ingest, its fields taken out), and the envelope
//! fields no rule looks at, hold about a quarter of the table's bytes.
//! Before the rules run, each column no view, rule or the audit itself names
//! becomes nulls over one shared buffer (the layout stays `EVENTS`), so the
//! queries run in the memory it held. A rule whose header says which rows
//! it reads (`-- rows:`, `catalog::ReadRows`) may name columns nothing else
//! does: those keep their values in exactly those rows.

use crate::ingest::Ingested;
use crate::ingest::row::{all_null, zeros_for};
use crate::ingest::schema::{EVENTS, PROVENANCE};
use crate::rules::catalog::{Catalog, ReadRows};
use datafusion::arrow::array::{Array, ArrayRef, AsArray, BooleanArray, Int32Array, StringArray};
use datafusion::arrow::buffer::{NullBuffer, OffsetBuffer};
use datafusion::arrow::datatypes::DataType;
use datafusion::arrow::record_batch::RecordBatch;
use std::collections::HashSet;
use std::sync::Arc;

/// Columns the audit reads outside the rule files: the `ev` index and task
/// keys (`rules::ev_table`), the log's span and timeline (`created_us`).
/// The findings' places (`rules::PLACE_COLUMNS`) and the provenance are
/// added to these.
const READ_BY_THE_AUDIT: [&str; 5] = ["type", "version", "task_id", "parent_task_id", "created_us"];

/// What happens to one column of `events`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Keep {
    All,
    /// Only in the rows that the rules saying their rows read.
    ReadRows,
    None,
}

/// Let go of the columns of `ingested.events` that no query of `catalog`
/// names, keeping those that only rules saying their rows name in those
/// rows. Nothing goes when a user's query may read columns it does not name (a
/// `*`) or cannot be read into words.
pub fn let_go_of_unread_columns(ingested: &mut Ingested, catalog: &Catalog) {
    let readers: Vec<&str> = catalog
        .rules
        .iter()
        .filter(|r| r.rows.is_some())
        .map(|r| r.meta.id.as_str())
        .collect();
    let Some(named_by_others) = catalog.words(&readers) else {
        return;
    };
    // What the rules saying their rows name besides.
    let mut named_by_readers = HashSet::new();
    for rule in catalog.rules.iter().filter(|r| r.rows.is_some()) {
        let Some(words) = crate::rules::helpers::words(&rule.sql) else {
            return;
        };
        named_by_readers.extend(words);
    }
    if catalog.user_query_may_read_unnamed() {
        return;
    }
    let mut kept: HashSet<String> = named_by_others;
    kept.extend(crate::rules::helpers::words(crate::rules::PLACE_COLUMNS).unwrap_or_default());
    kept.extend(READ_BY_THE_AUDIT.iter().map(|c| c.to_string()));
    kept.extend(PROVENANCE.iter().map(|c| c.to_string()));
    let plan: Vec<(&str, Keep)> = EVENTS
        .fields()
        .iter()
        .filter_map(|field| {
            let name = field.name().as_str();
            // A column that holds no nulls keeps its values: the layout
            // stays `EVENTS`.
            let keep = if kept.contains(name) || !field.is_nullable() {
                Keep::All
            } else if named_by_readers.contains(name) {
                // Only text is worth copying: other types hold as much
                // with nulls as with values.
                match field.data_type() {
                    DataType::Utf8 => Keep::ReadRows,
                    _ => Keep::All,
                }
            } else {
                Keep::None
            };
            (keep != Keep::All).then_some((name, keep))
        })
        .collect();
    if plan.is_empty() {
        return;
    }
    let started = std::time::Instant::now();
    let timed = std::env::var_os("HVAUDIT_TIMING").is_some();
    let before = timed.then(|| table_bytes(&ingested.events));
    // The rows read matter only to columns kept in them.
    let rows_read = plan
        .iter()
        .any(|(_, keep)| *keep == Keep::ReadRows)
        .then(|| RowsRead::of(catalog, &ingested.events));
    for batch in &mut ingested.events {
        let schema = batch.schema();
        let n = batch.num_rows();
        let dropped = rows_read.as_ref().and_then(|rows| rows.dropped(batch));
        let zeros = zeros_for(n);
        let mut columns = batch.columns().to_vec();
        for &(name, keep) in &plan {
            let Ok(i) = schema.index_of(name) else {
                continue;
            };
            let replaced = match (keep, &dropped) {
                // The kept rows' text copied: nulls over the old buffer
                // would hold all of it.
                (Keep::ReadRows, Some(mask)) => columns[i]
                    .as_string_opt::<i32>()
                    .map(|text| Arc::new(text_of_kept_rows(text, mask)) as ArrayRef),
                _ => all_null(columns[i].data_type(), n, &zeros),
            };
            if let Some(nulls) = replaced {
                columns[i] = nulls;
            }
        }
        *batch =
            RecordBatch::try_new(schema, columns).expect("columns of the same types, nullable");
    }
    crate::progress::timing("ingest", "unread columns let go", started);
    if let Some(before) = before {
        let after = table_bytes(&ingested.events);
        eprintln!(
            "timing events table {} MB, {} MB before letting go",
            after >> 20,
            before >> 20
        );
    }
}

/// The bytes the buffers of `batches` hold, each buffer once (slices and
/// the shared buffer of nulls share theirs).
fn table_bytes(batches: &[RecordBatch]) -> usize {
    fn add(
        data: &datafusion::arrow::array::ArrayData,
        seen: &mut HashSet<usize>,
        total: &mut usize,
    ) {
        let nulls = data.nulls().map(|n| n.buffer());
        for buffer in data.buffers().iter().chain(nulls) {
            if seen.insert(buffer.data_ptr().as_ptr() as usize) {
                *total += buffer.capacity();
            }
        }
        for child in data.child_data() {
            add(child, seen, total);
        }
    }
    let (mut seen, mut total) = (HashSet::new(), 0);
    for batch in batches {
        for column in batch.columns() {
            add(&column.to_data(), &mut seen, &mut total);
        }
    }
    total
}

/// The rows the rules of a run that say their rows read.
struct RowsRead<'a> {
    /// Ids with more than one version, when the versions are read.
    versioned: foldhash::HashSet<String>,
    /// Event types read whole.
    types: Vec<&'a str>,
}

impl<'a> RowsRead<'a> {
    fn of(catalog: &'a Catalog, events: &[RecordBatch]) -> RowsRead<'a> {
        let running: Vec<&ReadRows> = catalog
            .rules
            .iter()
            .filter_map(|r| r.rows.as_ref())
            .collect();
        let types = running
            .iter()
            .filter_map(|r| match r {
                ReadRows::OfType(t) => Some(t.as_str()),
                ReadRows::Versions => None,
            })
            .collect();
        let mut versioned = foldhash::HashSet::default();
        if running.iter().any(|r| matches!(r, ReadRows::Versions)) {
            for batch in events {
                let (Some(ids), Some(versions)) = (text_column(batch, "id"), version_column(batch))
                else {
                    continue;
                };
                for row in (0..batch.num_rows()).filter(|&r| versions.value(r) > 1) {
                    versioned.insert(ids.value(row).to_string());
                }
            }
        }
        RowsRead { versioned, types }
    }

    /// Whether any row may be read.
    fn any(&self) -> bool {
        !self.versioned.is_empty() || !self.types.is_empty()
    }

    /// The rows of `batch` nobody reads, marked; None when no row is read.
    fn dropped(&self, batch: &RecordBatch) -> Option<BooleanArray> {
        if !self.any() {
            return None;
        }
        let ids = text_column(batch, "id");
        // Per row, whether its type is read: decided once per distinct type.
        let types = batch.column_by_name("type").and_then(|t| {
            let t = t.as_any_dictionary_opt()?;
            let values = t.values().as_string_opt::<i32>()?;
            let read: Vec<bool> = (0..values.len())
                .map(|v| values.is_valid(v) && self.types.contains(&values.value(v)))
                .collect();
            Some((t.normalized_keys(), read))
        });
        let read = |r: usize| {
            types.as_ref().is_some_and(|(keys, read)| read[keys[r]])
                || ids.is_some_and(|ids| {
                    !self.versioned.is_empty() && self.versioned.contains(ids.value(r))
                })
        };
        let n = batch.num_rows();
        let mask = BooleanArray::from_iter((0..n).map(|r| Some(!read(r))));
        (mask.true_count() < n).then_some(mask)
    }
}

fn text_column<'a>(batch: &'a RecordBatch, name: &str) -> Option<&'a StringArray> {
    batch.column_by_name(name)?.as_string_opt::<i32>()
}

fn version_column(batch: &RecordBatch) -> Option<&Int32Array> {
    batch
        .column_by_name("version")?
        .as_any()
        .downcast_ref::<Int32Array>()
}

/// `text` with only the rows not marked in `dropped` left, the others
/// null; the kept rows' bytes are copied, so the old buffers can go.
fn text_of_kept_rows(text: &StringArray, dropped: &BooleanArray) -> StringArray {
    let kept = match text.nulls() {
        Some(valid) => valid.inner() & &!dropped.values(),
        None => !dropped.values(),
    };
    let offsets = text.value_offsets();
    let mut values = Vec::new();
    let mut ends = Vec::with_capacity(text.len() + 1);
    ends.push(0i32);
    for r in 0..text.len() {
        if kept.value(r) {
            let (start, end) = (offsets[r] as usize, offsets[r + 1] as usize);
            values.extend_from_slice(&text.value_data()[start..end]);
        }
        ends.push(i32::try_from(values.len()).expect("fewer bytes than the column held"));
    }
    // The offsets rise and each kept value is a whole UTF-8 value of
    // `text`: the checks of `try_new` hold.
    StringArray::try_new(
        OffsetBuffer::new(ends.into()),
        values.into(),
        Some(NullBuffer::new(kept)),
    )
    .expect("offsets within the values, whole UTF-8 values")
}
