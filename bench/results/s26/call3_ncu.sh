#!/usr/bin/env bash
# Session 26: ncu of rss's 256 x 64 x 8 bf16 tile (automatic on 64 x 131072 bf16) and the skeleton's tile of the same
# geometry (plain, and with the runs' sums in double tested once), one launch each: the details page and the
# per-instruction source page (SASS) with their stall samples.
case "${1-}" in -h | --help) sed -n '2,/^[^#]/{/^[^#]/d;s/^# \{0,1\}//;p}' "$0"; exit 0 ;; esac
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
out=${OUT:-/tmp/out}; mkdir -p "$out"
xz -dc "$here/ff_head.xz" > /tmp/ff_head && chmod +x /tmp/ff_head
nvidia-smi --query-gpu=name,uuid,driver_version --format=csv,noheader | tee "$out/gpu.txt"
prof() {  # NAME REGEX SKIP
  FEWROW_ONCE=1 timeout 150 ncu --kernel-name-base mangled -k "regex:$2" --launch-skip "$3" -c 1 \
    --section SpeedOfLight --section WarpStateStats --section InstructionStats --section SourceCounters \
    --import-source no -o "/tmp/$1" -f /tmp/ff_head 64 131072 bf16 > "$out/$1.log" 2>&1
  echo "$1: exit $?"
  ncu -i "/tmp/$1.ncu-rep" --page details --csv > "$out/$1_details.csv" 2>&1
  ncu -i "/tmp/$1.ncu-rep" --page source --csv --print-source sass > "$out/$1_sass.csv" 2>&1
  xz -9 "$out/$1_sass.csv"
}
prof rss 'tile_row_kernel.*bfloat16.*Li256ELNS_3FitE1ELi1E' 0
prof skeleton 'skeleton.*Li256ELi1ELb1ELb0ELi1ELi0EE' 2
prof skeleton_once 'skeleton.*Li256ELi1ELb1ELb0ELi1ELi4EE' 2
grep -hE '"(Duration|Executed Instructions|Issue Slots Busy|Warp Cycles Per Issued Instruction|Achieved Occupancy)"' "$out"/*_details.csv | cut -c1-220
ls -la "$out"
