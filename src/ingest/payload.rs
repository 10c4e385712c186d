//! The payload fields the rules need, lifted into columns at ingest.

use super::members;
use std::borrow::Cow;

#[derive(Default)]
pub struct PayloadFields<'a> {
    pub task_id: Option<Cow<'a, str>>,
    pub parent_task_id: Option<Cow<'a, str>>,
    /// Any JSON integer form (5000, 5000.0, 5e3); past i64, i64::MAX: a
    /// deadline later than any log can reach. None when absent, negative
    /// or not an integer (what the payload schema rejects).
    pub grace_period_ms: Option<i64>,
    /// The grace period as written when it is there but has no value above.
    pub grace_period_unread: Option<&'a str>,
    pub error_code: Option<Cow<'a, str>>,
    pub fact_id: Option<Cow<'a, str>>,
    pub original_event_id: Option<Cow<'a, str>>,
    pub checkpoint_id: Option<Cow<'a, str>>,
    pub filter_types: Option<Cow<'a, str>>,
    pub filter_source: Option<Cow<'a, str>>,
    pub filter_target: Option<Cow<'a, str>>,
    pub filter_topic: Option<Cow<'a, str>>,
}

/// The payload members the columns come from, in the order [`pick`]
/// returns them (`filter` may hold the subscription's filter instead).
const FIELDS: [&str; 12] = [
    "task_id",
    "parent_task_id",
    "grace_period_ms",
    "error",
    "fact_id",
    "original_event_id",
    "checkpoint_id",
    "types",
    "source",
    "target",
    "topic",
    "filter",
];

/// Extract the fields; a payload that is not an object, or a field of an
/// unexpected type, leaves the column empty (payload.invalid reports shape).
/// A field named twice is an error: which value is meant is ambiguous, and
/// JSON readers disagree on it (the envelope rejects duplicates the same way).
pub fn extract<'a>(text: &'a str, event_type: &str) -> Result<PayloadFields<'a>, String> {
    if !text.starts_with('{') {
        return Ok(PayloadFields::default());
    }
    let [
        task_id,
        parent_task_id,
        grace_period_ms,
        error,
        fact_id,
        original_event_id,
        checkpoint_id,
        types,
        source,
        target,
        topic,
        filter,
    ] = pick("payload", text, &FIELDS)?;
    let grace = grace_period_ms
        .and_then(super::raw_json::json_integer)
        .filter(|g| *g >= 0);
    let error_code = match error {
        Some(e) if e.starts_with('{') => {
            let [code] = pick("payload.error", e, &["code"])?;
            code.and_then(string)
        }
        _ => None,
    };
    let mut fields = PayloadFields {
        task_id: task_id.and_then(string),
        parent_task_id: parent_task_id.and_then(string),
        grace_period_ms: grace,
        grace_period_unread: grace_period_ms.filter(|_| grace.is_none()),
        error_code,
        fact_id: fact_id.and_then(string),
        original_event_id: original_event_id.and_then(string),
        checkpoint_id: checkpoint_id.and_then(string),
        ..Default::default()
    };
    if event_type.starts_with("subscription.") {
        // The filter sits in the payload itself or under payload.filter.
        let nested = match filter {
            Some(f) if f.starts_with('{') => pick("payload.filter", f, &FIELDS)?,
            _ => [None; FIELDS.len()],
        };
        let [
            ..,
            nested_types,
            nested_source,
            nested_target,
            nested_topic,
            _,
        ] = nested;
        let json = |a: Option<&'a str>, b: Option<&'a str>| {
            a.or(b).filter(|v| *v != "null").map(Cow::Borrowed)
        };
        fields.filter_types = json(types, nested_types);
        fields.filter_source = json(source, nested_source);
        fields.filter_target = json(target, nested_target);
        fields.filter_topic = json(topic, nested_topic);
    }
    Ok(fields)
}

/// The raw JSON text of the members of the object `text` named in `names`,
/// in that order. `text` was read with its line, so the only errors left
/// are a name given twice and serde_json's for a key it cannot read.
fn pick<'a, const N: usize>(
    what: &str,
    text: &'a str,
    names: &[&str; N],
) -> Result<[Option<&'a str>; N], String> {
    let members = members::read(text, false).map_err(|e| {
        let e = e.to_string();
        let e = e.split(" at line ").next().unwrap_or(&e);
        format!("field {what}: {e}")
    })?;
    let mut picked = [None; N];
    for (key, value) in members {
        if let Some(at) = names.iter().position(|name| *name == key)
            && picked[at].replace(value).is_some()
        {
            return Err(format!("field {what}: duplicate field `{key}`"));
        }
    }
    Ok(picked)
}

fn string(raw: &str) -> Option<Cow<'_, str>> {
    if let Some(text) = super::raw_json::unescaped(raw) {
        return Some(Cow::Borrowed(text));
    }
    serde_json::from_str::<String>(raw).ok().map(Cow::Owned)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn grace(value: &str) -> (Option<i64>, Option<&str>) {
        let text = format!(r#"{{"grace_period_ms":{value}}}"#);
        let f = extract(&text, "interruption.requested").unwrap();
        (f.grace_period_ms, f.grace_period_unread.map(|_| value))
    }

    #[test]
    fn every_integer_form_is_the_same_grace_period() {
        for v in [
            "5000",
            "5000.0",
            "5e3",
            "5E+3",
            "5000.000e0",
            "50000e-1",
            "0.5e4",
        ] {
            assert_eq!(grace(v), (Some(5000), None), "{v}");
        }
        assert_eq!(grace("0"), (Some(0), None));
        assert_eq!(grace("-0"), (Some(0), None));
        assert_eq!(grace("-0.0e7"), (Some(0), None));
    }

    #[test]
    fn grace_periods_past_i64_saturate() {
        for v in [
            "9223372036854775807",
            "9223372036854775808",
            "18446744073709551616",
            "1e19",
            "1e400",
            "1e99999999999999999999",
            "123456789012345678901234567890.0",
        ] {
            assert_eq!(grace(v), (Some(i64::MAX), None), "{v}");
        }
        assert_eq!(
            grace("9223372036854776"),
            (Some(9_223_372_036_854_776), None)
        );
    }

    #[test]
    fn negative_or_fractional_grace_periods_are_no_deadline() {
        for v in [
            "-1",
            "-5e3",
            "-1e400",
            "5000.5",
            "5e-1",
            "1e-400",
            "5000.000000000000000001",
            "\"5000\"",
            "null",
            "true",
            "[5000]",
        ] {
            assert_eq!(grace(v), (None, Some(v)), "{v}");
        }
        assert_eq!(grace_absent(), (None, None));
    }

    fn grace_absent() -> (Option<i64>, Option<&'static str>) {
        let f = extract("{}", "interruption.requested").unwrap();
        (f.grace_period_ms, f.grace_period_unread.map(|_| ""))
    }
}
