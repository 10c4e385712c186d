//! Payload validation against the protocol's own payload schema (the
//! upstream `harmovela-payloads.schema.json`, 26 event types). The result is
//! a column so that the payload.invalid rule stays plain SQL.

use serde_json::Value;
use std::collections::HashMap;
use std::sync::LazyLock;

const SCHEMA: &str = include_str!(
    "../../tests/fixtures/upstream/harmovela-0.2/schemas/harmovela-payloads.schema.json"
);

/// One validator per event type: the schema's `if type == T then payload
/// matches S` branches, each compiled on its own. Validating the payload
/// against its type's S gives the same verdict and errors as the whole
/// envelope schema without evaluating 26 `if`s and copying the payload into
/// an envelope for every event.
static VALIDATORS: LazyLock<HashMap<String, jsonschema::Validator>> = LazyLock::new(|| {
    let schema: Value = serde_json::from_str(SCHEMA).expect("bundled payload schema is JSON");
    schema["allOf"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|branch| {
            let event_type = branch["if"]["properties"]["type"]["const"].as_str()?;
            let payload = &branch["then"]["properties"]["payload"];
            let validator =
                jsonschema::draft202012::new(payload).expect("bundled payload schema compiles");
            Some((event_type.to_string(), validator))
        })
        .collect()
});

/// The first way `payload` breaks its type's schema, as "/payload/path:
/// message"; None when it conforms or the type has no payload schema.
/// A payload too deep or with numbers too large to read as a JSON value
/// (serde_json stops at 128 levels, so no stack is at risk) cannot be shown
/// valid: that is reported as its violation rather than passed silently.
pub fn check(event_type: &str, payload: &str) -> Option<String> {
    let validator = VALIDATORS.get(event_type)?;
    let payload: Value = match serde_json::from_str(payload) {
        Ok(v) => v,
        Err(e) => {
            let e = e
                .to_string()
                .replace(" at line 1 column ", " at payload column ");
            return Some(format!("/payload: cannot be validated: {e}"));
        }
    };
    // Most payloads conform; asking only for a verdict is the fast path.
    if validator.is_valid(&payload) {
        return None;
    }
    let error = validator.iter_errors(&payload).next()?;
    Some(format!("/payload{}: {error}", error.instance_path()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn missing_required_field_is_named() {
        let e = check("context.invalidated", "{}").unwrap();
        assert!(e.contains("context_key"), "{e}");
        assert!(check("context.invalidated", r#"{"context_key":"k"}"#).is_none());
    }

    #[test]
    fn payloads_that_cannot_be_read_as_values_are_not_passed() {
        let deep = format!(
            r#"{{"context_key":{}{}}}"#,
            "[".repeat(500),
            "]".repeat(500)
        );
        let e = check("context.invalidated", &deep).unwrap();
        assert!(e.contains("cannot be validated: recursion limit"), "{e}");
        let huge = r#"{"context_key":"k","n":1e400}"#;
        let e = check("context.invalidated", huge).unwrap();
        assert!(e.contains("number out of range"), "{e}");
    }

    #[test]
    fn types_without_a_schema_are_not_checked() {
        assert!(check("task.progress", "[]").is_none());
    }
}
