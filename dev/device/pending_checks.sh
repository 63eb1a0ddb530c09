#!/usr/bin/env bash
# Runs on the GPU machine what dev/device/build_pending.sh packed: first the floors on the quiet GPU
# (long_row_floor against HEAD's, A B B A; fewrow_floor with FEWROW=1), long_row's DRAM bytes under ncu (a plain
# launch, fp32 and bf16 on 1 x 2^24), the phase stamps, then long_row's tests, its bounded wait and memcheck,
# synccheck and initcheck over its [registers], [layouts] and [shapes] cases, rss_gpu_tests beside racecheck over
# `[sanitize]`, memcheck, synccheck and initcheck over `[sanitize]`, the backward tests and the sharded tests in
# one process (NCCL from PyTorch's wheel, multicast off). Every log
# goes into one archive, $OUT/pending_logs.tar.xz, rewritten after each step, so a call cut at its limit still
# returns what finished. About 8 minutes.
# Usage (device tool, carry .device/carry): bash .device/carry/pending_checks.sh
set -u -o pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
out=${OUT:-/tmp/out}
mkdir -p "$out"
work=/tmp/pending_run
rm -rf "$work" && mkdir -p "$work"
tar -xJf "$here/pending.tar.xz" -C "$work"
bin=$work/pending
logs=$work/logs
mkdir -p "$logs"
pack() { tar -cJf "$out/pending_logs.tar.xz" -C "$work" logs; }
step() {  # NAME LIMIT COMMAND...: one step, its log, its closing line
  local name=$1 limit=$2 t0=$SECONDS rc
  shift 2
  timeout "$limit" "$@" > "$logs/$name.log" 2>&1
  rc=$?
  echo "$name: exit $rc in $((SECONDS - t0)) s: $(grep -E 'test cases|passed|failed|SUMMARY|done' "$logs/$name.log" | tail -1)" | tee -a "$logs/summary.txt"
  pack
}
nvidia-smi --query-gpu=name,uuid,driver_version --format=csv,noheader | tee "$logs/summary.txt"
cat "$bin/commits.txt" >> "$logs/summary.txt"
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
if wheel=$(python3 -c 'import nvidia.nccl; print(list(nvidia.nccl.__path__)[0])' 2>/dev/null); then
  export LD_LIBRARY_PATH="$wheel/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
fi

step long_row_floor_head_a 120 "$bin/dev/long_row_floor_head"
step long_row_floor_a 120 "$bin/dev/long_row_floor"
step long_row_floor_b 120 "$bin/dev/long_row_floor"
step long_row_floor_head_b 120 "$bin/dev/long_row_floor_head"
[ "${FEWROW:-0}" = 1 ] && step fewrow_floor 180 "$bin/dev/fewrow_floor"
for t in fp32 bf16; do
  step "long_row_dram_$t" 120 ncu --profile-from-start off --metrics dram__bytes_read.sum,dram__bytes_write.sum \
    "$bin/dev/long_row_dram" "$t" 16777216 long_row plain
done
[ -x "$bin/dev/long_row_stamps" ] && step long_row_stamps 120 "$bin/dev/long_row_stamps"
step gpu_long_row 300 "$bin/tests/rss_gpu_long_row_tests"
step gpu_long_row_bounded_wait 120 "$bin/tests/rss_gpu_long_row_wait_test"
for f in registers layouts shapes; do
  for tool in memcheck synccheck initcheck; do
    step "${tool}_long_row_$f" 120 compute-sanitizer --tool "$tool" --error-exitcode 9 "$bin/tests/rss_gpu_long_row_tests" "[$f]"
  done
done
# The strategy tests beside racecheck (each about 250-300 s; they only share the GPU).
( step racecheck 420 compute-sanitizer --tool racecheck --error-exitcode 9 "$bin/tests/rss_gpu_tests" "[sanitize]" ) &
step gpu_strategies 420 "$bin/tests/rss_gpu_tests"
wait
for tool in memcheck synccheck initcheck; do
  step "$tool" 180 compute-sanitizer --tool "$tool" --error-exitcode 9 "$bin/tests/rss_gpu_tests" "[sanitize]"
done
step gpu_backward 300 "$bin/tests/backward/rss_backward_gpu_tests"
step gpu_sharded_one_process 300 "$bin/tests/sharded/rss_sharded_gpu_tests"
echo "done" | tee -a "$logs/summary.txt"
pack
