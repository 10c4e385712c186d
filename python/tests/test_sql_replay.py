"""`hvaudit.sql`, `Session` and `hvaudit.replay`: the tables, views and
JSON functions of `hvaudit sql`; the replay of `hvaudit replay`."""

import json

import pyarrow as pa
import pytest

import hvaudit

SAMPLES = "samples/incident"


def _cli_rows(hvaudit_cli, query):
    code, out = hvaudit_cli("sql", SAMPLES, "--format", "json", "-e", query)
    assert code == 0
    return json.loads(out)


def test_sql_answers_as_the_cli(hvaudit_cli):
    query = (
        "SELECT type, count(*) AS n FROM events GROUP BY type ORDER BY n DESC, type"
    )
    table = hvaudit.sql(SAMPLES, query)
    assert isinstance(table, pa.Table)
    assert table.to_pylist() == _cli_rows(hvaudit_cli, query)


def test_sql_has_the_json_functions_and_views(hvaudit_cli):
    query = (
        "SELECT task_id, type, json_get_str(payload, 'message') AS message FROM events "
        "WHERE json_get_str(payload, 'message') IS NOT NULL ORDER BY created_ns, seq LIMIT 5"
    )
    assert hvaudit.sql(SAMPLES, query).to_pylist() == _cli_rows(hvaudit_cli, query)
    views = "SELECT count(*) AS n FROM tasks WHERE term_seq IS NULL"
    assert hvaudit.sql(SAMPLES, views).to_pylist() == _cli_rows(hvaudit_cli, views)


def test_a_session_answers_several_queries_over_one_read():
    session = hvaudit.Session(SAMPLES)
    events = session.sql("SELECT count(*) AS n FROM events").column("n")[0].as_py()
    bad = session.sql("SELECT count(*) AS n FROM bad_lines").column("n")[0].as_py()
    report = hvaudit.audit(SAMPLES)
    assert events >= report.summary["accounting"]["events"]
    assert bad == report.summary["accounting"]["bad_lines"]
    # Several statements: the last one's rows.
    last = session.sql("SELECT 1 AS a; SELECT 2 AS b")
    assert last.to_pylist() == [{"b": 2}]
    # An empty answer keeps its columns.
    empty = session.sql("SELECT task_id FROM tasks WHERE false")
    assert empty.num_rows == 0 and empty.column_names == ["task_id"]


def test_a_bad_query_raises_with_the_cli_message():
    session = hvaudit.Session(SAMPLES)
    with pytest.raises(hvaudit.UsageError, match="query failed"):
        session.sql("SELECT nope FROM events")


def test_reading_options_reach_the_session():
    with pytest.raises(hvaudit.UsageError, match="max-line-bytes|1G"):
        hvaudit.Session(SAMPLES, max_line_bytes="2G")
    few = hvaudit.sql(SAMPLES, "SELECT count(*) AS n FROM bad_lines", max_bad_lines=1)
    assert few.column("n")[0].as_py() <= 2  # one listed per input


def _a_task(report):
    rows = report.findings.filter(
        pa.compute.starts_with(report.findings.column("rule"), "orphan.")
    ).column("task_id")
    return next(t for t in rows.to_pylist() if t)


def test_replay_gives_the_tree_and_timeline_as_tables(hvaudit_cli, tmp_path):
    task = _a_task(hvaudit.audit(SAMPLES))
    replay = hvaudit.replay(SAMPLES, task=task)
    for name in ("tree", "timeline", "tokens", "findings"):
        assert isinstance(getattr(replay, name), pa.Table)
    tree = replay.tree.to_pylist()
    assert [t["role"] for t in tree if t["task_id"] == task] == ["focus"]
    assert replay.timeline.num_rows > 0
    assert set(replay.timeline.column("task_id").to_pylist()) <= {t["task_id"] for t in tree} | {None}
    code, out = hvaudit_cli("replay", SAMPLES, "--task", task, "--format", "json")
    assert code == 0
    assert replay.data == json.loads(out)
    path = tmp_path / "replay.md"
    replay.write(path, format="md")
    _, md = hvaudit_cli("replay", SAMPLES, "--task", task, "--format", "md")
    assert path.read_bytes() == md


def test_replay_at_an_instant(hvaudit_cli):
    task = _a_task(hvaudit.audit(SAMPLES))
    at = "2026-01-01T00:00:00Z"  # before the log: nothing seen yet
    replay = hvaudit.replay(SAMPLES, task=task, at=at)
    _, out = hvaudit_cli("replay", SAMPLES, "--task", task, "--at", at, "--format", "json")
    assert replay.data == json.loads(out)
    assert set(replay.tree.column("state").to_pylist()) == {"not yet seen"}


def test_replay_of_an_unknown_task_is_a_usage_error():
    with pytest.raises(hvaudit.UsageError, match='no task "nope" in the input'):
        hvaudit.replay(SAMPLES, task="nope")
    with pytest.raises(hvaudit.UsageError):
        hvaudit.replay(SAMPLES)  # neither task nor session
