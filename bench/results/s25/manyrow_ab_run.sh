#!/usr/bin/env bash
# A B B A A B of manyrow_ab (HEAD against HEAD + fused exponential), logs to $OUT: what ran on the GPU in the
# twenty-fifth session's first call, beside the xz-packed binaries of manyrow_ab.cu (a record, not a tool).
# Usage (device tool, carry the folder with ab_head.xz, ab_new.xz, commits.txt and this script): bash run.sh
case "${1-}" in -h | --help) sed -n '2,/^[^#]/{/^[^#]/d;s/^# \{0,1\}//;p}' "$0"; exit 0 ;; esac
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
out=${OUT:-/tmp/out}; mkdir -p "$out"
for b in head new; do xz -dc "$here/ab_$b.xz" > "/tmp/ab_$b" && chmod +x "/tmp/ab_$b"; done
nvidia-smi --query-gpu=name,uuid,driver_version,clocks.max.sm,clocks.max.mem --format=csv,noheader | tee "$out/gpu.txt"
cat "$here/commits.txt" | tee -a "$out/gpu.txt"
i=0
for b in head new new head head new; do
  i=$((i+1))
  timeout 200 "/tmp/ab_$b" > "$out/ab_${i}_$b.log" 2>&1; echo "run $i $b exit $?"
done
for f in "$out"/ab_*.log; do echo "== $(basename $f)"; cut -c1-150 "$f"; done
