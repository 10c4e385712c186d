//! The payload fields the rules need, lifted into columns at ingest.

use super::members;
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

/// The payload members read, as raw JSON text.
#[derive(Default)]
struct Raw<'a> {
    task_id: Option<&'a str>,
    parent_task_id: Option<&'a str>,
    grace_period_ms: Option<&'a str>,
    error: Option<&'a str>,
    fact_id: Option<&'a str>,
    original_event_id: Option<&'a str>,
    checkpoint_id: Option<&'a str>,
    types: Option<&'a str>,
    source: Option<&'a str>,
    target: Option<&'a str>,
    topic: Option<&'a str>,
    filter: Option<&'a str>,
}

impl<'a> Raw<'a> {
    /// Read the members of the object `text` (valid JSON: it was read
    /// with its line) that the columns need.
    fn read(name: &str, text: &'a str) -> Result<Self, String> {
        let mut raw = Raw::default();
        for (key, value) in object(name, text)? {
            let slot = match key.as_ref() {
                "task_id" => &mut raw.task_id,
                "parent_task_id" => &mut raw.parent_task_id,
                "grace_period_ms" => &mut raw.grace_period_ms,
                "error" => &mut raw.error,
                "fact_id" => &mut raw.fact_id,
                "original_event_id" => &mut raw.original_event_id,
                "checkpoint_id" => &mut raw.checkpoint_id,
                "types" => &mut raw.types,
                "source" => &mut raw.source,
                "target" => &mut raw.target,
                "topic" => &mut raw.topic,
                "filter" => &mut raw.filter,
                _ => continue,
            };
            if slot.replace(value).is_some() {
                return Err(duplicate(name, &key));
            }
        }
        Ok(raw)
    }
}

fn duplicate(name: &str, key: &str) -> String {
    format!("field {name}: duplicate field `{key}`")
}

/// Extract the fields; a payload that is not an object, or a field of an
/// unexpected type, leaves the column empty (payload.invalid reports shape).
/// A field named twice is an error: which value is meant is ambiguous, and
/// JSON readers disagree on it (the envelope rejects duplicates the same way).
pub fn extract<'a>(text: &'a str, event_type: &str) -> Result<PayloadFields<'a>, String> {
    if !text.starts_with('{') {
        return Ok(PayloadFields::default());
    }
    let raw = Raw::read("payload", text)?;
    let error_code = match raw.error {
        Some(e) if e.starts_with('{') => {
            let mut code = None;
            for (key, value) in object("payload.error", e)? {
                if key == "code" && code.replace(value).is_some() {
                    return Err(duplicate("payload.error", &key));
                }
            }
            code.and_then(string)
        }
        _ => None,
    };
    let mut fields = PayloadFields {
        task_id: raw.task_id.and_then(string),
        parent_task_id: raw.parent_task_id.and_then(string),
        grace_period_ms: raw.grace_period_ms.and_then(|v| v.parse::<i64>().ok()),
        error_code,
        fact_id: raw.fact_id.and_then(string),
        original_event_id: raw.original_event_id.and_then(string),
        checkpoint_id: raw.checkpoint_id.and_then(string),
        ..Default::default()
    };
    if event_type.starts_with("subscription.") {
        // The filter sits in the payload itself or under payload.filter.
        let nested = match raw.filter {
            Some(f) if f.starts_with('{') => Raw::read("payload.filter", f)?,
            _ => Raw::default(),
        };
        let json = |a: Option<&'a str>, b: Option<&'a str>| {
            a.or(b).filter(|v| *v != "null").map(Cow::Borrowed)
        };
        fields.filter_types = json(raw.types, nested.types);
        fields.filter_source = json(raw.source, nested.source);
        fields.filter_target = json(raw.target, nested.target);
        fields.filter_topic = json(raw.topic, nested.topic);
    }
    Ok(fields)
}

/// The members of an object inside a line already read: the only error
/// left is serde_json's for a key it cannot read.
fn object<'a>(name: &str, text: &'a str) -> Result<Vec<members::Member<'a>>, String> {
    members::read(text, false).map_err(|e| {
        let e = e.to_string();
        let e = e.split(" at line ").next().unwrap_or(&e);
        format!("field {name}: {e}")
    })
}

fn string(raw: &str) -> Option<Cow<'_, str>> {
    if let Some(text) = super::normalize::unescaped(raw) {
        return Some(Cow::Borrowed(text));
    }
    serde_json::from_str::<String>(raw).ok().map(Cow::Owned)
}
