#!/usr/bin/env bash
# The backward pass's GPU checks (run from the repository root), each step under a time limit so that the
# default pair ends within 10 minutes:
#   bash tests/backward/device_run.sh BUILD_DIR OUTDIR               C++ GPU tests (4.5 min max), PyTorch tests (5 min max)
#   bash tests/backward/device_run.sh BUILD_DIR OUTDIR bench         bench/backward/run.sh (9.5 min max)
#   bash tests/backward/device_run.sh BUILD_DIR OUTDIR tests pytest bench   any steps, in order
# BUILD_DIR holds tests/backward/rss_backward_gpu_tests (and bench/backward/rss_backward_bench for the bench).
# The PyTorch tests need the rss_torch package importable (pip install --no-build-isolation ./python).
# Each step's log goes to OUTDIR.
set -u
case "${1-}" in -h | --help) sed -n '2,/^set /{/^set /d;s/^# \{0,1\}//;p}' "$0"; exit 0 ;; esac  # this header
build=${1:?usage: tests/backward/device_run.sh BUILD_DIR OUTDIR [tests] [pytest] [bench]}
out=${2:?usage: tests/backward/device_run.sh BUILD_DIR OUTDIR [tests] [pytest] [bench]}
shift 2
steps=("$@")
[ ${#steps[@]} -gt 0 ] || steps=(tests pytest)
mkdir -p "$out"
export PYTHONUNBUFFERED=1
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
