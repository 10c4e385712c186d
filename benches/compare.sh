#!/usr/bin/env bash
# Whole-process comparison: hvaudit against DuckDB on the same generated logs,
# in one run so the ratios share the machine's conditions.
#   [ROUNDS=N] benches/compare.sh [SIZES...]     (default: 100M 1G; median of N runs)
# Needs: python3 with duckdb (pip install duckdb); builds hvaudit --release.
set -euo pipefail
cd "$(dirname "$0")/.."
export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-$HOME/.cache/hvaudit-target}"
python3 -c 'import duckdb' 2>/dev/null || python3 -m pip install -q duckdb
# The benchmark needs no cluster support; leaving it out keeps the build small.
cargo build --release --no-default-features --quiet
BIN="$CARGO_TARGET_DIR/release/hvaudit"
WORK="${BENCH_DIR:-$(mktemp -d)}"
sizes=("$@")
[ ${#sizes[@]} -gt 0 ] || sizes=(100M 1G)
exec python3 benches/compare.py "$BIN" "$WORK" "${sizes[@]}"
