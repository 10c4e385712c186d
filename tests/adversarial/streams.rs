//! Inputs that can be read only once (pipes, FIFOs, standard input,
//! process substitution) and special files: nothing read to recognise the
//! format is lost, nothing blocks, nothing is read forever.

use super::*;
use std::os::unix::fs::FileTypeExt;
use std::process::{Command as Process, Stdio};

/// A small log in which rules fire, and its JSON report read from the file.
fn log_and_report(dir: &Path) -> (PathBuf, Value) {
    let log = write(
        dir,
        "log.ndjson",
        &crate::common::synth_log(7, 60_000, 0.01),
    );
    let (_, out, _) = run_ok(
        &[
            os("audit"),
            os("-q"),
            os("--format"),
            os("json"),
            log.as_os_str(),
        ],
        &[0, 1],
    );
    (log, comparable(&out))
}

/// A JSON report with its input's name replaced by `LOG`, and without the
/// input's size (a stream has none) or the fingerprints (they carry the name).
fn comparable(report: &str) -> Value {
    let v: Value = serde_json::from_str(report).expect("a JSON report");
    let name = v["inputs"][0]["path"]
        .as_str()
        .expect("one input")
        .to_string();
    let named = serde_json::to_string(&v).unwrap();
    let mut v: Value = serde_json::from_str(&named.replace(&name, "LOG")).unwrap();
    let o = v.as_object_mut().unwrap();
    o.remove("inputs");
    o["accounting"].as_object_mut().unwrap().remove("bytes");
    for f in o["findings"].as_array_mut().unwrap() {
        f.as_object_mut().unwrap().remove("fingerprint");
    }
    v
}

/// Whether two reports agree, with a short message where they do not.
fn same(got: &Value, want: &Value, what: &str) {
    if got != want {
        let (g, w) = (got.to_string(), want.to_string());
        let at = g.bytes().zip(w.bytes()).take_while(|(a, b)| a == b).count();
        let from = at.saturating_sub(200);
        panic!(
            "{what}: reports differ at byte {at}:\n got  ...{}\n want ...{}",
            &g[from..(at + 200).min(g.len())],
            &w[from..(at + 200).min(w.len())]
        );
    }
}

/// `sh -c SCRIPT` with `$HV` the binary and `$LOG` the log; its output.
fn shell(script: &str, log: &Path) -> std::process::Output {
    let out = crate::common::scrubbed("bash")
        .arg("-c")
        .arg(script)
        .env("HV", crate::common::bin())
        .env("LOG", log)
        .stdin(Stdio::null())
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!stderr.contains("panicked"), "{script}: {stderr}");
    out
}

#[test]
fn piped_logs_plain_or_compressed_give_the_report_of_the_file() {
    let dir = tempfile::tempdir().unwrap();
    let (log, want) = log_and_report(dir.path());
    for script in [
        "cat \"$LOG\" | \"$HV\" --no-config audit -q --format json -",
        "cat \"$LOG\" | \"$HV\" --no-config audit -q --format json /dev/stdin",
        "gzip -c \"$LOG\" | \"$HV\" --no-config audit -q --format json -",
        "gzip -c \"$LOG\" | \"$HV\" --no-config audit -q --format json /dev/stdin",
        "zstd -q -c \"$LOG\" | \"$HV\" --no-config audit -q --format json -",
        "\"$HV\" --no-config audit -q --format json <(gzip -c \"$LOG\")",
        "\"$HV\" --no-config audit -q --format json <(cat \"$LOG\")",
    ] {
        if script.contains("zstd") {
            let there = Process::new("zstd").arg("-V").output().is_ok();
            assert!(
                there,
                "zstd's command-line tool is needed: apt-get install zstd"
            );
        }
        let out = shell(script, &log);
        let code = out.status.code();
        assert!(matches!(code, Some(0 | 1)), "{script}: {out:?}");
        let got = comparable(&String::from_utf8_lossy(&out.stdout));
        same(&got, &want, script);
    }
    // Locations name standard input.
    let out = shell(
        "cat \"$LOG\" | \"$HV\" --no-config audit -q --format json -",
        &log,
    );
    let report: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(report["inputs"][0]["path"], "<stdin>");
    let file = &report["findings"][0]["locations"][0]["file"];
    assert_eq!(file, "<stdin>", "{report:#}");
}

#[test]
fn a_fifo_named_on_the_command_line_is_read_whole_and_one_in_a_directory_is_listed() {
    let dir = tempfile::tempdir().unwrap();
    let (log, want) = log_and_report(dir.path());
    let fifo = dir.path().join("pipe");
    crate::common::mkfifo(&fifo);
    let bytes = std::fs::read(&log).unwrap();
    let (gz, _) = compressed(&bytes);
    let writer = {
        let fifo = fifo.clone();
        std::thread::spawn(move || std::fs::write(&fifo, gz).unwrap())
    };
    let (_, out, _) = run_ok(
        &[
            os("audit"),
            os("-q"),
            os("--format"),
            os("json"),
            fifo.as_os_str(),
        ],
        &[0, 1],
    );
    writer.join().unwrap();
    same(&comparable(&out), &want, "a FIFO");

    // Inside a walked directory a FIFO is never opened (it could block the
    // run forever), but it is listed as skipped, with what to do.
    let walked = dir.path().join("walked");
    std::fs::create_dir(&walked).unwrap();
    std::fs::copy(&log, walked.join("log.ndjson")).unwrap();
    crate::common::mkfifo(&walked.join("current"));
    let (_, out, err) = run_ok(
        &[os("audit"), os("--format"), os("json"), walked.as_os_str()],
        &[0, 1],
    );
    assert!(err.contains("named pipe"), "{err}");
    let report: Value = serde_json::from_str(&out).unwrap();
    let skipped: Vec<&Value> = report["inputs"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|i| i["format"] == "skipped")
        .collect();
    assert_eq!(skipped.len(), 1, "{:#}", report["inputs"]);
    assert!(skipped[0]["path"].as_str().unwrap().ends_with("current"));
}

#[test]
fn devices_that_never_end_are_refused_at_once() {
    let dir = tempfile::tempdir().unwrap();
    // Device nodes of our own in a temp dir (the system's /dev is never
    // touched); making them needs root, as CI runs: the test fails for
    // anyone else.
    let zero = dir.path().join("zero");
    crate::common::mknod_char(&zero, 1, 5);
    let started = Instant::now();
    let (_, _, err) = run_ok(&[os("audit"), zero.as_os_str()], &[2]);
    assert!(err.contains("character device"), "{err}");
    assert!(err.contains("pipe it"), "says what to do: {err}");
    assert!(started.elapsed() < Duration::from_secs(60));
    // Still a device: nothing was written there.
    let kind = std::fs::metadata(&zero).unwrap().file_type();
    assert!(kind.is_char_device());
}

#[test]
fn a_broken_single_input_is_said_on_stderr_even_when_quiet() {
    let dir = tempfile::tempdir().unwrap();
    let (gz, _) = compressed(&numbered("e", 20_000));
    let cut = write(dir.path(), "cut.ndjson.gz", &gz[..gz.len() / 2]);
    for quiet in [false, true] {
        let mut args = vec![os("audit"), cut.as_os_str()];
        if quiet {
            args.push(os("-q"));
        }
        let (_, _, err) = run_ok(&args, &[0, 1]);
        assert!(
            err.contains("warning") && err.contains("cut.ndjson.gz") && err.contains("gzip"),
            "quiet={quiet}: {err}"
        );
    }
}

#[test]
fn extensionless_files_in_a_directory_are_taken_by_content_or_listed() {
    let dir = tempfile::tempdir().unwrap();
    let logs = dir.path().join("logs");
    std::fs::create_dir(&logs).unwrap();
    std::fs::write(logs.join("current"), numbered("c", 10)).unwrap();
    let (gz, _) = compressed(&numbered("r", 10));
    std::fs::write(logs.join("rotated.1"), gz).unwrap();
    std::fs::write(logs.join("NOTES"), b"not a log\n").unwrap();
    let (_, out, _) = run_ok(
        &[
            os("audit"),
            os("-q"),
            os("--format"),
            os("json"),
            logs.as_os_str(),
        ],
        &[0, 1],
    );
    let report: Value = serde_json::from_str(&out).unwrap();
    let inputs = report["inputs"].as_array().unwrap();
    let by_name = |n: &str| {
        inputs
            .iter()
            .find(|i| i["path"].as_str().unwrap().ends_with(n))
            .unwrap_or_else(|| panic!("{n} not listed: {inputs:#?}"))
    };
    assert_eq!(by_name("current")["format"], "ndjson");
    assert_eq!(by_name("rotated.1")["format"], "ndjson.gz");
    assert_eq!(by_name("NOTES")["format"], "skipped");
    assert!(
        by_name("NOTES")["error"]
            .as_str()
            .unwrap()
            .contains("not a log")
    );
    assert_eq!(
        report["accounting"]["events"], 20,
        "{:#}",
        report["accounting"]
    );
}

#[test]
fn file_names_cannot_drive_the_terminal_or_pass_for_another() {
    use std::os::unix::ffi::OsStrExt;
    let dir = tempfile::tempdir().unwrap();
    let lines = numbered("e", 3);
    let names: [&[u8]; 3] = [
        b"a\x1b[2Jb\nhvaudit: read\n.ndjson",
        b"\xe9-latin1.ndjson",
        b"\xe8-latin1.ndjson",
    ];
    let mut paths = Vec::new();
    for n in names {
        let p = dir.path().join(std::ffi::OsStr::from_bytes(n));
        std::fs::write(&p, &lines).unwrap();
        paths.push(p);
    }
    let mut args = vec![os("audit"), os("--format"), os("json")];
    args.extend(paths.iter().map(|p| p.as_os_str()));
    let (_, out, err) = run_ok(&args, &[0, 1]);
    assert!(!err.contains('\u{1b}'), "raw escape on stderr: {err:?}");
    assert!(err.contains("\\x1b[2Jb\\nhvaudit: read\\n"), "{err}");
    let report: Value = serde_json::from_str(&out).unwrap();
    let shown: std::collections::BTreeSet<&str> = report["inputs"]
        .as_array()
        .unwrap()
        .iter()
        .map(|i| i["path"].as_str().unwrap())
        .collect();
    assert_eq!(shown.len(), 3, "two names shown alike: {shown:?}");
    assert!(
        shown.iter().any(|s| s.contains("\\xe9-latin1")),
        "{shown:?}"
    );
}

/// A CRLF line exactly as long as the cap, whose CR is the last byte of the
/// file reader's first 4 MiB read: it was rejected from the file (the CR
/// counted against the cap before its LF came) and accepted piped in. The
/// cap now counts the line without its CR wherever a read ends.
#[test]
fn a_crlf_line_at_the_cap_is_read_alike_from_a_file_and_a_pipe() {
    const READ: usize = 4 << 20;
    let cap = READ - 1;
    let dir = tempfile::tempdir().unwrap();
    let head = r#"{"spec_version":"0.2","id":"e1","type":"task.progress","source":"agent:a","created_at":"2026-07-14T10:00:00Z","payload":{"pad":""#;
    let tail = r#""}}"#;
    let mut bytes = head.as_bytes().to_vec();
    bytes.resize(cap - tail.len(), b'x');
    bytes.extend_from_slice(tail.as_bytes());
    assert_eq!(bytes.len(), cap);
    bytes.extend_from_slice(b"\r\n");
    assert_eq!(bytes[READ - 1], b'\r', "the CR ends the first read");
    bytes.extend_from_slice(&numbered("after", 1));
    let log = write(dir.path(), "crlf.ndjson", &bytes);
    let cap = cap.to_string();
    let counts = |out: &std::process::Output| {
        let report: Value = serde_json::from_slice(&out.stdout).unwrap();
        let a = &report["accounting"];
        (a["events"].clone(), a["bad_lines"].clone())
    };
    let from_file = shell(
        &format!("$HV audit -q --format json --fail-on none --max-line-bytes {cap} \"$LOG\""),
        &log,
    );
    let piped = shell(
        &format!(
            "cat \"$LOG\" | $HV audit -q --format json --fail-on none --max-line-bytes {cap} -"
        ),
        &log,
    );
    assert_eq!(counts(&from_file), (json!(2), json!(0)), "{from_file:?}");
    assert_eq!(counts(&from_file), counts(&piped));
}
