//! Order to the nanosecond (docs/protocol.md §9.3): events compare by
//! `created_at` as instants to the nanosecond, digits past the ninth
//! ignored, ties in input order. Go and Java runtimes write nanoseconds;
//! two events 1 ns apart written in reverse order were a tie at the
//! microsecond, ordered by file position, which invented and hid findings.
//!
//! One log holds every case (each with tasks of its own); it is audited
//! loaded, in place after `convert`, and on the in-process cluster
//! (`cluster.rs`), and must give the same findings every way.

use crate::common::hvaudit;
use hvaudit::Report;
use hvaudit::audit::Audit;
use hvaudit::tables::Location;
use serde_json::{Value, json};
use std::path::Path;

/// One event: dialect ("0.1" or "0.2"), id, type, created_at as written,
/// task, and envelope fields.
fn event(dialect: &str, id: &str, ty: &str, at: &str, task: &str, fields: Value) -> String {
    let mut e = match dialect {
        "0.1" => json!({"aep_version": "0.1"}),
        _ => json!({"spec_version": "0.2"}),
    };
    e["id"] = json!(id);
    e["type"] = json!(ty);
    e["source"] = json!("agent:test");
    e["created_at"] = json!(at);
    e["task_id"] = json!(task);
    e["payload"] = if ty.starts_with("task.") {
        json!({"task_id": task})
    } else {
        json!({})
    };
    for (k, v) in fields.as_object().cloned().unwrap_or_default() {
        if k == "payload" {
            for (pk, pv) in v.as_object().cloned().unwrap_or_default() {
                e["payload"][pk] = pv;
            }
        } else {
            e[k] = v;
        }
    }
    e.to_string()
}

/// A parent P and its child C (ids prefixed by `case`), both running, then
/// the two terminal events as given, in this order in the file.
fn parent_and_child(dialect: &str, case: &str, ends: [(&str, &str); 2]) -> Vec<String> {
    let (p, c) = (format!("{case}_p"), format!("{case}_c"));
    let at = |s: u32| format!("2026-07-14T12:00:{s:02}Z");
    let mut log = vec![
        event(
            dialect,
            &format!("{p}_sub"),
            "task.submitted",
            &at(0),
            &p,
            json!({}),
        ),
        event(
            dialect,
            &format!("{p}_acc"),
            "task.accepted",
            &at(1),
            &p,
            json!({}),
        ),
        event(
            dialect,
            &format!("{p}_run"),
            "task.started",
            &at(2),
            &p,
            json!({}),
        ),
        event(
            dialect,
            &format!("{c}_sub"),
            "task.submitted",
            &at(3),
            &c,
            json!({"parent_task_id": p}),
        ),
        event(
            dialect,
            &format!("{c}_acc"),
            "task.accepted",
            &at(4),
            &c,
            json!({}),
        ),
        event(
            dialect,
            &format!("{c}_run"),
            "task.started",
            &at(5),
            &c,
            json!({}),
        ),
    ];
    for (who, at) in ends {
        let task = format!("{case}_{who}");
        log.push(event(
            dialect,
            &format!("{task}_end"),
            "task.completed",
            at,
            &task,
            json!({}),
        ));
    }
    log
}

/// The rules whose findings the cases are about.
const RULES: [&str; 5] = [
    "parent.child_terminated_first",
    "parent.terminated_early",
    "orphan.outlived_parent",
    "checkpoint.late",
    "decision.stale_basis",
];

/// Every case, one log.
pub fn log() -> Vec<String> {
    let mut log = Vec::new();
    let (first, second) = (
        "2026-07-14T12:00:10.000000001Z",
        "2026-07-14T12:00:10.000000002Z",
    );
    // The child ends 1 ns after its parent, on the line before it: the
    // parent ended first. 0.1: not child_terminated_first; 0.2: the child
    // was active when the parent ended.
    log.extend(parent_and_child("0.1", "a1", [("c", second), ("p", first)]));
    log.extend(parent_and_child("0.2", "a2", [("c", second), ("p", first)]));
    // The mirror: the child ends 1 ns before its parent, on the line after.
    log.extend(parent_and_child("0.1", "b1", [("p", second), ("c", first)]));
    log.extend(parent_and_child("0.2", "b2", [("p", second), ("c", first)]));
    // 12 fraction digits: the last three are ignored, not rounded, so these
    // two are one instant and input order decides (the child's line first).
    log.extend(parent_and_child(
        "0.1",
        "t1",
        [
            ("c", "2026-07-14T12:00:10.000000001999Z"),
            ("p", "2026-07-14T12:00:10.000000001000Z"),
        ],
    ));
    // Years past what int64 nanoseconds hold keep their order with every
    // instant inside: a child ending in 9999, on the line before its
    // parent's end (0.2: active at the parent's end), and one ending in
    // 0001, on the line after it (0.1: it ended first).
    log.extend(parent_and_child(
        "0.2",
        "y2",
        [("c", "9999-12-31T23:59:59Z"), ("p", first)],
    ));
    log.extend(parent_and_child(
        "0.1",
        "y1",
        [("p", first), ("c", "0001-01-01T00:00:00Z")],
    ));
    // A grace period of 5000 ms: saved 1 ns after the deadline is late,
    // saved exactly at it is on time.
    for (task, saved) in [
        ("g_late", "2026-07-14T10:05:05.000000001Z"),
        ("g_on", "2026-07-14T10:05:05.000000000Z"),
    ] {
        log.push(event(
            "0.2",
            &format!("{task}_req"),
            "interruption.requested",
            "2026-07-14T10:05:00.000000000Z",
            task,
            json!({"interruption_policy": "save_and_stop", "payload": {"grace_period_ms": 5000}}),
        ));
        log.push(event(
            "0.2",
            &format!("{task}_saved"),
            "interruption.saved",
            saved,
            task,
            json!({"checkpoint_id": format!("{task}_ckpt")}),
        ));
    }
    // A basis valid until 1 ns before the decision is stale; one valid
    // until the decision's very instant is not.
    for (case, until) in [
        ("s_stale", "2026-07-14T11:00:00.000000001Z"),
        ("s_fresh", "2026-07-14T11:00:00.000000002Z"),
    ] {
        log.push(event(
            "0.2",
            &format!("{case}_basis"),
            "context.snapshot.ready",
            "2026-07-14T10:59:00Z",
            case,
            json!({"valid_until": until}),
        ));
        log.push(event(
            "0.2",
            &format!("{case}_decision"),
            "agent.decision.recorded",
            "2026-07-14T11:00:00.000000002Z",
            case,
            json!({"causation_id": format!("{case}_basis")}),
        ));
    }
    log
}

/// The findings the log must give (rule, event ids), sorted.
pub fn expected() -> Vec<(String, Vec<String>)> {
    let mut v: Vec<(String, Vec<String>)> = [
        ("parent.terminated_early", ["a2_p_end", "a2_c_sub"]),
        ("parent.child_terminated_first", ["b1_c_end", "b1_p_end"]),
        ("parent.child_terminated_first", ["t1_c_end", "t1_p_end"]),
        ("parent.terminated_early", ["y2_p_end", "y2_c_sub"]),
        ("parent.child_terminated_first", ["y1_c_end", "y1_p_end"]),
        ("checkpoint.late", ["g_late_saved", "g_late_req"]),
        (
            "decision.stale_basis",
            ["s_stale_decision", "s_stale_basis"],
        ),
    ]
    .iter()
    .map(|(rule, ids)| {
        (
            rule.to_string(),
            ids.iter().map(|s| s.to_string()).collect(),
        )
    })
    .collect();
    v.sort();
    v
}

/// The findings of [`RULES`] in `report`, sorted; no rule may have failed.
pub fn findings(report: &Report) -> Vec<(String, Vec<String>)> {
    assert!(report.rule_errors.is_empty(), "{:?}", report.rule_errors);
    let mut v: Vec<(String, Vec<String>)> = report
        .findings
        .iter()
        .filter(|f| RULES.contains(&f.rule.as_str()))
        .map(|f| (f.rule.clone(), f.event_ids.clone()))
        .collect();
    v.sort();
    v
}

/// The log written to `dir`, and `convert`'s Parquet of it.
pub fn log_and_parquet(dir: &Path) -> (std::path::PathBuf, std::path::PathBuf) {
    let log_path = dir.join("log.ndjson");
    std::fs::write(&log_path, log().join("\n") + "\n").unwrap();
    let parquet = dir.join("parquet");
    hvaudit()
        .args(["convert", "-q"])
        .arg(&log_path)
        .arg("-o")
        .arg(&parquet)
        .assert()
        .success();
    (log_path, parquet)
}

fn audit(input: &Path, location: Location) -> Report {
    let mut cfg = crate::common::audit_config(vec![input.to_path_buf()]);
    cfg.reading.location = location;
    Audit::new(cfg).run().expect("audit runs")
}

#[test]
fn a_nanosecond_decides_the_order_loaded_in_place_and_from_parquet() {
    let dir = tempfile::tempdir().unwrap();
    let (log_path, parquet) = log_and_parquet(dir.path());
    let loaded = findings(&audit(&log_path, Location::BySize));
    assert_eq!(loaded, expected());
    assert_eq!(findings(&audit(&parquet, Location::BySize)), expected());
    assert_eq!(findings(&audit(&parquet, Location::InPlace)), expected());
}

#[test]
fn messages_still_show_milliseconds() {
    let dir = tempfile::tempdir().unwrap();
    let (log_path, _) = log_and_parquet(dir.path());
    let report = audit(&log_path, Location::BySize);
    let late = report
        .findings
        .iter()
        .find(|f| f.rule == "checkpoint.late")
        .unwrap();
    assert!(
        late.message.contains("came 5000 ms after")
            && late.message.contains("(by 2026-07-14T10:05:05.000Z)"),
        "{}",
        late.message
    );
}

/// `created_ns` as stored: exact, fraction digits past the ninth dropped,
/// past int64 its ends; `created_us` as it always was.
#[test]
fn created_ns_is_exact_truncated_and_kept_to_int64() {
    let dir = tempfile::tempdir().unwrap();
    let (log_path, parquet) = log_and_parquet(dir.path());
    let query = "SELECT id, created_ns, created_us FROM events \
                 WHERE id IN ('t1_c_end', 't1_p_end', 'a1_c_end', 'y2_c_end', 'y1_c_end', \
                              'g_on_saved', 's_stale_decision') \
                 ORDER BY id";
    let expected = "id,created_ns,created_us\n\
                    a1_c_end,1784030410000000002,1784030410000000\n\
                    g_on_saved,1784023505000000000,1784023505000000\n\
                    s_stale_decision,1784026800000000002,1784026800000000\n\
                    t1_c_end,1784030410000000001,1784030410000000\n\
                    t1_p_end,1784030410000000001,1784030410000000\n\
                    y1_c_end,-9223372036854775808,-62135596800000000\n\
                    y2_c_end,9223372036854775807,253402300799000000\n";
    assert_eq!(crate::common::sql_csv(query, &[], &log_path), expected);
    assert_eq!(
        crate::common::sql_csv(query, &["--in-place"], &parquet),
        expected
    );
}

/// A stream under `--memory-limit` goes through Parquet in a spill
/// directory (`spill.rs`): the same order there.
#[test]
fn a_spilled_audit_orders_to_the_nanosecond_too() {
    let dir = tempfile::tempdir().unwrap();
    let (log_path, _) = log_and_parquet(dir.path());
    let spill = dir.path().join("spill");
    std::fs::create_dir(&spill).unwrap();
    let out = hvaudit()
        .args(["audit", "--format", "json", "--fail-on", "none"])
        .args(["--memory-limit", "1G", "--spill-dir"])
        .arg(&spill)
        .arg("-")
        .pipe_stdin(&log_path)
        .unwrap()
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0), "{out:?}");
    assert!(String::from_utf8_lossy(&out.stderr).contains("a stream"));
    let report: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(report["rule_errors"], json!([]));
    let mut found: Vec<(String, Vec<String>)> = report["findings"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|f| RULES.contains(&f["rule"].as_str().unwrap()))
        .map(|f| {
            let ids = f["event_ids"].as_array().unwrap();
            let ids = ids.iter().map(|i| i.as_str().unwrap().to_string());
            (f["rule"].as_str().unwrap().to_string(), ids.collect())
        })
        .collect();
    found.sort();
    assert_eq!(found, expected());
}

/// Token times compare with the event's to the nanosecond too: an exp 1 ns
/// after the event has not expired, an iat 60 s and 1 ns after it is too
/// late (under `--token-format structured`).
#[test]
fn token_claims_compare_to_the_nanosecond() {
    use base64::Engine as _;
    let at = "2026-07-14T10:00:00.000000001Z";
    let token = |exp: &str, iat: &str| {
        let claims = json!({"iss": "agent:planner", "sub": "agent:worker", "task_id": "k_task",
                            "parent_task_id": "k_parent", "iat": iat, "exp": exp});
        base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(claims.to_string())
    };
    let later = "2026-07-14T11:00:00Z";
    let log: Vec<String> = [
        ("k_expired", token(at, at)),
        ("k_valid", token("2026-07-14T10:00:00.000000002Z", at)),
        ("k_iat_late", token(later, "2026-07-14T10:01:00.000000002Z")),
        ("k_iat_on", token(later, "2026-07-14T10:01:00.000000001Z")),
    ]
    .iter()
    .map(|(id, token)| {
        event(
            "0.2",
            id,
            "delegation.handoff.completed",
            at,
            "k_task",
            json!({"parent_task_id": "k_parent", "delegated_by": "agent:planner",
                   "delegated_to": "agent:worker", "handoff_token": token}),
        )
    })
    .collect();
    let report = crate::common::audit_lines(&log, |c| {
        c.reading.ingest.token_format = hvaudit::protocol::TokenFormat::Structured
    });
    assert!(report.rule_errors.is_empty(), "{:?}", report.rule_errors);
    let mut failed: Vec<(String, String)> = report
        .findings
        .iter()
        .filter(|f| f.rule == "token.claims_invalid")
        .map(|f| {
            let check = f.message.split(" fails the ").nth(1).unwrap_or_default();
            let check = check.split(' ').next().unwrap_or_default();
            (f.event_ids[0].clone(), check.to_string())
        })
        .collect();
    failed.sort();
    assert_eq!(
        failed,
        [("k_expired", "exp"), ("k_iat_late", "iat")]
            .map(|(id, check)| (id.to_string(), check.to_string()))
    );
}

/// `replay`'s timeline is in the same order as the rules': the parent's end
/// before its child's 1 ns later, whatever the lines' order.
#[test]
fn replay_orders_its_timeline_to_the_nanosecond() {
    use hvaudit::ingest::ingest;
    use hvaudit::replay::{ReplayRequest, Scope, replay_on};
    use hvaudit::tables::Tables;
    let dir = tempfile::tempdir().unwrap();
    let (log_path, _) = log_and_parquet(dir.path());
    let cfg = crate::common::audit_config(vec![log_path]);
    let ingested = ingest(&cfg.reading.inputs, &crate::common::test_reading()).unwrap();
    let request = ReplayRequest {
        scope: Scope::Task("a2_p".into()),
        at: None,
    };
    let r = replay_on(&cfg, &Tables::loaded(ingested), &request).unwrap();
    let ends: Vec<&str> = r
        .timeline
        .iter()
        .map(|e| e.event_id.as_str())
        .filter(|id| id.ends_with("_end"))
        .collect();
    assert_eq!(ends, ["a2_p_end", "a2_c_end"]);
}

/// Version 1 of an id is its earliest content by the order of
/// docs/protocol.md §9.3, to the nanosecond, not the first line of the
/// microsecond.
#[test]
fn version_1_is_the_earliest_content_to_the_nanosecond() {
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("versions.ndjson");
    let copy = |at: &str, note: &str| {
        event(
            "0.2",
            "v_dup",
            "task.progress",
            at,
            "v_task",
            json!({"payload": {"note": note}}),
        )
    };
    let lines = [
        copy("2026-07-14T12:00:00.000000002Z", "later"),
        copy("2026-07-14T12:00:00.000000001Z", "earlier"),
    ];
    std::fs::write(&log, lines.join("\n") + "\n").unwrap();
    let query = "SELECT version, created_ns % 10 AS ns, json_get_str(payload, 'note') AS note \
                 FROM events ORDER BY version";
    assert_eq!(
        crate::common::sql_csv(query, &[], &log),
        "version,ns,note\n1,1,earlier\n2,2,later\n"
    );
}
