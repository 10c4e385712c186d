//! One normalized event row and the Arrow builders that collect rows into
//! `events` record batches (columns in the order of `schema::EVENTS`).

use super::category_column::CategoryColumn;
use super::number_column::NumberColumn;
use super::schema::{EVENTS, events_col};
use super::text_column::{DROPPED, TextColumn};
use datafusion::arrow::array::{
    Array, ArrayData, ArrayRef, AsArray, BooleanArray, BooleanBuilder, DictionaryArray, Int32Array,
    Int64Array, StringArray, TimestampMicrosecondArray, make_array,
};
use datafusion::arrow::buffer::{Buffer, MutableBuffer, ScalarBuffer};
use datafusion::arrow::compute::FilterBuilder;
use datafusion::arrow::datatypes::{
    DataType, Float64Type, Int32Type, Int64Type, TimestampMicrosecondType,
};
use datafusion::arrow::record_batch::RecordBatch;
use std::borrow::Cow;
use std::sync::Arc;

/// A normalized event, borrowing from the line it was parsed from.
#[derive(Debug, Default)]
pub struct Row<'a> {
    pub seq: i64,
    pub src_line: i64,
    pub dialect: &'static str,
    pub spec_version: Option<Cow<'a, str>>,
    pub aep_version: Option<Cow<'a, str>>,
    pub id: Cow<'a, str>,
    pub type_: Cow<'a, str>,
    pub source: Cow<'a, str>,
    pub target: Option<Cow<'a, str>>,
    pub topic: Option<Cow<'a, str>>,
    pub session_id: Option<Cow<'a, str>>,
    pub conversation_id: Option<Cow<'a, str>>,
    pub task_id: Option<Cow<'a, str>>,
    pub parent_task_id: Option<Cow<'a, str>>,
    pub env_parent_task_id: Option<Cow<'a, str>>,
    pub correlation_id: Option<Cow<'a, str>>,
    pub causation_id: Option<Cow<'a, str>>,
    pub created_us: i64,
    pub expires_us: Option<i64>,
    pub delivery_mode: Option<Cow<'a, str>>,
    pub delivery_sequence: Option<i64>,
    pub delivery_cursor: Option<Cow<'a, str>>,
    pub payload_schema: Option<Cow<'a, str>>,
    pub belief_status: Option<Cow<'a, str>>,
    pub belief_scope: Option<Cow<'a, str>>,
    pub confidence: Option<f64>,
    pub valid_from_us: Option<i64>,
    pub valid_until_us: Option<i64>,
    pub stale_after: Option<Cow<'a, str>>,
    pub stale_after_ms: Option<i64>,
    pub stale_at_us: Option<i64>,
    pub refresh_hint: Option<Cow<'a, str>>,
    pub delegated_by: Option<Cow<'a, str>>,
    pub delegated_to: Option<Cow<'a, str>>,
    pub handoff_token: Option<Cow<'a, str>>,
    pub checkpoint_id: Option<Cow<'a, str>>,
    pub checkpoint_at_us: Option<i64>,
    pub interruption_policy: Option<Cow<'a, str>>,
    pub compensation_id: Option<Cow<'a, str>>,
    pub source_trust: Option<Cow<'a, str>>,
    pub attestation_count: Option<f64>,
    pub data_provenance: Option<Cow<'a, str>>,
    pub evidence_len: Option<i32>,
    pub token_structured: Option<bool>,
    pub token_error: Option<String>,
    pub token: Option<super::token::Claims>,
    pub p_task_id: Option<Cow<'a, str>>,
    pub p_parent_task_id: Option<Cow<'a, str>>,
    pub grace_period_ms: Option<i64>,
    pub error_code: Option<Cow<'a, str>>,
    pub fact_id: Option<Cow<'a, str>>,
    pub original_event_id: Option<Cow<'a, str>>,
    pub p_checkpoint_id: Option<Cow<'a, str>>,
    pub filter_types: Option<Cow<'a, str>>,
    pub filter_source: Option<Cow<'a, str>>,
    pub filter_target: Option<Cow<'a, str>>,
    pub filter_topic: Option<Cow<'a, str>>,
    pub payload_error: Option<String>,
    pub payload: Cow<'a, str>,
    pub delivery: Option<Cow<'a, str>>,
    pub evidence_chain: Option<Cow<'a, str>>,
    pub extra: Option<String>,
}

/// Column builders for `events`; one per worker chunk. Columns are grouped
/// by type; the `*_COLS` lists give each group's schema order (finishing
/// looks every `schema::EVENTS` column up by name among them).
pub struct EventBuilders {
    src_file: Arc<str>,
    /// `seq` and `src_line`, in every row.
    lines: [Vec<i64>; 2],
    /// `created_at` (and `created_us`, which shares its values).
    created_us: Vec<i64>,
    ints: [NumberColumn<Int64Type>; INT_COLS.len()],
    times: [NumberColumn<TimestampMicrosecondType>; TIME_COLS.len()],
    floats: [NumberColumn<Float64Type>; FLOAT_COLS.len()],
    evidence_len: NumberColumn<Int32Type>,
    strs: Vec<TextColumn>,
    categories: [CategoryColumn; CATEGORY_COLS.len()],
    extra: TextColumn,
    token_structured: BooleanBuilder,
    rows: usize,
    /// Size of the text the rows come from (0 when not known).
    input_bytes: usize,
}

const LINE_COLS: [&str; 2] = ["seq", "src_line"];
/// Numeric columns empty in most rows, collected sparsely.
const INT_COLS: [&str; 3] = ["delivery_sequence", "stale_after_ms", "grace_period_ms"];
const TIME_COLS: [&str; 7] = [
    "expires_at",
    "valid_from",
    "valid_until",
    "stale_at",
    "checkpoint_at",
    "token_iat",
    "token_exp",
];
const FLOAT_COLS: [&str; 2] = ["confidence", "attestation_count"];
const STR_COLS: [&str; 46] = [
    "spec_version",
    "aep_version",
    "id",
    "topic",
    "session_id",
    "conversation_id",
    "task_id",
    "parent_task_id",
    "env_parent_task_id",
    "correlation_id",
    "causation_id",
    "delivery_mode",
    "delivery_cursor",
    "payload_schema",
    "belief_status",
    "belief_scope",
    "stale_after",
    "refresh_hint",
    "delegated_by",
    "delegated_to",
    "handoff_token",
    "checkpoint_id",
    "interruption_policy",
    "compensation_id",
    "source_trust",
    "data_provenance",
    "token_error",
    "token_iss",
    "token_sub",
    "token_task_id",
    "token_parent_task_id",
    "token_jti",
    "p_task_id",
    "p_parent_task_id",
    "error_code",
    "fact_id",
    "original_event_id",
    "p_checkpoint_id",
    "filter_types",
    "filter_source",
    "filter_target",
    "filter_topic",
    "payload_error",
    "payload",
    "delivery",
    "evidence_chain",
];

/// Text columns with few distinct values, collected as categories.
const CATEGORY_COLS: [&str; 4] = ["dialect", "type", "source", "target"];

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
    values: [f64; STR_COLS.len()],
    text: [f64; STR_COLS.len()],
}

/// Chunks smaller than this (a file's tail) say little about the next one.
const MEASURED_CHUNK_BYTES: usize = 256 << 10;

impl Default for ChunkShape {
    fn default() -> Self {
        const LINE_BYTES: f64 = 400.0;
        ChunkShape {
            rows: 1.0 / LINE_BYTES,
            values: STR_COLS.map(|c| {
                if text_bytes_per_row(c) > 0 {
                    1.0 / LINE_BYTES
                } else {
                    0.0
                }
            }),
            text: STR_COLS.map(|c| text_bytes_per_row(c) as f64 / LINE_BYTES),
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

    fn with_capacities(
        src_file: Arc<str>,
        cap: usize,
        text: impl Fn(usize) -> (usize, usize),
        input_bytes: usize,
    ) -> Self {
        EventBuilders {
            src_file,
            lines: [Vec::with_capacity(cap), Vec::with_capacity(cap)],
            created_us: Vec::with_capacity(cap),
            ints: Default::default(),
            times: Default::default(),
            floats: Default::default(),
            evidence_len: NumberColumn::default(),
            strs: (0..STR_COLS.len())
                .map(|i| {
                    let (values, bytes) = text(i);
                    TextColumn::with_capacity(values, bytes)
                })
                .collect(),
            categories: Default::default(),
            extra: TextColumn::default(),
            token_structured: BooleanBuilder::with_capacity(cap),
            rows: 0,
            input_bytes,
        }
    }

    /// What this chunk held per input byte, to size the next one by.
    pub fn shape(&self) -> Option<ChunkShape> {
        let bytes = self.input_bytes as f64;
        (self.input_bytes >= MEASURED_CHUNK_BYTES).then(|| ChunkShape {
            rows: self.rows as f64 / bytes,
            values: std::array::from_fn(|i| self.strs[i].values() as f64 / bytes),
            text: std::array::from_fn(|i| self.strs[i].text_bytes() as f64 / bytes),
        })
    }

    pub fn len(&self) -> usize {
        self.rows
    }

    pub fn is_empty(&self) -> bool {
        self.rows == 0
    }

    pub fn push(&mut self, r: &Row<'_>) {
        let row = u32::try_from(self.rows).expect("a chunk has fewer than 2^32 rows");
        let c = r.token.as_ref();
        self.lines[0].push(r.seq);
        self.lines[1].push(r.src_line);
        self.created_us.push(r.created_us);
        let ints = [r.delivery_sequence, r.stale_after_ms, r.grace_period_ms];
        for (column, value) in self.ints.iter_mut().zip(ints) {
            column.push(row, value);
        }
        let times = [
            r.expires_us,
            r.valid_from_us,
            r.valid_until_us,
            r.stale_at_us,
            r.checkpoint_at_us,
            c.and_then(|c| c.iat_us),
            c.and_then(|c| c.exp_us),
        ];
        for (column, value) in self.times.iter_mut().zip(times) {
            column.push(row, value);
        }
        self.floats[0].push(row, r.confidence);
        self.floats[1].push(row, r.attestation_count);
        self.evidence_len.push(row, r.evidence_len);
        self.token_structured.append_option(r.token_structured);
        let categories = [
            Some(r.dialect),
            Some(&*r.type_),
            Some(&*r.source),
            r.target.as_deref(),
        ];
        for (column, value) in self.categories.iter_mut().zip(categories) {
            if let Some(value) = value {
                column.push(row, value);
            }
        }
        let strs: [Option<&str>; STR_COLS.len()] = [
            r.spec_version.as_deref(),
            r.aep_version.as_deref(),
            Some(&*r.id),
            r.topic.as_deref(),
            r.session_id.as_deref(),
            r.conversation_id.as_deref(),
            r.task_id.as_deref(),
            r.parent_task_id.as_deref(),
            r.env_parent_task_id.as_deref(),
            r.correlation_id.as_deref(),
            r.causation_id.as_deref(),
            r.delivery_mode.as_deref(),
            r.delivery_cursor.as_deref(),
            r.payload_schema.as_deref(),
            r.belief_status.as_deref(),
            r.belief_scope.as_deref(),
            r.stale_after.as_deref(),
            r.refresh_hint.as_deref(),
            r.delegated_by.as_deref(),
            r.delegated_to.as_deref(),
            r.handoff_token.as_deref(),
            r.checkpoint_id.as_deref(),
            r.interruption_policy.as_deref(),
            r.compensation_id.as_deref(),
            r.source_trust.as_deref(),
            r.data_provenance.as_deref(),
            r.token_error.as_deref(),
            c.and_then(|c| c.iss.as_deref()),
            c.and_then(|c| c.sub.as_deref()),
            c.and_then(|c| c.task_id.as_deref()),
            c.and_then(|c| c.parent_task_id.as_deref()),
            c.and_then(|c| c.jti.as_deref()),
            r.p_task_id.as_deref(),
            r.p_parent_task_id.as_deref(),
            r.error_code.as_deref(),
            r.fact_id.as_deref(),
            r.original_event_id.as_deref(),
            r.p_checkpoint_id.as_deref(),
            r.filter_types.as_deref(),
            r.filter_source.as_deref(),
            r.filter_target.as_deref(),
            r.filter_topic.as_deref(),
            r.payload_error.as_deref(),
            Some(&*r.payload),
            r.delivery.as_deref(),
            r.evidence_chain.as_deref(),
        ];
        for (column, value) in self.strs.iter_mut().zip(strs) {
            if let Some(value) = value {
                column.push(row, value);
            }
        }
        if let Some(extra) = &r.extra {
            self.extra.push(row, extra);
        }
        self.rows += 1;
    }

    /// Finish into a batch with the columns in `schema::EVENTS` order.
    pub fn finish(self) -> RecordBatch {
        self.finish_keeping(None)
    }

    /// Finish with only the rows marked in `keep` (all when None). Text,
    /// most of a batch, is compacted in place rather than copied.
    pub fn finish_keeping(mut self, keep: Option<&[bool]>) -> RecordBatch {
        let keep = keep.filter(|keep| keep.contains(&false));
        let mut n = self.rows;
        let mut filter = None;
        if let Some(keep) = keep {
            let mut renumber = Vec::with_capacity(keep.len());
            n = 0;
            for &k in keep {
                renumber.push(if k { n as u32 } else { DROPPED });
                n += k as usize;
            }
            for column in self.strs.iter_mut().chain([&mut self.extra]) {
                column.retain(&renumber);
            }
            self.categories.iter_mut().for_each(|c| c.retain(&renumber));
            self.ints.iter_mut().for_each(|c| c.retain(&renumber));
            self.times.iter_mut().for_each(|c| c.retain(&renumber));
            self.floats.iter_mut().for_each(|c| c.retain(&renumber));
            self.evidence_len.retain(&renumber);
            filter = Some(FilterBuilder::new(&BooleanArray::from(keep.to_vec())).build());
        }
        let kept = |array: ArrayRef| -> ArrayRef {
            match &filter {
                Some(f) => f.filter(&array).expect("keep mask matches the rows"),
                None => array,
            }
        };
        // Sparse columns were renumbered above; the kept rows are 0..n. Every
        // empty column of the batch lays out over this one buffer.
        let zeros = zeros_for(n);
        let type_of = |name: &str| EVENTS.field(events_col(name)).data_type().clone();
        let sparse = |name: &str, array: Option<ArrayRef>| -> ArrayRef {
            let data_type = type_of(name);
            array
                .or_else(|| all_null(&data_type, n, &zeros))
                .expect("numeric columns have an all-null layout")
        };
        let mut named: Vec<(&str, ArrayRef)> = Vec::with_capacity(EVENTS.fields().len());
        for (name, values) in LINE_COLS.iter().zip(std::mem::take(&mut self.lines)) {
            named.push((name, kept(Arc::new(Int64Array::from(values)))));
        }
        let created_us = kept(Arc::new(Int64Array::from(std::mem::take(
            &mut self.created_us,
        ))));
        let created_us = created_us.as_primitive::<Int64Type>().values().clone();
        named.push((
            "created_at",
            Arc::new(TimestampMicrosecondArray::new(created_us.clone(), None).with_timezone("UTC")),
        ));
        named.push(("created_us", Arc::new(Int64Array::new(created_us, None))));
        // Counted when redeliveries are collapsed; numbered versions too.
        named.push((
            "redeliveries",
            Arc::new(Int64Array::new(
                ScalarBuffer::new(zeros.clone(), 0, n),
                None,
            )),
        ));
        named.push(("version", Arc::new(Int32Array::from_value(1, n))));
        for (name, column) in INT_COLS.iter().zip(std::mem::take(&mut self.ints)) {
            named.push((name, sparse(name, column.finish(n, &type_of(name)))));
        }
        for (name, column) in TIME_COLS.iter().zip(std::mem::take(&mut self.times)) {
            named.push((name, sparse(name, column.finish(n, &type_of(name)))));
        }
        for (name, column) in FLOAT_COLS.iter().zip(std::mem::take(&mut self.floats)) {
            named.push((name, sparse(name, column.finish(n, &type_of(name)))));
        }
        let evidence_len = std::mem::take(&mut self.evidence_len);
        let evidence_len = evidence_len.finish(n, &type_of("evidence_len"));
        named.push(("evidence_len", sparse("evidence_len", evidence_len)));
        for (name, column) in STR_COLS.iter().zip(std::mem::take(&mut self.strs)) {
            named.push((name, column.finish(n)));
        }
        for (name, column) in CATEGORY_COLS
            .iter()
            .zip(std::mem::take(&mut self.categories))
        {
            named.push((name, column.finish(n)));
        }
        named.push(("extra", std::mem::take(&mut self.extra).finish(n)));
        named.push((
            "token_structured",
            kept(Arc::new(self.token_structured.finish())),
        ));
        // One file per chunk: every code is 0, over the shared zeros.
        let file = Int32Array::new(ScalarBuffer::new(zeros.clone(), 0, n), None);
        let file = DictionaryArray::<Int32Type>::try_new(
            file,
            Arc::new(StringArray::from(vec![&*self.src_file])),
        )
        .expect("code 0 has a value");
        named.push(("src_file", Arc::new(file)));
        let columns = EVENTS
            .fields()
            .iter()
            .map(|f| {
                let at = named.iter().position(|(name, _)| *name == f.name());
                named[at.expect("every events column has a builder")]
                    .1
                    .clone()
            })
            .collect();
        drop(named);
        let mut columns = share_empty(n, columns);
        // Builders grow by doubling and keep that capacity; the whole log's
        // chunks are held until redeliveries are collapsed, so give it back.
        for array in columns.iter_mut() {
            Array::shrink_to_fit(array);
        }
        RecordBatch::try_new(EVENTS.clone(), columns).expect("builders match the events schema")
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
            let row = Row {
                seq,
                id: format!("e{seq}").into(),
                dialect: "0.2",
                ..Row::default()
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
