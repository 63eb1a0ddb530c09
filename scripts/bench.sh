#!/usr/bin/env bash
# The README's main command: builds the benchmark suite, runs two measurement sessions (SPEC §4)
# with the torch peers when torch is importable, and rebuilds the report under bench/results/.
# Without a GPU it stops with a clear message. Arguments go to bench/tools/session.py (--help).
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
source scripts/setup.sh
build=${RSS_BUILD_DIR:-build-bench}

cmake -S . -B "$build" -DCMAKE_BUILD_TYPE=Release -DRSS_BUILD_TESTS=OFF -DRSS_BUILD_EXAMPLES=OFF
cmake --build "$build" -j "$(nproc)" --target rss_bench
if ! nvidia-smi -L >/dev/null 2>&1; then
  "$build/bench/rss_bench" || true  # prints the library's own no-device message
  echo "scripts/bench.sh: no NVIDIA GPU here; nothing was measured. Committed results: bench/results/results.md" >&2
  exit 2
fi
python3 bench/tools/session.py --build "$build" "$@"
