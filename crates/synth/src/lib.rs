//! Deterministic synthetic Harmovela / AEP logs for tests and benchmarks.
//!
//! `generate` writes NDJSON sessions (task trees, delegations with handoff
//! tokens, interruptions and checkpoints, facts, beliefs, decisions,
//! subscriptions, acknowledgements, exact redeliveries) and, when asked,
//! planted violations of every rule, each listed in a truth file the
//! analyzer's findings can be scored against. Benign traffic is legal under
//! every rule, including the legal look-alikes of the planted cases.
//!
//! Sessions are built one at a time (tens of events, sorted by time) and a
//! few run concurrently: their lines are merged by time, so the log streams
//! with memory bounded by those few sessions. The same options give the
//! same bytes.
//!
//! Every handoff token is a structured token (base64url JSON claims): legal
//! as an opaque value, and decodable under `--token-format structured`, so
//! that only the planted token cases change between the two modes (truth
//! entries that need the option say `"requires": "structured-tokens"`).

mod benign;
mod delegation;
mod emit;
mod records;
mod rng;
mod scene;
mod tasks;
mod tree;
mod violations;
mod violations_tasks;
mod violations_tokens;

use rng::Rng;
use scene::{Built, Dialect, Scene};
use std::cmp::Reverse;
use std::collections::BinaryHeap;
use std::io::{self, BufWriter, Write};

/// What to generate.
#[derive(Debug, Clone, PartialEq)]
pub struct SynthOptions {
    pub seed: u64,
    /// Approximate log size; the sessions under way when it is reached are
    /// finished, so the log ends clean (a little above the target).
    pub target_bytes: u64,
    /// Share of sessions written as AEP 0.1 (`aep_version`), 0.0..=1.0.
    /// Planted cases that only exist in one dialect use it regardless.
    pub dialect_mix: f64,
    /// Plant cases of every rule: each once near the start, then steadily.
    pub violations: bool,
    /// Chance that a benign line is delivered again later, byte for byte.
    pub redelivery_rate: f64,
}

impl Default for SynthOptions {
    fn default() -> Self {
        SynthOptions {
            seed: 1,
            target_bytes: 1 << 20,
            dialect_mix: 0.3,
            violations: false,
            redelivery_rate: 0.01,
        }
    }
}

/// What was written. `events` counts lines carrying an event id, without
/// redelivered copies; `planted` counts truth entries.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct SynthStats {
    pub events: u64,
    pub lines: u64,
    pub bytes: u64,
    pub planted: u64,
}

/// Sessions running at once (interleaved in the log).
const CONCURRENT: usize = 8;
/// After the first round of planted cases, one in this many sessions plants one.
const PLANT_EVERY: u64 = 12;
/// 2026-07-14T08:00:00Z.
const START_MS: i64 = 1_784_016_000_000;

/// Writes a log to `log` and its planted cases to `truth` (one JSON object a
/// line: `rule`, `event_id`, `task_id`, `requires`; or `rule` and `line` for
/// a line without an id).
pub fn generate(
    opts: &SynthOptions,
    log: &mut dyn Write,
    truth: &mut dyn Write,
) -> io::Result<SynthStats> {
    let mut out = Out {
        log: BufWriter::with_capacity(1 << 20, log),
        truth: BufWriter::new(truth),
        stats: SynthStats::default(),
    };
    let mut plan = Plan {
        opts,
        rng: Rng::new(opts.seed),
        serial: 0,
        first_round: 0,
        cycle: 0,
    };
    // One heap entry per running session: (time of its next line, its
    // serial to break ties, its slot).
    let mut slots: Vec<Option<(Built, usize)>> = Vec::with_capacity(CONCURRENT);
    let mut heap = BinaryHeap::new();
    for slot in 0..CONCURRENT {
        let start = START_MS + plan.rng.range(0, 5000);
        let built = plan.scene(start);
        heap.push(Reverse((built.lines[0].at, plan.serial, slot)));
        slots.push(Some((built, 0)));
    }
    while let Some(Reverse((at, serial, slot))) = heap.pop() {
        let (built, pos) = slots[slot].as_mut().expect("a queued slot holds a scene");
        out.line(built, *pos)?;
        *pos += 1;
        if let Some(next) = built.lines.get(*pos) {
            heap.push(Reverse((next.at, serial, slot)));
        } else if out.stats.bytes < opts.target_bytes || plan.owes_cases() {
            // New sessions start at or after the current time: the merge
            // stays ordered.
            let built = plan.scene(at + plan.rng.range(0, 4000));
            heap.push(Reverse((built.lines[0].at, plan.serial, slot)));
            slots[slot] = Some((built, 0));
        } else {
            slots[slot] = None;
        }
    }
    out.log.flush()?;
    out.truth.flush()?;
    Ok(out.stats)
}

/// Decides what each new session is and builds it.
struct Plan<'o> {
    opts: &'o SynthOptions,
    rng: Rng,
    serial: u64,
    first_round: usize,
    cycle: usize,
}

impl Plan<'_> {
    /// Whether some case has not been planted yet.
    fn owes_cases(&self) -> bool {
        self.opts.violations && self.first_round < violations::CASES.len()
    }

    fn scene(&mut self, start: i64) -> Built {
        self.serial += 1;
        let cases = violations::CASES;
        // First every case once, alternating with benign sessions; then
        // one case every PLANT_EVERY sessions, cycling through them.
        let case = match self.opts.violations {
            false => None,
            true if self.owes_cases() => (self.serial % 2 == 1).then(|| {
                self.first_round += 1;
                self.first_round - 1
            }),
            true => self.serial.is_multiple_of(PLANT_EVERY).then(|| {
                self.cycle += 1;
                (self.cycle - 1) % cases.len()
            }),
        };
        let mix = self.opts.dialect_mix;
        let v01 = self.rng.chance(if mix.is_nan() { 0.0 } else { mix });
        let dialect = case.and_then(|c| cases[c].dialect).unwrap_or(match v01 {
            true => Dialect::V01,
            false => Dialect::V02,
        });
        let mut sc = Scene::new(self.serial, self.opts.seed, dialect, case.is_none());
        match case {
            Some(c) => violations::planted(&mut sc, start, c),
            None => benign::session(&mut sc, start),
        }
        let rate = self.opts.redelivery_rate;
        sc.finish(if rate.is_nan() { 0.0 } else { rate.min(1.0) })
    }
}

struct Out<'w> {
    log: BufWriter<&'w mut dyn Write>,
    truth: BufWriter<&'w mut dyn Write>,
    stats: SynthStats,
}

impl Out<'_> {
    fn line(&mut self, built: &Built, pos: usize) -> io::Result<()> {
        let l = &built.lines[pos];
        let bytes = &built.buf[l.start as usize..l.end as usize];
        self.log.write_all(bytes)?;
        self.stats.lines += 1;
        self.stats.bytes += bytes.len() as u64;
        if l.id.is_some() && !l.copy {
            self.stats.events += 1;
        }
        if l.copy {
            return Ok(());
        }
        for t in built.truths.iter().filter(|t| t.scene_line == l.idx) {
            let mut b = Vec::with_capacity(160);
            b.extend_from_slice(b"{\"rule\":");
            emit::json_str(&mut b, t.rule);
            if let Some(ev) = t.event {
                b.extend_from_slice(b",\"event_id\":\"");
                ev.write(&mut b);
                b.extend_from_slice(b"\",\"task_id\":");
                match t.task {
                    Some(task) => emit::json_str(&mut b, &task.text()),
                    None => b.extend_from_slice(b"null"),
                }
                b.extend_from_slice(b",\"requires\":");
                match t.requires {
                    Some(r) => emit::json_str(&mut b, r),
                    None => b.extend_from_slice(b"null"),
                }
            }
            // Envelope faults are reported by line; say which.
            if t.event.is_none() || t.rule == "envelope.invalid" {
                b.extend_from_slice(format!(",\"line\":{}", self.stats.lines).as_bytes());
            }
            b.extend_from_slice(b"}\n");
            self.truth.write_all(&b)?;
            self.stats.planted += 1;
        }
        Ok(())
    }
}
