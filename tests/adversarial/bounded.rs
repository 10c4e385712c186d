//! Memory an input can make the audit hold: a log of nothing but bad lines
//! must cost about what a log of good lines of its size does, not a report
//! and a table row per line.

use super::*;

/// A log of `n` one-byte bad lines between two good events.
fn junk(dir: &Path, name: &str, n: usize) -> PathBuf {
    let mut bytes = numbered("good", 1);
    bytes.reserve(2 * n);
    for _ in 0..n {
        bytes.extend_from_slice(b"x\n");
    }
    bytes.extend_from_slice(&numbered("late", 1));
    write(dir, name, &bytes)
}

/// Run the binary to its end and return its exit code and peak resident
/// memory (VmHWM, read from /proc while it runs).
fn peak_rss(args: &[&std::ffi::OsStr]) -> (i32, u64) {
    let mut child = crate::common::hvaudit_process()
        .args(args)
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let status = format!("/proc/{}/status", child.id());
    let mut peak = 0u64;
    let started = Instant::now();
    loop {
        if let Ok(s) = std::fs::read_to_string(&status) {
            let hwm = s
                .lines()
                .find_map(|l| l.strip_prefix("VmHWM:"))
                .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<u64>().ok());
            peak = peak.max(hwm.unwrap_or(0) * 1024);
        }
        if let Some(st) = child.try_wait().unwrap() {
            return (st.code().unwrap_or(-1), peak);
        }
        assert!(
            started.elapsed() < Duration::from_secs(300),
            "{args:?} did not end"
        );
        std::thread::sleep(Duration::from_millis(5));
    }
}

#[test]
fn bad_lines_are_listed_up_to_a_cap_and_every_one_is_kept_on_request() {
    let dir = tempfile::tempdir().unwrap();
    let log = junk(dir.path(), "junk.ndjson", 5_000);
    let all = dir.path().join("all-bad.ndjson");
    let (_, out, err) = run_ok(
        &[
            os("audit"),
            os("--format"),
            os("json"),
            os("--bad-lines"),
            all.as_os_str(),
            log.as_os_str(),
        ],
        &[0, 1],
    );
    let report: Value = serde_json::from_str(&out).unwrap();
    let listed = report["findings"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|f| f["rule"] == "envelope.invalid")
        .count();
    assert_eq!(listed, 1000, "the first 1000 bad lines are findings");
    let acc = &report["accounting"];
    assert_eq!(acc["bad_lines"], 5000, "{acc}");
    assert_eq!(acc["bad_lines_unlisted"], 4000, "{acc}");
    assert_eq!(acc["identity_holds"], true, "{acc}");
    assert!(
        err.contains("4000 of them are counted but not listed"),
        "{err}"
    );
    assert_eq!(
        std::fs::read(&all).unwrap(),
        b"x\n".repeat(5000),
        "--bad-lines keeps every one"
    );
    // The cap is an option, and the later good line is still audited.
    let (_, out, _) = run_ok(
        &[
            os("sql"),
            os("-q"),
            os("--max-bad-lines"),
            os("10"),
            os("--format"),
            os("csv"),
            os("-e"),
            os("SELECT (SELECT count(*) FROM bad_lines) AS b, (SELECT count(*) FROM events) AS e"),
            log.as_os_str(),
        ],
        &[0],
    );
    assert_eq!(out, "b,e\n10,2\n");
    // convert, the archive, keeps every one unless told otherwise.
    let pq = dir.path().join("pq");
    run_ok(
        &[
            os("convert"),
            os("-q"),
            os("-o"),
            pq.as_os_str(),
            log.as_os_str(),
        ],
        &[0],
    );
    let (_, out, _) = run_ok(
        &[
            os("sql"),
            os("-q"),
            os("--format"),
            os("csv"),
            os("-e"),
            os("SELECT count(*) AS b FROM bad_lines"),
            os("--in-place"),
            pq.as_os_str(),
        ],
        &[0],
    );
    assert_eq!(out, "b\n5000\n");
}

#[test]
fn a_log_of_bad_lines_costs_no_more_memory_at_four_times_its_size() {
    let dir = tempfile::tempdir().unwrap();
    let small = junk(dir.path(), "small.ndjson", 500_000);
    let large = junk(dir.path(), "large.ndjson", 2_000_000);
    let audit = |p: &PathBuf| {
        let (code, peak) = peak_rss(&[
            os("audit"),
            os("-q"),
            os("--format"),
            os("json"),
            p.as_os_str(),
        ]);
        assert!(code == 0 || code == 1, "exit {code}");
        peak
    };
    let (a, b) = (audit(&small), audit(&large));
    // Before the cap each bad line held a table row and a finding: the 4x
    // log took more than 1 GB. Now the inputs' 1 and 4 MB barely show.
    assert!(
        b < a + (64 << 20),
        "peak {a} B for 0.5 M bad lines, {b} B for 2 M"
    );
    assert!(b < 512 << 20, "peak {b} B for 2 M one-byte bad lines");
}

/// Files the operator names are read only when regular: `/dev/zero` as the
/// suppression file, the baseline or the configuration was read until
/// memory ran out. Each is refused at once, naming the file (exit 2).
#[test]
fn operator_files_that_never_end_are_refused() {
    let dir = tempfile::tempdir().unwrap();
    let log = write(dir.path(), "a.ndjson", &numbered("ok", 3));
    for option in ["--suppressions", "--baseline"] {
        let (_, _, stderr) = run_ok(
            &[os("audit"), os(option), os("/dev/zero"), log.as_os_str()],
            &[2],
        );
        assert!(
            stderr.contains("/dev/zero") && stderr.contains("not a regular file"),
            "{option}: {stderr}"
        );
    }
    let out = crate::common::scrubbed(crate::common::bin())
        .args(["--config", "/dev/zero", "audit"])
        .arg(&log)
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(stderr.contains("not a regular file"), "{stderr}");
}

/// A compressed file's size promises nothing of what it holds: a gzip of
/// distinct events that a loaded read was thought to fit decodes past its
/// budget, and the audit reads it again with its rows on disk, giving the
/// findings the plain log gives. The legal look-alike, the same log plain,
/// stays loaded.
#[test]
fn a_compressed_log_that_expands_past_its_size_is_read_again_to_disk() {
    let dir = tempfile::tempdir().unwrap();
    let log = crate::common::synth_log(11, 8 << 20, 0.0);
    let plain = write(dir.path(), "log.ndjson", &log);
    let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::best());
    gz.write_all(&log).unwrap();
    let gz = write(dir.path(), "log.ndjson.gz", &gz.finish().unwrap());
    let (decoded, packed) = (log.len() as u64, std::fs::metadata(&gz).unwrap().len());
    // Counted at 10x its size the gzip fits half the limit; the table of
    // what it decodes to (2x) does not.
    assert!(
        10 * packed < 2 * decoded,
        "{packed} bytes of gzip for {decoded}"
    );
    let limit = (10 * packed + 2 * decoded).to_string();
    let prints = |report: &str| -> Vec<(String, String)> {
        let v: Value = serde_json::from_str(report).unwrap();
        let mut out: Vec<_> = v["findings"]
            .as_array()
            .unwrap()
            .iter()
            .map(|f| (f["rule"].to_string(), f["fingerprint"].to_string()))
            .collect();
        out.sort();
        out
    };
    let audit = |input: &Path, limit: Option<&str>| {
        let mut args = vec![os("audit"), os("--format"), os("json"), input.as_os_str()];
        if let Some(limit) = limit {
            args.extend([os("--memory-limit"), os(limit)]);
        }
        // Not quiet: the read to disk is said on stderr.
        let out = crate::common::hvaudit().args(&args).output().unwrap();
        assert!(matches!(out.status.code(), Some(0 | 1)), "{out:?}");
        (
            String::from_utf8_lossy(&out.stdout).into_owned(),
            String::from_utf8_lossy(&out.stderr).into_owned(),
        )
    };
    let (expected, _) = audit(&plain, None);
    let (report, err) = audit(&gz, Some(&limit));
    assert!(err.contains("decoded past"), "{err}");
    assert!(err.contains("reading it to"), "{err}");
    assert_eq!(prints(&report), prints(&expected));
    let v: Value = serde_json::from_str(&report).unwrap();
    assert_eq!(
        v["inputs"][0]["lines"],
        log.iter().filter(|b| **b == b'\n').count()
    );
    // The plain log, under the same limit, is read as it always was.
    let (_, err) = audit(&plain, Some(&limit));
    assert!(!err.contains("decoded past"), "{err}");
    // convert, without a limit, on a machine whose memory the gzip (at
    // 1.5x 10x its size) fits and what it decodes to (1.5x 2x) does not.
    let available = ((15 * packed + 3 * decoded) / 2).to_string();
    let store = dir.path().join("store");
    let out = crate::common::hvaudit()
        .env("HVAUDIT_MEMORY_AVAILABLE", &available)
        .args(["convert", "-o"])
        .arg(&store)
        .arg(&gz)
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{err}");
    assert!(err.contains("decoded past"), "{err}");
    let (converted, _) = audit(&store, None);
    assert_eq!(prints(&converted), prints(&expected));
}

/// A handoff of token `token` by an event with id `first`, and `n` later
/// handoffs of the same token by other tasks: every replay cites `first`
/// (token.replayed and token.rebound).
fn replays_of(first: &str, token: &str, n: usize) -> Vec<String> {
    let handoff = |id: &str, task: &str, minute: usize| {
        json!({
            "spec_version": "0.2", "id": id, "type": "delegation.handoff.completed",
            "source": "agent:a", "created_at": format!("2026-07-14T1{}:{:02}:00Z", minute / 60, minute % 60),
            "task_id": task, "delegated_by": "agent:a", "delegated_to": "agent:b",
            "handoff_token": token, "payload": {}
        })
        .to_string()
    };
    let mut log = vec![handoff(first, &format!("{token}_first"), 0)];
    log.extend((1..=n).map(|i| handoff(&format!("{token}_r{i}"), &format!("{token}_t{i}"), i)));
    log
}

fn rendered(report: &hvaudit::Report, format: ReportFormat) -> String {
    let mut out = Vec::new();
    render(report, format, &mut out).unwrap();
    String::from_utf8(out).unwrap()
}

/// How messages and the reports people read show a value of the log past
/// 80 characters: its first 40, its length and the start of its BLAKE3.
fn cut(value: &str) -> String {
    let hash = blake3::hash(value.as_bytes()).to_hex();
    format!(
        "{}…[{} characters, blake3 {}]",
        value.chars().take(40).collect::<String>(),
        value.chars().count(),
        &hash[..16]
    )
}

/// A 64 KiB id cited by 100 findings. Before, every message held it whole
/// (at 1 MiB and 400 replays, 1.8 GiB under --memory-limit 1G and a 3.4 GB
/// report). Messages and the text, Markdown, HTML and JUnit reports now
/// cut it; the JSON report's event ids, locations and timeline keep it
/// whole, and every finding keeps its own fingerprint.
#[test]
fn a_long_id_cited_by_many_findings_is_cut_where_people_read_it() {
    let long = "x".repeat(64 << 10);
    let report = crate::common::audit_lines(&replays_of(&long, "ht_1", 50), |_| {});
    let cited: Vec<_> = report
        .findings
        .iter()
        .filter(|f| f.event_ids.contains(&long))
        .collect();
    assert_eq!(cited.len(), 100, "50 replays and 50 rebindings");
    for f in &cited {
        assert!(f.message.contains(&cut(&long)), "{}", f.message);
        assert!(
            f.message.len() < 1000,
            "message of {} bytes",
            f.message.len()
        );
        assert!(
            f.locations
                .iter()
                .any(|l| l.event_id.as_deref() == Some(&long))
        );
        assert!(f.timeline.iter().any(|t| t.event_id == long));
    }
    let prints: std::collections::HashSet<_> = cited.iter().map(|f| &f.fingerprint).collect();
    assert_eq!(prints.len(), cited.len());
    for format in [
        ReportFormat::Text,
        ReportFormat::Markdown,
        ReportFormat::Html,
        ReportFormat::Junit,
    ] {
        let shown = rendered(&report, format);
        assert!(shown.len() < 2 << 20, "{format:?}: {} bytes", shown.len());
        assert!(
            !shown.contains(&"x".repeat(100)),
            "{format:?} shows the id whole"
        );
        // (Markdown escapes the brackets.)
        let tail = cut(&long).split_off(cut(&long).find("characters").unwrap());
        assert!(shown.contains(tail.trim_end_matches(']')), "{format:?}");
    }
    let json = rendered(&report, ReportFormat::Json);
    assert_eq!(
        json.matches(&long).count(),
        100 * 3,
        "event ids, locations, timeline"
    );
}

/// A 4 MiB id that 100 replays' findings cite, audited loaded: the rules'
/// joins copied it into every row that named it (0.95 GB peak in a debug
/// build, outside the memory pool, 1.8 GB at 200 replays). The columns
/// that hold such text are now string views, so it is held once.
#[test]
fn a_long_id_is_not_copied_into_every_row_that_cites_it() {
    let dir = tempfile::tempdir().unwrap();
    let long = "x".repeat(4 << 20);
    let log = write(
        dir.path(),
        "fan.ndjson",
        (replays_of(&long, "ht_1", 100).join("\n") + "\n").as_bytes(),
    );
    let (code, peak) = peak_rss(&[
        os("audit"),
        os("-q"),
        os("--memory-limit"),
        os("1G"),
        log.as_os_str(),
    ]);
    assert_eq!(code, 1, "the replays are findings");
    assert!(peak < 400 << 20, "peak {} MiB", peak >> 20);
}

/// One line whose every text field is long turns every text column of the
/// loaded table into string views; what the audit says of every other line
/// stays as it was.
#[test]
fn long_text_in_one_line_changes_nothing_said_of_the_others() {
    let base: Vec<String> = String::from_utf8(crate::common::synth_log(11, 1_500_000, 0.02))
        .unwrap()
        .lines()
        .map(str::to_string)
        .collect();
    let first: Value = serde_json::from_str(&base[0]).unwrap();
    let long = |field: &str| format!("{field}-{}", "y".repeat(1100));
    let mut line = json!({
        "spec_version": "0.2", "type": "task.progress", "source": "agent:long",
        "created_at": first["created_at"], "payload": {}
    });
    for field in [
        "id",
        "target",
        "topic",
        "session_id",
        "conversation_id",
        "task_id",
        "parent_task_id",
        "correlation_id",
        "causation_id",
        "refresh_hint",
        "delegated_by",
        "delegated_to",
        "handoff_token",
        "checkpoint_id",
        "compensation_id",
        "data_provenance",
        "tenant_id",
    ] {
        line[field] = json!(long(field));
    }
    for field in [
        "task_id",
        "parent_task_id",
        "error_code",
        "fact_id",
        "original_event_id",
        "checkpoint_id",
    ] {
        line["payload"][field] = json!(long(field));
    }
    // (Last, so that no other line moves.)
    let mut attacked = base.clone();
    attacked.push(line.to_string());
    let about_the_line = |ids: &[String], task: &Option<String>| {
        ids.contains(&long("id")) || task.as_deref() == Some(long("task_id").as_str())
    };
    let said = |report: &hvaudit::Report| {
        let mut said: Vec<_> = report
            .findings
            .iter()
            .filter(|f| !about_the_line(&f.event_ids, &f.task_id))
            .map(|f| {
                (
                    f.rule.clone(),
                    f.fingerprint.clone(),
                    f.message.clone(),
                    f.event_ids.clone(),
                )
            })
            .collect();
        said.sort();
        said
    };
    // One path for both, which the messages of bad lines name.
    let dir = tempfile::tempdir().unwrap();
    let audit = |lines: &[String]| {
        let path = write(
            dir.path(),
            "log.ndjson",
            (lines.join("\n") + "\n").as_bytes(),
        );
        Audit::new(crate::common::audit_config(vec![path]))
            .run()
            .unwrap()
    };
    let attacked = audit(&attacked);
    // The line is an event (its dangling parent is a finding), not a bad
    // line: its text is in the table.
    assert!(
        attacked
            .findings
            .iter()
            .any(|f| f.rule == "orphan.dangling_parent" && about_the_line(&f.event_ids, &f.task_id))
    );
    let (before, after) = (said(&audit(&base)), said(&attacked));
    let rules: std::collections::HashSet<_> = before.iter().map(|f| &f.0).collect();
    assert!(
        rules.len() > 20,
        "{} findings of {} rules",
        before.len(),
        rules.len()
    );
    let gone: Vec<_> = before.iter().filter(|f| !after.contains(f)).collect();
    let new: Vec<_> = after.iter().filter(|f| !before.contains(f)).collect();
    assert!(
        gone.is_empty() && new.is_empty(),
        "gone: {gone:#?}\nnew: {new:#?}"
    );
}

/// Two long ids that begin alike and have one length read apart wherever
/// they are cut; an id of 80 characters is shown whole.
#[test]
fn long_ids_that_begin_alike_read_apart() {
    let stem = "task-".repeat(40);
    let (a, b) = (format!("{stem}a"), format!("{stem}b"));
    let whole = "y".repeat(80);
    let mut log = replays_of(&a, "ht_a", 1);
    log.extend(replays_of(&b, "ht_b", 1));
    log.extend(replays_of(&whole, "ht_w", 1));
    let report = crate::common::audit_lines(&log, |_| {});
    let text = rendered(&report, ReportFormat::Text);
    assert_ne!(cut(&a), cut(&b));
    for id in [&a, &b] {
        let message = report
            .findings
            .iter()
            .find(|f| f.rule == "token.replayed" && f.event_ids.contains(id))
            .map(|f| f.message.clone())
            .unwrap();
        assert!(message.contains(&cut(id)), "{message}");
        assert!(text.contains(&cut(id)));
    }
    assert!(text.contains(&whole), "80 characters are shown whole");
}
