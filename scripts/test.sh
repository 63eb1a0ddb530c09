#!/usr/bin/env bash
# The README's test command: installs what is missing, builds the tests and examples (not the bench),
# and runs the tests. With a GPU it runs everything; without one it runs the CPU tests and says which
# GPU tests (label gpu) were not run. RSS_BUILD_DIR picks the build folder (default build).
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
source scripts/setup.sh catch2
build=${RSS_BUILD_DIR:-build}

cmake -S . -B "$build" -DCMAKE_BUILD_TYPE=Release -DRSS_BUILD_TESTS=ON -DRSS_BUILD_EXAMPLES=ON -DRSS_BUILD_BENCH=OFF
# A first answer fast: the host-only tests (label host: the CPU reference, the planners, validation, the tools'
# checks) compile no kernel, so they build and run first; then everything else builds and the other tests run.
host_targets=()
targets=$(cmake --build "$build" --target help)
for t in rss_cpu_tests rss_backward_cpu_tests rss_sharded_cpu_tests; do  # the sharded one only where NCCL is found
  if grep -qw "$t" <<< "$targets"; then host_targets+=("$t"); fi
done
cmake --build "$build" -j "$(nproc)" --target "${host_targets[@]}"
ctest --test-dir "$build" --output-on-failure -L host
echo "Host-only tests passed; now building the GPU tests and the examples."
cmake --build "$build" -j "$(nproc)"
if nvidia-smi -L >/dev/null 2>&1; then
  ctest --test-dir "$build" --output-on-failure -LE host
else
  ctest --test-dir "$build" --output-on-failure -LE 'gpu|host'
  echo
  echo "NOT RUN: the GPU tests (label gpu), because this machine has no GPU:"
  ctest --test-dir "$build" -N -L gpu | sed -n 's/^ *\(Test *#.*\)$/    \1/p'
  echo "On a machine with an NVIDIA GPU, scripts/test.sh runs them too."
fi
