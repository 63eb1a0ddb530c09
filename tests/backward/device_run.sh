#!/usr/bin/env bash
# The backward pass's GPU checks, for one device call (run from the repository root):
#   bash tests/backward/device_run.sh BUILD_DIR OUTDIR          C++ GPU tests, then the PyTorch tests
#   bash tests/backward/device_run.sh BUILD_DIR OUTDIR bench    the same, then bench/backward/run.sh
# BUILD_DIR holds tests/backward/rss_backward_gpu_tests (and bench/backward/rss_backward_bench for the bench).
# The PyTorch extension is built on first import into $TORCH_EXTENSIONS_DIR (default build-torch-ext/, which
# git ignores, so a warm machine keeps it). Each step is bounded in time; logs go to OUTDIR.
set -u
build=${1:?usage: tests/backward/device_run.sh BUILD_DIR OUTDIR [bench]}
out=${2:?usage: tests/backward/device_run.sh BUILD_DIR OUTDIR [bench]}
mkdir -p "$out"
export PYTHONUNBUFFERED=1
export TORCH_EXTENSIONS_DIR=${TORCH_EXTENSIONS_DIR:-$PWD/build-torch-ext}
export MAX_JOBS=${MAX_JOBS:-16}
step() {
  local limit=$1 name=$2
  shift 2
  local t0=$SECONDS
  timeout "$limit" "$@" > "$out/$name.log" 2>&1
  local rc=$?
  echo "$name: exit $rc in $((SECONDS - t0)) s: $(grep -aE 'passed|failed|skipped|error|FAILED' "$out/$name.log" | tail -n 2 | tr '\n' ' ')"
}
step 600 backward_gpu_tests "$build/tests/backward/rss_backward_gpu_tests"
step 900 backward_pytest python3 -m pytest -v -rs examples/03_pytorch/test_rss_torch.py
if [ "${3:-}" = bench ]; then
  BUILD_DIR=$build step 900 backward_bench bash bench/backward/run.sh "$out/bench"
  cat "$out/backward_bench.log" | tail -n 20
fi
