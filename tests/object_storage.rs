//! Logs in object storage, read where they live: an S3-compatible server
//! (moto's, a Python package `scripts/test` installs) started on 127.0.0.1 by
//! these tests, and every command that reads logs pointed at it. A missing
//! server package fails the tests with what to install, never skips them.

use crate::common::hvaudit;
use assert_cmd::Command;
use object_store::aws::{AmazonS3, AmazonS3Builder};
use object_store::path::Path as ObjectPath;
use object_store::{ObjectStore, ObjectStoreExt, PutPayload};
use std::io::{BufRead, Write};
use std::path::{Path, PathBuf};
use std::process::{ChildStdin, Stdio};
use std::sync::{Mutex, OnceLock};

const BUCKET: &str = "logs";

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// The server: its port, and the pipe whose closing (this process ending)
/// stops it.
struct Server {
    port: u16,
    _alive: Mutex<(ChildStdin, std::process::Child)>,
}

fn server() -> &'static Server {
    static SERVER: OnceLock<Server> = OnceLock::new();
    SERVER.get_or_init(|| {
        let port = free_port();
        let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/support/s3_server.py");
        let mut child = std::process::Command::new("python3")
            .arg(script)
            .arg(port.to_string())
            .arg(BUCKET)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .expect("python3 runs the S3 test server");
        let mut ready = String::new();
        std::io::BufReader::new(child.stdout.take().unwrap())
            .read_line(&mut ready)
            .unwrap();
        assert_eq!(
            ready.trim(),
            "ready",
            "the S3 test server did not start: install it with \
             run the tests with scripts/test, which installs it in a virtual environment"
        );
        Server {
            port,
            _alive: Mutex::new((child.stdin.take().unwrap(), child)),
        }
    })
}

fn endpoint() -> String {
    format!("http://127.0.0.1:{}", server().port)
}

/// The store, as a test writes to it (not through hvaudit).
fn store() -> AmazonS3 {
    AmazonS3Builder::new()
        .with_endpoint(endpoint())
        .with_allow_http(true)
        .with_bucket_name(BUCKET)
        .with_region("us-east-1")
        .with_access_key_id("test")
        .with_secret_access_key("test")
        .build()
        .unwrap()
}

fn runtime() -> &'static tokio::runtime::Runtime {
    static RT: OnceLock<tokio::runtime::Runtime> = OnceLock::new();
    RT.get_or_init(|| tokio::runtime::Runtime::new().unwrap())
}

fn put(key: &str, bytes: Vec<u8>) {
    runtime()
        .block_on(store().put(&ObjectPath::from(key), PutPayload::from(bytes)))
        .unwrap();
}

fn keys_under(prefix: &str) -> Vec<String> {
    use futures::TryStreamExt;
    let listed: Vec<_> = runtime()
        .block_on(
            store()
                .list(Some(&ObjectPath::from(prefix)))
                .try_collect::<Vec<_>>(),
        )
        .unwrap();
    listed.into_iter().map(|m| m.location.to_string()).collect()
}

/// Upload every file of `dir` under `prefix/`, same names.
fn upload_dir(dir: &Path, prefix: &str) {
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        let name = path.file_name().unwrap().to_str().unwrap().to_string();
        put(&format!("{prefix}/{name}"), std::fs::read(&path).unwrap());
    }
}

/// `hvaudit()` with the store's credentials and endpoint in its
/// environment, and no way to reach an instance-metadata service.
fn with_store() -> Command {
    let mut cmd = hvaudit();
    cmd.envs(store_env());
    cmd
}

/// The store's credentials, region and endpoint as the AWS variables, with
/// the instance-metadata service turned off.
fn store_env() -> [(&'static str, String); 6] {
    [
        ("AWS_ACCESS_KEY_ID", "test".into()),
        ("AWS_SECRET_ACCESS_KEY", "test".into()),
        ("AWS_REGION", "us-east-1".into()),
        ("AWS_ENDPOINT_URL", endpoint()),
        ("AWS_ALLOW_HTTP", "true".into()),
        ("AWS_EC2_METADATA_DISABLED", "true".into()),
    ]
}

/// A log split in three, plain, gzip and zstd, plus a shipper's file with
/// no extension and a file that is no log.
fn mixed_dir(seed: u64) -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    let log = crate::common::synth_log(seed, 600_000, 0.05);
    let text = String::from_utf8(log).unwrap();
    let lines: Vec<&str> = text.lines().collect();
    let part = |i: usize| -> Vec<u8> {
        let n = lines.len();
        let chunk: Vec<&str> = lines[i * n / 4..(i + 1) * n / 4].to_vec();
        (chunk.join("\n") + "\n").into_bytes()
    };
    std::fs::write(dir.path().join("part-1.ndjson"), part(0)).unwrap();
    let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
    gz.write_all(&part(1)).unwrap();
    std::fs::write(dir.path().join("part-2.ndjson.gz"), gz.finish().unwrap()).unwrap();
    std::fs::write(
        dir.path().join("part-3.ndjson.zst"),
        zstd::encode_all(&part(2)[..], 3).unwrap(),
    )
    .unwrap();
    std::fs::write(dir.path().join("current"), part(3)).unwrap();
    std::fs::write(dir.path().join("README.txt"), "not a log\n").unwrap();
    dir
}

/// The JSON report of `args`, with the local directory's name written as
/// the object prefix it was uploaded to.
fn report(args: &[&str], local: Option<(&Path, &str)>) -> serde_json::Value {
    let out = with_store()
        .args(["audit", "-q", "--format", "json", "--fail-on", "none"])
        .args(args)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let mut text = String::from_utf8(out.stdout).unwrap();
    if let Some((dir, url)) = local {
        text = text.replace(dir.to_str().unwrap(), url);
    }
    serde_json::from_str(&text).unwrap()
}

fn findings(report: &serde_json::Value) -> &serde_json::Value {
    &report["findings"]
}

#[test]
fn an_s3_prefix_of_mixed_logs_audits_as_the_same_files_on_disk() {
    let dir = mixed_dir(7);
    upload_dir(dir.path(), "mixed");
    let url = format!("s3://{BUCKET}/mixed");
    let local = report(&[dir.path().to_str().unwrap()], Some((dir.path(), &url)));
    for remote_arg in [format!("{url}/"), url.clone()] {
        let remote = report(&[&remote_arg], None);
        assert_eq!(findings(&local), findings(&remote), "{remote_arg}");
        assert_eq!(local["inputs"], remote["inputs"], "{remote_arg}");
        assert_eq!(local["counts"], remote["counts"], "{remote_arg}");
    }
    assert!(
        findings(&local).as_array().unwrap().len() > 10,
        "the log has findings to compare"
    );
    // The same through sql.
    let query = "SELECT src_file, count(*) AS n, sum(redeliveries) AS r FROM events \
                 GROUP BY src_file ORDER BY src_file";
    let sql = |arg: &str| {
        let out = with_store()
            .args(["sql", "-q", "--format", "csv", "-e", query, arg])
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8(out.stdout).unwrap()
    };
    let local_rows = sql(dir.path().to_str().unwrap()).replace(dir.path().to_str().unwrap(), &url);
    assert_eq!(local_rows, sql(&format!("{url}/")));
    assert_eq!(local_rows.lines().count(), 5, "{local_rows}");
}

#[test]
fn a_glob_on_keys_takes_the_matching_objects_only() {
    let dir = mixed_dir(8);
    upload_dir(dir.path(), "globbed");
    let remote = report(&[&format!("s3://{BUCKET}/globbed/part-*.ndjson*")], None);
    let inputs: Vec<&str> = remote["inputs"]
        .as_array()
        .unwrap()
        .iter()
        .map(|i| i["path"].as_str().unwrap())
        .collect();
    assert_eq!(
        inputs,
        [
            "s3://logs/globbed/part-1.ndjson",
            "s3://logs/globbed/part-2.ndjson.gz",
            "s3://logs/globbed/part-3.ndjson.zst"
        ]
    );
}

#[test]
fn convert_to_s3_then_audit_in_place_from_s3_equals_the_local_run() {
    let dir = mixed_dir(9);
    let out = tempfile::tempdir().unwrap();
    let local_parquet = out.path().join("parquet");
    with_store()
        .args(["convert", "-q", "-o"])
        .arg(&local_parquet)
        .arg(dir.path())
        .assert()
        .success();
    let url = format!("s3://{BUCKET}/converted/");
    with_store()
        .args(["convert", "-q", "-o", &url])
        .arg(dir.path())
        .assert()
        .success();
    // A second run of the same shard into the prefix is refused, as for a
    // directory.
    let again = with_store()
        .args(["convert", "-q", "-o", &url])
        .arg(dir.path())
        .output()
        .unwrap();
    assert_eq!(again.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&again.stderr).contains("already holds a convert run"));
    let keys = keys_under("converted");
    assert!(
        keys.iter().any(|k| k.starts_with("converted/events/day="))
            && keys.iter().any(|k| k.starts_with("converted/evidence/")),
        "{keys:?}"
    );
    let local = report(&["--in-place", local_parquet.to_str().unwrap()], None);
    for args in [vec!["--in-place", url.as_str()], vec![url.as_str()]] {
        let remote = report(&args, None);
        assert_eq!(findings(&local), findings(&remote), "{args:?}");
        assert_eq!(local["counts"], remote["counts"], "{args:?}");
    }
}

#[test]
fn an_interrupted_upload_leaves_no_object() {
    // Six MiB: a first 5 MiB part is on its way when the writer stops.
    let written = || {
        let mut writer = hvaudit::object_storage::ObjectWriter::create_with(
            std::sync::Arc::new(store()),
            "partial/events.parquet",
            "s3://logs/partial/events.parquet",
        )
        .unwrap();
        writer.write_all(&vec![7u8; 6 << 20]).unwrap();
        writer
    };
    drop(written());
    assert!(keys_under("partial").is_empty());
    written().finish().unwrap();
    assert_eq!(keys_under("partial"), ["partial/events.parquet"]);
}

fn fails_with(cmd: &mut Command, words: &str) -> String {
    let out = cmd.output().unwrap();
    let err = String::from_utf8_lossy(&out.stderr).into_owned();
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(err.contains(words), "wanted {words:?} in: {err}");
    err
}

/// An environment variable to set, or (None) to unset.
type EnvChange<'a> = (&'a str, Option<&'a str>);

/// (object, environment changes, words of the message) per error class.
#[test]
fn each_kind_of_store_error_exits_2_saying_what_to_do() {
    put("errors/log.ndjson", b"{}\n".to_vec());
    put("errors/notes/readme.txt", b"not a log\n".to_vec());
    let log = "s3://logs/errors/log.ndjson";
    let cases: [(&str, &[EnvChange], &str); 7] = [
        (
            "s3://no-such-bucket/x.ndjson",
            &[],
            "the bucket does not exist",
        ),
        ("s3://logs/errors/missing.ndjson", &[], "no such object"),
        ("s3://logs/errors/notes/", &[], "holds no log file"),
        (
            log,
            &[("AWS_SKIP_SIGNATURE", Some("true"))],
            "access denied",
        ),
        (
            log,
            &[("AWS_ENDPOINT_URL", Some("http://127.0.0.1:9"))],
            "cannot reach the endpoint",
        ),
        (
            log,
            &[("AWS_ACCESS_KEY_ID", None), ("AWS_SECRET_ACCESS_KEY", None)],
            "no credentials found",
        ),
        (
            log,
            &[("AWS_PROFILE", Some("nobody"))],
            "AWS_PROFILE names the profile",
        ),
    ];
    for (object, env, words) in cases {
        let mut cmd = with_store();
        cmd.args(["audit", object]);
        for (key, value) in env {
            match value {
                Some(v) => cmd.env(key, v),
                None => cmd.env_remove(key),
            };
        }
        let err = fails_with(&mut cmd, words);
        if words == "cannot reach the endpoint" {
            assert!(err.contains("--endpoint"), "{err}");
        }
    }
}

#[test]
fn credentials_come_from_the_profile_files_and_are_never_shown() {
    put("profile/log.ndjson", std::fs::read(sample_log()).unwrap());
    let home = tempfile::tempdir().unwrap();
    std::fs::create_dir(home.path().join(".aws")).unwrap();
    std::fs::write(
        home.path().join(".aws/credentials"),
        "[ops]\naws_access_key_id = opskey\naws_secret_access_key = s3cr3t-never-shown\n",
    )
    .unwrap();
    let out = with_store()
        .env("HOME", home.path())
        .env("AWS_PROFILE", "ops")
        .env_remove("AWS_ACCESS_KEY_ID")
        .env_remove("AWS_SECRET_ACCESS_KEY")
        .args(["audit", "--format", "json", "--fail-on", "none"])
        .arg("s3://logs/profile/log.ndjson")
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    for text in [&out.stdout, &out.stderr] {
        assert!(!String::from_utf8_lossy(text).contains("s3cr3t"));
    }
    // An error names the object, not the secret.
    let out = with_store()
        .env("AWS_SECRET_ACCESS_KEY", "s3cr3t-never-shown")
        .env("AWS_SKIP_SIGNATURE", "true")
        .args(["audit", "s3://logs/profile/log.ndjson"])
        .output()
        .unwrap();
    assert!(!String::from_utf8_lossy(&out.stderr).contains("s3cr3t"));
}

fn sample_log() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("samples/incident/harmovela-0.2.ndjson")
}

#[test]
fn a_single_object_over_http_reads_like_the_file() {
    let sample = sample_log();
    runtime()
        .block_on(async {
            let payload = PutPayload::from(std::fs::read(&sample).unwrap());
            let mut attributes = object_store::Attributes::new();
            attributes.insert(
                object_store::Attribute::ContentType,
                "application/x-ndjson".into(),
            );
            store()
                .put_opts(
                    &ObjectPath::from("public/runtime.ndjson"),
                    payload,
                    object_store::PutOptions {
                        attributes,
                        ..Default::default()
                    },
                )
                .await
        })
        .unwrap();
    // Anonymous reads need the object public (moto keeps S3's ACLs).
    let acl = std::process::Command::new("python3")
        .args([
            "-c",
            "import sys, boto3; boto3.client('s3', endpoint_url=sys.argv[1], \
             aws_access_key_id='t', aws_secret_access_key='t', region_name='us-east-1')\
             .put_object_acl(Bucket='logs', Key='public/runtime.ndjson', ACL='public-read')",
            &endpoint(),
        ])
        .status()
        .unwrap();
    assert!(acl.success());
    let url = format!("{}/logs/public/runtime.ndjson", endpoint());
    let local = report(&[sample.to_str().unwrap()], Some((&sample, &url)));
    let with_user = url.replace("http://", "http://reader:pa55word@");
    let remote = report(&[&with_user], None);
    assert_eq!(findings(&local), findings(&remote));
    assert!(!remote.to_string().contains("pa55word"));
}

#[test]
fn no_path_reads_a_pipe_and_in_place_refuses_a_stream() {
    let sample = sample_log();
    let piped = with_store()
        .args(["audit", "-q", "--format", "json", "--fail-on", "none"])
        .write_stdin(std::fs::read(&sample).unwrap())
        .output()
        .unwrap();
    assert!(
        piped.status.success(),
        "{}",
        String::from_utf8_lossy(&piped.stderr)
    );
    let piped: serde_json::Value = serde_json::from_slice(&piped.stdout).unwrap();
    let dash = with_store()
        .args(["audit", "-q", "--format", "json", "--fail-on", "none", "-"])
        .write_stdin(std::fs::read(&sample).unwrap())
        .output()
        .unwrap();
    let dash: serde_json::Value = serde_json::from_slice(&dash.stdout).unwrap();
    assert_eq!(findings(&piped), findings(&dash));
    assert!(!findings(&piped).as_array().unwrap().is_empty());
    let err = fails_with(
        with_store()
            .args(["audit", "--in-place", "-"])
            .write_stdin(std::fs::read(&sample).unwrap()),
        "convert it first",
    );
    assert!(err.contains("hvaudit convert -"), "{err}");
}

#[cfg(feature = "cluster")]
#[test]
fn a_cluster_reads_its_parquet_from_s3() {
    let dir = mixed_dir(10);
    let url = format!("s3://{BUCKET}/for-cluster/");
    with_store()
        .args(["convert", "-q", "-o", &url])
        .arg(dir.path())
        .assert()
        .success();
    let local = report(&["--in-place", &url], None);
    let cluster = Cluster::start();
    let remote = report(&["--cluster", &cluster.url, "--timeout", "5m", &url], None);
    assert_eq!(findings(&local), findings(&remote));
    assert_eq!(local["counts"], remote["counts"]);
    // The views the executors wrote are gone with the audit.
    let left: Vec<String> = keys_under("for-cluster")
        .into_iter()
        .filter(|k| k.contains(".hvaudit-") && !k.ends_with(".mac"))
        .collect();
    assert!(left.is_empty(), "{left:?}");
}

/// A scheduler and two executors as processes with the store's settings
/// in their environment; killed when dropped.
#[cfg(feature = "cluster")]
struct Cluster {
    url: String,
    children: Vec<std::process::Child>,
}

#[cfg(feature = "cluster")]
impl Cluster {
    fn start() -> Cluster {
        let spawn = |args: Vec<String>| {
            let mut cmd = crate::common::hvaudit_process();
            cmd.args(&args)
                .envs(store_env())
                .stdout(Stdio::null())
                .stderr(Stdio::null());
            cmd.spawn().unwrap()
        };
        let port = free_port();
        let mut children = vec![spawn(vec![
            "scheduler".into(),
            "--bind".into(),
            format!("127.0.0.1:{port}"),
        ])];
        for _ in 0..2 {
            let work = tempfile::tempdir().unwrap().keep();
            children.push(spawn(vec![
                "executor".into(),
                "--scheduler".into(),
                format!("127.0.0.1:{port}"),
                "--port".into(),
                free_port().to_string(),
                "--grpc-port".into(),
                free_port().to_string(),
                "--vcores".into(),
                "1".into(),
                "--work-dir".into(),
                work.to_str().unwrap().into(),
            ]));
        }
        // The executors register within a few heartbeats.
        std::thread::sleep(std::time::Duration::from_secs(4));
        Cluster {
            url: format!("df://127.0.0.1:{port}"),
            children,
        }
    }
}

#[cfg(feature = "cluster")]
impl Drop for Cluster {
    fn drop(&mut self) {
        for c in &mut self.children {
            let _ = c.kill();
            let _ = c.wait();
        }
    }
}
