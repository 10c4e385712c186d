#!/usr/bin/env bash
# Local audits (loaded and --in-place) against a scheduler and two
# executors on 127.0.0.1, over the same Parquet, in one run: wall time of
# each and whether the JSON reports are identical.
#   benches/cluster.sh [SIZE]     (default: 1G)
# Builds hvaudit --release with the cluster feature (PROFILE=debug: the
# debug build instead, for trying the cluster path without a release build).
# Set BENCH_DIR to keep the generated log and its Parquet between runs.
set -euo pipefail
cd "$(dirname "$0")/.."
export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-$HOME/.cache/hvaudit-target}"
PROFILE="${PROFILE:-release}"
if [ -z "${BIN:-}" ]; then # BIN=path/to/hvaudit times a given binary
  if [ "$PROFILE" = debug ]; then cargo build --quiet; else cargo build --release --quiet; fi
  BIN="$CARGO_TARGET_DIR/$PROFILE/hvaudit"
fi
SIZE="${1:-1G}"
WORK="${BENCH_DIR:-$(mktemp -d)}"
LOG="$WORK/synth-$SIZE.ndjson"
PQ="$WORK/synth-$SIZE-parquet" # the same name as compare.py's
[ -e "$LOG" ] || "$BIN" synth --size "$SIZE" --seed 1 -o "$LOG" -q
[ -e "$PQ" ] || "$BIN" convert -q -o "$PQ" "$LOG"

pids=()
trap 'kill "${pids[@]}" 2>/dev/null || true' EXIT
port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'; }
SCHED=$(port)
"$BIN" scheduler --bind "127.0.0.1:$SCHED" 2>"$WORK/scheduler.log" &
pids+=($!)
for n in 1 2; do
  "$BIN" executor --scheduler "127.0.0.1:$SCHED" --port "$(port)" --grpc-port "$(port)" \
    --work-dir "$(mktemp -d -p "$WORK")" --vcores 1 2>"$WORK/executor-$n.log" &
  pids+=($!)
done
sleep 3

timed() { # NAME OUT CMD...: run CMD, print its wall time
  local name=$1 out=$2 start end
  shift 2
  start=$(date +%s.%N)
  "$@" --format json -o "$out" -q || [ $? -eq 1 ] # 1 = findings at --fail-on
  end=$(date +%s.%N)
  printf '  %-28s %8.2f s\n' "$name" "$(echo "$end - $start" | bc)"
}
echo "== $SIZE as Parquet ($(du -sh "$PQ" | cut -f1)), one machine, 2 cores"
timed "audit, local" "$WORK/local.json" "$BIN" audit "$PQ"
timed "audit, local --in-place" "$WORK/in-place.json" "$BIN" audit --in-place "$PQ"
timed "audit, 2-executor cluster" "$WORK/cluster.json" "$BIN" audit --cluster "df://127.0.0.1:$SCHED" "$PQ"
same=1
for other in in-place cluster; do
  cmp -s "$WORK/local.json" "$WORK/$other.json" || {
    echo "  JSON reports DIFFER: diff $WORK/local.json $WORK/$other.json"
    same=0
  }
done
[ $same = 1 ] || exit 1
echo "  JSON reports identical ($(python3 -c 'import json,sys; print(len(json.load(open(sys.argv[1]))["findings"]))' "$WORK/local.json") findings)"
