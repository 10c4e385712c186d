//! The views computed in Rust give the rows of their SQL forms: `tasks`
//! (src/rules/tasks_view.rs, queries/views/10_tasks.sql) and
//! `irregular_transitions` (src/rules/transitions_view.rs,
//! queries/views/14_irregular_transitions.sql). Over generated logs with
//! the edge cases of "first" and of a step appended, over the forms of `ev`
//! (the audit's indexed table, the plain view, keys far apart), with and
//! without a `--spec` override.

use crate::common::synth_log;
use datafusion::arrow::util::pretty::pretty_format_batches;
use datafusion::datasource::MemTable;
use hvaudit::engine::{self, EngineOptions, RuleSettings};
use hvaudit::ingest::{Ingested, ingest};
use hvaudit::protocol::SpecMode;
use hvaudit::rules::catalog::Catalog;
use hvaudit::rules::ev_table::EvTable;
use hvaudit::rules::{tasks_view, transitions_view};
use std::sync::Arc;

/// Lines whose tasks' first events are decided by the tie-breaks and
/// exclusions of the view: equal instants (input order decides), a
/// cancellation request that is no state, a delegation accepted before or
/// at the instant of the state, a parent link and a session that appear
/// only on a later event, a task that is only requested to cancel, and a
/// later version of an id (not in `ev`).
#[rustfmt::skip]
const EDGES: &[(&str, &str, &str, &str)] = &[
    // id, type, created_at, extra members
    ("e1", "task.cancel.requested", "12:00:00", r#""task_id":"t_tie""#),
    ("e2", "task.submitted", "12:00:00", r#""task_id":"t_tie""#),
    ("e3", "task.started", "12:00:00", r#""task_id":"t_tie","session_id":"s1""#),
    ("e4", "task.completed", "12:00:01", r#""task_id":"t_tie""#),
    ("e5", "task.failed", "12:00:01", r#""task_id":"t_tie""#),
    ("e6", "delegation.accepted", "12:00:02", r#""task_id":"t_deleg""#),
    ("e7", "task.progress", "12:00:03", r#""task_id":"t_deleg","parent_task_id":"t_tie""#),
    ("e8", "task.started", "12:00:04", r#""task_id":"t_same""#),
    ("e9", "delegation.handoff.completed", "12:00:04", r#""task_id":"t_same""#),
    ("e10", "task.cancel.requested", "12:00:05", r#""task_id":"t_request""#),
    ("e11", "task.progress", "12:00:06", r#""task_id":"t_late""#),
    ("e12", "task.progress", "12:00:07", r#""task_id":"t_late","parent_task_id":"t_deleg","session_id":"s2""#),
    ("e13", "task.timed_out", "11:59:59", r#""task_id":"t_late""#),
    ("e11", "task.cancelled", "11:00:00", r#""task_id":"t_late""#),
    // a step from an event whose id the message cuts (over 80 characters)
    ("e20", "task.submitted", "12:01:00", r#""task_id":"t_long""#),
    (LONG_ID, "task.progress", "12:01:01", r#""task_id":"t_long""#),
    ("e21", "task.submitted", "12:01:02", r#""task_id":"t_long""#),
];

const LONG_ID: &str = "üüüüüüüüüüüüüüüüüüüüüüüüüüüüüüüüüüüüüüüüüüüüüüüüüüxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx";

/// The forms of `ev` the view is computed over.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Ev {
    /// The audit's table: task ids numbered densely.
    Indexed,
    /// The view as shipped: the ids themselves.
    Plain,
    /// Integer keys far apart, as a `ev` of a user's own could number them.
    Sparse,
}

fn log(seed: u64) -> Vec<u8> {
    let mut log = synth_log(seed, 300_000, 0.05);
    for (id, ty, at, extra) in EDGES {
        log.extend(format!(
            r#"{{"spec_version":"0.2","id":"{id}","type":"{ty}","source":"agent:a","created_at":"2026-07-14T{at}Z",{extra},"payload":{{}}}}"#
        ).bytes());
        log.push(b'\n');
    }
    log
}

/// What the two forms gave over one log: the native rows of each view,
/// as tables, once they were found equal to the SQL's.
struct Compared {
    tasks: String,
    steps: String,
    counts: String,
}

/// Compute `tasks` and `irregular_transitions` both ways over `ingested`
/// and assert that they give the same rows.
async fn compare(ingested: &Ingested, ev: Ev, spec: SpecMode, case: &str) -> Compared {
    let catalog = Catalog::embedded().unwrap();
    let view = |name: &str| catalog.views.iter().find(|v| v.name == name).unwrap();
    let ctx = engine::session(&EngineOptions::default()).unwrap();
    engine::register_tables(&ctx, ingested).unwrap();
    let settings = RuleSettings {
        spec,
        ..Default::default()
    };
    engine::register_settings(&ctx, &settings).unwrap();
    if ev == Ev::Plain {
        let view = ctx.sql(&view("ev").sql).await.unwrap();
        ctx.register_table("ev", view.into_view()).unwrap();
    } else {
        let table = EvTable::new(&ctx, &ingested.events).unwrap();
        ctx.register_table("ev", Arc::new(table)).unwrap();
    }
    if ev == Ev::Sparse {
        let indexed = ctx.deregister_table("ev").unwrap().unwrap();
        ctx.register_table("ev_indexed", indexed).unwrap();
        let sparse = ctx
            .sql(
                "SELECT * EXCLUDE (task_key, parent_key), \
                 CAST(task_key * 1000003 AS INT UNSIGNED) AS task_key, \
                 CAST(parent_key * 1000003 AS INT UNSIGNED) AS parent_key \
                 FROM ev_indexed",
            )
            .await
            .unwrap();
        ctx.register_table("ev", sparse.into_view()).unwrap();
    }
    let all = |sql: &str| {
        let (ctx, sql) = (ctx.clone(), sql.to_string());
        async move {
            let rows = ctx.sql(&sql).await.unwrap().collect().await.unwrap();
            pretty_format_batches(&rows).unwrap().to_string()
        }
    };
    // tasks
    let sql = ctx.sql(&view("tasks").sql).await.unwrap();
    let schema = sql.schema().inner().clone();
    ctx.register_table("tasks", sql.into_view()).unwrap();
    let rows = tasks_view::tasks(&ctx, &schema).await.unwrap();
    let native = MemTable::try_new(schema, vec![rows]).unwrap();
    ctx.register_table("native_tasks", Arc::new(native))
        .unwrap();
    let tasks = all("SELECT * FROM native_tasks ORDER BY task_id").await;
    let by_sql = all("SELECT * FROM tasks ORDER BY task_id").await;
    assert!(tasks == by_sql, "{case}: the two forms of tasks differ");
    // irregular_transitions, over the SQL form of tasks
    let lifecycle = ctx.sql(&view("lifecycle_next").sql).await.unwrap();
    ctx.register_table("lifecycle_next", lifecycle.into_view())
        .unwrap();
    let sql = ctx.sql(&view("irregular_transitions").sql).await.unwrap();
    let schema = sql.schema().inner().clone();
    ctx.register_table("steps", sql.into_view()).unwrap();
    let rows = transitions_view::irregular_transitions(&ctx, &schema)
        .await
        .unwrap();
    let native = MemTable::try_new(schema, vec![rows]).unwrap();
    ctx.register_table("native_steps", Arc::new(native))
        .unwrap();
    let steps = all("SELECT * FROM native_steps ORDER BY seq").await;
    let by_sql = all("SELECT * FROM steps ORDER BY seq").await;
    assert!(
        steps == by_sql,
        "{case}: the two forms of irregular_transitions differ"
    );
    let counts = all(
        "SELECT count(*) AS n, count(parent_key) AS p, count(session_id) AS s, \
         count(state_seq) AS st, count(deleg_seq) AS d, count(term_seq) AS t, \
         count(*) FILTER (WHERE active_seq = deleg_seq) AS by_deleg, \
         count(*) FILTER (WHERE active_seq IS NULL) AS never \
         FROM native_tasks",
    )
    .await;
    Compared {
        tasks,
        steps,
        counts,
    }
}

#[test]
fn the_native_views_give_the_rows_of_their_sql() {
    let mut catalog = Catalog::embedded().unwrap();
    catalog.use_native_views();
    let native = |name: &str| catalog.views.iter().any(|v| v.name == name && v.native);
    assert!(native("tasks") && native("irregular_transitions") && !native("task_links"));
    let dir = tempfile::tempdir().unwrap();
    for seed in [1, 2] {
        let path = dir.path().join(format!("log{seed}.ndjson"));
        std::fs::write(&path, log(seed)).unwrap();
        let ingested = ingest(&[path], &crate::common::test_reading()).unwrap();
        for (ev, spec) in [
            (Ev::Indexed, SpecMode::Auto),
            (Ev::Plain, SpecMode::Auto),
            (Ev::Indexed, SpecMode::V01),
            (Ev::Sparse, SpecMode::Auto),
        ] {
            let case = format!("seed {seed}, ev {ev:?}, spec {spec:?}");
            let compared = hvaudit::audit::block_on(compare(&ingested, ev, spec, &case));
            let Compared {
                tasks,
                steps,
                counts,
            } = compared;
            for needle in [
                "(counts as submitted + accepted)",
                "| (none) ",
                "characters, blake3",
                "| false | true ",
                "| false | false ",
            ] {
                assert!(steps.contains(needle), "{case}: no {needle:?} in\n{steps}");
            }
            // Every kind of first event is there to be compared.
            let row = counts.lines().nth(3).unwrap();
            let n: Vec<u64> = (row.split('|'))
                .filter_map(|c| c.trim().parse().ok())
                .collect();
            assert!(
                n.len() == 8 && n[1..].iter().all(|&c| c > 0),
                "{case}: {counts}"
            );
            // The edge tasks, as the view defines their firsts.
            let line = |task: &str| {
                (tasks.lines())
                    .find(|l| l.split('|').nth(2).map(str::trim) == Some(task))
                    .unwrap_or_else(|| panic!("{case}: no {task}"))
                    .to_string()
            };
            // t_tie: first e1 (input order), state e2, terminal e4.
            let tie = line("t_tie");
            assert!(tie.contains("| task.cancel.requested |"), "{tie}");
            assert!(
                tie.contains("| task.submitted |") && tie.contains("| e4 "),
                "{tie}"
            );
        }
    }
}

/// The same over every fixture log: the protocol authors', and the samples.
#[test]
fn the_native_views_give_the_rows_of_their_sql_on_every_fixture() {
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut logs: Vec<_> = walkdir(&root.join("tests/fixtures"));
    logs.extend(walkdir(&root.join("samples")));
    assert!(logs.len() > 40, "{logs:?}");
    let mut steps = 0;
    for path in logs {
        let case = path.display().to_string();
        let ingested = ingest(std::slice::from_ref(&path), &crate::common::test_reading()).unwrap();
        let compared =
            hvaudit::audit::block_on(compare(&ingested, Ev::Indexed, SpecMode::Auto, &case));
        steps += compared.steps.lines().count().saturating_sub(4);
    }
    assert!(steps > 5, "{steps} irregular steps in all");
}

/// The NDJSON logs under `dir`, at any depth, in order.
fn walkdir(dir: &std::path::Path) -> Vec<std::path::PathBuf> {
    let mut found = Vec::new();
    let mut todo = vec![dir.to_path_buf()];
    while let Some(d) = todo.pop() {
        for entry in std::fs::read_dir(&d).unwrap() {
            let path = entry.unwrap().path();
            if path.is_dir() {
                todo.push(path);
            } else if path.extension().is_some_and(|e| e == "ndjson") {
                found.push(path);
            }
        }
    }
    found.sort();
    found
}
