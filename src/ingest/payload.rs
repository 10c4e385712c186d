//! The payload fields the rules need, lifted into columns at ingest.

use serde::Deserialize;
use serde_json::value::RawValue;
use std::borrow::Cow;

#[derive(Default)]
pub struct PayloadFields<'a> {
    pub task_id: Option<Cow<'a, str>>,
    pub parent_task_id: Option<Cow<'a, str>>,
    pub grace_period_ms: Option<i64>,
    pub error_code: Option<Cow<'a, str>>,
    pub fact_id: Option<Cow<'a, str>>,
    pub original_event_id: Option<Cow<'a, str>>,
    pub checkpoint_id: Option<Cow<'a, str>>,
    pub filter_types: Option<Cow<'a, str>>,
    pub filter_source: Option<Cow<'a, str>>,
    pub filter_target: Option<Cow<'a, str>>,
    pub filter_topic: Option<Cow<'a, str>>,
}

#[derive(Deserialize, Default)]
struct Raw<'a> {
    #[serde(borrow)]
    task_id: Option<&'a RawValue>,
    #[serde(borrow)]
    parent_task_id: Option<&'a RawValue>,
    #[serde(borrow)]
    grace_period_ms: Option<&'a RawValue>,
    #[serde(borrow)]
    error: Option<&'a RawValue>,
    #[serde(borrow)]
    fact_id: Option<&'a RawValue>,
    #[serde(borrow)]
    original_event_id: Option<&'a RawValue>,
    #[serde(borrow)]
    checkpoint_id: Option<&'a RawValue>,
    #[serde(borrow)]
    types: Option<&'a RawValue>,
    #[serde(borrow)]
    source: Option<&'a RawValue>,
    #[serde(borrow)]
    target: Option<&'a RawValue>,
    #[serde(borrow)]
    topic: Option<&'a RawValue>,
    #[serde(borrow)]
    filter: Option<&'a RawValue>,
}

#[derive(Deserialize)]
struct ErrorCode<'a> {
    #[serde(borrow)]
    code: Option<&'a RawValue>,
}

/// Extract the fields; a payload that is not an object, or a field of an
/// unexpected type, leaves the column empty (payload.invalid reports shape).
/// A field named twice is an error: which value is meant is ambiguous, and
/// JSON readers disagree on it (the envelope rejects duplicates the same way).
pub fn extract<'a>(payload: &'a RawValue, event_type: &str) -> Result<PayloadFields<'a>, String> {
    let text = payload.get();
    if !text.starts_with('{') {
        return Ok(PayloadFields::default());
    }
    let raw: Raw<'a> = object("payload", text)?;
    let error_code = match raw.error {
        Some(e) if e.get().starts_with('{') => object::<ErrorCode>("payload.error", e.get())?
            .code
            .and_then(string),
        _ => None,
    };
    let mut fields = PayloadFields {
        task_id: raw.task_id.and_then(string),
        parent_task_id: raw.parent_task_id.and_then(string),
        grace_period_ms: raw
            .grace_period_ms
            .and_then(|v| v.get().parse::<i64>().ok()),
        error_code,
        fact_id: raw.fact_id.and_then(string),
        original_event_id: raw.original_event_id.and_then(string),
        checkpoint_id: raw.checkpoint_id.and_then(string),
        ..Default::default()
    };
    if event_type.starts_with("subscription.") {
        // The filter sits in the payload itself or under payload.filter.
        let nested: Raw<'a> = match raw.filter {
            Some(f) if f.get().starts_with('{') => object("payload.filter", f.get())?,
            _ => Raw::default(),
        };
        let json = |a: Option<&'a RawValue>, b: Option<&'a RawValue>| {
            a.or(b)
                .filter(|v| v.get() != "null")
                .map(|v| Cow::Borrowed(v.get()))
        };
        fields.filter_types = json(raw.types, nested.types);
        fields.filter_source = json(raw.source, nested.source);
        fields.filter_target = json(raw.target, nested.target);
        fields.filter_topic = json(raw.topic, nested.topic);
    }
    Ok(fields)
}

/// Read an object whose members are all raw values: the only error left is
/// a member named twice.
fn object<'a, T: Deserialize<'a>>(name: &str, text: &'a str) -> Result<T, String> {
    serde_json::from_str(text).map_err(|e| {
        let e = e.to_string();
        let e = e.split(" at line ").next().unwrap_or(&e);
        format!("field {name}: {e}")
    })
}

fn string(v: &RawValue) -> Option<Cow<'_, str>> {
    let raw = v.get();
    if let Some(text) = super::normalize::unescaped(raw) {
        return Some(Cow::Borrowed(text));
    }
    serde_json::from_str::<String>(raw).ok().map(Cow::Owned)
}
