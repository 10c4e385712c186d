//! How long a decoded Parquet row is as a line of JSON, measured on its
//! Arrow arrays before anything is serialized: a row longer than
//! `--max-line-bytes` is rejected as a line that long is, without ever
//! being written out as text.
//!
//! The measure is a floor of the JSON text, not its exact length: text and
//! binary values count their bytes (and two quotes), members their names,
//! other values a few bytes each; escapes are not counted (the line is
//! still measured after serialization, as any NDJSON line is).

use datafusion::arrow::array::{Array, ArrayRef, AsArray, OffsetSizeTrait};
use datafusion::arrow::datatypes::DataType;
use datafusion::arrow::record_batch::RecordBatch;

/// `null`.
const NULL: u64 = 4;
/// `false`.
const BOOL: u64 = 5;
/// A number, about.
const NUMBER: u64 = 8;
/// A time written as text, about.
const TIME: u64 = 32;
/// Quotes and colon around a member's name, and a comma.
const MEMBER: u64 = 4;

/// A row longer than the cap.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Oversized {
    /// Its index in the batch.
    pub row: usize,
    pub bytes: u64,
    /// Its largest member (a top-level column) and that member's bytes.
    pub column: String,
    pub column_bytes: u64,
}

/// The rows of `batch` longer than `cap` bytes, in order.
pub fn oversized(batch: &RecordBatch, cap: u64) -> Vec<Oversized> {
    let n = batch.num_rows();
    // `{}`, then each member that is not null (as JSON lines leave them out).
    let mut total = vec![2u64; n];
    let mut largest = vec![(0u64, 0usize); n];
    let schema = batch.schema();
    for (c, (field, column)) in schema.fields().iter().zip(batch.columns()).enumerate() {
        let sizes = value_sizes(column.as_ref());
        let nulls = column.logical_nulls();
        let name = field.name().len() as u64 + MEMBER;
        for (r, size) in sizes.into_iter().enumerate().take(n) {
            if nulls.as_ref().is_some_and(|b| b.is_null(r)) {
                continue;
            }
            total[r] = total[r].saturating_add(name).saturating_add(size);
            if size > largest[r].0 {
                largest[r] = (size, c);
            }
        }
    }
    total
        .iter()
        .enumerate()
        .filter(|(_, bytes)| **bytes > cap)
        .map(|(row, bytes)| {
            let (column_bytes, c) = largest[row];
            Oversized {
                row,
                bytes: *bytes,
                column: schema.field(c).name().clone(),
                column_bytes,
            }
        })
        .collect()
}

/// The text of a short value (a row's id or type for a rejection), if it
/// is one.
pub fn short_text(column: &ArrayRef, row: usize) -> Option<String> {
    if row >= column.len() || column.is_null(row) {
        return None;
    }
    let one = column.slice(row, 1);
    if value_sizes(one.as_ref()).first().is_none_or(|s| *s > 1024) {
        return None;
    }
    let text = datafusion::arrow::compute::cast(&one, &DataType::Utf8).ok()?;
    let text = text.as_string_opt::<i32>()?;
    (!text.is_null(0)).then(|| text.value(0).to_string())
}

/// Each value's bytes as JSON text, about (see the module's doc).
fn value_sizes(a: &dyn Array) -> Vec<u64> {
    let n = a.len();
    let mut sizes = match a.data_type() {
        DataType::Utf8 => lengths(a.as_string::<i32>().value_offsets()),
        DataType::LargeUtf8 => lengths(a.as_string::<i64>().value_offsets()),
        DataType::Binary => lengths(a.as_binary::<i32>().value_offsets()),
        DataType::LargeBinary => lengths(a.as_binary::<i64>().value_offsets()),
        DataType::Utf8View => view_lengths(a.as_string_view().views()),
        DataType::BinaryView => view_lengths(a.as_binary_view().views()),
        DataType::FixedSizeBinary(w) => vec![u64::try_from(*w).unwrap_or(0) + 2; n],
        DataType::Struct(fields) => {
            let s = a.as_struct();
            let mut sizes = vec![2u64; n];
            for (f, child) in fields.iter().zip(s.columns()) {
                let name = f.name().len() as u64 + MEMBER;
                let nulls = child.logical_nulls();
                for (r, size) in value_sizes(child.as_ref()).into_iter().enumerate().take(n) {
                    if !nulls.as_ref().is_some_and(|b| b.is_null(r)) {
                        sizes[r] = sizes[r].saturating_add(name).saturating_add(size);
                    }
                }
            }
            sizes
        }
        DataType::List(_) => {
            let l = a.as_list::<i32>();
            items(l.value_offsets(), &value_sizes(l.values().as_ref()))
        }
        DataType::LargeList(_) => {
            let l = a.as_list::<i64>();
            items(l.value_offsets(), &value_sizes(l.values().as_ref()))
        }
        DataType::FixedSizeList(_, _) => {
            let l = a.as_fixed_size_list();
            let inner = value_sizes(l.values().as_ref());
            let len = usize::try_from(l.value_length()).unwrap_or(0);
            (0..n)
                .map(|i| {
                    let start = usize::try_from(l.value_offset(i)).unwrap_or(0);
                    sum_items(inner.get(start..start.saturating_add(len)))
                })
                .collect()
        }
        DataType::Map(_, _) => {
            // An object: each entry its key, a colon, its value and a comma.
            let m = a.as_map();
            let keys = value_sizes(m.keys().as_ref());
            let values = value_sizes(m.values().as_ref());
            let entries: Vec<u64> = keys
                .iter()
                .zip(&values)
                .map(|(k, v)| k.saturating_add(*v).saturating_add(1))
                .collect();
            items(m.value_offsets(), &entries)
        }
        DataType::Dictionary(_, _) => {
            let d = a.as_any_dictionary();
            let values = value_sizes(d.values().as_ref());
            // Without values every key is null (and normalizing asserts).
            if values.is_empty() {
                vec![NULL; n]
            } else {
                d.normalized_keys()
                    .into_iter()
                    .map(|k| values.get(k).copied().unwrap_or(NULL))
                    .collect()
            }
        }
        DataType::Boolean => vec![BOOL; n],
        DataType::Null => vec![NULL; n],
        t if t.is_temporal() => vec![TIME; n],
        _ => vec![NUMBER; n],
    };
    sizes.resize(n, NULL);
    if let Some(nulls) = a.logical_nulls() {
        for (size, valid) in sizes.iter_mut().zip(nulls.iter()) {
            if !valid {
                *size = NULL;
            }
        }
    }
    sizes
}

/// Text or bytes between offsets, quoted.
fn lengths<O: OffsetSizeTrait>(offsets: &[O]) -> Vec<u64> {
    offsets
        .windows(2)
        .map(|w| w[1].as_usize().saturating_sub(w[0].as_usize()) as u64 + 2)
        .collect()
}

/// A view's length is its low 32 bits.
fn view_lengths(views: &[u128]) -> Vec<u64> {
    views.iter().map(|v| u64::from(*v as u32) + 2).collect()
}

/// Lists between offsets into `child`'s sizes: brackets, items, commas.
fn items<O: OffsetSizeTrait>(offsets: &[O], child: &[u64]) -> Vec<u64> {
    offsets
        .windows(2)
        .map(|w| sum_items(child.get(w[0].as_usize()..w[1].as_usize())))
        .collect()
}

fn sum_items(items: Option<&[u64]>) -> u64 {
    let items = items.unwrap_or(&[]);
    items
        .iter()
        .fold(2u64, |acc, s| acc.saturating_add(*s).saturating_add(1))
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use datafusion::arrow::array::{
        DictionaryArray, Int64Array, ListArray, MapBuilder, StringArray, StringBuilder, StructArray,
    };
    use datafusion::arrow::datatypes::{Field, Int32Type, Int64Type, Schema};
    use std::sync::Arc;

    /// A batch of nullable columns named as given (also for the tests of
    /// `parquet_lines`).
    pub(crate) fn batch(columns: Vec<(&str, ArrayRef)>) -> RecordBatch {
        let fields: Vec<Field> = columns
            .iter()
            .map(|(n, a)| Field::new(*n, a.data_type().clone(), true))
            .collect();
        RecordBatch::try_new(
            Arc::new(Schema::new(fields)),
            columns.into_iter().map(|(_, a)| a).collect(),
        )
        .unwrap()
    }

    /// The measure of each row, against the JSON line arrow writes.
    fn measured_and_written(b: &RecordBatch) -> Vec<(u64, usize)> {
        let mut out = Vec::new();
        let mut w = datafusion::arrow::json::LineDelimitedWriter::new(&mut out);
        w.write(b).unwrap();
        w.finish().unwrap();
        let lines: Vec<usize> = out
            .split(|c| *c == b'\n')
            .filter(|l| !l.is_empty())
            .map(<[u8]>::len)
            .collect();
        let sizes: Vec<u64> = (0..b.num_rows())
            .map(|r| oversized(&b.slice(r, 1), 0)[0].bytes)
            .collect();
        sizes.into_iter().zip(lines).collect()
    }

    #[test]
    fn text_rows_measure_about_their_json_line() {
        let b = batch(vec![
            ("id", Arc::new(StringArray::from(vec![Some("e1"), None]))),
            (
                "payload",
                Arc::new(StringArray::from(vec!["x".repeat(1000), "y".repeat(10)])),
            ),
            ("n", Arc::new(Int64Array::from(vec![1, 123456]))),
        ]);
        for (measured, written) in measured_and_written(&b) {
            let (m, w) = (measured as i64, written as i64);
            assert!((m - w).abs() <= 8, "measured {m}, written {w}");
        }
    }

    #[test]
    fn nested_values_count_through_structs_lists_maps_and_dictionaries() {
        let big = "z".repeat(5000);
        let inner = StructArray::from(vec![(
            Arc::new(Field::new("text", DataType::Utf8, true)),
            Arc::new(StringArray::from(vec![big.as_str(), "a"])) as ArrayRef,
        )]);
        let list = ListArray::from_iter_primitive::<Int64Type, _, _>(vec![
            Some(vec![Some(1); 100]),
            Some(vec![]),
        ]);
        let mut map = MapBuilder::new(None, StringBuilder::new(), StringBuilder::new());
        map.keys().append_value("k");
        map.values().append_value(&big);
        map.append(true).unwrap();
        map.append(true).unwrap();
        let dict: DictionaryArray<Int32Type> = vec![big.as_str(), "b"].into_iter().collect();
        let b = batch(vec![
            ("s", Arc::new(inner)),
            ("l", Arc::new(list)),
            ("m", Arc::new(map.finish())),
            ("d", Arc::new(dict)),
        ]);
        let sizes: Vec<u64> = (0..2)
            .map(|r| oversized(&b.slice(r, 1), 0)[0].bytes)
            .collect();
        assert!(
            sizes[0] > 3 * 5000 && sizes[0] < 3 * 5000 + 1500,
            "{sizes:?}"
        );
        assert!(sizes[1] < 100, "{sizes:?}");
        let over = oversized(&b, 10_000);
        assert_eq!(over.len(), 1);
        assert_eq!(over[0].row, 0);
        assert!(over[0].column_bytes > 5000, "{over:?}");
    }

    #[test]
    fn the_largest_member_is_named() {
        let b = batch(vec![
            ("id", Arc::new(StringArray::from(vec!["e1", "e2", "e3"]))),
            (
                "payload",
                Arc::new(StringArray::from(vec![
                    "{}".to_string(),
                    "a".repeat(2000),
                    "{}".to_string(),
                ])),
            ),
        ]);
        let over = oversized(&b, 1000);
        assert_eq!(over.len(), 1, "{over:?}");
        assert_eq!((over[0].row, over[0].column.as_str()), (1, "payload"));
        assert_eq!(over[0].column_bytes, 2002);
        assert_eq!(short_text(b.column(0), 1).as_deref(), Some("e2"));
        assert_eq!(short_text(b.column(1), 1), None, "too long to quote");
        // A slice measures its own rows.
        let tail = oversized(&b.slice(1, 2), 1000);
        assert_eq!(tail[0].row, 0);
    }
}
