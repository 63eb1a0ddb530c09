#!/usr/bin/env bash
# Session 25: the GPU checks of the fused exponential with per-program tile budgets, then manyrow_ab A B B A in the
# time left (each run about 22 s). Logs: $OUT/pending_logs.tar.xz, $OUT/many/.
case "${1-}" in -h | --help) sed -n '2,/^[^#]/{/^[^#]/d;s/^# \{0,1\}//;p}' "$0"; exit 0 ;; esac
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
out=${OUT:-/tmp/out}; mkdir -p "$out/many"
bash "$here/checks.sh"
many=$here/../many
for b in head new; do xz -dc "$many/ab_$b.xz" > "/tmp/ab_$b" && chmod +x "/tmp/ab_$b"; done
nvidia-smi --query-gpu=name,uuid,driver_version,clocks.max.sm,clocks.max.mem --format=csv,noheader > "$out/many/gpu.txt"
cat "$many/commits.txt" >> "$out/many/gpu.txt"
i=0
for b in head new new head new head; do
  [ $SECONDS -lt 545 ] || break
  i=$((i+1))
  timeout 40 "/tmp/ab_$b" > "$out/many/ab_${i}_$b.log" 2>&1; echo "many run $i $b exit $? at $SECONDS s"
done
for f in "$out"/many/ab_*.log; do echo "== $(basename $f)"; grep -E '64x131072|32x128256|4096x32768 bf16|16384x8192 bf16' "$f" | cut -c1-20,100-150; done
