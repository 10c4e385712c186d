//! The canonical text of a JSON value: one spelling per value, so that two
//! texts hold the same JSON value exactly when their canonical texts are
//! the same bytes (docs/protocol.md, identity).
//!
//! - Objects: members sorted by key (the canonical key text, byte by byte);
//!   a key named twice in one object, at any depth, is an error (I-JSON).
//! - Strings: escapes decoded, then written with `\"`, `\\` and `\u00xx` for
//!   control characters and nothing else escaped; a lone surrogate (which
//!   JSON text can hold, UTF-8 cannot) as `\udxxx`.
//! - Numbers: the exact decimal value as `[-]DIGITS[eEXP]`, the digits
//!   without leading or trailing zeros: `1`, `1.0`, `1e0` and `10e-1` are
//!   all `1`, `0` and `-0` are `0`, and no digit is ever rounded away
//!   (`12345678901234567890` and `…891` stay two values).
//! - No white space.
//!
//! The walk keeps its own stack, so nesting of any depth costs memory, not
//! the thread's stack.

use std::borrow::Cow;
use std::cmp::Ordering;
use std::ops::Range;

/// Why a text has no canonical form.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum CanonicalError {
    /// An object names this key twice (the key as decoded, clipped).
    RepeatedKey(String),
    /// Not one JSON value (the text was not checked before).
    Malformed,
}

impl std::fmt::Display for CanonicalError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            CanonicalError::RepeatedKey(k) => write!(f, "duplicate key `{k}`"),
            CanonicalError::Malformed => f.write_str("not a JSON value"),
        }
    }
}

/// Writes canonical texts, reusing its buffers from one value to the next.
#[derive(Default)]
pub struct Canonicalizer {
    out: Vec<u8>,
    stack: Vec<Frame>,
    members: Vec<Member>,
    scratch: Vec<u8>,
    /// A line's members in `object`'s order: (rank, index, where the
    /// key's canonical text lies in `keys`).
    order: Vec<(u16, usize, Range<usize>)>,
    /// The canonical texts of a line's keys.
    keys: Vec<u8>,
}

enum Frame {
    /// An open object: its members are `members[from..]`, its text starts
    /// at `out[start]` (after the `{`), and the key whose value is being
    /// read, if any.
    Object {
        from: usize,
        start: usize,
        key: Option<Range<usize>>,
    },
    /// An open array.
    Array,
}

/// One member of an open object, as written to `out`.
struct Member {
    key: Range<usize>,
    /// `key:value`.
    all: Range<usize>,
}

impl Canonicalizer {
    /// The canonical text of the JSON value `raw` (white space around it
    /// allowed), valid until the next call.
    pub fn canonical(&mut self, raw: &str) -> Result<&[u8], CanonicalError> {
        self.out.clear();
        self.stack.clear();
        self.members.clear();
        match self.walk(raw.as_bytes()) {
            Some(Ok(())) => Ok(&self.out),
            Some(Err(e)) => Err(e),
            None => Err(CanonicalError::Malformed),
        }
    }

    /// The canonical text of the object whose members (keys decoded,
    /// values raw, no key twice) are `members`, valid until the next call:
    /// the same bytes as [`Self::canonical`] gives for the object's text.
    /// Two of the envelope's names compare by a fixed rank, in their
    /// canonical order, instead of by bytes (a line is hashed this way, and
    /// sorting its members was most of reading one).
    pub fn object(&mut self, members: &[(Cow<'_, str>, &str)]) -> Result<&[u8], CanonicalError> {
        self.out.clear();
        self.stack.clear();
        self.members.clear();
        self.keys.clear();
        let mut order = std::mem::take(&mut self.order);
        order.clear();
        for (i, (key, _)) in members.iter().enumerate() {
            let start = self.keys.len();
            push_string(&mut self.keys, key);
            order.push((rank(key), i, start..self.keys.len()));
        }
        let keys = &self.keys;
        order.sort_unstable_by(|a, b| {
            if (a.0 as usize) < RANKED.len() && (b.0 as usize) < RANKED.len() {
                a.0.cmp(&b.0)
            } else {
                keys[a.2.clone()].cmp(&keys[b.2.clone()])
            }
        });
        self.out.push(b'{');
        let mut result = Ok(());
        for (n, (_, i, key)) in order.iter().enumerate() {
            if n > 0 {
                self.out.push(b',');
            }
            self.out.extend_from_slice(&self.keys[key.clone()]);
            self.out.push(b':');
            let bytes = members[*i].1.as_bytes();
            match bytes.first() {
                // A string without escapes is written as it is canonical.
                Some(b'"') if memchr::memchr(b'\\', bytes).is_none() => {
                    self.out.extend_from_slice(bytes)
                }
                _ => match self.walk(bytes) {
                    Some(Ok(())) => {}
                    Some(Err(e)) => {
                        result = Err(e);
                        break;
                    }
                    None => {
                        result = Err(CanonicalError::Malformed);
                        break;
                    }
                },
            }
        }
        self.order = order;
        result?;
        self.out.push(b'}');
        Ok(&self.out)
    }

    /// None when the text is not JSON.
    fn walk(&mut self, b: &[u8]) -> Option<Result<(), CanonicalError>> {
        let mut i = skip_ws(b, 0);
        loop {
            // A value starts at i.
            match *b.get(i)? {
                b'{' => {
                    self.out.push(b'{');
                    self.stack.push(Frame::Object {
                        from: self.members.len(),
                        start: self.out.len(),
                        key: None,
                    });
                    i = skip_ws(b, i + 1);
                    if b.get(i) == Some(&b'}') {
                        i += 1;
                        if let Err(e) = self.close_object() {
                            return Some(Err(e));
                        }
                    } else {
                        i = self.key(b, i)?;
                        continue;
                    }
                }
                b'[' => {
                    self.out.push(b'[');
                    self.stack.push(Frame::Array);
                    i = skip_ws(b, i + 1);
                    if b.get(i) == Some(&b']') {
                        i += 1;
                        self.stack.pop();
                        self.out.push(b']');
                    } else {
                        continue;
                    }
                }
                b'"' => i = string(b, i + 1, &mut self.out)?,
                b't' => i = self.literal(b, i, b"true")?,
                b'f' => i = self.literal(b, i, b"false")?,
                b'n' => i = self.literal(b, i, b"null")?,
                b'-' | b'0'..=b'9' => i = number(b, i, &mut self.out)?,
                _ => return None,
            }
            // A value ended at i: close what it ends, until a comma or the end.
            loop {
                i = skip_ws(b, i);
                let Some(frame) = self.stack.last_mut() else {
                    return (i == b.len()).then_some(Ok(()));
                };
                match frame {
                    Frame::Object { key, .. } => {
                        let key = key.take()?;
                        let all = key.start..self.out.len();
                        self.members.push(Member { key, all });
                        match *b.get(i)? {
                            b',' => {
                                i = self.key(b, skip_ws(b, i + 1))?;
                                break;
                            }
                            b'}' => {
                                i += 1;
                                if let Err(e) = self.close_object() {
                                    return Some(Err(e));
                                }
                            }
                            _ => return None,
                        }
                    }
                    Frame::Array => match *b.get(i)? {
                        b',' => {
                            self.out.push(b',');
                            i = skip_ws(b, i + 1);
                            break;
                        }
                        b']' => {
                            i += 1;
                            self.stack.pop();
                            self.out.push(b']');
                        }
                        _ => return None,
                    },
                }
            }
        }
    }

    /// A member's key and colon at `i`; returns where its value starts.
    fn key(&mut self, b: &[u8], i: usize) -> Option<usize> {
        if b.get(i) != Some(&b'"') {
            return None;
        }
        let start = self.out.len();
        let end = string(b, i + 1, &mut self.out)?;
        let key_range = start..self.out.len();
        self.out.push(b':');
        let i = skip_ws(b, end);
        if b.get(i) != Some(&b':') {
            return None;
        }
        match self.stack.last_mut() {
            Some(Frame::Object { key, .. }) => *key = Some(key_range),
            _ => return None,
        }
        Some(skip_ws(b, i + 1))
    }

    fn literal(&mut self, b: &[u8], i: usize, word: &[u8]) -> Option<usize> {
        (b.get(i..i + word.len())? == word).then(|| {
            self.out.extend_from_slice(word);
            i + word.len()
        })
    }

    /// The object on top of the stack is complete: lay its members out in
    /// key order (its text ends the output), then `}`.
    fn close_object(&mut self) -> Result<(), CanonicalError> {
        let Some(Frame::Object { from, start, .. }) = self.stack.pop() else {
            return Err(CanonicalError::Malformed);
        };
        let out = &self.out;
        let members = &mut self.members[from..];
        members.sort_unstable_by(|x, y| out[x.key.clone()].cmp(&out[y.key.clone()]));
        if let Some(pair) = members
            .windows(2)
            .find(|p| out[p[0].key.clone()] == out[p[1].key.clone()])
        {
            return Err(CanonicalError::RepeatedKey(shown_key(
                &out[pair[0].key.clone()],
            )));
        }
        if members.len() > 1 {
            // Members were written without separators: gather them, in
            // key order, with commas.
            self.scratch.clear();
            for (n, m) in members.iter().enumerate() {
                if n > 0 {
                    self.scratch.push(b',');
                }
                self.scratch.extend_from_slice(&out[m.all.clone()]);
            }
            self.out.truncate(start);
            self.out.extend_from_slice(&self.scratch);
        }
        self.members.truncate(from);
        self.out.push(b'}');
        Ok(())
    }
}

/// The envelope's member names, in the order of their canonical texts
/// (byte order: none needs an escape), so that two of them compare by rank
/// ([`Canonicalizer::object`]).
macro_rules! ranked {
    ($($name:literal),* $(,)?) => {
        /// The ranked names, in rank order.
        const RANKED: &[&str] = &[$($name),*];

        /// A member name's rank in [`RANKED`] (every other name: past it).
        /// A match compiles to a comparison of lengths, then bytes.
        fn rank(name: &str) -> u16 {
            let mut rank = 0u16;
            $(
                if name == $name {
                    return rank;
                }
                rank += 1;
            )*
            rank
        }
    };
}

ranked!(
    "aep_version",
    "attestation_count",
    "belief_scope",
    "belief_status",
    "causation_id",
    "checkpoint_at",
    "checkpoint_id",
    "compensation_id",
    "confidence",
    "conversation_id",
    "correlation_id",
    "created_at",
    "data_provenance",
    "delegated_by",
    "delegated_to",
    "delivery",
    "evidence_chain",
    "expires_at",
    "handoff_token",
    "id",
    "interruption_policy",
    "parent_task_id",
    "payload",
    "payload_schema",
    "refresh_hint",
    "session_id",
    "source",
    "source_trust",
    "spec_version",
    "stale_after",
    "target",
    "task_id",
    "topic",
    "type",
    "valid_from",
    "valid_until",
);

/// A canonical key's text for a message: unquoted, at most 80 characters.
fn shown_key(canonical: &[u8]) -> String {
    let text = String::from_utf8_lossy(canonical);
    let inner = text.trim_start_matches('"').trim_end_matches('"');
    match inner.char_indices().nth(80) {
        Some((at, _)) => format!("{}…", &inner[..at]),
        None => inner.to_string(),
    }
}

fn skip_ws(b: &[u8], mut i: usize) -> usize {
    while let Some(b' ' | b'\n' | b'\t' | b'\r') = b.get(i) {
        i += 1;
    }
    i
}

/// Write the canonical text of the string whose body starts at `i` (after
/// its opening quote); returns the index after its closing quote.
fn string(b: &[u8], mut i: usize, out: &mut Vec<u8>) -> Option<usize> {
    out.push(b'"');
    loop {
        let special = super::members::next_special(b, i);
        out.extend_from_slice(b.get(i..special)?);
        i = special;
        match *b.get(i)? {
            b'"' => {
                out.push(b'"');
                return Some(i + 1);
            }
            b'\\' => {
                let (unit, next) = match *b.get(i + 1)? {
                    b'"' => (u32::from(b'"'), i + 2),
                    b'\\' => (u32::from(b'\\'), i + 2),
                    b'/' => (u32::from(b'/'), i + 2),
                    b'b' => (0x08, i + 2),
                    b'f' => (0x0c, i + 2),
                    b'n' => (0x0a, i + 2),
                    b'r' => (0x0d, i + 2),
                    b't' => (0x09, i + 2),
                    b'u' => (hex4(b, i + 2)?, i + 6),
                    _ => return None,
                };
                i = next;
                if (0xD800..0xDC00).contains(&unit)
                    && b.get(i..i + 2) == Some(b"\\u")
                    && let Some(low) = hex4(b, i + 2).filter(|l| (0xDC00..0xE000).contains(l))
                {
                    let c = 0x10000 + ((unit - 0xD800) << 10) + (low - 0xDC00);
                    push_char(out, char::from_u32(c)?);
                    i += 6;
                } else if (0xD800..0xE000).contains(&unit) {
                    // A lone surrogate: it has no UTF-8 form.
                    out.extend_from_slice(format!("\\u{unit:04x}").as_bytes());
                } else {
                    push_char(out, char::from_u32(unit)?);
                }
            }
            // A raw control character: not JSON.
            _ => return None,
        }
    }
}

fn hex4(b: &[u8], i: usize) -> Option<u32> {
    let digits = b.get(i..i + 4)?;
    digits.iter().try_fold(0u32, |v, d| {
        let d = (*d as char).to_digit(16)?;
        Some(v * 16 + d)
    })
}

/// One decoded character of a string, in its canonical spelling.
fn push_char(out: &mut Vec<u8>, c: char) {
    match c {
        '"' => out.extend_from_slice(b"\\\""),
        '\\' => out.extend_from_slice(b"\\\\"),
        c if (c as u32) < 0x20 => out.extend_from_slice(format!("\\u{:04x}", c as u32).as_bytes()),
        c => {
            let mut buf = [0u8; 4];
            out.extend_from_slice(c.encode_utf8(&mut buf).as_bytes());
        }
    }
}

/// The canonical spelling of a string value (already decoded), as
/// `string` writes it.
pub fn push_string(out: &mut Vec<u8>, s: &str) {
    out.push(b'"');
    if s.bytes().all(|b| b >= 0x20 && b != b'"' && b != b'\\') {
        out.extend_from_slice(s.as_bytes());
    } else {
        for c in s.chars() {
            push_char(out, c);
        }
    }
    out.push(b'"');
}

/// Write the canonical text of the number at `i`; returns its end.
fn number(b: &[u8], mut i: usize, out: &mut Vec<u8>) -> Option<usize> {
    let digits = |mut i: usize| {
        while let Some(b'0'..=b'9') = b.get(i) {
            i += 1;
        }
        i
    };
    let negative = b.get(i) == Some(&b'-');
    if negative {
        i += 1;
    }
    let int_start = i;
    match *b.get(i)? {
        b'0' => i += 1,
        b'1'..=b'9' => i = digits(i + 1),
        _ => return None,
    }
    let int = &b[int_start..i];
    let mut frac: &[u8] = &[];
    if b.get(i) == Some(&b'.') {
        let end = digits(i + 1);
        if end == i + 1 {
            return None;
        }
        frac = &b[i + 1..end];
        i = end;
    }
    let mut exp_negative = false;
    let mut exp: &[u8] = &[];
    if let Some(b'e' | b'E') = b.get(i) {
        i += 1;
        match b.get(i) {
            Some(b'-') => {
                exp_negative = true;
                i += 1;
            }
            Some(b'+') => i += 1,
            _ => {}
        }
        let end = digits(i);
        if end == i {
            return None;
        }
        exp = &b[i..end];
        i = end;
    }
    write_number(out, negative, int, frac, exp_negative, exp);
    Some(i)
}

/// The canonical text of `[-]int.frac e[-]exp` (digits only, any length).
fn write_number(
    out: &mut Vec<u8>,
    negative: bool,
    int: &[u8],
    frac: &[u8],
    exp_negative: bool,
    exp: &[u8],
) {
    let all = || int.iter().chain(frac.iter()).copied();
    let Some(first) = all().position(|d| d != b'0') else {
        out.push(b'0');
        return;
    };
    let len = int.len() + frac.len();
    let last = len - 1 - all().rev().position(|d| d != b'0').unwrap_or(0);
    if negative {
        out.push(b'-');
    }
    out.extend(all().skip(first).take(last - first + 1));
    // The value is DIGITS x 10^(exp - frac.len() + trailing zeros).
    let shift = (len - 1 - last) as i64 - frac.len() as i64;
    let exp = exp
        .iter()
        .position(|d| *d != b'0')
        .map_or(&[][..], |at| &exp[at..]);
    let total = add_small(exp_negative, exp, shift);
    if total != (false, vec![]) {
        out.push(b'e');
        if total.0 {
            out.push(b'-');
        }
        out.extend_from_slice(&total.1);
    }
}

/// `(negative, digits)` + `delta`, exactly, as `(negative, digits)`;
/// digits without leading zeros (none for zero, which is never negative).
fn add_small(negative: bool, digits: &[u8], delta: i64) -> (bool, Vec<u8>) {
    if digits.len() <= 18 {
        // Both fit an i128 with room to spare.
        let mut v: i128 = digits
            .iter()
            .fold(0i128, |v, d| v * 10 + i128::from(d - b'0'));
        if negative {
            v = -v;
        }
        let v = v + i128::from(delta);
        if v == 0 {
            return (false, Vec::new());
        }
        return (v < 0, v.unsigned_abs().to_string().into_bytes());
    }
    // |digits| >= 10^18 > |delta|: the sign stays; the magnitude moves by
    // delta, towards zero when the signs differ.
    let magnitude = if negative { -delta } else { delta };
    let mut out = digits.to_vec();
    let mut carry = i128::from(magnitude);
    let mut at = out.len();
    while carry != 0 {
        if at == 0 {
            out.insert(0, b'0');
            at = 1;
        }
        at -= 1;
        let d = i128::from(out[at] - b'0') + carry;
        carry = d.div_euclid(10);
        out[at] = b'0' + d.rem_euclid(10) as u8;
    }
    let zeros = out.iter().take_while(|d| **d == b'0').count();
    out.drain(..zeros);
    (negative, out)
}

/// Append the canonical text of the JSON scalar `raw` (a string, number,
/// `true`, `false` or `null`, nothing around it); None when it is not one.
pub fn scalar(raw: &str, out: &mut Vec<u8>) -> Option<()> {
    let b = raw.as_bytes();
    let end = match *b.first()? {
        b'"' => string(b, 1, out)?,
        b'-' | b'0'..=b'9' => number(b, 0, out)?,
        _ if matches!(raw, "true" | "false" | "null") => {
            out.extend_from_slice(b);
            b.len()
        }
        _ => return None,
    };
    (end == b.len()).then_some(())
}

/// The canonical text of a JSON number given as text (a member read as a
/// number: `confidence`, `attestation_count`).
pub fn number_text(raw: &str) -> Option<String> {
    let mut out = Vec::new();
    let end = number(raw.as_bytes(), 0, &mut out)?;
    (end == raw.len()).then(|| String::from_utf8(out).expect("digits, '-' and 'e' are ASCII"))
}

/// Compare two JSON texts by value (their canonical texts); a text with
/// no canonical form sorts after every one that has, and equals only
/// itself as text.
pub fn compare(c: &mut Canonicalizer, x: &str, y: &str) -> Ordering {
    if x == y {
        return Ordering::Equal;
    }
    let left = c.canonical(x).map(<[u8]>::to_vec);
    let right = c.canonical(y).map(<[u8]>::to_vec);
    match (left, right) {
        (Ok(l), Ok(r)) => l.cmp(&r),
        (Ok(_), Err(_)) => Ordering::Less,
        (Err(_), Ok(_)) => Ordering::Greater,
        (Err(_), Err(_)) => x.cmp(y),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn canon(text: &str) -> Result<String, CanonicalError> {
        Canonicalizer::default()
            .canonical(text)
            .map(|b| String::from_utf8(b.to_vec()).unwrap())
    }

    #[test]
    fn numbers_compare_by_exact_decimal_value() {
        for same in [
            ["1", "1.0", "1e0", "10e-1"],
            ["0", "-0", "0.000", "0e99"],
            ["100", "1e2", "1.00e2", "1000e-1"],
            ["-2.5", "-25e-1", "-0.25E1", "-2.50"],
        ] {
            let first = canon(same[0]).unwrap();
            for other in same {
                assert_eq!(canon(other).unwrap(), first, "{other}");
            }
        }
        assert_ne!(
            canon("12345678901234567890").unwrap(),
            canon("12345678901234567891").unwrap()
        );
        assert_eq!(
            canon("12345678901234567890").unwrap(),
            "1234567890123456789e1"
        );
        assert_eq!(canon("0.5").unwrap(), "5e-1");
        assert_ne!(canon("1e400").unwrap(), canon("1e401").unwrap());
    }

    #[test]
    fn exponents_of_any_length_stay_exact() {
        let big = "9".repeat(40);
        // 1e(10^40 - 1) and 10e(10^40 - 2) are one value; 1e(10^40) another.
        let a = canon(&format!("1e{big}")).unwrap();
        let b = canon(&format!("10e{}8", "9".repeat(39))).unwrap();
        assert_eq!(a, b);
        let c = canon(&format!("1e1{}", "0".repeat(40))).unwrap();
        assert_ne!(a, c);
        assert_eq!(c, format!("1e1{}", "0".repeat(40)));
        // Carrying into a new digit, and borrowing out of one.
        assert_eq!(
            canon(&format!("10e{big}")).unwrap(),
            format!("1e1{}", "0".repeat(40))
        );
        assert_eq!(
            canon(&format!("0.1e1{}", "0".repeat(40))).unwrap(),
            format!("1e{big}")
        );
        assert_eq!(canon(&format!("1e-{big}")).unwrap(), format!("1e-{big}"));
        assert_eq!(canon("1e000000000000000000000000000005").unwrap(), "1e5");
    }

    #[test]
    fn strings_have_one_spelling() {
        assert_eq!(canon(r#""\u00e9""#).unwrap(), canon(r#""é""#).unwrap());
        assert_eq!(canon(r#""a\/b""#).unwrap(), r#""a/b""#);
        assert_eq!(canon(r#""\n\u000A""#).unwrap(), r#""\u000a\u000a""#);
        assert_eq!(canon(r#""\"\\""#).unwrap(), r#""\"\\""#);
        assert_eq!(canon(r#""\ud83d\ude00""#).unwrap(), "\"😀\"");
        assert_eq!(canon(r#""\uD800x""#).unwrap(), r#""\ud800x""#);
        assert_ne!(
            canon(r#""2026-07-14T12:00:00Z""#).unwrap(),
            canon(r#""2026-07-14T14:00:00+02:00""#).unwrap()
        );
    }

    #[test]
    fn members_are_sorted_and_white_space_goes() {
        assert_eq!(
            canon(r#" { "b" : [ 1 , {"z":null,"a":true} ], "a": {} } "#).unwrap(),
            r#"{"a":{},"b":[1,{"a":true,"z":null}]}"#
        );
        assert_eq!(canon("[]").unwrap(), "[]");
        assert_eq!(canon("{}").unwrap(), "{}");
        // Keys sort by their canonical text: an escaped key where its
        // character would be.
        assert_eq!(canon(r#"{"\u0062":1,"a":2}"#).unwrap(), r#"{"a":2,"b":1}"#);
    }

    #[test]
    fn a_repeated_key_at_any_depth_is_refused() {
        for text in [
            r#"{"a":1,"a":2}"#,
            r#"{"p":{"a":1,"a":1}}"#,
            r#"{"p":[{"x":{"k":1,"\u006b":2}}]}"#,
        ] {
            assert!(
                matches!(canon(text), Err(CanonicalError::RepeatedKey(_))),
                "{text}"
            );
        }
        assert_eq!(
            canon(r#"{"p":{"a":1,"a":2}}"#),
            Err(CanonicalError::RepeatedKey("a".into()))
        );
        // The same key in sibling objects is fine.
        assert!(canon(r#"[{"a":1},{"a":2}]"#).is_ok());
    }

    #[test]
    fn an_objects_members_have_one_spelling_in_any_order() {
        fn object(text: &str) -> Result<String, CanonicalError> {
            let members = crate::ingest::members::read(text, true).unwrap();
            Canonicalizer::default()
                .object(&members)
                .map(|b| String::from_utf8(b.to_vec()).unwrap())
        }
        let a = object(r#"{"payload":{"b":1,"a":[1.0]},"zz":"\u00e9","id":"e1","aa":2}"#).unwrap();
        let b = object(r#"{ "aa" : 2e0, "id" : "e1", "zz" : "é", "payload" : {"a":[1],"b":1} }"#)
            .unwrap();
        assert_eq!(a, b);
        // The same bytes as the whole text's canonical form.
        assert_eq!(
            a,
            r#"{"aa":2,"id":"e1","payload":{"a":[1],"b":1},"zz":"é"}"#
        );
        let text = r#"{"type":"t","a\"b":1,"a":2,"id\u0001":3,"id":4,"payload":{}}"#;
        assert_eq!(
            object(text).unwrap().as_bytes(),
            canon(text).unwrap().as_bytes()
        );
        assert!(matches!(
            object(r#"{"id":"e1","payload":{"x":{"k":1,"k":2}}}"#),
            Err(CanonicalError::RepeatedKey(_))
        ));
    }

    #[test]
    fn the_ranked_names_are_in_canonical_order() {
        for pair in RANKED.windows(2) {
            let (mut x, mut y) = (Vec::new(), Vec::new());
            push_string(&mut x, pair[0]);
            push_string(&mut y, pair[1]);
            assert!(x < y, "{} before {}", pair[0], pair[1]);
        }
    }

    #[test]
    fn deep_nesting_costs_no_stack() {
        let depth = 200_000;
        let text = format!("{}{}", "[".repeat(depth), "]".repeat(depth));
        assert_eq!(canon(&text).unwrap(), text);
        let objects = format!("{}1{}", r#"{"a":"#.repeat(depth), "}".repeat(depth));
        assert_eq!(canon(&objects).unwrap(), objects);
    }

    #[test]
    fn what_is_not_json_has_no_canonical_form() {
        for bad in [
            "",
            "{",
            "[1,]",
            "{\"a\"}",
            "01",
            "1.",
            "\"\u{1}\"",
            "tru",
            "1 2",
            "{\"a\":1,}",
        ] {
            assert_eq!(canon(bad), Err(CanonicalError::Malformed), "{bad:?}");
        }
    }

    /// A JSON value with its spelling varied: member order, white space,
    /// escapes and number forms. Returns (one text, another text of the
    /// same value).
    fn spellings() -> impl Strategy<Value = (String, String)> {
        let number =
            (any::<bool>(), 0u32..1000, 0u32..4, -3i32..4).prop_map(|(neg, n, zeros, e)| {
                let sign = if neg { "-" } else { "" };
                // n x 10^e, written as itself and with zeros moved around.
                let a = format!("{sign}{n}e{e}");
                let b = if n == 0 {
                    format!("{sign}0.{}", "0".repeat(zeros as usize + 1))
                } else {
                    format!(
                        "{sign}{n}{}e{}",
                        "0".repeat(zeros as usize),
                        e - zeros as i32
                    )
                };
                (a, b)
            });
        let text = prop::collection::vec(
            prop::sample::select(vec!['a', 'é', '"', '\\', '\n', '/', '😀']),
            0..5,
        )
        .prop_map(|chars| {
            let s: String = chars.iter().collect();
            let plain = serde_json::to_string(&s).unwrap();
            let escaped: String = std::iter::once("\"".to_string())
                .chain(s.encode_utf16().map(|u| format!("\\u{u:04X}")))
                .chain(std::iter::once("\"".to_string()))
                .collect();
            (plain, escaped)
        });
        let leaf = prop_oneof![
            number,
            text,
            Just(("true".to_string(), " true ".to_string()))
        ];
        leaf.prop_recursive(3, 16, 4, |inner| {
            prop_oneof![
                prop::collection::vec(inner.clone(), 0..4).prop_map(|items| {
                    let a: Vec<String> = items.iter().map(|(x, _)| x.clone()).collect();
                    let b: Vec<String> = items.iter().map(|(_, y)| format!(" {y}\n")).collect();
                    (format!("[{}]", a.join(",")), format!("[ {} ]", b.join(",")))
                }),
                prop::collection::btree_map("[a-d]{1,2}", inner, 0..4).prop_map(|members| {
                    let a: Vec<String> = members
                        .iter()
                        .map(|(k, (x, _))| format!("\"{k}\":{x}"))
                        .collect();
                    let b: Vec<String> = members
                        .iter()
                        .rev()
                        .map(|(k, (_, y))| format!("\"{k}\" : {y}"))
                        .collect();
                    (
                        format!("{{{}}}", a.join(",")),
                        format!("{{ {} }}", b.join(" , ")),
                    )
                }),
            ]
        })
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(2000))]

        #[test]
        fn spellings_of_one_value_have_one_canonical_text((a, b) in spellings()) {
            let (ca, cb) = (canon(&a).unwrap(), canon(&b).unwrap());
            prop_assert_eq!(&ca, &cb);
            // The canonical text is JSON, and canonical.
            prop_assert_eq!(canon(&ca).unwrap(), ca.clone());
            // serde_json, reading and writing the value its own way (its
            // floats are exact for these small numbers), gives one too.
            let original: serde_json::Value = serde_json::from_str(&a).unwrap();
            prop_assert_eq!(canon(&original.to_string()).unwrap(), ca);
        }

        #[test]
        fn different_values_have_different_canonical_texts(
            (a, _) in spellings(), (b, _) in spellings()
        ) {
            let (va, vb): (serde_json::Value, serde_json::Value) =
                (serde_json::from_str(&a).unwrap(), serde_json::from_str(&b).unwrap());
            if va != vb && !a.contains('e') && !b.contains('e') {
                prop_assert_ne!(canon(&a).unwrap(), canon(&b).unwrap());
            }
        }
    }
}
