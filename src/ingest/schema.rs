//! The explicit Arrow schemas of the normalized tables. Nothing is inferred
//! from data: every column has one type, whatever the input looks like.

use datafusion::arrow::datatypes::{DataType, Field, Schema, SchemaRef, TimeUnit};
use std::sync::{Arc, LazyLock};

/// Version of the normalized layout, stored in Parquet metadata by `convert`
/// so that reading it back can trust the columns as they are. Layout 2
/// dictionary-encodes the columns with few distinct values.
pub const LAYOUT_VERSION: &str = "2";
/// Layout 1 held those columns as plain text; its files are still read.
pub const LAYOUT_V1: &str = "1";
pub const LAYOUT_KEY: &str = "hvaudit.layout";

/// Text with few distinct values (a file, a type, an agent), held as codes
/// into the distinct values: a number per row instead of a string, in
/// memory and in every comparison, hash and copy.
pub fn category_type() -> DataType {
    DataType::Dictionary(Box::new(DataType::Int32), Box::new(DataType::Utf8))
}

fn category(name: &str, nullable: bool) -> Field {
    Field::new(name, category_type(), nullable)
}

fn ts() -> DataType {
    // Microseconds: nanoseconds cannot hold years 0001 or 9999.
    DataType::Timestamp(TimeUnit::Microsecond, Some("UTC".into()))
}

fn s(name: &str) -> Field {
    Field::new(name, DataType::Utf8, true)
}

/// Columns of `events`, in order. The tuple is (name, type, nullable).
pub static EVENTS: LazyLock<SchemaRef> = LazyLock::new(|| {
    Arc::new(Schema::new(vec![
        // provenance and order
        Field::new("seq", DataType::Int64, false),
        category("src_file", false),
        Field::new("src_line", DataType::Int64, false),
        Field::new("redeliveries", DataType::Int64, false),
        // 1 for the earliest content under an id (created_at, then input
        // order), 2.. for the other, different contents
        Field::new("version", DataType::Int32, false),
        // envelope
        category("dialect", false),
        s("spec_version"),
        s("aep_version"),
        Field::new("id", DataType::Utf8, false),
        category("type", false),
        category("source", false),
        category("target", true),
        s("topic"),
        s("session_id"),
        s("conversation_id"),
        s("task_id"),
        // resolved parent link: envelope, else payload.parent_task_id
        s("parent_task_id"),
        s("env_parent_task_id"),
        s("correlation_id"),
        s("causation_id"),
        Field::new("created_at", ts(), false),
        Field::new("created_us", DataType::Int64, false),
        Field::new("expires_at", ts(), true),
        s("delivery_mode"),
        Field::new("delivery_sequence", DataType::Int64, true),
        s("delivery_cursor"),
        s("payload_schema"),
        // runtime semantics
        s("belief_status"),
        s("belief_scope"),
        Field::new("confidence", DataType::Float64, true),
        Field::new("valid_from", ts(), true),
        Field::new("valid_until", ts(), true),
        s("stale_after"),
        Field::new("stale_after_ms", DataType::Int64, true),
        // min(valid_until, created_at + stale_after)
        Field::new("stale_at", ts(), true),
        s("refresh_hint"),
        s("delegated_by"),
        s("delegated_to"),
        s("handoff_token"),
        s("checkpoint_id"),
        Field::new("checkpoint_at", ts(), true),
        s("interruption_policy"),
        s("compensation_id"),
        s("source_trust"),
        Field::new("attestation_count", DataType::Float64, true),
        s("data_provenance"),
        Field::new("evidence_len", DataType::Int32, true),
        // decoded handoff-token claims (only under --token-format structured)
        Field::new("token_structured", DataType::Boolean, true),
        s("token_error"),
        s("token_iss"),
        s("token_sub"),
        s("token_task_id"),
        s("token_parent_task_id"),
        Field::new("token_iat", ts(), true),
        Field::new("token_exp", ts(), true),
        s("token_jti"),
        // payload fields the rules need
        s("p_task_id"),
        s("p_parent_task_id"),
        Field::new("grace_period_ms", DataType::Int64, true),
        s("error_code"),
        s("fact_id"),
        s("original_event_id"),
        s("p_checkpoint_id"),
        // subscription filter fields as JSON text (payload.X or payload.filter.X)
        s("filter_types"),
        s("filter_source"),
        s("filter_target"),
        s("filter_topic"),
        // first payload-schema violation, when the type has a payload schema
        s("payload_error"),
        // raw JSON text
        s("payload"),
        s("delivery"),
        s("evidence_chain"),
        // unknown top-level fields as one JSON object (tenant_id, actor_id, ...)
        s("extra"),
    ]))
});

/// `events` as layout 1 wrote it: the category columns as plain text.
pub static EVENTS_V1: LazyLock<SchemaRef> = LazyLock::new(|| {
    let fields: Vec<Field> = EVENTS
        .fields()
        .iter()
        .map(|f| match f.data_type() {
            DataType::Dictionary(_, _) => f.as_ref().clone().with_data_type(DataType::Utf8),
            _ => f.as_ref().clone(),
        })
        .collect();
    Arc::new(Schema::new(fields))
});

/// `evidence`: evidence_chain exploded, one row per entry.
pub static EVIDENCE: LazyLock<SchemaRef> = LazyLock::new(|| {
    Arc::new(Schema::new(vec![
        Field::new("event_seq", DataType::Int64, false),
        Field::new("event_id", DataType::Utf8, false),
        Field::new("pos", DataType::Int32, false),
        s("source"),
        Field::new("ref_id", DataType::Utf8, false),
    ]))
});

/// `bad_lines`: every rejected line with where and why.
pub static BAD_LINES: LazyLock<SchemaRef> = LazyLock::new(|| {
    Arc::new(Schema::new(vec![
        Field::new("seq", DataType::Int64, false),
        Field::new("src_file", DataType::Utf8, false),
        Field::new("src_line", DataType::Int64, false),
        Field::new("reason", DataType::Utf8, false),
        Field::new("excerpt", DataType::Utf8, false),
        // the id, when the line was an object with a string id
        s("id"),
        s("type"),
    ]))
});

/// Index of a column of `events` by name (panics only on a typo in our code).
pub fn events_col(name: &str) -> usize {
    EVENTS
        .index_of(name)
        .unwrap_or_else(|_| panic!("no events column {name}"))
}
