//! The per-session buffer (`Scene`): ids, lines rendered as they are built
//! and sorted by time at the end, planted truth entries, redeliveries. The
//! driver merges the lines of a few scenes by time into the log.

use super::rng::{Rng, mix};

/// What an id names; each kind has its own prefix and salt.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub(crate) enum Kind {
    Evt,
    Task,
    Sess,
    Conv,
    Fact,
    Ckpt,
    Jti,
    Sub,
    Call,
    Budget,
}

impl Kind {
    fn prefix(self) -> &'static [u8] {
        match self {
            Kind::Evt => b"evt_",
            Kind::Task => b"task_",
            Kind::Sess => b"sess_",
            Kind::Conv => b"conv_",
            Kind::Fact => b"fact_",
            Kind::Ckpt => b"ckpt_",
            Kind::Jti => b"jti_",
            Kind::Sub => b"sub_",
            Kind::Call => b"call_",
            Kind::Budget => b"budget_",
        }
    }
}

/// A generated identifier: a prefix plus 16 hex digits of a bijective mix of
/// (scene serial, counter), so ids never repeat within a log.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub(crate) struct Id {
    kind: Kind,
    v: u64,
}

impl Id {
    /// The `n`th id of scene `serial` (n < 2^20 per scene).
    fn of(serial: u64, n: u64, kind: Kind) -> Id {
        let salt = (kind as u64 + 1).wrapping_mul(0x9e37_79b9_7f4a_7c15);
        Id {
            kind,
            v: mix(salt ^ ((serial << 20) | n)),
        }
    }

    pub fn write(self, buf: &mut Vec<u8>) {
        const HEX: &[u8; 16] = b"0123456789abcdef";
        buf.extend_from_slice(self.kind.prefix());
        for i in (0..16).rev() {
            buf.push(HEX[((self.v >> (i * 4)) & 15) as usize]);
        }
    }

    pub fn text(self) -> String {
        let mut b = Vec::with_capacity(21);
        self.write(&mut b);
        String::from_utf8(b).expect("ids are ASCII")
    }
}

#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub(crate) enum Dialect {
    V01,
    V02,
}

impl Dialect {
    pub fn version(self) -> &'static str {
        match self {
            Dialect::V01 => "0.1",
            Dialect::V02 => "0.2",
        }
    }
}

/// The version field(s) an event carries; all but `Dialect` are planted faults.
#[derive(Clone, Copy)]
pub(crate) enum Version {
    Dialect,
    Missing,
    Spec(&'static str),
    Aep(&'static str),
    Legacy,
}

/// One log line of a scene: bytes `start..end` of its buffer, ordered by `at`.
/// `copy` marks an exact redelivery of an earlier line.
#[derive(Clone, Copy)]
pub(crate) struct Line {
    pub at: i64,
    pub start: u32,
    pub end: u32,
    pub idx: u32,
    pub id: Option<Id>,
    pub copy: bool,
}

/// A planted case, written to the truth file when its line is written.
pub(crate) struct Truth {
    pub rule: &'static str,
    /// `Line::idx` of the line it names.
    pub scene_line: u32,
    pub event: Option<Id>,
    pub task: Option<Id>,
    pub requires: Option<&'static str>,
}

/// One session's events, rendered as they are built (in any time order) and
/// sorted by time at the end. Small: a session is tens of events.
pub(crate) struct Scene {
    pub rng: Rng,
    pub dialect: Dialect,
    pub session: Id,
    pub conv: Id,
    serial: u64,
    n: u64,
    pub(super) buf: Vec<u8>,
    lines: Vec<Line>,
    truths: Vec<Truth>,
    redeliverable: bool,
    max_at: i64,
}

/// A finished scene, its lines sorted by time.
pub(crate) struct Built {
    pub buf: Vec<u8>,
    pub lines: Vec<Line>,
    pub truths: Vec<Truth>,
}

impl Scene {
    pub fn new(serial: u64, seed: u64, dialect: Dialect, redeliverable: bool) -> Self {
        Scene {
            rng: Rng::new(seed ^ mix(serial.wrapping_add(0x5eed))),
            dialect,
            session: Id::of(serial, 1, Kind::Sess),
            conv: Id::of(serial, 2, Kind::Conv),
            serial,
            n: 2,
            buf: Vec::with_capacity(32 << 10),
            lines: Vec::with_capacity(96),
            truths: Vec::new(),
            redeliverable,
            max_at: i64::MIN,
        }
    }

    pub fn new_id(&mut self, kind: Kind) -> Id {
        self.n += 1;
        Id::of(self.serial, self.n, kind)
    }

    /// A time step in milliseconds.
    pub fn dt(&self, lo: i64, hi: i64) -> i64 {
        self.rng.range(lo, hi)
    }

    /// The time of the latest event so far.
    pub fn last_at(&self) -> i64 {
        self.max_at
    }

    /// Registers the bytes from `start` to the end of the buffer as a line.
    pub(super) fn push_line(&mut self, at: i64, start: usize, id: Option<Id>) {
        self.max_at = self.max_at.max(at);
        self.lines.push(Line {
            at,
            start: start as u32,
            end: self.buf.len() as u32,
            idx: self.lines.len() as u32,
            id,
            copy: false,
        });
    }

    /// Cuts the last line short, as a crashed writer leaves it: not JSON.
    pub fn truncate_last(&mut self) -> u32 {
        let line = self.lines.last_mut().expect("a line to truncate");
        let mut cut = line.start as usize + (line.end - line.start) as usize * 3 / 5;
        // Cut between characters: the log stays UTF-8.
        while self.buf[cut] & 0xc0 == 0x80 {
            cut -= 1;
        }
        self.buf.truncate(cut);
        self.buf.push(b'\n');
        line.end = self.buf.len() as u32;
        line.id = None;
        line.idx
    }

    /// Repeats the line of event `id` byte for byte at a later time.
    pub fn redeliver(&mut self, id: Id, at: i64) {
        let l = &self.lines[self.line_of(id) as usize];
        let (start, end) = (l.start, l.end);
        let idx = self.lines.len() as u32;
        self.lines.push(Line {
            at,
            start,
            end,
            idx,
            id: Some(id),
            copy: true,
        });
    }

    fn line_of(&self, id: Id) -> u32 {
        let l = self.lines.iter().find(|l| l.id == Some(id) && !l.copy);
        l.expect("event was emitted").idx
    }

    /// Records that event `ev` must be named by a finding of `rule`.
    pub fn plant(&mut self, rule: &'static str, ev: Id, task: Option<Id>) {
        self.plant_req(rule, ev, task, None);
    }

    pub fn plant_req(
        &mut self,
        rule: &'static str,
        ev: Id,
        task: Option<Id>,
        req: Option<&'static str>,
    ) {
        let line = self.line_of(ev);
        self.truths.push(Truth {
            rule,
            scene_line: line,
            event: Some(ev),
            task,
            requires: req,
        });
    }

    /// A planted line that has no id a finding could name.
    pub fn plant_line(&mut self, rule: &'static str, line: u32) {
        self.truths.push(Truth {
            rule,
            scene_line: line,
            event: None,
            task: None,
            requires: None,
        });
    }

    /// Adds exact redeliveries at `rate`, then orders the lines by time
    /// (stable: lines built in order keep it on equal times).
    pub fn finish(mut self, rate: f64) -> Built {
        if self.redeliverable && rate > 0.0 {
            for i in 0..self.lines.len() {
                let l = &self.lines[i];
                if l.id.is_some() && self.rng.chance(rate) {
                    let copy = Line {
                        at: l.at + self.rng.range(200, 90_000),
                        idx: self.lines.len() as u32,
                        copy: true,
                        ..*l
                    };
                    self.lines.push(copy);
                }
            }
        }
        self.lines.sort_by_key(|l| l.at);
        Built {
            buf: self.buf,
            lines: self.lines,
            truths: self.truths,
        }
    }
}
