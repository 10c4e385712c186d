//! One NDJSON line -> one normalized `Row`, or the reason it is rejected.
//!
//! The line is parsed once into its top-level members (values kept as raw
//! JSON slices); each known member is then typed on its own, so a mis-typed
//! field is named in the rejection, and unknown members are kept in `extra`.

use super::raw_json::{json_integer, unescaped};
use super::row::Row;
use super::time::{add_ms, parse_duration_ms, parse_instant_us};
use super::{members, payload_schema, token};
use crate::options::TokenFormat;
use serde::Deserialize;
use serde_json::value::RawValue;
use std::borrow::Cow;
use xxhash_rust::xxh3::xxh3_64;

/// A rejected line: why, plus the id and type when they could be read.
#[derive(Debug)]
pub struct Rejection {
    pub reason: String,
    pub id: Option<String>,
    pub type_: Option<String>,
}

impl Rejection {
    fn new(reason: impl Into<String>) -> Self {
        Rejection {
            reason: reason.into(),
            id: None,
            type_: None,
        }
    }
}

/// A parsed line's hashes, used to collapse redeliveries.
pub struct Parsed {
    /// Hash of the id (the dedup key).
    pub id_hash: u128,
    /// Hash of the line's text; equal hashes mean equal content. Different
    /// hashes are compared again value by value.
    pub content_hash: u64,
}

/// Settings that change how lines are read.
#[derive(Debug, Clone, Copy, Default)]
pub struct NormalizeOptions {
    pub token_format: TokenFormat,
}

/// Parse one line (without its newline) into a row, handed to `take`. (A
/// row is over a kilobyte; returning it through the results copied it
/// seven times, 3% of ingest's instructions.)
pub fn parse_line<'a>(
    line: &'a str,
    seq: i64,
    src_line: i64,
    opts: NormalizeOptions,
    take: impl FnOnce(&Row<'a>),
) -> Result<Parsed, Rejection> {
    let members = members::read(line, true).map_err(|e| {
        let msg = strip_position(&e.to_string());
        Rejection::new(match e.classify() {
            serde_json::error::Category::Eof => format!("truncated JSON: {msg}"),
            serde_json::error::Category::Data => format!("not a JSON object: {msg}"),
            _ => format!("not JSON: {msg}"),
        })
    })?;
    // One hash of the whole line: a redelivery is almost always the same
    // text. The same content written differently (key order, white space)
    // hashes differently and is found by the value-by-value comparison.
    let content_hash = xxh3_64(line.as_bytes());
    let mut b = RowBuilder::default();
    let mut extra: Vec<(&Cow<'a, str>, &'a str)> = Vec::new();
    let mut result = Ok(());
    for (k, v) in &members {
        match b.member(k, v) {
            Ok(true) => {}
            Ok(false) => extra.push((k, v)),
            Err(e) => {
                result = Err(e);
                break;
            }
        }
    }
    let rejected = |reason| Rejection {
        reason,
        id: members
            .iter()
            .find(|(k, _)| k == "id")
            .and_then(|(_, v)| plain(v)),
        type_: members
            .iter()
            .find(|(k, _)| k == "type")
            .and_then(|(_, v)| plain(v)),
    };
    if let Err(reason) = result {
        return Err(rejected(reason));
    }
    let row = match b.finish(seq, src_line, extra, opts) {
        Ok(row) => row,
        Err(reason) => return Err(rejected(reason)),
    };
    let id_hash = xxhash_rust::xxh3::xxh3_128(row.id.as_bytes());
    take(&row);
    Ok(Parsed {
        id_hash,
        content_hash,
    })
}

fn plain(raw: &str) -> Option<String> {
    serde_json::from_str::<String>(raw).ok()
}

/// serde_json appends "at line 1 column N"; the column is kept, the line is
/// always 1 for a single line and reported separately.
fn strip_position(msg: &str) -> String {
    msg.replace(" at line 1 column ", " at column ")
}

/// Members of the envelope as read, before they are checked together.
#[derive(Default)]
struct RowBuilder<'a> {
    strs: [Option<Cow<'a, str>>; STRING_MEMBERS.len()],
    payload: Option<&'a str>,
    delivery: Option<&'a str>,
    evidence_chain: Option<&'a str>,
    confidence: Option<f64>,
    attestation_count: Option<f64>,
    expires_at_null: bool,
}

/// The index of a string member named by a literal, found at compile time.
macro_rules! member {
    ($name:literal) => {
        const { member_at($name) }
    };
}

const fn member_at(name: &str) -> usize {
    let mut at = 0;
    while at < STRING_MEMBERS.len() {
        if bytes_equal(STRING_MEMBERS[at].as_bytes(), name.as_bytes()) {
            return at;
        }
        at += 1;
    }
    panic!("not a string member of the envelope")
}

const fn bytes_equal(a: &[u8], b: &[u8]) -> bool {
    if a.len() != b.len() {
        return false;
    }
    let mut i = 0;
    while i < a.len() {
        if a[i] != b[i] {
            return false;
        }
        i += 1;
    }
    true
}

/// The envelope's string members, as one list: the array a row holds them
/// by (index) and the match that finds a key read from a line.
macro_rules! string_members {
    ($($name:literal),* $(,)?) => {
        const STRING_MEMBERS: [&str; [$($name),*].len()] = [$($name),*];

        /// The index of a string member read from a line (a match compiles to
        /// a length-then-bytes comparison).
        fn string_member(key: &str) -> Option<usize> {
            Some(match key {
                $($name => member!($name),)*
                _ => return None,
            })
        }
    };
}

string_members!(
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
    "correlation_id",
    "causation_id",
    "created_at",
    "expires_at",
    "payload_schema",
    "belief_status",
    "belief_scope",
    "valid_from",
    "valid_until",
    "stale_after",
    "refresh_hint",
    "delegated_by",
    "delegated_to",
    "handoff_token",
    "checkpoint_id",
    "checkpoint_at",
    "interruption_policy",
    "compensation_id",
    "source_trust",
    "data_provenance",
);

impl<'a> RowBuilder<'a> {
    /// Take one member; Ok(false) when it is not an envelope field.
    fn member(&mut self, key: &str, raw: &'a str) -> Result<bool, String> {
        match key {
            "payload" => self.payload = Some(raw),
            "delivery" => self.delivery = (raw != "null").then_some(raw),
            "evidence_chain" => self.evidence_chain = (raw != "null").then_some(raw),
            "confidence" => self.confidence = number(key, raw)?,
            "attestation_count" => self.attestation_count = count(key, raw)?,
            "expires_at" if raw == "null" => self.expires_at_null = true,
            _ => match string_member(key) {
                Some(at) => self.strs[at] = string(STRING_MEMBERS[at], raw)?,
                None => return Ok(false),
            },
        }
        Ok(true)
    }

    fn take(&mut self, at: usize) -> Option<Cow<'a, str>> {
        self.strs[at].take()
    }

    fn finish(
        &mut self,
        seq: i64,
        src_line: i64,
        extra: Vec<(&Cow<'a, str>, &'a str)>,
        opts: NormalizeOptions,
    ) -> Result<Row<'a>, String> {
        let spec_version = self.take(member!("spec_version"));
        let aep_version = self.take(member!("aep_version"));
        let dialect = match (&spec_version, &aep_version) {
            (Some(v), _) if v.starts_with("0.1") => "0.1",
            (Some(_), _) => "0.2",
            (None, Some(_)) => "0.1",
            (None, None) => {
                return Err("missing required field spec_version (or aep_version)".into());
            }
        };
        for (name, v) in [
            ("spec_version", &spec_version),
            ("aep_version", &aep_version),
        ] {
            if v.as_deref() == Some("") {
                return Err(format!("required field {name} is empty"));
            }
        }
        let mut required = |at: usize| -> Result<Cow<'a, str>, String> {
            let name = STRING_MEMBERS[at];
            match self.take(at) {
                Some(s) if !s.is_empty() => Ok(s),
                Some(_) => Err(format!("required field {name} is empty")),
                None => Err(format!("missing required field {name}")),
            }
        };
        let id = required(member!("id"))?;
        let type_ = required(member!("type"))?;
        let source = required(member!("source"))?;
        let created_at = required(member!("created_at"))?;
        let payload = self.payload.ok_or("missing required field payload")?;
        if !valid_type(&type_) {
            return Err(format!(
                "field type {type_:?} does not match ^[a-z][a-z0-9]*(\\.[a-z][a-z0-9_]*)+$"
            ));
        }
        let created_us = instant("created_at", &created_at)?;
        let expires_us = self.instant(member!("expires_at"))?;
        let valid_from_us = self.instant(member!("valid_from"))?;
        let valid_until_us = self.instant(member!("valid_until"))?;
        let checkpoint_at_us = self.instant(member!("checkpoint_at"))?;
        self.check_enum(
            member!("belief_status"),
            &[
                "asserted",
                "retracted",
                "revised",
                "contradicted",
                "unknown",
            ],
        )?;
        self.check_enum(
            member!("belief_scope"),
            &[
                "fact",
                "inference",
                "observation",
                "preference",
                "hypothesis",
            ],
        )?;
        self.check_enum(
            member!("interruption_policy"),
            &["save_and_stop", "drain_then_stop", "force_stop"],
        )?;
        self.check_enum(
            member!("source_trust"),
            &["verified", "attested", "unverified", "signed"],
        )?;
        if let Some(c) = self.confidence
            && !(0.0..=1.0).contains(&c)
        {
            return Err(format!("field confidence {c} is outside 0..1"));
        }
        if let Some(c) = self.attestation_count
            && c < 0.0
        {
            return Err(format!("field attestation_count {c} is negative"));
        }
        if self.take_ref(member!("handoff_token")) == Some("") {
            return Err("field handoff_token is empty".into());
        }
        let stale_after = self.take(member!("stale_after"));
        let stale_after_ms = match &stale_after {
            Some(s) => Some(parse_duration_ms(s).map_err(|e| format!("field stale_after: {e}"))?),
            None => None,
        };
        let stale_at_us = match (valid_until_us, stale_after_ms) {
            (Some(u), Some(ms)) => Some(u.min(add_ms(created_us, ms))),
            (Some(u), None) => Some(u),
            (None, Some(ms)) => Some(add_ms(created_us, ms)),
            (None, None) => None,
        };
        let delivery = match self.delivery {
            Some(d) => Some(parse_delivery(d)?),
            None => None,
        };
        let evidence_len = match self.evidence_chain {
            Some(e) => Some(check_evidence(e)?),
            None => None,
        };
        let fields = super::payload::extract(payload, &type_)?;
        let payload_error = payload_schema::check(&type_, payload).or_else(|| {
            // The validator reads numbers as f64, so 5000.000000000000000001
            // passes as an integer; the column (exact) has no value for it.
            // Say so rather than leave the request silently without a
            // deadline. (interruption.requested is the type whose payload
            // schema defines the field.)
            let raw = fields.grace_period_unread?;
            (type_ == "interruption.requested").then(|| {
                format!(
                    "/payload/grace_period_ms: {} is not an integer >= 0",
                    clip(raw, 40)
                )
            })
        });

        let handoff_token = self.take(member!("handoff_token"));
        let (token_structured, token_error, token) = match (&handoff_token, opts.token_format) {
            (Some(t), TokenFormat::Structured) => match token::decode(t) {
                Ok(c) => (Some(true), None, Some(c)),
                Err(e) => (Some(false), Some(e), None),
            },
            _ => (None, None, None),
        };
        let env_parent_task_id = self.take(member!("parent_task_id"));
        let parent_task_id = env_parent_task_id
            .clone()
            .or_else(|| fields.parent_task_id.clone());
        let extra = (!extra.is_empty()).then(|| {
            let mut sorted = extra;
            sorted.sort_by(|a, b| a.0.cmp(b.0));
            let mut out = String::from("{");
            for (i, (k, v)) in sorted.iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                out.push_str(&serde_json::to_string(k.as_ref()).unwrap_or_default());
                out.push(':');
                out.push_str(v);
            }
            out.push('}');
            out
        });
        let (delivery_mode, delivery_sequence, delivery_cursor) = delivery.unwrap_or_default();
        Ok(Row {
            seq,
            src_line,
            dialect,
            spec_version,
            aep_version,
            id,
            type_,
            source,
            target: self.take(member!("target")),
            topic: self.take(member!("topic")),
            session_id: self.take(member!("session_id")),
            conversation_id: self.take(member!("conversation_id")),
            task_id: self.take(member!("task_id")),
            parent_task_id,
            env_parent_task_id,
            correlation_id: self.take(member!("correlation_id")),
            causation_id: self.take(member!("causation_id")),
            created_us,
            expires_us,
            delivery_mode,
            delivery_sequence,
            delivery_cursor,
            payload_schema: self.take(member!("payload_schema")),
            belief_status: self.take(member!("belief_status")),
            belief_scope: self.take(member!("belief_scope")),
            confidence: self.confidence,
            valid_from_us,
            valid_until_us,
            stale_after,
            stale_after_ms,
            stale_at_us,
            refresh_hint: self.take(member!("refresh_hint")),
            delegated_by: self.take(member!("delegated_by")),
            delegated_to: self.take(member!("delegated_to")),
            handoff_token,
            checkpoint_id: self.take(member!("checkpoint_id")),
            checkpoint_at_us,
            interruption_policy: self.take(member!("interruption_policy")),
            compensation_id: self.take(member!("compensation_id")),
            source_trust: self.take(member!("source_trust")),
            attestation_count: self.attestation_count,
            data_provenance: self.take(member!("data_provenance")),
            evidence_len,
            token_structured,
            token_error,
            token,
            p_task_id: fields.task_id,
            p_parent_task_id: fields.parent_task_id,
            grace_period_ms: fields.grace_period_ms,
            error_code: fields.error_code,
            fact_id: fields.fact_id,
            original_event_id: fields.original_event_id,
            p_checkpoint_id: fields.checkpoint_id,
            filter_types: fields.filter_types,
            filter_source: fields.filter_source,
            filter_target: fields.filter_target,
            filter_topic: fields.filter_topic,
            payload_error,
            payload: Cow::Borrowed(payload),
            delivery: self.delivery.map(Cow::Borrowed),
            evidence_chain: self.evidence_chain.map(Cow::Borrowed),
            extra,
        })
    }

    fn take_ref(&self, at: usize) -> Option<&str> {
        self.strs[at].as_deref()
    }

    fn instant(&mut self, at: usize) -> Result<Option<i64>, String> {
        match self.take(at) {
            Some(s) => instant(STRING_MEMBERS[at], &s).map(Some),
            None => Ok(None),
        }
    }

    fn check_enum(&self, at: usize, allowed: &[&str]) -> Result<(), String> {
        let name = STRING_MEMBERS[at];
        match self.take_ref(at) {
            Some(v) if !allowed.contains(&v) => Err(format!(
                "field {name} {v:?} is not one of {}",
                allowed.join(", ")
            )),
            _ => Ok(()),
        }
    }
}

fn instant(name: &str, text: &str) -> Result<i64, String> {
    parse_instant_us(text).map_err(|e| format!("field {name} {text:?}: {e}"))
}

/// A string member; JSON null counts as absent.
fn string<'a>(name: &str, raw: &'a str) -> Result<Option<Cow<'a, str>>, String> {
    if raw == "null" {
        return Ok(None);
    }
    if let Some(text) = unescaped(raw) {
        return Ok(Some(Cow::Borrowed(text)));
    }
    if !raw.starts_with('"') {
        return Err(format!(
            "field {name} must be a string, found {}",
            kind(raw)
        ));
    }
    serde_json::from_str::<String>(raw)
        .map(|s| Some(Cow::Owned(s)))
        .map_err(|e| format!("field {name}: {}", strip_position(&e.to_string())))
}

/// A number with no upper bound in the schema (attestation_count): one past
/// f64's range is f64::MAX, as large as a float gets, not a rejected line.
fn count(name: &str, raw: &str) -> Result<Option<f64>, String> {
    match number(name, raw) {
        Err(_) if kind(raw) == "a number" && !raw.starts_with('-') => Ok(Some(f64::MAX)),
        other => other,
    }
}

fn number(name: &str, raw: &str) -> Result<Option<f64>, String> {
    if raw == "null" {
        return Ok(None);
    }
    match serde_json::from_str::<f64>(raw) {
        Ok(n) if n.is_finite() => Ok(Some(n)),
        _ if kind(raw) == "a number" => Err(format!(
            "field {name} {} is out of the range of a 64-bit float",
            clip(raw, 40)
        )),
        _ => Err(format!(
            "field {name} must be a number, found {}",
            kind(raw)
        )),
    }
}

/// At most `max` characters of `text` for a message, marked when cut.
pub fn clip(text: &str, max: usize) -> Cow<'_, str> {
    match text.char_indices().nth(max) {
        Some((at, _)) => Cow::Owned(format!("{}…", &text[..at])),
        None => Cow::Borrowed(text),
    }
}

/// The JSON kind of a raw value, for messages.
pub fn kind(raw: &str) -> &'static str {
    match raw.as_bytes().first() {
        Some(b'"') => "a string",
        Some(b'{') => "an object",
        Some(b'[') => "an array",
        Some(b't' | b'f') => "a boolean",
        Some(b'n') => "null",
        _ => "a number",
    }
}

fn valid_type(t: &str) -> bool {
    let mut parts = t.split('.');
    let first = parts.next().unwrap_or("");
    let ok_first = first.starts_with(|c: char| c.is_ascii_lowercase())
        && first
            .bytes()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit());
    let mut rest = 0;
    let ok_rest = parts.all(|p| {
        rest += 1;
        p.starts_with(|c: char| c.is_ascii_lowercase())
            && p.bytes()
                .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == b'_')
    });
    ok_first && ok_rest && rest > 0
}

type Delivery<'a> = (Option<Cow<'a, str>>, Option<i64>, Option<Cow<'a, str>>);

fn parse_delivery(d: &str) -> Result<Delivery<'_>, String> {
    #[derive(Deserialize)]
    struct D<'a> {
        #[serde(borrow)]
        mode: Option<&'a RawValue>,
        sequence: Option<&'a RawValue>,
        cursor: Option<&'a RawValue>,
    }
    let parsed: D = serde_json::from_str(d).map_err(|e| match kind(d) {
        "an object" => format!("field delivery: {}", strip_position(&e.to_string())),
        other => format!("field delivery must be an object, found {other}"),
    })?;
    let mode = match parsed.mode {
        Some(m) => string("delivery.mode", m.get())?,
        None => None,
    };
    if let Some(m) = &mode
        && !["best_effort", "at_least_once", "replayable"].contains(&m.as_ref())
    {
        return Err(format!(
            "field delivery.mode {m:?} is not one of best_effort, at_least_once, replayable"
        ));
    }
    // Any integer form (5, 5.0, 5e0); beyond i64, i64::MAX.
    let sequence = match parsed.sequence.map(|s| s.get()) {
        None | Some("null") => None,
        Some(s) => match json_integer(s) {
            Some(n) if n >= 0 => Some(n),
            _ => {
                return Err(format!(
                    "field delivery.sequence {s} is not an integer >= 0"
                ));
            }
        },
    };
    let cursor = match parsed.cursor {
        Some(c) => string("delivery.cursor", c.get())?,
        None => None,
    };
    Ok((mode, sequence, cursor))
}

/// Check evidence_chain's shape; the entries themselves become the
/// `evidence` table later.
fn check_evidence(e: &str) -> Result<i32, String> {
    let entries = super::evidence::parse_chain(e)?;
    Ok(i32::try_from(entries.len()).unwrap_or(i32::MAX))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_string_member_has_its_own_index() {
        for (at, name) in STRING_MEMBERS.iter().enumerate() {
            assert_eq!(string_member(name), Some(at));
        }
        assert_eq!(string_member("payload"), None);
    }

    #[test]
    fn counts_past_f64_saturate_and_bounded_numbers_do_not() {
        assert_eq!(count("attestation_count", "1e400"), Ok(Some(f64::MAX)));
        assert_eq!(count("attestation_count", "3"), Ok(Some(3.0)));
        assert!(count("attestation_count", "-1e400").is_err());
        assert!(count("attestation_count", "\"3\"").is_err());
        assert!(number("confidence", "1e400").is_err());
    }

    #[test]
    fn delivery_sequences_in_every_integer_form() {
        let seq = |s: &str| parse_delivery(&format!(r#"{{"sequence":{s}}}"#)).map(|d| d.1);
        assert_eq!(seq("5.0"), Ok(Some(5)));
        assert_eq!(seq("5e0"), Ok(Some(5)));
        assert_eq!(seq("18446744073709551616"), Ok(Some(i64::MAX)));
        assert_eq!(seq("-0"), Ok(Some(0)));
        assert!(seq("-1").is_err());
        assert!(seq("1.5").is_err());
    }
}
