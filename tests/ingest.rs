//! Ingest: upstream fixtures, dialects, redeliveries, every bad-input class,
//! compressed inputs and the Parquet round trip.

use hvaudit::audit::block_on;
use hvaudit::engine;
use hvaudit::ingest::{IngestOptions, Ingested, ingest};
use serde_json::{Value, json};
use std::io::Write;
use std::path::{Path, PathBuf};

pub fn upstream(rel: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures/upstream")
        .join(rel)
}

pub fn read(paths: &[PathBuf]) -> Ingested {
    ingest(paths, &crate::common::test_reading()).expect("inputs readable")
}

/// Run SQL over ingested tables; rows as JSON objects.
pub fn query(ing: &Ingested, sql: &str) -> Vec<Value> {
    block_on(async {
        let ctx = engine::session(&Default::default()).unwrap();
        engine::register_tables(&ctx, ing).unwrap();
        let batches = ctx.sql(sql).await.unwrap().collect().await.unwrap();
        let mut buf = Vec::new();
        {
            let mut w = datafusion::arrow::json::ArrayWriter::new(&mut buf);
            let refs: Vec<_> = batches.iter().collect();
            w.write_batches(&refs).unwrap();
            w.finish().unwrap();
        }
        if buf.is_empty() {
            return Vec::new();
        }
        serde_json::from_slice::<Vec<Value>>(&buf).unwrap()
    })
}

/// A full, valid 0.2 envelope with the given id/type/time and extra fields.
pub fn ev(id: &str, ty: &str, at: &str, extra: Value) -> String {
    let mut obj = json!({
        "spec_version": "0.2", "id": id, "type": ty, "source": "agent:test",
        "created_at": at, "payload": {}
    });
    if let (Some(o), Some(e)) = (obj.as_object_mut(), extra.as_object()) {
        for (k, v) in e {
            o.insert(k.clone(), v.clone());
        }
    }
    obj.to_string()
}

fn write(dir: &Path, name: &str, bytes: &[u8]) -> PathBuf {
    let p = dir.join(name);
    std::fs::write(&p, bytes).unwrap();
    p
}

fn identity_holds(ing: &Ingested) {
    for i in &ing.inputs {
        assert!(i.identity_holds(), "accounting identity broken for {i:?}");
    }
    assert!(ing.total().identity_holds());
}

#[test]
fn every_upstream_fixture_ingests_with_bad_lines_only_where_meant() {
    for dir in ["harmovela-0.2/fixtures", "aep-0.1/fixtures"] {
        let mut files: Vec<_> = std::fs::read_dir(upstream(dir))
            .unwrap()
            .map(|e| e.unwrap().path())
            .collect();
        files.sort();
        for f in files {
            let ing = read(std::slice::from_ref(&f));
            identity_holds(&ing);
            let total = ing.total();
            let lines = std::fs::read_to_string(&f).unwrap().lines().count() as u64;
            assert_eq!(total.lines, lines, "{}", f.display());
            let expected_bad =
                u64::from(f.ends_with("negative.ndjson") && dir.starts_with("harmovela"));
            assert_eq!(
                total.bad_lines,
                expected_bad,
                "{}: {:?}",
                f.display(),
                query(&ing, "SELECT * FROM bad_lines")
            );
            assert_eq!(total.redeliveries, 0);
        }
    }
}

#[test]
fn missing_version_field_is_the_negative_fixtures_bad_line() {
    let ing = read(&[upstream("harmovela-0.2/fixtures/negative.ndjson")]);
    let bad = query(&ing, "SELECT src_line, reason, id FROM bad_lines");
    assert_eq!(bad.len(), 1);
    assert_eq!(bad[0]["src_line"], 2);
    assert_eq!(bad[0]["id"], "evt_neg_002");
    assert!(bad[0]["reason"].as_str().unwrap().contains("spec_version"));
}

#[test]
fn aep_fixtures_are_dialect_0_1_and_harmovela_0_2() {
    let ing = read(&[
        upstream("aep-0.1/fixtures"),
        upstream("harmovela-0.2/fixtures/task-lifecycle.ndjson"),
    ]);
    let rows = query(
        &ing,
        "SELECT dialect, count(*) AS n FROM events GROUP BY dialect ORDER BY dialect",
    );
    assert_eq!(rows[0]["dialect"], "0.1");
    assert_eq!(rows[0]["n"], 41);
    assert_eq!(rows[1]["dialect"], "0.2");
    assert_eq!(rows[1]["n"], 5);
}

#[test]
fn fields_are_typed_and_payload_fields_lifted() {
    let ing = read(&[upstream("harmovela-0.2/fixtures")]);
    let r = query(
        &ing,
        "SELECT grace_period_ms, interruption_policy FROM events WHERE id = 'evt_int_01'",
    );
    assert_eq!(r[0]["grace_period_ms"], 5000);
    let r = query(
        &ing,
        "SELECT parent_task_id, env_parent_task_id FROM events WHERE id = 'evt_dpos_011'",
    );
    assert_eq!(
        r[0]["parent_task_id"], "task_parent",
        "parent link from payload"
    );
    assert!(r[0].get("env_parent_task_id").is_none());
    let r = query(
        &ing,
        "SELECT error_code FROM events WHERE id = 'evt_failed_005'",
    );
    assert_eq!(r[0]["error_code"], "tool_error");
    let r = query(
        &ing,
        "SELECT filter_types FROM events WHERE id = 'evt_lc_subscribe'",
    );
    assert_eq!(r[0]["filter_types"], r#"["task.*","session.*"]"#);
    let r = query(
        &ing,
        "SELECT payload_error FROM events WHERE id = 'evt_reject_payload_001'",
    );
    assert!(
        r[0]["payload_error"]
            .as_str()
            .unwrap()
            .contains("context_key")
    );
    let r = query(
        &ing,
        "SELECT count(*) AS n FROM evidence WHERE event_id = 'evt_prov_01'",
    );
    assert_eq!(r[0]["n"], 2);
    let r = query(
        &ing,
        "SELECT extra FROM events WHERE id = 'evt_adapt_pos_001'",
    );
    assert_eq!(
        r[0]["extra"],
        r#"{"actor_id":"actor_admin","tenant_id":"tenant-alpha"}"#
    );
}

#[test]
fn instants_in_any_offset_become_utc_and_stale_after_milliseconds() {
    let dir = tempfile::tempdir().unwrap();
    let log = [
        ev(
            "a",
            "task.progress",
            "2026-07-14T14:30:10.250+02:00",
            json!({"stale_after": "PT5M"}),
        ),
        ev(
            "b",
            "task.progress",
            "2026-07-14T12:30:10Z",
            json!({"valid_until": "2026-07-14T12:31:00Z", "stale_after": "PT5M"}),
        ),
    ]
    .join("\n");
    let f = write(dir.path(), "t.ndjson", log.as_bytes());
    let ing = read(&[f]);
    let r = query(
        &ing,
        "SELECT id, created_us, stale_after_ms, CAST(stale_at AS VARCHAR) AS s FROM events ORDER BY id",
    );
    assert_eq!(
        r[0]["created_us"].as_i64().unwrap() - r[1]["created_us"].as_i64().unwrap(),
        250_000
    );
    assert_eq!(r[0]["stale_after_ms"], 300_000);
    assert!(
        r[1]["s"]
            .as_str()
            .unwrap()
            .starts_with("2026-07-14T12:31:00"),
        "valid_until is earlier"
    );
}

#[test]
fn exact_redeliveries_collapse_even_with_other_key_order_and_spacing() {
    let dir = tempfile::tempdir().unwrap();
    let a = r#"{"spec_version":"0.2","id":"e1","type":"task.progress","source":"s","created_at":"2026-07-14T10:00:00Z","payload":{"x":1,"y":[1,2]}}"#;
    let b = r#"{ "payload": {"y": [1, 2], "x": 1}, "created_at":"2026-07-14T10:00:00Z","source":"s","type":"task.progress","id":"e1","spec_version":"0.2" }"#;
    let c = r#"{"spec_version":"0.2","id":"e1","type":"task.progress","source":"s","created_at":"2026-07-14T10:00:00Z","payload":{"x":2}}"#;
    let f1 = write(dir.path(), "a.ndjson", format!("{a}\n{b}\n").as_bytes());
    let f2 = write(
        dir.path(),
        "b.ndjson",
        format!("{a}\n{c}\n{c}\n").as_bytes(),
    );
    let ing = read(&[f1, f2]);
    identity_holds(&ing);
    let t = ing.total();
    // One event, one conflicting copy of it (never a second event).
    assert_eq!(
        (
            t.lines,
            t.events,
            t.conflicting_copies,
            t.redeliveries,
            t.bad_lines
        ),
        (5, 1, 1, 3, 0)
    );
    let r = query(
        &ing,
        "SELECT version, redeliveries, src_file, src_line FROM events ORDER BY version",
    );
    assert_eq!(r[0]["version"], 1);
    assert_eq!(r[0]["redeliveries"], 2);
    assert!(r[0]["src_file"].as_str().unwrap().ends_with("a.ndjson"));
    assert_eq!(r[1]["version"], 2, "different content stays visible");
    assert_eq!(r[1]["redeliveries"], 1);
    assert_eq!(r[1]["src_line"], 2);
}

#[test]
fn redeliveries_and_versions_are_resolved_across_chunks_parsed_out_of_order() {
    // About 12 MB: several 4 MB chunks, parsed by several workers, so
    // later chunks can finish first and must wait their turn.
    let filler = |n: usize| {
        let pad = "p".repeat(400);
        ev(
            &format!("f{n}"),
            "task.progress",
            "2026-07-14T10:00:00Z",
            json!({ "pad": pad }),
        )
    };
    let first = r#"{"spec_version":"0.2","id":"e1","type":"task.progress","source":"s","created_at":"2026-07-14T10:00:05Z","payload":{"x":1,"y":[1,2]}}"#;
    let respaced = r#"{ "payload": {"y": [1, 2], "x": 1}, "created_at":"2026-07-14T10:00:05Z","source":"s","type":"task.progress","id":"e1","spec_version":"0.2" }"#;
    let earlier = r#"{"spec_version":"0.2","id":"e1","type":"task.progress","source":"s","created_at":"2026-07-14T10:00:01Z","payload":{"x":2}}"#;
    let mut log = String::new();
    log.push_str(first);
    log.push('\n');
    log.push_str(first);
    log.push('\n');
    for n in 0..25_000 {
        if n == 12_000 {
            log.push_str(earlier);
            log.push('\n');
        }
        log.push_str(&filler(n));
        log.push('\n');
    }
    log.push_str(respaced);
    log.push('\n');
    log.push_str(earlier);
    log.push('\n');
    let dir = tempfile::tempdir().unwrap();
    let f = write(dir.path(), "log.ndjson", log.as_bytes());
    let opts = IngestOptions {
        threads: 4,
        ..crate::common::test_reading()
    };
    let ing = ingest(&[f], &opts).unwrap();
    assert!(ing.events.len() >= 3, "the log spans several chunks");
    identity_holds(&ing);
    let t = ing.total();
    assert_eq!(
        (t.events, t.conflicting_copies, t.redeliveries),
        (25_001, 1, 3)
    );
    let r = query(
        &ing,
        "SELECT version, redeliveries, src_line FROM events WHERE id = 'e1' ORDER BY version",
    );
    assert_eq!(r.len(), 2, "{r:?}");
    // Versions go by created_at: the content first seen in the middle of
    // the log is the earlier one.
    assert_eq!(
        (&r[0]["version"], &r[0]["redeliveries"], &r[0]["src_line"]),
        (&json!(1), &json!(1), &json!(12_003))
    );
    assert_eq!(
        (&r[1]["version"], &r[1]["redeliveries"], &r[1]["src_line"]),
        (&json!(2), &json!(2), &json!(1))
    );
    let filler_rows = query(
        &ing,
        "SELECT count(*) AS n FROM events WHERE redeliveries = 0 AND version = 1",
    );
    assert_eq!(filler_rows[0]["n"], 25_000);
}

/// One bad line among good ones: returns the bad line's (line, reason).
fn one_bad(bytes: &[u8], opts: IngestOptions) -> (i64, String, Ingested) {
    let dir = tempfile::tempdir().unwrap();
    let f = write(dir.path(), "log.ndjson", bytes);
    let ing = ingest(&[f], &opts).unwrap();
    identity_holds(&ing);
    let bad = query(&ing, "SELECT src_line, reason FROM bad_lines");
    assert_eq!(bad.len(), 1, "{bad:?}");
    assert_eq!(ing.total().events, 2, "the good lines around it are kept");
    (
        bad[0]["src_line"].as_i64().unwrap(),
        bad[0]["reason"].as_str().unwrap().to_string(),
        ing,
    )
}

fn around(bad: &[u8]) -> Vec<u8> {
    let mut v = ev("g1", "task.progress", "2026-07-14T10:00:00Z", json!({})).into_bytes();
    v.push(b'\n');
    v.extend_from_slice(bad);
    v.push(b'\n');
    v.extend_from_slice(ev("g2", "task.progress", "2026-07-14T10:00:01Z", json!({})).as_bytes());
    v.push(b'\n');
    v
}

#[test]
fn each_bad_input_class_is_reported_with_its_line_and_reason() {
    let cases: Vec<(Vec<u8>, &str)> = vec![
        (b"this is not json".to_vec(), "not JSON"),
        (b"[1,2,3]".to_vec(), "not a JSON object"),
        (br#"{"spec_version":"0.2","id":"x","type":"task.progress","created_at":"2026-07-14T10:00:00Z","payload":{}}"#.to_vec(), "missing required field source"),
        (br#"{"spec_version":"0.2","id":"x","type":"task.progress","source":"s","created_at":"2026-07-14T10:00:00Z"}"#.to_vec(), "missing required field payload"),
        (ev("x", "task.progress", "2026-07-14T10:00:00Z", json!({"task_id": 5})).into_bytes(), "field task_id must be a string"),
        (ev("x", "task.progress", "14/07/2026 10:00", json!({})).into_bytes(), "field created_at"),
        (ev("x", "task.progress", "2026-07-14T10:00:00", json!({})).into_bytes(), "no UTC offset"),
        (ev("x", "Task.Progress", "2026-07-14T10:00:00Z", json!({})).into_bytes(), "does not match"),
        (ev("x", "task.progress", "2026-07-14T10:00:00Z", json!({"belief_status": "maybe"})).into_bytes(), "belief_status"),
        (ev("x", "task.progress", "2026-07-14T10:00:00Z", json!({"delivery": {"mode": "often"}})).into_bytes(), "delivery.mode"),
        (ev("x", "task.progress", "2026-07-14T10:00:00Z", json!({"evidence_chain": [{"id": 1}]})).into_bytes(), "evidence_chain"),
        (br#"{"spec_version":"0.2","id":"x","id":"y","type":"task.progress","source":"s","created_at":"2026-07-14T10:00:00Z","payload":{}}"#.to_vec(), "duplicate key `id`"),
        (br#"{"spec_version":"0.2","id":"x","type":"task.progress""#.to_vec(), "truncated JSON"),
        (b"{\"spec_version\":\"0.2\",\"id\":\"\xff\xfe\",\"type\":\"task.progress\"}".to_vec(), "invalid UTF-8"),
    ];
    for (line, want) in cases {
        let (at, reason, _) = one_bad(&around(&line), crate::common::test_reading());
        assert_eq!(at, 2, "{want}");
        assert!(reason.contains(want), "expected {want:?} in {reason:?}");
    }
}

#[test]
fn an_over_long_line_is_rejected_without_being_held() {
    let long = ev(
        "x",
        "task.progress",
        "2026-07-14T10:00:00Z",
        json!({"payload": {"blob": "a".repeat(200_000)}}),
    );
    let opts = IngestOptions {
        max_line_bytes: 10_000,
        ..crate::common::test_reading()
    };
    let (at, reason, _) = one_bad(&around(long.as_bytes()), opts);
    assert_eq!(at, 2);
    assert!(reason.contains("exceeds the 10000-byte cap"), "{reason}");
}

#[test]
fn bom_crlf_blank_lines_and_missing_final_newline_are_fine() {
    let dir = tempfile::tempdir().unwrap();
    let mut bytes = vec![0xef, 0xbb, 0xbf];
    bytes.extend_from_slice(ev("a", "task.progress", "2026-07-14T10:00:00Z", json!({})).as_bytes());
    bytes.extend_from_slice(b"\r\n\r\n   \n");
    bytes.extend_from_slice(ev("b", "task.progress", "2026-07-14T10:00:01Z", json!({})).as_bytes());
    let f = write(dir.path(), "x.ndjson", &bytes);
    let empty = write(dir.path(), "empty.ndjson", b"");
    let ing = read(&[f, empty]);
    identity_holds(&ing);
    let t = ing.total();
    assert_eq!(
        (t.lines, t.events, t.bad_lines, t.blank_lines),
        (2, 2, 0, 2)
    );
    let r = query(&ing, "SELECT src_line FROM events ORDER BY seq");
    assert_eq!(r[1]["src_line"], 4);
}

fn many_lines(n: usize) -> Vec<u8> {
    let mut out = Vec::new();
    for i in 0..n {
        out.extend_from_slice(
            ev(
                &format!("e{i}"),
                "task.progress",
                "2026-07-14T10:00:00Z",
                json!({"payload": {"i": i}}),
            )
            .as_bytes(),
        );
        out.push(b'\n');
    }
    out
}

#[test]
fn gzip_and_zstd_are_recognised_by_content_not_name() {
    let dir = tempfile::tempdir().unwrap();
    let plain = many_lines(500);
    let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
    gz.write_all(&plain).unwrap();
    let gz = write(dir.path(), "a.log", &gz.finish().unwrap());
    let zst = write(
        dir.path(),
        "b.ndjson",
        &zstd::encode_all(&plain[..], 3).unwrap(),
    );
    let ing = read(&[gz, zst]);
    identity_holds(&ing);
    assert_eq!(ing.inputs[0].format, "ndjson.gz");
    assert_eq!(ing.inputs[1].format, "ndjson.zst");
    assert_eq!(ing.total().events, 500);
    assert_eq!(
        ing.total().redeliveries,
        500,
        "the second file repeats the first"
    );
}

/// pzstd writes a skippable frame (its index) before the data frames: the
/// file is zstd by content, and its events are all read, not taken for one
/// bad NDJSON line.
#[test]
fn zstd_starting_with_a_skippable_frame_is_read_as_zstd() {
    let dir = tempfile::tempdir().unwrap();
    let plain = many_lines(300);
    // Magic 0x184D2A50 (little-endian), a 4-byte length, then that many
    // bytes the decoder passes over; then two ordinary frames.
    let mut bytes = vec![0x50, 0x2a, 0x4d, 0x18, 4, 0, 0, 0, 0xde, 0xad, 0xbe, 0xef];
    bytes.extend(zstd::encode_all(&plain[..half(&plain)], 3).unwrap());
    bytes.extend(zstd::encode_all(&plain[half(&plain)..], 3).unwrap());
    let file = write(dir.path(), "p.log", &bytes);
    let ing = read(&[file]);
    identity_holds(&ing);
    assert_eq!(ing.inputs[0].format, "ndjson.zst");
    assert_eq!(ing.total().events, 300);
    assert_eq!(ing.total().bad_lines, 0);
}

/// The end of the line in the middle of `lines`.
fn half(lines: &[u8]) -> usize {
    let mid = lines.len() / 2;
    mid + lines[mid..].iter().position(|&b| b == b'\n').unwrap() + 1
}

#[test]
fn truncated_compressed_streams_keep_what_came_before_and_say_where() {
    let dir = tempfile::tempdir().unwrap();
    let plain = many_lines(3000);
    let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
    gz.write_all(&plain).unwrap();
    let gz = gz.finish().unwrap();
    let zst = zstd::encode_all(&plain[..], 3).unwrap();
    for (name, bytes) in [("cut.gz", &gz), ("cut.zst", &zst)] {
        let f = write(dir.path(), name, &bytes[..bytes.len() * 2 / 3]);
        let ing = read(&[f]);
        identity_holds(&ing);
        let i = &ing.inputs[0];
        let err = i.error.as_deref().unwrap_or_default();
        assert!(err.contains("broke after"), "{name}: {err:?}");
        assert!(
            i.events > 500 && i.events < 3000,
            "{name}: kept {}",
            i.events
        );
    }
}

#[test]
fn structured_tokens_are_decoded_only_when_asked() {
    use base64::Engine;
    let claims = json!({"iss":"agent:a","sub":"agent:b","task_id":"t2","parent_task_id":"t1","iat":"2026-07-14T10:00:00Z","exp":1784000000,"jti":"j1"});
    let token = base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(claims.to_string());
    let dir = tempfile::tempdir().unwrap();
    let log = [
        ev(
            "h1",
            "delegation.handoff.completed",
            "2026-07-14T10:00:00Z",
            json!({"handoff_token": token, "task_id": "t2"}),
        ),
        ev(
            "h2",
            "delegation.handoff.completed",
            "2026-07-14T10:00:01Z",
            json!({"handoff_token": "ht_opaque", "task_id": "t3"}),
        ),
    ]
    .join("\n");
    let f = write(dir.path(), "t.ndjson", log.as_bytes());
    let opaque = read(std::slice::from_ref(&f));
    let r = query(
        &opaque,
        "SELECT count(token_iss) AS n, count(token_structured) AS m FROM events",
    );
    assert_eq!((r[0]["n"].as_i64(), r[0]["m"].as_i64()), (Some(0), Some(0)));
    let opts = IngestOptions {
        token_format: hvaudit::protocol::TokenFormat::Structured,
        ..crate::common::test_reading()
    };
    let structured = ingest(&[f], &opts).unwrap();
    let r = query(
        &structured,
        "SELECT id, token_iss, token_jti, token_error FROM events ORDER BY id",
    );
    assert_eq!(r[0]["token_iss"], "agent:a");
    assert_eq!(r[0]["token_jti"], "j1");
    assert!(
        r[1]["token_error"].as_str().is_some(),
        "opaque value does not decode: {:?}",
        r[1]
    );
}

#[test]
fn directories_are_walked_and_problems_inside_reported() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::create_dir(dir.path().join("sub")).unwrap();
    std::fs::create_dir(dir.path().join("empty")).unwrap();
    write(&dir.path().join("sub"), "a.ndjson", &many_lines(3));
    write(dir.path(), "notes.txt", b"not a log");
    let ing = read(&[dir.path().to_path_buf()]);
    assert_eq!(ing.total().events, 3);
    assert_eq!(
        ing.inputs.len(),
        1,
        "notes.txt is not taken from a directory"
    );
    let missing = ingest(
        &[dir.path().join("nope.ndjson")],
        &crate::common::test_reading(),
    );
    assert!(missing.is_err());
    let nomatch = ingest(&[dir.path().join("*.zst")], &crate::common::test_reading());
    let err = nomatch
        .err()
        .expect("a pattern matching nothing is an error");
    assert!(err.to_string().contains("no file matches"));
}
