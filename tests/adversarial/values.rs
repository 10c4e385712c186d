//! Values at the edges: bytes that are not UTF-8, NULs, escapes, numbers
//! out of range, names given twice, instants at the ends of time.

use super::*;

#[test]
fn invalid_utf8_nul_bytes_and_bad_escapes_are_located() {
    let dir = tempfile::tempdir().unwrap();
    let lines: Vec<Vec<u8>> = vec![
        // 2: a raw NUL inside a string
        envelope(
            "nul_raw",
            "task.progress",
            ",\"payload\":{},\"task_id\":\"a\0b\"",
        ),
        // 4: invalid UTF-8 inside a string
        envelope(
            "utf8",
            "task.progress",
            ",\"payload\":{},\"task_id\":\"a\u{0}\"",
        )
        .into_iter()
        .map(|b| if b == 0 { 0xff } else { b })
        .collect(),
        // 6: an overlong encoding of '/'
        [&b"{\"spec_version\":\"0.2\",\"id\":\"\xc0\xaf\"}"[..]].concat(),
        // 8: a lone surrogate escape in the id
        envelope(r"\ud800", "task.progress", r#","payload":{}"#),
        // 10: a NUL between tokens
        b"{\"spec_version\":\"0.2\",\0\"id\":\"x\"}".to_vec(),
        // 12: \u0000 escapes are legal JSON: an event, the NUL kept
        envelope(
            r"nul\u0000id",
            "task.progress",
            r#","payload":{"s":"\u0000"},"task_id":"t\u0000""#,
        ),
    ];
    let f = write(dir.path(), "utf8.ndjson", &sandwich(&lines));
    let ing = read_with(std::slice::from_ref(&f), &crate::common::test_reading());
    neighbours_kept(&ing, 6);
    assert_bad(&ing, 2, "control character");
    assert_bad(&ing, 4, "invalid UTF-8 at byte");
    assert_bad(&ing, 6, "invalid UTF-8 at byte");
    assert_bad(&ing, 8, "hex escape");
    assert_bad(&ing, 10, "not JSON");
    assert_eq!(bad_lines(&ing).len(), 5, "{:?}", bad_lines(&ing));
    let e = query(&ing, "SELECT id, task_id FROM events WHERE id LIKE 'nul%'");
    assert_eq!(
        (e[0]["id"].as_str(), e[0]["task_id"].as_str()),
        (Some("nul\u{0}id"), Some("t\u{0}"))
    );
    // Excerpts never carry the raw control bytes.
    for r in query(&ing, "SELECT excerpt FROM bad_lines") {
        let x = r["excerpt"].as_str().unwrap();
        assert!(!x.chars().any(char::is_control), "{x:?}");
    }
    run_ok(&[os("audit"), os("-q"), f.as_os_str()], &[0, 1]);
}

/// Numbers past f64 are rejected only where the schema bounds the field
/// (confidence is 0..1); an integer or count past them saturates, and a
/// token time past them is the end of time, so no legal value costs the
/// event its place in the audit.
#[test]
fn numbers_out_of_range_and_negative_zero() {
    let dir = tempfile::tempdir().unwrap();
    use base64::Engine;
    let token = base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(r#"{"exp":1e400}"#);
    let lines = vec![
        envelope(
            "conf_big",
            "task.progress",
            r#","payload":{},"confidence":1e400"#,
        ),
        envelope(
            "conf_neg",
            "task.progress",
            r#","payload":{},"confidence":-1e400"#,
        ),
        envelope(
            "seq_big",
            "task.progress",
            r#","payload":{},"delivery":{"sequence":1e400}"#,
        ),
        envelope(
            "zero",
            "task.progress",
            r#","payload":{"grace_period_ms":1e400},"confidence":-0,"attestation_count":-0,"delivery":{"sequence":-0}"#,
        ),
        envelope(
            "p_big",
            "context.invalidated",
            r#","payload":{"context_key":"k","n":1e400}"#,
        ),
        envelope(
            "tok_big",
            "delegation.handoff.completed",
            &format!(r#","payload":{{}},"handoff_token":"{token}""#),
        ),
    ];
    let f = write(dir.path(), "num.ndjson", &sandwich(&lines));
    let opts = IngestOptions {
        token_format: TokenFormat::Structured,
        ..crate::common::test_reading()
    };
    let ing = read_with(std::slice::from_ref(&f), &opts);
    neighbours_kept(&ing, 6);
    assert_bad(
        &ing,
        2,
        "field confidence 1e400 is out of the range of a 64-bit float",
    );
    assert_bad(&ing, 4, "field confidence -1e400 is out of the range");
    assert_eq!(bad_lines(&ing).len(), 2);
    let e = event(&ing, "seq_big", "delivery_sequence");
    assert_eq!(e["delivery_sequence"], i64::MAX, "{e}");
    let e = event(
        &ing,
        "zero",
        "confidence, attestation_count, delivery_sequence, grace_period_ms",
    );
    assert_eq!(e["confidence"].as_f64(), Some(0.0), "{e}");
    assert_eq!(e["attestation_count"].as_f64(), Some(0.0), "{e}");
    assert_eq!(e["delivery_sequence"], 0, "{e}");
    assert_eq!(e["grace_period_ms"], i64::MAX, "{e}");
    let e = event(&ing, "p_big", "payload_error");
    assert!(
        e["payload_error"]
            .as_str()
            .unwrap()
            .contains("number out of range"),
        "{e}"
    );
    let e = event(
        &ing,
        "tok_big",
        "token_structured, token_error, CAST(token_exp AS BIGINT) AS exp",
    );
    assert_eq!(e["token_structured"], true, "{e}");
    assert!(e.get("token_error").is_none_or(Value::is_null), "{e}");
    assert_eq!(e["exp"], hvaudit::ingest::time::MAX_US, "{e}");
    run_ok(&[os("audit"), os("-q"), f.as_os_str()], &[0, 1]);
}

#[test]
fn duplicate_keys_are_rejected_with_the_key_named() {
    let dir = tempfile::tempdir().unwrap();
    let mut wide = envelope("wide", "task.progress", r#","payload":{}"#);
    wide.pop();
    for k in 0..40 {
        write!(wide, r#","k{k}":1"#).unwrap();
    }
    wide.extend_from_slice(br#","type":"task.failed"}"#);
    let lines = vec![
        // 2: the envelope, plainly
        envelope(
            "dup",
            "task.progress",
            r#","payload":{},"type":"task.completed""#,
        ),
        // 4: the same key written with an escape: readers that compare raw
        // text would see two different keys
        envelope(
            "esc",
            "task.progress",
            r#","payload":{},"t\u0079pe":"task.completed""#,
        ),
        // 6: past the members where the check switches to a set
        wide,
        // 8: a payload field the rules read
        envelope(
            "p_dup",
            "task.progress",
            r#","payload":{"task_id":"a","task_id":"b"}"#,
        ),
        // 10: payload.error.code
        envelope(
            "e_dup",
            "task.failed",
            r#","payload":{"error":{"code":"a","code":"b"}}"#,
        ),
        // 12: delivery
        envelope(
            "d_dup",
            "task.progress",
            r#","payload":{},"delivery":{"mode":"best_effort","mode":"replayable"}"#,
        ),
        // 14: an evidence entry
        envelope(
            "x_dup",
            "task.progress",
            r#","payload":{},"evidence_chain":[{"source":"s","id":"a","id":"b"}]"#,
        ),
        // 16: a subscription filter
        envelope(
            "f_dup",
            "subscription.created",
            r#","payload":{"filter":{"topic":"a","topic":"b"}}"#,
        ),
    ];
    let f = write(dir.path(), "dup.ndjson", &sandwich(&lines));
    let ing = read_with(std::slice::from_ref(&f), &crate::common::test_reading());
    neighbours_kept(&ing, 8);
    assert_bad(&ing, 2, "duplicate key `type`");
    assert_bad(&ing, 4, "duplicate key `type`");
    assert_bad(&ing, 6, "duplicate key `type`");
    assert_bad(&ing, 8, "field payload: duplicate field `task_id`");
    assert_bad(&ing, 10, "field payload.error: duplicate field `code`");
    assert_bad(&ing, 12, "field delivery: duplicate field `mode`");
    assert_bad(&ing, 14, "duplicate field `id`");
    assert_bad(&ing, 16, "field payload.filter: duplicate field `topic`");
    assert_eq!(bad_lines(&ing).len(), 8);
    // The id and type are still named where they could be read.
    let r = query(&ing, "SELECT id, type FROM bad_lines WHERE src_line = 8");
    assert_eq!(
        (r[0]["id"].as_str(), r[0]["type"].as_str()),
        (Some("p_dup"), Some("task.progress"))
    );
}

#[test]
fn timestamps_at_the_edges_of_time_are_events_or_located_rejections() {
    let dir = tempfile::tempdir().unwrap();
    let at = |id: &str, t: &str| ev(id, "task.progress", t, json!({})).into_bytes();
    let lines = vec![
        at("y1", "0001-01-01T00:00:00Z"),
        at("y9999", "9999-12-31T23:59:59.999999Z"),
        at("past9999", "9999-12-31T23:59:59-23:59"),
        at("leap", "2016-12-31T23:59:60Z"),
        at("leap_frac", "2016-12-31T23:59:60.5+00:00"),
        // 12: rejected, and said why
        at("nooffset", "2026-07-14T10:00:00"),
        at("y10000", "+10000-01-01T00:00:00Z"),
        at("feb30", "2026-02-30T00:00:00Z"),
        // 18: an event whose staleness lies beyond any calendar
        ev(
            "far",
            "task.progress",
            "2026-07-14T10:00:00Z",
            json!({"stale_after": "P290000Y", "valid_until": "9999-12-31T23:59:59Z"}),
        )
        .into_bytes(),
    ];
    let f = write(dir.path(), "time.ndjson", &sandwich(&lines));
    let ing = read_with(std::slice::from_ref(&f), &crate::common::test_reading());
    neighbours_kept(&ing, 9);
    assert_bad(&ing, 12, "no UTC offset");
    assert_bad(&ing, 14, "not an RFC 3339 instant");
    assert_bad(&ing, 16, "not an RFC 3339 instant");
    assert_eq!(bad_lines(&ing).len(), 3);
    let us = |id: &str| {
        event(&ing, id, "created_us")["created_us"]
            .as_i64()
            .unwrap()
    };
    assert_eq!(us("y1"), -62_135_596_800_000_000);
    assert_eq!(us("y9999"), 253_402_300_799_999_999);
    assert_eq!(us("past9999"), 253_402_300_799_000_000 + 86_340_000_000);
    // A leap second sorts after :59 and before the next minute's :00.
    let next = 1_483_228_800_000_000; // 2017-01-01T00:00:00Z
    assert!(
        us("leap") > next - 1_000_000 && us("leap") <= next,
        "{}",
        us("leap")
    );
    assert!(us("leap_frac") > us("leap"));
    run_ok(
        &[
            os("sql"),
            os("-q"),
            os("-e"),
            os("SELECT * FROM events"),
            f.as_os_str(),
        ],
        &[0],
    );
}

/// Rules format instants into messages; DataFusion's plain to_char casts to
/// nanoseconds (years 1677..2262), so events dated 0001 or 9999 made every
/// rule that names them fail and the run exit 2. The rules now format via
/// Date64 (queries/README.md); these events must make findings that name
/// their instants.
#[test]
fn timestamps_outside_the_nanosecond_range_do_not_break_rules() {
    let dir = tempfile::tempdir().unwrap();
    // A completion with no submission (an illegal first state) in year 1,
    // and an unknown type in year 9999: both rules must name the instant.
    let log: Vec<String> = [
        ("a", "task.completed", "0001-01-01T00:00:00Z"),
        ("b", "bogus.type", "9999-12-31T23:59:59Z"),
    ]
    .iter()
    .map(|(id, ty, t)| ev(id, ty, t, json!({"task_id": id})))
    .collect();
    let f = write(
        dir.path(),
        "edges.ndjson",
        (log.join("\n") + "\n").as_bytes(),
    );
    let report = Audit::new(crate::common::audit_config(vec![f.clone()]))
        .run()
        .unwrap();
    assert!(report.rule_errors.is_empty(), "{:?}", report.rule_errors);
    let said = |rule: &str, instant: &str| {
        report
            .findings
            .iter()
            .any(|x| x.rule == rule && x.message.contains(instant))
    };
    assert!(said("envelope.unknown_type", "9999-12-31T23:59:59.000Z"));
    assert!(said(
        "lifecycle.illegal_transition",
        "0001-01-01T00:00:00.000Z"
    ));
    run_ok(
        &[
            os("audit"),
            os("-q"),
            os("--fail-on"),
            os("low"),
            f.as_os_str(),
        ],
        &[1],
    );
}

/// Regression (found by the parse_chunk and token_decode fuzz targets): a
/// timestamp with a multi-byte character among its last six bytes made the
/// "no UTC offset" hint slice inside that character, a panic that took the
/// whole run down (exit 101).
#[test]
fn a_non_ascii_timestamp_is_a_bad_line_not_a_panic() {
    use base64::Engine;
    let odd = "2026-07-14T10:00ü00000";
    let token = base64::engine::general_purpose::URL_SAFE_NO_PAD
        .encode(json!({"iss": "a", "iat": odd}).to_string());
    let lines = vec![
        ev("t1", "task.progress", odd, json!({})).into_bytes(),
        ev(
            "t2",
            "delegation.handoff.completed",
            "2026-07-14T10:00:00Z",
            json!({"handoff_token": token, "valid_until": odd}),
        )
        .into_bytes(),
        ev(
            "t3",
            "delegation.handoff.completed",
            "2026-07-14T10:00:00Z",
            json!({"handoff_token": token}),
        )
        .into_bytes(),
    ];
    let dir = tempfile::tempdir().unwrap();
    let f = write(dir.path(), "odd.ndjson", &sandwich(&lines));
    let opts = IngestOptions {
        token_format: TokenFormat::Structured,
        ..crate::common::test_reading()
    };
    let ing = read_with(std::slice::from_ref(&f), &opts);
    neighbours_kept(&ing, 3);
    assert_bad(
        &ing,
        2,
        "field created_at \"2026-07-14T10:00ü00000\": not an RFC 3339 instant",
    );
    assert_bad(&ing, 4, "field valid_until");
    let e = event(&ing, "t3", "token_error");
    assert!(
        e["token_error"].as_str().unwrap().contains("claim iat"),
        "{e}"
    );
    run_ok(
        &[
            os("audit"),
            os("--token-format"),
            os("structured"),
            f.as_os_str(),
        ],
        &[0, 1],
    );
}
