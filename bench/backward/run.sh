#!/usr/bin/env bash
# Backward bench: a session of rss_backward_bench (the backward strategies and the floors; records rss-records/2), then
# the torch peers (rssbench peers --suite backward: torch autograd backward, eager and compiled, with graph replay;
# forward+backward through the PyTorch operator against torch.compile), then the report (rssbench report build
# --suite backward).
# Builds nothing: the bench binary must exist.
#
#   bash bench/backward/run.sh OUTDIR
#
# Environment: BUILD_DIR (default build; the binary is $BUILD_DIR/bench/backward/rss_backward_bench, or set
# RSS_BACKWARD_BENCH), SHAPES, DTYPES (default fp32,bf16), ROUNDS (default 3), ITERATIONS
# (samples per round, default 50), BENCH_ARGS (more flags for the bench, e.g. --pilot), PEERS=0 skips peers,
# BENCH_TIMEOUT / PEERS_TIMEOUT (seconds, default 240 / 300: an interrupted peers run keeps the shapes it finished).
# Writes OUTDIR/raw/rss_backward.json, OUTDIR/raw/peers.json (an interrupted peers run: the shapes it finished),
# OUTDIR/summary.json, OUTDIR/results.md and the logs.
set -uo pipefail
case "${1-}" in -h | --help) sed -n '2,/^set /{/^set /d;s/^# \{0,1\}//;p}' "$0"; exit 0 ;; esac  # this header
out=${1:?usage: bench/backward/run.sh OUTDIR}
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
bench=${RSS_BACKWARD_BENCH:-${BUILD_DIR:-$root/build}/bench/backward/rss_backward_bench}
shapes=${SHAPES:-32x128256,4096x4096,16384x8192,4096x32768,1x131072,64x131072}
dtypes=${DTYPES:-fp32,bf16}
rounds=${ROUNDS:-3}
iterations=${ITERATIONS:-50}
mkdir -p "$out/raw"
if [ ! -x "$bench" ]; then
  echo "run.sh: no bench binary at $bench (build the rss_backward_bench target, or set RSS_BACKWARD_BENCH)" >&2
  exit 2
fi
timeout "${BENCH_TIMEOUT:-240}" "$bench" --session=1 --shapes="$shapes" --dtypes="$dtypes" --rounds="$rounds" \
  --iterations="$iterations" --out="$out/raw/rss_backward.json" ${BENCH_ARGS:-} > "$out/rss_backward.log" 2>&1
rc=$?
tail -n 5 "$out/rss_backward.log"
[ $rc -eq 0 ] || { echo "run.sh: rss_backward_bench failed (exit $rc), see $out/rss_backward.log" >&2; exit $rc; }
if [ "${PEERS:-1}" != 0 ]; then
  timeout "${PEERS_TIMEOUT:-300}" python3 "$root/bench/rssbench" peers --suite backward --shapes "$shapes" --dtypes "$dtypes" \
    --rounds "$rounds" --iterations "$iterations" --out "$out/raw/peers.json" > "$out/peers.log" 2>&1
  prc=$?
  tail -n 3 "$out/peers.log"
  if [ $prc -ne 0 ]; then
    echo "run.sh: the peers failed or timed out (exit $prc)" >&2
    if [ -f "$out/raw/peers.json.partial" ]; then mv "$out/raw/peers.json.partial" "$out/raw/peers.json"; fi
  fi
fi
python3 "$root/bench/rssbench" report build --suite backward --records "$out/raw" --out "$out"
