#!/usr/bin/env bash
# The same generated log audited from local disk and from an S3-compatible
# server on 127.0.0.1 (moto's, as the tests use), in one run: wall time of
# each and whether the JSON reports agree (file names aside). Then its
# Parquet: `convert` to a directory and to the server, and `--in-place` and
# loaded audits of each, whose findings must equal the NDJSON audit's.
#   benches/object_store.sh [SIZE]     (default: 1G)
# BIN=path/to/hvaudit to time a given binary (else the release build);
# BENCH_DIR keeps the generated log between runs. Needs
# `python3 -m pip install 'moto[server]'`.
set -euo pipefail
cd "$(dirname "$0")/.."
export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-$HOME/.cache/hvaudit-target}"
if [ -z "${BIN:-}" ]; then
  cargo build --release --quiet
  BIN="$CARGO_TARGET_DIR/release/hvaudit"
fi
SIZE="${1:-1G}"
WORK="${BENCH_DIR:-$(mktemp -d)}"
LOG="$WORK/synth-$SIZE.ndjson"
[ -e "$LOG" ] || "$BIN" synth --size "$SIZE" --seed 1 -o "$LOG" -q

PORT=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
coproc SERVER { exec python3 tests/support/s3_server.py "$PORT" bench 2>/dev/null; }
read -r ready <&"${SERVER[0]}"
[ "$ready" = ready ] || { echo "the S3 server did not start"; exit 1; }
export AWS_ACCESS_KEY_ID=bench AWS_SECRET_ACCESS_KEY=bench AWS_REGION=us-east-1
export AWS_ENDPOINT_URL="http://127.0.0.1:$PORT" AWS_ALLOW_HTTP=true AWS_EC2_METADATA_DISABLED=true
python3 - "$LOG" <<'PY'
import os, sys, boto3
s3 = boto3.client("s3", endpoint_url=os.environ["AWS_ENDPOINT_URL"], region_name="us-east-1")
s3.upload_file(sys.argv[1], "bench", "logs/" + os.path.basename(sys.argv[1]))
PY

timed() { # NAME OUT ARGS...: run an audit, print its wall time and peak RSS
  local name=$1 out=$2
  shift 2
  /usr/bin/time -f "%e %M" -o "$WORK/time" "$BIN" --no-config audit -q --format json \
    --fail-on none -o "$out" "$@"
  read -r secs kb <"$WORK/time"
  printf '  %-24s %8.2f s  %6.2f GiB peak\n' "$name" "$secs" "$(echo "$kb / 1048576" | bc -l)"
}
echo "== $SIZE NDJSON ($(du -sh "$LOG" | cut -f1)), one machine, $(nproc) cores"
for round in 1 2; do
  timed "local disk (round $round)" "$WORK/local.json" "$LOG"
  timed "S3 server (round $round)" "$WORK/s3.json" "s3://bench/logs/$(basename "$LOG")"
done
sed "s#$LOG#s3://bench/logs/$(basename "$LOG")#g" "$WORK/local.json" >"$WORK/local-as-s3.json"
python3 - "$WORK/local-as-s3.json" "$WORK/s3.json" <<'PY'
import json, sys
a, b = (json.load(open(p)) for p in sys.argv[1:])
same = a["findings"] == b["findings"] and a["inputs"] == b["inputs"]
print(f"  reports {'agree' if same else 'DIFFER'} ({len(a['findings'])} findings)")
sys.exit(0 if same else 1)
PY

convert() { # NAME OUT: convert the log, print wall time and peak RSS
  /usr/bin/time -f "%e %M" -o "$WORK/time" "$BIN" --no-config convert -q -o "$2" "$LOG"
  read -r secs kb <"$WORK/time"
  printf '  %-24s %8.2f s  %6.2f GiB peak\n' "$1" "$secs" "$(echo "$kb / 1048576" | bc -l)"
}
echo "== its Parquet"
rm -rf "$WORK/parquet"
convert "convert to disk" "$WORK/parquet"
convert "convert to S3" "s3://bench/parquet/"
timed "in place, disk" "$WORK/in-place.json" --in-place "$WORK/parquet"
timed "in place, S3" "$WORK/in-place-s3.json" --in-place "s3://bench/parquet/"
timed "loaded Parquet, S3" "$WORK/loaded-s3.json" "s3://bench/parquet/"
python3 - "$WORK/local.json" "$WORK/in-place.json" "$WORK/in-place-s3.json" "$WORK/loaded-s3.json" <<'PY'
import json, sys
prints = lambda p: sorted(f["fingerprint"] for f in json.load(open(p))["findings"])
base = prints(sys.argv[1])
for p in sys.argv[2:]:
    same = prints(p) == base
    print(f"  {p.rsplit('/', 1)[-1]}: {'same findings' if same else 'DIFFERENT findings'}")
    if not same:
        sys.exit(1)
PY
