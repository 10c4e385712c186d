//! Writing event lines: the envelope header, the `Ev` field builder, JSON
//! strings and RFC 3339 timestamps.

use super::scene::{Dialect, Id, Kind, Scene, Version};

impl Scene {
    pub fn ev(&mut self, at: i64, ty: &str, source: &str) -> Ev<'_> {
        let id = self.new_id(Kind::Evt);
        self.ev_as(at, ty, source, Version::Dialect, id)
    }

    /// An event with a chosen version field and id (planted faults).
    pub fn ev_as(&mut self, at: i64, ty: &str, source: &str, version: Version, id: Id) -> Ev<'_> {
        let start = self.buf.len();
        let b = &mut self.buf;
        b.push(b'{');
        let ver = |b: &mut Vec<u8>, k: &str, v: &str| {
            b.extend_from_slice(format!("\"{k}\":\"{v}\",").as_bytes());
        };
        match version {
            Version::Dialect => match self.dialect {
                Dialect::V01 => b.extend_from_slice(b"\"aep_version\":\"0.1\","),
                Dialect::V02 => b.extend_from_slice(b"\"spec_version\":\"0.2\","),
            },
            Version::Missing => {}
            Version::Spec(v) => ver(b, "spec_version", v),
            Version::Aep(v) => ver(b, "aep_version", v),
            Version::Legacy => {
                b.extend_from_slice(b"\"spec_version\":\"0.2\",\"aep_version\":\"0.1\",");
            }
        }
        b.extend_from_slice(b"\"id\":\"");
        id.write(b);
        b.extend_from_slice(b"\",\"type\":");
        json_str(b, ty);
        b.extend_from_slice(b",\"source\":");
        json_str(b, source);
        Ev {
            sc: self,
            id,
            at,
            start,
            first: false,
            in_payload: false,
            bad_time: None,
        }
    }
}

/// Builder of one event line: envelope fields, then `pay()` and payload
/// fields, then `end()`. Nested objects via `open`/`item` … `close`.
pub(crate) struct Ev<'s> {
    sc: &'s mut Scene,
    id: Id,
    at: i64,
    start: usize,
    first: bool,
    in_payload: bool,
    bad_time: Option<&'static str>,
}

impl Ev<'_> {
    fn key(&mut self, k: &str) {
        let b = &mut self.sc.buf;
        if !self.first {
            b.push(b',');
        }
        self.first = false;
        b.push(b'"');
        b.extend_from_slice(k.as_bytes());
        b.extend_from_slice(b"\":");
    }

    pub fn s(mut self, k: &str, v: &str) -> Self {
        self.key(k);
        json_str(&mut self.sc.buf, v);
        self
    }

    pub fn id(mut self, k: &str, v: Id) -> Self {
        self.key(k);
        let b = &mut self.sc.buf;
        b.push(b'"');
        v.write(b);
        b.push(b'"');
        self
    }

    /// An id behind a text prefix, e.g. a topic `tasks.<task id>`.
    pub fn tagged(mut self, k: &str, prefix: &str, v: Id) -> Self {
        self.key(k);
        let b = &mut self.sc.buf;
        b.push(b'"');
        b.extend_from_slice(prefix.as_bytes());
        v.write(b);
        b.push(b'"');
        self
    }

    /// A JSON literal written as is (numbers, booleans).
    pub fn raw(mut self, k: &str, json: &str) -> Self {
        self.key(k);
        self.sc.buf.extend_from_slice(json.as_bytes());
        self
    }

    pub fn opt_id(self, k: &str, v: Option<Id>) -> Self {
        match v {
            Some(v) => self.id(k, v),
            None => self,
        }
    }

    pub fn int(mut self, k: &str, v: i64) -> Self {
        self.key(k);
        self.sc.buf.extend_from_slice(v.to_string().as_bytes());
        self
    }

    /// A number in 0..=1 given in hundredths, written as 0.xx.
    pub fn frac(mut self, k: &str, hundredths: u32) -> Self {
        self.key(k);
        let b = &mut self.sc.buf;
        if hundredths >= 100 {
            b.extend_from_slice(b"1.0");
        } else {
            b.extend_from_slice(&[b'0', b'.', b'0' + (hundredths / 10) as u8]);
            if !hundredths.is_multiple_of(10) {
                b.push(b'0' + (hundredths % 10) as u8);
            }
        }
        self
    }

    pub fn ts(mut self, k: &str, ms: i64) -> Self {
        self.key(k);
        let b = &mut self.sc.buf;
        b.push(b'"');
        write_ts(b, ms);
        b.push(b'"');
        self
    }

    pub fn strs(mut self, k: &str, vs: &[&str]) -> Self {
        self.key(k);
        let b = &mut self.sc.buf;
        b.push(b'[');
        for (i, v) in vs.iter().enumerate() {
            if i > 0 {
                b.push(b',');
            }
            json_str(b, v);
        }
        b.push(b']');
        self
    }

    /// An evidence_chain: `{source, id}` entries, origin first.
    pub fn chain(mut self, entries: &[(&str, Id)]) -> Self {
        self = self.open_arr("evidence_chain");
        for &(src, id) in entries {
            self = self.item().s("source", src).id("id", id).close();
        }
        self.close_arr()
    }

    pub fn open(mut self, k: &str) -> Self {
        self.key(k);
        self.sc.buf.push(b'{');
        self.first = true;
        self
    }

    pub fn open_arr(mut self, k: &str) -> Self {
        self.key(k);
        self.sc.buf.push(b'[');
        self.first = true;
        self
    }

    /// Starts an object element of the open array.
    pub fn item(mut self) -> Self {
        if !self.first {
            self.sc.buf.push(b',');
        }
        self.sc.buf.push(b'{');
        self.first = true;
        self
    }

    pub fn close(mut self) -> Self {
        self.sc.buf.push(b'}');
        self.first = false;
        self
    }

    pub fn close_arr(mut self) -> Self {
        self.sc.buf.push(b']');
        self.first = false;
        self
    }

    /// Writes this text instead of a valid created_at (a planted fault).
    pub fn bad_time(mut self, t: &'static str) -> Self {
        self.bad_time = Some(t);
        self
    }

    /// Ends the envelope (session, conversation, created_at) and opens the payload.
    pub fn pay(mut self) -> Self {
        let (session, conv) = (self.sc.session, self.sc.conv);
        self = self.id("session_id", session).id("conversation_id", conv);
        self = match self.bad_time {
            Some(t) => self.s("created_at", t),
            None => {
                let at = self.at;
                self.ts("created_at", at)
            }
        };
        self.in_payload = true;
        self.open("payload")
    }

    pub fn end(mut self) -> Id {
        if !self.in_payload {
            self = self.pay();
        }
        self.sc.buf.extend_from_slice(b"}}\n");
        let (at, start, id) = (self.at, self.start, self.id);
        self.sc.push_line(at, start, Some(id));
        id
    }
}

/// Writes `s` as a JSON string literal, escaping quotes, backslashes and
/// control characters (other UTF-8 passes through).
pub(crate) fn json_str(b: &mut Vec<u8>, s: &str) {
    b.push(b'"');
    let bytes = s.as_bytes();
    if !bytes.iter().any(|&c| c == b'"' || c == b'\\' || c < 0x20) {
        b.extend_from_slice(bytes);
    } else {
        for &c in bytes {
            match c {
                b'"' => b.extend_from_slice(b"\\\""),
                b'\\' => b.extend_from_slice(b"\\\\"),
                b'\n' => b.extend_from_slice(b"\\n"),
                b'\t' => b.extend_from_slice(b"\\t"),
                c if c < 0x20 => b.extend_from_slice(format!("\\u{c:04x}").as_bytes()),
                c => b.push(c),
            }
        }
    }
    b.push(b'"');
}

/// RFC 3339 UTC with milliseconds: `YYYY-MM-DDTHH:MM:SS.mmmZ`.
pub(crate) fn write_ts(b: &mut Vec<u8>, ms: i64) {
    let (days, rem) = (ms.div_euclid(86_400_000), ms.rem_euclid(86_400_000));
    // Civil date from days since 1970-01-01 (Howard Hinnant's algorithm).
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    let y = yoe + era * 400 + i64::from(m <= 2);
    digits(b, y, 4);
    b.push(b'-');
    digits(b, m, 2);
    b.push(b'-');
    digits(b, d, 2);
    b.push(b'T');
    digits(b, rem / 3_600_000, 2);
    b.push(b':');
    digits(b, rem / 60_000 % 60, 2);
    b.push(b':');
    digits(b, rem / 1000 % 60, 2);
    b.push(b'.');
    digits(b, rem % 1000, 3);
    b.push(b'Z');
}

/// The last `n` decimal digits of `v`, zero-padded.
fn digits(b: &mut Vec<u8>, v: i64, n: u32) {
    for i in (0..n).rev() {
        b.push(b'0' + ((v / 10i64.pow(i)) % 10) as u8);
    }
}

/// A timestamp as text (for payload values and token claims).
pub(crate) fn ts_text(ms: i64) -> String {
    let mut b = Vec::with_capacity(24);
    write_ts(&mut b, ms);
    String::from_utf8(b).expect("timestamps are ASCII")
}
