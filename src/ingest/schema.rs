//! The explicit Arrow schemas of the normalized tables. Nothing is inferred
//! from data: every column has one type, whatever the input looks like.

use datafusion::arrow::datatypes::{DataType, Field, Schema, SchemaRef, TimeUnit};
use std::sync::{Arc, LazyLock};

/// Version of the normalized layout, stored in Parquet metadata by `convert`
/// so that reading it back can trust the columns as they are. Layout 2
/// dictionary-encodes the columns with few distinct values; layout 3 adds
/// the instants to the nanosecond ([`NS_COLUMNS`]) and what an event's
/// identity needs (`as_written`, `digest`).
pub const LAYOUT_VERSION: &str = "3";
/// Layout 2 lacked those; its files are still read (their nanoseconds from
/// their microseconds, their digests from their columns).
pub const LAYOUT_V2: &str = "2";
/// Layout 1 also held the category columns as plain text; still read.
pub const LAYOUT_V1: &str = "1";
/// The `events` columns layout 3 added besides [`NS_COLUMNS`].
pub const ADDED_IN_LAYOUT_3: [&str; 2] = ["as_written", "digest"];
pub const LAYOUT_KEY: &str = "hvaudit.layout";

/// Text with few distinct values (a file, a type, an agent), held as codes
/// into the distinct values: a number per row instead of a string, in
/// memory and in every comparison, hash and copy.
pub fn category_type() -> DataType {
    DataType::Dictionary(Box::new(DataType::Int32), Box::new(DataType::Utf8))
}

/// An instant: microseconds in UTC (nanoseconds cannot hold years 0001
/// or 9999).
pub fn instant_type() -> DataType {
    DataType::Timestamp(TimeUnit::Microsecond, Some("UTC".into()))
}

fn s(name: &str) -> Field {
    Field::new(name, DataType::Utf8, true)
}

/// The columns of `events`, in order: the one place they are declared.
/// `$then!` is called with the list; [`events_schema`] makes the Arrow
/// schema of it and `row::event_rows` the row, the builders' slots, the
/// envelope members read as they are and the order the columns finish in.
/// Each entry is `row_field = "column": kind` (the column is the field's
/// name when not given); the kinds are listed at `column_kind`. Adding a
/// column is a line here and its parsing in `normalize`.
macro_rules! events_columns {
    ($then:ident) => {
        $then! {
            // provenance and order
            seq: int,
            src_file: file,
            src_line: int,
            // exact repeats collapsed into the row (counted by `dedup`)
            redeliveries: zeros,
            // 1 for the earliest content under an id (created_at, then
            // input order), 2.. for the other, different contents (`dedup`)
            version: ones,
            // envelope
            dialect: fixed_category,
            spec_version: envelope_text,
            aep_version: envelope_text,
            id: text,
            type_ = "type": category,
            source: category,
            target: envelope_category,
            topic: envelope_text,
            session_id: envelope_text,
            conversation_id: envelope_text,
            task_id: envelope_text,
            // resolved parent link: envelope, else payload.parent_task_id
            parent_task_id: text_or_null,
            env_parent_task_id: text_or_null,
            correlation_id: envelope_text,
            causation_id: envelope_text,
            created_at_us = "created_at": instant,
            created_us: micros_of(created_at_us),
            // to the nanosecond (NS_COLUMNS): the order of events, and the
            // instants the rules compare with it
            created_ns: int,
            stale_at_ns: int_or_null,
            token_iat_ns: int_or_null,
            token_exp_ns: int_or_null,
            expires_us = "expires_at": instant_or_null,
            delivery_mode: text_or_null,
            delivery_sequence: int_or_null,
            delivery_cursor: text_or_null,
            payload_schema: envelope_text,
            // runtime semantics
            belief_status: envelope_text,
            belief_scope: envelope_text,
            confidence: float_or_null,
            valid_from_us = "valid_from": instant_or_null,
            valid_until_us = "valid_until": instant_or_null,
            stale_after: envelope_text,
            stale_after_ms: int_or_null,
            // min(valid_until, created_at + stale_after)
            stale_at_us = "stale_at": instant_or_null,
            refresh_hint: envelope_text,
            delegated_by: envelope_text,
            delegated_to: envelope_text,
            handoff_token: envelope_text,
            checkpoint_id: envelope_text,
            checkpoint_at_us = "checkpoint_at": instant_or_null,
            interruption_policy: envelope_text,
            compensation_id: envelope_text,
            source_trust: envelope_text,
            attestation_count: float_or_null,
            data_provenance: envelope_text,
            evidence_len: int32_or_null,
            // decoded handoff-token claims (only under --token-format structured)
            token_structured: flag_or_null,
            token_error: text_or_null,
            token_iss: text_or_null,
            token_sub: text_or_null,
            token_task_id: text_or_null,
            token_parent_task_id: text_or_null,
            token_iat_us = "token_iat": instant_or_null,
            token_exp_us = "token_exp": instant_or_null,
            token_jti: text_or_null,
            // payload fields the rules need
            p_task_id: text_or_null,
            p_parent_task_id: text_or_null,
            grace_period_ms: int_or_null,
            error_code: text_or_null,
            fact_id: text_or_null,
            original_event_id: text_or_null,
            p_checkpoint_id: text_or_null,
            // subscription filter fields as JSON text (payload.X or payload.filter.X)
            filter_types: json_or_null,
            filter_source: json_or_null,
            filter_target: json_or_null,
            filter_topic: json_or_null,
            // first payload-schema violation, when the type has a payload schema
            payload_error: text_or_null,
            // raw JSON text
            payload: json_text,
            delivery: json_or_null,
            evidence_chain: json_or_null,
            // unknown top-level fields as one JSON object (tenant_id, actor_id, ...)
            extra: json_or_null,
            // the members whose typed column does not keep the value as
            // written (instants, numbers, members given as null), in
            // canonical JSON: with the columns above, the whole line
            as_written: json_or_null,
            // the line's JSON value, hashed (BLAKE3, 128 bits, of its
            // canonical text: `canonical`): what fingerprints are made of
            digest: digest,
        }
    };
}
pub(crate) use events_columns;

/// What a column kind of [`events_columns`] is in Arrow: `(data_type KIND)`
/// its type, `(nullable KIND)` whether it holds nulls, `(json KIND)`
/// whether it holds raw JSON text. (How rows fill it is
/// `row::event_rows`'.)
#[rustfmt::skip]
macro_rules! column_kind {
    (data_type int) => { ::datafusion::arrow::datatypes::DataType::Int64 };
    (data_type zeros) => { ::datafusion::arrow::datatypes::DataType::Int64 };
    (data_type micros_of) => { ::datafusion::arrow::datatypes::DataType::Int64 };
    (data_type int_or_null) => { ::datafusion::arrow::datatypes::DataType::Int64 };
    (data_type ones) => { ::datafusion::arrow::datatypes::DataType::Int32 };
    (data_type int32_or_null) => { ::datafusion::arrow::datatypes::DataType::Int32 };
    (data_type float_or_null) => { ::datafusion::arrow::datatypes::DataType::Float64 };
    (data_type flag_or_null) => { ::datafusion::arrow::datatypes::DataType::Boolean };
    (data_type instant) => { $crate::ingest::schema::instant_type() };
    (data_type instant_or_null) => { $crate::ingest::schema::instant_type() };
    (data_type text) => { ::datafusion::arrow::datatypes::DataType::Utf8 };
    (data_type json_text) => { ::datafusion::arrow::datatypes::DataType::Utf8 };
    (data_type text_or_null) => { ::datafusion::arrow::datatypes::DataType::Utf8 };
    (data_type json_or_null) => { ::datafusion::arrow::datatypes::DataType::Utf8 };
    (data_type envelope_text) => { ::datafusion::arrow::datatypes::DataType::Utf8 };
    (data_type file) => { $crate::ingest::schema::category_type() };
    (data_type fixed_category) => { $crate::ingest::schema::category_type() };
    (data_type category) => { $crate::ingest::schema::category_type() };
    (data_type envelope_category) => { $crate::ingest::schema::category_type() };
    (data_type digest) => { ::datafusion::arrow::datatypes::DataType::FixedSizeBinary(16) };

    (nullable int_or_null) => { true };
    (nullable int32_or_null) => { true };
    (nullable float_or_null) => { true };
    (nullable flag_or_null) => { true };
    (nullable instant_or_null) => { true };
    (nullable text_or_null) => { true };
    (nullable json_or_null) => { true };
    (nullable json_text) => { true };
    (nullable envelope_text) => { true };
    (nullable envelope_category) => { true };
    // Files of layouts 1 and 2, read in place, have none.
    (nullable digest) => { true };
    (nullable $kind:ident) => { false };

    (json json_text) => { true };
    (json json_or_null) => { true };
    (json $kind:ident) => { false };
}
pub(crate) use column_kind;

/// The column's name: the row field's, unless one is given.
macro_rules! column_name {
    ($field:ident) => {
        stringify!($field)
    };
    ($field:ident $column:literal) => {
        $column
    };
}
pub(crate) use column_name;

/// The Arrow schema of the [`events_columns`] list.
macro_rules! events_schema {
    ($($field:ident $(= $column:literal)?: $kind:ident $(($of:ident))?,)*) => {
        /// Columns of `events`, in order (declared by [`events_columns`]).
        pub static EVENTS: LazyLock<SchemaRef> = LazyLock::new(|| {
            Arc::new(Schema::new(vec![$(Field::new(
                column_name!($field $($column)?),
                column_kind!(data_type $kind),
                column_kind!(nullable $kind),
            )),*]))
        });
    };
}

events_columns!(events_schema);

/// The [`events_columns`] that hold raw JSON text.
macro_rules! events_json_columns {
    ($($field:ident $(= $column:literal)?: $kind:ident $(($of:ident))?,)*) => {
        /// Columns of `events` holding raw JSON text (compared as JSON
        /// values, not as text), declared by [`events_columns`].
        pub static JSON_COLUMNS: LazyLock<Vec<&'static str>> = LazyLock::new(|| {
            [$((column_name!($field $($column)?), column_kind!(json $kind))),*]
                .into_iter()
                .filter_map(|(name, json)| json.then_some(name))
                .collect()
        });
    };
}

events_columns!(events_json_columns);

/// The column of the top-level members no protocol names, as one JSON
/// object: hvaudit's own, never a column of other pipelines' files.
pub const UNKNOWN_MEMBERS: &str = "extra";

/// Columns that say where and how often an event was seen, not what it
/// says: they take no part in comparing two events' contents.
pub const PROVENANCE: [&str; 5] = ["seq", "src_file", "src_line", "redeliveries", "version"];

/// The columns that hold instants as nanoseconds since the epoch (Int64;
/// past its range, its nearest end), each with the column of the same
/// instant in microseconds. Layouts before 3 lack them: reading such a file
/// fills each from its microseconds times 1000, so it orders to the
/// microsecond.
pub const NS_COLUMNS: [(&str, &str); 4] = [
    ("created_ns", "created_us"),
    ("stale_at_ns", "stale_at"),
    ("token_iat_ns", "token_iat"),
    ("token_exp_ns", "token_exp"),
];

/// `events` as layout 2 wrote it: without the nanosecond columns, nor the
/// identity ones.
pub static EVENTS_V2: LazyLock<SchemaRef> = LazyLock::new(|| {
    let fields: Vec<Field> = EVENTS
        .fields()
        .iter()
        .filter(|f| !NS_COLUMNS.iter().any(|(ns, _)| f.name() == ns))
        .filter(|f| !ADDED_IN_LAYOUT_3.contains(&f.name().as_str()))
        .map(|f| f.as_ref().clone())
        .collect();
    Arc::new(Schema::new(fields))
});

/// `events` as layout 1 wrote it: layout 2 with the category columns as
/// plain text.
pub static EVENTS_V1: LazyLock<SchemaRef> = LazyLock::new(|| {
    let fields: Vec<Field> = EVENTS_V2
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
        // the line's bytes hashed (BLAKE3, 128 bits; null for a line too
        // long to hold): what a finding on it is fingerprinted by
        Field::new("digest", DataType::FixedSizeBinary(16), true),
    ]))
});

/// `bad_lines` as layouts 1 and 2 wrote it: without `digest`.
pub static BAD_LINES_V2: LazyLock<SchemaRef> = LazyLock::new(|| {
    let fields = BAD_LINES.fields().iter().filter(|f| f.name() != "digest");
    Arc::new(Schema::new(fields.cloned().collect::<Vec<_>>()))
});

/// Index of a column of `events` by name (panics only on a typo in our code).
pub fn events_col(name: &str) -> usize {
    EVENTS
        .index_of(name)
        .unwrap_or_else(|_| panic!("no events column {name}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// docs/sql.md's `events` table: each row's column names with the types
    /// it gives them (one type for all, or one each).
    fn documented_columns() -> Vec<(String, String)> {
        let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("docs/sql.md");
        let page = std::fs::read_to_string(path).unwrap();
        let tables = page
            .split("\n## Tables\n")
            .nth(1)
            .expect("a Tables section");
        let mut columns = Vec::new();
        for line in tables
            .lines()
            .skip_while(|l| !l.starts_with("| column |"))
            .skip(2)
        {
            let Some(row) = line.strip_prefix('|') else {
                break;
            };
            let cells: Vec<&str> = row.split('|').map(str::trim).collect();
            let names: Vec<&str> = cells[0]
                .split(',')
                .map(|n| n.trim().trim_matches('`'))
                .collect();
            // "timestamp (µs, UTC)": the parenthesis qualifies the type.
            let types = cells[1].split(" (").next().unwrap_or_default();
            let types: Vec<&str> = types.split(',').map(str::trim).collect();
            for (i, name) in names.iter().enumerate() {
                let type_ = if types.len() == names.len() {
                    types[i]
                } else {
                    types[0]
                };
                columns.push((name.to_string(), type_.to_string()));
            }
        }
        columns
    }

    fn documented_type(data_type: &DataType) -> &'static [&'static str] {
        match data_type {
            DataType::Int64 => &["int64"],
            DataType::Int32 => &["int32"],
            DataType::Float64 => &["float64"],
            DataType::Boolean => &["bool"],
            DataType::Utf8 => &["text", "JSON text"],
            DataType::Timestamp(_, _) => &["timestamp"],
            DataType::Dictionary(_, _) => &["category"],
            DataType::FixedSizeBinary(16) => &["binary(16)"],
            other => panic!("no docs/sql.md word for {other}"),
        }
    }

    #[test]
    fn docs_sql_md_lists_every_events_column_with_its_type() {
        let documented = documented_columns();
        let listed: Vec<&str> = documented.iter().map(|(name, _)| name.as_str()).collect();
        let mut sorted = listed.clone();
        sorted.sort_unstable();
        sorted.dedup();
        assert_eq!(
            sorted.len(),
            listed.len(),
            "a column listed twice: {listed:?}"
        );
        for field in EVENTS.fields() {
            let Some((_, type_)) = documented.iter().find(|(name, _)| name == field.name()) else {
                panic!("docs/sql.md's events table lacks {}", field.name());
            };
            let words = documented_type(field.data_type());
            assert!(
                words.contains(&type_.as_str()),
                "docs/sql.md says {} is {type_}, the schema {words:?}",
                field.name()
            );
            let json = JSON_COLUMNS.contains(&field.name().as_str());
            assert_eq!(
                type_ == "JSON text",
                json,
                "docs/sql.md says {} is {type_}; a JSON column: {json}",
                field.name()
            );
        }
        for name in PROVENANCE.iter().chain([&UNKNOWN_MEMBERS]) {
            assert!(EVENTS.index_of(name).is_ok(), "{name} is not a column");
        }
        assert!(JSON_COLUMNS.contains(&UNKNOWN_MEMBERS));
        for name in listed {
            assert!(
                EVENTS.index_of(name).is_ok(),
                "docs/sql.md lists {name}, not a column"
            );
        }
    }
}

#[cfg(test)]
mod layout_tests {
    use super::*;

    /// Layout 3's events columns as `convert` writes them (name, type,
    /// nullable). Files keep the layout they were written with, and a reader
    /// takes a file as its own only when its columns are exactly these: a
    /// change here without a new `LAYOUT_VERSION` (and a reader for the old
    /// one) would read every earlier file as foreign Parquet.
    const LAYOUT_3_EVENTS: &str = "
seq Int64 false
src_file Dictionary(Int32, Utf8) false
src_line Int64 false
redeliveries Int64 false
version Int32 false
dialect Dictionary(Int32, Utf8) false
spec_version Utf8 true
aep_version Utf8 true
id Utf8 false
type Dictionary(Int32, Utf8) false
source Dictionary(Int32, Utf8) false
target Dictionary(Int32, Utf8) true
topic Utf8 true
session_id Utf8 true
conversation_id Utf8 true
task_id Utf8 true
parent_task_id Utf8 true
env_parent_task_id Utf8 true
correlation_id Utf8 true
causation_id Utf8 true
created_at Timestamp(Microsecond, Some(\"UTC\")) false
created_us Int64 false
created_ns Int64 false
stale_at_ns Int64 true
token_iat_ns Int64 true
token_exp_ns Int64 true
expires_at Timestamp(Microsecond, Some(\"UTC\")) true
delivery_mode Utf8 true
delivery_sequence Int64 true
delivery_cursor Utf8 true
payload_schema Utf8 true
belief_status Utf8 true
belief_scope Utf8 true
confidence Float64 true
valid_from Timestamp(Microsecond, Some(\"UTC\")) true
valid_until Timestamp(Microsecond, Some(\"UTC\")) true
stale_after Utf8 true
stale_after_ms Int64 true
stale_at Timestamp(Microsecond, Some(\"UTC\")) true
refresh_hint Utf8 true
delegated_by Utf8 true
delegated_to Utf8 true
handoff_token Utf8 true
checkpoint_id Utf8 true
checkpoint_at Timestamp(Microsecond, Some(\"UTC\")) true
interruption_policy Utf8 true
compensation_id Utf8 true
source_trust Utf8 true
attestation_count Float64 true
data_provenance Utf8 true
evidence_len Int32 true
token_structured Boolean true
token_error Utf8 true
token_iss Utf8 true
token_sub Utf8 true
token_task_id Utf8 true
token_parent_task_id Utf8 true
token_iat Timestamp(Microsecond, Some(\"UTC\")) true
token_exp Timestamp(Microsecond, Some(\"UTC\")) true
token_jti Utf8 true
p_task_id Utf8 true
p_parent_task_id Utf8 true
grace_period_ms Int64 true
error_code Utf8 true
fact_id Utf8 true
original_event_id Utf8 true
p_checkpoint_id Utf8 true
filter_types Utf8 true
filter_source Utf8 true
filter_target Utf8 true
filter_topic Utf8 true
payload_error Utf8 true
payload Utf8 true
delivery Utf8 true
evidence_chain Utf8 true
extra Utf8 true
as_written Utf8 true
digest FixedSizeBinary(16) true
";

    fn columns(schema: &Schema) -> Vec<String> {
        schema
            .fields()
            .iter()
            .map(|f| format!("{} {:?} {}", f.name(), f.data_type(), f.is_nullable()))
            .collect()
    }

    #[test]
    fn the_events_columns_are_layout_3_as_written() {
        assert_eq!(LAYOUT_VERSION, "3");
        assert_eq!(columns(&EVENTS).join("\n"), LAYOUT_3_EVENTS.trim());
    }

    /// Layout 2 as it was written: layout 3 without the nanosecond columns
    /// and the identity ones.
    #[test]
    fn layout_2_is_layout_3_without_the_nanoseconds() {
        let layout_2: Vec<&str> = LAYOUT_3_EVENTS
            .trim()
            .lines()
            .filter(|l| !l.contains("_ns "))
            .filter(|l| {
                !ADDED_IN_LAYOUT_3
                    .iter()
                    .any(|c| l.starts_with(&format!("{c} ")))
            })
            .collect();
        assert_eq!(columns(&EVENTS_V2), layout_2);
        assert_eq!(EVENTS_V1.fields().len(), layout_2.len());
        for (ns, us) in NS_COLUMNS {
            assert_eq!(
                EVENTS.field_with_name(ns).unwrap().data_type(),
                &DataType::Int64
            );
            assert!(EVENTS_V2.field_with_name(us).is_ok(), "{us}");
        }
    }
}
