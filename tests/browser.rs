//! The HTML report and the replay page in a real browser: headless
//! Chromium (Debian's `chromium`) loads the pages of the bundled incident
//! sample, runs their scripts, and we check the DOM it dumps against the
//! JSON report of the same audit. Severity filters are driven through the
//! page's own `#filter=` hook, which clicks the filter buttons; console
//! errors are read from Chromium's log. The layout is measured by a probe
//! script added to a copy of each page (`probe`), at 1366x900 and with
//! the page's print rules applied. No browser means a failing test, never
//! a skipped one: scripts/test installs it.
//!
//! The pages, their 1366x900 screenshots and their PDFs are kept in
//! `<target dir>/test-artifacts/` (`report.html`, `report-1366x900.png`,
//! `report.pdf`, `replay.html`, `replay-1366x900.png`, `replay.pdf`).

use base64::Engine as _;
use hvaudit::Severity;
use hvaudit::audit::Audit;
use hvaudit::gate::GateOptions;
use hvaudit::ingest::ingest;
use hvaudit::replay::{ReplayFormat, ReplayRequest, Scope};
use hvaudit::report::{Provenance, RenderOptions, ReportFormat, render, render_with};
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
         install it with `apt-get update && apt-get install -y chromium` (scripts/test does as root), \
         or point CHROME at a Chromium or Chrome binary"
    );
}

/// Where the tests keep the pages, the screenshots and the PDFs:
/// `test-artifacts` in the target directory (beside Cargo's `tmp`).
fn artifacts() -> PathBuf {
    let tmp = Path::new(env!("CARGO_TARGET_TMPDIR"));
    let dir = tmp.parent().unwrap_or(tmp).join("test-artifacts");
    std::fs::create_dir_all(&dir).expect("create the artifact directory");
    dir
}

fn sample_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("samples/incident")
}

/// The incident sample audited once: the HTML page on disk and the JSON
/// report of the same run. The page states a command line and a fixed
/// generation time, as the CLI's would.
fn audited() -> &'static (PathBuf, Value) {
    static AUDIT: OnceLock<(PathBuf, Value)> = OnceLock::new();
    AUDIT.get_or_init(|| {
        let cfg = crate::common::audit_config(vec![sample_dir()]);
        let mut report = Audit::new(cfg.clone()).run().expect("the sample audits");
        // The CLI's default gate, so the header has a verdict to show.
        let gate = GateOptions {
            fail_on: Some(Severity::High),
            ..Default::default()
        };
        hvaudit::gate::apply(&mut report, gate);
        let html = artifacts().join("report.html");
        let opts = RenderOptions {
            provenance: Provenance {
                command: ["hvaudit", "audit", "--format", "html", "-o", "report.html"]
                    .into_iter()
                    .chain(["samples/incident"])
                    .map(String::from)
                    .collect(),
                configuration: None,
                generated_at: chrono::DateTime::from_timestamp(1_784_102_400, 0),
            },
            ..Default::default()
        };
        let mut page = Vec::new();
        render_with(&report, ReportFormat::Html, &opts, &mut page).unwrap();
        std::fs::write(&html, page).unwrap();
        let mut json = Vec::new();
        render(&report, ReportFormat::Json, &mut json).unwrap();
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

/// A 1366x900 screenshot of `page` into the artifacts, checked for size
/// and for content (a blank page compresses to a few KB).
fn screenshot(page: &Path, name: &str) -> PathBuf {
    let png = artifacts().join(format!("{name}-1366x900.png"));
    let _ = std::fs::remove_file(&png);
    let run = browse(
        &file_url(page),
        &[
            &format!("--screenshot={}", png.display()),
            "--window-size=1366,900",
        ],
    );
    assert!(run.console().is_empty(), "{}", run.console().join("\n"));
    let bytes = std::fs::read(&png).expect("the screenshot was written");
    assert_eq!(png_size(&bytes), (1366, 900));
    assert!(
        bytes.len() > 40_000,
        "screenshot looks empty: {} bytes",
        bytes.len()
    );
    eprintln!("screenshot: {}", png.display());
    png
}

/// `page` printed to a PDF in the artifacts; its number of pages.
fn print_to_pdf(page: &Path, name: &str) -> usize {
    let pdf = artifacts().join(format!("{name}.pdf"));
    let _ = std::fs::remove_file(&pdf);
    browse(
        &file_url(page),
        &[
            &format!("--print-to-pdf={}", pdf.display()),
            "--no-pdf-header-footer",
        ],
    );
    let bytes = std::fs::read(&pdf).expect("the PDF was written");
    assert!(bytes.starts_with(b"%PDF-"));
    // Page objects: "/Type /Page" not followed by "s" (that is the tree).
    bytes
        .windows(12)
        .filter(|w| w.starts_with(b"/Type /Page") && w[11] != b's')
        .count()
}

#[test]
fn screenshot_and_print_for_a_write_up() {
    let (html, _) = audited();
    screenshot(html, "report");
    let pages = print_to_pdf(html, "report");
    assert!(pages >= 2, "the printed report has {pages} pages");
}

/// The replay of the sample's cancelled parent task, just after it was
/// cancelled, as an HTML page in the artifacts.
fn replayed() -> &'static PathBuf {
    static PAGE: OnceLock<PathBuf> = OnceLock::new();
    PAGE.get_or_init(|| {
        let cfg = crate::common::audit_config(vec![sample_dir()]);
        let ingested =
            ingest(&cfg.reading.inputs, &crate::common::test_reading()).expect("sample ingests");
        let request = ReplayRequest {
            scope: Scope::Task("task_223151fd620b0074".into()),
            at: chrono::DateTime::parse_from_rfc3339("2026-07-14T08:00:08.500Z")
                .ok()
                .map(|t| t.to_utc()),
        };
        let r =
            hvaudit::replay::replay_on(&cfg, &hvaudit::tables::Tables::loaded(ingested), &request)
                .expect("the replay builds");
        let page = artifacts().join("replay.html");
        let mut out = Vec::new();
        hvaudit::replay::render(&r, ReplayFormat::Html, &mut out).unwrap();
        std::fs::write(&page, out).unwrap();
        page
    })
}

/// Measures the layout of `page` in the browser: a copy of it gets a
/// script that writes its measurements into the page (base64 JSON in
/// `#layout-probe`), read back from the dumped DOM. The copy's security
/// policy allows that one inline script; the page is otherwise the same.
/// `print` applies the page's print rules as if on paper `width` pixels
/// wide; the report's timelines are then open, as when printed.
fn probe(page: &Path, width: u32, print: bool) -> Value {
    let html = std::fs::read_to_string(page).unwrap();
    let html = if html.contains("script-src") {
        html
    } else {
        html.replacen(
            "default-src 'none';",
            "default-src 'none'; script-src 'unsafe-inline';",
            1,
        )
    };
    let html = html.replacen("</body>", &format!("<script>{PROBE}</script></body>"), 1);
    let dir = tempfile::tempdir().unwrap();
    let copy = dir.path().join("probe.html");
    std::fs::write(&copy, html).unwrap();
    let mode = if print { "print" } else { "screen" };
    let run = browse(
        &format!("{}?probe={mode}", file_url(&copy)),
        &["--dump-dom", &format!("--window-size={width},900")],
    );
    assert!(run.console().is_empty(), "{}", run.console().join("\n"));
    let at = run
        .stdout
        .find("<pre id=\"layout-probe\">")
        .unwrap_or_else(|| panic!("the probe wrote nothing:\n{}", run.log));
    let rest = &run.stdout[at + "<pre id=\"layout-probe\">".len()..];
    let b64 = &rest[..rest.find('<').unwrap()];
    let json = base64::engine::general_purpose::STANDARD
        .decode(b64.trim())
        .expect("base64 from the probe");
    serde_json::from_slice(&json).expect("JSON from the probe")
}

/// The probe: every word of the rendered text (words end at spaces and
/// after a slash; a browser would also break after a hyphen, in an
/// instant or an id) must lie on one line, every identifier (`.id`, `.seg`, `.sev`) inside its cell,
/// and the page no wider than the window. On the report it also presses
/// "Expand all" and "Collapse all", measuring in between.
const PROBE: &str = r#"(function () {
  "use strict";
  var print = location.search.indexOf("probe=print") !== -1;
  if (print) {
    var css = [];
    Array.prototype.forEach.call(document.styleSheets, function (sheet) {
      Array.prototype.forEach.call(sheet.cssRules, function (rule) {
        if (rule.media && Array.prototype.indexOf.call(rule.media, "print") !== -1) {
          Array.prototype.forEach.call(rule.cssRules, function (r) { css.push(r.cssText); });
        }
      });
    });
    var style = document.createElement("style");
    style.textContent = css.join(" ");
    document.head.appendChild(style);
    window.dispatchEvent(new Event("beforeprint"));
  }
  function shown(el) {
    if (el.closest("script, style, svg, [hidden]")) { return false; }
    var closed = el.closest("details:not([open])");
    return !closed || el.closest("summary") !== null;
  }
  function measure() {
    var broken = [], outside = [], ids = 0;
    var walker = document.createTreeWalker(document.body, NodeFilter.SHOW_TEXT, null);
    var node;
    while ((node = walker.nextNode())) {
      var el = node.parentElement;
      if (!el || !shown(el)) { continue; }
      var re = /[^\s\/]+\/?/g, m;
      while ((m = re.exec(node.data))) {
        var range = document.createRange();
        range.setStart(node, m.index);
        range.setEnd(node, m.index + m[0].length);
        var lines = Array.prototype.filter.call(range.getClientRects(), function (r) { return r.width > 0; });
        if (lines.length > 1) { broken.push(m[0]); }
      }
    }
    Array.prototype.forEach.call(document.querySelectorAll(".id, .seg, .sev"), function (el) {
      if (!shown(el) || el.textContent === "") { return; }
      ids++;
      var cell = el.closest("td, th, dd");
      var box = el.getBoundingClientRect();
      if (el.getClientRects().length > 1 || (cell && box.right > cell.getBoundingClientRect().right + 0.5)) {
        outside.push(el.textContent);
      }
    });
    return { broken: broken.slice(0, 20), outside: outside.slice(0, 20), ids: ids,
      page_width: document.documentElement.scrollWidth, window_width: window.innerWidth };
  }
  function open() { return document.querySelectorAll("details.timeline[open]").length; }
  var out = { first: measure(), timelines: document.querySelectorAll("details.timeline").length, open_first: open() };
  var expand = document.getElementById("expand-all"), collapse = document.getElementById("collapse-all");
  if (expand && collapse) {
    expand.click();
    out.open_expanded = open();
    out.expanded = measure();
    collapse.click();
    out.open_collapsed = open();
  }
  var pre = document.createElement("pre");
  pre.id = "layout-probe";
  pre.textContent = btoa(unescape(encodeURIComponent(JSON.stringify(out))));
  document.body.appendChild(pre);
})();"#;

/// No word split across lines, no identifier out of its cell, no
/// horizontal scrolling, in one measurement of the probe.
fn assert_laid_out(m: &Value, what: &str) {
    assert_eq!(
        m["broken"],
        serde_json::json!([]),
        "{what}: words split across lines"
    );
    assert_eq!(
        m["outside"],
        serde_json::json!([]),
        "{what}: identifiers out of their cell"
    );
    assert!(
        m["ids"].as_u64().unwrap() > 20,
        "{what}: identifiers measured: {m}"
    );
    assert!(
        m["page_width"].as_u64() <= m["window_width"].as_u64(),
        "{what}: the page scrolls sideways: {m}"
    );
}

#[test]
fn report_at_1366x900_breaks_no_identifier_and_folds_timelines() {
    let (html, json) = audited();
    let m = probe(html, 1366, false);
    assert_laid_out(&m["first"], "report");
    let timelines = json["findings"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|f| !f["timeline"].as_array().unwrap().is_empty())
        .count();
    assert!(timelines > 0);
    assert_eq!(m["timelines"], timelines, "{m}");
    assert_eq!(m["open_first"], 0, "timelines start folded: {m}");
    assert_eq!(
        m["open_expanded"], timelines,
        "expand all opens every one: {m}"
    );
    assert_laid_out(&m["expanded"], "report, timelines open");
    assert_eq!(m["open_collapsed"], 0, "collapse all folds every one: {m}");
    // The header: the verdict, the command and the generation time.
    let page = dom("");
    assert!(page.contains("<div id=\"verdict\" class=\"verdict failed\"><b>FAILED: "));
    assert!(page.contains("id=\"generated\">2026-07-15T08:00:00.000Z<"));
    assert!(page.contains("id=\"command\">"));
}

#[test]
fn report_printed_breaks_no_identifier() {
    let (html, _) = audited();
    // A4 landscape less the page's 10 mm margins, at 96 dpi.
    let m = probe(html, 1047, true);
    assert!(m["timelines"].as_u64().unwrap() > 0);
    assert_eq!(
        m["open_first"], m["timelines"],
        "printing opens every timeline"
    );
    assert_laid_out(&m["first"], "printed report");
}

#[test]
fn replay_at_1366x900_and_printed_breaks_no_identifier() {
    let page = replayed();
    assert_laid_out(&probe(page, 1366, false)["first"], "replay");
    // A4 landscape less the page's 10 mm margins, at 96 dpi.
    assert_laid_out(&probe(page, 1047, true)["first"], "printed replay");
    screenshot(page, "replay");
    let pages = print_to_pdf(page, "replay");
    assert!(pages >= 1, "the printed replay has {pages} pages");
}
