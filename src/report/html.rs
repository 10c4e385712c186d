//! `--format html`: one self-contained page (inline CSS and JS, no external
//! assets) rendered by minijinja with HTML autoescaping, so every value from
//! a log is escaped by the template engine rather than by hand.

mod charts;

use super::json::{FindingJson, ReportJson};
use super::model::Report;
use super::{Provenance, clean};
use crate::finding::fmt_instant;
use crate::finding_store::Findings;
use minijinja::value::{Enumerator, Object, ObjectRepr};
use minijinja::{Environment, Value, context};
use std::collections::BTreeMap;
use std::io::Write;
use std::sync::Arc;

const TEMPLATE: &str = include_str!("report.html");
/// The `.html` suffix turns minijinja's autoescaping on.
const NAME: &str = "report.html";

pub(super) fn render(
    report: &Report,
    provenance: &Provenance,
    out: &mut dyn Write,
) -> anyhow::Result<()> {
    let mut env = Environment::new();
    env.add_template(NAME, TEMPLATE)?;
    let counts = |v: Vec<(String, usize)>| -> Value {
        v.into_iter()
            .map(|(k, n)| Value::from(vec![Value::from(clean(&k)), Value::from(n)]))
            .collect()
    };
    let by_severity = report
        .counts_by_severity()
        .into_iter()
        .map(|(s, n)| (s.as_str().to_string(), n))
        .collect();
    let rules: Value = report
        .rules
        .iter()
        .map(|r| {
            Value::from(BTreeMap::from([
                ("id", Value::from(clean(&r.id))),
                ("severity", Value::from(r.severity.as_str())),
                ("family", Value::from(clean(&r.family))),
                ("dialect", Value::from(clean(&r.dialect))),
                ("summary", Value::from(clean(&r.summary))),
                ("spec", Value::from(clean(&r.spec))),
            ]))
        })
        .collect();
    let by_rule = report.counts_by(|f| Some(f.rule));
    // The report without its findings, which the template reaches one at a
    // time as it writes them.
    let serde_json::Value::Object(summary) = serde_json::to_value(ReportJson::summary(report))?
    else {
        anyhow::bail!("a report serializes as a JSON object");
    };
    let mut summary: BTreeMap<String, Value> = summary
        .iter()
        .map(|(k, v)| (k.clone(), from_json(v)))
        .collect();
    summary.insert(
        "findings".into(),
        Value::from_object(LazyFindings(report.findings.clone())),
    );
    let ctx = context! {
        report => Value::from(summary),
        // Lists of pairs keep the count order a map would sort away.
        by_severity => counts(by_severity),
        by_family => counts(report.counts_by(|f| Some(f.family))),
        rule_chart => charts::rule_bars(report, &by_rule),
        time_chart => charts::time_bars(report),
        span_length => charts::span_length(report),
        by_rule => counts(by_rule),
        rules => rules,
        verdict => clean(&super::verdict(report)),
        failed => report.failing() > 0,
        gated => report.gate.fail_on.is_some(),
        command => provenance.command.iter().map(|w| clean(w).into_owned()).collect::<Vec<_>>(),
        configuration => provenance.configuration.as_ref().map(|c| clean(&c.summary()).into_owned()),
        generated_at => provenance.generated_at.as_ref().map(fmt_instant),
        gate_notes => super::gate_notes(report).iter().map(|n| clean(n).into_owned()).collect::<Vec<_>>(),
    };
    env.get_template(NAME)?.render_captured_to(ctx, &mut *out)?;
    Ok(())
}

/// The findings as a template sequence whose items are built as the loop
/// reaches them.
#[derive(Debug)]
struct LazyFindings(Findings);

impl Object for LazyFindings {
    fn repr(self: &Arc<Self>) -> ObjectRepr {
        ObjectRepr::Iterable
    }

    fn enumerate(self: &Arc<Self>) -> Enumerator {
        let findings = self.0.clone();
        Enumerator::Iter(Box::new((0..findings.len()).map(move |i| {
            findings.get(i).map_or(Value::UNDEFINED, |f| {
                serde_json::to_value(FindingJson::new(&f))
                    .map_or(Value::UNDEFINED, |v| finding_json(&v, None))
            })
        })))
    }

    fn enumerator_len(self: &Arc<Self>) -> Option<usize> {
        Some(self.0.len())
    }
}

/// A finding's JSON model as template values: what the log said (ids,
/// tasks, types) with every backslash escaped too and long values cut, as
/// the text report shows it, and beside each id that may be taken for
/// another why; the message is escaped already, and paths (`file`) are as
/// shown.
fn finding_json(v: &serde_json::Value, key: Option<&str>) -> Value {
    use serde_json::Value as J;
    match v {
        J::String(s) if matches!(key, Some("file" | "message")) => Value::from(clean(s)),
        // Values of the log cut as the text report cuts them; the rest
        // (a suppression's reason, ...) whole.
        J::String(s)
            if matches!(
                key,
                Some("task_id" | "agent" | "session_id" | "event_ids" | "event_id" | "type")
            ) =>
        {
            Value::from(super::log_value(s))
        }
        J::String(s) => Value::from(super::log_text(s)),
        J::Array(a) => a.iter().map(|v| finding_json(v, key)).collect(),
        J::Object(o) => {
            let mut fields: BTreeMap<String, Value> = o
                .iter()
                .map(|(k, v)| (k.clone(), finding_json(v, Some(k))))
                .collect();
            // Beside each id that may be taken for another: why, with its
            // code points (`KEY_look_alike`; for `event_ids`, a list).
            for key in ["task_id", "event_id", "event_ids"] {
                let notes: Vec<String> = match o.get(key) {
                    Some(J::String(id)) => vec![crate::escape::look_alike(id).unwrap_or_default()],
                    Some(J::Array(ids)) => ids
                        .iter()
                        .map(|id| {
                            id.as_str()
                                .and_then(crate::escape::look_alike)
                                .unwrap_or_default()
                        })
                        .collect(),
                    _ => continue,
                };
                if notes.iter().any(|n| !n.is_empty()) {
                    let notes: Vec<Value> = notes.into_iter().map(Value::from).collect();
                    let value = match key {
                        "event_ids" => Value::from(notes),
                        _ => notes.into_iter().next().unwrap_or_default(),
                    };
                    fields.insert(format!("{key}_look_alike"), value);
                }
            }
            Value::from(fields)
        }
        other => from_json(other),
    }
}

/// minijinja is built without its serde feature, so the JSON model is
/// converted by hand. Strings lose their control characters on the way:
/// autoescaping handles markup, but a bidi override or an ESC byte would
/// still reorder or hide text in the browser (or in a terminal `cat`).
pub(crate) fn from_json(v: &serde_json::Value) -> Value {
    use serde_json::Value as J;
    match v {
        J::Null => Value::from(()),
        J::Bool(b) => Value::from(*b),
        J::Number(n) => match n.as_u64() {
            Some(u) => Value::from(u),
            None => Value::from(n.as_f64().unwrap_or_default()),
        },
        J::String(s) => Value::from(clean(s)),
        J::Array(a) => a.iter().map(from_json).collect(),
        J::Object(o) => Value::from(
            o.iter()
                .map(|(k, v)| (k.clone(), from_json(v)))
                .collect::<BTreeMap<String, Value>>(),
        ),
    }
}
