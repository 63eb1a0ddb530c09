#!/usr/bin/env bash
# Session 26: head (acc1d61 + the skeleton's additions), p1 (tile statistics through add_part) and p2 (p1 +
# add_part in compensated fp32), A B C C B A: fewrow_floor per few-row shape, then manyrow_ab. Logs to $OUT.
case "${1-}" in -h | --help) sed -n '2,/^[^#]/{/^[^#]/d;s/^# \{0,1\}//;p}' "$0"; exit 0 ;; esac
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
out=${OUT:-/tmp/out}; mkdir -p "$out/few" "$out/many"
for b in head p1 p2; do
  xz -dc "$here/ff_$b.xz" > "/tmp/ff_$b" && chmod +x "/tmp/ff_$b"
  xz -dc "$here/../many26/ab_$b.xz" > "/tmp/ab_$b" && chmod +x "/tmp/ab_$b"
done
nvidia-smi --query-gpu=name,uuid,driver_version --format=csv,noheader | tee "$out/gpu.txt"
IFS=';' read -r -a shapes <<< "${SHAPES:-64 131072 bf16;32 128256 bf16;64 131072 fp32;32 128256 fp32;8 131072 bf16}"
for s in "${shapes[@]}"; do
  i=0
  for b in head p1 p2 p2 p1 head; do
    i=$((i+1)); f="$out/few/$(echo $s | tr ' ' _)_${i}_$b.log"
    timeout 60 "/tmp/ff_$b" $s > "$f" 2>&1; echo "few $s $i $b exit $? at $SECONDS s"
  done
done
i=0
for b in head p1 p2 p2 p1 head; do
  [ $SECONDS -lt "${LIMIT:-560}" ] || break
  i=$((i+1))
  timeout 60 "/tmp/ab_$b" > "$out/many/ab_${i}_$b.log" 2>&1; echo "many run $i $b exit $? at $SECONDS s"
done
