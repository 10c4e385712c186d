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
# What one cluster audit asks of the cluster: jobs (the scheduler's log),
# stages and tasks (the executors' logs: "Execute task : [TID JOB/STAGE.
# ATTEMPT/PARTITION.ATTEMPT]"), and the bytes the executors wrote to disk
# (shuffle files and the materialized views: /proc/PID/io write_bytes).
EXECUTOR_LOGS=("$WORK/executor-1.log" "$WORK/executor-2.log")
written() {
  local total=0 pid
  for pid in "${pids[@]:1}"; do
    total=$((total + $(awk '/^write_bytes/ {print $2}' "/proc/$pid/io")))
  done
  echo "$total"
}
on_cluster() { # NAME OUT: a cluster audit, timed, then its jobs, stages, tasks and bytes
  local name=$1 out=$2 jobs lines bytes
  jobs=$(grep -ac 'Job queued' "$WORK/scheduler.log" || true)
  lines=$(cat "${EXECUTOR_LOGS[@]}" | wc -l)
  bytes=$(written)
  timed "$name" "$out" "$BIN" audit --cluster "df://127.0.0.1:$SCHED" "$PQ"
  jobs=$(($(grep -ac 'Job queued' "$WORK/scheduler.log" || true) - jobs))
  bytes=$(($(written) - bytes))
  cat "${EXECUTOR_LOGS[@]}" | tail -n +"$((lines + 1))" | grep -ao 'Execute task *: \[TID [^]]*' |
    sed 's/.*TID //' | awk -F/ -v jobs="$jobs" -v bytes="$bytes" '
      { split($2, stage, "."); stages[$1 "/" stage[1]] = 1; tasks++ }
      END { printf "    %d jobs, %d stages, %d tasks, %.0f MB written by the executors\n",
              jobs, length(stages), tasks, bytes / 1e6 }'
}
# Ballista's own plans (16 partitions, sort-merge joins), then the client's
# (docs/cluster.md, "The client's plans").
BALLISTA_PLANS="datafusion.execution.target_partitions=16,datafusion.optimizer.prefer_hash_join=false"
HVAUDIT_SESSION_SETTINGS="$BALLISTA_PLANS" on_cluster "cluster, Ballista's plans" "$WORK/cluster-ballista.json"
on_cluster "audit, 2-executor cluster" "$WORK/cluster.json"
same=1
for other in in-place cluster-ballista cluster; do
  cmp -s "$WORK/local.json" "$WORK/$other.json" || {
    echo "  JSON reports DIFFER: diff $WORK/local.json $WORK/$other.json"
    same=0
  }
done
[ $same = 1 ] || exit 1
echo "  JSON reports identical ($(python3 -c 'import json,sys; print(len(json.load(open(sys.argv[1]))["findings"]))' "$WORK/local.json") findings)"
