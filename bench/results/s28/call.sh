#!/usr/bin/env bash
# Session 28 (a record of what ran). Steps, one an argument: measure (fewrow_floor, main's build A against the
# patched build B, alternated; manyrow_ab of B: automatic against cudaMemcpyAsync); few (fewrow_floor A then B);
# pilot (rss_bench --pilot over PILOT_SHAPES, on an H200 only); checks (the GPU tests and four sanitizers of the
# patched build, then the sharded tests in one process). Logs in $OUT/c28.tar.xz, packed again after every step.
case "${1-}" in -h | --help) sed -n '2,/^[^#]/{/^[^#]/d;s/^# \{0,1\}//;p}' "$0"; exit 0 ;; esac
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
out=${OUT:-/tmp/out}; mkdir -p "$out"; logs=/tmp/c28logs; mkdir -p "$logs"
bin=/tmp/c28bin; mkdir -p "$bin"
nvidia-smi --query-gpu=name,uuid,driver_version,clocks.max.sm,clocks.max.mem --format=csv,noheader | tee -a "$logs/gpu.txt"
step() {
  local name=$1 limit=$2 t0=$SECONDS rc; shift 2
  timeout "$limit" "$@" > "$logs/$name.log" 2>&1; rc=$?
  echo "$name: exit $rc in $((SECONDS - t0)) s: $(tr '\r' '\n' < "$logs/$name.log" | grep -E 'test cases|passed|failed|SUMMARY|written' | tail -1)" | tee -a "$logs/summary.txt"
  pack
}
pack() { local t="$out/tmp_$BASHPID.tar.xz"; tar -cJf "$t" -C "$logs" . && mv -f "$t" "$out/c28.tar.xz"; }
trap pack EXIT
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
for mode in "$@"; do
case $mode in
measure)
  for b in manyrow_b fewrow_a fewrow_b; do xz -dc "$here/$b.xz" > "$bin/$b" && chmod +x "$bin/$b"; done
  step many_b1 60 "$bin/manyrow_b"
  step few_a1 150 "$bin/fewrow_a"; step few_b1 150 "$bin/fewrow_b"
  step few_a2 100 "$bin/fewrow_a" 32 128256 bf16; step few_b2 100 "$bin/fewrow_b" 32 128256 bf16
  ;;
few)
  for b in fewrow_a fewrow_b; do xz -dc "$here/$b.xz" > "$bin/$b" && chmod +x "$bin/$b"; done
  step few_a1 150 "$bin/fewrow_a"; step few_b1 150 "$bin/fewrow_b"
  ;;
pilot)
  if ! grep -q H200 "$logs/gpu.txt"; then echo "pilot: not an H200, skipped" | tee -a "$logs/summary.txt"; continue; fi
  xz -dc "$here/rss_bench.xz" > "$bin/rss_bench" && chmod +x "$bin/rss_bench"
  export LD_LIBRARY_PATH="$here/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
  shapes=${PILOT_SHAPES:-1x131072,8x131072,64x131072,32x128256,1x262144,4x151936,32x256000}
  step pilot10 ${PILOT_LIMIT:-300} "$bin/rss_bench" --pilot --session=1 --rounds=3 --iterations=10 --shapes=$shapes \
    --dtypes=fp32,bf16,fp16 --out="$logs/h200_pilot10.json"
  ;;
checks)
  tar -xJf "$here/tests.tar.xz" -C "$bin"
  if wheel=$(python3 -c 'import nvidia.nccl; print(list(nvidia.nccl.__path__)[0])' 2>/dev/null); then
    export LD_LIBRARY_PATH="$wheel/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
  fi
  ( step racecheck 330 compute-sanitizer --tool racecheck --error-exitcode 9 "$bin/rss_gpu_tests" "[sanitize]" ) &
  step gpu_strategies 330 "$bin/rss_gpu_tests"
  wait
  for tool in memcheck synccheck initcheck; do
    step "$tool" 60 compute-sanitizer --tool "$tool" --error-exitcode 9 "$bin/rss_gpu_tests" "[sanitize]"
  done
  [ -x "$bin/rss_backward_gpu_tests" ] && step gpu_backward 100 "$bin/rss_backward_gpu_tests"
  step gpu_sharded_one_process 80 "$bin/rss_sharded_gpu_tests"
  ;;
esac
done
cat "$logs/summary.txt"
