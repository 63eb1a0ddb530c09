#!/usr/bin/env bash
# A/B of HEAD against HEAD with the pending patches, through two diagnostics built against each tree's headers:
# dev/fewrow_floor.cu on the few-row shapes, bench/results/s25/manyrow_ab.cu (automatic against cudaMemcpyAsync) on
# the many-row shapes.
#   dev/device/patch_ab.sh build [PATCH.mbox...]   here (no GPU; 4-7 minutes on two cores): the four binaries,
#                                                  xz-packed into .device/ab/ with this script beside them
#   bash .device/ab/patch_ab.sh few                on the GPU machine (device tool, carry .device/ab; about 2
#                                                  minutes): A B B A per shape (64 x 131072, 32 x 128256 in bf16
#                                                  and fp32, or SHAPES="ROWS COLS TYPE;..."), then ncu of both
#                                                  256 x 64 x 8 bf16 tile kernels (NCU=0: none); logs to $OUT
#   bash .device/ab/patch_ab.sh many               on the GPU machine (about 3 minutes): manyrow_ab A B A B over
#                                                  its shapes (or SHAPE="16384x8192 bf16", one); logs to $OUT
# The patches default to every dev/pending/*.mbox. A diagnostic that fails or times out is logged ("exit RC") and
# the rest still run.
set -euo pipefail
case "${1-}" in
  build)
    shift
    cd "$(dirname "${BASH_SOURCE[0]}")/../.."
    command -v nvcc >/dev/null 2>&1 || export PATH="/usr/local/cuda/bin:$PATH"
    source dev/device/pending_tree.sh
    pending_tree ab "$@"
    mkdir -p .device/ab
    flags=(-O3 -std=c++17 -gencode=arch=compute_90a,code=sm_90a)
    nvcc "${flags[@]}" -I include -I bench dev/fewrow_floor.cu -o "$work/ff_head" &
    nvcc "${flags[@]}" -I "$tree/include" -I "$tree/bench" "$tree/dev/fewrow_floor.cu" -o "$work/ff_new"
    wait
    nvcc "${flags[@]}" -I include bench/results/s25/manyrow_ab.cu -o "$work/mr_head" &
    nvcc "${flags[@]}" -I "$tree/include" bench/results/s25/manyrow_ab.cu -o "$work/mr_new"
    wait
    for b in ff_head ff_new mr_head mr_new; do xz -9 -c "$work/$b" > ".device/ab/$b.xz"; done
    { git log --oneline -1; git -C "$tree" log --oneline -n $((${#patches[@]} + 1)); } > .device/ab/commits.txt
    cp "$root/dev/device/patch_ab.sh" .device/ab/patch_ab.sh
    echo "packed .device/ab: $(du -sh .device/ab | cut -f1)"
    ;;
  few | many)
    here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
    out=${OUT:-/tmp/out}
    mkdir -p "$out"
    d=$([ "$1" = few ] && echo ff || echo mr)
    for b in head new; do xz -dc "$here/${d}_$b.xz" > "/tmp/${d}_$b" && chmod +x "/tmp/${d}_$b"; done
    nvidia-smi --query-gpu=name,uuid,driver_version --format=csv,noheader | tee "$out/gpu.txt" || true
    cat "$here/commits.txt" | tee -a "$out/gpu.txt"
    if [ "$1" = many ]; then
      for b in head new head new; do
        echo "== $b" >> "$out/many.log"
        rc=0
        timeout 120 "/tmp/mr_$b" ${SHAPE:+"$SHAPE"} >> "$out/many.log" 2>&1 || rc=$?
        echo "exit $rc" >> "$out/many.log"
      done
      grep -E "^== |ratio|exit [^0]" "$out/many.log" | cut -c1-120 || true
      exit 0
    fi
    IFS=';' read -r -a shapes <<< "${SHAPES:-64 131072 bf16;32 128256 bf16;64 131072 fp32;32 128256 fp32}"
    for s in "${shapes[@]}"; do
      for b in head new new head; do
        echo "== $b $s" >> "$out/ab.log"
        rc=0
        timeout 60 "/tmp/ff_$b" $s >> "$out/ab.log" 2>&1 || rc=$?
        echo "exit $rc" >> "$out/ab.log"
      done
    done
    grep -E "^== |cudaMemcpy|blocked|automatic runs|rss |async skeleton tile 256 x 64 x 8 |exit [^0]" "$out/ab.log" | cut -c1-120 || true
    [ "${NCU:-1}" = 0 ] && exit 0
    for b in head new; do
      rc=0
      FEWROW_ONCE=1 timeout 100 ncu --kernel-name-base mangled -k 'regex:tile_row_kernel.*bfloat16.*Li256ELNS_3FitE1ELi1E' \
        -c 1 --section SpeedOfLight --section InstructionStats --section WarpStateStats --csv "/tmp/ff_$b" 64 131072 bf16 \
        > "$out/ncu_$b.csv" 2>&1 || rc=$?
      echo "ncu $b: exit $rc"
      grep -E '"Duration"|"Executed Instructions"|"Issue Slots Busy"' "$out/ncu_$b.csv" | cut -c1-300 || true
    done
    ;;
  *)
    sed -n '2,/^set /{/^set /d;s/^# \{0,1\}//;p}' "$0"
    [ "${1-}" = -h ] || [ "${1-}" = --help ]
    ;;
esac
