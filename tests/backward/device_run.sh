#!/usr/bin/env bash
# The backward pass's GPU checks (run from the repository root), each step bounded so that a device call
# (10 minutes at most) holds the default pair, or the bench alone:
#   bash tests/backward/device_run.sh BUILD_DIR OUTDIR               C++ GPU tests (4.5 min max), PyTorch tests (5 min max)
#   bash tests/backward/device_run.sh BUILD_DIR OUTDIR bench         bench/backward/run.sh (9.5 min max)
#   bash tests/backward/device_run.sh BUILD_DIR OUTDIR tests pytest bench   any steps, in order
# BUILD_DIR holds tests/backward/rss_backward_gpu_tests (and bench/backward/rss_backward_bench for the bench).
# The PyTorch extension is built on first import into $TORCH_EXTENSIONS_DIR (default build-torch-ext/, which
# git ignores, so a warm machine keeps it). Each step is bounded in time; logs go to OUTDIR.
set -u
build=${1:?usage: tests/backward/device_run.sh BUILD_DIR OUTDIR [tests] [pytest] [bench]}
out=${2:?usage: tests/backward/device_run.sh BUILD_DIR OUTDIR [tests] [pytest] [bench]}
shift 2
steps=("$@")
[ ${#steps[@]} -gt 0 ] || steps=(tests pytest)
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
for s in "${steps[@]}"; do
  case $s in
    tests) step 270 backward_gpu_tests "$build/tests/backward/rss_backward_gpu_tests" ;;
    pytest) step 300 backward_pytest python3 -m pytest -v -rs python/tests ;;
    bench)
      export BUILD_DIR=$build
      step 570 backward_bench bash bench/backward/run.sh "$out/bench"
      tail -n 20 "$out/backward_bench.log" ;;
    *) echo "device_run.sh: unknown step $s (tests, pytest, bench)" >&2 ;;
  esac
done
