//! One convert per shard and directory: a second run of a shard started
//! while the first still writes is refused as one started after it, with
//! the same message.

use crate::common::{hvaudit, hvaudit_process, mkfifo};
use std::io::Write;
use std::path::Path;
use std::process::Stdio;
use std::time::{Duration, Instant};

fn sample(name: &str) -> std::path::PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("samples/incident")
        .join(name)
}

/// Wait until a process holds the lock on `lock` (our own try fails).
fn wait_until_locked(lock: &Path) {
    let started = Instant::now();
    loop {
        if let Ok(file) = std::fs::File::open(lock) {
            match file.try_lock() {
                Err(std::fs::TryLockError::WouldBlock) => return,
                Ok(()) => drop(file.unlock()),
                Err(e) => panic!("cannot try the lock: {e:?}"),
            }
        }
        assert!(
            started.elapsed() < Duration::from_secs(120),
            "the first convert never locked {lock:?}"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}

#[test]
fn two_converts_of_one_shard_at_once_give_one_success_and_one_refusal() {
    let dir = tempfile::tempdir().unwrap();
    let (out, fifo) = (dir.path().join("parquet"), dir.path().join("log.fifo"));
    mkfifo(&fifo);
    // The first reads a pipe that stays open: it holds the shard while
    // the second starts.
    let first = hvaudit_process()
        .args(["-q", "convert"])
        .arg(&fifo)
        .arg("-o")
        .arg(&out)
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut pipe = std::fs::OpenOptions::new().write(true).open(&fifo).unwrap();
    let log = std::fs::read(sample("harmovela-0.2.ndjson")).unwrap();
    let (head, tail) = log.split_at(log.len() / 2);
    pipe.write_all(head).unwrap();
    wait_until_locked(&out.join(".hvaudit.convert-shard-0.lock"));
    let second = hvaudit()
        .args(["-q", "convert"])
        .arg(sample("aep-0.1.ndjson"))
        .arg("-o")
        .arg(&out)
        .output()
        .unwrap();
    pipe.write_all(tail).unwrap();
    drop(pipe);
    let first = first.wait_with_output().unwrap();
    assert_eq!(first.status.code(), Some(0), "{first:?}");
    assert_eq!(second.status.code(), Some(2), "{second:?}");
    // Started after the first ended, a third gets the very same words.
    let third = hvaudit()
        .args(["-q", "convert"])
        .arg(sample("aep-0.1.ndjson"))
        .arg("-o")
        .arg(&out)
        .output()
        .unwrap();
    assert_eq!(third.status.code(), Some(2), "{third:?}");
    let said = String::from_utf8(second.stderr).unwrap();
    assert!(
        said.contains("already holds a convert run of --shard 0") && said.contains("in use: 0)"),
        "{said}"
    );
    assert_eq!(said, String::from_utf8(third.stderr).unwrap());
    // Another shard may fill the directory meanwhile, and the directory
    // audits as the one run it holds per shard.
    let other = hvaudit()
        .args(["-q", "convert"])
        .arg(sample("aep-0.1.ndjson"))
        .args(["--shard", "1", "-o"])
        .arg(&out)
        .output()
        .unwrap();
    assert_eq!(other.status.code(), Some(0), "{other:?}");
    let audit = hvaudit()
        .args(["-q", "audit", "--fail-on", "none"])
        .arg(&out)
        .output()
        .unwrap();
    assert_eq!(audit.status.code(), Some(0), "{audit:?}");
}

#[test]
fn a_killed_convert_leaves_no_lock_behind() {
    let dir = tempfile::tempdir().unwrap();
    let (out, fifo) = (dir.path().join("parquet"), dir.path().join("log.fifo"));
    mkfifo(&fifo);
    let mut first = hvaudit_process()
        .args(["-q", "convert"])
        .arg(&fifo)
        .arg("-o")
        .arg(&out)
        .spawn()
        .unwrap();
    let mut pipe = std::fs::OpenOptions::new().write(true).open(&fifo).unwrap();
    pipe.write_all(&std::fs::read(sample("aep-0.1.ndjson")).unwrap())
        .unwrap();
    wait_until_locked(&out.join(".hvaudit.convert-shard-0.lock"));
    first.kill().unwrap();
    first.wait().unwrap();
    drop(pipe);
    let next = hvaudit()
        .args(["-q", "convert"])
        .arg(sample("aep-0.1.ndjson"))
        .arg("-o")
        .arg(&out)
        .output()
        .unwrap();
    assert_eq!(next.status.code(), Some(0), "{next:?}");
}
