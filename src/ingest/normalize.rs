//! One NDJSON line -> one normalized `EventRow`, or the reason it is rejected.
//!
//! The line is parsed once into its top-level members (values kept as raw
//! JSON slices); each known member is then typed on its own, so a mis-typed
//! field is named in the rejection, and unknown members are kept in `extra`.

use super::canonical::{self, Canonicalizer};
use super::raw_json::{json_integer, unescaped};
use super::row::EventRow;
use super::time::{Instant, parse_duration_ms, parse_instant};
use super::{members, payload_schema, token};
use crate::protocol::TokenFormat;
use serde::Deserialize;
use serde_json::value::RawValue;
use std::borrow::Cow;
use std::cell::RefCell;

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

/// What the dedup looks a parsed line up by: prefilters both, never proof
/// (equal ones are confirmed on the rows, `dedup`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Parsed {
    /// The id's text hashed with this process's random key (`identity`).
    pub id_key: u64,
    /// The line's JSON value, hashed (also the row's `digest`).
    pub digest: [u8; 16],
}

thread_local! {
    /// Each parser thread's canonical writer, its buffers reused line to line.
    static CANONICAL: RefCell<Canonicalizer> = RefCell::default();
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
    take: impl FnOnce(&EventRow<'a>),
) -> Result<Parsed, Rejection> {
    let members = members::read(line, true).map_err(|e| {
        let msg = strip_position(&e.to_string());
        Rejection::new(match e.classify() {
            serde_json::error::Category::Eof => format!("truncated JSON: {msg}"),
            serde_json::error::Category::Data => format!("not a JSON object: {msg}"),
            _ => format!("not JSON: {msg}"),
        })
    })?;
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
    if let Err(reason) = b.finish(seq, src_line, extra, opts) {
        return Err(rejected(reason));
    }
    // The line's value, in one spelling: its digest, and a member named
    // twice at any depth (I-JSON) found on the way.
    let digest = CANONICAL.with_borrow_mut(|c| match c.object(&members) {
        Ok(text) => Ok(super::identity::digest(text)),
        Err(e) => Err(e.to_string()),
    });
    b.row.digest = digest.map_err(rejected)?;
    let id_key = super::identity::id_key(&b.row.id);
    take(&b.row);
    Ok(Parsed {
        id_key,
        digest: b.row.digest,
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

/// A row as its members are read, before they are checked together.
#[derive(Default)]
struct RowBuilder<'a> {
    /// Envelope strings copied as written go straight to their column
    /// (`EventRow::envelope_string`); the others wait in `strs` to be parsed.
    row: EventRow<'a>,
    strs: [Option<Cow<'a, str>>; STRING_MEMBERS.len()],
    payload: Option<&'a str>,
    delivery: Option<&'a str>,
    evidence_chain: Option<&'a str>,
    /// Members whose column does not keep the value as written (instants,
    /// numbers, nulls), raw: the row's `as_written`.
    written: Vec<(&'static str, &'a str)>,
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
    panic!("not a parsed string member of the envelope")
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

/// The envelope's string members that are parsed on their way to a column
/// (required, instants, the parent link), as one list: the array a row
/// builder holds them by (index) and the match that finds a key read from a
/// line.
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
    "id",
    "type",
    "source",
    "parent_task_id",
    "created_at",
    "expires_at",
    "valid_from",
    "valid_until",
    "checkpoint_at",
);

/// The string members read as instants.
const INSTANT_MEMBERS: [&str; 5] = [
    "created_at",
    "expires_at",
    "valid_from",
    "valid_until",
    "checkpoint_at",
];

/// `belief_status` values (the envelope schema's enum).
pub const BELIEF_STATUS: [&str; 5] = [
    "asserted",
    "retracted",
    "revised",
    "contradicted",
    "unknown",
];
/// `belief_scope` values.
pub const BELIEF_SCOPE: [&str; 5] = [
    "fact",
    "inference",
    "observation",
    "preference",
    "hypothesis",
];
/// `interruption_policy` values.
pub const INTERRUPTION_POLICY: [&str; 3] = ["save_and_stop", "drain_then_stop", "force_stop"];
/// `source_trust` values.
pub const SOURCE_TRUST: [&str; 4] = ["verified", "attested", "unverified", "signed"];
/// `delivery.mode` values.
pub const DELIVERY_MODE: [&str; 3] = ["best_effort", "at_least_once", "replayable"];

impl<'a> RowBuilder<'a> {
    /// Take one member; Ok(false) when it is not an envelope field.
    fn member(&mut self, key: &str, raw: &'a str) -> Result<bool, String> {
        let null = raw == "null";
        match key {
            "payload" => self.payload = Some(raw),
            "delivery" => {
                self.delivery = (!null).then_some(raw);
                self.written_if(null, "delivery", raw);
            }
            "evidence_chain" => {
                self.evidence_chain = (!null).then_some(raw);
                self.written_if(null, "evidence_chain", raw);
            }
            "confidence" => {
                self.row.confidence = number(key, raw)?;
                self.written.push(("confidence", raw));
            }
            "attestation_count" => {
                self.row.attestation_count = count(key, raw)?;
                self.written.push(("attestation_count", raw));
            }
            _ => {
                if let Some((name, field)) = self.row.envelope_string(key) {
                    *field = string(name, raw)?;
                    self.written_if(null, name, raw);
                } else if let Some(at) = string_member(key) {
                    let name = STRING_MEMBERS[at];
                    self.strs[at] = string(name, raw)?;
                    // An instant's column keeps the instant, not its text.
                    self.written_if(null || INSTANT_MEMBERS.contains(&name), name, raw);
                } else {
                    return Ok(false);
                }
            }
        }
        Ok(true)
    }

    fn written_if(&mut self, lossy: bool, name: &'static str, raw: &'a str) {
        if lossy {
            self.written.push((name, raw));
        }
    }

    /// Check the members together and fill in the rest of `self.row`.
    fn finish(
        &mut self,
        seq: i64,
        src_line: i64,
        extra: Vec<(&Cow<'a, str>, &'a str)>,
        opts: NormalizeOptions,
    ) -> Result<(), String> {
        let RowBuilder {
            row,
            strs,
            payload,
            delivery,
            evidence_chain,
            written,
        } = self;
        row.seq = seq;
        row.src_line = src_line;
        // The `dialect` column: the spec version the line is read as.
        row.dialect = match (&row.spec_version, &row.aep_version) {
            (Some(v), _) if v.starts_with("0.1") => "0.1",
            (Some(_), _) => "0.2",
            (None, Some(_)) => "0.1",
            (None, None) => {
                return Err("missing required field spec_version (or aep_version)".into());
            }
        };
        for (name, v) in [
            ("spec_version", &row.spec_version),
            ("aep_version", &row.aep_version),
        ] {
            if v.as_deref() == Some("") {
                return Err(format!("required field {name} is empty"));
            }
        }
        row.id = required(strs, member!("id"))?;
        row.type_ = required(strs, member!("type"))?;
        row.source = required(strs, member!("source"))?;
        let created_at = required(strs, member!("created_at"))?;
        let payload = payload.ok_or("missing required field payload")?;
        if !valid_type(&row.type_) {
            return Err(format!(
                "field type {:?} does not match ^[a-z][a-z0-9]*(\\.[a-z][a-z0-9_]*)+$",
                row.type_
            ));
        }
        let created = instant("created_at", &created_at)?;
        row.created_at_us = created.us();
        row.created_ns = created.ns();
        let valid_until = optional_instant(strs, member!("valid_until"))?;
        row.valid_until_us = valid_until.map(Instant::us);
        row.expires_us = optional_instant(strs, member!("expires_at"))?.map(Instant::us);
        row.valid_from_us = optional_instant(strs, member!("valid_from"))?.map(Instant::us);
        row.checkpoint_at_us = optional_instant(strs, member!("checkpoint_at"))?.map(Instant::us);
        check_enum("belief_status", &row.belief_status, &BELIEF_STATUS)?;
        check_enum("belief_scope", &row.belief_scope, &BELIEF_SCOPE)?;
        check_enum(
            "interruption_policy",
            &row.interruption_policy,
            &INTERRUPTION_POLICY,
        )?;
        check_enum("source_trust", &row.source_trust, &SOURCE_TRUST)?;
        if let Some(c) = row.confidence
            && !(0.0..=1.0).contains(&c)
        {
            return Err(format!("field confidence {c} is outside 0..1"));
        }
        if let Some(c) = row.attestation_count
            && c < 0.0
        {
            return Err(format!("field attestation_count {c} is negative"));
        }
        if row.handoff_token.as_deref() == Some("") {
            return Err("field handoff_token is empty".into());
        }
        row.stale_after_ms = match &row.stale_after {
            Some(s) => Some(parse_duration_ms(s).map_err(|e| format!("field stale_after: {e}"))?),
            None => None,
        };
        // Exact, then kept to each column's range: the nanoseconds of an
        // instant before 1677 plus a short stale_after stay at i64::MIN.
        let stale_at = match (valid_until, row.stale_after_ms) {
            (Some(u), Some(ms)) => Some(u.min(created.plus_ms(ms))),
            (Some(u), None) => Some(u),
            (None, Some(ms)) => Some(created.plus_ms(ms)),
            (None, None) => None,
        };
        row.stale_at_us = stale_at.map(Instant::us);
        row.stale_at_ns = stale_at.map(Instant::ns);
        if let Some(d) = *delivery {
            (
                row.delivery_mode,
                row.delivery_sequence,
                row.delivery_cursor,
            ) = parse_delivery(d)?;
        }
        row.evidence_len = match *evidence_chain {
            Some(e) => Some(check_evidence(e)?),
            None => None,
        };
        let fields = super::payload::extract(payload, &row.type_)?;
        let payload_error = payload_schema::check(&row.type_, payload).or_else(|| {
            // The validator reads numbers as f64, so 5000.000000000000000001
            // passes as an integer; the column (exact) has no value for it.
            // Say so rather than leave the request silently without a
            // deadline. (interruption.requested is the type whose payload
            // schema defines the field.)
            let raw = fields.grace_period_unread?;
            (row.type_ == "interruption.requested").then(|| {
                format!(
                    "/payload/grace_period_ms: {} is not an integer >= 0",
                    clip(raw, 40)
                )
            })
        });
        row.payload_error = payload_error.map(Cow::Owned);

        if let (Some(t), TokenFormat::Structured) = (&row.handoff_token, opts.token_format) {
            match token::decode(t) {
                Ok(c) => {
                    row.token_structured = Some(true);
                    row.token_iss = c.iss.map(Cow::Owned);
                    row.token_sub = c.sub.map(Cow::Owned);
                    row.token_task_id = c.task_id.map(Cow::Owned);
                    row.token_parent_task_id = c.parent_task_id.map(Cow::Owned);
                    row.token_iat_us = c.iat.map(Instant::us);
                    row.token_exp_us = c.exp.map(Instant::us);
                    row.token_iat_ns = c.iat.map(Instant::ns);
                    row.token_exp_ns = c.exp.map(Instant::ns);
                    row.token_jti = c.jti.map(Cow::Owned);
                }
                Err(e) => {
                    row.token_structured = Some(false);
                    row.token_error = Some(Cow::Owned(e));
                }
            }
        }
        row.env_parent_task_id = strs[member!("parent_task_id")].take();
        row.parent_task_id = row
            .env_parent_task_id
            .clone()
            .or_else(|| fields.parent_task_id.clone());
        row.extra = (!extra.is_empty()).then(|| Cow::Owned(extra_object(extra)));
        row.p_task_id = fields.task_id;
        row.p_parent_task_id = fields.parent_task_id;
        row.grace_period_ms = fields.grace_period_ms;
        row.error_code = fields.error_code;
        row.fact_id = fields.fact_id;
        row.original_event_id = fields.original_event_id;
        row.p_checkpoint_id = fields.checkpoint_id;
        row.filter_types = fields.filter_types;
        row.filter_source = fields.filter_source;
        row.filter_target = fields.filter_target;
        row.filter_topic = fields.filter_topic;
        row.payload = Cow::Borrowed(payload);
        row.delivery = delivery.map(Cow::Borrowed);
        row.evidence_chain = evidence_chain.map(Cow::Borrowed);
        row.as_written = Some(Cow::Owned(as_written(written)?));
        Ok(())
    }
}

/// The members a typed column does not keep as written, as one canonical
/// JSON object (sorted by name): with the other columns, the whole line.
fn as_written(members: &mut [(&'static str, &str)]) -> Result<String, String> {
    members.sort_unstable_by_key(|(name, _)| *name);
    let mut out = Vec::with_capacity(48);
    out.push(b'{');
    for (n, (name, raw)) in members.iter().enumerate() {
        if n > 0 {
            out.push(b',');
        }
        canonical::push_string(&mut out, name);
        out.push(b':');
        canonical::scalar(raw, &mut out)
            .ok_or_else(|| format!("field {name}: not a JSON value"))?;
    }
    out.push(b'}');
    Ok(String::from_utf8(out).expect("canonical text is UTF-8"))
}

/// A required string member, taken from `strs`.
fn required<'a>(
    strs: &mut [Option<Cow<'a, str>>; STRING_MEMBERS.len()],
    at: usize,
) -> Result<Cow<'a, str>, String> {
    let name = STRING_MEMBERS[at];
    match strs[at].take() {
        Some(s) if !s.is_empty() => Ok(s),
        Some(_) => Err(format!("required field {name} is empty")),
        None => Err(format!("missing required field {name}")),
    }
}

/// An optional instant member, taken from `strs`.
fn optional_instant(
    strs: &mut [Option<Cow<'_, str>>; STRING_MEMBERS.len()],
    at: usize,
) -> Result<Option<Instant>, String> {
    match strs[at].take() {
        Some(s) => instant(STRING_MEMBERS[at], &s).map(Some),
        None => Ok(None),
    }
}

fn check_enum(name: &str, value: &Option<Cow<'_, str>>, allowed: &[&str]) -> Result<(), String> {
    match value.as_deref() {
        Some(v) if !allowed.contains(&v) => Err(format!(
            "field {name} {v:?} is not one of {}",
            allowed.join(", ")
        )),
        _ => Ok(()),
    }
}

/// The unknown top-level members as one JSON object, sorted by key.
fn extra_object(mut members: Vec<(&Cow<'_, str>, &str)>) -> String {
    members.sort_by(|a, b| a.0.cmp(b.0));
    let mut out = String::from("{");
    for (i, (k, v)) in members.iter().enumerate() {
        if i > 0 {
            out.push(',');
        }
        // A key is text: it always has a JSON form.
        out.push_str(&serde_json::to_string(k.as_ref()).expect("a string serializes"));
        out.push(':');
        out.push_str(v);
    }
    out.push('}');
    out
}

fn instant(name: &str, text: &str) -> Result<Instant, String> {
    parse_instant(text).map_err(|e| format!("field {name} {text:?}: {e}"))
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
        && !DELIVERY_MODE.contains(&m.as_ref())
    {
        return Err(format!(
            "field delivery.mode {m:?} is not one of {}",
            DELIVERY_MODE.join(", ")
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
    use crate::ingest::row::ENVELOPE_STRINGS;

    #[test]
    fn every_string_member_has_its_own_index() {
        for (at, name) in STRING_MEMBERS.iter().enumerate() {
            assert_eq!(string_member(name), Some(at));
        }
        assert_eq!(string_member("payload"), None);
    }

    fn upstream_envelope_schemas() -> Vec<serde_json::Value> {
        let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/upstream");
        [
            "harmovela-0.2/schemas/harmovela-envelope.schema.json",
            "aep-0.1/schemas/aep-envelope.schema.json",
        ]
        .iter()
        .map(|file| {
            let text = std::fs::read_to_string(dir.join(file)).unwrap();
            serde_json::from_str(&text).unwrap()
        })
        .collect()
    }

    #[test]
    fn the_envelope_enums_are_the_upstream_schemas() {
        let ours: [(&str, &[&str]); 5] = [
            ("/properties/belief_status", &BELIEF_STATUS),
            ("/properties/belief_scope", &BELIEF_SCOPE),
            ("/properties/interruption_policy", &INTERRUPTION_POLICY),
            ("/properties/source_trust", &SOURCE_TRUST),
            ("/properties/delivery/properties/mode", &DELIVERY_MODE),
        ];
        for schema in upstream_envelope_schemas() {
            // Every enum of the schema, wherever it is.
            fn enums(at: String, v: &serde_json::Value, out: &mut Vec<(String, Vec<String>)>) {
                if let Some(values) = v.get("enum").and_then(|e| e.as_array()) {
                    let values = values.iter().map(|v| v.as_str().unwrap().to_string());
                    out.push((at.clone(), values.collect()));
                }
                if let Some(object) = v.as_object() {
                    for (key, value) in object {
                        enums(format!("{at}/{key}"), value, out);
                    }
                }
            }
            let mut theirs = Vec::new();
            enums(String::new(), &schema, &mut theirs);
            assert_eq!(theirs.len(), ours.len(), "{theirs:?}");
            for (at, values) in theirs {
                let (_, mine) = ours
                    .iter()
                    .find(|(path, _)| *path == at)
                    .unwrap_or_else(|| {
                        panic!("{at}: an enum of the upstream envelope schema not checked here")
                    });
                assert_eq!(*mine, values, "{at}");
            }
        }
    }

    #[test]
    fn every_envelope_member_of_the_upstream_schemas_is_read() {
        let mut names = std::collections::BTreeSet::new();
        for schema in upstream_envelope_schemas() {
            for name in schema["properties"].as_object().unwrap().keys() {
                // A member the row builder does not take would land in `extra`.
                let taken = RowBuilder::default().member(name, "null");
                assert_eq!(taken, Ok(true), "{name}");
                names.insert(name.clone());
            }
        }
        // And every member read by name is one of theirs (no misspelling).
        for name in STRING_MEMBERS.iter().chain(ENVELOPE_STRINGS) {
            assert!(
                names.contains(*name),
                "{name} is not an upstream envelope member"
            );
        }
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
