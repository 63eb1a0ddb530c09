#!/usr/bin/env bash
# The README's main command: builds the benchmark suite and measures it with the project's protocol
# (docs/protocol.md), then builds the report.
#
#   bash scripts/bench.sh            quick protocol (a few minutes): 1 session, 3 rounds x 10 samples,
#                                    6 shapes x fp32/bf16, no torch peers; report in build-bench/quick/
#   bash scripts/bench.sh --full     the full protocol (about an hour): 2 sessions (session 2 in reversed
#                                    shape order), 10 rounds x 30 samples, 10 shapes x fp32/bf16/fp16, the
#                                    torch peers when torch is importable; records and report in bench/results/
#
# Other arguments go to bench/tools/session.py (--help) and override the preset, e.g. --shapes 4096x4096.
# Without a GPU it stops with a clear message and exit code 2. RSS_BUILD_DIR: build folder (build-bench).
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

protocol=quick
args=()
for a in "$@"; do
  case "$a" in
    --full) protocol=full ;;
    --quick) protocol=quick ;;
    -h | --help) exec python3 bench/tools/session.py --help ;;
    *) args+=("$a") ;;
  esac
done

if ! nvidia-smi -L >/dev/null 2>&1; then
  echo "scripts/bench.sh: no NVIDIA GPU here (nvidia-smi finds none); nothing was built or measured." >&2
  echo "The committed results of the full protocol: bench/results/results.md" >&2
  exit 2
fi
source scripts/setup.sh benchmark
build=${RSS_BUILD_DIR:-build-bench}

cmake -S . -B "$build" -DCMAKE_BUILD_TYPE=Release -DRSS_BUILD_TESTS=OFF -DRSS_BUILD_EXAMPLES=OFF -DRSS_BUILD_BENCH=ON
cmake --build "$build" -j "$(nproc)" --target rss_bench
python3 bench/tools/session.py --build "$build" --protocol "$protocol" "${args[@]}"
