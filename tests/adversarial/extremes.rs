//! No single event's values can disable or fool a rule. The incident sample
//! is audited alone and then beside a file of events that each carry one
//! extreme but legal value (huge or oddly written integers, instants at the
//! ends of RFC 3339's range, huge durations and token times) or its illegal
//! neighbour. Every rule must run, every finding of the sample must stay,
//! and the extra findings must be exactly those the values call for.

use super::*;
use chrono::{DateTime, SecondsFormat};
use hvaudit::Report;
use std::collections::BTreeSet;

/// One 0.2 event; `fields` starts with a comma and includes the payload.
fn line(id: &str, ty: &str, at: &str, fields: &str) -> String {
    format!(
        r#"{{"spec_version":"0.2","id":"{id}","type":"{ty}","source":"agent:x","created_at":"{at}"{fields}}}"#
    )
}

/// `ms` milliseconds after 2026-07-14T09:00:00Z, as RFC 3339.
fn at(ms: i64) -> String {
    let base = DateTime::parse_from_rfc3339("2026-07-14T09:00:00Z").unwrap();
    (base + chrono::Duration::milliseconds(ms)).to_rfc3339_opts(SecondsFormat::Millis, true)
}

/// task.submitted, accepted and started for `task` at the three instants.
fn started(task: &str, times: [&str; 3], parent: Option<&str>) -> Vec<String> {
    let parent = parent.map_or(String::new(), |p| format!(r#","parent_task_id":"{p}""#));
    ["submitted", "accepted", "started"]
        .iter()
        .zip(times)
        .map(|(state, t)| {
            line(
                &format!("{task}_{state}"),
                &format!("task.{state}"),
                t,
                &format!(r#","task_id":"{task}"{parent},"payload":{{"task_id":"{task}"}}"#),
            )
        })
        .collect()
}

fn completed(task: &str, t: &str, parent: Option<&str>) -> String {
    let parent = parent.map_or(String::new(), |p| format!(r#","parent_task_id":"{p}""#));
    line(
        &format!("{task}_completed"),
        "task.completed",
        t,
        &format!(r#","task_id":"{task}"{parent},"payload":{{"task_id":"{task}"}}"#),
    )
}

/// A started task `g_CASE` asked to save_and_stop with `grace` as written,
/// which saves its checkpoint at `request` + `after`.
fn interruption(case: &str, grace: &str, times: [&str; 5]) -> Vec<String> {
    let task = format!("g_{case}");
    let mut out = started(&task, [times[0], times[1], times[2]], None);
    out.push(line(
        &format!("{task}_req"),
        "interruption.requested",
        times[3],
        &format!(
            r#","task_id":"{task}","interruption_policy":"save_and_stop","payload":{{"reason":"drain","grace_period_ms":{grace}}}"#
        ),
    ));
    out.push(line(
        &format!("{task}_saved"),
        "interruption.saved",
        times[4],
        &format!(r#","task_id":"{task}","checkpoint_id":"ckpt_{case}","payload":{{}}"#),
    ));
    out
}

fn interruption_after(case: &str, grace: &str, after_ms: i64) -> Vec<String> {
    let t = [at(0), at(1), at(2), at(10), at(10 + after_ms)];
    interruption(case, grace, [&t[0], &t[1], &t[2], &t[3], &t[4]])
}

/// A handoff whose structured token carries `iat` and `exp` as written; every
/// other claim matches the event.
fn handoff(case: &str, iat: &str, exp: &str) -> String {
    use base64::Engine;
    let task = format!("t_task_{case}");
    let claims = format!(
        r#"{{"iss":"agent:a","sub":"agent:b","task_id":"{task}","iat":{iat},"exp":{exp},"jti":"jti_{case}"}}"#
    );
    let token = base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(claims);
    line(
        &format!("t_{case}"),
        "delegation.handoff.completed",
        &at(30 * 60_000),
        &format!(
            r#","task_id":"{task}","delegated_by":"agent:a","delegated_to":"agent:b","handoff_token":"{token}","payload":{{}}"#
        ),
    )
}

/// A basis event with `stale_after` as written and a decision on it ten
/// minutes later.
fn decision_on(case: &str, stale_after: &str) -> Vec<String> {
    vec![
        line(
            &format!("s_{case}"),
            "environment.observed",
            &at(40 * 60_000),
            &format!(r#","stale_after":"{stale_after}","payload":{{}}"#),
        ),
        line(
            &format!("s_{case}_decision"),
            "agent.decision.recorded",
            &at(50 * 60_000),
            &format!(r#","causation_id":"s_{case}","payload":{{"decision":"go"}}"#),
        ),
    ]
}

/// The extreme events, and the findings they must add: (rule, first event).
fn extremes() -> (Vec<String>, BTreeSet<(String, String)>) {
    let mut log = Vec::new();
    let mut expected = BTreeSet::new();
    let mut expect = |rule: &str, first: String| expected.insert((rule.to_string(), first));
    // Grace periods. Huge ones are deadlines past every instant: never late.
    for (case, grace) in [
        ("past_date64", "9223372036854776"),
        ("us_max", "9223372036854775"),
        ("i64_max", "9223372036854775807"),
        ("two_63", "9223372036854775808"),
        ("two_64", "18446744073709551616"),
        ("e400", "1e400"),
    ] {
        log.extend(interruption_after(case, grace, 3_600_000));
    }
    // 1e400 cannot be read as a JSON value to validate the payload: said so.
    expect("payload.invalid", "g_e400_req".into());
    // Every integer form is 5000: late at +5001 ms, on time at +5000 ms.
    for (case, grace) in [("plain", "5000"), ("e3", "5e3"), ("dot0", "5000.0")] {
        log.extend(interruption_after(&format!("{case}_late"), grace, 5001));
        log.extend(interruption_after(&format!("{case}_on_time"), grace, 5000));
        expect("checkpoint.late", format!("g_{case}_late_saved"));
    }
    // What the schema rejects is named, and is no deadline at all.
    for (case, grace) in [
        ("negative", "-1"),
        ("fraction", "5000.5"),
        // f64 reads it as 5000.0: the validator alone would pass it
        ("hidden_fraction", "5000.000000000000000001"),
    ] {
        log.extend(interruption_after(case, grace, 3_600_000));
        expect("payload.invalid", format!("g_{case}_req"));
    }
    // Requests at the ends of time, whose deadline arithmetic overflowed.
    log.extend(interruption(
        "year_0000",
        "9223372036854775807",
        [
            "0000-01-01T00:00:20+23:59",
            "0000-01-01T00:00:21+23:59",
            "0000-01-01T00:00:22+23:59",
            "0000-01-01T00:00:23+23:59",
            "0000-01-01T00:00:24+23:59",
        ],
    ));
    log.extend(interruption(
        "year_10000",
        "9223372036854775",
        [
            "9999-12-31T23:59:50-23:59",
            "9999-12-31T23:59:51-23:59",
            "9999-12-31T23:59:52-23:59",
            "9999-12-31T23:59:53-23:59",
            "9999-12-31T23:59:54-23:59",
        ],
    ));
    // Legal lifecycles at both ends of the range, and a parent whose child
    // spans it (0.2: the child may finish first).
    log.extend(started(
        "x_ancient",
        [
            "0000-01-01T00:00:00+23:59",
            "0000-01-01T00:00:01+23:59",
            "0000-01-01T00:00:02+23:59",
        ],
        None,
    ));
    log.push(completed("x_ancient", "0000-01-01T00:00:03+23:59", None));
    log.extend(started(
        "x_future",
        [
            "9999-12-31T23:59:56-23:59",
            "9999-12-31T23:59:57-23:59",
            "9999-12-31T23:59:58-23:59",
        ],
        None,
    ));
    log.push(completed(
        "x_future",
        "9999-12-31T23:59:59.999999-23:59",
        None,
    ));
    log.extend(started(
        "x_parent",
        [
            "0000-01-01T00:00:10+23:59",
            "0000-01-01T00:00:11+23:59",
            "0000-01-01T00:00:12+23:59",
        ],
        None,
    ));
    log.extend(started(
        "x_child",
        [
            "0000-01-01T00:00:13+23:59",
            "0000-01-01T00:00:14+23:59",
            "0000-01-01T00:00:15+23:59",
        ],
        Some("x_parent"),
    ));
    log.push(completed(
        "x_child",
        "9999-12-31T23:59:58-23:59",
        Some("x_parent"),
    ));
    log.push(completed(
        "x_parent",
        "9999-12-31T23:59:59.999999-23:59",
        None,
    ));
    // Token times: far-future expiries never expire; a far-future iat and a
    // far-past or year-0000 expiry are the findings they should be.
    let issued = (DateTime::parse_from_rfc3339(&at(30 * 60_000))
        .unwrap()
        .timestamp()
        - 10)
        .to_string();
    let iat = issued.as_str();
    for (case, iat, exp) in [
        ("exp_1e15", iat, "1e15"),
        ("exp_e400", iat, "1e400"),
        ("exp_u64", iat, "18446744073709551616"),
        ("iat_9e12", "9e12", "1e12"),
        ("exp_neg", iat, "-9e12"),
        (
            "rfc_ends",
            r#""0000-01-01T00:00:00+23:59""#,
            r#""9999-12-31T23:59:59.999999-23:59""#,
        ),
        ("rfc_expired", iat, r#""0000-01-01T00:00:00+23:59""#),
    ] {
        log.push(handoff(case, iat, exp));
    }
    for case in ["iat_9e12", "exp_neg", "rfc_expired"] {
        expect("token.claims_invalid", format!("t_{case}"));
    }
    // Durations past u32 per field and past i64 milliseconds: never stale;
    // nor half an hour ten minutes on (the crate read both as zero).
    for (case, stale_after) in [
        ("half_hour", "PT0.5H"),
        ("days", "P99999999999999D"),
        ("years_i64", "P300000Y"),
        ("years_us", "P200000Y"),
        ("seconds", "PT99999999999999999999999S"),
        ("weeks", "P18446744073709551616W"),
        ("short", "PT1S"),
    ] {
        log.extend(decision_on(case, stale_after));
    }
    expect("decision.stale_basis", "s_short_decision".into());
    // Envelope numbers the schema allows: no line may be rejected for them.
    for (case, fields) in [
        (
            "seq_u64",
            r#""delivery":{"mode":"at_least_once","sequence":18446744073709551616}"#,
        ),
        ("seq_dot0", r#""delivery":{"sequence":5.0}"#),
        ("seq_e400", r#""delivery":{"sequence":1e400}"#),
        (
            "attestations_e400",
            r#""source_trust":"attested","attestation_count":1e400"#,
        ),
        (
            "attestations_big",
            r#""attestation_count":1.7976931348623157e308"#,
        ),
        ("confidence_tiny", r#""confidence":1e-400"#),
    ] {
        log.push(line(
            &format!("n_{case}"),
            "environment.observed",
            &at(60 * 60_000),
            &format!(r#",{fields},"payload":{{}}"#),
        ));
    }
    (log, expected)
}

fn audit(dir: &Path, tweak: impl FnOnce(&mut AuditConfig)) -> Report {
    let mut cfg = AuditConfig {
        reading: hvaudit::tables::ReadingOptions {
            ingest: hvaudit::ingest::IngestOptions {
                token_format: TokenFormat::Structured,
                ..crate::common::test_reading()
            },
            ..crate::common::reading_options(vec![dir.to_path_buf()])
        },
        ..Default::default()
    };
    tweak(&mut cfg);
    let report = Audit::new(cfg.clone()).run().unwrap();
    assert!(report.rule_errors.is_empty(), "{:?}", report.rule_errors);
    let rule_files = std::fs::read_dir(Path::new(env!("CARGO_MANIFEST_DIR")).join("queries/rules"))
        .unwrap()
        .count();
    assert_eq!(report.rules.len(), rule_files, "every rule ran");
    report
}

/// A finding as compared across runs, with the end of the log (which the
/// extreme events move) written as `<end>`.
type Key = (String, Option<String>, Vec<String>, String);

fn keys(report: &Report) -> BTreeSet<Key> {
    report.findings.iter().map(|f| key(report, &f)).collect()
}

fn key(report: &Report, f: &hvaudit::Finding) -> Key {
    // as the rules write instants (queries/README.md)
    let end = report.span.to.unwrap().format("%Y-%m-%dT%H:%M:%S%.3fZ");
    let mut message = f.message.clone();
    for said in ["log ends at", "end of the log at"] {
        message = message.replace(&format!("{said} {end}"), &format!("{said} <end>"));
    }
    (
        f.rule.clone(),
        f.task_id.clone(),
        f.event_ids.clone(),
        message,
    )
}

fn copy_sample(to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    let sample = Path::new(env!("CARGO_MANIFEST_DIR")).join("samples/incident");
    for name in ["aep-0.1.ndjson", "harmovela-0.2.ndjson"] {
        std::fs::copy(sample.join(name), to.join(name)).unwrap();
    }
}

#[test]
fn extreme_values_neither_disable_nor_fool_a_rule() {
    // One directory, so that the messages name the same files.
    let tmp = tempfile::tempdir().unwrap();
    let hostile = tmp.path();
    copy_sample(hostile);
    let before = audit(hostile, |_| {});
    let (log, expected) = extremes();
    write(
        hostile,
        "extremes.ndjson",
        (log.join("\n") + "\n").as_bytes(),
    );
    let after = audit(hostile, |_| {});
    // No line of the extreme file is rejected: every value is legal or a
    // payload the schema names.
    let extreme_input = after
        .inputs
        .iter()
        .find(|i| i.path.ends_with("extremes.ndjson"))
        .unwrap();
    assert_eq!(
        (extreme_input.bad_lines, extreme_input.events),
        (0, log.len() as u64),
        "{extreme_input:?}"
    );
    let (before_keys, after_keys) = (keys(&before), keys(&after));
    for k in &before_keys {
        assert!(after_keys.contains(k), "lost: {k:?}");
    }
    let extra: BTreeSet<(String, String)> = after_keys
        .difference(&before_keys)
        // a finding on a rejected line names no event: its message then
        .map(|(rule, _, ids, message)| (rule.clone(), ids.first().unwrap_or(message).clone()))
        .collect();
    assert_eq!(extra, expected);

    // 5e3 and 5000.0 read exactly as 5000 does: the same message.
    let message = |first: &str| {
        after
            .findings
            .iter()
            .find(|f| f.event_ids.first().is_some_and(|id| id == first))
            .unwrap()
            .message
            .clone()
    };
    let plain = message("g_plain_late_saved");
    assert!(
        plain.contains("came 5001 ms after") && plain.contains("grace period of 5000 ms"),
        "{plain}"
    );
    for case in ["e3", "dot0"] {
        assert_eq!(
            message(&format!("g_{case}_late_saved")).replace(case, "plain"),
            plain
        );
    }
    assert!(message("g_hidden_fraction_req").contains("grace_period_ms"));
    assert!(message("t_rfc_expired").contains("exp -0001-12-31T00:01:00.000Z"));

    // Every report format renders them.
    for format in ALL_FORMATS {
        render(&after, format, &mut std::io::sink()).unwrap();
    }
    // The binary: findings, not a failed rule; SQL shows every column.
    let dir = hostile.as_os_str();
    run_ok(
        &[
            os("audit"),
            os("-q"),
            os("--token-format"),
            os("structured"),
            dir,
        ],
        &[1],
    );
    run_ok(
        &[
            os("sql"),
            os("-q"),
            os("-e"),
            os("SELECT * FROM events"),
            dir,
        ],
        &[0],
    );
}

/// A horizon longer than int64 microseconds wrapped into a negative one
/// that flagged every wait; it must act as any horizon longer than the log.
#[test]
fn a_horizon_longer_than_any_log_flags_no_wait() {
    let tmp = tempfile::tempdir().unwrap();
    copy_sample(tmp.path());
    let none = keys(&audit(tmp.path(), |_| {}));
    let thousand_years = keys(&audit(tmp.path(), |c| {
        c.horizon_ms = Some(31_536_000_000_000)
    }));
    let longest = keys(&audit(tmp.path(), |c| c.horizon_ms = Some(i64::MAX)));
    assert!(
        thousand_years.len() < none.len(),
        "the sample has waits to the end"
    );
    assert_eq!(longest, thousand_years);
    run_ok(
        &[
            os("audit"),
            os("-q"),
            os("--horizon"),
            os("9223372036854775807d"),
            tmp.path().as_os_str(),
        ],
        &[0, 1],
    );
}
