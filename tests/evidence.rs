//! The log is the adversary: a line written to hide, shadow, backdate or
//! spoof another line's evidence must change nothing the audit says about
//! that line (docs/threat-model.md, docs/protocol.md "identity"). Each
//! attack is built here the way whoever writes the log would build it.

use crate::common::{audit_lines, hvaudit, synth_log};
use hvaudit::Report;
use serde_json::{Value, json};
use std::collections::BTreeSet;

fn line(id: &str, ty: &str, at: &str, extra: Value) -> String {
    let mut e = json!({
        "spec_version": "0.2", "id": id, "type": ty, "source": "agent:a",
        "created_at": at, "payload": {}
    });
    for (k, v) in extra.as_object().unwrap() {
        e[k] = v.clone();
    }
    e.to_string()
}

/// A handoff that issues `token` for `task` to `to`.
fn handoff(id: &str, at: &str, task: &str, to: &str, token: &str) -> String {
    line(
        id,
        "delegation.handoff.completed",
        at,
        json!({"task_id": task, "parent_task_id": "p1", "delegated_by": "agent:a",
               "delegated_to": to, "handoff_token": token}),
    )
}

fn rules(r: &Report) -> Vec<String> {
    let mut v: Vec<String> = r.findings.iter().map(|f| f.rule.clone()).collect();
    v.sort();
    v
}

/// XXH3's published default secret, the two 4-byte windows used below:
/// bytes 60..64 and 92..96.
const SECRET_60: [u8; 4] = [0x81, 0x3a, 0x26, 0x4c];
const SECRET_92: [u8; 4] = [0xa9, 0xde, 0xac, 0xd8];

/// Two different texts of 1024 bytes, `prefix` + filler + `suffix`, valid
/// UTF-8 with no quote, backslash or control character (so each fits in a
/// JSON string as it is), whose XXH3 hashes of 64 and 128 bits are equal.
/// No search: XXH3 adds every 8-byte input word to a neighbouring
/// accumulator and multiplies the low and high halves of (word XOR secret
/// word) into its own. A word whose high half is the secret's makes that
/// product zero whatever its low half, so two such words in one lane of two
/// stripes can trade their low halves: the sums do not change. Here lane 0
/// of stripes 7 and 11 (secret words at 56 and 88), whose high halves are
/// valid UTF-8 after a two-byte lead (0xc3) and before a continuation
/// (0x80).
fn xxh3_twins(prefix: &str, suffix: &str) -> (String, String) {
    const LEN: usize = 1024;
    assert!(prefix.len() <= 448 && suffix.len() <= LEN - 713);
    let mut text = vec![b'a'; LEN];
    text[..prefix.len()].copy_from_slice(prefix.as_bytes());
    text[LEN - suffix.len()..].copy_from_slice(suffix.as_bytes());
    let mut twin = |first: &[u8; 4], second: &[u8; 4]| {
        text[448..452].copy_from_slice(first);
        text[452..456].copy_from_slice(&SECRET_60);
        text[704..708].copy_from_slice(second);
        text[708..712].copy_from_slice(&SECRET_92);
        text[712] = 0x80;
        String::from_utf8(text.clone()).expect("valid UTF-8")
    };
    let (x, y) = (*b"AAA\xc3", *b"BBB\xc3");
    let (a, b) = (twin(&x, &y), twin(&y, &x));
    assert_ne!(a, b);
    use xxhash_rust::xxh3::{xxh3_64, xxh3_128};
    assert_eq!(xxh3_64(a.as_bytes()), xxh3_64(b.as_bytes()));
    assert_eq!(xxh3_128(a.as_bytes()), xxh3_128(b.as_bytes()));
    (a, b)
}

/// Two ids with one XXH3 hash (64 and 128 bits) are two events: the
/// intruder's replay under the second is found, not taken for a version
/// of the decoy.
#[test]
fn two_ids_with_one_hash_are_two_events() {
    let (decoy, intruder) = xxh3_twins("", "");
    let log = vec![
        line(
            &decoy,
            "task.progress",
            "2026-07-14T09:59:00Z",
            json!({"task_id": "t0"}),
        ),
        handoff("h1", "2026-07-14T10:00:00Z", "t1", "agent:b", "tok-1"),
        handoff(&intruder, "2026-07-14T10:00:05Z", "t2", "agent:b", "tok-1"),
    ];
    let r = audit_lines(&log, |_| {});
    let replayed: Vec<_> = r
        .findings
        .iter()
        .filter(|f| f.rule == "token.replayed")
        .collect();
    assert_eq!(replayed.len(), 1, "{:?}", rules(&r));
    assert!(replayed[0].event_ids.contains(&intruder));
    let t = r.totals();
    assert_eq!((t.events, t.conflicting_copies, t.redeliveries), (3, 0, 0));
    assert!(!rules(&r).contains(&"integrity.conflicting_duplicate".to_string()));
    // After convert, in place: the same.
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("log.ndjson");
    std::fs::write(&path, log.join("\n") + "\n").unwrap();
    let parquet = dir.path().join("parquet");
    hvaudit()
        .args(["convert", "-q", "-o"])
        .arg(&parquet)
        .arg(&path)
        .assert()
        .success();
    let out = hvaudit()
        .args([
            "audit",
            "-q",
            "--in-place",
            "--format",
            "json",
            "--fail-on",
            "none",
        ])
        .arg(&parquet)
        .output()
        .unwrap();
    let report: Value = serde_json::from_slice(&out.stdout).unwrap();
    let found: Vec<(&str, Vec<&str>)> = (report["findings"].as_array().unwrap().iter())
        .map(|f| {
            let ids = f["event_ids"].as_array().unwrap();
            (
                f["rule"].as_str().unwrap(),
                ids.iter().map(|i| i.as_str().unwrap()).collect(),
            )
        })
        .collect();
    assert!(
        found
            .iter()
            .any(|(rule, ids)| *rule == "token.replayed" && ids.contains(&intruder.as_str())),
        "{found:?}"
    );
    assert!(
        !found
            .iter()
            .any(|(rule, _)| *rule == "integrity.conflicting_duplicate")
    );
    assert_eq!(report["accounting"]["events"], 3);
}

/// Two lines of one id whose text hashes alike but whose content differs
/// are two versions, never a redelivery.
#[test]
fn content_with_one_line_hash_is_compared_not_trusted() {
    let prefix = r#"{"spec_version":"0.2","id":"e1","type":"task.progress","source":"agent:a","created_at":"2026-07-14T10:00:00Z","task_id":"t1","payload":{"note":""#;
    let (a, b) = xxh3_twins(prefix, r#""}}"#);
    assert!(serde_json::from_str::<Value>(&a).is_ok());
    let r = audit_lines(&[a, b], |_| {});
    let t = r.totals();
    assert_eq!((t.events, t.conflicting_copies, t.redeliveries), (1, 1, 0));
    assert!(rules(&r).contains(&"integrity.conflicting_duplicate".to_string()));
}

/// A forged copy of an event, dated earlier than it (so the rules' version
/// 1), other in type, source, task and payload.
fn forged_copy(original: &str) -> String {
    let mut e: Value = serde_json::from_str(original).unwrap();
    let at = chrono::DateTime::parse_from_rfc3339(e["created_at"].as_str().unwrap()).unwrap();
    let earlier = at - chrono::Duration::milliseconds(500);
    e["created_at"] = json!(earlier.to_rfc3339_opts(chrono::SecondsFormat::Millis, true));
    e["type"] = json!("task.progress");
    e["source"] = json!("agent:forger");
    e["task_id"] = json!("task_forged");
    e["payload"] = json!({"note": "forged"});
    e.to_string()
}

#[test]
fn a_forged_earlier_copy_shadows_no_token_finding() {
    let clean = vec![
        handoff("h1", "2026-07-14T10:00:00Z", "t1", "agent:b", "tok-1"),
        handoff("h2", "2026-07-14T10:00:05Z", "t2", "agent:evil", "tok-1"),
    ];
    let mut attacked = clean.clone();
    attacked.push(forged_copy(&clean[1]));
    let (before, after) = (audit_lines(&clean, |_| {}), audit_lines(&attacked, |_| {}));
    let critical = |r: &Report| {
        let mut v: Vec<(String, String)> = (r.findings.iter())
            .filter(|f| f.severity == hvaudit::Severity::Critical)
            .map(|f| (f.rule.clone(), f.fingerprint.clone()))
            .collect();
        v.sort();
        v
    };
    assert_eq!(
        critical(&before).len(),
        2,
        "token.replayed and token.rebound"
    );
    // The same findings, fingerprints and all (plus what the forged copy
    // earns itself: it presents the token bound to another task).
    let after_critical = critical(&after);
    for f in critical(&before) {
        assert!(
            after_critical.contains(&f),
            "{f:?} gone: {after_critical:?}"
        );
    }
    for f in after.findings.iter() {
        if critical(&before).contains(&(f.rule.clone(), f.fingerprint.clone())) {
            assert_eq!(f.rests_on_version, Some(2), "{}", f.rule);
        }
    }
    assert!(rules(&after).contains(&"integrity.conflicting_duplicate".to_string()));
    assert_eq!(after.readings.map(|m| m.ids), Some(1));
}

/// A generated log with a violation of every rule: one forged earlier copy
/// of an event each family's findings cite, all in one log, leaves every
/// finding of the clean log in the report, fingerprint and all.
#[test]
fn forged_earlier_copies_shadow_no_finding_of_any_family() {
    let log = String::from_utf8(synth_log(11, 60_000, 0.0)).unwrap();
    // The generated log plants a conflicting duplicate of its own: left
    // out here, so that every version-1 finding comes from honest lines.
    let mut seen = std::collections::HashMap::new();
    let clean: Vec<String> = log
        .lines()
        .filter(|l| match serde_json::from_str::<Value>(l) {
            Ok(v) => match v["id"].as_str() {
                Some(id) => seen.entry(id.to_string()).or_insert_with(|| l.to_string()) == l,
                None => true,
            },
            Err(_) => true,
        })
        .map(str::to_string)
        .collect();
    let before = audit_lines(&clean, |_| {});
    assert!(
        before.readings.is_none(),
        "the clean log has no conflicting id"
    );
    let by_id: std::collections::HashMap<String, &String> = clean
        .iter()
        .filter_map(|l| {
            let v: Value = serde_json::from_str(l).ok()?;
            Some((v["id"].as_str()?.to_string(), l))
        })
        .collect();
    // One finding of each family: a forged copy of the first event it cites.
    let mut forged = Vec::new();
    let mut families = BTreeSet::new();
    let mut copied = BTreeSet::new();
    for f in before.findings.iter() {
        // envelope.invalid cites rejected lines, which have no copies.
        if f.rule == "envelope.invalid" || !families.insert(f.family.clone()) {
            continue;
        }
        let first = f
            .event_ids
            .first()
            .filter(|id| copied.insert(id.to_string()));
        if let Some(original) = first.and_then(|id| by_id.get(id)) {
            forged.push(forged_copy(original));
        }
    }
    assert!(families.len() >= 10, "{families:?}");
    let mut attacked = clean.clone();
    attacked.extend(forged.iter().cloned());
    let after = audit_lines(&attacked, |_| {});
    let kept: BTreeSet<(String, String)> = (after.findings.iter())
        .map(|f| (f.rule.clone(), f.fingerprint.clone()))
        .collect();
    for f in before.findings.iter() {
        assert!(
            kept.contains(&(f.rule.clone(), f.fingerprint.clone())),
            "{} {:?} gone after the forgeries",
            f.rule,
            f.event_ids
        );
    }
    assert_eq!(after.totals().conflicting_copies, forged.len() as u64);
    // The same from convert's Parquet, in place and on the cluster.
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("attacked.ndjson");
    std::fs::write(&log, attacked.join("\n") + "\n").unwrap();
    let parquet = dir.path().join("parquet");
    hvaudit()
        .args(["convert", "-q", "-o"])
        .arg(&parquet)
        .arg(&log)
        .assert()
        .success();
    // Without the cluster feature, nothing is pushed.
    #[cfg_attr(not(feature = "cluster"), allow(unused_mut))]
    let mut modes = vec![vec!["--in-place".to_string()]];
    #[cfg(feature = "cluster")]
    modes.push(vec!["--cluster".into(), crate::cluster::CLUSTER.1.clone()]);
    for extra in modes {
        let out = hvaudit()
            .args(["audit", "-q", "--format", "json", "--fail-on", "none"])
            .args(&extra)
            .arg(&parquet)
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        let report: Value = serde_json::from_slice(&out.stdout).unwrap();
        let found: BTreeSet<(String, String)> = (report["findings"].as_array().unwrap().iter())
            .map(|f| {
                (
                    f["rule"].as_str().unwrap().into(),
                    f["fingerprint"].as_str().unwrap().into(),
                )
            })
            .collect();
        assert_eq!(found, kept, "{extra:?}");
    }
}

/// A forged event dated 2001 that a finding cites does not take it out of
/// `--since`: an honest event it cites lies inside. What is left outside is
/// counted.
#[test]
fn a_backdated_event_takes_no_finding_out_of_the_window() {
    let log = vec![
        handoff("h1", "2026-07-14T10:00:00Z", "t1", "agent:b", "tok-1"),
        handoff("h2", "2001-01-01T00:00:00Z", "t2", "agent:evil", "tok-1"),
        // old news: a replay wholly before the window
        handoff("o1", "2001-01-01T00:00:00Z", "t3", "agent:b", "tok-old"),
        handoff("o2", "2001-01-01T00:00:01Z", "t4", "agent:b", "tok-old"),
    ];
    let since = chrono::DateTime::parse_from_rfc3339("2026-07-14T00:00:00Z")
        .unwrap()
        .with_timezone(&chrono::Utc);
    let r = audit_lines(&log, |c| c.since = Some(since));
    let replayed: Vec<Vec<String>> = (r.findings.iter())
        .filter(|f| f.rule == "token.replayed")
        .map(|f| f.event_ids.clone())
        .collect();
    assert_eq!(replayed.len(), 1, "{replayed:?}");
    assert!(replayed[0].contains(&"h1".to_string()));
    assert!(
        r.outside_window.is_some_and(|n| n >= 1),
        "{:?}",
        r.outside_window
    );
    let unwindowed = audit_lines(&log, |_| {});
    assert_eq!(unwindowed.outside_window, None, "no window, no count");
}

/// A new act that copies a baselined finding's ids, task, recipient and
/// instant, but not its content, is a new finding.
#[test]
fn a_copied_act_does_not_wear_the_old_fingerprint() {
    let dir = tempfile::tempdir().unwrap();
    let write = |name: &str, lines: &[String]| {
        let p = dir.path().join(name);
        std::fs::write(&p, lines.join("\n") + "\n").unwrap();
        p
    };
    let h1 = handoff("h1", "2026-07-14T10:00:00Z", "t1", "agent:b", "tok-1");
    let yesterday = write(
        "old.ndjson",
        &[
            h1.clone(),
            handoff("h2", "2026-07-14T10:00:05Z", "t2", "agent:evil", "tok-1"),
        ],
    );
    // Today: the same ids, task, recipient and instant, from another agent
    // in another session with another payload.
    let mut copy: Value = serde_json::from_str(&handoff(
        "h2",
        "2026-07-14T10:00:05Z",
        "t2",
        "agent:evil",
        "tok-1",
    ))
    .unwrap();
    copy["source"] = json!("agent:other");
    copy["session_id"] = json!("sess_other");
    copy["payload"] = json!({"reason": "something else"});
    let today = write("new.ndjson", &[h1, copy.to_string()]);
    let baseline = dir.path().join("baseline.json");
    hvaudit()
        .args(["audit", "-q", "--format", "json", "--fail-on", "none", "-o"])
        .arg(&baseline)
        .arg(&yesterday)
        .assert()
        .success();
    let out = hvaudit()
        .args([
            "audit",
            "-q",
            "--format",
            "json",
            "--fail-on-new",
            "high",
            "--baseline",
        ])
        .arg(&baseline)
        .arg(&today)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1), "new findings fail the gate");
    let report: Value = serde_json::from_slice(&out.stdout).unwrap();
    let replayed = (report["findings"].as_array().unwrap().iter())
        .find(|f| f["rule"] == "token.replayed")
        .unwrap();
    assert_eq!(replayed["baseline_state"], "new");
    // The same log again is unchanged: the fingerprint is the content's.
    let again = hvaudit()
        .args([
            "audit",
            "-q",
            "--format",
            "json",
            "--fail-on-new",
            "high",
            "--baseline",
        ])
        .arg(&baseline)
        .arg(&yesterday)
        .output()
        .unwrap();
    assert_eq!(again.status.code(), Some(0));
}

/// A baseline written before fingerprints had a version is refused with
/// how to rebuild it.
#[test]
fn a_baseline_of_older_fingerprints_says_how_to_rebuild_it() {
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("log.ndjson");
    std::fs::write(
        &log,
        handoff("h1", "2026-07-14T10:00:00Z", "t1", "agent:b", "tok") + "\n",
    )
    .unwrap();
    let old = dir.path().join("old.json");
    std::fs::write(
        &old,
        r#"{"tool":"hvaudit","version":"0.1.0","findings":[]}"#,
    )
    .unwrap();
    let out = hvaudit()
        .args(["audit", "-q", "--baseline"])
        .arg(&old)
        .arg(&log)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("rebuild it") && err.contains("--format json -o"),
        "{err}"
    );
}

/// Numbers compare by exact decimal value, strings exactly; a member named
/// twice at any depth is a rejected line.
#[test]
fn content_is_the_json_value() {
    let at = "2026-07-14T10:00:00Z";
    let with = |id: &str, payload: &str, created: &str| {
        format!(
            r#"{{"spec_version":"0.2","id":"{id}","type":"task.progress","source":"s","created_at":"{created}","task_id":"t","payload":{payload}}}"#
        )
    };
    let log = vec![
        // one value: redeliveries
        with("n1", r#"{"n":1}"#, at),
        with("n1", r#"{"n":1.0}"#, at),
        with("n1", r#"{"n":10e-1}"#, at),
        with("z", r#"{"n":0}"#, at),
        with("z", r#"{"n":-0}"#, at),
        with("esc", r#"{"s":"\u00e9"}"#, at),
        with("esc", r#"{"s":"é"}"#, at),
        // other values: versions
        with("big", r#"{"n":12345678901234567890}"#, at),
        with("big", r#"{"n":12345678901234567891}"#, at),
        with("tz", "{}", "2026-07-14T10:00:00Z"),
        with("tz", "{}", "2026-07-14T12:00:00+02:00"),
        // a member named twice deep in the payload
        with("dup", r#"{"a":{"b":1,"b":2}}"#, at),
    ];
    let r = audit_lines(&log, |_| {});
    let t = r.totals();
    assert_eq!(
        (t.events, t.conflicting_copies, t.redeliveries, t.bad_lines),
        (5, 2, 4, 1)
    );
    let invalid: Vec<String> = (r.findings.iter())
        .filter(|f| f.rule == "envelope.invalid")
        .map(|f| f.message.clone())
        .collect();
    assert_eq!(invalid.len(), 1);
    assert!(invalid[0].contains("duplicate key `b`"), "{}", invalid[0]);
    let conflicting: BTreeSet<Vec<String>> = (r.findings.iter())
        .filter(|f| f.rule == "integrity.conflicting_duplicate")
        .map(|f| f.event_ids.clone())
        .collect();
    assert_eq!(
        conflicting,
        [vec!["big".to_string()], vec!["tz".to_string()]].into()
    );
}

/// N versions of one id cost time linear in N (the dedup compares a
/// version only with those of the same digest): 16 k of them are one
/// event, a critical finding, and readings up to version 16.
#[test]
fn sixteen_thousand_versions_of_one_id_are_one_critical_finding() {
    let log: Vec<String> = (0..16_000)
        .map(|n| {
            line(
                "e1",
                "task.progress",
                "2026-07-14T10:00:00Z",
                json!({"task_id": "t1", "payload": {"n": n}}),
            )
        })
        .collect();
    let started = std::time::Instant::now();
    let r = audit_lines(&log, |_| {});
    let t = r.totals();
    assert_eq!((t.events, t.conflicting_copies), (1, 15_999));
    let integrity: Vec<_> = (r.findings.iter())
        .filter(|f| f.rule == "integrity.conflicting_duplicate")
        .collect();
    assert_eq!(integrity.len(), 1);
    assert_eq!(integrity[0].severity, hvaudit::Severity::Critical);
    assert_eq!(integrity[0].locations.len(), 16_000, "every version cited");
    let made = r.readings.unwrap();
    assert_eq!((made.ids, made.readings, made.past_the_last), (1, 15, 1));
    // Not a timing test: a bound far above linear, far below quadratic.
    assert!(started.elapsed() < std::time::Duration::from_secs(240));
}

/// A redelivery whose copies land in two `convert` runs (shards) collapses
/// as in one file, loaded, in place and on the in-process cluster.
#[test]
fn a_redelivery_split_across_shards_collapses_as_in_one_file() {
    let dir = tempfile::tempdir().unwrap();
    let log = String::from_utf8(synth_log(7, 120_000, 0.01)).unwrap();
    let lines: Vec<&str> = log.lines().collect();
    let (a, b) = lines.split_at(lines.len() / 2);
    let (mut a, mut b) = (a.to_vec(), b.to_vec());
    // A copy of an event of each half in the other.
    let (from_a, from_b) = (a[10], b[5]);
    b.push(from_a);
    a.push(from_b);
    let write = |name: &str, lines: &[&str]| {
        let p = dir.path().join(name);
        std::fs::write(&p, lines.join("\n") + "\n").unwrap();
        p
    };
    let whole = write("whole.ndjson", &[a.clone(), b.clone()].concat());
    let (pa, pb) = (write("a.ndjson", &a), write("b.ndjson", &b));
    let shards = dir.path().join("shards");
    for (shard, part) in [("0", &pa), ("1", &pb)] {
        hvaudit()
            .args(["convert", "-q", "--shard", shard, "-o"])
            .arg(&shards)
            .arg(part)
            .assert()
            .success();
    }
    let report = |path: &std::path::Path, extra: &[&str]| {
        let out = hvaudit()
            .args(["audit", "-q", "--format", "json", "--fail-on", "none"])
            .args(extra)
            .arg(path)
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        let mut r: Value = serde_json::from_slice(&out.stdout).unwrap();
        r.as_object_mut().unwrap().remove("inputs");
        r["accounting"].as_object_mut().unwrap().remove("bytes");
        for f in r["findings"].as_array_mut().unwrap() {
            // Places differ by file; what is found does not.
            f.as_object_mut().unwrap().remove("locations");
            f.as_object_mut().unwrap().remove("timeline");
            f.as_object_mut().unwrap().remove("message");
        }
        r
    };
    let expected = report(&whole, &[]);
    assert_eq!(report(&shards, &[]), expected, "loaded");
    assert_eq!(report(&shards, &["--in-place"]), expected, "in place");
    #[cfg(feature = "cluster")]
    {
        let url = &crate::cluster::CLUSTER.1;
        assert_eq!(report(&shards, &["--cluster", url]), expected, "cluster");
    }
}

/// A generated log's lines (every rule violated), and which of them are
/// events with an id and a date.
fn generated(seed: u64) -> (Vec<String>, Vec<usize>) {
    let log = String::from_utf8(synth_log(seed, 40_000, 0.0)).unwrap();
    let lines: Vec<String> = log.lines().map(str::to_string).collect();
    let events: Vec<usize> = (0..lines.len())
        .filter(|&i| {
            serde_json::from_str::<Value>(&lines[i])
                .is_ok_and(|v| v["id"].is_string() && v["created_at"].is_string())
        })
        .collect();
    (lines, events)
}

fn write_log(lines: &[String]) -> (tempfile::TempDir, std::path::PathBuf) {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("log.ndjson");
    std::fs::write(&path, lines.join("\n") + "\n").unwrap();
    (dir, path)
}

/// The JSON report of `path` (`full`: every reading over the whole log),
/// and what `HVAUDIT_TIMING` said of the readings.
fn readings_report(path: &std::path::Path, full: bool, extra: &[&str]) -> (Value, String) {
    let mut cmd = hvaudit();
    cmd.env("HVAUDIT_TIMING", "1");
    if full {
        cmd.env("HVAUDIT_READINGS", "full");
    }
    let out = cmd
        .args(["audit", "-q", "--format", "json", "--fail-on", "none"])
        .args(extra)
        .arg(path)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let report: Value = serde_json::from_slice(&out.stdout).unwrap();
    (report, String::from_utf8_lossy(&out.stderr).into_owned())
}

/// What a report finds, by rule, fingerprint and reading.
fn found(report: &Value) -> Vec<(String, String, Option<u64>)> {
    let mut v: Vec<_> = (report["findings"].as_array().unwrap().iter())
        .map(|f| {
            let rule = f["rule"].as_str().unwrap().to_string();
            let fingerprint = f["fingerprint"].as_str().unwrap().to_string();
            (rule, fingerprint, f["rests_on_version"].as_u64())
        })
        .collect();
    v.sort();
    v
}

/// The readings of later versions run over a neighbourhood of the
/// conflicting ids (`rules::readings::neighbourhood`); over the whole log
/// (`HVAUDIT_READINGS=full`) they find the same. Logs with violations of
/// every rule, a few of their events given forged copies of every kind: an
/// earlier date, another type, task, parent, token, causation, payload.
mod neighbourhood {
    use super::*;
    use proptest::prelude::*;

    /// A forged copy of `original`, dated `earlier_ms` before it (after
    /// it when negative), with the changes `changes` picks.
    pub(super) fn forge(original: &str, earlier_ms: i64, changes: u8) -> String {
        let mut e: Value = serde_json::from_str(original).unwrap();
        // An instant chrono cannot parse or shift keeps its text (a generated
        // log may hold one): the copy still differs in what `changes` picks.
        let written = e["created_at"].as_str().unwrap_or_default();
        if let Ok(at) = chrono::DateTime::parse_from_rfc3339(written) {
            let at = at - chrono::Duration::milliseconds(earlier_ms);
            e["created_at"] = json!(at.to_rfc3339_opts(chrono::SecondsFormat::Millis, true));
        }
        let kinds = [
            "task.progress",
            "task.completed",
            "task.cancelled",
            "delegation.handoff.completed",
        ];
        if changes & 1 != 0 {
            e["type"] = json!(kinds[(changes as usize >> 4) % kinds.len()]);
        }
        if changes & 2 != 0 {
            e["task_id"] = json!("task_forged");
        }
        if changes & 4 != 0 {
            e["parent_task_id"] = json!("task_forged_parent");
        }
        if changes & 8 != 0 {
            e["handoff_token"] = json!("tok_forged");
        }
        if changes & 16 != 0 {
            e["causation_id"] = json!("evt_forged_cause");
        }
        e["payload"] = json!({"forged": changes});
        e.to_string()
    }

    fn findings(path: &std::path::Path, full: bool) -> Vec<(String, String, Option<u64>)> {
        found(&readings_report(path, full, &[]).0)
    }

    proptest! {
        // Two audits a case; PROPTEST_CASES runs more.
        #![proptest_config(ProptestConfig {
            cases: crate::common::proptest_cases(5),
            failure_persistence: None,
            ..ProptestConfig::default()
        })]

        #[test]
        fn finds_what_the_whole_log_finds(
            seed in 0u64..1000,
            forgeries in prop::collection::vec((any::<prop::sample::Index>(), -2000i64..2000, any::<u8>(), 1usize..3), 1..6),
        ) {
            let (mut lines, events) = generated(seed);
            for (at, earlier, changes, copies) in forgeries {
                let original = lines[events[at.index(events.len())]].clone();
                for n in 0..copies {
                    lines.push(forge(&original, earlier + n as i64 * 7, changes.wrapping_add(n as u8)));
                }
            }
            let (_dir, path) = write_log(&lines);
            let (part, whole) = (findings(&path, false), findings(&path, true));
            prop_assert_eq!(part, whole);
        }
    }
}

/// A rule blind to what most conflicting ids' versions differ in reads
/// their readings as a move of seqs alone (`rules::differences`); the
/// readings find what the whole log's readings find (`HVAUDIT_READINGS=full`),
/// every report byte for byte.
mod split_readings {
    use super::*;
    use proptest::prelude::*;

    fn report(path: &std::path::Path, full: bool) -> (Value, String) {
        readings_report(path, full, &[])
    }

    /// `original` with a payload member more: a second version of its id
    /// that differs in its payload alone.
    fn payload_copy(original: &str, n: usize) -> String {
        let mut e: Value = serde_json::from_str(original).unwrap();
        if !e["payload"].is_object() {
            e["payload"] = json!({});
        }
        e["payload"]["copy"] = json!(n);
        e.to_string()
    }

    fn task(id: &str, ty: &str, at: &str, task: &str) -> String {
        line(
            id,
            ty,
            at,
            json!({"task_id": task, "payload": {"task_id": task}}),
        )
    }

    /// The attacker's copy: the same event with a payload member more,
    /// written far down the log, past another event of its task at the
    /// same instant. Read in its place, it comes after that event, and
    /// the task's order is illegal: that reading must still be made,
    /// though the copy differs only where most copies do.
    #[test]
    fn a_copy_that_passes_an_event_of_its_instant_is_read_in_place() {
        let at = |s: u32| format!("2026-07-14T10:00:{s:02}Z");
        let mut lines = vec![
            task("a_sub", "task.submitted", &at(0), "task_a"),
            task("a_acc", "task.accepted", &at(1), "task_a"),
            task("a_prog", "task.progress", &at(1), "task_a"),
            task("a_done", "task.completed", &at(2), "task_a"),
        ];
        // Copies that differ in their payload alone, right after their
        // originals: most copies, and blind to the lifecycle.
        for t in ["b", "c", "d"] {
            let first = task(
                &format!("{t}_sub"),
                "task.submitted",
                &at(3),
                &format!("task_{t}"),
            );
            lines.push(first.clone());
            lines.push(payload_copy(&first, 1));
            lines.push(task(
                &format!("{t}_done"),
                "task.completed",
                &at(4),
                &format!("task_{t}"),
            ));
        }
        let copy = payload_copy(&lines[1], 1);
        lines.push(copy);
        let (_dir, path) = write_log(&lines);
        let (split, said) = report(&path, false);
        let (whole, _) = report(&path, true);
        assert!(said.contains("3 of 4 ids differ only in"), "{said}");
        assert_eq!(split, whole);
        let in_reading = (split["findings"].as_array().unwrap().iter())
            .any(|f| f["rule"] == "lifecycle.illegal_transition" && f["rests_on_version"] == 2);
        assert!(in_reading, "{split:#}");
    }

    /// The split readings of a converted store, in place and on a cluster,
    /// find what the loaded log's find.
    #[test]
    fn a_store_read_in_place_and_on_a_cluster_is_split_alike() {
        let at = |s: u32| format!("2026-07-14T10:00:{s:02}Z");
        let bare = line("bare", "subscription.requested", &at(0), json!({}));
        let mut lines = vec![
            task("a_sub", "task.submitted", &at(0), "task_a"),
            task("a_acc", "task.accepted", &at(1), "task_a"),
            task("a_prog", "task.progress", &at(1), "task_a"),
            bare.clone(),
            payload_copy(&bare, 1),
        ];
        for t in ["b", "c", "d"] {
            let first = task(
                &format!("{t}_sub"),
                "task.submitted",
                &at(3),
                &format!("task_{t}"),
            );
            lines.push(first.clone());
            lines.push(payload_copy(&first, 1));
        }
        lines.push(payload_copy(&lines[1], 1));
        let (dir, path) = write_log(&lines);
        let store = dir.path().join("store");
        hvaudit()
            .args(["convert", "-q", "-o"])
            .arg(&store)
            .arg(&path)
            .assert()
            .success();
        let (loaded, said) = report(&path, false);
        assert!(
            said.contains("4 of 5 ids differ only in [payload]"),
            "{said}"
        );
        let expected = found(&loaded);
        let rules: Vec<&str> = expected
            .iter()
            .filter(|f| f.2 == Some(2))
            .map(|f| f.0.as_str())
            .collect();
        assert!(
            rules.contains(&"lifecycle.illegal_transition"),
            "{expected:?}"
        );
        assert!(rules.contains(&"subscription.no_filter"), "{expected:?}");
        let (in_place, said) = readings_report(&store, false, &["--in-place"]);
        assert!(
            said.contains("4 of 5 ids differ only in [payload]"),
            "{said}"
        );
        assert_eq!(found(&in_place), expected, "in place");
        #[cfg(feature = "cluster")]
        {
            let url = &crate::cluster::CLUSTER.1;
            let (on_cluster, _) = readings_report(&store, false, &["--cluster", url]);
            assert_eq!(found(&on_cluster), expected, "cluster");
        }
    }

    /// Copies that differ in their payload alone, one of them of a
    /// subscription whose message quotes its payload: the rule that reads
    /// the payload reads that copy in place.
    #[test]
    fn a_copy_that_differs_where_a_rule_reads_is_read_in_place() {
        let at = |s: u32| format!("2026-07-14T10:00:{s:02}Z");
        let bare = line(
            "bare",
            "subscription.requested",
            &at(0),
            json!({"target": "harness:aep"}),
        );
        let mut lines = vec![bare.clone(), payload_copy(&bare, 1)];
        for t in ["b", "c", "d"] {
            let first = task(
                &format!("{t}_sub"),
                "task.submitted",
                &at(3),
                &format!("task_{t}"),
            );
            lines.push(first.clone());
            lines.push(payload_copy(&first, 1));
        }
        let (_dir, path) = write_log(&lines);
        let (split, said) = report(&path, false);
        let (whole, _) = report(&path, true);
        assert!(
            said.contains("4 of 4 ids differ only in [payload]"),
            "{said}"
        );
        assert_eq!(split, whole);
        let in_reading = (split["findings"].as_array().unwrap().iter())
            .any(|f| f["rule"] == "subscription.no_filter" && f["rests_on_version"] == 2);
        assert!(in_reading, "{split:#}");
    }

    proptest! {
        // Two audits a case; PROPTEST_CASES runs more.
        #![proptest_config(ProptestConfig {
            cases: crate::common::proptest_cases(4),
            failure_persistence: None,
            ..ProptestConfig::default()
        })]

        /// Many copies that differ in their payload alone (after their
        /// original, or far down the log past events of the same instant),
        /// and a few forged copies of every kind.
        #[test]
        fn finds_what_the_whole_log_finds(
            seed in 0u64..1000,
            copies in prop::collection::vec((any::<prop::sample::Index>(), any::<bool>(), 1usize..3), 20..60),
            ties in prop::collection::vec((any::<prop::sample::Index>(), any::<prop::sample::Index>()), 0..8),
            forgeries in prop::collection::vec((any::<prop::sample::Index>(), -2000i64..2000, any::<u8>()), 0..3),
        ) {
            let (mut lines, events) = generated(seed);
            // Ties: an event re-dated to another's instant.
            for (a, b) in ties {
                let (a, b) = (events[a.index(events.len())], events[b.index(events.len())]);
                let at = serde_json::from_str::<Value>(&lines[a]).unwrap()["created_at"].clone();
                let mut e: Value = serde_json::from_str(&lines[b]).unwrap();
                e["created_at"] = at;
                lines[b] = e.to_string();
            }
            let mut after: Vec<(usize, String)> = Vec::new();
            let mut at_end = Vec::new();
            for (at, far, n) in copies {
                let i = events[at.index(events.len())];
                for k in 0..n {
                    let copy = payload_copy(&lines[i], k + 1);
                    match far {
                        true => at_end.push(copy),
                        false => after.push((i, copy)),
                    }
                }
            }
            for (at, earlier, changes) in forgeries {
                at_end.push(super::neighbourhood::forge(&lines[events[at.index(events.len())]], earlier, changes));
            }
            after.sort_by_key(|(i, _)| std::cmp::Reverse(*i));
            for (i, copy) in after {
                lines.insert(i + 1, copy);
            }
            lines.extend(at_end);
            let (_dir, path) = write_log(&lines);
            let ((split, said), (whole, _)) = (report(&path, false), report(&path, true));
            prop_assert!(said.contains("ids differ only in"), "{}", said);
            prop_assert_eq!(split, whole);
        }
    }
}
