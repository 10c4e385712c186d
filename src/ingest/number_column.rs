//! A numeric column collected sparsely, as [`super::text_column`] does for
//! text: most numeric `events` columns (instants, counts, scores) are empty
//! in most rows, and a builder writes a value and a validity bit for every
//! null. Here only a present value costs anything; the column is laid out
//! once, at the end.

use super::text_column::DROPPED;
use datafusion::arrow::array::{
    ArrayRef, ArrowPrimitiveType, BooleanBufferBuilder, PrimitiveArray,
};
use datafusion::arrow::buffer::{NullBuffer, ScalarBuffer};
use datafusion::arrow::datatypes::DataType;
use std::sync::Arc;

/// Values at some rows of a chunk, in row order: what a sparse column
/// holds, whatever its values are (numbers here, category codes).
#[derive(Debug)]
pub struct SparseValues<T> {
    /// Row of each value, increasing.
    rows: Vec<u32>,
    values: Vec<T>,
}

impl<T> Default for SparseValues<T> {
    fn default() -> Self {
        SparseValues {
            rows: Vec::new(),
            values: Vec::new(),
        }
    }
}

impl<T: Copy + Default> SparseValues<T> {
    /// Add `value` at `row`; rows come in increasing order.
    pub fn push(&mut self, row: u32, value: T) {
        debug_assert!(self.rows.last().is_none_or(|&last| last < row));
        self.rows.push(row);
        self.values.push(value);
    }

    pub fn is_empty(&self) -> bool {
        self.rows.is_empty()
    }

    /// Keep only the values of rows that have a new number in `renumber`
    /// (indexed by old row; [`DROPPED`] for a row that goes).
    pub fn retain(&mut self, renumber: &[u32]) {
        let mut kept = 0;
        for i in 0..self.rows.len() {
            let row = renumber[self.rows[i] as usize];
            if row != DROPPED {
                self.rows[kept] = row;
                self.values[kept] = self.values[i];
                kept += 1;
            }
        }
        self.rows.truncate(kept);
        self.values.truncate(kept);
    }

    /// The values laid out over `rows` rows, with the validity of each row
    /// (None when every row has a value); a row without one holds the
    /// default.
    pub fn dense(self, rows: usize) -> (Vec<T>, Option<NullBuffer>) {
        if self.rows.len() == rows {
            return (self.values, None);
        }
        let mut values = vec![T::default(); rows];
        let mut valid = BooleanBufferBuilder::new(rows);
        valid.append_n(rows, false);
        for (&row, &value) in self.rows.iter().zip(&self.values) {
            values[row as usize] = value;
            valid.set_bit(row as usize, true);
        }
        (values, Some(NullBuffer::new(valid.finish())))
    }
}

#[derive(Debug)]
pub struct NumberColumn<T: ArrowPrimitiveType>(SparseValues<T::Native>);

impl<T: ArrowPrimitiveType> Default for NumberColumn<T> {
    fn default() -> Self {
        NumberColumn(SparseValues::default())
    }
}

impl<T: ArrowPrimitiveType> NumberColumn<T> {
    /// Add `value`, if there is one, at `row`; rows come in increasing order.
    pub fn push(&mut self, row: u32, value: Option<T::Native>) {
        if let Some(value) = value {
            self.0.push(row, value);
        }
    }

    /// See [`SparseValues::retain`].
    pub fn retain(&mut self, renumber: &[u32]) {
        self.0.retain(renumber);
    }

    /// The column over `rows` rows as `data_type` (a type of `T`'s native
    /// values, e.g. a timestamp with its time zone); rows without a value
    /// are null. Without any value it is None: the caller lays out a shared
    /// all-null column.
    pub fn finish(self, rows: usize, data_type: &DataType) -> Option<ArrayRef> {
        if self.0.is_empty() {
            return None;
        }
        let (values, nulls) = self.0.dense(rows);
        let array = PrimitiveArray::<T>::new(ScalarBuffer::from(values), nulls)
            .with_data_type(data_type.clone());
        Some(Arc::new(array))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use datafusion::arrow::array::{Array, AsArray};
    use datafusion::arrow::datatypes::{Int64Type, TimeUnit, TimestampMicrosecondType};

    #[test]
    fn values_land_on_their_rows_and_the_rest_are_null() {
        let mut c = NumberColumn::<Int64Type>::default();
        for (row, v) in [(0, None), (1, Some(7)), (2, None), (3, Some(-1))] {
            c.push(row, v);
        }
        let array = c.finish(5, &DataType::Int64).unwrap();
        array.to_data().validate_full().unwrap();
        let got: Vec<Option<i64>> = array.as_primitive::<Int64Type>().iter().collect();
        assert_eq!(got, [None, Some(7), None, Some(-1), None]);
    }

    #[test]
    fn an_empty_column_is_left_to_the_caller_and_the_type_is_kept() {
        let utc = DataType::Timestamp(TimeUnit::Microsecond, Some("UTC".into()));
        let empty = NumberColumn::<TimestampMicrosecondType>::default();
        assert!(empty.finish(3, &utc).is_none());
        let mut c = NumberColumn::<TimestampMicrosecondType>::default();
        c.push(2, Some(5));
        assert_eq!(c.finish(3, &utc).unwrap().data_type(), &utc);
    }

    #[test]
    fn retained_rows_are_renumbered() {
        let mut c = NumberColumn::<Int64Type>::default();
        for (row, v) in [(0, 10), (1, 11), (3, 13), (4, 14)] {
            c.push(row, Some(v));
        }
        // Rows 1 and 2 go; 0, 3 and 4 become 0, 1 and 2.
        c.retain(&[0, DROPPED, DROPPED, 1, 2]);
        let array = c.finish(3, &DataType::Int64).unwrap();
        let got: Vec<Option<i64>> = array.as_primitive::<Int64Type>().iter().collect();
        assert_eq!(got, [Some(10), Some(13), Some(14)]);
    }
}
