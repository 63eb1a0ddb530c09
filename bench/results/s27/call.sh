#!/usr/bin/env bash
# Session 27 (a record of what ran). measure: manyrow_ab once (rss automatic against cudaMemcpyAsync, many-row
# shapes), fewrow_floor over its shapes (skeletons, copies, rss automatic), launch_cost (empty kernels in rss's
# launch shapes). checks: the GPU tests and four sanitizers of the carried build (rss_gpu_reliability_tests was not
# carried, so its step did not run). The logs land in $OUT/c27_measure.tar.xz or $OUT/c27_checks.tar.xz, packed
# again after every step (the device returns few files).
case "${1-}" in -h | --help) sed -n '2,/^[^#]/{/^[^#]/d;s/^# \{0,1\}//;p}' "$0"; exit 0 ;; esac
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
out=${OUT:-/tmp/out}; mkdir -p "$out"; logs=/tmp/c27logs; rm -rf "$logs"; mkdir -p "$logs"
bin=/tmp/c27bin; mkdir -p "$bin"
nvidia-smi --query-gpu=name,uuid,driver_version,clocks.max.sm,clocks.max.mem --format=csv,noheader | tee "$logs/gpu.txt"
git log --oneline -1 | tee -a "$logs/gpu.txt"
step() {
  local name=$1 limit=$2 t0=$SECONDS rc; shift 2
  timeout "$limit" "$@" > "$logs/$name.log" 2>&1; rc=$?
  echo "$name: exit $rc in $((SECONDS - t0)) s: $(grep -E 'test cases|passed|failed|SUMMARY' "$logs/$name.log" | tail -1)" | tee -a "$logs/summary.txt"
  pack "$mode"  # after every step: a call cut short still returns what ran
}
pack() { local t="$out/tmp_$BASHPID.tar.xz"; tar -cJf "$t" -C "$logs" . && mv -f "$t" "$out/c27_$1.tar.xz"; }
trap 'pack ${mode:-x}' EXIT
mode=${1:-measure}
if [ "$mode" = measure ]; then
  for b in manyrow_ab fewrow_floor launch_cost; do xz -dc "$here/$b.xz" > "$bin/$b" && chmod +x "$bin/$b"; done
  step many_1 60 "$bin/manyrow_ab"
  step few 150 "$bin/fewrow_floor"
  step launch 60 "$bin/launch_cost"
  cat "$logs/launch.log"
  cut -c1-160 "$logs/many_1.log"
  grep -E 'MB each way|memcpy|blocked_copy|target|rss automatic' "$logs/few.log" | cut -c1-130 | head -80
else
  tar -xJf "$here/tests.tar.xz" -C "$bin"
  export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
  if wheel=$(python3 -c 'import nvidia.nccl; print(list(nvidia.nccl.__path__)[0])' 2>/dev/null); then
    export LD_LIBRARY_PATH="$wheel/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
  fi
  ( step racecheck 330 compute-sanitizer --tool racecheck --error-exitcode 9 "$bin/rss_gpu_tests" "[sanitize]" ) &
  step gpu_strategies 330 "$bin/rss_gpu_tests"
  wait
  for tool in memcheck synccheck initcheck; do
    step "$tool" 60 compute-sanitizer --tool "$tool" --error-exitcode 9 "$bin/rss_gpu_tests" "[sanitize]"
  done
  step gpu_backward 100 "$bin/rss_backward_gpu_tests"
  step gpu_sharded_one_process 80 "$bin/rss_sharded_gpu_tests"
  [ -x "$bin/rss_gpu_reliability_tests" ] && [ $SECONDS -lt 420 ] && step gpu_reliability $((560 - SECONDS)) "$bin/rss_gpu_reliability_tests"
  cat "$logs/summary.txt"
fi
