//! SIGINT and SIGTERM while an output is being written.

use super::*;

/// Files in `dir` (recursively) whose name ends with one of `suffixes`.
fn files_ending(dir: &Path, suffixes: &[&str]) -> Vec<PathBuf> {
    walkdir::WalkDir::new(dir)
        .into_iter()
        .filter_map(Result::ok)
        .filter(|e| e.file_type().is_file())
        .filter(|e| {
            suffixes
                .iter()
                .any(|s| e.file_name().to_string_lossy().ends_with(s))
        })
        .map(|e| e.path().to_path_buf())
        .collect()
}

/// Start `args`, wait until a `.hvaudit-*.tmp` appears under `watch`, send
/// `signal`, and return the exit code.
fn interrupt_when_writing(args: &[&std::ffi::OsStr], watch: &Path, signal: &str) -> i32 {
    let mut child = crate::common::hvaudit_process()
        .args(args)
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let start = Instant::now();
    loop {
        let tmp = files_ending(watch, &[".tmp"]);
        if tmp.iter().any(|p| {
            p.file_name()
                .unwrap()
                .to_string_lossy()
                .starts_with(".hvaudit-")
        }) {
            break;
        }
        if let Some(status) = child.try_wait().unwrap() {
            panic!("{args:?} finished ({status}) before it was interrupted; use a larger input");
        }
        assert!(
            start.elapsed() < Duration::from_secs(240),
            "no temp file appeared"
        );
        std::thread::sleep(Duration::from_millis(2));
    }
    std::process::Command::new("kill")
        .args([signal, &child.id().to_string()])
        .status()
        .unwrap();
    let out = child.wait_with_output().unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!stderr.contains("panicked"), "{stderr}");
    out.status.code().unwrap_or(-1)
}

#[test]
fn an_interrupt_leaves_no_partial_output_behind() {
    let dir = tempfile::tempdir().unwrap();
    // write_atomic: a synthetic log is streamed into its temp file.
    let log = dir.path().join("big.ndjson");
    let code = interrupt_when_writing(
        &[
            os("synth"),
            os("-q"),
            os("--size"),
            os("2G"),
            os("-o"),
            log.as_os_str(),
        ],
        dir.path(),
        "-INT",
    );
    assert_eq!(code, 130, "SIGINT exits 130");
    assert!(!log.exists(), "no partial log");
    assert!(
        files_ending(dir.path(), &[".tmp"]).is_empty(),
        "temp files left"
    );

    // convert: the Parquet files are written to temp names, then renamed.
    hvaudit()
        .args(["synth", "-q", "--size", "40M", "-o"])
        .arg(&log)
        .assert()
        .success();
    let out = dir.path().join("parquet");
    let code = interrupt_when_writing(
        &[
            os("convert"),
            os("-q"),
            os("-o"),
            out.as_os_str(),
            log.as_os_str(),
        ],
        dir.path(),
        "-TERM",
    );
    assert_eq!(code, 143, "SIGTERM exits 143");
    let left = files_ending(dir.path(), &[".tmp", ".parquet"]);
    assert!(left.is_empty(), "left behind: {left:?}");
}
