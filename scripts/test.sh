#!/usr/bin/env bash
# The README's test command: installs what is missing, builds the tests and examples (not the bench),
# and runs the tests. With a GPU it runs everything; without one it runs the CPU tests and says which
# GPU tests (label gpu) were not run. Where python3 has torch with a GPU, it also builds the PyTorch package
# (python/) and runs its tests; elsewhere it says why not. RSS_BUILD_DIR picks the build folder (default build);
# RSS_REPORT_SPILLS=ON has ptxas warn about every kernel that spills registers (CI checks the log with
# tests/check_spills.py).
# On 2 cores: the host-only tests answer after about a minute; the whole build takes 12 to 15 minutes.
set -euo pipefail
case "${1-}" in
  "") ;;
  -h | --help) sed -n '2,/^set /{/^set /d;s/^# \{0,1\}//;p}' "$0"; exit 0 ;;
  *) echo "scripts/test.sh: unknown argument '$1' (it takes none; --help says what it does)" >&2; exit 2 ;;
esac
cd "$(dirname "${BASH_SOURCE[0]}")/.."
source scripts/setup.sh catch2
build=${RSS_BUILD_DIR:-build}

cmake -S . -B "$build" -DCMAKE_BUILD_TYPE=Release -DRSS_BUILD_TESTS=ON -DRSS_BUILD_EXAMPLES=ON -DRSS_BUILD_BENCH=OFF \
  -DRSS_REPORT_SPILLS="${RSS_REPORT_SPILLS:-OFF}"
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

# The PyTorch package (python/): where python3 has torch and torch sees a GPU, this tree's package is built for
# that GPU into the build folder (not into the environment) and its tests run against it.
echo
if ! python3 -c "import torch" >/dev/null 2>&1; then
  echo "NOT RUN: the PyTorch package's tests (python/tests), because python3 has no torch."
elif ! python3 -c "import sys, torch; sys.exit(0 if torch.cuda.is_available() else 1)" >/dev/null 2>&1; then
  echo "NOT RUN: the PyTorch package's tests (python/tests), because torch sees no CUDA device."
else
  site="$build/rss_torch_site"
  arch=$(python3 -c "import torch; print('%d.%d' % torch.cuda.get_device_capability())")
  TORCH_CUDA_ARCH_LIST="${TORCH_CUDA_ARCH_LIST:-$arch}" python3 -m pip install --no-index --no-build-isolation \
    --no-deps --upgrade --target "$site" ./python
  PYTHONPATH="$site${PYTHONPATH:+:$PYTHONPATH}" python3 -m pytest -q -rs -p no:cacheprovider python/tests
fi
