//! Payload validation against the protocol's own payload schema (the
//! upstream `harmovela-payloads.schema.json`, 26 event types). The result is
//! a column so that the payload.invalid rule stays plain SQL.

use serde_json::Value;
use serde_json::value::RawValue;
use std::collections::BTreeSet;
use std::sync::LazyLock;

const SCHEMA: &str = include_str!(
    "../../tests/fixtures/upstream/harmovela-0.2/schemas/harmovela-payloads.schema.json"
);

struct PayloadSchema {
    validator: jsonschema::Validator,
    /// The event types the schema has a branch for; others skip validation.
    types: BTreeSet<String>,
}

static PAYLOAD_SCHEMA: LazyLock<PayloadSchema> = LazyLock::new(|| {
    let schema: Value = serde_json::from_str(SCHEMA).expect("bundled payload schema is JSON");
    let types = schema["allOf"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|branch| branch["if"]["properties"]["type"]["const"].as_str())
        .map(str::to_string)
        .collect();
    let validator = jsonschema::validator_for(&schema).expect("bundled payload schema compiles");
    PayloadSchema { validator, types }
});

/// The first violation of the payload schema, or None (valid or no schema).
/// A payload too deep or with numbers too large to read as a JSON value
/// (serde_json stops at 128 levels, so no stack is at risk) cannot be shown
/// valid: that is reported as its violation rather than passed silently.
pub fn check(event_type: &str, payload: &RawValue) -> Option<String> {
    let schema = &*PAYLOAD_SCHEMA;
    if !schema.types.contains(event_type) {
        return None;
    }
    let payload: Value = match serde_json::from_str(payload.get()) {
        Ok(v) => v,
        Err(e) => {
            let e = e
                .to_string()
                .replace(" at line 1 column ", " at payload column ");
            return Some(format!("/payload: cannot be validated: {e}"));
        }
    };
    let instance = serde_json::json!({ "type": event_type, "payload": payload });
    let error = schema.validator.iter_errors(&instance).next()?;
    let path = error.instance_path().to_string();
    Some(format!("{path}: {error}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn raw(s: &str) -> Box<RawValue> {
        RawValue::from_string(s.to_string()).unwrap()
    }

    #[test]
    fn missing_required_field_is_named() {
        let e = check("context.invalidated", &raw("{}")).unwrap();
        assert!(e.contains("context_key"), "{e}");
        assert!(check("context.invalidated", &raw(r#"{"context_key":"k"}"#)).is_none());
    }

    #[test]
    fn payloads_that_cannot_be_read_as_values_are_not_passed() {
        let deep = format!(
            r#"{{"context_key":{}{}}}"#,
            "[".repeat(500),
            "]".repeat(500)
        );
        let e = check("context.invalidated", &raw(&deep)).unwrap();
        assert!(e.contains("cannot be validated: recursion limit"), "{e}");
        let huge = r#"{"context_key":"k","n":1e400}"#;
        let e = check("context.invalidated", &raw(huge)).unwrap();
        assert!(e.contains("number out of range"), "{e}");
    }

    #[test]
    fn types_without_a_schema_are_not_checked() {
        assert!(check("task.progress", &raw("[]")).is_none());
    }
}
