#!/usr/bin/env bash
# Backward bench: rss_backward_bench (the backward strategies and the floor, Google Benchmark JSON), then the
# torch peers (rssbench peers --suite backward: torch autograd backward, eager and compiled, with graph replay;
# forward+backward through the PyTorch operator against torch.compile), then the summary (rssbench backward).
# Builds nothing: the bench binary must exist.
#
#   bash bench/backward/run.sh OUTDIR
#
# Environment: BUILD_DIR (default build; the binary is $BUILD_DIR/bench/backward/rss_backward_bench, or set
# RSS_BACKWARD_BENCH), SHAPES, DTYPES (default fp32,bf16), ROUNDS (repetitions, default 3), ITERATIONS
# (samples per round, default 50), BENCH_ARGS (more flags for the bench, e.g. --pilot), PEERS=0 skips peers,
# BENCH_TIMEOUT / PEERS_TIMEOUT (seconds, default 240 / 300: an interrupted peers run keeps the shapes it finished).
# Writes OUTDIR/rss_backward.json, OUTDIR/peers.json, OUTDIR/summary.json, OUTDIR/results.md and their logs.
set -uo pipefail
out=${1:?usage: bench/backward/run.sh OUTDIR}
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
bench=${RSS_BACKWARD_BENCH:-${BUILD_DIR:-$root/build}/bench/backward/rss_backward_bench}
shapes=${SHAPES:-32x128256,4096x4096,16384x8192,4096x32768,1x131072,64x131072}
dtypes=${DTYPES:-fp32,bf16}
rounds=${ROUNDS:-3}
iterations=${ITERATIONS:-50}
mkdir -p "$out"
if [ ! -x "$bench" ]; then
  echo "run.sh: no bench binary at $bench (build the rss_backward_bench target, or set RSS_BACKWARD_BENCH)" >&2
  exit 2
fi
timeout "${BENCH_TIMEOUT:-240}" "$bench" --shapes="$shapes" --dtypes="$dtypes" --iterations="$iterations" \
  --benchmark_repetitions="$rounds" --benchmark_enable_random_interleaving=true \
  --benchmark_out="$out/rss_backward.json" --benchmark_out_format=json ${BENCH_ARGS:-} > "$out/rss_backward.log" 2>&1
rc=$?
tail -n 5 "$out/rss_backward.log"
[ $rc -eq 0 ] || { echo "run.sh: rss_backward_bench failed (exit $rc), see $out/rss_backward.log" >&2; exit $rc; }
peers=()
if [ "${PEERS:-1}" != 0 ]; then
  timeout "${PEERS_TIMEOUT:-300}" python3 "$root/bench/rssbench" peers --suite backward --shapes "$shapes" --dtypes "$dtypes" \
    --rounds "$rounds" --iterations "$iterations" --out "$out/peers.json" > "$out/peers.log" 2>&1
  prc=$?
  tail -n 3 "$out/peers.log"
  if [ $prc -eq 0 ]; then
    peers=(--peers "$out/peers.json")
  else
    echo "run.sh: the peers failed or timed out (exit $prc)" >&2
    if [ -f "$out/peers.json.partial" ]; then peers=(--peers "$out/peers.json.partial"); fi
  fi
fi
python3 "$root/bench/rssbench" backward --rss "$out/rss_backward.json" "${peers[@]}" --out "$out/summary.json" --report "$out/results.md"
