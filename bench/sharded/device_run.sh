#!/usr/bin/env bash
# Runs the sharded tests and bench on a machine with several GPUs, writing logs and records to OUTDIR.
#   bash bench/sharded/device_run.sh BINDIR OUTDIR [tests|bench|all] [bench options...]
# BINDIR holds rss_sharded_gpu_tests, rss_sharded_mp_tests and rss_sharded_bench built for this machine.
# NVLink multicast stays off in every process started from here.
set -uo pipefail
case "${1-}" in -h | --help) sed -n '2,/^set /{/^set /d;s/^# \{0,1\}//;p}' "$0"; exit 0 ;; esac  # this header
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
bin=$1 out=$2 what=${3:-all}
shift 3 || shift $#
mkdir -p "$out"
# NCCL 2.28.9 from PyTorch's wheel when there is one (the library the bench binaries load).
if wheel=$(python3 -c 'import nvidia.nccl; print(list(nvidia.nccl.__path__)[0])' 2>/dev/null); then
  export LD_LIBRARY_PATH="$wheel/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
fi
{
  date -u
  nvidia-smi -L
  nvidia-smi topo -m
  env | grep -E '^(NCCL_|TORCH_SYMM|NVSHMEM_)' | sort
  echo "LD_LIBRARY_PATH=$LD_LIBRARY_PATH"
} > "$out/machine.txt" 2>&1

rc=0
if [ "$what" = tests ] || [ "$what" = all ]; then
  timeout 200 "$bin/rss_sharded_gpu_tests" 2>&1 | tee "$out/test_one_process.log" | tail -25
  rc=$((rc | ${PIPESTATUS[0]}))
  timeout 200 "$bin/rss_sharded_mp_tests" 2>&1 | tee "$out/test_process_per_gpu.log" | tail -25
  rc=$((rc | ${PIPESTATUS[0]}))
fi
if [ "$what" = bench ] || [ "$what" = all ]; then
  timeout 240 "$bin/rss_sharded_bench" --out="$out/sharded_records.json" "$@" 2>&1 | tee "$out/bench.log"
  rc=$((rc | ${PIPESTATUS[0]}))
  timeout 240 python3 bench/rssbench peers --suite sharded --out "$out/torch_records.json" "$@" 2>&1 | tee "$out/torch.log"
  rc=$((rc | ${PIPESTATUS[0]}))
fi
exit $rc
