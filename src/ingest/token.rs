//! Structured handoff tokens: base64url JSON claims, alone or as the middle
//! of three '.'-joined segments. Only used under `--token-format structured`;
//! opaque tokens are never decoded.

use base64::Engine;
use base64::engine::general_purpose::{URL_SAFE, URL_SAFE_NO_PAD};
use serde::Deserialize;
use serde_json::Value;

/// Decoded claims. Times are microseconds since the epoch.
#[derive(Debug, Default, Clone, PartialEq)]
pub struct Claims {
    pub iss: Option<String>,
    pub sub: Option<String>,
    pub task_id: Option<String>,
    pub parent_task_id: Option<String>,
    pub iat_us: Option<i64>,
    pub exp_us: Option<i64>,
    pub jti: Option<String>,
}

#[derive(Deserialize)]
struct RawClaims {
    iss: Option<Value>,
    sub: Option<Value>,
    task_id: Option<Value>,
    parent_task_id: Option<Value>,
    iat: Option<Value>,
    exp: Option<Value>,
    jti: Option<Value>,
}

/// Decode a token, or say why it does not decode.
pub fn decode(token: &str) -> Result<Claims, String> {
    let parts: Vec<&str> = token.split('.').collect();
    let body = match parts.len() {
        1 => parts[0],
        3 => parts[1],
        n => return Err(format!("{n} '.'-separated segments (expected 1 or 3)")),
    };
    let bytes = URL_SAFE_NO_PAD
        .decode(body.trim_end_matches('='))
        .or_else(|_| URL_SAFE.decode(body))
        .map_err(|e| format!("not base64url: {e}"))?;
    let raw: RawClaims =
        serde_json::from_slice(&bytes).map_err(|e| format!("claims are not a JSON object: {e}"))?;
    Ok(Claims {
        iss: text(raw.iss, "iss")?,
        sub: text(raw.sub, "sub")?,
        task_id: text(raw.task_id, "task_id")?,
        parent_task_id: text(raw.parent_task_id, "parent_task_id")?,
        iat_us: instant(raw.iat, "iat")?,
        exp_us: instant(raw.exp, "exp")?,
        jti: text(raw.jti, "jti")?,
    })
}

fn text(v: Option<Value>, name: &str) -> Result<Option<String>, String> {
    match v {
        None | Some(Value::Null) => Ok(None),
        Some(Value::String(s)) => Ok(Some(s)),
        Some(other) => Err(format!("claim {name} is not a string: {other}")),
    }
}

/// RFC 3339 text or seconds since the epoch (integer or fractional).
fn instant(v: Option<Value>, name: &str) -> Result<Option<i64>, String> {
    match v {
        None | Some(Value::Null) => Ok(None),
        Some(Value::String(s)) => super::time::parse_instant_us(&s)
            .map(Some)
            .map_err(|e| format!("claim {name}: {e}")),
        Some(Value::Number(n)) => n
            .as_f64()
            .filter(|f| f.is_finite() && f.abs() < 1e13)
            .map(|f| Some((f * 1e6).round() as i64))
            .ok_or_else(|| format!("claim {name}: number out of range")),
        Some(other) => Err(format!(
            "claim {name} is neither RFC 3339 nor seconds: {other}"
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn enc(json: &str) -> String {
        URL_SAFE_NO_PAD.encode(json)
    }

    #[test]
    fn bare_and_compact_forms_decode() {
        let claims = r#"{"iss":"a","sub":"b","task_id":"t","parent_task_id":"p","iat":1752141600,"exp":"2026-07-10T12:00:00Z","jti":"j1"}"#;
        let bare = decode(&enc(claims)).unwrap();
        let compact = decode(&format!("hdr.{}.sig", enc(claims))).unwrap();
        assert_eq!(bare, compact);
        assert_eq!(bare.iss.as_deref(), Some("a"));
        assert_eq!(bare.iat_us, Some(1_752_141_600_000_000));
        assert!(bare.exp_us.is_some());
    }

    #[test]
    fn opaque_values_do_not_decode() {
        assert!(decode("ht_abc123").is_err());
        assert!(decode("a.b").is_err());
        assert!(decode(&enc("[1,2]")).is_err());
        assert!(decode(&enc(r#"{"exp":true}"#)).is_err());
    }
}
