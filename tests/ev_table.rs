//! The audit's `ev` table, indexed by event type, answers every query as the
//! plain view (queries/views/01_ev.sql) does: the same rows in the same
//! order. Its task keys are integers where the view's are the ids, so they
//! are compared by what they join and group; its `type` is dictionary-encoded.

use crate::common::synth_log;
use datafusion::arrow::util::pretty::pretty_format_batches;
use hvaudit::engine::{self, EngineOptions};
use hvaudit::ingest::ingest;
use hvaudit::rules::ev_table::EvTable;
use std::sync::Arc;

const QUERIES: &[&str] = &[
    // one type, a few types, a prefix, a negation: pruned or not
    "SELECT seq, id, task_id FROM {} WHERE type = 'interruption.requested'",
    "SELECT seq, type FROM {} WHERE type IN ('task.cancel.requested', 'task.cancelled') AND task_id IS NOT NULL",
    "SELECT seq, type FROM {} WHERE type LIKE 'delegation.%'",
    "SELECT seq FROM {} WHERE type NOT IN ('task.completed', 'task.failed')",
    "SELECT seq FROM {} WHERE type = 'task.progress' OR type = 'task.output'",
    // the type settled together with another column: no pruning by it
    "SELECT seq FROM {} WHERE type = 'task.failed' OR task_id IS NULL",
    // a filter that fails on the type names: the same error as the view's
    "SELECT seq FROM {} WHERE task_id = 'no_such_task' AND CAST(type AS INT) = 1",
    // a type no event has; every row; no column at all
    "SELECT seq FROM {} WHERE type = 'no.such.type'",
    "SELECT seq, version, redeliveries FROM {}",
    "SELECT seq, id, version FROM {} WHERE id LIKE 'solo%' OR id = 'dup_1'",
    "SELECT count(*) FROM {} WHERE type = 'belief.revised'",
    "SELECT count(*) FROM {}",
    // a conflicting version's id: only its first version is in ev
    "SELECT seq, type, version FROM {} WHERE id = 'dup_1' AND type IN ('task.submitted', 'task.completed')",
    "SELECT seq, type FROM {} WHERE type = 'task.completed' LIMIT 3",
    // the task keys: one per id, the same numbering in both columns
    "SELECT count(DISTINCT task_key) AS k, count(DISTINCT parent_key) AS p, count(DISTINCT task_id) AS i FROM {}",
    "SELECT task_key IS NULL AS k, parent_key IS NULL AS p, count(*) AS n FROM {} GROUP BY 1, 2 ORDER BY 1, 2",
    "SELECT task_id FROM {} GROUP BY task_id HAVING count(DISTINCT task_key) <> 1",
    "SELECT min(task_id) AS i FROM {} GROUP BY task_key HAVING min(task_id) <> max(task_id)",
    "SELECT a.seq AS a, b.seq AS b FROM {} a JOIN {} b ON a.task_key = b.parent_key WHERE a.type = 'task.submitted' ORDER BY 1, 2",
    "SELECT count(*) AS n FROM {} a JOIN {} b ON a.task_key = b.parent_key WHERE a.task_id <> b.parent_task_id",
    "SELECT seq FROM {} WHERE type = 'task.started' AND task_key IS NOT NULL",
    // the type as a value: grouped, joined, compared, written out
    "SELECT type, count(*) AS n FROM {} GROUP BY type ORDER BY type",
    "SELECT a.seq AS a, b.seq AS b FROM {} a JOIN {} b ON a.type = b.type AND a.task_id = b.task_id WHERE a.type LIKE 'delegation.%' ORDER BY 1, 2",
    "SELECT concat(type, ' ', id) AS m, upper(type) AS u, type < 'm' AS early FROM {} WHERE seq < 50 ORDER BY seq",
    "SELECT seq, lag(type) OVER (ORDER BY seq) AS prev FROM {} WHERE task_id IS NOT NULL ORDER BY seq LIMIT 200",
];

#[test]
fn ev_by_type_gives_what_the_view_gives() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("log.ndjson");
    let mut log = synth_log(7, 400_000, 0.05);
    // the same id again with other content: a second version, left out of
    // ev; and single first versions between and after later ones
    for (id, ty, at) in [
        ("dup_1", "task.submitted", "12:00:00"),
        ("dup_1", "task.completed", "12:00:05"),
        ("solo_1", "task.submitted", "12:00:06"),
        ("dup_1", "task.failed", "12:00:07"),
        ("solo_2", "task.submitted", "12:00:08"),
    ] {
        log.extend(format!(
            r#"{{"spec_version":"0.2","id":"{id}","type":"{ty}","source":"agent:a","created_at":"2026-07-14T{at}Z","task_id":"t_dup","payload":{{"task_id":"t_dup"}}}}"#
        ).bytes());
        log.push(b'\n');
    }
    std::fs::write(&path, &log).unwrap();
    let ingested = ingest(&[path], &crate::common::test_reading()).unwrap();
    let later_versions: usize = ingested
        .events
        .iter()
        .map(|b| {
            let v = b.column(b.schema().index_of("version").unwrap());
            let v = v
                .as_any()
                .downcast_ref::<datafusion::arrow::array::Int32Array>()
                .unwrap();
            v.values().iter().filter(|&&n| n > 1).count()
        })
        .sum();
    assert!(later_versions >= 1, "the log has a later version");

    hvaudit::audit::block_on(async {
        let ctx = engine::session(&EngineOptions {
            partitions: Some(1),
            ..Default::default()
        })
        .unwrap();
        engine::register_tables(&ctx, &ingested).unwrap();
        let view = ctx
            .sql(include_str!("../queries/views/01_ev.sql"))
            .await
            .unwrap()
            .into_view();
        ctx.register_table("ev_view", view).unwrap();
        let table = EvTable::new(&ctx, &ingested.events).unwrap();
        ctx.register_table("ev", Arc::new(table)).unwrap();
        let run = |sql: String| {
            let ctx = ctx.clone();
            async move {
                // An error is an answer too: the view's and the table's must agree.
                match ctx.sql(&sql).await.unwrap().collect().await {
                    Ok(batches) => pretty_format_batches(&batches).unwrap().to_string(),
                    Err(e) => format!("error: {e}"),
                }
            }
        };
        for query in QUERIES {
            let indexed = run(query.replace("{}", "ev")).await;
            let plain = run(query.replace("{}", "ev_view")).await;
            assert_eq!(indexed, plain, "{query}");
        }
        // and the pruned answers are not empty by accident
        let answer = |needle: &str| {
            let query = QUERIES.iter().find(|q| q.contains(needle)).unwrap();
            run(query.replace("{}", "ev"))
        };
        for needle in [
            "'interruption.requested'",
            "a.task_key = b.parent_key WHERE",
        ] {
            let some = answer(needle).await;
            assert!(some.lines().count() > 5, "{some}");
        }
        // single first versions between later ones are kept, once
        let solo = answer("'solo%'").await;
        assert!(
            solo.contains("solo_1")
                && solo.contains("solo_2")
                && solo.matches("dup_1").count() == 1,
            "{solo}"
        );
        // the keys are integers here, the ids themselves in the view; the
        // type is a dictionary
        let types = run(
            "SELECT arrow_typeof(task_key) AS k, arrow_typeof(type) AS t FROM ev LIMIT 1"
                .to_string(),
        )
        .await;
        assert!(
            types.contains("UInt32") && types.contains("Dictionary(Int32, Utf8)"),
            "{types}"
        );
    });
}
