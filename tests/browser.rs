//! The HTML report in a real browser: headless Chromium (Debian's
//! `chromium`) loads the report of the bundled incident sample, runs its
//! scripts, and we check the DOM it dumps against the JSON report of the
//! same audit. Severity filters are driven through the page's own
//! `#filter=` hook, which clicks the filter buttons; console errors are
//! read from Chromium's log. No browser means a failing test, never a
//! skipped one: CI installs it (.ci/run).

use hvaudit::audit::{AuditConfig, run_audit};
use hvaudit::report::{Format, render};
use serde_json::Value;
use std::fs::File;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::{Mutex, OnceLock};
use std::time::{Duration, Instant};

/// Longest a page may take before Chromium is killed and the test fails.
const TIMEOUT: Duration = Duration::from_secs(120);

/// The browser: $CHROME, else the first of the usual names on PATH.
fn chromium() -> PathBuf {
    if let Some(p) = std::env::var_os("CHROME") {
        return PathBuf::from(p);
    }
    let path = std::env::var_os("PATH").unwrap_or_default();
    for name in ["chromium", "chromium-browser", "google-chrome"] {
        for dir in std::env::split_paths(&path) {
            let exe = dir.join(name);
            if exe.is_file() {
                return exe;
            }
        }
    }
    panic!(
        "headless Chromium is needed for the browser tests but none was found on PATH: \
         install it with `apt-get update && apt-get install -y chromium` (CI's .ci/run does), \
         or point CHROME at a Chromium or Chrome binary"
    );
}

/// Where the tests write the report, the screenshot and the PDF.
fn artifacts() -> PathBuf {
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join("browser");
    std::fs::create_dir_all(&dir).expect("create the artifact directory");
    dir
}

/// The incident sample audited once: the HTML page on disk and the JSON
/// report of the same run.
fn audited() -> &'static (PathBuf, Value) {
    static AUDIT: OnceLock<(PathBuf, Value)> = OnceLock::new();
    AUDIT.get_or_init(|| {
        let cfg = AuditConfig {
            inputs: vec![Path::new(env!("CARGO_MANIFEST_DIR")).join("samples/incident")],
            ..Default::default()
        };
        let report = run_audit(&cfg).expect("the sample audits");
        let html = artifacts().join("report.html");
        let mut page = Vec::new();
        render(&report, Format::Html, &mut page).unwrap();
        std::fs::write(&html, page).unwrap();
        let mut json = Vec::new();
        render(&report, Format::Json, &mut json).unwrap();
        (html, serde_json::from_slice(&json).unwrap())
    })
}

/// What one Chromium run left: stdout (the DOM for --dump-dom) and its log.
struct Run {
    stdout: String,
    log: String,
}

impl Run {
    /// Console messages the page produced (uncaught errors, CSP refusals,
    /// console.log calls): Chromium logs each as an INFO:CONSOLE line.
    fn console(&self) -> Vec<&str> {
        self.log
            .lines()
            .filter(|l| l.contains(":CONSOLE") || l.contains("Uncaught"))
            .collect()
    }
}

/// Runs headless Chromium on `url` with `extra` flags, one at a time (two
/// cores; each browser is several processes).
fn browse(url: &str, extra: &[&str]) -> Run {
    static ONE_AT_A_TIME: Mutex<()> = Mutex::new(());
    let _turn = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    let exe = chromium();
    let dir = tempfile::tempdir().unwrap();
    let (out, err) = (dir.path().join("stdout"), dir.path().join("stderr"));
    let mut child = Command::new(&exe)
        .args([
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--disable-quic",
            "--no-first-run",
            "--disable-background-networking",
            "--disable-component-update",
            "--disable-sync",
            "--hide-scrollbars",
            "--enable-logging=stderr",
            "--v=0",
        ])
        .arg(format!(
            "--user-data-dir={}",
            dir.path().join("profile").display()
        ))
        .args(extra)
        .arg(url)
        .stdin(Stdio::null())
        .stdout(File::create(&out).unwrap())
        .stderr(File::create(&err).unwrap())
        .spawn()
        .unwrap_or_else(|e| panic!("cannot start {}: {e}", exe.display()));
    let start = Instant::now();
    let status = loop {
        if let Some(status) = child.try_wait().unwrap() {
            break status;
        }
        if start.elapsed() > TIMEOUT {
            let _ = child.kill();
            let _ = child.wait();
            panic!("{} did not finish {url} within {TIMEOUT:?}", exe.display());
        }
        std::thread::sleep(Duration::from_millis(50));
    };
    let run = Run {
        stdout: std::fs::read_to_string(&out).unwrap_or_default(),
        log: std::fs::read_to_string(&err).unwrap_or_default(),
    };
    assert!(
        status.success(),
        "{} failed on {url}: {status}\n{}",
        exe.display(),
        run.log
    );
    run
}

fn file_url(path: &Path) -> String {
    format!("file://{}", path.canonicalize().unwrap().display())
}

/// The dumped DOM of the report at `fragment`, checked for console errors.
fn dom(fragment: &str) -> String {
    let (html, _) = audited();
    let run = browse(&format!("{}{fragment}", file_url(html)), &["--dump-dom"]);
    assert!(
        run.console().is_empty(),
        "the page logged to its console:\n{}",
        run.console().join("\n")
    );
    assert!(
        run.stdout.contains("</html>"),
        "no DOM dumped:\n{}",
        run.log
    );
    run.stdout
}

/// The text of the element with `id` (up to its first child tag).
fn text_of<'a>(dom: &'a str, id: &str) -> &'a str {
    let at = dom
        .find(&format!("id=\"{id}\""))
        .unwrap_or_else(|| panic!("no #{id}"));
    let rest = &dom[at..];
    let rest = &rest[rest.find('>').unwrap() + 1..];
    &rest[..rest.find('<').unwrap()]
}

/// The opening tags of the findings' row groups as the browser left them.
fn groups(dom: &str) -> Vec<&str> {
    dom.match_indices("<tbody class=\"finding-group\"")
        .map(|(i, _)| {
            let tag = &dom[i..];
            &tag[..tag.find('>').unwrap()]
        })
        .collect()
}

/// (severity, shown) for every finding row, in page order.
fn rows(dom: &str) -> Vec<(String, bool)> {
    dom.split("<tbody class=\"finding-group\"")
        .skip(1)
        .map(|part| {
            let shown = !part[..part.find('>').unwrap()].contains("hidden");
            let sev = part
                .split("data-severity=\"")
                .nth(1)
                .and_then(|s| s.split('"').next())
                .unwrap_or_default();
            (sev.to_string(), shown)
        })
        .collect()
}

fn count(v: &Value) -> usize {
    v.as_u64().expect("a count") as usize
}

#[test]
fn page_shows_the_json_reports_counts() {
    let (_, json) = audited();
    let dom = dom("");
    let counts = &json["counts"];
    let total = count(&counts["total"]);
    assert!(total > 0, "the sample has findings");
    assert_eq!(groups(&dom).len(), total);
    assert!(
        rows(&dom).iter().all(|(_, shown)| *shown),
        "all shown at first"
    );
    assert_eq!(text_of(&dom, "shown"), total.to_string());
    assert_eq!(text_of(&dom, "sum-total"), total.to_string());
    assert_eq!(text_of(&dom, "count-total"), total.to_string());
    for (sev, n) in counts["by_severity"].as_object().unwrap() {
        assert_eq!(
            text_of(&dom, &format!("count-{sev}")),
            count(n).to_string(),
            "{sev} button"
        );
        assert_eq!(
            text_of(&dom, &format!("sum-{sev}")),
            count(n).to_string(),
            "{sev} card"
        );
        let rows_of = rows(&dom).iter().filter(|(s, _)| s == sev).count();
        assert_eq!(rows_of, count(n), "{sev} rows");
    }
    // The bar chart: one bar per rule with findings, with its count.
    let by_rule = counts["by_rule"].as_object().unwrap();
    assert_eq!(dom.matches("<g class=\"bar\"").count(), by_rule.len());
    for (rule, n) in by_rule {
        let bar = format!("data-rule=\"{rule}\" data-count=\"{}\"", count(n));
        assert!(dom.contains(&bar), "no bar {bar}");
    }
    // The time chart accounts for every event and every timed finding.
    let events = count(&json["accounting"]["events"]);
    let timed = json["findings"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|f| !f["at"].is_null())
        .count();
    let chart = format!("data-events=\"{events}\" data-findings=\"{timed}\"");
    assert!(dom.contains(&chart), "time chart lacks {chart}");
    assert_eq!(text_of(&dom, "sum-events"), events.to_string());
    assert!(
        dom.contains("<span class=\"ok\">OK</span>"),
        "identity shown"
    );
}

#[test]
fn severity_filter_narrows_the_table() {
    let (_, json) = audited();
    let critical = count(&json["counts"]["by_severity"]["critical"]);
    let high = count(&json["counts"]["by_severity"]["high"]);
    assert!(critical > 0 && critical < count(&json["counts"]["total"]));
    // The hook clicks every other severity's button off.
    let page = dom("#filter=critical");
    let shown: Vec<String> = rows(&page)
        .into_iter()
        .filter(|(_, shown)| *shown)
        .map(|(s, _)| s)
        .collect();
    assert_eq!(
        shown.len(),
        critical,
        "shown rows = the JSON's critical count"
    );
    assert!(shown.iter().all(|s| s == "critical"), "{shown:?}");
    assert_eq!(text_of(&page, "shown"), critical.to_string());
    assert!(page.contains("data-severity=\"critical\" aria-pressed=\"true\""));
    assert!(page.contains("data-severity=\"high\" aria-pressed=\"false\""));
    // Two severities, then a text query on top of them.
    let dom2 = dom("#filter=critical,high");
    assert_eq!(text_of(&dom2, "shown"), (critical + high).to_string());
    let first = &json["findings"][0];
    let fp = first["fingerprint"].as_str().unwrap();
    let dom3 = dom(&format!("#filter=critical,high&q={fp}"));
    assert_eq!(
        text_of(&dom3, "shown"),
        "1",
        "the fingerprint names one finding"
    );
}

#[test]
fn console_errors_are_detected() {
    // The harness itself: a page with a script error is caught.
    let dir = tempfile::tempdir().unwrap();
    let page = dir.path().join("broken.html");
    std::fs::write(
        &page,
        "<!DOCTYPE html><html><body><script>notDefined();</script></body></html>",
    )
    .unwrap();
    let run = browse(&file_url(&page), &["--dump-dom"]);
    assert!(
        run.console().iter().any(|l| l.contains("Uncaught")),
        "an uncaught error went unnoticed:\n{}",
        run.log
    );
}

/// PNG width and height from the IHDR chunk.
fn png_size(bytes: &[u8]) -> (u32, u32) {
    assert_eq!(&bytes[..8], b"\x89PNG\r\n\x1a\n", "not a PNG");
    let be = |b: &[u8]| u32::from_be_bytes([b[0], b[1], b[2], b[3]]);
    (be(&bytes[16..20]), be(&bytes[20..24]))
}

#[test]
fn screenshot_and_print_for_a_write_up() {
    let (html, _) = audited();
    let png = artifacts().join("report.png");
    let _ = std::fs::remove_file(&png);
    let run = browse(
        &file_url(html),
        &[
            &format!("--screenshot={}", png.display()),
            "--window-size=1366,900",
        ],
    );
    assert!(run.console().is_empty(), "{}", run.console().join("\n"));
    let bytes = std::fs::read(&png).expect("the screenshot was written");
    assert_eq!(png_size(&bytes), (1366, 900));
    // A blank page compresses to a few KB; the report's text and charts don't.
    assert!(
        bytes.len() > 40_000,
        "screenshot looks empty: {} bytes",
        bytes.len()
    );
    eprintln!("screenshot: {}", png.display());

    let pdf = artifacts().join("report.pdf");
    let _ = std::fs::remove_file(&pdf);
    browse(
        &file_url(html),
        &[
            &format!("--print-to-pdf={}", pdf.display()),
            "--no-pdf-header-footer",
        ],
    );
    let bytes = std::fs::read(&pdf).expect("the PDF was written");
    assert!(bytes.starts_with(b"%PDF-"));
    // Page objects: "/Type /Page" not followed by "s" (that is the tree).
    let pages = bytes
        .windows(12)
        .filter(|w| w.starts_with(b"/Type /Page") && w[11] != b's')
        .count();
    assert!(pages >= 2, "the printed report has {pages} pages");
}
