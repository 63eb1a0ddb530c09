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
# Other arguments go to `python3 bench/rssbench session` and override the preset, e.g. --shapes 4096x4096; a bad one
# stops it at once with exit code 2 (--help lists them). Without a GPU it stops with a clear message and exit
# code 2. RSS_BUILD_DIR: build folder (build-bench).
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

usage() {
  # the session command's own parser, not a copy of it (it imports without numpy); read first, printed last.
  local passed_on
  passed_on=$(PYTHONPATH=bench/rssbench python3 -c 'import session; print(session.parser(passed_on=True).format_help())' \
    2>/dev/null) || passed_on="  (python3 bench/rssbench session --help lists them)"
  cat <<'USAGE'
Usage: bash scripts/bench.sh [--quick | --full] [rssbench session options]

Builds rss_bench and measures it with the project's protocol (docs/protocol.md), then builds the report.
Needs an NVIDIA GPU: without one it stops with exit code 2 before building anything. It first sources
scripts/setup.sh benchmark, which as root installs what is missing (Google Benchmark, the Python packages of
requirements.txt) and as another user names it and stops.

  --quick     (the default) 1 session, 3 rounds x 10 samples, 6 shapes x fp32/bf16, no torch peers: a few
              minutes; records and report in build-bench/quick/ (the committed results are untouched)
  --full      the full protocol, about an hour: 2 sessions (session 2 in reversed shape order), 10 rounds x 30
              samples, 10 shapes x fp32/bf16/fp16, the torch peers when torch is importable; records and report
              in bench/results/
  -h, --help  this text

Environment: RSS_BUILD_DIR, the CMake build folder (default build-bench).

Every other option goes to `python3 bench/rssbench session` and overrides the preset, e.g. --shapes 4096x4096:
USAGE
  printf '%s\n' "$passed_on"
}

protocol=quick
args=()
for a in "$@"; do
  case "$a" in
    --full) protocol=full ;;
    --quick) protocol=quick ;;
    -h | --help) usage; exit 0 ;;
    --build | --build=*)  # session.py's --build would name a folder other than the one built here
      echo "scripts/bench.sh: --build is not passed on (this script builds rss_bench itself): set RSS_BUILD_DIR" >&2
      exit 2 ;;
    *) args+=("$a") ;;
  esac
done
# A bad option fails now, not after the GPU check and the build.
if [ "${#args[@]}" -gt 0 ]; then
  command -v python3 >/dev/null 2>&1 || { echo "scripts/bench.sh: python3 not found (Debian: apt-get install python3)" >&2; exit 1; }
  PYTHONPATH=bench/rssbench python3 -c \
    'import sys, session; session.parse_args(session.parser(passed_on=True), sys.argv[1:])' \
    --protocol "$protocol" "${args[@]}"
fi

if ! nvidia-smi -L >/dev/null 2>&1; then
  echo "scripts/bench.sh: no NVIDIA GPU here (nvidia-smi finds none); nothing was built or measured." >&2
  echo "The committed results of the full protocol: bench/results/results.md" >&2
  exit 2
fi
source scripts/setup.sh benchmark
build=${RSS_BUILD_DIR:-build-bench}

cmake -S . -B "$build" -DCMAKE_BUILD_TYPE=Release -DRSS_BUILD_TESTS=OFF -DRSS_BUILD_EXAMPLES=OFF -DRSS_BUILD_BENCH=ON
cmake --build "$build" -j "$(nproc)" --target rss_bench
python3 bench/rssbench session --build "$build" --protocol "$protocol" "${args[@]}"
