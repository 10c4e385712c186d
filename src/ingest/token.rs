//! Structured handoff tokens: base64url JSON claims, alone or as the middle
//! of three '.'-joined segments. Only used under `--token-format structured`;
//! opaque tokens are never decoded.

use super::time::Instant;
use base64::Engine;
use base64::engine::general_purpose::{URL_SAFE, URL_SAFE_NO_PAD};
use serde::Deserialize;
use serde_json::Value;
use serde_json::value::RawValue;

/// Decoded claims.
#[derive(Debug, Default, Clone, PartialEq)]
pub struct Claims {
    pub iss: Option<String>,
    pub sub: Option<String>,
    pub task_id: Option<String>,
    pub parent_task_id: Option<String>,
    pub iat: Option<Instant>,
    pub exp: Option<Instant>,
    pub jti: Option<String>,
}

#[derive(Deserialize)]
struct RawClaims<'a> {
    iss: Option<Value>,
    sub: Option<Value>,
    task_id: Option<Value>,
    parent_task_id: Option<Value>,
    // As written: a Value cannot hold seconds past f64 (1e400), which are
    // still a time, later than any other.
    #[serde(borrow)]
    iat: Option<&'a RawValue>,
    #[serde(borrow)]
    exp: Option<&'a RawValue>,
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
        iat: instant(raw.iat, "iat")?,
        exp: instant(raw.exp, "exp")?,
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

/// RFC 3339 text (to the nanosecond) or seconds since the epoch (integer or
/// fractional, to the microsecond). Seconds beyond the range of the
/// timestamp columns are clamped to its ends (time::MIN_US, MAX_US): an exp
/// of 1e15 s still never expires and an iat of 1e15 s is still in the
/// future, and every check runs on them.
fn instant(v: Option<&RawValue>, name: &str) -> Result<Option<Instant>, String> {
    let Some(raw) = v.map(RawValue::get) else {
        return Ok(None);
    };
    match raw.as_bytes().first() {
        Some(b'"') => {
            let s: String = serde_json::from_str(raw).map_err(|e| format!("claim {name}: {e}"))?;
            super::time::parse_instant(&s)
                .map(Some)
                .map_err(|e| format!("claim {name}: {e}"))
        }
        Some(b'-' | b'0'..=b'9') => {
            // Past f64's range only the sign is left to know.
            let seconds = serde_json::from_str::<f64>(raw).unwrap_or(if raw.starts_with('-') {
                f64::NEG_INFINITY
            } else {
                f64::INFINITY
            });
            // `as` saturates (infinities included); the clamp is exact.
            let us = (seconds * 1e6).round() as i64;
            let us = us.clamp(super::time::MIN_US, super::time::MAX_US);
            Ok(Some(Instant::from_us(us)))
        }
        _ => {
            let shown =
                serde_json::from_str::<Value>(raw).map_or(raw.to_string(), |v| v.to_string());
            Err(format!(
                "claim {name} is neither RFC 3339 nor seconds: {shown}"
            ))
        }
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
        assert_eq!(bare.iat.map(Instant::us), Some(1_752_141_600_000_000));
        assert!(bare.exp.is_some());
    }

    #[test]
    fn opaque_values_do_not_decode() {
        assert!(decode("ht_abc123").is_err());
        assert!(decode("a.b").is_err());
        assert!(decode(&enc("[1,2]")).is_err());
        assert!(decode(&enc(r#"{"exp":true}"#)).is_err());
        let e = decode(&enc(r#"{"exp":{"s": 1}}"#)).unwrap_err();
        assert_eq!(e, r#"claim exp is neither RFC 3339 nor seconds: {"s":1}"#);
    }

    #[test]
    fn seconds_past_the_range_are_its_ends() {
        use crate::ingest::time::{MAX_US, MIN_US};
        let times = |iat: &str, exp: &str| {
            let c = decode(&enc(&format!(r#"{{"iat":{iat},"exp":{exp}}}"#))).unwrap();
            (c.iat.unwrap().us(), c.exp.unwrap().us())
        };
        // Inside the range: exact, as before (1e12 s is the year 33658).
        assert_eq!(
            times("1e12", "1752141600.5"),
            (1_000_000_000_000_000_000, 1_752_141_600_500_000)
        );
        for (big, small) in [
            ("1e13", "-1e13"),
            ("1e400", "-1e400"),
            ("18446744073709551616", "-9e15"),
        ] {
            assert_eq!(times(big, small), (MAX_US, MIN_US), "{big} {small}");
        }
        // RFC 3339 at the ends of its range, offsets included.
        let c = decode(&enc(
            r#"{"iat":"0000-01-01T00:00:00+23:59","exp":"9999-12-31T23:59:59.999999-23:59"}"#,
        ))
        .unwrap();
        assert!(c.iat.unwrap() < c.exp.unwrap());
        let c = decode(&enc(r#"{"iat":null,"exp":0}"#)).unwrap();
        assert_eq!((c.iat, c.exp), (None, Some(Instant::from_us(0))));
    }

    #[test]
    fn times_keep_their_nanoseconds() {
        let c = decode(&enc(
            r#"{"iat":"2026-07-14T12:00:00.000000001Z","exp":1752141600.5}"#,
        ))
        .unwrap();
        let whole = crate::ingest::time::parse_instant("2026-07-14T12:00:00Z").unwrap();
        assert_eq!(c.iat.unwrap().ns() - whole.ns(), 1);
        assert_eq!(c.exp.unwrap().ns(), 1_752_141_600_500_000_000);
        // seconds past i64 nanoseconds: its end, as for created_at
        let c = decode(&enc(r#"{"iat":-1e13,"exp":1e15}"#)).unwrap();
        assert_eq!(
            (c.iat.unwrap().ns(), c.exp.unwrap().ns()),
            (i64::MIN, i64::MAX)
        );
    }
}
