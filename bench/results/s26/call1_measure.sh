#!/usr/bin/env bash
# Session 26, call A: streamed stores (dev/pending/streamed-stores.mbox) against HEAD, on a quiet GPU.
# fewrow_floor A B B A per few-row shape (with the skeleton's one-at-a-time additions), then manyrow_ab A B B A.
case "${1-}" in -h | --help) sed -n '2,/^[^#]/{/^[^#]/d;s/^# \{0,1\}//;p}' "$0"; exit 0 ;; esac
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
out=${OUT:-/tmp/out}; mkdir -p "$out/many"
SHAPES="${SHAPES:-64 131072 bf16;32 128256 bf16;32 128256 fp32;8 131072 bf16}" NCU=0 bash "$here/../few/fewrow_ab.sh" run
echo "few done at $SECONDS s"
many=$here/../many26
for b in head new; do xz -dc "$many/ab_$b.xz" > "/tmp/ab_$b" && chmod +x "/tmp/ab_$b"; done
i=0
for b in head new new head; do
  [ $SECONDS -lt "${LIMIT:-540}" ] || break
  i=$((i+1))
  timeout 60 "/tmp/ab_$b" > "$out/many/ab_${i}_$b.log" 2>&1; echo "many run $i $b exit $? at $SECONDS s"
done
for f in "$out"/many/ab_*.log; do echo "== $(basename $f)"; cut -c1-150 "$f"; done
