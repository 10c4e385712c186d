"""hvaudit from Python: audit Harmovela / AEP agent-runtime event logs,
query them with SQL and replay tasks, with every result an Arrow table.

The options are the CLI's (``hvaudit audit --help``), spelled as keyword
arguments (``--fail-on`` is ``fail_on``). They are handed to the CLI's own
parser, so the defaults, the validation and the error messages are the
CLI's; an option left at ``None`` takes the CLI's default.

    >>> import hvaudit
    >>> report = hvaudit.audit("samples/incident")
    >>> report.exit_code                      # as `hvaudit audit` exits
    1
    >>> hvaudit.to_polars(report.findings).group_by("rule").len()
    >>> hvaudit.sql("samples/incident", "SELECT type, count(*) FROM events GROUP BY type")
"""

from __future__ import annotations

import datetime as _dt
import functools
import json
import os
from typing import Any, Iterable, Optional, Sequence, Union

import pyarrow as pa

from . import _hvaudit
from ._hvaudit import HvauditError, InputError, RuleError, UsageError

__version__ = _hvaudit.__version__

__all__ = [
    "audit",
    "sql",
    "Session",
    "replay",
    "Report",
    "Replay",
    "to_polars",
    "to_pandas",
    "HvauditError",
    "UsageError",
    "InputError",
    "RuleError",
]

Paths = Union[str, "os.PathLike[str]", Sequence[Union[str, "os.PathLike[str]"]]]

# Keyword argument -> the CLI's long option. Flags (booleans) are given
# when True; lists are joined with commas; the rest is passed as text.
_READING = {
    "token_format": "--token-format",
    "max_line_bytes": "--max-line-bytes",
    "bad_lines": "--bad-lines",
    "max_bad_lines": "--max-bad-lines",
    "memory_limit": "--memory-limit",
    "spill_dir": "--spill-dir",
    "allow_empty": "--allow-empty",
    "endpoint": "--endpoint",
    "in_place": "--in-place",
}
_AUDIT = {
    **_READING,
    "rules": "--rules",
    "exclude_rules": "--exclude-rules",
    "rules_dir": "--rules-dir",
    "spec": "--spec",
    "since": "--since",
    "until": "--until",
    "horizon": "--horizon",
    "fail_on": "--fail-on",
    "fail_on_new": "--fail-on-new",
    "suppressions": "--suppressions",
    "error_on_unused_suppressions": "--error-on-unused-suppressions",
    "baseline": "--baseline",
    "decision_types": "--decision-types",
    "cluster": "--cluster",
    "timeout": "--timeout",
}
_REPLAY = {
    **{k: v for k, v in _READING.items() if k != "in_place"},
    "task": "--task",
    "session": "--session",
    "at": "--at",
    "spec": "--spec",
    "decision_types": "--decision-types",
}


def _text(value: Any) -> str:
    if isinstance(value, _dt.datetime):
        return value.isoformat()
    if isinstance(value, _dt.timedelta):
        return f"{int(value.total_seconds() * 1000)}ms"
    if isinstance(value, os.PathLike):
        return os.fspath(value)
    if isinstance(value, (list, tuple)):
        return ",".join(_text(v) for v in value)
    return str(value)


def _words(command: str, options: dict, known: dict, paths: Paths, config: Any) -> list:
    """The command line `hvaudit COMMAND ...` these arguments make."""
    unknown = sorted(set(options) - set(known))
    if unknown:
        raise TypeError(f"{command}() got unexpected keyword argument(s): {', '.join(unknown)}")
    words = [command]
    if config is None:
        words.append("--no-config")
    else:
        words.append("--config=" + _text(config))
    for name, value in options.items():
        if value is None or value is False:
            continue
        flag = known[name]
        if value is True:
            words.append(flag)
        else:
            words.append(f"{flag}={_text(value)}")
    if isinstance(paths, (str, os.PathLike)):
        paths = [paths]
    words.append("--")
    words.extend(os.fspath(p) for p in paths)
    return words


def _table(stream: Any) -> pa.Table:
    """A ``pyarrow.Table`` of an ``_hvaudit.ArrowStream``, imported through
    the Arrow C stream interface: its arrays point into the batches Rust
    computed, no buffer is copied."""
    if hasattr(pa.RecordBatchReader, "from_stream"):
        return pa.RecordBatchReader.from_stream(stream).read_all()
    # pyarrow 14 has the PyCapsule interface but not yet `from_stream`
    # (15) nor `pa.table` of a stream.
    return pa.RecordBatchReader._import_from_c_capsule(stream.__arrow_c_stream__()).read_all()


def _columns() -> Optional[int]:
    """`COLUMNS` as the CLI reads it (a number above 0), from Python's
    environment: the process's own may hold readline's."""
    try:
        columns = int(os.environ.get("COLUMNS", "").strip())
    except ValueError:
        return None
    return columns if columns > 0 else None


def to_polars(table: Any):
    """A ``polars.DataFrame`` of an Arrow table (``Report.findings``,
    ``hvaudit.sql(...)``, ...), sharing its memory where polars can."""
    import polars

    return polars.from_arrow(table)


def to_pandas(table: pa.Table):
    """A ``pandas.DataFrame`` of an Arrow table (``table.to_pandas()``)."""
    return table.to_pandas()


class Report:
    """An audit's outcome: the findings and the log's side tables as Arrow
    tables, the summary, the exit code, and the CLI's report formats."""

    def __init__(self, inner: "_hvaudit.Report") -> None:
        self._inner = inner

    @property
    def exit_code(self) -> int:
        """What ``hvaudit audit`` exits with: 0 clean, 1 findings at or above
        ``fail_on`` (or unused suppressions with
        ``error_on_unused_suppressions``)."""
        return self._inner.exit_code

    @property
    def rule_errors(self) -> list:
        """The rules that failed, as (rule, error) pairs (empty, or
        ``audit`` raised ``RuleError``)."""
        return list(self._inner.rule_errors)

    @functools.cached_property
    def summary(self) -> dict:
        """The JSON report (``--format json``) without its findings: inputs,
        span, counts, accounting, rules, rule errors and gate."""
        return json.loads(self._inner.summary_json())

    @functools.cached_property
    def findings(self) -> pa.Table:
        """One row per finding, the columns of ``--format parquet`` (the JSON
        report's finding fields)."""
        return _table(self._inner.findings_arrow())

    @functools.cached_property
    def inputs(self) -> pa.Table:
        """One row per input with its accounting (the JSON report's
        ``inputs``, every count a column even where it is zero)."""
        return _table(self._inner.inputs_arrow())

    @functools.cached_property
    def evidence(self) -> pa.Table:
        """The log's ``evidence`` table (as ``hvaudit sql`` shows it)."""
        return _table(self._inner.evidence_arrow())

    @functools.cached_property
    def bad_lines(self) -> pa.Table:
        """The log's ``bad_lines`` table: the rejected lines and why."""
        return _table(self._inner.bad_lines_arrow())

    def write(self, path: Union[str, "os.PathLike[str]"], format: str = "html") -> None:
        """Write the report to ``path`` as ``hvaudit audit --format FORMAT -o
        PATH`` does: text, json, jsonl, md, html, sarif, junit or parquet."""
        self._inner.write(os.fspath(path), format, _columns())

    def __repr__(self) -> str:
        return f"<hvaudit.Report: {self.findings.num_rows} findings, exit code {self.exit_code}>"


def audit(
    paths: Paths,
    *,
    rules: Optional[Union[str, Sequence[str]]] = None,
    exclude_rules: Optional[Union[str, Sequence[str]]] = None,
    rules_dir: Optional[Union[str, "os.PathLike[str]"]] = None,
    spec: Optional[str] = None,
    token_format: Optional[str] = None,
    fail_on: Optional[str] = None,
    fail_on_new: Optional[str] = None,
    suppressions: Optional[Union[str, "os.PathLike[str]"]] = None,
    error_on_unused_suppressions: bool = False,
    baseline: Optional[Union[str, "os.PathLike[str]"]] = None,
    since: Optional[Union[str, _dt.datetime]] = None,
    until: Optional[Union[str, _dt.datetime]] = None,
    horizon: Optional[Union[str, _dt.timedelta]] = None,
    decision_types: Optional[Union[str, Sequence[str]]] = None,
    memory_limit: Optional[Union[str, int]] = None,
    spill_dir: Optional[Union[str, "os.PathLike[str]"]] = None,
    in_place: bool = False,
    max_line_bytes: Optional[Union[str, int]] = None,
    max_bad_lines: Optional[int] = None,
    bad_lines: Optional[Union[str, "os.PathLike[str]"]] = None,
    allow_empty: bool = False,
    endpoint: Optional[str] = None,
    cluster: Optional[str] = None,
    timeout: Optional[Union[str, _dt.timedelta]] = None,
    config: Optional[Union[str, "os.PathLike[str]"]] = None,
    progress: bool = False,
) -> Report:
    """Audit logs as ``hvaudit audit PATHS`` does and return the report.

    paths: log files, directories (walked), globs, or s3:// gs:// az://
        https:// URLs; ``"-"`` is standard input.
    rules: rule id globs to run, comma-separated or a list; ``-GLOB``
        leaves rules out (``"*,-token.*"``). Default: every rule.
    exclude_rules: rule id globs to leave out.
    rules_dir: add rule files (and ``views/``) of your own.
    spec: ``"auto"`` (default: each task by its version field), ``"0.1"``
        or ``"0.2"``.
    token_format: ``"opaque"`` (default: never decoded) or ``"structured"``.
    fail_on: exit code 1 when a finding is at or above this severity
        (default ``"high"``); ``"none"``: never.
    fail_on_new: with ``baseline``: exit code 1 only for new findings at or
        above this severity.
    suppressions: a suppression file (TOML) of reviewed findings.
    error_on_unused_suppressions: exit code 1 when an entry matched nothing.
    baseline: an earlier ``--format json`` report: findings are marked new
        or unchanged.
    since, until: report only findings citing an event in the window
        (RFC 3339 text, or an aware datetime).
    horizon: flag a "never happened" wait only when this much log follows
        (``"5m"``, ``"PT5M"``).
    decision_types: event types that count as decisions.
    memory_limit: bytes or a size (``"2G"``): the engine spills beyond it,
        and a log whose table would not fit half of it is read through
        Parquet on disk (as the CLI does; without it, the machine's
        available memory decides, ``HVAUDIT_MEMORY_AVAILABLE`` standing in).
    spill_dir: an existing directory for spill files (default: the system
        temp directory).
    in_place: audit ``hvaudit convert``'s Parquet where it lies.
    max_line_bytes: reject longer lines (default ``"16M"``, at most ``"1G"``).
    max_bad_lines: rejected lines listed per input (default 1000).
    bad_lines: write every rejected line verbatim to this file.
    allow_empty: accept inputs without logs or events.
    endpoint: an S3-compatible store's endpoint for s3:// inputs.
    cluster: run on a Ballista cluster (``df://HOST:PORT``).
    timeout: with ``cluster``: give up after this long (``"45m"``).
    config: a configuration file (as ``--config``); None reads none (as
        ``--no-config``; neither ``HVAUDIT_CONFIG`` nor ``./hvaudit.toml``).
    progress: show the CLI's progress bars and summary on stderr.

    Raises UsageError, InputError or RuleError with the CLI's message. The
    GIL is released while the audit runs; Ctrl-C raises KeyboardInterrupt
    and stops it.
    """
    options = dict(locals())
    for name in ("paths", "config", "progress"):
        options.pop(name)
    words = _words("audit", options, _AUDIT, paths, config)
    report = Report(_hvaudit.audit(words, progress))
    if report.rule_errors:
        error = RuleError("\n".join(f"rule {r} failed: {e}" for r, e in report.rule_errors))
        error.report = report
        raise error
    return report


class Session:
    """A log read once and queried many times with SQL: the tables
    (``events``, ``evidence``, ``bad_lines``), views (``tasks``, ...) and
    JSON functions of ``hvaudit sql``."""

    def __init__(
        self,
        paths: Paths,
        *,
        token_format: Optional[str] = None,
        max_line_bytes: Optional[Union[str, int]] = None,
        max_bad_lines: Optional[int] = None,
        bad_lines: Optional[Union[str, "os.PathLike[str]"]] = None,
        memory_limit: Optional[Union[str, int]] = None,
        spill_dir: Optional[Union[str, "os.PathLike[str]"]] = None,
        allow_empty: bool = False,
        in_place: bool = False,
        endpoint: Optional[str] = None,
        progress: bool = False,
    ) -> None:
        options = dict(locals())
        for name in ("self", "paths", "progress"):
            options.pop(name)
        # `sql` reads no configuration file (as the CLI's `sql`, whose
        # options it could set, reads none of the audit's).
        words = _words("sql", options, _READING, paths, None)
        self._inner = _hvaudit.Session(words, progress)

    def sql(self, query: str) -> pa.Table:
        """Run ``query`` (several statements separated by ``;`` run in
        order) and return the last one's rows. Errors raise UsageError
        ("query failed: ..."); Ctrl-C cancels the query."""
        return _table(self._inner.sql(query))


def sql(paths: Paths, query: str, **reading_options: Any) -> pa.Table:
    """Read ``paths`` and run ``query`` on them as ``hvaudit sql PATHS -e
    QUERY`` does; ``reading_options`` are ``Session``'s."""
    return Session(paths, **reading_options).sql(query)


class Replay:
    """A task's tree (or a session) at an instant: ``tree``, ``timeline``,
    ``tokens`` and ``findings`` as tables, ``data`` as ``--format json``."""

    def __init__(self, inner: "_hvaudit.Replay") -> None:
        self._inner = inner

    @functools.cached_property
    def data(self) -> dict:
        """The replay as ``hvaudit replay --format json`` writes it."""
        return json.loads(self._inner.json())

    @functools.cached_property
    def tree(self) -> pa.Table:
        """One row per task, depth first, with its state at the instant."""
        return pa.Table.from_pylist(self.data["tasks"])

    @functools.cached_property
    def timeline(self) -> pa.Table:
        """The tasks' events in order."""
        return pa.Table.from_pylist(self.data["timeline"])

    @functools.cached_property
    def tokens(self) -> pa.Table:
        """Who held each handoff token (abbreviated)."""
        return pa.Table.from_pylist(self.data["tokens"])

    @functools.cached_property
    def findings(self) -> pa.Table:
        """The audit's findings touching these tasks."""
        return pa.Table.from_pylist(self.data["findings"])

    def write(self, path: Union[str, "os.PathLike[str]"], format: str = "html") -> None:
        """Write the replay as ``hvaudit replay --format FORMAT -o PATH``:
        text, json, html or md."""
        self._inner.write(os.fspath(path), format)


def replay(
    paths: Paths,
    *,
    task: Optional[str] = None,
    session: Optional[str] = None,
    at: Optional[Union[str, _dt.datetime]] = None,
    spec: Optional[str] = None,
    decision_types: Optional[Union[str, Sequence[str]]] = None,
    token_format: Optional[str] = None,
    max_line_bytes: Optional[Union[str, int]] = None,
    max_bad_lines: Optional[int] = None,
    bad_lines: Optional[Union[str, "os.PathLike[str]"]] = None,
    memory_limit: Optional[Union[str, int]] = None,
    spill_dir: Optional[Union[str, "os.PathLike[str]"]] = None,
    allow_empty: bool = False,
    endpoint: Optional[str] = None,
    progress: bool = False,
) -> Replay:
    """Replay ``task`` (its ancestors and descendants) or ``session`` at
    ``at`` (default: the end of the log), as ``hvaudit replay`` does."""
    options = dict(locals())
    for name in ("paths", "progress"):
        options.pop(name)
    words = _words("replay", options, _REPLAY, paths, None)
    return Replay(_hvaudit.replay(words, progress))
