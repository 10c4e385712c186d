//! Lines built to exhaust something: depth, length, width.

use super::*;

/// Lines nested 100,000 deep in every place a value can sit.
fn deep_lines() -> Vec<Vec<u8>> {
    let deep = deep_array(DEEP);
    let claims = format!(r#"{{"iss":{deep}}}"#);
    use base64::Engine;
    let token = base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(claims);
    vec![
        // 2: a payload the schema checks
        envelope(
            "d_schema",
            "context.invalidated",
            &format!(r#","payload":{{"context_key":{deep}}}"#),
        ),
        // 4: a payload of a type without a schema
        envelope(
            "d_payload",
            "task.progress",
            &format!(r#","payload":{deep}"#),
        ),
        // 6: an unknown member (kept in extra)
        envelope(
            "d_extra",
            "task.progress",
            &format!(r#","payload":{{}},"x":{deep}"#),
        ),
        // 8: inside delivery
        envelope(
            "d_delivery",
            "task.progress",
            &format!(r#","payload":{{}},"delivery":{{"mode":"best_effort","z":{deep}}}"#),
        ),
        // 10: inside evidence_chain
        envelope(
            "d_evidence",
            "task.progress",
            &format!(r#","payload":{{}},"evidence_chain":{deep}"#),
        ),
        // 12: inside a structured token's claims
        envelope(
            "d_token",
            "delegation.handoff.completed",
            &format!(r#","payload":{{}},"handoff_token":"{token}""#),
        ),
        // 14, 16: the whole line
        deep.clone().into_bytes(),
        ("{\"a\":".repeat(DEEP) + "1" + &"}".repeat(DEEP)).into_bytes(),
    ]
}

#[test]
fn nesting_100k_deep_is_bounded_in_every_code_path() {
    let dir = tempfile::tempdir().unwrap();
    let f = write(dir.path(), "deep.ndjson", &sandwich(&deep_lines()));
    let opts = IngestOptions {
        token_format: TokenFormat::Structured,
        ..crate::common::test_reading()
    };
    let ing = read_with(std::slice::from_ref(&f), &opts);
    neighbours_kept(&ing, 8);
    // Valid JSON however deep: events, with what could not be checked said.
    let e = event(&ing, "d_schema", "payload_error");
    let err = e["payload_error"].as_str().unwrap_or_default();
    assert!(err.contains("cannot be validated: recursion limit"), "{e}");
    event(&ing, "d_payload", "payload");
    event(&ing, "d_extra", "extra");
    event(&ing, "d_delivery", "delivery_mode");
    let e = event(&ing, "d_token", "token_structured, token_error");
    assert_eq!(e["token_structured"], false, "{e}");
    assert!(
        e["token_error"]
            .as_str()
            .unwrap()
            .contains("recursion limit"),
        "{e}"
    );
    assert_bad(&ing, 10, "evidence_chain");
    assert_bad(&ing, 14, "not a JSON object");
    assert_bad(&ing, 16, "missing required field");
    assert_eq!(bad_lines(&ing).len(), 3);

    // The whole path, every renderer, and the binary.
    let report = Audit::new(AuditConfig {
        reading: hvaudit::tables::ReadingOptions {
            ingest: hvaudit::ingest::IngestOptions {
                token_format: TokenFormat::Structured,
                ..crate::common::test_reading()
            },
            ..crate::common::reading_options(vec![f.clone()])
        },
        ..Default::default()
    })
    .run()
    .unwrap();
    assert!(report.rule_errors.is_empty(), "{:?}", report.rule_errors);
    assert!(
        report
            .findings
            .iter()
            .any(|f| f.rule == "payload.invalid" && f.event_ids == ["d_schema"])
    );
    for format in ALL_FORMATS {
        let mut out = Vec::new();
        render(&report, format, &mut out).unwrap();
    }
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

#[test]
fn ten_megabyte_lines_are_read_capped_or_rejected_without_blowing_up() {
    let dir = tempfile::tempdir().unwrap();
    let ten = 10 << 20;
    // 10 MB of payload text with 100k-deep nesting inside.
    let blob = "x".repeat(ten - 2 * DEEP);
    let big = envelope(
        "big",
        "context.invalidated",
        &format!(
            r#","payload":{{"context_key":"k","blob":"{blob}","deep":{}}}"#,
            deep_array(DEEP)
        ),
    );
    // 10 MB of nothing but brackets: 5 million levels.
    let brackets = deep_array(ten / 2).into_bytes();
    let f = write(
        dir.path(),
        "big.ndjson",
        &sandwich(&[big.clone(), brackets]),
    );
    let ing = read_with(std::slice::from_ref(&f), &crate::common::test_reading());
    neighbours_kept(&ing, 2);
    let e = event(&ing, "big", "length(payload) AS n, payload_error");
    assert!(e["n"].as_i64().unwrap() > ten as i64 - 1000, "{e}");
    assert!(
        e["payload_error"]
            .as_str()
            .unwrap()
            .contains("recursion limit"),
        "{e}"
    );
    assert_bad(&ing, 4, "not a JSON object");
    // Under a cap the long lines are rejected, and said to be.
    let capped = IngestOptions {
        max_line_bytes: 1 << 20,
        ..crate::common::test_reading()
    };
    let ing = read_with(std::slice::from_ref(&f), &capped);
    neighbours_kept(&ing, 2);
    assert_bad(&ing, 2, "exceeds the 1048576-byte cap");
    assert_bad(&ing, 4, "exceeds the 1048576-byte cap");
    // The library's front door reads with the same cap.
    let mut cfg = crate::common::audit_config(vec![f.clone()]);
    cfg.reading.ingest = capped;
    let report = Audit::new(cfg).run().unwrap();
    assert_eq!(hvaudit::InputSummary::total(&report.inputs).bad_lines, 2);
    run_ok(
        &[
            os("audit"),
            os("-q"),
            os("--max-line-bytes"),
            os("1M"),
            f.as_os_str(),
        ],
        &[0, 1],
    );
    run_ok(&[os("audit"), os("-q"), f.as_os_str()], &[0, 1]);
}

/// Regression: the duplicate-key check compared each member with every
/// earlier one, so a 1 MB line of 100,000 members took 100 s.
#[test]
fn a_line_of_half_a_million_members_is_linear_not_quadratic() {
    let dir = tempfile::tempdir().unwrap();
    let mut line = envelope("wide", "task.progress", r#","payload":{}"#);
    line.pop();
    for k in 0..500_000 {
        write!(line, r#","k{k}":{k}"#).unwrap();
    }
    line.push(b'}');
    let mut dup = line.clone();
    dup.pop();
    dup.extend_from_slice(br#","k77":0}"#);
    let f = write(dir.path(), "wide.ndjson", &sandwich(&[line, dup]));
    let t = Instant::now();
    let ing = read_with(&[f], &crate::common::test_reading());
    let took = t.elapsed();
    assert!(took < Duration::from_secs(30), "took {took:?}");
    neighbours_kept(&ing, 2);
    event(&ing, "wide", "id");
    assert_bad(&ing, 4, "duplicate key `k77`");
}
