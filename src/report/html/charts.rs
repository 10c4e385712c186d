//! Geometry of the HTML report's inline-SVG charts. Everything is computed
//! here so the template only places numbers and labels; labels are plain
//! strings that the template's autoescaping escapes like any other value.

use crate::finding::Severity;
use crate::report::clean;
use crate::report::model::{Report, TimeBucket};
use chrono::{DateTime, Utc};
use minijinja::Value;
use std::collections::BTreeMap;

/// The SVG coordinate width of both charts (they scale to their column).
const WIDTH: f64 = 640.0;
/// Rule chart: label column, bar start and longest bar.
const LABEL_END: f64 = 246.0;
const BAR_START: f64 = 252.0;
const BAR_MAX: f64 = 340.0;
const ROW: f64 = 17.0;
/// Longest rule label before it is cut (the full id is in the tooltip).
const LABEL_CHARS: usize = 38;
/// Time chart: plot area and its two strips.
const PLOT_X0: f64 = 52.0;
const PLOT_X1: f64 = 632.0;
const EVENTS_TOP: f64 = 22.0;
const EVENTS_H: f64 = 104.0;
const FINDINGS_TOP: f64 = 148.0;
const FINDINGS_H: f64 = 40.0;
const TIME_HEIGHT: f64 = 222.0;

/// One decimal place keeps the markup short and stable.
fn r1(x: f64) -> f64 {
    (x * 10.0).round() / 10.0
}

fn map<const N: usize>(pairs: [(&str, Value); N]) -> Value {
    Value::from(
        pairs
            .into_iter()
            .map(|(k, v)| (k.to_string(), v))
            .collect::<BTreeMap<String, Value>>(),
    )
}

/// Findings by rule as horizontal bars, most findings first, each bar in
/// the color of the rule's most severe finding.
pub(super) fn rule_bars(report: &Report, by_rule: &[(String, usize)]) -> Value {
    let mut worst: BTreeMap<&str, Severity> = BTreeMap::new();
    for f in report.findings.keys() {
        let w = worst.entry(f.rule).or_insert(f.severity);
        *w = (*w).max(f.severity);
    }
    let max = by_rule.iter().map(|(_, n)| *n).max().unwrap_or(0).max(1) as f64;
    let rows: Vec<Value> = by_rule
        .iter()
        .enumerate()
        .map(|(i, (rule, n))| {
            let rule = clean(rule).into_owned();
            let label = if rule.chars().count() > LABEL_CHARS {
                rule.chars().take(LABEL_CHARS - 1).collect::<String>() + "…"
            } else {
                rule.clone()
            };
            let w = r1((*n as f64 / max * BAR_MAX).max(2.0));
            let y = i as f64 * ROW + 3.0;
            let severity = worst.get(rule.as_str()).map_or("info", |s| s.as_str());
            map([
                ("rule", Value::from(rule)),
                ("label", Value::from(label)),
                ("count", Value::from(*n)),
                ("severity", Value::from(severity)),
                ("y", Value::from(y)),
                ("text_y", Value::from(y + 10.0)),
                ("w", Value::from(w)),
                ("count_x", Value::from(r1(BAR_START + w + 5.0))),
            ])
        })
        .collect();
    map([
        ("width", Value::from(WIDTH)),
        ("height", Value::from(by_rule.len() as f64 * ROW + 8.0)),
        ("label_end", Value::from(LABEL_END)),
        ("bar_start", Value::from(BAR_START)),
        ("rows", Value::from(rows)),
    ])
}

/// Events and findings over the span: two strips of columns sharing the
/// time axis (events above, findings below), or none without buckets.
pub(super) fn time_bars(report: &Report) -> Value {
    let buckets = &report.timeline_buckets;
    if buckets.is_empty() {
        return Value::from(());
    }
    let max_e = buckets.iter().map(|b| b.events).max().unwrap_or(0).max(1);
    let max_f = buckets.iter().map(|b| b.findings).max().unwrap_or(0).max(1);
    let step = (PLOT_X1 - PLOT_X0) / buckets.len() as f64;
    let long = report
        .span
        .from
        .zip(report.span.to)
        .is_some_and(|(a, b)| b - a > chrono::Duration::hours(24));
    let bars: Vec<Value> = buckets
        .iter()
        .enumerate()
        .map(|(i, b)| {
            let eh = r1(b.events as f64 / max_e as f64 * EVENTS_H);
            let fh = r1(b.findings as f64 / max_f as f64 * FINDINGS_H);
            map([
                ("x", Value::from(r1(PLOT_X0 + i as f64 * step))),
                ("w", Value::from(r1((step - 1.0).max(0.6)))),
                ("events", Value::from(b.events)),
                ("findings", Value::from(b.findings)),
                ("ey", Value::from(r1(EVENTS_TOP + EVENTS_H - eh))),
                ("eh", Value::from(eh)),
                ("fy", Value::from(r1(FINDINGS_TOP + FINDINGS_H - fh))),
                ("fh", Value::from(fh)),
                ("title", Value::from(title(b))),
            ])
        })
        .collect();
    let first = buckets.first().and_then(|b| b.from);
    let last = report.span.to.or(buckets.last().and_then(|b| b.to));
    let middle = first
        .zip(last)
        .map(|(a, b)| a + (b - a) / 2)
        .map(|t| axis_label(t, long));
    let width = buckets
        .first()
        .and_then(|b| b.from.zip(b.to))
        .map(|(a, b)| duration((b - a).num_milliseconds()));
    map([
        ("width", Value::from(WIDTH)),
        ("height", Value::from(TIME_HEIGHT)),
        ("x0", Value::from(PLOT_X0)),
        ("x1", Value::from(PLOT_X1)),
        ("xm", Value::from(r1((PLOT_X0 + PLOT_X1) / 2.0))),
        ("events_top", Value::from(EVENTS_TOP)),
        ("events_base", Value::from(EVENTS_TOP + EVENTS_H)),
        ("findings_top", Value::from(FINDINGS_TOP)),
        ("findings_base", Value::from(FINDINGS_TOP + FINDINGS_H)),
        ("axis_y", Value::from(FINDINGS_TOP + FINDINGS_H + 16.0)),
        ("max_events", Value::from(max_e)),
        ("max_findings", Value::from(max_f)),
        (
            "total_events",
            Value::from(buckets.iter().map(|b| b.events).sum::<u64>()),
        ),
        (
            "total_findings",
            Value::from(buckets.iter().map(|b| b.findings).sum::<u64>()),
        ),
        (
            "start",
            Value::from(first.map(|t| axis_label(t, long)).unwrap_or_default()),
        ),
        ("middle", Value::from(middle.unwrap_or_default())),
        (
            "end",
            Value::from(last.map(|t| axis_label(t, long)).unwrap_or_default()),
        ),
        ("bucket", Value::from(width.unwrap_or_default())),
        ("bars", Value::from(bars)),
    ])
}

fn title(b: &TimeBucket) -> String {
    let at = |t: Option<DateTime<Utc>>| t.as_ref().map_or("-".into(), crate::finding::fmt_instant);
    let plural = |n: u64, word: &str| format!("{n} {word}{}", if n == 1 { "" } else { "s" });
    format!(
        "{} .. {}: {}, {}",
        at(b.from),
        at(b.to),
        plural(b.events, "event"),
        plural(b.findings, "finding")
    )
}

/// Axis times in UTC: the clock within a day, the date too beyond.
fn axis_label(t: DateTime<Utc>, long: bool) -> String {
    if long {
        t.format("%m-%d %H:%M").to_string()
    } else {
        t.format("%H:%M:%S").to_string()
    }
}

/// "5 min 50 s", "2 h 3 min", "1.5 s", "3 d 4 h".
fn duration(ms: i64) -> String {
    let s = ms / 1000;
    match s {
        _ if ms < 1000 => format!("{ms} ms"),
        0..60 => format!("{:.1} s", ms as f64 / 1000.0),
        60..3600 => format!("{} min {} s", s / 60, s % 60),
        3600..86400 => format!("{} h {} min", s / 3600, s % 3600 / 60),
        _ => format!("{} d {} h", s / 86400, s % 86400 / 3600),
    }
}

/// How long the audited span is, for the header.
pub(super) fn span_length(report: &Report) -> Value {
    match report.span.from.zip(report.span.to) {
        Some((a, b)) => Value::from(duration((b - a).num_milliseconds())),
        None => Value::from(()),
    }
}
