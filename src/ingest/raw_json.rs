//! JSON values as raw text, as sliced from a line: the text of a string
//! without escapes and the value of an integer in any of its forms, read
//! without decoding (the row builder and the payload fields share them).

/// The text of a JSON string literal without escapes: it borrows straight
/// from the line, with no decoding (the common case, checked by memchr).
pub fn unescaped(raw: &str) -> Option<&str> {
    (raw.len() >= 2 && raw.starts_with('"') && memchr::memchr(b'\\', raw.as_bytes()).is_none())
        .then(|| &raw[1..raw.len() - 1])
}

/// The value of a JSON number that is an integer in JSON Schema's sense
/// (`5000`, `5000.0`, `5e3`, `-0`, `1e400`), saturated at the ends of i64;
/// None for anything else (a fraction such as `0.5` or `5e-1`, a string,
/// ...). Exact: read from the digits, never through a float.
pub fn json_integer(raw: &str) -> Option<i64> {
    let b = raw.as_bytes();
    let (negative, b) = match b.split_first() {
        Some((b'-', rest)) => (true, rest),
        _ => (false, b),
    };
    let digits = |s: &[u8]| s.iter().take_while(|c| c.is_ascii_digit()).count();
    let n = digits(b);
    let (int, mut rest) = b.split_at(n);
    let mut frac: &[u8] = &[];
    if let Some((b'.', tail)) = rest.split_first() {
        (frac, rest) = tail.split_at(digits(tail));
        if frac.is_empty() {
            return None;
        }
    }
    // The exponent saturates far beyond where the answer stops changing.
    let exp: i64 = match rest.split_first() {
        None => 0,
        Some((b'e' | b'E', tail)) => {
            let (sign, tail) = match tail.split_first() {
                Some((b'-', t)) => (-1, t),
                Some((b'+', t)) => (1, t),
                _ => (1, tail),
            };
            if tail.is_empty() || digits(tail) != tail.len() {
                return None;
            }
            sign * tail
                .iter()
                .fold(0i64, |e, d| (e * 10 + i64::from(d - b'0')).min(1 << 40))
        }
        _ => return None,
    };
    if int.is_empty() {
        return None;
    }
    // The value is the digits int ++ frac times 10^(exp - frac.len()).
    let all = |i: usize| {
        if i < int.len() {
            int[i]
        } else {
            frac[i - int.len()]
        }
    };
    let len = int.len() + frac.len();
    let Some(first) = (0..len).find(|&i| all(i) != b'0') else {
        return Some(0);
    };
    let last = (0..len).rev().find(|&i| all(i) != b'0').unwrap_or(first);
    // Trailing zeros move into the exponent: what is left below 10^0 is a
    // fraction (the last significant digit is not a zero).
    let scale = exp - frac.len() as i64 + (len - 1 - last) as i64;
    if scale < 0 {
        return None;
    }
    let significant = last - first + 1;
    let magnitude = if significant as i64 + scale > 19 {
        u128::MAX
    } else {
        let d = (first..=last).fold(0u128, |v, i| v * 10 + u128::from(all(i) - b'0'));
        d * 10u128.pow(scale as u32)
    };
    Some(if negative {
        i64::try_from(-i128::try_from(magnitude).unwrap_or(i128::MAX)).unwrap_or(i64::MIN)
    } else {
        i64::try_from(magnitude).unwrap_or(i64::MAX)
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn json_integers_in_every_form() {
        for (raw, want) in [
            ("0", Some(0)),
            ("-0", Some(0)),
            ("0.000", Some(0)),
            ("0e-999", Some(0)),
            ("7", Some(7)),
            ("-7", Some(-7)),
            ("5e3", Some(5000)),
            ("5E+3", Some(5000)),
            ("5000.0", Some(5000)),
            ("50000e-1", Some(5000)),
            ("0.5e4", Some(5000)),
            ("1.5e1", Some(15)),
            ("9223372036854775807", Some(i64::MAX)),
            ("9223372036854775808", Some(i64::MAX)),
            ("-9223372036854775808", Some(i64::MIN)),
            ("-9223372036854775809", Some(i64::MIN)),
            ("1e18", Some(1_000_000_000_000_000_000)),
            ("1e19", Some(i64::MAX)),
            ("1e400", Some(i64::MAX)),
            ("-1e400", Some(i64::MIN)),
            ("1e999999999999999999999999", Some(i64::MAX)),
            ("0.5", None),
            ("5e-1", None),
            ("1e-400", None),
            ("5000.000000000000000001", None),
            ("\"5\"", None),
            ("null", None),
            ("true", None),
            ("[5]", None),
            ("", None),
            ("-", None),
            ("5.", None),
            (".5", None),
            ("5e", None),
            ("5e+", None),
            ("+5", None),
        ] {
            assert_eq!(json_integer(raw), want, "{raw}");
        }
    }
}
