//! A text column collected sparsely. Most `events` text columns are empty
//! in most rows; Arrow's string builder does work for every null (an offset
//! and a validity bit), which was a tenth of ingest. Here only a present
//! value costs anything; offsets and validity are laid out once, at the end.

use datafusion::arrow::array::{ArrayRef, BooleanBufferBuilder, StringArray};
use datafusion::arrow::buffer::{Buffer, NullBuffer, OffsetBuffer, ScalarBuffer};
use std::sync::Arc;

/// In a renumbering, a row that is dropped.
pub const DROPPED: u32 = u32::MAX;

#[derive(Debug, Default)]
pub struct TextColumn {
    /// Row of each value, increasing.
    rows: Vec<u32>,
    /// End of each value in `text`.
    ends: Vec<usize>,
    text: Vec<u8>,
}

impl TextColumn {
    pub fn with_capacity(values: usize, text_bytes: usize) -> Self {
        TextColumn {
            rows: Vec::with_capacity(values),
            ends: Vec::with_capacity(values),
            text: Vec::with_capacity(text_bytes),
        }
    }

    /// Add `value` at `row`; rows come in increasing order.
    pub fn push(&mut self, row: u32, value: &str) {
        debug_assert!(self.rows.last().is_none_or(|&last| last < row));
        self.text.extend_from_slice(value.as_bytes());
        self.ends.push(self.text.len());
        self.rows.push(row);
    }

    /// Values pushed so far.
    pub fn values(&self) -> usize {
        self.rows.len()
    }

    /// Text bytes pushed so far.
    pub fn text_bytes(&self) -> usize {
        self.text.len()
    }

    /// Keep only the values of rows that have a new number in `renumber`
    /// (indexed by old row; [`DROPPED`] for a row that goes), moving the
    /// text of later values down over the gaps in place: a filtered copy
    /// of every chunk was a tenth of ingest.
    pub fn retain(&mut self, renumber: &[u32]) {
        let (mut kept, mut text_end, mut start) = (0, 0, 0);
        for i in 0..self.rows.len() {
            let end = self.ends[i];
            let row = renumber[self.rows[i] as usize];
            if row != DROPPED {
                if text_end != start {
                    self.text.copy_within(start..end, text_end);
                }
                text_end += end - start;
                self.rows[kept] = row;
                self.ends[kept] = text_end;
                kept += 1;
            }
            start = end;
        }
        self.rows.truncate(kept);
        self.ends.truncate(kept);
        self.text.truncate(text_end);
    }

    /// The column over `rows` rows; rows without a value are null.
    pub fn finish(self, rows: usize) -> ArrayRef {
        let TextColumn {
            rows: at,
            ends,
            text,
        } = self;
        if at.is_empty() {
            // Most columns of most chunks; `share_empty` gives them one buffer.
            return Arc::new(StringArray::new_null(rows));
        }
        // The line length cap keeps a chunk's text far below 2 GiB.
        let offset = |end: usize| i32::try_from(end).expect("a chunk's text fits i32 offsets");
        let mut offsets: Vec<i32> = Vec::with_capacity(rows + 1);
        offsets.push(0);
        let nulls = if at.len() == rows {
            offsets.extend(ends.iter().map(|&end| offset(end)));
            None
        } else {
            let mut valid = BooleanBufferBuilder::new(rows);
            valid.append_n(rows, false);
            let mut last = 0;
            for (&row, &end) in at.iter().zip(&ends) {
                // Rows since the previous value are null: empty, at `last`.
                offsets.resize(row as usize + 1, last);
                last = offset(end);
                offsets.push(last);
                valid.set_bit(row as usize, true);
            }
            offsets.resize(rows + 1, last);
            Some(NullBuffer::new(valid.finish()))
        };
        let offsets = OffsetBuffer::new(ScalarBuffer::from(offsets));
        // SAFETY: `text` is whole `&str` values end to end, and every offset
        // is the start or end of one, so each slice is UTF-8. (Checking it
        // again was 2% of ingest; the unit tests run the full validation.)
        let array = unsafe { StringArray::new_unchecked(offsets, Buffer::from_vec(text), nulls) };
        Arc::new(array)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use datafusion::arrow::array::Array;

    fn column(values: &[(u32, &str)], rows: usize) -> StringArray {
        let mut c = TextColumn::default();
        for &(row, v) in values {
            c.push(row, v);
        }
        let array = c.finish(rows);
        array.to_data().validate_full().unwrap();
        array
            .as_any()
            .downcast_ref::<StringArray>()
            .unwrap()
            .clone()
    }

    #[test]
    fn values_land_on_their_rows_and_the_rest_are_null() {
        let c = column(&[(1, "ab"), (2, ""), (4, "é")], 6);
        let got: Vec<Option<&str>> = c.iter().collect();
        assert_eq!(got, [None, Some("ab"), Some(""), None, Some("é"), None]);
        assert_eq!(c.null_count(), 3);
    }

    #[test]
    fn a_full_column_has_no_validity_and_an_empty_one_is_all_null() {
        let full = column(&[(0, "x"), (1, "y")], 2);
        assert!(full.nulls().is_none());
        assert_eq!(full.iter().collect::<Vec<_>>(), [Some("x"), Some("y")]);
        let empty = column(&[], 3);
        assert_eq!(empty.null_count(), 3);
        assert_eq!(column(&[], 0).len(), 0);
    }

    #[test]
    fn retained_rows_are_renumbered_and_dropped_text_is_gone() {
        let mut c = TextColumn::default();
        for (row, v) in [(0, "aa"), (1, "b"), (3, "cccc"), (4, "")] {
            c.push(row, v);
        }
        // Rows 1 and 2 go; 0, 3 and 4 become 0, 1 and 2.
        c.retain(&[0, DROPPED, DROPPED, 1, 2]);
        let array = c.finish(3);
        array.to_data().validate_full().unwrap();
        let got = array.as_any().downcast_ref::<StringArray>().unwrap();
        assert_eq!(
            got.iter().collect::<Vec<_>>(),
            [Some("aa"), Some("cccc"), Some("")]
        );
        assert_eq!(got.value_data(), b"aacccc");
    }
}
