//! One normalized event row and the Arrow builders that collect rows into
//! `events` record batches, both made from the column list
//! `schema::events_columns`: a row field and a builder slot per column,
//! pushed and finished in the list's order, with no lookup per row.

use super::category_column::CategoryColumn;
use super::number_column::NumberColumn;
use super::schema::{self, EVENTS};
use super::text_column::{DROPPED, TextColumn};
use datafusion::arrow::array::{
    Array, ArrayData, ArrayRef, AsArray, BooleanArray, BooleanBuilder, DictionaryArray,
    FixedSizeBinaryArray, Int32Array, Int64Array, StringArray, TimestampMicrosecondArray,
    make_array,
};
use datafusion::arrow::buffer::{Buffer, MutableBuffer, ScalarBuffer};
use datafusion::arrow::compute::{FilterBuilder, FilterPredicate};
use datafusion::arrow::datatypes::{
    DataType, Float64Type, Int32Type, Int64Type, TimestampMicrosecondType,
};
use datafusion::arrow::record_batch::RecordBatch;
use std::borrow::Cow;
use std::sync::Arc;

/// The kept rows of a chunk being finished, for the columns that are not
/// collected per row.
struct Finishing<'f> {
    rows: usize,
    /// One zeroed buffer every empty column of the batch lays out over.
    zeros: &'f Buffer,
    /// Drops the rows not kept from the columns held densely.
    filter: Option<&'f FilterPredicate>,
}

impl Finishing<'_> {
    fn kept(&self, array: ArrayRef) -> ArrayRef {
        match self.filter {
            Some(f) => f.filter(&array).expect("keep mask matches the rows"),
            None => array,
        }
    }

    /// A sparse column's values, or a shared all-null column of `data_type`.
    fn sparse(&self, array: Option<ArrayRef>, data_type: &DataType) -> ArrayRef {
        array
            .or_else(|| all_null(data_type, self.rows, self.zeros))
            .expect("numeric columns have an all-null layout")
    }
}

/// How a column kind of `schema::events_columns` is collected:
/// `(slot KIND)` the builder a chunk holds for it, `(init KIND ...)` that
/// builder for a chunk, `(push KIND ...)` one row's value into it,
/// `(retain KIND ...)` dropping rows, `(finish KIND ...)` the Arrow array,
/// `(text_shape KIND ...)` its share of a chunk's text. The kinds:
/// `int`, `instant`: a value in every row, held densely;
/// `int_or_null`, `int32_or_null`, `float_or_null`, `instant_or_null`:
/// numbers empty in most rows, collected sparsely;
/// `flag_or_null`: a boolean or null;
/// `text`, `text_or_null`: text (a value in every row, or not);
/// `json_text`: raw JSON text in every row, a nullable column in the layout
/// (layout 2 declared it so, and files written then must keep matching);
/// `json_or_null`: raw JSON text, or not;
/// `envelope_text`: text or null, the envelope member of the column's name
/// as written (set through [`EventRow::envelope_string`]);
/// `category`, `fixed_category` (a `&'static str`), `envelope_category`:
/// text with few distinct values, held as codes;
/// `file`: the chunk's input, `zeros`, `ones`: filled in by the dedup;
/// `micros_of(COLUMN)`: the instants of another column as numbers.
#[rustfmt::skip]
macro_rules! column_slot {
    (slot int) => { Vec<i64> };
    (slot instant) => { Vec<i64> };
    (slot int_or_null) => { NumberColumn<Int64Type> };
    (slot int32_or_null) => { NumberColumn<Int32Type> };
    (slot float_or_null) => { NumberColumn<Float64Type> };
    (slot instant_or_null) => { NumberColumn<TimestampMicrosecondType> };
    (slot flag_or_null) => { BooleanBuilder };
    (slot text) => { TextColumn };
    (slot json_text) => { TextColumn };
    (slot text_or_null) => { TextColumn };
    (slot json_or_null) => { TextColumn };
    (slot envelope_text) => { TextColumn };
    (slot fixed_category) => { CategoryColumn };
    (slot category) => { CategoryColumn };
    (slot envelope_category) => { CategoryColumn };
    (slot file) => { Arc<str> };
    (slot digest) => { Vec<u8> };
    (slot $derived:ident) => { () };

    (init int, $rows:expr, $text:expr, $file:expr) => { Vec::with_capacity($rows) };
    (init instant, $rows:expr, $text:expr, $file:expr) => { Vec::with_capacity($rows) };
    (init flag_or_null, $rows:expr, $text:expr, $file:expr) => {
        BooleanBuilder::with_capacity($rows)
    };
    (init text, $rows:expr, $text:expr, $file:expr) => { text_column($text) };
    (init json_text, $rows:expr, $text:expr, $file:expr) => { text_column($text) };
    (init text_or_null, $rows:expr, $text:expr, $file:expr) => { text_column($text) };
    (init json_or_null, $rows:expr, $text:expr, $file:expr) => { text_column($text) };
    (init envelope_text, $rows:expr, $text:expr, $file:expr) => { text_column($text) };
    (init file, $rows:expr, $text:expr, $file:expr) => { Arc::clone($file) };
    (init digest, $rows:expr, $text:expr, $file:expr) => { Vec::with_capacity(16 * $rows) };
    (init $kind:ident, $rows:expr, $text:expr, $file:expr) => { Default::default() };

    (push int, $slot:expr, $row:expr, $value:expr) => { $slot.push($value) };
    (push instant, $slot:expr, $row:expr, $value:expr) => { $slot.push($value) };
    (push digest, $slot:expr, $row:expr, $value:expr) => { $slot.extend_from_slice(&$value) };
    (push int_or_null, $slot:expr, $row:expr, $value:expr) => { $slot.push($row, $value) };
    (push int32_or_null, $slot:expr, $row:expr, $value:expr) => { $slot.push($row, $value) };
    (push float_or_null, $slot:expr, $row:expr, $value:expr) => { $slot.push($row, $value) };
    (push instant_or_null, $slot:expr, $row:expr, $value:expr) => { $slot.push($row, $value) };
    (push flag_or_null, $slot:expr, $row:expr, $value:expr) => { $slot.append_option($value) };
    (push text, $slot:expr, $row:expr, $value:expr) => { $slot.push($row, &$value) };
    (push json_text, $slot:expr, $row:expr, $value:expr) => { $slot.push($row, &$value) };
    (push category, $slot:expr, $row:expr, $value:expr) => { $slot.push($row, &$value) };
    (push fixed_category, $slot:expr, $row:expr, $value:expr) => { $slot.push($row, $value) };
    (push text_or_null, $slot:expr, $row:expr, $value:expr) => { push_some(&mut $slot, $row, &$value) };
    (push json_or_null, $slot:expr, $row:expr, $value:expr) => { push_some(&mut $slot, $row, &$value) };
    (push envelope_text, $slot:expr, $row:expr, $value:expr) => { push_some(&mut $slot, $row, &$value) };
    (push envelope_category, $slot:expr, $row:expr, $value:expr) => {
        if let Some(value) = &$value {
            $slot.push($row, value)
        }
    };
    (push $derived:ident, $slot:expr, $row:expr, $value:expr) => { () };

    // Dense columns are filtered when they finish.
    (retain int, $slot:expr, $renumber:expr) => { () };
    (retain instant, $slot:expr, $renumber:expr) => { () };
    (retain flag_or_null, $slot:expr, $renumber:expr) => { () };
    (retain file, $slot:expr, $renumber:expr) => { () };
    (retain digest, $slot:expr, $renumber:expr) => { () };
    (retain zeros, $slot:expr, $renumber:expr) => { () };
    (retain ones, $slot:expr, $renumber:expr) => { () };
    (retain micros_of, $slot:expr, $renumber:expr) => { () };
    (retain $kind:ident, $slot:expr, $renumber:expr) => { $slot.retain($renumber) };

    (finish int, $slot:expr, $at:expr) => { $at.kept(Arc::new(Int64Array::from($slot))) };
    (finish digest, $slot:expr, $at:expr) => {{
        let digests = FixedSizeBinaryArray::new(16, Buffer::from_vec($slot), None);
        $at.kept(Arc::new(digests))
    }};
    (finish instant, $slot:expr, $at:expr) => {{
        let micros = $at.kept(Arc::new(Int64Array::from($slot)));
        let micros = micros.as_primitive::<Int64Type>().values().clone();
        Arc::new(TimestampMicrosecondArray::new(micros, None).with_timezone("UTC")) as ArrayRef
    }};
    (finish micros_of($of:ident), $slot:expr, $at:expr) => {{
        let micros = $of.as_primitive::<TimestampMicrosecondType>().values().clone();
        Arc::new(Int64Array::new(micros, None)) as ArrayRef
    }};
    (finish int_or_null, $slot:expr, $at:expr) => { sparse!($slot, $at, int_or_null) };
    (finish int32_or_null, $slot:expr, $at:expr) => { sparse!($slot, $at, int32_or_null) };
    (finish float_or_null, $slot:expr, $at:expr) => { sparse!($slot, $at, float_or_null) };
    (finish instant_or_null, $slot:expr, $at:expr) => { sparse!($slot, $at, instant_or_null) };
    (finish flag_or_null, $slot:expr, $at:expr) => {{
        let mut flags = $slot;
        $at.kept(Arc::new(flags.finish()))
    }};
    // One file per chunk: every code is 0, over the shared zeros.
    (finish file, $slot:expr, $at:expr) => {{
        let codes = Int32Array::new(ScalarBuffer::new($at.zeros.clone(), 0, $at.rows), None);
        let names = Arc::new(StringArray::from(vec![&*$slot]));
        let file = DictionaryArray::<Int32Type>::try_new(codes, names).expect("code 0 has a value");
        Arc::new(file) as ArrayRef
    }};
    (finish zeros, $slot:expr, $at:expr) => {
        Arc::new(Int64Array::new(ScalarBuffer::new($at.zeros.clone(), 0, $at.rows), None)) as ArrayRef
    };
    (finish ones, $slot:expr, $at:expr) => {
        Arc::new(Int32Array::from_value(1, $at.rows)) as ArrayRef
    };
    (finish $kind:ident, $slot:expr, $at:expr) => { $slot.finish($at.rows) };

    (text_shape text, $slot:expr) => { Some(($slot.values(), $slot.text_bytes())) };
    (text_shape json_text, $slot:expr) => { Some(($slot.values(), $slot.text_bytes())) };
    (text_shape text_or_null, $slot:expr) => { Some(($slot.values(), $slot.text_bytes())) };
    (text_shape json_or_null, $slot:expr) => { Some(($slot.values(), $slot.text_bytes())) };
    (text_shape envelope_text, $slot:expr) => { Some(($slot.values(), $slot.text_bytes())) };
    (text_shape $kind:ident, $slot:expr) => { None::<(usize, usize)> };
}

macro_rules! sparse {
    ($slot:expr, $at:expr, $kind:ident) => {{
        let data_type = schema::column_kind!(data_type $kind);
        $at.sparse($slot.finish($at.rows, &data_type), &data_type)
    }};
}

/// The row, the column builders and the envelope members of the
/// `schema::events_columns` list. The list is walked once to sort the
/// entries into row fields and envelope members (`@sort`), then the rest
/// is made from every entry.
macro_rules! event_rows {
    ($($field:ident $(= $column:literal)?: $kind:ident $(($of:ident))?,)*) => {
        event_rows!(@sort [] [] $($field: $kind,)*);

        /// Column builders for `events`; one per worker chunk, a slot per
        /// column (named by the row's field).
        pub struct EventBuilders {
            $($field: column_slot!(slot $kind),)*
            rows: usize,
            /// Size of the text the rows come from (0 when not known).
            input_bytes: usize,
        }

        /// The columns' positions, to index per-column figures by.
        #[allow(non_camel_case_types, clippy::enum_variant_names)]
        enum Column {
            $($field,)*
        }

        /// Columns of `events`.
        const COLUMNS: usize = [$(Column::$field),*].len();

        /// The names of the columns, in order.
        const COLUMN_NAMES: [&str; COLUMNS] = [$(schema::column_name!($field $($column)?)),*];

        impl EventBuilders {
            fn with_capacities(
                src_file: Arc<str>,
                rows: usize,
                text: impl Fn(usize) -> (usize, usize),
                input_bytes: usize,
            ) -> Self {
                EventBuilders {
                    $($field: column_slot!(init $kind, rows, text(Column::$field as usize), &src_file),)*
                    rows: 0,
                    input_bytes,
                }
            }

            pub fn push(&mut self, r: &EventRow<'_>) {
                let row = u32::try_from(self.rows).expect("a chunk has fewer than 2^32 rows");
                $(column_slot!(push $kind, self.$field, row, r.$field);)*
                self.rows += 1;
            }

            /// Values and text bytes per text column (zeros elsewhere).
            fn text_shape(&self) -> [(usize, usize); COLUMNS] {
                [$(column_slot!(text_shape $kind, self.$field).unwrap_or_default()),*]
            }

            /// Finish with only the rows marked in `keep` (all when None).
            /// Text, most of a batch, is compacted in place rather than copied.
            pub fn finish_keeping(self, keep: Option<&[bool]>) -> RecordBatch {
                let keep = keep.filter(|keep| keep.contains(&false));
                // Only the slots that drop rows in place are changed; the
                // columns made as they finish (`zeros`, ...) have empty ones.
                #[allow(unused_mut, unused_variables)]
                let EventBuilders { $(mut $field,)* rows, input_bytes: _ } = self;
                let mut n = rows;
                let mut filter = None;
                if let Some(keep) = keep {
                    let mut renumber = Vec::with_capacity(keep.len());
                    n = 0;
                    for &k in keep {
                        renumber.push(if k { n as u32 } else { DROPPED });
                        n += k as usize;
                    }
                    $(column_slot!(retain $kind, $field, &renumber);)*
                    filter = Some(FilterBuilder::new(&BooleanArray::from(keep.to_vec())).build());
                }
                // Sparse columns were renumbered above; the kept rows are 0..n.
                let zeros = zeros_for(n);
                let at = Finishing { rows: n, zeros: &zeros, filter: filter.as_ref() };
                $(let $field: ArrayRef = column_slot!(finish $kind $(($of))?, $field, at);)*
                let columns = vec![$($field),*];
                let mut columns = share_empty(n, columns);
                // Builders grow by doubling and keep that capacity; the whole log's
                // chunks are held until redeliveries are collapsed, so give it back.
                for array in columns.iter_mut() {
                    Array::shrink_to_fit(array);
                }
                RecordBatch::try_new(EVENTS.clone(), columns)
                    .expect("builders match the events schema")
            }
        }
    };

    // Row fields and envelope members, sorted out of the list.
    (@sort [$($row:tt)*] [$($envelope:ident: $envelope_kind:ident,)*]) => {
        /// A normalized event, borrowing from the line it was parsed from:
        /// a field per column of `events` (but those the dedup fills in).
        #[derive(Debug, Default)]
        pub struct EventRow<'a> {
            $($row)*
            $(pub $envelope: Option<Cow<'a, str>>,)*
        }

        /// The envelope members each copied as written to the column of
        /// their name.
        pub const ENVELOPE_STRINGS: &[&str] = &[$(stringify!($envelope)),*];

        impl<'a> EventRow<'a> {
            /// The field of an envelope member read as it is written (a
            /// string, null for none), with its name, if `key` is one.
            pub fn envelope_string(
                &mut self,
                key: &str,
            ) -> Option<(&'static str, &mut Option<Cow<'a, str>>)> {
                Some(match key {
                    $(stringify!($envelope) => (stringify!($envelope), &mut self.$envelope),)*
                    _ => return None,
                })
            }
        }
    };
    (@sort [$($row:tt)*] [$($envelope:tt)*] $field:ident: envelope_text, $($rest:tt)*) => {
        event_rows!(@sort [$($row)*] [$($envelope)* $field: envelope_text,] $($rest)*);
    };
    (@sort [$($row:tt)*] [$($envelope:tt)*] $field:ident: envelope_category, $($rest:tt)*) => {
        event_rows!(@sort [$($row)*] [$($envelope)* $field: envelope_category,] $($rest)*);
    };
    (@sort [$($row:tt)*] [$($envelope:tt)*] $field:ident: int, $($rest:tt)*) => {
        event_rows!(@sort [$($row)* pub $field: i64,] [$($envelope)*] $($rest)*);
    };
    (@sort [$($row:tt)*] [$($envelope:tt)*] $field:ident: instant, $($rest:tt)*) => {
        event_rows!(@sort [$($row)* pub $field: i64,] [$($envelope)*] $($rest)*);
    };
    (@sort [$($row:tt)*] [$($envelope:tt)*] $field:ident: digest, $($rest:tt)*) => {
        event_rows!(@sort [$($row)* pub $field: [u8; 16],] [$($envelope)*] $($rest)*);
    };
    (@sort [$($row:tt)*] [$($envelope:tt)*] $field:ident: int_or_null, $($rest:tt)*) => {
        event_rows!(@sort [$($row)* pub $field: Option<i64>,] [$($envelope)*] $($rest)*);
    };
    (@sort [$($row:tt)*] [$($envelope:tt)*] $field:ident: instant_or_null, $($rest:tt)*) => {
        event_rows!(@sort [$($row)* pub $field: Option<i64>,] [$($envelope)*] $($rest)*);
    };
    (@sort [$($row:tt)*] [$($envelope:tt)*] $field:ident: int32_or_null, $($rest:tt)*) => {
        event_rows!(@sort [$($row)* pub $field: Option<i32>,] [$($envelope)*] $($rest)*);
    };
    (@sort [$($row:tt)*] [$($envelope:tt)*] $field:ident: float_or_null, $($rest:tt)*) => {
        event_rows!(@sort [$($row)* pub $field: Option<f64>,] [$($envelope)*] $($rest)*);
    };
    (@sort [$($row:tt)*] [$($envelope:tt)*] $field:ident: flag_or_null, $($rest:tt)*) => {
        event_rows!(@sort [$($row)* pub $field: Option<bool>,] [$($envelope)*] $($rest)*);
    };
    (@sort [$($row:tt)*] [$($envelope:tt)*] $field:ident: text, $($rest:tt)*) => {
        event_rows!(@sort [$($row)* pub $field: Cow<'a, str>,] [$($envelope)*] $($rest)*);
    };
    (@sort [$($row:tt)*] [$($envelope:tt)*] $field:ident: json_text, $($rest:tt)*) => {
        event_rows!(@sort [$($row)* pub $field: Cow<'a, str>,] [$($envelope)*] $($rest)*);
    };
    (@sort [$($row:tt)*] [$($envelope:tt)*] $field:ident: category, $($rest:tt)*) => {
        event_rows!(@sort [$($row)* pub $field: Cow<'a, str>,] [$($envelope)*] $($rest)*);
    };
    (@sort [$($row:tt)*] [$($envelope:tt)*] $field:ident: fixed_category, $($rest:tt)*) => {
        event_rows!(@sort [$($row)* pub $field: &'static str,] [$($envelope)*] $($rest)*);
    };
    (@sort [$($row:tt)*] [$($envelope:tt)*] $field:ident: text_or_null, $($rest:tt)*) => {
        event_rows!(@sort [$($row)* pub $field: Option<Cow<'a, str>>,] [$($envelope)*] $($rest)*);
    };
    (@sort [$($row:tt)*] [$($envelope:tt)*] $field:ident: json_or_null, $($rest:tt)*) => {
        event_rows!(@sort [$($row)* pub $field: Option<Cow<'a, str>>,] [$($envelope)*] $($rest)*);
    };
    // Filled in as the chunk finishes, not per row.
    (@sort [$($row:tt)*] [$($envelope:tt)*] $field:ident: $derived:ident, $($rest:tt)*) => {
        event_rows!(@sort [$($row)*] [$($envelope)*] $($rest)*);
    };
}

schema::events_columns!(event_rows);

fn text_column((values, bytes): (usize, usize)) -> TextColumn {
    TextColumn::with_capacity(values, bytes)
}

fn push_some(column: &mut TextColumn, row: u32, value: &Option<Cow<'_, str>>) {
    if let Some(value) = value {
        column.push(row, value);
    }
}

/// Expected text bytes per row of a column, to size a worker's first chunk.
fn text_bytes_per_row(column: &str) -> usize {
    match column {
        "payload" => 160,
        "id" | "session_id" | "conversation_id" | "task_id" | "correlation_id" | "causation_id" => {
            24
        }
        "spec_version" | "aep_version" | "topic" => 4,
        _ => 0,
    }
}

/// Rows, and the values and text bytes of each text column, per input byte
/// of the last chunk a worker parsed. The next chunk's buffers are sized from it, so
/// they are neither grown nor shrunk by copying: every fresh page costs a
/// kernel page clear, which profiles showed as a large share of ingest.
#[derive(Clone, Debug)]
pub struct ChunkShape {
    rows: f64,
    /// Indexed by column (0 for columns that hold no text).
    values: [f64; COLUMNS],
    text: [f64; COLUMNS],
}

/// Chunks smaller than this (a file's tail) say little about the next one.
const MEASURED_CHUNK_BYTES: usize = 256 << 10;

impl Default for ChunkShape {
    fn default() -> Self {
        const LINE_BYTES: f64 = 400.0;
        ChunkShape {
            rows: 1.0 / LINE_BYTES,
            values: COLUMN_NAMES.map(|c| {
                if text_bytes_per_row(c) > 0 {
                    1.0 / LINE_BYTES
                } else {
                    0.0
                }
            }),
            text: COLUMN_NAMES.map(|c| text_bytes_per_row(c) as f64 / LINE_BYTES),
        }
    }
}

impl EventBuilders {
    /// Builders for `capacity` rows; text buffers grow as rows come.
    pub fn new(src_file: Arc<str>, capacity: usize) -> Self {
        Self::with_capacities(src_file, capacity.max(16), |_| (0, 0), 0)
    }

    /// Builders for a chunk of `input_bytes`, sized as the last one was.
    pub fn for_chunk(src_file: Arc<str>, input_bytes: usize, shape: &ChunkShape) -> Self {
        // A little headroom: a buffer that must grow is copied whole.
        let scaled = |per_byte: f64| (per_byte * input_bytes as f64 * 1.05) as usize;
        let rows = scaled(shape.rows) + 16;
        let text = |i: usize| (scaled(shape.values[i]), scaled(shape.text[i]));
        Self::with_capacities(src_file, rows, text, input_bytes)
    }

    /// What this chunk held per input byte, to size the next one by.
    pub fn shape(&self) -> Option<ChunkShape> {
        let bytes = self.input_bytes as f64;
        if self.input_bytes < MEASURED_CHUNK_BYTES {
            return None;
        }
        let text = self.text_shape();
        Some(ChunkShape {
            rows: self.rows as f64 / bytes,
            values: text.map(|(values, _)| values as f64 / bytes),
            text: text.map(|(_, text_bytes)| text_bytes as f64 / bytes),
        })
    }

    pub fn len(&self) -> usize {
        self.rows
    }

    pub fn is_empty(&self) -> bool {
        self.rows == 0
    }

    /// Finish into a batch with the columns in `schema::EVENTS` order.
    pub fn finish(self) -> RecordBatch {
        self.finish_keeping(None)
    }
}

/// [`share_empty`] over a whole batch.
pub fn share_empty_columns(batch: RecordBatch) -> RecordBatch {
    let (schema, columns, n) = (batch.schema(), batch.columns().to_vec(), batch.num_rows());
    drop(batch);
    RecordBatch::try_new(schema, share_empty(n, columns)).expect("same types as before")
}

/// Columns without a single value among `n` rows all point at one zeroed
/// buffer instead of each holding offsets, values and validity of its own.
/// Most events columns are empty in most chunks, and their buffers were a
/// fifth of the table's memory.
fn share_empty(n: usize, columns: Vec<ArrayRef>) -> Vec<ArrayRef> {
    let empty = |c: &ArrayRef| c.null_count() == n && c.data_type() != &DataType::Null;
    if n == 0 || !columns.iter().any(empty) {
        return columns;
    }
    let zeros = zeros_for(n);
    columns
        .into_iter()
        .map(|c| {
            if !empty(&c) {
                return c;
            }
            all_null(c.data_type(), n, &zeros).unwrap_or(c)
        })
        .collect()
}

/// One zeroed buffer long enough for [`all_null`] arrays of `n` rows:
/// 8-byte values, n + 1 offsets or a validity bitmap.
pub fn zeros_for(n: usize) -> Buffer {
    MutableBuffer::from_len_zeroed(8 * (n + 1)).into()
}

/// An array of `n` nulls over the shared `zeros` (from [`zeros_for`]), for
/// text, categories, booleans and primitives up to 8 bytes wide; None for
/// other types.
pub fn all_null(data_type: &DataType, n: usize, zeros: &Buffer) -> Option<ArrayRef> {
    if zeros.len() < 8 * (n + 1) {
        return None;
    }
    let data = ArrayData::builder(data_type.clone())
        .len(n)
        .null_bit_buffer(Some(zeros.clone()));
    let data = match data_type {
        DataType::Utf8 => data
            .add_buffer(zeros.clone())
            .add_buffer(MutableBuffer::new(0).into()),
        DataType::Boolean => data.add_buffer(zeros.clone()),
        // Every code null: no value is needed.
        DataType::Dictionary(key, value)
            if **key == DataType::Int32 && **value == DataType::Utf8 =>
        {
            data.add_buffer(zeros.clone())
                .add_child_data(StringArray::new_null(0).into_data())
        }
        t if t.primitive_width().is_some_and(|w| w <= 8) => data.add_buffer(zeros.clone()),
        _ => return None,
    };
    // SAFETY: zeroed validity marks every row null, zeroed offsets make
    // every string empty, and the buffer (checked above) is long enough for
    // n + 1 offsets or n values (or codes) of up to 8 bytes: a valid
    // all-null array of these types. (Checking it was 3% of ingest.)
    Some(make_array(unsafe { data.build_unchecked() }))
}

/// A chunk's event rows, as they reach the dedup.
pub enum ChunkRows {
    /// Parsed from NDJSON and not laid out yet: only the rows the dedup
    /// keeps are, so a chunk is not copied to drop its redeliveries.
    Building(Box<EventBuilders>),
    /// Read as a batch (Parquet).
    Built(RecordBatch),
    /// None (left behind once handed to the dedup).
    Taken,
}

impl ChunkRows {
    pub fn len(&self) -> usize {
        match self {
            ChunkRows::Building(b) => b.len(),
            ChunkRows::Built(b) => b.num_rows(),
            ChunkRows::Taken => 0,
        }
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The rows marked in `keep`, `kept` of them.
    pub fn keep(self, keep: Vec<bool>, kept: usize) -> RecordBatch {
        match self {
            ChunkRows::Building(b) => b.finish_keeping(Some(&keep)),
            ChunkRows::Built(b) if kept == b.num_rows() => b,
            ChunkRows::Built(b) => drop_rows(b, keep, kept),
            ChunkRows::Taken => RecordBatch::new_empty(EVENTS.clone()),
        }
    }

    /// Laid out as `EVENTS` (rows of one such chunk can join another's).
    pub fn is_events_layout(&self) -> bool {
        match self {
            ChunkRows::Building(_) | ChunkRows::Taken => true,
            ChunkRows::Built(b) => b.schema().fields() == EVENTS.fields(),
        }
    }

    /// Every row, laid out.
    pub fn finish(self) -> RecordBatch {
        match self {
            ChunkRows::Building(b) => b.finish(),
            ChunkRows::Built(b) => b,
            ChunkRows::Taken => RecordBatch::new_empty(EVENTS.clone()),
        }
    }
}

/// The rows of `events` marked in `keep` (`kept` of them). Columns empty in
/// every row (most of them, sharing one zeroed buffer) are cut to length
/// rather than copied: filtering them was half of this step.
pub fn drop_rows(events: RecordBatch, keep: Vec<bool>, kept: usize) -> RecordBatch {
    let predicate = FilterBuilder::new(&BooleanArray::from(keep))
        .optimize()
        .build();
    let columns = events
        .columns()
        .iter()
        .map(|c| {
            if c.null_count() == c.len() {
                c.slice(0, kept)
            } else {
                predicate.filter(c).expect("mask matches the batch")
            }
        })
        .collect();
    let kept_batch =
        RecordBatch::try_new(events.schema(), columns).expect("same columns as before");
    drop(events);
    // A column whose only values were in dropped rows is empty now.
    share_empty_columns(kept_batch)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_empty_chunk_finishes_with_the_events_schema() {
        let b = EventBuilders::new("x".into(), 0);
        let batch = b.finish();
        assert_eq!(batch.num_rows(), 0);
        assert_eq!(batch.schema(), EVENTS.clone());
    }

    #[test]
    fn empty_columns_share_one_buffer_and_keep_their_values() {
        let mut b = EventBuilders::new("x".into(), 4);
        for seq in 0..3 {
            let row = EventRow {
                seq,
                id: format!("e{seq}").into(),
                dialect: "0.2",
                ..EventRow::default()
            };
            b.push(&row);
        }
        let batch = b.finish();
        let col = |name: &str| batch.column(batch.schema().index_of(name).unwrap()).clone();
        // Empty text and instant columns: all null, same buffer.
        let (topic, expires) = (col("topic"), col("expires_at"));
        assert_eq!(topic.null_count(), 3);
        assert_eq!(expires.null_count(), 3);
        assert_eq!(
            topic.to_data().nulls().unwrap().buffer().as_ptr(),
            expires.to_data().nulls().unwrap().buffer().as_ptr()
        );
        // Filled columns keep their own values.
        let ids = col("id");
        let ids = ids.as_any().downcast_ref::<StringArray>().unwrap();
        assert_eq!(ids.iter().flatten().collect::<Vec<_>>(), ["e0", "e1", "e2"]);
        // A shared column behaves like any other under Arrow kernels.
        let taken = datafusion::arrow::compute::take(
            &topic,
            &datafusion::arrow::array::UInt32Array::from(vec![2, 0]),
            None,
        )
        .unwrap();
        assert_eq!(taken.null_count(), 2);
        // Built without checks: every column must still pass Arrow's full
        // validation.
        for column in batch.columns() {
            column.to_data().validate_full().unwrap();
        }
    }
}
