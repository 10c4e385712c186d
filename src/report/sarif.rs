//! `--format sarif`: SARIF 2.1.0 for code-scanning dashboards. Logs take
//! the place of source files: a finding's evidence lines are its regions.
//! Nothing time- or machine-dependent is written, so runs diff cleanly.

use super::model::{InputSummary, Report, RuleMeta};
use super::{Configuration, identity_holds};
use crate::finding::{Finding, Location, Severity, fmt_instant};
use crate::finding_store::Findings;
use serde::ser::{Serialize, SerializeMap, SerializeSeq, Serializer};
use serde_json::{Value, json};
use serde_sarif::sarif;
use std::collections::BTreeMap;
use std::io::Write;

/// The OASIS schema the output conforms to (2.1.0 with errata 01).
const SCHEMA: &str =
    "https://docs.oasis-open.org/sarif/sarif/v2.1.0/errata01/os/schemas/sarif-schema-2.1.0.json";
/// partialFingerprints key; bump the version if `Finding::fingerprint` changes.
/// v2: the fingerprint no longer depends on file names and line numbers.
const FINGERPRINT_KEY: &str = "hvaudit/v3";

pub(super) fn render(
    report: &Report,
    config: Option<&Configuration>,
    out: &mut dyn Write,
) -> anyhow::Result<()> {
    let index: BTreeMap<&str, usize> = report
        .rules
        .iter()
        .enumerate()
        .map(|(i, r)| (r.id.as_str(), i))
        .collect();
    let driver = sarif::ToolComponent::builder()
        .name(report.tool.as_str())
        .version(report.version.as_str())
        .rules(report.rules.iter().map(descriptor).collect::<Vec<_>>())
        .build();
    let run = sarif::Run::builder()
        .tool(driver)
        .invocations(vec![invocation(report)])
        .artifacts(artifacts(report))
        .column_kind("unicodeCodePoints")
        .properties(run_properties(report, config))
        .build();
    let log = sarif::Sarif::builder()
        .schema(SCHEMA)
        .version(sarif::Version::V2_1_0.to_string())
        .runs(Vec::new())
        .build();
    // The log and its run without results are small; the results are
    // made one at a time as they are written.
    let (Value::Object(log), Value::Object(run)) =
        (serde_json::to_value(&log)?, serde_json::to_value(&run)?)
    else {
        anyhow::bail!("a SARIF log serializes as a JSON object");
    };
    let results = Results {
        findings: &report.findings,
        absent: report.absent(),
        suppressing: report.gate.suppressions.is_some(),
        index: &index,
    };
    let run = WithEntry {
        map: &run,
        key: "results",
        value: results,
    };
    let log = WithEntry {
        map: &log,
        key: "runs",
        value: [run],
    };
    serde_json::to_writer_pretty(&mut *out, &log)?;
    out.write_all(b"\n")?;
    Ok(())
}

/// The run's property bag: the span, the unresolved references, the
/// verdict, and the configuration file applied (only when one was).
fn run_properties(report: &Report, config: Option<&Configuration>) -> sarif::PropertyBag {
    let mut props = bag([
        (
            "span",
            json!({
                "from": report.span.from.as_ref().map(fmt_instant),
                "to": report.span.to.as_ref().map(fmt_instant),
            }),
        ),
        ("unresolvedBasis", json!(report.unresolved_basis)),
        ("verdict", json!(shown(&super::verdict(report)))),
    ]);
    if let Some(n) = report.outside_window {
        props
            .additional_properties
            .insert("findingsOutsideWindow".into(), json!(n));
    }
    if let Some(r) = report.readings {
        props
            .additional_properties
            .insert("conflictingCopies".into(), json!(r));
    }
    if let Some(c) = config {
        props.additional_properties.insert(
            "configuration".into(),
            json!({
                "file": shown(&c.file),
                "found": c.found,
                "options": c.options,
                "rules": c.rules.iter().map(|r| shown(r)).collect::<Vec<_>>(),
                "summary": shown(&c.summary()),
            }),
        );
    }
    props
}

/// Text a viewer shows (every message, description and justification):
/// hidden characters made visible, as in the other formats.
fn shown(text: &str) -> String {
    super::clean(text).into_owned()
}

// Multi-line text a viewer shows (a rule's explanation): each line as
// `shown`, the line breaks kept.
use crate::escape::visible_lines as shown_lines;

/// A JSON object: the entries of `map` with `key: value` in place of any
/// entry named `key`, in key order (the order serde_json writes its maps in),
/// `value` serialized as it is written.
struct WithEntry<'a, T> {
    map: &'a serde_json::Map<String, Value>,
    key: &'static str,
    value: T,
}

impl<T: Serialize> Serialize for WithEntry<'_, T> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let mut m = s.serialize_map(Some(self.map.len() + 1))?;
        let mut pending = Some(&self.value);
        for (k, v) in self.map.iter().filter(|(k, _)| k.as_str() != self.key) {
            if k.as_str() > self.key
                && let Some(value) = pending.take()
            {
                m.serialize_entry(self.key, value)?;
            }
            m.serialize_entry(k, v)?;
        }
        if let Some(value) = pending {
            m.serialize_entry(self.key, value)?;
        }
        m.end()
    }
}

/// The run's results, each built from its finding as it is written, then
/// the baseline's findings that are gone (baselineState "absent").
struct Results<'a> {
    findings: &'a Findings,
    absent: &'a [Finding],
    /// A suppression file applied: results it did not suppress say so with
    /// an empty `suppressions` list.
    suppressing: bool,
    index: &'a BTreeMap<&'a str, usize>,
}

impl Serialize for Results<'_> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let mut seq = s.serialize_seq(Some(self.findings.len() + self.absent.len()))?;
        let one = |f: &Finding| {
            let mut r = result(f, self.index.get(f.rule.as_str()).copied());
            if self.suppressing && r.suppressions.is_none() {
                r.suppressions = Some(Vec::new());
            }
            r
        };
        for f in self.findings {
            seq.serialize_element(&one(&f))?;
        }
        for f in self.absent {
            seq.serialize_element(&one(f))?;
        }
        seq.end()
    }
}

/// SARIF has three result levels; critical and high both fail a build.
fn level(s: Severity) -> sarif::ResultLevel {
    match s {
        Severity::Critical | Severity::High => sarif::ResultLevel::Error,
        Severity::Medium => sarif::ResultLevel::Warning,
        Severity::Low | Severity::Info => sarif::ResultLevel::Note,
    }
}

fn descriptor(r: &RuleMeta) -> sarif::ReportingDescriptor {
    sarif::ReportingDescriptor::builder()
        .id(r.id.as_str())
        .short_description(&shown(&r.summary))
        .full_description(&shown_lines(&r.explain))
        // The sections of docs/protocol.md the rule rests on, after its text.
        .help(&shown_lines(&format!("{}\n\nSpec: {}", r.explain, r.spec)))
        .default_configuration(
            sarif::ReportingConfiguration::builder()
                .level(json!(level(r.severity)))
                .build(),
        )
        .properties(sarif::PropertyBag {
            // Code-scanning dashboards group and filter rules by tags.
            tags: Some(vec![r.family.clone(), r.severity.to_string()]),
            ..bag([
                ("severity", json!(r.severity)),
                ("family", json!(r.family)),
                ("dialect", json!(r.dialect)),
                ("spec", json!(r.spec)),
            ])
        })
        .build()
}

fn result(f: &Finding, rule_index: Option<usize>) -> sarif::Result {
    let mut res = sarif::Result::builder()
        .rule_id(f.rule.as_str())
        .level(level(f.severity))
        // Viewers show the message: hidden characters in ids made visible.
        .message(super::log_text(&f.message).as_ref())
        .locations(f.locations.iter().map(location).collect::<Vec<_>>())
        .partial_fingerprints(BTreeMap::from([(
            FINGERPRINT_KEY.to_string(),
            f.fingerprint.clone(),
        )]))
        .properties(bag([
            ("severity", json!(f.severity)),
            ("family", json!(f.family)),
            ("taskId", json!(f.task_id)),
            ("eventIds", json!(f.event_ids)),
            ("at", json!(f.at.as_ref().map(fmt_instant))),
        ]
        .into_iter()
        .chain(f.rests_on_version.map(|v| ("restsOnVersion", json!(v))))))
        .build();
    // A rule the report does not list (e.g. a failed rule file) gets no
    // index rather than a wrong one.
    res.rule_index = rule_index.and_then(|i| i64::try_from(i).ok());
    res.code_flows = timeline(f).map(|c| vec![c]);
    res.baseline_state = f.baseline_state.map(|b| json!(b.as_str()));
    res.suppressions = f.suppression.as_ref().map(|s| {
        let mut said = sarif::Suppression::builder()
            .kind(json!("external"))
            .status(json!("accepted"))
            .justification(shown(&s.reason).as_str())
            .build();
        said.properties = Some(bag([
            ("entry", json!(s.entry)),
            ("owner", json!(s.owner)),
            ("expires", json!(s.expires)),
        ]));
        vec![said]
    });
    res
}

/// The finding's timeline as one thread flow: its events in time order,
/// each with its instant, so dashboards can step through the case.
fn timeline(f: &Finding) -> Option<sarif::CodeFlow> {
    if f.timeline.is_empty() {
        return None;
    }
    let steps: Vec<sarif::ThreadFlowLocation> = f
        .timeline
        .iter()
        .enumerate()
        .map(|(i, t)| {
            let mut loc = location(&Location {
                file: t.file.clone(),
                line: t.line,
                event_id: None,
            });
            let task = t
                .task_id
                .as_deref()
                .map(|task| format!(" (task {task})"))
                .unwrap_or_default();
            loc.message = Some(
                shown(&format!("{} {}{task}", t.event_type, t.event_id))
                    .as_str()
                    .into(),
            );
            let mut step = sarif::ThreadFlowLocation::builder()
                .location(loc)
                .execution_order(i64::try_from(i).unwrap_or(i64::MAX))
                .build();
            step.execution_time_utc = t.at.as_ref().map(fmt_instant);
            step
        })
        .collect();
    Some(
        sarif::CodeFlow::builder()
            .message("timeline")
            .thread_flows(vec![sarif::ThreadFlow::builder().locations(steps).build()])
            .build(),
    )
}

fn location(l: &Location) -> sarif::Location {
    let artifact = sarif::ArtifactLocation::builder().uri(uri(&l.file)).build();
    let physical = sarif::PhysicalLocation::builder().artifact_location(artifact);
    // SARIF lines start at 1; line 0 means the place is unknown, so the
    // location names only the file.
    let physical = match l.line {
        0 => physical.build(),
        n => physical
            .region(
                sarif::Region::builder()
                    .start_line(i64::try_from(n).unwrap_or(i64::MAX))
                    .build(),
            )
            .build(),
    };
    let loc = sarif::Location::builder().physical_location(physical);
    match &l.event_id {
        Some(e) => loc.message(shown(&format!("event {e}")).as_str()).build(),
        None => loc.build(),
    }
}

fn invocation(report: &Report) -> sarif::Invocation {
    let mut notes: Vec<sarif::Notification> = report
        .rule_errors
        .iter()
        .map(|(rule, error)| {
            sarif::Notification::builder()
                .message(shown(&format!("rule {rule} failed: {error}")).as_str())
                .level(json!("error"))
                .descriptor(
                    sarif::ReportingDescriptorReference::builder()
                        .id(rule.as_str())
                        .build(),
                )
                .build()
        })
        .collect();
    notes.extend(report.inputs.iter().filter_map(|i| {
        let e = i.error.as_deref()?;
        Some(
            sarif::Notification::builder()
                .message(shown(&format!("input {} read incompletely: {e}", i.path)).as_str())
                .level(json!("error"))
                .build(),
        )
    }));
    // The gate's notes: no events read, suppression entries expired or
    // unused, the baseline's counts.
    notes.extend(super::gate_notes(report).into_iter().map(|n| {
        let level = if n.starts_with("No events") || n.contains("expired") {
            "warning"
        } else {
            "note"
        };
        sarif::Notification::builder()
            .message(shown(&n).as_str())
            .level(json!(level))
            .build()
    }));
    let t = report.totals();
    sarif::Invocation::builder()
        .execution_successful(
            report.rule_errors.is_empty() && report.inputs.iter().all(|i| i.error.is_none()),
        )
        .tool_execution_notifications(notes)
        .properties(bag([
            ("accounting", accounting(&t, identity_holds(report))),
            ("rulesRun", json!(report.rules.len())),
        ]))
        .build()
}

/// One artifact per input, with its share of the accounting identity.
fn artifacts(report: &Report) -> Vec<sarif::Artifact> {
    report
        .inputs
        .iter()
        .map(|i| {
            sarif::Artifact::builder()
                .location(sarif::ArtifactLocation::builder().uri(uri(&i.path)).build())
                .length(i64::try_from(i.bytes).unwrap_or(i64::MAX))
                .roles(vec![json!("analysisTarget")])
                .properties(bag([
                    ("format", json!(i.format)),
                    ("accounting", accounting(i, i.identity_holds())),
                    ("error", json!(i.error)),
                ]))
                .build()
        })
        .collect()
}

fn accounting(i: &InputSummary, identity_holds: bool) -> Value {
    let mut v = json!({
        "lines": i.lines,
        "events": i.events,
        "redeliveries": i.redeliveries,
        "badLines": i.bad_lines,
        "blankLines": i.blank_lines,
        "identityHolds": identity_holds,
    });
    if i.bad_lines_unlisted > 0 {
        v["badLinesUnlisted"] = json!(i.bad_lines_unlisted);
    }
    if i.conflicting_copies > 0 {
        v["conflictingCopies"] = json!(i.conflicting_copies);
    }
    v
}

fn bag<'a>(props: impl IntoIterator<Item = (&'a str, Value)>) -> sarif::PropertyBag {
    sarif::PropertyBag {
        tags: None,
        additional_properties: props.into_iter().map(|(k, v)| (k.to_string(), v)).collect(),
    }
}

/// The input path as given, percent-encoding what a URI reference cannot
/// hold (spaces, `%`, backslashes, non-ASCII), so consumers can parse it.
fn uri(path: &str) -> String {
    let mut out = String::with_capacity(path.len());
    for b in path.bytes() {
        if b.is_ascii_alphanumeric() || b"-._~/:@!$&'()*+,;=".contains(&b) {
            out.push(b as char);
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}
