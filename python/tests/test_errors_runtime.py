"""Errors map to the exceptions with the CLI's messages; the GIL is
released, Ctrl-C interrupts, and a log larger than memory takes the
spilled path."""

import _thread
import pathlib
import threading
import time

import pytest

import hvaudit

SAMPLES = "samples/incident"


def test_the_exceptions_are_one_family():
    for e in (hvaudit.UsageError, hvaudit.InputError, hvaudit.RuleError):
        assert issubclass(e, hvaudit.HvauditError)
        assert issubclass(e, Exception)


@pytest.mark.parametrize(
    "options, message",
    [
        ({"spec": "0.3"}, r"invalid value '0.3' for '--spec <SPEC>'"),
        ({"fail_on": "bogus"}, r"invalid value 'bogus' for '--fail-on <SEVERITY>'"),
        ({"memory_limit": "lots"}, r"is not a size"),
        ({"since": "yesterday"}, r"is not an RFC 3339 instant"),
        ({"rules": "nomatch.*"}, r"nomatch"),
        ({"timeout": "5s"}, r"--cluster"),
        ({"spill_dir": "/nonexistent/dir"}, r"is not a directory"),
    ],
)
def test_usage_errors_carry_the_cli_message(options, message, hvaudit_cli):
    with pytest.raises(hvaudit.UsageError, match=message):
        hvaudit.audit(SAMPLES, **options)


def test_a_usage_error_is_the_cli_error(hvaudit_cli):
    import os
    import subprocess

    from conftest import cli_binary

    with pytest.raises(hvaudit.UsageError) as caught:
        hvaudit.audit(SAMPLES, spec="0.3")
    done = subprocess.run(
        [str(cli_binary()), "--no-config", "audit", "--spec", "0.3", SAMPLES],
        capture_output=True,
        text=True,
        env={k: v for k, v in os.environ.items() if not k.startswith("HVAUDIT_")},
    )
    assert done.returncode == 2
    assert str(caught.value) in done.stderr


def test_unknown_keywords_are_type_errors():
    with pytest.raises(TypeError):
        hvaudit.audit(SAMPLES, colour=True)
    with pytest.raises(TypeError):
        hvaudit.sql(SAMPLES, "SELECT 1", spec="0.2")


def test_input_errors(tmp_path):
    with pytest.raises(hvaudit.InputError, match="no-such-log"):
        hvaudit.audit("no-such-log.ndjson")
    empty = tmp_path / "empty"
    empty.mkdir()
    with pytest.raises(hvaudit.InputError):
        hvaudit.audit(empty)
    with pytest.raises(hvaudit.InputError):
        hvaudit.sql("no-such-log.ndjson", "SELECT 1")
    (tmp_path / "blank.ndjson").write_text("\n")
    with pytest.raises(hvaudit.InputError, match="no events"):
        hvaudit.audit(tmp_path / "blank.ndjson")
    assert hvaudit.audit(tmp_path / "blank.ndjson", allow_empty=True).exit_code == 0


def test_a_broken_rule_file_is_a_rule_error(tmp_path):
    (tmp_path / "broken.sql").write_text(
        "-- id: custom.broken\n-- severity: high\n-- family: custom\n"
        "-- summary: broken\nSELECT FROM WHERE\n"
    )
    with pytest.raises(hvaudit.RuleError):
        hvaudit.audit(SAMPLES, rules_dir=tmp_path)


def test_a_log_larger_than_memory_takes_the_spilled_path(monkeypatch, capfd, tmp_path):
    loaded = hvaudit.audit(SAMPLES)
    # The CLI tests' stand-in for the machine's available memory.
    monkeypatch.setenv("HVAUDIT_MEMORY_AVAILABLE", "1K")
    spilled = hvaudit.audit(SAMPLES, spill_dir=tmp_path, progress=True)
    said = capfd.readouterr().err
    assert "would not fit" in said, said
    assert spilled.findings.equals(loaded.findings)
    assert spilled.summary == loaded.summary
    assert spilled.inputs.equals(loaded.inputs)
    assert spilled.evidence.num_rows == loaded.evidence.num_rows
    assert spilled.bad_lines.num_rows == loaded.bad_lines.num_rows
    assert list(tmp_path.iterdir()) == [], "the scratch directory is removed"
    # sql and replay too.
    session = hvaudit.Session(SAMPLES, spill_dir=tmp_path, progress=True)
    assert "would not fit" in capfd.readouterr().err
    n = session.sql("SELECT count(*) AS n FROM events WHERE version = 1").column("n")[0].as_py()
    assert n == loaded.summary["accounting"]["events"]
    del session
    assert list(tmp_path.iterdir()) == []
    task = next(t for t in loaded.findings.column("task_id").to_pylist() if t)
    replayed = hvaudit.replay(SAMPLES, task=task, spill_dir=tmp_path, progress=True)
    assert "would not fit" in capfd.readouterr().err
    monkeypatch.delenv("HVAUDIT_MEMORY_AVAILABLE")
    assert replayed.data == hvaudit.replay(SAMPLES, task=task).data


def test_progress_is_off_unless_asked(capfd):
    hvaudit.audit(SAMPLES)
    assert capfd.readouterr().err == ""
    hvaudit.audit(SAMPLES, progress=True)
    assert "hvaudit: read" in capfd.readouterr().err


def test_the_gil_is_released_while_an_audit_runs():
    done = threading.Event()
    ticks = 0

    def audit():
        hvaudit.audit(SAMPLES)
        done.set()

    worker = threading.Thread(target=audit)
    worker.start()
    while not done.is_set():
        ticks += 1
        time.sleep(0.001)
    worker.join()
    # Python ran alongside the audit the whole time (a held GIL would
    # leave a handful of ticks).
    assert ticks > 100


def test_ctrl_c_interrupts_an_audit_at_once():
    paths = [SAMPLES, "tests/fixtures/upstream"]
    started = time.monotonic()
    hvaudit.audit(paths, fail_on="none")
    whole = time.monotonic() - started
    timer = threading.Timer(0.2, _thread.interrupt_main)
    started = time.monotonic()
    timer.start()
    with pytest.raises(KeyboardInterrupt):
        hvaudit.audit(paths, fail_on="none")
        time.sleep(whole)  # reached only if the interrupt came late
    interrupted = time.monotonic() - started
    assert interrupted < min(whole, 0.2 + 0.5), (interrupted, whole)
    # The module still works afterwards.
    assert hvaudit.audit(SAMPLES).exit_code == 1


def _work_threads() -> int:
    """The module's worker threads alive in this process (named "hvaudit"
    by `wait` in python/src/run.rs; Linux names each in /proc)."""
    alive = 0
    for task in pathlib.Path("/proc/self/task").iterdir():
        try:
            alive += (task / "comm").read_text().strip() == "hvaudit"
        except FileNotFoundError:
            pass  # a thread that ended after the listing: not alive
    return alive


def test_ctrl_c_stops_the_audit_itself(tmp_path, hvaudit_cli):
    # A log whose audit takes seconds: interrupted early, its work (ingest,
    # then the rules) stops with the call, instead of running on unseen.
    log = tmp_path / "log.ndjson"
    code, _ = hvaudit_cli("synth", "--size", "250M", "--seed", "5", "-o", str(log))
    assert code == 0
    assert _work_threads() == 0
    for delay in (0.3, 2.5):  # while reading, and (mostly) while the rules run
        timer = threading.Timer(delay, _thread.interrupt_main)
        started = time.monotonic()
        timer.start()
        with pytest.raises(KeyboardInterrupt):
            hvaudit.audit(log, fail_on="none")
            time.sleep(60)  # reached only if the interrupt came after the audit
        # The worker is gone soon after, long before the audit would end.
        deadline = time.monotonic() + 3
        while _work_threads() and time.monotonic() < deadline:
            time.sleep(0.02)
        assert _work_threads() == 0, (delay, time.monotonic() - started)
    # And uninterrupted, the same audit takes longer than that.
    started = time.monotonic()
    hvaudit.audit(log, fail_on="none")
    assert time.monotonic() - started > 2.5 + 3


def test_ctrl_c_cancels_a_query():
    session = hvaudit.Session(SAMPLES)
    # Endless in practice: a hundred billion rows, in batches (each one a
    # point where the cancelled query stops).
    query = "SELECT count(*) FROM range(100000000000) WHERE value % 7 = 123"
    timer = threading.Timer(0.3, _thread.interrupt_main)
    started = time.monotonic()
    timer.start()
    with pytest.raises(KeyboardInterrupt):
        session.sql(query)
    assert time.monotonic() - started < 5
    assert session.sql("SELECT 1 AS one").to_pylist() == [{"one": 1}]
