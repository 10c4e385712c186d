"""Shared fixtures: the repository, the CLI binary the findings are
compared with, and a runner for it."""

import json
import os
import pathlib
import signal
import subprocess

import pytest

REPO = pathlib.Path(__file__).resolve().parents[2]

# The Ctrl-C tests raise KeyboardInterrupt with `_thread.interrupt_main`,
# which does nothing while SIGINT is ignored, as it is in a process a
# non-interactive shell started in the background (`.ci/run &`).
signal.signal(signal.SIGINT, signal.default_int_handler)


def cli_binary() -> pathlib.Path:
    """The CLI built by `cargo test`/`cargo build`: HVAUDIT_BIN, else
    $CARGO_TARGET_DIR/debug/hvaudit, else target/debug/hvaudit."""
    if os.environ.get("HVAUDIT_BIN"):
        return pathlib.Path(os.environ["HVAUDIT_BIN"])
    target = os.environ.get("CARGO_TARGET_DIR") or str(REPO / "target")
    return pathlib.Path(target) / "debug" / "hvaudit"


@pytest.fixture(scope="session")
def repo() -> pathlib.Path:
    return REPO


@pytest.fixture(autouse=True)
def in_repo(monkeypatch):
    # Inputs are named relative to the repository, as the README's
    # commands name them: the reports' paths then match the CLI's.
    monkeypatch.chdir(REPO)
    monkeypatch.delenv("HVAUDIT_MEMORY_AVAILABLE", raising=False)
    monkeypatch.delenv("HVAUDIT_CONFIG", raising=False)


@pytest.fixture(scope="session")
def hvaudit_cli():
    """Run the CLI (`--no-config`, quiet) in the repository; returns
    (exit code, stdout bytes)."""
    binary = cli_binary()
    if not binary.exists():
        pytest.fail(f"no CLI binary at {binary}; run `cargo build` (or set HVAUDIT_BIN)")
    env = {k: v for k, v in os.environ.items() if not k.startswith("HVAUDIT_")}

    def run(*args: str):
        done = subprocess.run(
            [str(binary), "--no-config", *args, "-q"],
            cwd=REPO,
            env=env,
            capture_output=True,
            timeout=600,
        )
        return done.returncode, done.stdout

    return run


@pytest.fixture(scope="session")
def cli_json(hvaudit_cli):
    """The CLI's JSON report of `hvaudit audit PATHS... --format json`."""

    def report(*paths: str):
        code, out = hvaudit_cli("audit", *paths, "--format", "json")
        return code, out, json.loads(out)

    return report
