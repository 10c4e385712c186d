//! `replay` answers "what was the state of everything under task X at T"
//! on the bundled incident sample, and on small hand-written logs for the
//! edge cases (unknown ids, hostile strings, cycles, sessions).

use crate::common::hvaudit;
use chrono::{DateTime, Utc};
use hvaudit::audit::AuditConfig;
use hvaudit::ingest::ingest;
use hvaudit::replay::{
    EventKind, Replay, ReplayError, ReplayFormat, ReplayRequest, Role, Scope, render, replay_on,
};
use hvaudit::tables::Tables;
use serde_json::{Value, json};
use std::path::{Path, PathBuf};
use std::sync::OnceLock;

fn sample_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("samples/incident")
}

/// The sample ingested once for every test here.
fn sample() -> &'static (AuditConfig, Tables) {
    static SAMPLE: OnceLock<(AuditConfig, Tables)> = OnceLock::new();
    SAMPLE.get_or_init(|| {
        let cfg = crate::common::audit_config(vec![sample_dir()]);
        let ingested =
            ingest(&cfg.reading.inputs, &crate::common::test_reading()).expect("sample ingests");
        (cfg, Tables::loaded(ingested))
    })
}

fn at(s: &str) -> DateTime<Utc> {
    DateTime::parse_from_rfc3339(s).unwrap().with_timezone(&Utc)
}

fn replay_task(task: &str, instant: Option<&str>) -> Replay {
    let (cfg, tables) = sample();
    let request = ReplayRequest {
        scope: Scope::Task(task.into()),
        at: instant.map(at),
    };
    replay_on(cfg, tables, &request).expect("replay builds")
}

fn state<'a>(r: &'a Replay, task: &str) -> &'a str {
    &r.tasks
        .iter()
        .find(|t| t.task_id == task)
        .unwrap_or_else(|| panic!("{task} not in the tree"))
        .state
}

fn render_to(r: &Replay, format: ReplayFormat) -> String {
    let mut out = Vec::new();
    render(r, format, &mut out).unwrap();
    String::from_utf8(out).unwrap()
}

/// In the sample, parent task_223151fd620b0074 is cancelled at 08:00:08.331
/// while its child task_8578ad6138a119f4 keeps running and completes at
/// 08:00:09.139: the case of parent.terminated_early and
/// orphan.cancel_not_cascaded.
const PARENT: &str = "task_223151fd620b0074";
const CHILD: &str = "task_8578ad6138a119f4";

#[test]
fn state_under_a_cancelled_parent_between_two_events() {
    // Between the parent's cancellation and the child's completion.
    let r = replay_task(PARENT, Some("2026-07-14T08:00:08.500Z"));
    let tree: Vec<(&str, usize, Role)> = r
        .tasks
        .iter()
        .map(|t| (t.task_id.as_str(), t.depth, t.role))
        .collect();
    assert_eq!(
        tree,
        vec![(PARENT, 0, Role::Focus), (CHILD, 1, Role::Descendant)]
    );
    assert_eq!(state(&r, PARENT), "cancelled");
    assert_eq!(state(&r, CHILD), "progress", "the child was still at work");
    let child = &r.tasks[1];
    let by = child.state_event.as_ref().unwrap();
    assert_eq!((by.event_type.as_str(), by.line), ("task.progress", 49));
    assert!(by.file.ends_with("harmovela-0.2.ndjson"));
    assert!(!r.instant_is_end);
    assert_eq!(r.instant, Some(at("2026-07-14T08:00:08.500Z")));

    // The timeline: every event of both tasks by time, the child's
    // completion after the instant.
    let types: Vec<&str> = r.timeline.iter().map(|e| e.event_type.as_str()).collect();
    assert_eq!(types.first(), Some(&"task.submitted"));
    assert_eq!(types.len(), 10);
    let after: Vec<&str> = r
        .timeline
        .iter()
        .filter(|e| e.after_instant)
        .map(|e| e.event_type.as_str())
        .collect();
    assert_eq!(after, vec!["task.completed"]);
    assert!(
        r.timeline
            .windows(2)
            .all(|w| (w[0].at, w[0].seq) <= (w[1].at, w[1].seq))
    );

    // The findings touching the tree are marked on the events they cite.
    let rules: Vec<&str> = r.findings.iter().map(|f| f.rule.as_str()).collect();
    assert!(rules.contains(&"parent.terminated_early"), "{rules:?}");
    assert!(rules.contains(&"orphan.cancel_not_cascaded"), "{rules:?}");
    let cancelled = r
        .timeline
        .iter()
        .find(|e| e.event_type == "task.cancelled" && e.task_id.as_deref() == Some(PARENT))
        .unwrap();
    let marked: Vec<&str> = cancelled
        .findings
        .iter()
        .map(|i| r.findings[*i].rule.as_str())
        .collect();
    assert!(marked.contains(&"parent.terminated_early"), "{marked:?}");
    assert!(
        !r.tasks[0].findings.is_empty(),
        "the parent row names its findings"
    );
}

#[test]
fn states_move_with_the_instant() {
    let early = replay_task(PARENT, Some("2026-07-14T08:00:04.400Z"));
    assert_eq!(state(&early, PARENT), "started");
    assert_eq!(state(&early, CHILD), "not yet seen");
    assert!(early.tasks[1].state_event.is_none());
    // After the cancel request, before the cancellation.
    let requested = replay_task(PARENT, Some("2026-07-14T08:00:07.700Z"));
    assert_eq!(state(&requested, PARENT), "started");
    assert!(requested.tasks[0].cancel_requested);
    let end = replay_task(PARENT, None);
    assert!(end.instant_is_end);
    assert_eq!(state(&end, PARENT), "cancelled");
    assert_eq!(state(&end, CHILD), "completed");
    assert!(
        !end.tasks[0].cancel_requested,
        "terminal: the request is moot"
    );
    assert!(end.timeline.iter().all(|e| !e.after_instant));
    // Before the log: nothing is seen yet.
    let before = replay_task(PARENT, Some("2026-07-14T07:00:00Z"));
    assert!(before.tasks.iter().all(|t| t.state == "not yet seen"));
}

#[test]
fn a_deep_tree_from_the_middle_has_ancestors_and_descendants() {
    // A task of the sample whose parent is a root and which has children
    // and grandchildren of its own.
    let r = replay_task("task_967c73cbff1685f7", Some("2026-07-14T08:01:30.000Z"));
    let roles: Vec<(&str, Role, usize)> = r
        .tasks
        .iter()
        .map(|t| (t.task_id.as_str(), t.role, t.depth))
        .collect();
    assert_eq!(roles[0], ("task_96bfbb307a96c35a", Role::Ancestor, 0));
    assert_eq!(roles[1], ("task_967c73cbff1685f7", Role::Focus, 1));
    assert!(
        roles[2..]
            .iter()
            .all(|(_, role, d)| *role == Role::Descendant && *d >= 2)
    );
    assert!(
        roles.iter().any(|(_, _, d)| *d == 3),
        "grandchildren too: {roles:?}"
    );
    // Each task appears once and after its parent.
    for (i, t) in r.tasks.iter().enumerate().skip(1) {
        let parent = t.parent_task_id.as_deref().unwrap();
        let p = r.tasks.iter().position(|x| x.task_id == parent).unwrap();
        assert!(p < i);
    }
    assert_eq!(state(&r, "task_96bfbb307a96c35a"), "completed");
    assert_eq!(state(&r, "task_967c73cbff1685f7"), "output");
    // Only delegation events so far: delegated.
    assert_eq!(state(&r, "task_737b519b0edb181e"), "delegated");
    assert_eq!(state(&r, "task_e504e483d5e0e319"), "not yet seen");
    // Tokens: who delegated to whom, abbreviated.
    let token = r
        .tokens
        .iter()
        .find(|t| t.task_id.as_deref() == Some("task_11747d4b29d2782b"))
        .expect("the handoff to task_11747d4b29d2782b");
    assert_eq!(token.delegated_by.as_deref(), Some("agent:reviewer"));
    assert_eq!(token.delegated_to.as_deref(), Some("agent:worker-3"));
    assert!(token.token.contains('…') && token.token.chars().count() == 13);
    assert_eq!(token.presented, 1);
    // No full token anywhere in the output.
    let json = render_to(&r, ReplayFormat::Json);
    assert!(!json.contains("eyJpc3MiOiJhZ2VudDpyZXZpZXdlciIs"));
    // Decisions carry their basis, resolved to file:line.
    let decision = r
        .timeline
        .iter()
        .find(|e| e.kind == EventKind::Decision)
        .expect("a decision in the tree");
    let basis = &decision.basis[0];
    assert_eq!(basis.via, "causation_id");
    assert!(basis.event.as_ref().is_some_and(|e| e.line > 0));
}

#[test]
fn a_session_replays_every_task_in_it() {
    let (cfg, tables) = sample();
    let request = ReplayRequest {
        scope: Scope::Session("sess_ac2ef6e0d071963c".into()),
        at: None,
    };
    let r = replay_on(cfg, tables, &request).unwrap();
    let tasks: Vec<&str> = r.tasks.iter().map(|t| t.task_id.as_str()).collect();
    assert_eq!(tasks, vec![PARENT, CHILD]);
    assert!(r.tasks.iter().all(|t| t.role == Role::Member));
    // The session's own events are in the timeline too.
    assert!(r.timeline.iter().any(|e| e.event_type == "session.opened"));
    assert!(
        r.timeline
            .iter()
            .all(|e| e.task_id.is_none() || tasks.contains(&e.task_id.as_deref().unwrap()))
    );
}

#[test]
fn unknown_ids_are_errors() {
    let (cfg, tables) = sample();
    for scope in [
        Scope::Task("task_nope".into()),
        Scope::Session("sess_nope".into()),
    ] {
        let request = ReplayRequest { scope, at: None };
        let err = replay_on(cfg, tables, &request).unwrap_err();
        assert!(matches!(err, ReplayError::Unknown { .. }), "{err}");
    }
}

#[test]
fn text_and_html_show_tree_states_and_marks() {
    let r = replay_task(PARENT, Some("2026-07-14T08:00:08.500Z"));
    let text = render_to(&r, ReplayFormat::Text);
    assert!(text.contains("└─ task_8578ad6138a119f4"), "{text}");
    assert!(text.contains("---- 2026-07-14T08:00:08.500Z the instant"));
    assert!(text.contains("<< F"), "findings marked inline:\n{text}");
    assert!(text.contains("harmovela-0.2.ndjson:53"));
    // The instant marker sits right before the child's completion.
    let marker = text.find("---- 2026-07-14T08:00:08.500Z").unwrap();
    let completed = text.find("task.completed").unwrap();
    assert!(marker < completed);
    let v: Value = serde_json::from_str(&render_to(&r, ReplayFormat::Json)).unwrap();
    assert_eq!(v["scope"], json!({"task": PARENT}));
    assert_eq!(v["instant"], "2026-07-14T08:00:08.500Z");
    assert_eq!(v["tasks"][1]["state"], "progress");
    let html = render_to(&r, ReplayFormat::Html);
    assert!(html.starts_with("<!DOCTYPE html>") && html.contains("class=\"instant\""));
    assert!(html.contains("data-task=\"task_8578ad6138a119f4\" data-state=\"progress\""));
    assert!(!html.contains("<script"), "the replay page needs no script");
}

/// A log line of the 0.2 dialect.
fn line(id: &str, ty: &str, task: &str, parent: Option<&str>, t: &str) -> String {
    let mut v = json!({
        "spec_version": "0.2", "id": id, "type": ty, "source": "agent:a",
        "session_id": "sess_1", "task_id": task, "created_at": t, "payload": {}
    });
    if let Some(p) = parent {
        v["parent_task_id"] = json!(p);
    }
    v.to_string()
}

fn replay_lines(lines: &[String], scope: Scope) -> Result<Replay, ReplayError> {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("log.ndjson");
    std::fs::write(&path, lines.join("\n") + "\n").unwrap();
    let cfg = crate::common::audit_config(vec![path]);
    let ingested = ingest(&cfg.reading.inputs, &crate::common::test_reading()).unwrap();
    replay_on(
        &cfg,
        &Tables::loaded(ingested),
        &ReplayRequest { scope, at: None },
    )
}

#[test]
fn hostile_ids_are_bound_not_spliced_and_escaped() {
    let evil = "t'); DROP TABLE events; --<script>alert(1)</script>\u{1b}[2J";
    let lines = vec![
        line("e1", "task.submitted", evil, None, "2026-01-01T00:00:00Z"),
        line("e2", "task.started", evil, None, "2026-01-01T00:00:01Z"),
        line(
            "e3",
            "task.submitted",
            "child",
            Some(evil),
            "2026-01-01T00:00:02Z",
        ),
    ];
    let r = replay_lines(&lines, Scope::Task(evil.into())).unwrap();
    assert_eq!(r.tasks.len(), 2);
    assert_eq!(r.tasks[0].state, "started");
    assert_eq!(r.tasks[1].task_id, "child");
    let text = render_to(&r, ReplayFormat::Text);
    assert!(!text.contains('\u{1b}') && text.contains("\\x1b[2J"));
    let html = render_to(&r, ReplayFormat::Html);
    assert!(!html.contains("<script") && html.contains("&lt;script&gt;"));
    let md = render_to(&r, ReplayFormat::Markdown);
    assert!(!md.contains("<script") && !md.contains('\u{1b}'), "{md}");
    assert!(
        md.contains("t'); DROP TABLE events; --&lt;script&gt;alert(1)&lt;/script&gt;\\\\x1b\\[2J"),
        "{md}"
    );
    // No pipe or newline from the log splits a table row.
    assert_table_rows_whole(&md);
}

/// Every row of every Markdown table has as many cells as its header.
fn assert_table_rows_whole(md: &str) {
    let cells = |l: &str| l.replace("\\|", "").matches('|').count();
    let mut header = None;
    for l in md.lines() {
        if !l.starts_with('|') {
            header = None;
            continue;
        }
        let n = *header.get_or_insert(cells(l));
        assert_eq!(cells(l), n, "row {l:?} in\n{md}");
    }
}

#[test]
fn markdown_replay_has_the_tree_the_instant_and_the_findings() {
    let r = replay_task(PARENT, Some("2026-07-14T08:00:08.500Z"));
    let md = render_to(&r, ReplayFormat::Markdown);
    assert!(
        md.starts_with(&format!(
            "# hvaudit replay: task {}\n",
            PARENT.replace('_', "\\_")
        )),
        "{md}"
    );
    assert!(
        md.contains("State at **2026-07-14T08:00:08.500Z**;"),
        "{md}"
    );
    assert!(md.contains(&format!("## Tasks ({})", r.tasks.len())));
    // The child under its parent, in the state it had at the instant.
    let child = CHILD.replace('_', "\\_");
    assert!(md.contains(&format!("└─\u{a0}{child} | progress")), "{md}");
    assert!(md.contains(
        "| **2026-07-14T08:00:08.500Z** | | **the instant: states above, later events below** |"
    ));
    // The instant row sits before the child's completion.
    let marker = md.find("**the instant").unwrap();
    assert!(marker < md.find("task.completed").unwrap());
    assert!(md.contains(&format!(
        "## Findings touching these tasks ({})",
        r.findings.len()
    )));
    assert!(!r.findings.is_empty());
    assert!(md.contains("- **F1** "), "{md}");
    assert_eq!(
        md.lines().filter(|l| l.starts_with("- **F")).count(),
        r.findings.len()
    );
    assert_table_rows_whole(&md);
    // "md" is a name the command line knows, as is "markdown".
    use clap::ValueEnum;
    for name in ["md", "markdown", "MD"] {
        assert_eq!(
            ReplayFormat::from_str(name, true),
            Ok(ReplayFormat::Markdown)
        );
    }
}

#[test]
fn html_keeps_task_ids_and_paths_whole() {
    let r = replay_task(PARENT, Some("2026-07-14T08:00:08.500Z"));
    let html = render_to(&r, ReplayFormat::Html);
    assert!(
        html.contains(&format!("<td><span class=\"id\">{CHILD}</span></td>")),
        "task ids in nowrap spans"
    );
    assert!(
        html.contains("<span class=\"seg\">harmovela-0.2.ndjson:53</span>"),
        "paths in segments"
    );
    assert!(html.contains(".id, .seg { white-space: nowrap; }"));
    assert!(
        !html.contains("overflow-wrap: anywhere"),
        "nothing breaks mid-word"
    );
}

#[test]
fn a_parent_cycle_ends() {
    let lines = vec![
        line(
            "e1",
            "task.submitted",
            "a",
            Some("b"),
            "2026-01-01T00:00:00Z",
        ),
        line(
            "e2",
            "task.submitted",
            "b",
            Some("a"),
            "2026-01-01T00:00:01Z",
        ),
    ];
    let r = replay_lines(&lines, Scope::Task("a".into())).unwrap();
    let mut ids: Vec<&str> = r.tasks.iter().map(|t| t.task_id.as_str()).collect();
    ids.sort();
    assert_eq!(ids, vec!["a", "b"], "each task once");
}

#[test]
fn cli_exit_codes_and_the_hint() {
    let out = hvaudit()
        .args(["replay", "-q"])
        .arg(sample_dir())
        .args(["--task", "task_nope"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("task_nope") && err.contains("SELECT task_id FROM tasks"),
        "{err}"
    );

    let out = hvaudit()
        .args(["replay", "-q"])
        .arg(sample_dir())
        .args([
            "--task",
            PARENT,
            "--at",
            "2026-07-14T08:00:08.500Z",
            "--format",
            "json",
        ])
        .output()
        .unwrap();
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let v: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["tasks"][0]["state"], "cancelled");

    let out = hvaudit()
        .args(["replay", "-q"])
        .arg(sample_dir())
        .args(["--task", PARENT, "--format", "md"])
        .output()
        .unwrap();
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(String::from_utf8_lossy(&out.stdout).starts_with("# hvaudit replay: task "));
}

/// A chain t0 <- t1 <- ... of `n` tasks, each submitted once.
fn chain_lines(n: usize) -> Vec<String> {
    (0..n)
        .map(|i| {
            let parent = (i > 0).then(|| format!("t{}", i - 1));
            let t = format!("2026-01-01T00:00:00.{i:06}Z");
            line(
                &format!("e{i}"),
                "task.submitted",
                &format!("t{i}"),
                parent.as_deref(),
                &t,
            )
        })
        .collect()
}

#[test]
fn a_chain_deeper_than_ten_thousand_has_every_ancestor() {
    // The walk up stopped silently at 10,001 ancestors.
    let n = 12_000;
    let r = replay_lines(&chain_lines(n), Scope::Task(format!("t{}", n - 1))).unwrap();
    assert_eq!(r.tasks.len(), n);
    let ancestors = r.tasks.iter().filter(|t| t.role == Role::Ancestor).count();
    assert_eq!(ancestors, n - 1);
    assert_eq!(r.tasks[0].task_id, "t0");
    assert_eq!(r.tasks[n - 1].depth, n - 1);
    let text = render_to(&r, ReplayFormat::Text);
    assert!(
        text.contains(&format!("(+{} levels) └─ t{} *", n - 1 - 24, n - 1)),
        "a deep row says how deep it is"
    );
}

#[test]
fn a_deep_chain_renders_in_size_proportional_to_it() {
    // Each row drew a guide per level: a 50,000-deep chain was gigabytes.
    let size = |n: usize| {
        let r = replay_lines(&chain_lines(n), Scope::Task("t0".into())).unwrap();
        assert_eq!(r.tasks.len(), n);
        let text = render_to(&r, ReplayFormat::Text).len();
        let html = render_to(&r, ReplayFormat::Html).len();
        (text, html)
    };
    let (small, large) = (size(1_000), size(4_000));
    assert!(large.0 <= 6 * small.0, "text {small:?} then {large:?}");
    assert!(large.1 <= 6 * small.1, "html {small:?} then {large:?}");
}

#[test]
fn a_wide_tree_has_every_child() {
    let n = 20_000;
    let mut lines = vec![line(
        "e0",
        "task.submitted",
        "root",
        None,
        "2026-01-01T00:00:00Z",
    )];
    lines.extend((1..=n).map(|i| {
        line(
            &format!("e{i}"),
            "task.submitted",
            &format!("c{i}"),
            Some("root"),
            "2026-01-01T00:00:01Z",
        )
    }));
    let r = replay_lines(&lines, Scope::Task(format!("c{n}"))).unwrap();
    assert_eq!(r.tasks.len(), 2, "a child and its parent");
    let r = replay_lines(&lines, Scope::Task("root".into())).unwrap();
    assert_eq!(r.tasks.len(), n + 1);
    assert_eq!(
        r.tasks
            .iter()
            .filter(|t| t.role == Role::Descendant)
            .count(),
        n
    );
    assert!(r.tasks[1..].iter().all(|t| t.depth == 1));
    let text = render_to(&r, ReplayFormat::Text);
    assert_eq!(text.matches("├─ ").count(), n - 1);
    assert_eq!(text.matches("└─ ").count(), 1);
}
