#!/usr/bin/env bash
# Whole-process comparison: hvaudit against DuckDB on the same generated logs,
# in one run so the ratios share the machine's conditions.
#   [ROUNDS=N] [BIN=path/to/hvaudit] benches/compare.sh [SIZES...]
#   (default: 100M 1G; median of N runs)
# Builds hvaudit --release, unless BIN names a binary already built:
# then that one is timed and nothing is built. BENCH_DIR keeps the generated
# logs (and the 1 % versions log made from each) between runs.
# Needs duckdb for Python: python3's own if it has it, else the tests'
# virtual environment ($CARGO_TARGET_DIR/test-venv, made by
# `scripts/test --setup-only`). Nothing is installed into the system Python.
set -euo pipefail
cd "$(dirname "$0")/.."
export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-$HOME/.cache/hvaudit-target}"
PYTHON=python3
if ! python3 -c 'import duckdb' 2>/dev/null; then
  PYTHON="$CARGO_TARGET_DIR/test-venv/bin/python"
  if ! { [ -x "$PYTHON" ] && "$PYTHON" -c 'import duckdb' 2>/dev/null; }; then
    echo "benches/compare.sh: needs duckdb for Python; make the tests' environment, then run this again:" >&2
    echo "    CARGO_TARGET_DIR=$CARGO_TARGET_DIR scripts/test --setup-only" >&2
    exit 2
  fi
fi
if [ -n "${BIN:-}" ]; then
  [ -x "$BIN" ] || { echo "benches/compare.sh: BIN=$BIN is not an executable" >&2; exit 2; }
else
  # The benchmark needs no cluster support; leaving it out keeps the build small.
  cargo build --release --no-default-features --quiet
  BIN="$CARGO_TARGET_DIR/release/hvaudit"
fi
WORK="${BENCH_DIR:-$(mktemp -d)}"
sizes=("$@")
[ ${#sizes[@]} -gt 0 ] || sizes=(100M 1G)
# compare.py runs DuckDB with the Python that runs it (sys.executable).
exec "$PYTHON" benches/compare.py "$BIN" "$WORK" "${sizes[@]}"
