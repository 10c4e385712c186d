//! The findings of a report, in report order. An audit keeps them compact:
//! one small row per finding (rule, message, task, the seqs of its events)
//! and one shared place per cited event, with every repeated string (file,
//! type, agent, task) held once. A `Finding` with its locations and timeline
//! is built only when a renderer reaches it, so a million findings are never
//! held in full, let alone twice.

use crate::finding::{BaselineState, Finding, Location, Severity, Suppression, TimelineEntry};
use chrono::{DateTime, Utc};
use serde::ser::SerializeSeq;
use serde::{Deserialize, Deserializer, Serialize, Serializer};
use std::borrow::Cow;
use std::collections::HashSet;
use std::hash::Hash;
use std::sync::Arc;

/// The findings of a report, sorted by `Finding::sort_key`; cheap to clone.
#[derive(Clone, Default)]
pub struct Findings {
    store: Arc<Store>,
    /// What the gate said of each finding, by position; empty when no
    /// suppression file or baseline was given.
    marks: Arc<[Mark]>,
}

/// The gate's word on one finding.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Mark {
    pub suppression: Option<Arc<Suppression>>,
    pub baseline: Option<BaselineState>,
}

enum Store {
    /// Built one by one (tests, deserialized reports).
    Listed(Vec<Finding>),
    /// Produced by an audit.
    Compact(Compact),
}

impl Default for Store {
    fn default() -> Self {
        Store::Listed(Vec::new())
    }
}

/// What the summaries count by, without building a `Finding`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FindingKey<'a> {
    pub severity: Severity,
    pub rule: &'a str,
    pub family: &'a str,
    pub task_id: Option<&'a str>,
    pub agent: Option<&'a str>,
    pub session_id: Option<&'a str>,
    pub at: Option<DateTime<Utc>>,
    pub suppressed: bool,
    pub baseline: Option<BaselineState>,
}

impl Findings {
    pub fn len(&self) -> usize {
        match &*self.store {
            Store::Listed(v) => v.len(),
            Store::Compact(c) => c.rows.len(),
        }
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The same findings with the gate's marks, one per finding in order.
    pub fn with_marks(&self, marks: Vec<Mark>) -> Findings {
        assert_eq!(marks.len(), self.len(), "one mark per finding");
        Findings {
            store: self.store.clone(),
            marks: marks.into(),
        }
    }

    fn mark(&self, index: usize) -> Option<&Mark> {
        self.marks.get(index)
    }

    /// `finding` with the gate's mark at `index`, if any.
    fn marked<'a>(&self, index: usize, finding: Cow<'a, Finding>) -> Cow<'a, Finding> {
        match self.mark(index) {
            Some(m) if m.suppression.is_some() || m.baseline.is_some() => {
                let mut f = finding.into_owned();
                f.suppression = m.suppression.as_deref().cloned();
                f.baseline_state = m.baseline;
                Cow::Owned(f)
            }
            _ => finding,
        }
    }

    /// Every finding in report order, built as it is reached.
    pub fn iter(&self) -> Box<dyn Iterator<Item = Cow<'_, Finding>> + '_> {
        let plain: Box<dyn Iterator<Item = Cow<'_, Finding>> + '_> = match &*self.store {
            Store::Listed(v) => Box::new(v.iter().map(Cow::Borrowed)),
            Store::Compact(c) => Box::new(c.rows.iter().map(|r| Cow::Owned(c.finding(r)))),
        };
        if self.marks.is_empty() {
            return plain;
        }
        Box::new(plain.enumerate().map(|(i, f)| self.marked(i, f)))
    }

    /// The counting keys of every finding in report order.
    pub fn keys(&self) -> Box<dyn Iterator<Item = FindingKey<'_>> + '_> {
        let plain: Box<dyn Iterator<Item = FindingKey<'_>> + '_> = match &*self.store {
            Store::Listed(v) => Box::new(v.iter().map(|f| FindingKey {
                severity: f.severity,
                rule: &f.rule,
                family: &f.family,
                task_id: f.task_id.as_deref(),
                agent: f.agent.as_deref(),
                session_id: f.session_id.as_deref(),
                at: f.at,
                suppressed: f.suppression.is_some(),
                baseline: f.baseline_state,
            })),
            Store::Compact(c) => Box::new(c.rows.iter().map(|r| c.key(r))),
        };
        if self.marks.is_empty() {
            return plain;
        }
        Box::new(plain.enumerate().map(|(i, mut k)| {
            if let Some(m) = self.mark(i) {
                k.suppressed = m.suppression.is_some();
                k.baseline = m.baseline;
            }
            k
        }))
    }

    /// The finding at `index` in report order.
    pub fn get(&self, index: usize) -> Option<Cow<'_, Finding>> {
        let plain = match &*self.store {
            Store::Listed(v) => v.get(index).map(Cow::Borrowed),
            Store::Compact(c) => c.rows.get(index).map(|r| Cow::Owned(c.finding(r))),
        }?;
        Some(self.marked(index, plain))
    }

    pub fn to_vec(&self) -> Vec<Finding> {
        self.iter().map(Cow::into_owned).collect()
    }
}

impl<'a> IntoIterator for &'a Findings {
    type Item = Cow<'a, Finding>;
    type IntoIter = Box<dyn Iterator<Item = Cow<'a, Finding>> + 'a>;
    fn into_iter(self) -> Self::IntoIter {
        self.iter()
    }
}

impl From<Vec<Finding>> for Findings {
    fn from(v: Vec<Finding>) -> Self {
        Findings {
            store: Arc::new(Store::Listed(v)),
            marks: Arc::new([]),
        }
    }
}

impl From<Compact> for Findings {
    fn from(c: Compact) -> Self {
        Findings {
            store: Arc::new(Store::Compact(c)),
            marks: Arc::new([]),
        }
    }
}

impl std::fmt::Debug for Findings {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_list().entries(self.iter()).finish()
    }
}

impl PartialEq for Findings {
    fn eq(&self, other: &Self) -> bool {
        self.len() == other.len() && self.iter().zip(other.iter()).all(|(a, b)| a == b)
    }
}

impl Serialize for Findings {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let mut seq = s.serialize_seq(Some(self.len()))?;
        for f in self.iter() {
            seq.serialize_element(&*f)?;
        }
        seq.end()
    }
}

impl<'de> Deserialize<'de> for Findings {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        Vec::<Finding>::deserialize(d).map(Findings::from)
    }
}

/// One event or rejected line as findings cite it.
#[derive(Debug, Clone)]
pub(crate) struct Place {
    pub id: Option<Box<str>>,
    pub source: Option<Arc<str>>,
    pub session_id: Option<Arc<str>>,
    /// What the event says, hashed: its `digest` (of its JSON value), or a
    /// rejected line's (of its bytes). Never where it is.
    pub content: [u8; 16],
    pub event_type: Arc<str>,
    pub task_id: Option<Arc<str>>,
    pub file: Arc<str>,
    pub line: u64,
    pub at: Option<DateTime<Utc>>,
}

/// The places cited by findings, by seq: a sorted list of the wanted seqs
/// and, beside it, what was found for each (half the size of a hash map).
pub(crate) struct Places {
    seqs: Vec<i64>,
    found: Vec<Option<Place>>,
}

impl Places {
    /// Room for the given seqs (sorted and distinct), none found yet.
    pub fn new(seqs: Vec<i64>) -> Places {
        let found = seqs.iter().map(|_| None).collect();
        Places { seqs, found }
    }

    pub fn wanted(&self) -> &[i64] {
        &self.seqs
    }

    fn index(&self, seq: i64) -> Option<usize> {
        self.seqs.binary_search(&seq).ok()
    }

    pub fn get(&self, seq: i64) -> Option<&Place> {
        self.found[self.index(seq)?].as_ref()
    }

    /// Record `place` for `seq` if it is wanted. Should two rows share a
    /// seq (Parquet files of separate converts), the earlier file:line wins,
    /// whatever order they come in.
    pub fn offer(&mut self, seq: i64, place: impl FnOnce() -> Place) {
        let Some(i) = self.index(seq) else { return };
        let place = place();
        let slot = &mut self.found[i];
        if slot
            .as_ref()
            .is_none_or(|old| (&place.file, place.line) < (&old.file, old.line))
        {
            *slot = Some(place);
        }
    }

    /// Set the content of the place found for `seq`.
    pub fn set_content(&mut self, seq: i64, content: [u8; 16]) {
        if let Some(Some(place)) = self.index(seq).map(|i| &mut self.found[i]) {
            place.content = content;
        }
    }

    /// Forget the places no kept row cites.
    fn keep_only(&mut self, cited: &HashSet<i64>) {
        for (seq, slot) in self.seqs.iter().zip(self.found.iter_mut()) {
            if !cited.contains(seq) {
                *slot = None;
            }
        }
    }
}

/// Hands out one shared copy of each distinct string.
#[derive(Default)]
pub(crate) struct Interner(HashSet<Arc<str>>);

impl Interner {
    pub fn get(&mut self, s: &str) -> Arc<str> {
        if let Some(a) = self.0.get(s) {
            return a.clone();
        }
        let a: Arc<str> = Arc::from(s);
        self.0.insert(a.clone());
        a
    }
}

/// A rule's id and family, shared by its findings.
pub(crate) struct RuleLabel {
    pub id: Arc<str>,
    pub family: Arc<str>,
}

/// One rule row: what the rule said and which events it cites.
pub(crate) struct FindingRow {
    /// Index into the rule labels (whose order is the rule ids' order).
    pub rule: u32,
    pub severity: Severity,
    pub task_id: Option<Arc<str>>,
    pub message: Box<str>,
    pub seqs: Box<[i64]>,
    /// The reading of later versions that yields it (none: version 1's).
    pub reading: Option<u32>,
    /// Filled by `Compact::new` from the places: the earliest instant, the
    /// fingerprint, and the first cited place found.
    at: Option<DateTime<Utc>>,
    fingerprint: [u8; 16],
    first: Option<i64>,
}

impl FindingRow {
    pub fn new(
        rule: u32,
        severity: Severity,
        task_id: Option<Arc<str>>,
        message: Box<str>,
        seqs: Box<[i64]>,
    ) -> FindingRow {
        FindingRow {
            rule,
            severity,
            task_id,
            message,
            seqs,
            reading: None,
            at: None,
            fingerprint: [0; 16],
            first: None,
        }
    }
}

/// Rule rows with the places they cite, sorted in report order.
pub(crate) struct Compact {
    rules: Vec<RuleLabel>,
    rows: Vec<FindingRow>,
    places: Places,
    /// Rows left out for lying outside the `--since`/`--until` window.
    pub outside_window: u64,
}

impl Compact {
    /// Resolve each row's instant and fingerprint, keep those that cite an
    /// event inside `[since, until]` (rows citing no instant always stay:
    /// a forged event dated elsewhere cannot take a finding out of the
    /// window), and sort.
    pub fn new(
        rules: Vec<RuleLabel>,
        mut rows: Vec<FindingRow>,
        mut places: Places,
        since: Option<DateTime<Utc>>,
        until: Option<DateTime<Utc>>,
    ) -> Compact {
        let inside =
            |t: DateTime<Utc>| since.is_none_or(|s| t >= s) && until.is_none_or(|u| t <= u);
        let mut outside = std::collections::HashSet::new();
        for (i, r) in rows.iter_mut().enumerate() {
            let found: Vec<&Place> = r.seqs.iter().filter_map(|s| places.get(*s)).collect();
            r.at = found.iter().filter_map(|p| p.at).min();
            r.first = r.seqs.iter().copied().find(|s| places.get(*s).is_some());
            let label = &rules[r.rule as usize];
            r.fingerprint = fingerprint(&label.id, r.task_id.as_deref(), &r.message, &found);
            let mut instants = found.iter().filter_map(|p| p.at).peekable();
            if instants.peek().is_some() && !instants.any(inside) {
                outside.insert(i);
            }
        }
        let outside_window = outside.len() as u64;
        let mut index = 0;
        rows.retain(|_| {
            index += 1;
            !outside.contains(&(index - 1))
        });
        // Finding::sort_key, with the fingerprint's number for its hex text.
        let first = |r: &FindingRow| {
            r.first
                .and_then(|s| places.get(s))
                .map(|p| (&p.file, p.line))
        };
        rows.sort_by(|a, b| {
            (
                std::cmp::Reverse(a.severity),
                &rules[a.rule as usize].id,
                a.at,
            )
                .cmp(&(
                    std::cmp::Reverse(b.severity),
                    &rules[b.rule as usize].id,
                    b.at,
                ))
                .then_with(|| first(a).cmp(&first(b)))
                .then_with(|| a.fingerprint.cmp(&b.fingerprint))
        });
        if since.is_some() || until.is_some() {
            let cited: HashSet<i64> = rows.iter().flat_map(|r| r.seqs.iter().copied()).collect();
            places.keep_only(&cited);
        }
        Compact {
            rules,
            rows,
            places,
            outside_window,
        }
    }

    fn found(&self, r: &FindingRow) -> Vec<&Place> {
        r.seqs.iter().filter_map(|s| self.places.get(*s)).collect()
    }

    fn key<'a>(&'a self, r: &'a FindingRow) -> FindingKey<'a> {
        let label = &self.rules[r.rule as usize];
        let first = r.first.and_then(|s| self.places.get(s));
        FindingKey {
            severity: r.severity,
            rule: &label.id,
            family: &label.family,
            task_id: r.task_id.as_deref(),
            agent: first.and_then(|p| p.source.as_deref()),
            session_id: first.and_then(|p| p.session_id.as_deref()),
            at: r.at,
            suppressed: false,
            baseline: None,
        }
    }

    fn finding(&self, r: &FindingRow) -> Finding {
        let label = &self.rules[r.rule as usize];
        let found = self.found(r);
        let event_ids = distinct_ids(&found)
            .into_iter()
            .map(str::to_string)
            .collect();
        let locations = found
            .iter()
            .map(|p| Location {
                file: p.file.to_string(),
                line: p.line,
                event_id: p.id.as_deref().map(str::to_string),
            })
            .collect();
        let mut timeline: Vec<TimelineEntry> = found
            .iter()
            .filter_map(|p| {
                Some(TimelineEntry {
                    at: p.at,
                    event_id: p.id.as_deref()?.to_string(),
                    event_type: p.event_type.to_string(),
                    task_id: p.task_id.as_deref().map(str::to_string),
                    file: p.file.to_string(),
                    line: p.line,
                })
            })
            .collect();
        timeline.sort_by(|a, b| (a.at, &a.file, a.line).cmp(&(b.at, &b.file, b.line)));
        timeline.dedup();
        Finding {
            rule: label.id.to_string(),
            severity: r.severity,
            family: label.family.to_string(),
            message: r.message.to_string(),
            task_id: r.task_id.as_deref().map(str::to_string),
            agent: found
                .first()
                .and_then(|p| p.source.as_deref().map(str::to_string)),
            session_id: found
                .first()
                .and_then(|p| p.session_id.as_deref().map(str::to_string)),
            event_ids,
            locations,
            at: r.at,
            fingerprint: hex(&r.fingerprint),
            timeline,
            suppression: None,
            baseline_state: None,
            rests_on_version: r.reading,
        }
    }
}

/// The event ids of `places`, each once, in order (rejected lines have none).
fn distinct_ids<'a>(places: &[&'a Place]) -> Vec<&'a str> {
    first_of_each(places.iter().filter_map(|p| p.id.as_deref()))
}

/// Each item once, where it first occurs. A set, not a scan of the items
/// kept so far: one finding may cite 100 k events (a parent's children).
fn first_of_each<T: Eq + Hash + Copy>(items: impl Iterator<Item = T>) -> Vec<T> {
    let mut seen = HashSet::new();
    items.filter(|item| seen.insert(*item)).collect()
}

/// Lower-case hexadecimal.
fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// The version of the fingerprints below, written in every JSON report: a
/// baseline with fingerprints of another version cannot be compared.
pub const FINGERPRINT_VERSION: u32 = 3;

/// Stable across runs, paths and machines, and owned by the content: the
/// rule, the task, the message (with every `file:line` of a cited place
/// taken out: two rules name them; one rule may report several checks on
/// the same events, one message each) and what every cited event says
/// (its digest: id, source, session, payload, every member), never seqs,
/// files, lines or order. A new act that copies an old one's ids but not
/// its content is another finding. BLAKE3: no one can make a new act
/// wear an old finding's fingerprint.
fn fingerprint(rule: &str, task: Option<&str>, message: &str, places: &[&Place]) -> [u8; 16] {
    let message = without_places(message, places);
    let mut h = blake3::Hasher::new();
    h.update(format!("hvaudit/v{FINGERPRINT_VERSION}").as_bytes());
    for part in [rule, task.unwrap_or(""), &message] {
        h.update(&(part.len() as u64).to_le_bytes());
        h.update(part.as_bytes());
    }
    let mut contents: Vec<[u8; 16]> = places.iter().map(|p| p.content).collect();
    contents.sort_unstable();
    contents.dedup();
    for c in contents {
        h.update(&c);
    }
    let mut out = [0u8; 16];
    out.copy_from_slice(&h.finalize().as_bytes()[..16]);
    out
}

/// `message` with each cited place's `file:line` replaced by a mark. Only
/// files the message names are looked at, longest text first (so that
/// `log:12` is not cut by `log:1`).
fn without_places<'a>(message: &'a str, places: &[&Place]) -> Cow<'a, str> {
    let mut named: Vec<String> = places
        .iter()
        .filter(|p| message.contains(&*p.file))
        .map(|p| format!("{}:{}", p.file, p.line))
        .collect();
    if named.is_empty() {
        return Cow::Borrowed(message);
    }
    named.sort_by(|a, b| b.len().cmp(&a.len()).then_with(|| a.cmp(b)));
    let mut out = message.to_string();
    for n in named {
        out = out.replace(&n, "\u{1}");
    }
    Cow::Owned(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn place(file: &str, line: u64, id: &str, at_us: i64) -> Place {
        Place {
            id: Some(id.into()),
            source: Some("agent:a".into()),
            session_id: None,
            content: blake3::hash(format!("{id} {at_us}").as_bytes()).as_bytes()[..16]
                .try_into()
                .unwrap(),
            event_type: "vendor.x".into(),
            task_id: None,
            file: file.into(),
            line,
            at: DateTime::from_timestamp_micros(at_us),
        }
    }

    fn labels() -> Vec<RuleLabel> {
        ["a.rule", "b.rule"]
            .into_iter()
            .map(|id| RuleLabel {
                id: id.into(),
                family: "f".into(),
            })
            .collect()
    }

    fn row(rule: u32, severity: Severity, seqs: &[i64]) -> FindingRow {
        FindingRow::new(rule, severity, None, "m".into(), seqs.into())
    }

    /// Compares like a number and counts every comparison.
    #[derive(Clone, Copy)]
    struct Counted<'a>(u32, &'a std::cell::Cell<usize>);

    impl Hash for Counted<'_> {
        fn hash<H: std::hash::Hasher>(&self, h: &mut H) {
            self.0.hash(h);
        }
    }

    impl PartialEq for Counted<'_> {
        fn eq(&self, other: &Self) -> bool {
            self.1.set(self.1.get() + 1);
            self.0 == other.0
        }
    }

    impl Eq for Counted<'_> {}

    #[test]
    fn distinct_ids_compare_each_id_a_bounded_number_of_times() {
        // 40 k citations of 10 k events, each cited four times, in order.
        let compared = |n: u32| {
            let count = std::cell::Cell::new(0);
            let items = (0..4 * n).map(|i| Counted(i % n, &count));
            let kept: Vec<u32> = first_of_each(items).iter().map(|c| c.0).collect();
            assert_eq!(kept, (0..n).collect::<Vec<_>>());
            count.get()
        };
        let (small, large) = (compared(2_500), compared(10_000));
        // A repeat costs one comparison, a new id almost none; a scan of the
        // ids kept so far made it 10^8 at the larger size.
        assert!(large <= 2 * 40_000, "{large} comparisons for 40 k ids");
        assert!(
            large <= 8 * small.max(1),
            "{small} then {large}: not linear"
        );
    }

    #[test]
    fn distinct_ids_keep_the_first_place_of_each_id() {
        let (a, b, c) = (
            place("l", 1, "e2", 0),
            place("l", 2, "e1", 0),
            place("l", 3, "e2", 0),
        );
        let mut rejected = place("l", 4, "x", 0);
        rejected.id = None;
        assert_eq!(distinct_ids(&[&a, &b, &rejected, &c, &b]), ["e2", "e1"]);
    }

    #[test]
    fn fingerprints_do_not_depend_on_where_the_events_are() {
        let print = |file: &str, first: u64, second: u64| {
            let (a, b) = (place(file, first, "e1", 1), place(file, second, "e1", 2));
            let message = format!("event id e1 at {file}:{second} differs from {file}:{first}");
            fingerprint("r", None, &message, &[&a, &b])
        };
        let here = print("logs/a.ndjson", 1, 12);
        assert_eq!(here, print("/elsewhere/day/b.ndjson", 40, 7));
        // Two versions of one id are told apart by their content.
        let (a, b, c) = (
            place("l", 1, "e1", 1),
            place("l", 2, "e1", 2),
            place("l", 3, "e1", 3),
        );
        assert_ne!(
            fingerprint("r", None, "m", &[&b, &a]),
            fingerprint("r", None, "m", &[&c, &a])
        );
        // Another rule, task or message is another finding.
        let one = fingerprint("r", None, "m", &[&a]);
        assert_ne!(one, fingerprint("s", None, "m", &[&a]));
        assert_ne!(one, fingerprint("r", Some("t"), "m", &[&a]));
        assert_ne!(one, fingerprint("r", None, "n", &[&a]));
    }

    #[test]
    fn a_place_is_cut_from_the_message_whole() {
        let (a, b) = (place("log", 1, "x", 0), place("log", 12, "y", 0));
        assert_eq!(
            without_places("log:12 then log:1.", &[&a, &b]),
            "\u{1} then \u{1}."
        );
        assert!(matches!(
            without_places("nothing named", &[&a]),
            Cow::Borrowed(_)
        ));
    }

    #[test]
    fn a_shared_seq_keeps_the_earlier_place_whatever_the_order() {
        for flip in [false, true] {
            let mut places = Places::new(vec![3, 7]);
            let (x, y) = (place("b.ndjson", 1, "e1", 0), place("a.ndjson", 9, "e2", 0));
            let (first, second) = if flip {
                (y.clone(), x.clone())
            } else {
                (x.clone(), y.clone())
            };
            places.offer(7, || first);
            places.offer(7, || second);
            places.offer(5, || place("c.ndjson", 1, "unwanted", 0));
            assert_eq!(places.get(7).unwrap().file.as_ref(), "a.ndjson");
            assert!(places.get(5).is_none() && places.get(3).is_none());
        }
    }

    #[test]
    fn compact_rows_come_out_in_report_order_and_in_the_window() {
        let mut places = Places::new(vec![1, 2, 3, 4]);
        for (seq, line, at) in [
            (1, 10, 4_000_000),
            (2, 20, 1_000_000),
            (3, 30, 2_000_000),
            (4, 40, 9_000_000),
        ] {
            places.offer(seq, || place("log.ndjson", line, &format!("e{seq}"), at));
        }
        let rows = vec![
            row(1, Severity::High, &[1]),
            row(0, Severity::Low, &[2]),
            row(0, Severity::High, &[3, 1]),
            row(0, Severity::High, &[4]),
            row(1, Severity::Critical, &[99, 2]),
        ];
        let until = DateTime::from_timestamp_micros(5_000_000);
        let findings = Findings::from(Compact::new(labels(), rows, places, None, until));
        let got: Vec<(String, Severity, Vec<String>, Option<String>)> = findings
            .iter()
            .map(|f| {
                (
                    f.rule.clone(),
                    f.severity,
                    f.event_ids.clone(),
                    f.agent.clone(),
                )
            })
            .collect();
        let ids = |v: &[&str]| v.iter().map(|s| s.to_string()).collect::<Vec<_>>();
        let agent = Some("agent:a".to_string());
        assert_eq!(
            got,
            vec![
                (
                    "b.rule".into(),
                    Severity::Critical,
                    ids(&["e2"]),
                    agent.clone()
                ),
                (
                    "a.rule".into(),
                    Severity::High,
                    ids(&["e3", "e1"]),
                    agent.clone()
                ),
                ("b.rule".into(), Severity::High, ids(&["e1"]), agent.clone()),
                ("a.rule".into(), Severity::Low, ids(&["e2"]), agent),
            ],
            "seq 4 lies after --until; an unknown seq is skipped"
        );
        let keys: Vec<&str> = findings.keys().map(|k| k.rule).collect();
        assert_eq!(keys, ["b.rule", "a.rule", "b.rule", "a.rule"]);
        let listed = Findings::from(findings.to_vec());
        assert_eq!(listed, findings, "built findings equal their compact form");
        let timeline: Vec<u64> = findings
            .get(1)
            .unwrap()
            .timeline
            .iter()
            .map(|t| t.line)
            .collect();
        assert_eq!(timeline, [30, 10], "the timeline is in time order");
    }
}
