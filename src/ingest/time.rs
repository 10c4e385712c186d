//! Instants and durations as the protocol writes them.

use chrono::{DateTime, NaiveDate, Utc};

/// Parse an RFC 3339 instant (any offset, fractional seconds, leap second)
/// into microseconds since the epoch, UTC.
pub fn parse_instant_us(text: &str) -> Result<i64, String> {
    match DateTime::parse_from_rfc3339(text) {
        Ok(t) => Ok(t.with_timezone(&Utc).timestamp_micros()),
        Err(e) => {
            // Say what is wrong in terms the log writer understands.
            let hint = if text.len() >= 19 && !has_offset(text) {
                "no UTC offset (add Z or +hh:mm)".to_string()
            } else {
                e.to_string()
            };
            Err(format!("not an RFC 3339 instant: {hint}"))
        }
    }
}

fn has_offset(text: &str) -> bool {
    // The last six characters (not bytes: the text may be any UTF-8).
    let tail = text
        .char_indices()
        .rev()
        .nth(5)
        .map_or(text, |(at, _)| &text[at..]);
    text.ends_with(['Z', 'z']) || tail.contains(['+', '-'])
}

/// Parse an ISO 8601 duration (PnYnMnDTnHnMnS or PnW) into milliseconds.
/// Years count as 365 days and months as 30 days, as the duration has no
/// anchor date.
pub fn parse_duration_ms(text: &str) -> Result<i64, String> {
    let t = text.trim();
    let err = || format!("not an ISO 8601 duration: {t:?}");
    if !t.starts_with(['P', 'p']) || t.len() < 3 {
        return Err(err());
    }
    let d = iso8601::duration(t).map_err(|_| err())?;
    let std: std::time::Duration = d.into();
    i64::try_from(std.as_millis()).map_err(|_| err())
}

/// Format microseconds since the epoch as RFC 3339 UTC with milliseconds.
pub fn fmt_us(us: i64) -> String {
    match DateTime::<Utc>::from_timestamp_micros(us) {
        Some(t) => crate::finding::fmt_instant(&t),
        None => us.to_string(),
    }
}

/// Microseconds since the epoch of a UTC midnight, for day partitioning.
pub fn day_of_us(us: i64) -> NaiveDate {
    DateTime::<Utc>::from_timestamp_micros(us)
        .map(|t| t.date_naive())
        .unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn instants_in_any_offset_compare_as_utc() {
        let a = parse_instant_us("2026-07-14T12:30:10Z").unwrap();
        let b = parse_instant_us("2026-07-14T14:30:10+02:00").unwrap();
        let c = parse_instant_us("2026-07-14T12:30:10.000000Z").unwrap();
        assert_eq!(a, b);
        assert_eq!(a, c);
        assert_eq!(
            parse_instant_us("2026-07-14T12:30:10.5Z").unwrap() - a,
            500_000
        );
    }

    #[test]
    fn extreme_years_and_leap_second_parse() {
        assert!(parse_instant_us("0001-01-01T00:00:00Z").is_ok());
        assert!(parse_instant_us("9999-12-31T23:59:59.999999Z").is_ok());
        assert!(parse_instant_us("2016-12-31T23:59:60Z").is_ok());
    }

    #[test]
    fn missing_offset_is_named() {
        let e = parse_instant_us("2026-07-14T12:30:10").unwrap_err();
        assert!(e.contains("no UTC offset"), "{e}");
        assert!(parse_instant_us("yesterday").is_err());
    }

    #[test]
    fn non_ascii_text_is_an_error_not_a_panic() {
        // Found by fuzzing: the offset check sliced inside a character.
        for t in ["2026-07-14T10:00ü00000", "~201ask_8:0\u{5a0}\u{21a}276?d"] {
            assert!(parse_instant_us(t).is_err(), "{t}");
        }
    }

    #[test]
    fn durations() {
        assert_eq!(parse_duration_ms("PT5M").unwrap(), 300_000);
        assert_eq!(parse_duration_ms("P1D").unwrap(), 86_400_000);
        assert_eq!(parse_duration_ms("PT1H30M").unwrap(), 5_400_000);
        assert!(parse_duration_ms("5 minutes").is_err());
    }
}
