"""`hvaudit.audit` and `Report`: the findings equal the CLI's JSON report;
the tables reach polars, pandas and DuckDB; the report formats are the
CLI's bytes."""

import datetime as dt
import json

import pyarrow as pa
import pytest

import hvaudit

SAMPLES = "samples/incident"
UPSTREAM = [
    "tests/fixtures/upstream/harmovela-0.2",
    "tests/fixtures/upstream/aep-0.1",
    "tests/fixtures/upstream",
]


def _plain(value):
    """A findings table's value as the JSON report writes it: instants as
    RFC 3339 to the millisecond, absent fields dropped (the JSON leaves
    some out when empty, the table has nulls)."""
    if isinstance(value, dt.datetime):
        ms = value.microsecond // 1000
        return value.astimezone(dt.timezone.utc).strftime("%Y-%m-%dT%H:%M:%S") + f".{ms:03d}Z"
    if isinstance(value, dict):
        return {k: _plain(v) for k, v in value.items() if v is not None}
    if isinstance(value, list):
        return [_plain(v) for v in value]
    return value


def _same_findings(table: pa.Table, findings_json: list):
    assert table.num_rows == len(findings_json)
    assert [_plain(r) for r in table.to_pylist()] == [_plain(f) for f in findings_json]


@pytest.fixture(scope="module")
def sample_report():
    return hvaudit.audit(SAMPLES)


def test_findings_equal_the_cli_json_report_on_the_samples(sample_report, cli_json):
    code, _, expected = cli_json(SAMPLES)
    _same_findings(sample_report.findings, expected["findings"])
    assert sample_report.exit_code == code == 1
    assert sample_report.findings.column_names[:4] == ["rule", "severity", "family", "message"]


@pytest.mark.parametrize("path", UPSTREAM)
def test_findings_equal_the_cli_json_report_on_the_upstream_fixtures(path, cli_json):
    code, _, expected = cli_json(path)
    report = hvaudit.audit(path)
    _same_findings(report.findings, expected["findings"])
    assert report.exit_code == code
    assert report.summary["counts"] == expected["counts"]


def test_summary_is_the_json_report_without_findings(sample_report, cli_json):
    _, _, expected = cli_json(SAMPLES)
    del expected["findings"]
    assert sample_report.summary == expected
    assert list(sample_report.summary) == list(expected)


def test_inputs_evidence_and_bad_lines_are_tables(sample_report, hvaudit_cli):
    inputs = sample_report.inputs
    assert isinstance(inputs, pa.Table)
    assert inputs.column("path").to_pylist() == [
        "samples/incident/aep-0.1.ndjson",
        "samples/incident/harmovela-0.2.ndjson",
    ]
    assert sum(inputs.column("events").to_pylist()) == sample_report.summary["accounting"]["events"]
    # The JSON's inputs, with the counts it leaves out when zero as 0.
    columns = set(inputs.column_names)
    for row, listed in zip(inputs.to_pylist(), sample_report.summary["inputs"]):
        assert set(listed) <= columns
        assert {k: v for k, v in row.items() if k in listed} == listed
        assert all(row[k] in (0, None) for k in columns - set(listed))
    assert {"conflicting_copies", "bad_lines_unlisted"} <= columns
    for name in ("evidence", "bad_lines"):
        table = getattr(sample_report, name)
        assert isinstance(table, pa.Table)
        _, out = hvaudit_cli("sql", SAMPLES, "--format", "json", "-e", f"SELECT count(*) AS n FROM {name}")
        assert table.num_rows == json.loads(out)[0]["n"] > 0


@pytest.mark.parametrize("fmt", ["json", "sarif", "md", "junit", "jsonl", "text"])
def test_write_gives_the_cli_bytes(sample_report, hvaudit_cli, tmp_path, fmt):
    path = tmp_path / f"report.{fmt}"
    sample_report.write(path, format=fmt)
    cli_path = tmp_path / f"cli.{fmt}"
    hvaudit_cli("audit", SAMPLES, "--format", fmt, "-o", str(cli_path))
    assert path.read_bytes() == cli_path.read_bytes()


def test_write_html_and_parquet(sample_report, tmp_path):
    import pyarrow.parquet as pq

    html = tmp_path / "report.html"
    sample_report.write(html)  # html by default
    text = html.read_text()
    assert text.startswith("<!DOCTYPE html>") or text.lower().startswith("<!doctype html>")
    assert "hvaudit audit" in text
    parquet = tmp_path / "findings.parquet"
    sample_report.write(parquet, format="parquet")
    assert pq.read_table(parquet).equals(sample_report.findings)


def test_write_refuses_an_unknown_format(sample_report, tmp_path):
    with pytest.raises(hvaudit.UsageError, match="possible values"):
        sample_report.write(tmp_path / "x", format="pdf")


def test_polars_group_by_over_findings(sample_report):
    import polars as pl

    frame = hvaudit.to_polars(sample_report.findings)
    assert isinstance(frame, pl.DataFrame)
    by_rule = frame.group_by("rule").len()
    assert dict(by_rule.iter_rows()) == sample_report.summary["counts"]["by_rule"]
    by_severity = frame.group_by("severity").agg(pl.col("fingerprint").n_unique())
    assert dict(by_severity.iter_rows()) == sample_report.summary["counts"]["by_severity"]


def test_duckdb_queries_findings_as_arrow(sample_report):
    import duckdb

    findings = sample_report.findings  # noqa: F841 (read by name by DuckDB)
    rows = duckdb.sql("SELECT rule, count(*) FROM findings GROUP BY rule").fetchall()
    assert dict(rows) == sample_report.summary["counts"]["by_rule"]
    # The nested columns arrive as DuckDB lists of structs.
    [(file,)] = duckdb.sql("SELECT locations[1].file FROM findings LIMIT 1").fetchall()
    assert file.startswith("samples/incident/")


def test_pandas(sample_report):
    frame = hvaudit.to_pandas(sample_report.findings)
    assert len(frame) == sample_report.findings.num_rows
    assert len(sample_report.findings.to_pandas()) == len(frame)


def test_options_reach_the_audit(cli_json):
    report = hvaudit.audit(SAMPLES, rules=["orphan.*", "token.*"], fail_on="none")
    code, _, expected = cli_json(SAMPLES, "--rules", "orphan.*,token.*", "--fail-on", "none")
    _same_findings(report.findings, expected["findings"])
    assert report.exit_code == code == 0
    assert set(report.findings.column("family").to_pylist()) == {"orphan", "token"}
    excluded = hvaudit.audit(SAMPLES, exclude_rules="token.*", spec="0.2", fail_on="critical")
    _, _, expected = cli_json(SAMPLES, "--exclude-rules", "token.*", "--spec", "0.2", "--fail-on", "critical")
    _same_findings(excluded.findings, expected["findings"])


def test_the_time_window_takes_datetimes(cli_json):
    since = dt.datetime(2026, 7, 14, 12, 0, tzinfo=dt.timezone.utc)
    report = hvaudit.audit(SAMPLES, since=since)
    _, _, expected = cli_json(SAMPLES, "--since", "2026-07-14T12:00:00+00:00")
    _same_findings(report.findings, expected["findings"])
    assert report.summary["counts"] == expected["counts"]


def test_a_configuration_file_applies_as_on_the_command_line(tmp_path, cli_json):
    config = tmp_path / "hvaudit.toml"
    config.write_text('[audit]\nfail-on = "critical"\nrules = "parent.*"\n')
    report = hvaudit.audit(SAMPLES, config=config)
    assert set(report.findings.column("family").to_pylist()) == {"parent"}
    assert report.exit_code == 0  # no critical parent.* finding
    # Keyword arguments win over the file, as the command line does.
    assert hvaudit.audit(SAMPLES, config=config, fail_on="high").exit_code == 1


def test_the_readme_example_runs_as_written(repo, tmp_path, monkeypatch, cli_json):
    readme = (repo / "README.md").read_text()
    example = readme.split("```python\n", 1)[1].split("```", 1)[0]
    # It writes report.json into the working directory: run it in the
    # repository's copy of the sample, from a scratch directory.
    (tmp_path / "samples").symlink_to(repo / "samples")
    monkeypatch.chdir(tmp_path)
    exec(compile(example, "README.md", "exec"), {})
    _, out, _ = cli_json(SAMPLES)
    assert (tmp_path / "report.json").read_bytes() == out
