//! A text column with few distinct values (a type, an agent), collected as
//! codes into those values: each row costs a lookup, not a copy of its
//! text, and the column is laid out as `schema::category_type`.

use super::number_column::SparseValues;
use datafusion::arrow::array::{ArrayRef, DictionaryArray, Int32Array, StringArray};
use datafusion::arrow::buffer::ScalarBuffer;
use datafusion::arrow::datatypes::Int32Type;
use std::sync::Arc;

#[derive(Debug, Default)]
pub struct CategoryColumn {
    /// Each value's code: its index in `distinct`.
    codes: SparseValues<i32>,
    distinct: Vec<Box<str>>,
    code_of: foldhash::HashMap<Box<str>, i32>,
    /// The last value's code: runs of one value are common.
    last: Option<i32>,
}

impl CategoryColumn {
    /// Add `value` at `row`; rows come in increasing order.
    pub fn push(&mut self, row: u32, value: &str) {
        let code = match self.last {
            Some(code) if *self.distinct[code as usize] == *value => code,
            _ => match self.code_of.get(value) {
                Some(&code) => code,
                None => {
                    let code = self.distinct.len() as i32;
                    self.distinct.push(value.into());
                    self.code_of.insert(value.into(), code);
                    code
                }
            },
        };
        self.last = Some(code);
        self.codes.push(row, code);
    }

    /// See [`SparseValues::retain`].
    pub fn retain(&mut self, renumber: &[u32]) {
        self.codes.retain(renumber);
    }

    /// The column over `rows` rows; rows without a value are null.
    pub fn finish(self, rows: usize) -> ArrayRef {
        let (codes, nulls) = self.codes.dense(rows);
        let keys = Int32Array::new(ScalarBuffer::from(codes), nulls);
        let values = StringArray::from_iter_values(self.distinct.iter());
        let array = DictionaryArray::<Int32Type>::try_new(keys, Arc::new(values))
            .expect("codes index values");
        Arc::new(array)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ingest::text_column::DROPPED;
    use datafusion::arrow::array::{Array, AsArray};

    fn values(array: &ArrayRef) -> Vec<Option<&str>> {
        let dict = array.as_dictionary::<Int32Type>();
        dict.downcast_dict::<StringArray>()
            .unwrap()
            .into_iter()
            .collect()
    }

    #[test]
    fn values_are_codes_into_the_distinct_ones_and_the_rest_are_null() {
        let mut c = CategoryColumn::default();
        for (row, v) in [(0, "b"), (1, "a"), (2, "a"), (4, "b"), (5, "")] {
            c.push(row, v);
        }
        let array = c.finish(7);
        array.to_data().validate_full().unwrap();
        assert_eq!(array.as_dictionary::<Int32Type>().values().len(), 3);
        assert_eq!(
            values(&array),
            [
                Some("b"),
                Some("a"),
                Some("a"),
                None,
                Some("b"),
                Some(""),
                None
            ]
        );
        let empty = CategoryColumn::default().finish(2);
        assert_eq!(empty.null_count(), 2);
    }

    #[test]
    fn retained_rows_are_renumbered() {
        let mut c = CategoryColumn::default();
        for (row, v) in [(0, "x"), (1, "y"), (2, "z")] {
            c.push(row, v);
        }
        c.retain(&[DROPPED, 0, 1]);
        let array = c.finish(2);
        array.to_data().validate_full().unwrap();
        assert_eq!(values(&array), [Some("y"), Some("z")]);
    }
}
