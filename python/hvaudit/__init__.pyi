"""hvaudit from Python: audits, SQL and replays of Harmovela / AEP agent
runtime event logs, with every result an Arrow table.

Options are the CLI's, spelled as keyword arguments (``--fail-on`` is
``fail_on``); ``None`` takes the CLI's default. They are parsed by the
CLI's own parser: same defaults, same validation, same messages.
"""

import datetime
import os
from typing import Any, Optional, Sequence, Union

import pyarrow

__version__: str

_Path = Union[str, "os.PathLike[str]"]
Paths = Union[_Path, Sequence[_Path]]

class HvauditError(Exception):
    """Any error hvaudit reports (the CLI exits 2 on it)."""

class UsageError(HvauditError):
    """An option the CLI would refuse: a wrong value, a conflict, an
    unknown rule glob, a configuration file's error. The message is the
    CLI's (it names the CLI's ``--option``)."""

class InputError(HvauditError):
    """The inputs cannot be read: no such file, no log, no events."""

class RuleError(HvauditError):
    """A rule file cannot be used (parse or plan error), or a rule failed
    while the audit ran; then ``error.report`` holds the incomplete report
    (exit code 2)."""

    report: "Report"

class Report:
    """An audit's outcome."""

    @property
    def exit_code(self) -> int:
        """What ``hvaudit audit`` would exit with: 0 clean (or findings
        below ``fail_on``, or all suppressed), 1 findings at or above
        ``fail_on`` (with ``fail_on_new``: new ones), or unused suppression
        entries with ``error_on_unused_suppressions``."""
    @property
    def rule_errors(self) -> list[tuple[str, str]]:
        """The rules that failed, as (rule, error)."""
    @property
    def summary(self) -> dict[str, Any]:
        """The JSON report (``--format json``) without ``findings``:
        ``inputs``, ``span``, ``counts`` (total, by_severity, by_rule,
        by_family), ``accounting``, ``rules``, ``rule_errors``, ``gate``."""
    @property
    def findings(self) -> pyarrow.Table:
        """One row per finding; the columns of ``--format parquet``, which
        are the JSON report's finding fields (rule, severity, family,
        message, task_id, agent, session_id, event_ids, locations, at,
        fingerprint, timeline, suppression, baseline_state). Polars:
        ``hvaudit.to_polars(report.findings)``; pandas:
        ``report.findings.to_pandas()``; DuckDB reads it by name."""
    @property
    def inputs(self) -> pyarrow.Table:
        """One row per input with its accounting (path, format, bytes,
        lines, events, redeliveries, bad_lines, ...)."""
    @property
    def evidence(self) -> pyarrow.Table:
        """The log's ``evidence`` table (decisions' evidence chains)."""
    @property
    def bad_lines(self) -> pyarrow.Table:
        """The log's ``bad_lines`` table: each rejected line and why."""
    def write(self, path: _Path, format: str = "html") -> None:
        """Write the report as ``hvaudit audit --format FORMAT -o PATH``
        does (the same renderer): ``text``, ``json``, ``jsonl``, ``md``,
        ``html``, ``sarif``, ``junit`` or ``parquet``. A file is replaced
        atomically."""

def audit(
    paths: Paths,
    *,
    rules: Optional[Union[str, Sequence[str]]] = None,
    exclude_rules: Optional[Union[str, Sequence[str]]] = None,
    rules_dir: Optional[_Path] = None,
    spec: Optional[str] = None,
    token_format: Optional[str] = None,
    fail_on: Optional[str] = None,
    fail_on_new: Optional[str] = None,
    suppressions: Optional[_Path] = None,
    error_on_unused_suppressions: bool = False,
    baseline: Optional[_Path] = None,
    since: Optional[Union[str, datetime.datetime]] = None,
    until: Optional[Union[str, datetime.datetime]] = None,
    horizon: Optional[Union[str, datetime.timedelta]] = None,
    decision_types: Optional[Union[str, Sequence[str]]] = None,
    memory_limit: Optional[Union[str, int]] = None,
    spill_dir: Optional[_Path] = None,
    in_place: bool = False,
    max_line_bytes: Optional[Union[str, int]] = None,
    max_bad_lines: Optional[int] = None,
    bad_lines: Optional[_Path] = None,
    allow_empty: bool = False,
    endpoint: Optional[str] = None,
    cluster: Optional[str] = None,
    timeout: Optional[Union[str, datetime.timedelta]] = None,
    config: Optional[_Path] = None,
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

class Session:
    """A log read once and queried many times: the tables (``events``,
    ``evidence``, ``bad_lines``), the rules' views (``tasks``, ...) and the
    JSON functions (``json_get_str``, ...) of ``hvaudit sql``."""

    def __init__(
        self,
        paths: Paths,
        *,
        token_format: Optional[str] = None,
        max_line_bytes: Optional[Union[str, int]] = None,
        max_bad_lines: Optional[int] = None,
        bad_lines: Optional[_Path] = None,
        memory_limit: Optional[Union[str, int]] = None,
        spill_dir: Optional[_Path] = None,
        allow_empty: bool = False,
        in_place: bool = False,
        endpoint: Optional[str] = None,
        progress: bool = False,
    ) -> None:
        """Read ``paths`` (as ``hvaudit sql PATHS``; the options as
        ``audit``'s). A log too large for ``memory_limit`` (or the
        machine) is read into Parquet in ``spill_dir`` and queried there
        for as long as the session lives."""
    def sql(self, query: str) -> pyarrow.Table:
        """Run ``query`` (several statements separated by ``;`` run in
        order) and return the last one's rows. Errors raise UsageError
        ("query failed: ..."); Ctrl-C cancels the query."""

def sql(paths: Paths, query: str, **reading_options: Any) -> pyarrow.Table:
    """``hvaudit sql PATHS -e QUERY``: read ``paths`` and return the rows of
    ``query`` (its last statement). ``reading_options`` are ``Session``'s."""

class Replay:
    """A task's tree (or a session's tasks) at an instant."""

    @property
    def data(self) -> dict[str, Any]:
        """Everything, as ``hvaudit replay --format json`` writes it."""
    @property
    def tree(self) -> pyarrow.Table:
        """One row per task, depth first (task_id, parent_task_id, depth,
        role, state, state_event, ...)."""
    @property
    def timeline(self) -> pyarrow.Table:
        """The tasks' events in order (seq, at, event_id, type, kind, ...,
        after_instant)."""
    @property
    def tokens(self) -> pyarrow.Table:
        """Who held each handoff token (abbreviated)."""
    @property
    def findings(self) -> pyarrow.Table:
        """The audit's findings touching these tasks."""
    def write(self, path: _Path, format: str = "html") -> None:
        """Write it as ``hvaudit replay --format FORMAT -o PATH``: text,
        json, html or md."""

def replay(
    paths: Paths,
    *,
    task: Optional[str] = None,
    session: Optional[str] = None,
    at: Optional[Union[str, datetime.datetime]] = None,
    spec: Optional[str] = None,
    decision_types: Optional[Union[str, Sequence[str]]] = None,
    token_format: Optional[str] = None,
    max_line_bytes: Optional[Union[str, int]] = None,
    max_bad_lines: Optional[int] = None,
    bad_lines: Optional[_Path] = None,
    memory_limit: Optional[Union[str, int]] = None,
    spill_dir: Optional[_Path] = None,
    allow_empty: bool = False,
    endpoint: Optional[str] = None,
    progress: bool = False,
) -> Replay:
    """Replay ``task`` (its ancestors and descendants) or ``session`` at
    ``at`` (default: the end of the log), as ``hvaudit replay`` does."""

def to_polars(table: Any) -> Any:
    """A ``polars.DataFrame`` of an Arrow table (polars.from_arrow)."""

def to_pandas(table: pyarrow.Table) -> Any:
    """A ``pandas.DataFrame`` of an Arrow table (``table.to_pandas()``)."""
