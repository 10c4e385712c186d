//! One normalized event row and the Arrow builders that collect rows into
//! `events` record batches (columns in the order of `schema::EVENTS`).

use super::schema::EVENTS;
use datafusion::arrow::array::{
    Array, ArrayRef, BooleanBuilder, Float64Builder, Int32Builder, Int64Builder, StringArray,
    StringBuilder, TimestampMicrosecondBuilder,
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
/// by type; the `*_COLS` lists give each group's schema order (a unit test
/// checks them against `schema::EVENTS`).
pub struct EventBuilders {
    src_file: Arc<str>,
    ints: Vec<Int64Builder>,
    strs: Vec<StringBuilder>,
    extra: StringBuilder,
    times: Vec<TimestampMicrosecondBuilder>,
    floats: Vec<Float64Builder>,
    version: Int32Builder,
    evidence_len: Int32Builder,
    token_structured: BooleanBuilder,
    rows: usize,
}

const INT_COLS: [&str; 7] = [
    "seq",
    "src_line",
    "redeliveries",
    "created_us",
    "delivery_sequence",
    "stale_after_ms",
    "grace_period_ms",
];
const TIME_COLS: [&str; 8] = [
    "created_at",
    "expires_at",
    "valid_from",
    "valid_until",
    "stale_at",
    "checkpoint_at",
    "token_iat",
    "token_exp",
];
const FLOAT_COLS: [&str; 2] = ["confidence", "attestation_count"];
const STR_COLS: [&str; 50] = [
    "dialect",
    "spec_version",
    "aep_version",
    "id",
    "type",
    "source",
    "target",
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

/// Expected text bytes per row of a column, to size its buffer once: Arrow
/// keeps a finished buffer's whole capacity, so sparse columns get none.
fn text_bytes_per_row(column: &str) -> usize {
    match column {
        "payload" => 160,
        "id" | "type" | "source" | "target" | "session_id" | "conversation_id" | "task_id"
        | "correlation_id" | "causation_id" => 24,
        "dialect" | "spec_version" | "aep_version" | "topic" => 4,
        _ => 0,
    }
}

impl EventBuilders {
    pub fn new(src_file: Arc<str>, capacity: usize) -> Self {
        let cap = capacity.max(16);
        EventBuilders {
            src_file,
            ints: INT_COLS.map(|_| Int64Builder::with_capacity(cap)).into(),
            strs: STR_COLS
                .map(|name| StringBuilder::with_capacity(cap, cap * text_bytes_per_row(name)))
                .into(),
            extra: StringBuilder::new(),
            times: TIME_COLS
                .map(|_| TimestampMicrosecondBuilder::with_capacity(cap))
                .into(),
            floats: FLOAT_COLS
                .map(|_| Float64Builder::with_capacity(cap))
                .into(),
            version: Int32Builder::with_capacity(cap),
            evidence_len: Int32Builder::with_capacity(cap),
            token_structured: BooleanBuilder::with_capacity(cap),
            rows: 0,
        }
    }

    pub fn len(&self) -> usize {
        self.rows
    }

    pub fn is_empty(&self) -> bool {
        self.rows == 0
    }

    pub fn push(&mut self, r: &Row<'_>) {
        let c = r.token.as_ref();
        let ints = [
            Some(r.seq),
            Some(r.src_line),
            Some(0),
            Some(r.created_us),
            r.delivery_sequence,
            r.stale_after_ms,
            r.grace_period_ms,
        ];
        for (b, v) in self.ints.iter_mut().zip(ints) {
            b.append_option(v);
        }
        let times = [
            Some(r.created_us),
            r.expires_us,
            r.valid_from_us,
            r.valid_until_us,
            r.stale_at_us,
            r.checkpoint_at_us,
            c.and_then(|c| c.iat_us),
            c.and_then(|c| c.exp_us),
        ];
        for (b, v) in self.times.iter_mut().zip(times) {
            b.append_option(v);
        }
        self.floats[0].append_option(r.confidence);
        self.floats[1].append_option(r.attestation_count);
        self.version.append_value(1);
        self.evidence_len.append_option(r.evidence_len);
        self.token_structured.append_option(r.token_structured);
        let strs: [Option<&str>; 50] = [
            Some(r.dialect),
            r.spec_version.as_deref(),
            r.aep_version.as_deref(),
            Some(&*r.id),
            Some(&*r.type_),
            Some(&*r.source),
            r.target.as_deref(),
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
        for (b, v) in self.strs.iter_mut().zip(strs) {
            b.append_option(v);
        }
        self.extra.append_option(r.extra.as_deref());
        self.rows += 1;
    }

    /// Finish into a batch with the columns in `schema::EVENTS` order.
    pub fn finish(mut self) -> RecordBatch {
        let n = self.rows;
        let mut named: Vec<(&str, ArrayRef)> = Vec::with_capacity(EVENTS.fields().len());
        for (name, b) in INT_COLS.iter().zip(self.ints.iter_mut()) {
            named.push((name, Arc::new(b.finish())));
        }
        for (name, b) in TIME_COLS.iter().zip(self.times.iter_mut()) {
            named.push((name, Arc::new(b.finish().with_timezone("UTC"))));
        }
        for (name, b) in FLOAT_COLS.iter().zip(self.floats.iter_mut()) {
            named.push((name, Arc::new(b.finish())));
        }
        for (name, b) in STR_COLS.iter().zip(self.strs.iter_mut()) {
            named.push((name, Arc::new(b.finish())));
        }
        named.push(("extra", Arc::new(self.extra.finish())));
        named.push(("version", Arc::new(self.version.finish())));
        named.push(("evidence_len", Arc::new(self.evidence_len.finish())));
        named.push(("token_structured", Arc::new(self.token_structured.finish())));
        named.push((
            "src_file",
            Arc::new(StringArray::from_iter_values(std::iter::repeat_n(
                &*self.src_file,
                n,
            ))),
        ));
        // Builders grow by doubling and keep that capacity; the whole log's
        // chunks are held until redeliveries are collapsed, so give it back.
        for (_, array) in named.iter_mut() {
            Array::shrink_to_fit(array);
        }
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
        RecordBatch::try_new(EVENTS.clone(), columns).expect("builders match the events schema")
    }
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
}
