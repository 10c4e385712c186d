//! Instants and durations as the protocol writes them.

use chrono::{DateTime, NaiveDate, Utc};

/// Parse an RFC 3339 instant (any offset, fractional seconds, leap second)
/// into microseconds since the epoch, UTC.
pub fn parse_instant_us(text: &str) -> Result<i64, String> {
    parse_instant(text).map(Instant::us)
}

/// An instant read from a log: nanoseconds since the epoch, exactly (i128
/// holds every instant RFC 3339 can write, and its sum with any duration).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub struct Instant(i128);

impl Instant {
    /// Microseconds since the epoch (rounded down), as the timestamp
    /// columns keep them: within MIN_US..=MAX_US.
    pub fn us(self) -> i64 {
        let us = self.0.div_euclid(1000);
        us.clamp(MIN_US.into(), MAX_US.into()) as i64
    }

    /// Nanoseconds since the epoch, as the `*_ns` columns keep them: an
    /// instant past what i64 holds (before 1677-09-21T00:12:43.145224192Z,
    /// after 2262-04-11T23:47:16.854775807Z) is the nearest end, which keeps
    /// its order with every instant inside.
    pub fn ns(self) -> i64 {
        self.0.clamp(i64::MIN.into(), i64::MAX.into()) as i64
    }

    /// The instant `ms` milliseconds later (no overflow: i128).
    pub fn plus_ms(self, ms: i64) -> Instant {
        Instant(self.0 + i128::from(ms) * 1_000_000)
    }

    /// The instant `us` microseconds after the epoch.
    pub fn from_us(us: i64) -> Instant {
        Instant(i128::from(us) * 1000)
    }
}

/// Parse an RFC 3339 instant (any offset, fractional seconds, leap second)
/// to the nanosecond: fraction digits past the ninth are ignored.
pub fn parse_instant(text: &str) -> Result<Instant, String> {
    match DateTime::parse_from_rfc3339(text) {
        Ok(t) => {
            // A leap second's nanoseconds run past 10^9: 23:59:60.5 is
            // 00:00:00.5 of the next day, as timestamp_micros counts it.
            let nanos =
                i128::from(t.timestamp()) * 1_000_000_000 + i128::from(t.timestamp_subsec_nanos());
            Ok(Instant(nanos))
        }
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

/// The first and last instants every timestamp column keeps to: chrono's
/// range (about 262,000 years either side of year 0), which Arrow's display,
/// `Date64` and `to_char` can all represent. RFC 3339 text (years 0000..9999,
/// any offset) lies well inside it; only computed instants (created_at + a
/// huge stale_after) and token times given as seconds can reach past it, and
/// those are clamped to it: a point past every instant a log can carry.
pub const MIN_US: i64 = DateTime::<Utc>::MIN_UTC.timestamp_micros();
pub const MAX_US: i64 = DateTime::<Utc>::MAX_UTC.timestamp_micros();

/// Parse an ISO 8601 duration (PnYnMnDTnHnMnS or PnW, the last component
/// may have a fraction; or P<YYYY>-<MM>-<DD>T<hh>:<mm>:<ss>) into
/// milliseconds. Years count as 365 days and months as 30 days, as the
/// duration has no anchor date. A duration longer than i64 milliseconds
/// (292 million years) is i64::MAX: still a duration, longer than any log.
pub fn parse_duration_ms(text: &str) -> Result<i64, String> {
    let t = text.trim();
    let err = || format!("not an ISO 8601 duration: {t:?}");
    if !t.starts_with(['P', 'p']) || t.len() < 3 {
        return Err(err());
    }
    if let Some(ms) = designators_ms(t) {
        return Ok(ms);
    }
    // Only the alternative form goes to the iso8601 crate: on a designator
    // form it cannot read (a number past u32, a fraction of an hour) it
    // returns what it read so far, often zero, which made a basis event
    // stale the instant it was written.
    let year = t.as_bytes().get(1..5);
    if !year.is_some_and(|y| y.iter().all(u8::is_ascii_digit)) {
        return Err(err());
    }
    let d = iso8601::duration(t).map_err(|_| err())?;
    let std: std::time::Duration = d.into();
    Ok(i64::try_from(std.as_millis()).unwrap_or(i64::MAX))
}

/// PnW or P[nY][nM][nD][T[nH][nM][nS]], numbers of any length (the iso8601
/// crate reads each into a u32), a fraction (`.` or `,`) on the last
/// component only, in saturating milliseconds (fractions truncated); None
/// when `t` is not exactly that form.
fn designators_ms(t: &str) -> Option<i64> {
    const SECOND: u128 = 1000;
    const MINUTE: u128 = 60 * SECOND;
    const HOUR: u128 = 60 * MINUTE;
    const DAY: u128 = 24 * HOUR;
    let rest = t.strip_prefix('P')?.as_bytes();
    let mut total = 0u128;
    if rest.last() == Some(&b'W') {
        components(rest, &[(b'W', 7 * DAY)], &mut total)?;
    } else {
        let (date, time) = match rest.iter().position(|&c| c == b'T') {
            Some(at) => (&rest[..at], Some(&rest[at + 1..])),
            None => (rest, None),
        };
        let units = [(b'Y', 365 * DAY), (b'M', 30 * DAY), (b'D', DAY)];
        let (mut n, fraction) = components(date, &units, &mut total)?;
        if let Some(time) = time {
            let units = [(b'H', HOUR), (b'M', MINUTE), (b'S', SECOND)];
            match components(time, &units, &mut total)? {
                (0, _) => return None,
                // a fraction of a day, then hours: not the last component
                _ if fraction => return None,
                (m, _) => n += m,
            }
        }
        if n == 0 {
            return None;
        }
    }
    Some(i64::try_from(total).unwrap_or(i64::MAX))
}

/// Read `text` as components `<digits>[.<digits>]<designator>`, designators
/// from `units` in that order, each at most once, a fraction only on the
/// last; add their milliseconds to `total`. How many there were and whether
/// the last had a fraction, or None when `text` is not that.
fn components(mut text: &[u8], units: &[(u8, u128)], total: &mut u128) -> Option<(usize, bool)> {
    // Past this many units the total is beyond i64 milliseconds anyway; the
    // cap (and 20 fraction digits) keeps every product below u128::MAX.
    const CAP: u128 = u64::MAX as u128;
    let digit = |d: &u8| u128::from(d - b'0');
    let digits = |s: &[u8]| s.iter().take_while(|c| c.is_ascii_digit()).count();
    let mut units = units.iter();
    let mut count = 0;
    let mut fraction = None;
    while !text.is_empty() {
        if fraction.is_some() {
            return None;
        }
        let n = digits(text);
        if n == 0 {
            return None;
        }
        let whole = text[..n]
            .iter()
            .fold(0u128, |v, d| (v * 10 + digit(d)).min(CAP));
        text = &text[n..];
        if let Some((b'.' | b',', tail)) = text.split_first() {
            let f = digits(tail);
            if f == 0 {
                return None;
            }
            fraction = Some(&tail[..f.min(20)]);
            text = &tail[f..];
        }
        let (&designator, tail) = text.split_first()?;
        let &(_, unit) = units.find(|(d, _)| *d == designator)?;
        // "PT1.5S" is 1500 ms, "PT0.1234S" 123 ms (truncated)
        let part = fraction.map_or(0, |f: &[u8]| {
            f.iter().fold(0u128, |v, d| v * 10 + digit(d)) * unit / 10u128.pow(f.len() as u32)
        });
        *total = total.saturating_add(whole * unit + part);
        text = tail;
        count += 1;
    }
    Some((count, fraction.is_some()))
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

    #[test]
    fn durations_agree_with_the_crate_where_it_reads_them() {
        for t in [
            "PT5M",
            "P1W",
            "P1M",
            "PT1M",
            "P1Y2M3DT4H5M6S",
            "PT1.5S",
            "PT0,25S",
            "PT1.23456S",
            "P4294967295Y",
            "PT36H",
            "P0D",
        ] {
            let std: std::time::Duration = iso8601::duration(t).unwrap().into();
            let crate_ms = i64::try_from(std.as_millis()).unwrap_or(i64::MAX);
            assert_eq!(designators_ms(t), Some(crate_ms), "{t}");
        }
        // The alternative form is the crate's.
        assert_eq!(designators_ms("P0001-02-03T04:05:06"), None);
        assert_eq!(
            parse_duration_ms("P0001-02-03T04:05:06").unwrap(),
            36_993_906_000
        );
    }

    #[test]
    fn fractions_on_the_last_component() {
        assert_eq!(parse_duration_ms("PT0.5H").unwrap(), 1_800_000);
        assert_eq!(parse_duration_ms("PT1,5M").unwrap(), 90_000);
        assert_eq!(parse_duration_ms("P0.5D").unwrap(), 43_200_000);
        assert_eq!(parse_duration_ms("P1DT0.5H").unwrap(), 88_200_000);
        assert_eq!(parse_duration_ms("P1.5W").unwrap(), 907_200_000);
        assert_eq!(parse_duration_ms("PT0.0001S").unwrap(), 0);
    }

    #[test]
    fn what_the_crate_read_as_zero_or_in_part_is_not_a_duration() {
        // The crate stopped at the first part it could not read and kept
        // what it had: zero for all but the last two.
        for t in [
            "PT5X",
            "PT1.S",
            "P1DT",
            "P0.5DT1H",
            "PT1.5M30S",
            "P1Y1Y",
            "P1W2D",
            "PT5M junk",
            "PTü",
            "P12",
        ] {
            assert!(parse_duration_ms(t).is_err(), "{t}");
        }
    }

    #[test]
    fn durations_past_i64_milliseconds_saturate() {
        // The crate stops at u32 per field: these were rejected lines.
        assert_eq!(
            parse_duration_ms("P99999999999D").unwrap(),
            8_639_999_999_913_600_000
        );
        for t in [
            "P999999999999D",
            "P300000000Y",
            "PT99999999999999999999999999999999999999999S",
            "P18446744073709551616W",
        ] {
            assert_eq!(parse_duration_ms(t).unwrap(), i64::MAX, "{t}");
        }
    }

    #[test]
    fn instants_past_the_range_are_clamped_to_it() {
        let add_ms = |us, ms| Instant::from_us(us).plus_ms(ms).us();
        assert_eq!(add_ms(0, 1500), 1_500_000);
        assert_eq!(add_ms(0, i64::MAX), MAX_US);
        assert_eq!(add_ms(-1, i64::MIN), MIN_US);
        // Every instant RFC 3339 can write is inside, with room to spare.
        let first = parse_instant_us("0000-01-01T00:00:00+23:59").unwrap();
        let last = parse_instant_us("9999-12-31T23:59:59.999999-23:59").unwrap();
        assert!(MIN_US < first && last < MAX_US);
        assert!(DateTime::<Utc>::from_timestamp_micros(MAX_US).is_some());
        assert!(DateTime::<Utc>::from_timestamp_micros(MIN_US).is_some());
    }

    #[test]
    fn nanoseconds_are_exact_and_digits_past_the_ninth_are_ignored() {
        let ns = |t: &str| parse_instant(t).unwrap().ns();
        let base = ns("2026-07-14T12:30:10Z");
        assert_eq!(ns("2026-07-14T12:30:10.000000001Z") - base, 1);
        assert_eq!(ns("2026-07-14T12:30:10.123456789Z") - base, 123_456_789);
        // 12 digits: the last three are dropped, never rounded
        assert_eq!(ns("2026-07-14T12:30:10.123456789999Z") - base, 123_456_789);
        assert_eq!(
            ns("2026-07-14T14:30:10.000000002+02:00"),
            ns("2026-07-14T12:30:10.000000002Z")
        );
        // before the epoch too: the fraction counts forward from the second
        assert_eq!(ns("1969-12-31T23:59:59.999999999Z"), -1);
        assert_eq!(
            parse_instant("1969-12-31T23:59:59.999999999Z")
                .unwrap()
                .us(),
            -1
        );
    }

    #[test]
    fn microseconds_stay_what_they_were() {
        for t in [
            "2026-07-14T12:30:10Z",
            "2026-07-14T12:30:10.1234567Z",
            "2026-07-14T12:30:10.999999999999+05:30",
            "1969-12-31T23:59:59.9999995Z",
            "1601-01-01T00:00:00.000000001Z",
            "0000-01-01T00:00:00+23:59",
            "9999-12-31T23:59:59.999999999-23:59",
            "2016-12-31T23:59:60.5Z",
        ] {
            let chrono = DateTime::parse_from_rfc3339(t).unwrap().timestamp_micros();
            assert_eq!(parse_instant_us(t).unwrap(), chrono, "{t}");
            assert_eq!(parse_instant(t).unwrap().us(), chrono, "{t}");
        }
        // a leap second's half is the next day's first half second
        assert_eq!(
            parse_instant("2016-12-31T23:59:60.5Z").unwrap(),
            parse_instant("2017-01-01T00:00:00.5Z").unwrap()
        );
    }

    #[test]
    fn nanoseconds_past_i64_are_its_ends_in_order() {
        let ns = |t: &str| parse_instant(t).unwrap().ns();
        assert_eq!(ns("1677-09-21T00:12:43.145224192Z"), i64::MIN);
        assert_eq!(ns("1677-09-21T00:12:43.145224191Z"), i64::MIN);
        assert_eq!(ns("0001-01-01T00:00:00Z"), i64::MIN);
        assert_eq!(ns("2262-04-11T23:47:16.854775807Z"), i64::MAX);
        assert_eq!(ns("2262-04-11T23:47:16.854775808Z"), i64::MAX);
        assert_eq!(ns("9999-12-31T23:59:59.999999999-23:59"), i64::MAX);
        assert_eq!(
            ns("1677-09-21T00:12:43.145224193Z"),
            i64::MIN + 1,
            "the first instant inside is exact"
        );
        // a duration past every instant is the end, never a wrapped sum
        let far = parse_instant("2262-01-01T00:00:00Z").unwrap();
        assert_eq!(far.plus_ms(i64::MAX).ns(), i64::MAX);
        assert_eq!(far.plus_ms(i64::MAX).us(), MAX_US);
        let ancient = parse_instant("0001-01-01T00:00:00Z").unwrap();
        assert_eq!(
            ancient.plus_ms(3_600_000).ns(),
            i64::MIN,
            "still before 1677"
        );
    }
}
