//! Where outputs go: a regular file is replaced atomically with the
//! umask's mode (or its old mode); special files (devices, FIFOs, a
//! `/dev/stdout`-style link) are written where they are and never
//! replaced; `-` is standard output; an output that is an input is
//! refused; a reader that goes away ends the run quietly. Device nodes and
//! FIFOs are the tests' own, in temp dirs.

use crate::common::{bin, hvaudit, hvaudit_process, scrubbed};
use std::io::Read;
use std::os::unix::fs::{FileTypeExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::Duration;

/// A small log in which high findings fire.
fn log(dir: &Path) -> PathBuf {
    let p = dir.join("log.ndjson");
    std::fs::write(&p, crate::common::synth_log(3, 40_000, 0.0)).unwrap();
    p
}

fn mode(p: &Path) -> u32 {
    std::fs::metadata(p).unwrap().permissions().mode() & 0o777
}

#[test]
fn new_and_replaced_files_get_the_umask_or_their_old_mode() {
    let dir = tempfile::tempdir().unwrap();
    let log = log(dir.path());
    let new = dir.path().join("new.json");
    let status = scrubbed("sh")
        .arg("-c")
        .arg("umask 027; exec \"$0\" --no-config audit -q --format json -o \"$1\" \"$2\"")
        .arg(bin())
        .arg(&new)
        .arg(&log)
        .status()
        .unwrap();
    assert!(matches!(status.code(), Some(0 | 1)));
    assert_eq!(mode(&new), 0o640, "0666 less the umask 027");
    std::fs::set_permissions(&new, std::fs::Permissions::from_mode(0o604)).unwrap();
    hvaudit()
        .args(["audit", "-q", "--format", "md", "-o"])
        .arg(&new)
        .arg(&log)
        .assert()
        .code(1);
    assert_eq!(mode(&new), 0o604, "a replaced file keeps its mode");
    assert!(std::fs::read_to_string(&new).unwrap().starts_with('#'));
    // synth and --bad-lines outputs too.
    let synth = dir.path().join("synth.ndjson");
    let status = scrubbed("sh")
        .arg("-c")
        .arg("umask 022; exec \"$0\" --no-config synth -q --size 10K -o \"$1\"")
        .arg(bin())
        .arg(&synth)
        .status()
        .unwrap();
    assert!(status.success());
    assert_eq!(mode(&synth), 0o644);
}

#[test]
fn special_files_are_written_in_place_and_never_replaced() {
    let dir = tempfile::tempdir().unwrap();
    let log = log(dir.path());
    // A FIFO with a reader: the report goes through it.
    let fifo = dir.path().join("fifo");
    crate::common::mkfifo(&fifo);
    let reader = {
        let fifo = fifo.clone();
        std::thread::spawn(move || {
            let mut s = String::new();
            std::fs::File::open(&fifo)
                .unwrap()
                .read_to_string(&mut s)
                .unwrap();
            s
        })
    };
    hvaudit()
        .args(["audit", "-q", "--format", "json", "-o"])
        .arg(&fifo)
        .arg(&log)
        .assert()
        .code(1);
    let through = reader.join().unwrap();
    assert!(through.contains("\"findings\""), "{through}");
    assert!(std::fs::metadata(&fifo).unwrap().file_type().is_fifo());

    // A link like /dev/stdout (to this process's fd 1): written through, the
    // link stays a link.
    let stdout_link = dir.path().join("stdout");
    std::os::unix::fs::symlink("/proc/self/fd/1", &stdout_link).unwrap();
    let out = hvaudit()
        .args(["audit", "-q", "--format", "json", "-o"])
        .arg(&stdout_link)
        .arg(&log)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1), "{out:?}");
    assert!(String::from_utf8_lossy(&out.stdout).contains("\"findings\""));
    assert!(
        stdout_link
            .symlink_metadata()
            .unwrap()
            .file_type()
            .is_symlink()
    );

    // A link to a regular file: the file is replaced, the link kept.
    let real = dir.path().join("real.json");
    std::fs::write(&real, "old").unwrap();
    let link = dir.path().join("link.json");
    std::os::unix::fs::symlink(&real, &link).unwrap();
    hvaudit()
        .args(["audit", "-q", "--format", "json", "-o"])
        .arg(&link)
        .arg(&log)
        .assert()
        .code(1);
    assert!(link.symlink_metadata().unwrap().file_type().is_symlink());
    assert!(
        std::fs::read_to_string(&real)
            .unwrap()
            .contains("\"findings\"")
    );

    // A character device of our own (like /dev/null): still a device after.
    let null = dir.path().join("null");
    // Making it needs root, as CI runs: the test fails for anyone else.
    crate::common::mknod_char(&null, 1, 3);
    for args in [
        vec!["audit", "-q", "-o"],
        vec!["audit", "-q", "--bad-lines"],
    ] {
        hvaudit().args(args).arg(&null).arg(&log).assert().code(1);
        let kind = std::fs::metadata(&null).unwrap().file_type();
        assert!(kind.is_char_device(), "the device was replaced");
    }
    hvaudit()
        .args(["synth", "-q", "--size", "10K", "-o"])
        .arg(&null)
        .assert()
        .success();
    assert!(
        std::fs::metadata(&null)
            .unwrap()
            .file_type()
            .is_char_device()
    );
}

#[test]
fn a_dash_is_standard_output() {
    let dir = tempfile::tempdir().unwrap();
    let log = log(dir.path());
    let out = hvaudit()
        .current_dir(dir.path())
        .args(["audit", "-q", "--format", "json", "-o", "-"])
        .arg(&log)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&out.stdout).contains("\"findings\""));
    assert!(!dir.path().join("-").exists(), "no file named -");
}

#[test]
fn an_output_that_is_an_input_is_refused_and_the_log_kept() {
    let dir = tempfile::tempdir().unwrap();
    let log = log(dir.path());
    let before = std::fs::read(&log).unwrap();
    let alias = dir.path().join("alias.ndjson");
    std::fs::hard_link(&log, &alias).unwrap();
    let cases: Vec<Vec<std::ffi::OsString>> = vec![
        vec![
            "audit".into(),
            "-o".into(),
            log.clone().into(),
            log.clone().into(),
        ],
        vec![
            "audit".into(),
            "-o".into(),
            alias.clone().into(),
            log.clone().into(),
        ],
        vec![
            "audit".into(),
            "--bad-lines".into(),
            log.clone().into(),
            dir.path().into(),
        ],
        vec![
            "replay".into(),
            "--task".into(),
            "t".into(),
            "-o".into(),
            log.clone().into(),
            log.clone().into(),
        ],
        vec![
            "convert".into(),
            "-o".into(),
            log.clone().into(),
            log.clone().into(),
        ],
    ];
    for args in cases {
        let out = hvaudit().args(&args).output().unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {err}");
        assert!(err.contains("destroy the log"), "{args:?}: {err}");
        assert_eq!(
            std::fs::read(&log).unwrap(),
            before,
            "{args:?} changed the log"
        );
    }
}

#[test]
fn a_reader_that_goes_away_ends_the_run_quietly() {
    let dir = tempfile::tempdir().unwrap();
    let log = log(dir.path());
    // Outputs far larger than a pipe's buffer, read for a few bytes only.
    let runs: Vec<(Vec<std::ffi::OsString>, i32)> = vec![
        (
            vec!["synth".into(), "-q".into(), "--size".into(), "5M".into()],
            0,
        ),
        (
            vec![
                "sql".into(),
                "-q".into(),
                "--format".into(),
                "csv".into(),
                "-e".into(),
                "SELECT * FROM events; SELECT * FROM events".into(),
                log.clone().into(),
            ],
            0,
        ),
        (
            vec![
                "audit".into(),
                "-q".into(),
                "--format".into(),
                "json".into(),
                log.clone().into(),
            ],
            1,
        ),
    ];
    for (args, want) in runs {
        let mut child = hvaudit_process()
            .args(&args)
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        let mut head = [0u8; 16];
        child.stdout.take().unwrap().read_exact(&mut head).unwrap();
        // stdout's read end is dropped here: the pipe breaks.
        let out = child.wait_with_output().unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(want), "{args:?}: {err}");
        assert!(
            !err.to_lowercase().contains("broken pipe"),
            "{args:?}: {err}"
        );
        assert!(!err.contains("panicked"), "{args:?}: {err}");
    }
}

#[test]
fn temp_files_a_killed_convert_left_are_removed_by_the_next() {
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("big.ndjson");
    std::fs::write(&log, crate::common::synth_log(5, 30 << 20, 0.0)).unwrap();
    let out = dir.path().join("pq");
    // SIGKILL while the Parquet files are being written: nothing can clean up.
    let mut child = hvaudit_process()
        .args(["convert", "-q", "-o"])
        .arg(&out)
        .arg(&log)
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let started = std::time::Instant::now();
    let temps = |dir: &Path| -> Vec<PathBuf> {
        walkdir::WalkDir::new(dir)
            .into_iter()
            .filter_map(Result::ok)
            .map(|e| e.path().to_path_buf())
            .filter(|p| {
                let n = p.file_name().unwrap_or_default().to_string_lossy();
                n.starts_with(".hvaudit-") && n.ends_with(".tmp")
            })
            .collect()
    };
    loop {
        if !temps(&out).is_empty() {
            break;
        }
        assert!(
            child.try_wait().unwrap().is_none(),
            "convert ended first; use a larger log"
        );
        assert!(
            started.elapsed() < Duration::from_secs(240),
            "no temp file appeared"
        );
        std::thread::sleep(Duration::from_millis(2));
    }
    child.kill().unwrap();
    child.wait().unwrap();
    let left = temps(&out);
    assert!(!left.is_empty());
    // And one no run of this host could have made (another host's, on
    // shared storage): kept, and listed.
    let foreign = left[0].with_file_name(".hvaudit-0000beef-1-xyz.tmp");
    std::fs::write(&foreign, b"another host's").unwrap();
    let small = dir.path().join("small.ndjson");
    std::fs::write(&small, crate::common::synth_log(3, 40_000, 0.0)).unwrap();
    let done = hvaudit()
        .args(["convert", "-o"])
        .arg(&out)
        .arg(&small)
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&done.stderr);
    assert!(done.status.success(), "{err}");
    let stale: Vec<&PathBuf> = left.iter().filter(|p| p.exists()).collect();
    assert!(stale.is_empty(), "still there: {stale:?}; stderr: {err}");
    assert!(
        err.contains("removed") && err.contains("interrupted run"),
        "{err}"
    );
    assert!(foreign.exists(), "another host's file is kept");
    assert!(
        err.contains(".hvaudit-0000beef-1-xyz.tmp"),
        "and listed: {err}"
    );
}
