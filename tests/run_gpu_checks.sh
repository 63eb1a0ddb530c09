#!/usr/bin/env bash
# Runs the GPU tests and the sanitizers on this machine's GPU, straight from a build folder (scripts/test.sh
# or cmake with -DRSS_BUILD_TESTS=ON): every GPU test binary that ctest labels `gpu` (the backward's, and the
# sharded ones where NCCL was found), each with a time limit and its own log, then compute-sanitizer's
# memcheck, racecheck, synccheck and initcheck (compute-sanitizer from the CUDA toolkit, on PATH) over
# representative shapes of every strategy and control. It prints one line per check and exits 1 if any
# failed. It needs only the binaries, not ctest's recorded paths, so a build folder copied from another
# machine works too.
# Usage: tests/run_gpu_checks.sh [BUILD_DIR [LOG_DIR [all|tests|sanitizers]]]  (defaults: build, the current
# folder, all; tests or sanitizers runs one half: with two GPUs run both at once, each with its own
# CUDA_VISIBLE_DEVICES)
set -u -o pipefail
case "${1-}" in -h | --help) sed -n '2,/^set /{/^set /d;s/^# \{0,1\}//;p}' "$0"; exit 0 ;; esac  # this header
build=${1:-build}
logs=${2:-.}
part=${3:-all}
case "$part" in all | tests | sanitizers) ;; *) echo "unknown part '$part' (all, tests or sanitizers)" >&2; exit 2 ;; esac
mkdir -p "$logs"
status=0
run() {  # NAME LIMIT BINARY [ARGS...]: one test binary, its log, and its closing line
  local name=$1 limit=$2 binary=$3
  shift 3
  if [ ! -x "$binary" ]; then echo "$name: MISSING $binary"; status=1; return; fi
  local t0=$SECONDS
  timeout "$limit" "$binary" "$@" > "$logs/$name.log" 2>&1
  local rc=$?
  echo "$name: exit $rc in $((SECONDS - t0)) s: $(grep -E 'test cases|passed|failed' "$logs/$name.log" | tail -1)"
  [ "$rc" -eq 0 ] || status=1
}
if [ "$part" != sanitizers ]; then
  run gpu_strategies 600 "$build/tests/rss_gpu_tests"
  run gpu_megakernel 600 "$build/tests/rss_gpu_megakernel_tests" "~[stress]"
  run gpu_megakernel_stress 300 "$build/tests/rss_gpu_megakernel_tests" "[stress]"
  run gpu_reliability 900 "$build/tests/rss_gpu_reliability_tests"
  run gpu_refusal 120 "$build/tests/rss_gpu_refusal_tests"
  run gpu_long_row 600 "$build/tests/rss_gpu_long_row_tests"
  run gpu_long_row_bounded_wait 120 "$build/tests/rss_gpu_long_row_wait_test"
  run gpu_backward 900 "$build/tests/backward/rss_backward_gpu_tests"
  # Built only where NCCL was found; multicast stays off. The process-per-GPU test skips (77) on one GPU.
  if [ -x "$build/tests/sharded/rss_sharded_gpu_tests" ]; then
    export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
    # NCCL from PyTorch's wheel when there is one (as bench/sharded/device_run.sh does).
    if wheel=$(python3 -c 'import nvidia.nccl; print(list(nvidia.nccl.__path__)[0])' 2>/dev/null); then
      export LD_LIBRARY_PATH="$wheel/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
    fi
    run gpu_sharded_one_process 300 "$build/tests/sharded/rss_sharded_gpu_tests"
    run gpu_sharded_bounded_wait 120 "$build/tests/sharded/rss_sharded_wait_test"
    for t in "process_per_gpu 300 rss_sharded_mp_tests" "faults 900 rss_sharded_fault_tests"; do
      set -- $t
      t0=$SECONDS
      timeout "$2" "$build/tests/sharded/$3" > "$logs/gpu_sharded_$1.log" 2>&1
      rc=$?
      echo "gpu_sharded_$1: exit $rc in $((SECONDS - t0)) s$([ "$rc" -eq 77 ] && echo ' (skipped: one GPU)')"
      [ "$rc" -eq 0 ] || [ "$rc" -eq 77 ] || status=1
    done
  fi
fi
[ "$part" = tests ] && exit $status
# sanitize TOOL BINARY FILTER LOG: one compute-sanitizer run, its log kept, its summary line shown.
sanitize() {
  local t0=$SECONDS rc
  compute-sanitizer --tool "$1" --error-exitcode 9 "$build/tests/$2" "$3" > "$logs/$4.log" 2>&1
  rc=$?
  echo "compute-sanitizer $1 ($2 $3): exit $rc in $((SECONDS - t0)) s, $(grep -E 'ERROR SUMMARY|RACECHECK SUMMARY' "$logs/$4.log" | tail -1)"
  [ "$rc" -eq 0 ] || status=1
}
# Sanitizers: small but representative (multi-block rows, two launches, eviction-free odd widths).
for tool in memcheck racecheck synccheck initcheck; do
  sanitize "$tool" rss_gpu_tests "[sanitize]" "sanitize_$tool"
done
# long_row's streamed part, register parts (cut short too) and element-wise tiles need rows longer than the
# chip's shared memory: too long for racecheck, and global memory only (what racecheck checks, shared memory,
# [sanitize] covers).
if [ -x "$build/tests/rss_gpu_long_row_tests" ]; then
  for tool in memcheck synccheck initcheck; do
    sanitize "$tool" rss_gpu_long_row_tests "[layouts]" "sanitize_long_row_$tool"
    sanitize "$tool" rss_gpu_long_row_tests "[registers]" "sanitize_long_row_registers_$tool"
  done
fi
exit $status
