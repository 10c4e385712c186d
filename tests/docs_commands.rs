//! Every shell command that README.md and docs/*.md show runs, so the
//! pages stay true.
//!
//! The convention, for whoever edits a page:
//!
//! - Every fenced ```sh block is read. A block that cannot run in a test
//!   (object URLs, a cluster's addresses, an install, a cron job over
//!   system paths) has `<!-- not run: REASON -->` on the line just before
//!   its fence; nothing of it runs. The marker is an HTML comment, so the
//!   rendered page does not show it.
//! - In every other block, each line (`\` continuations joined, `#`
//!   comments and blank lines dropped) is an `hvaudit ...` command, or
//!   `cargo run -- ...`, which runs the built binary the same way. A line
//!   of any other form fails the test: make it a command, or mark its
//!   block. After ` && ` a line may run another program on what hvaudit
//!   wrote (`man -l hvaudit.1`); that part does not run.
//! - The lines of a block run in order, through `sh`, in a fresh
//!   directory of their own, so a line may read what an earlier line of
//!   its block wrote. The directory holds what the pages take the reader
//!   to have: `samples/` and `queries/` (the repository's), `logs/` (the
//!   sample incident's two files, zstd-compressed and named for their
//!   day, `2026-07-14-*.ndjson.zst`, as a shipper names them),
//!   `questions.sql` (the pages' ```sql blocks) and a `HOME` of its own.
//!   The parent directory of a `> FILE` target is made first.
//! - A command passes when it exits 0 or 1 (clean, or findings; not 2, a
//!   usage or input error, nor a panic) within the usual timeout, and
//!   every file it names with `-o`, `--dir` or `>` exists afterwards.
//!
//! The run environment is the tests' scrubbed one (`scrubbed()`), with the
//! built binary first on `PATH` as `hvaudit`.

use crate::common::{TIMEOUT, bin, scrubbed};
use std::path::{Path, PathBuf};

/// At least this many commands run; the test cannot pass by skipping.
const AT_LEAST: usize = 25;

const MARKER: &str = "<!-- not run:";

fn root() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

/// README.md and every page of docs/, by name.
fn pages() -> Vec<PathBuf> {
    let mut pages = vec![root().join("README.md")];
    let mut docs: Vec<PathBuf> = std::fs::read_dir(root().join("docs"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|x| x == "md"))
        .collect();
    docs.sort();
    pages.extend(docs);
    pages
}

/// A fenced block of a page: its fence's line (1-based), its language,
/// the reason it is not run (the marker before it), and its lines with
/// their numbers.
struct Block {
    fence: usize,
    lang: String,
    not_run: Option<String>,
    lines: Vec<(usize, String)>,
}

fn blocks(text: &str) -> Vec<Block> {
    let mut blocks = Vec::new();
    let mut open: Option<Block> = None;
    let mut previous = "";
    for (i, line) in text.lines().enumerate() {
        let n = i + 1;
        let fence = line.trim_start().starts_with("```");
        match &mut open {
            Some(block) if fence => {
                blocks.push(std::mem::replace(block, empty_block()));
                open = None;
            }
            Some(block) => block.lines.push((n, line.to_string())),
            None if fence => {
                let not_run = previous
                    .trim()
                    .strip_prefix(MARKER)
                    .map(|r| r.trim_end_matches("-->").trim().to_string());
                open = Some(Block {
                    fence: n,
                    lang: line.trim_start().trim_start_matches('`').trim().to_string(),
                    not_run,
                    lines: Vec::new(),
                });
            }
            None => assert!(
                !previous.trim().starts_with(MARKER),
                "line {}: a not-run marker must stand on the line just before a fence",
                n - 1
            ),
        }
        previous = line;
    }
    assert!(open.is_none(), "a fence is not closed");
    blocks
}

fn empty_block() -> Block {
    Block {
        fence: 0,
        lang: String::new(),
        not_run: None,
        lines: Vec::new(),
    }
}

/// A shell line without its comment: a `#` that starts a word outside
/// quotes starts the comment.
fn strip_comment(line: &str) -> &str {
    let mut quote: Option<char> = None;
    let mut at_word_start = true;
    for (i, c) in line.char_indices() {
        match quote {
            Some(q) if c == q => quote = None,
            Some(_) => {}
            None if c == '\'' || c == '"' => quote = Some(c),
            None if c == '#' && at_word_start => return &line[..i],
            None => {}
        }
        at_word_start = quote.is_none() && c.is_whitespace();
    }
    line
}

/// The block's commands: continuations joined, comments and blank lines
/// dropped; each with the page line it starts on.
fn commands(block: &Block) -> Vec<(usize, String)> {
    let mut out = Vec::new();
    let mut pending: Option<(usize, String)> = None;
    for (n, line) in &block.lines {
        let (start, mut text) = pending.take().unwrap_or((*n, String::new()));
        if let Some(part) = line.trim_end().strip_suffix('\\') {
            text.push_str(part);
            text.push(' ');
            pending = Some((start, text));
            continue;
        }
        text.push_str(line);
        let text = strip_comment(&text).trim().to_string();
        if !text.is_empty() {
            out.push((start, text));
        }
    }
    assert!(pending.is_none(), "a block ends in a continuation");
    out
}

/// The part of a command line that runs: up to ` && `, with
/// `cargo run -- ` made `hvaudit `; None when it is not an hvaudit
/// command.
fn runnable(line: &str) -> Option<String> {
    let first = line.split(" && ").next().unwrap_or_default().trim();
    if let Some(rest) = first.strip_prefix("cargo run -- ") {
        return Some(format!("hvaudit {rest}"));
    }
    first.starts_with("hvaudit ").then(|| first.to_string())
}

/// The files a command says it writes: the word after `-o`, `--output`,
/// `--dir` or `>` (a `-` is standard output).
fn written(command: &str) -> Vec<String> {
    let words: Vec<&str> = command.split_whitespace().collect();
    words
        .windows(2)
        .filter(|w| matches!(w[0], "-o" | "--output" | "--dir" | ">"))
        .map(|w| w[1].trim_matches(|c| c == '\'' || c == '"').to_string())
        .filter(|w| w != "-")
        .collect()
}

/// A target as the shell in the sandbox names it (`~/` is its HOME).
fn in_sandbox(sandbox: &Path, path: &str) -> PathBuf {
    match path.strip_prefix("~/") {
        Some(rest) => sandbox.join("home").join(rest),
        None => sandbox.join(path),
    }
}

/// The statements of every ```sql block of the pages, one file.
fn questions() -> String {
    let mut sql = String::new();
    for page in pages() {
        let text = std::fs::read_to_string(&page).unwrap();
        for block in blocks(&text).into_iter().filter(|b| b.lang == "sql") {
            for (_, line) in &block.lines {
                sql.push_str(line);
                sql.push('\n');
            }
        }
    }
    sql
}

/// A fresh directory for one block, holding what the pages take the
/// reader to have; and the directory that puts the binary on PATH.
fn sandbox(questions: &str) -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    for name in ["samples", "queries"] {
        std::os::unix::fs::symlink(root().join(name), d.join(name)).unwrap();
    }
    std::fs::create_dir(d.join("logs")).unwrap();
    for name in ["aep-0.1", "harmovela-0.2"] {
        let plain = std::fs::read(root().join(format!("samples/incident/{name}.ndjson"))).unwrap();
        let packed = zstd::encode_all(plain.as_slice(), 3).unwrap();
        std::fs::write(d.join(format!("logs/2026-07-14-{name}.ndjson.zst")), packed).unwrap();
    }
    std::fs::write(d.join("questions.sql"), questions).unwrap();
    std::fs::create_dir(d.join("home")).unwrap();
    let bin_dir = d.join(".bin");
    std::fs::create_dir(&bin_dir).unwrap();
    std::os::unix::fs::symlink(bin(), bin_dir.join("hvaudit")).unwrap();
    dir
}

fn run(sandbox: &Path, command: &str) -> std::process::Output {
    for target in written(command) {
        if command.contains(&format!("> {target}")) {
            let parent = in_sandbox(sandbox, &target);
            std::fs::create_dir_all(parent.parent().unwrap()).unwrap();
        }
    }
    let path = std::env::var_os("PATH").unwrap_or_default();
    let mut paths = vec![sandbox.join(".bin")];
    paths.extend(std::env::split_paths(&path));
    let mut cmd = scrubbed("sh");
    cmd.arg("-c")
        .arg(command)
        .current_dir(sandbox)
        .env("PATH", std::env::join_paths(paths).unwrap())
        .env("HOME", sandbox.join("home"));
    assert_cmd::Command::from_std(cmd)
        .timeout(TIMEOUT)
        .write_stdin(Vec::new())
        .output()
        .unwrap()
}

#[test]
fn every_shell_command_in_the_docs_runs() {
    let questions = questions();
    assert!(questions.contains("SELECT"), "no ```sql block found");
    let mut ran = 0;
    let mut not_run = Vec::new();
    let mut failures = Vec::new();
    for page in pages() {
        let name = page.strip_prefix(root()).unwrap().display().to_string();
        let text = std::fs::read_to_string(&page).unwrap();
        for block in blocks(&text).into_iter().filter(|b| b.lang == "sh") {
            if let Some(reason) = &block.not_run {
                assert!(
                    !reason.is_empty(),
                    "{name}:{}: a not-run marker needs its reason",
                    block.fence
                );
                not_run.push(format!("{name}:{}: {reason}", block.fence));
                continue;
            }
            let dir = sandbox(&questions);
            for (n, line) in commands(&block) {
                let Some(command) = runnable(&line) else {
                    panic!(
                        "{name}:{n}: `{line}` is not an hvaudit command; make it one, or mark its \
                         block with {MARKER} REASON --> on the line before the fence"
                    );
                };
                let out = run(dir.path(), &command);
                ran += 1;
                let stderr = String::from_utf8_lossy(&out.stderr);
                let code = out.status.code();
                if !matches!(code, Some(0 | 1)) || stderr.contains("panicked") {
                    failures.push(format!("{name}:{n}: `{command}` exited {code:?}\n{stderr}"));
                    continue;
                }
                for target in written(&command) {
                    if !in_sandbox(dir.path(), &target).exists() {
                        failures.push(format!("{name}:{n}: `{command}` wrote no {target}"));
                    }
                }
            }
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n\n"));
    eprintln!(
        "{ran} commands ran; blocks not run:\n  {}",
        not_run.join("\n  ")
    );
    assert!(
        ran >= AT_LEAST,
        "only {ran} commands ran, fewer than {AT_LEAST}"
    );
}

#[test]
fn comments_end_outside_quotes_only() {
    assert_eq!(
        strip_comment("hvaudit sql logs/ -e \"SELECT 1 # no\"   # yes"),
        "hvaudit sql logs/ -e \"SELECT 1 # no\"   "
    );
    assert_eq!(strip_comment("# whole line"), "");
    assert_eq!(
        strip_comment("x report.html#filter=critical"),
        "x report.html#filter=critical"
    );
}

#[test]
fn markers_continuations_and_cargo_run_are_read() {
    let page = "text\n<!-- not run: needs a store -->\n```sh\nhvaudit audit s3://b/\n```\n\n\
                ```sh\ncargo run -- audit samples/incident\nhvaudit audit logs/ \\\n    -o r.json  # c\n```\n";
    let b = blocks(page);
    assert_eq!(b.len(), 2);
    assert_eq!(b[0].not_run.as_deref(), Some("needs a store"));
    assert_eq!(b[1].not_run, None);
    let c = commands(&b[1]);
    assert_eq!(c[0], (8, "cargo run -- audit samples/incident".to_string()));
    assert_eq!(c[1].0, 9);
    assert_eq!(
        runnable(&c[0].1).as_deref(),
        Some("hvaudit audit samples/incident")
    );
    assert_eq!(written(&c[1].1), ["r.json"]);
    assert_eq!(runnable("man -l x.1"), None);
    assert_eq!(
        runnable("hvaudit man > hvaudit.1 && man -l hvaudit.1").as_deref(),
        Some("hvaudit man > hvaudit.1")
    );
}
