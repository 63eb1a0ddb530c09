#!/usr/bin/env bash
# Builds, on a machine without a GPU, what one device call needs to check the pending patches and run the
# floors: the patches (default: every dev/pending/*.mbox) applied in a scratch worktree of HEAD, the GPU test
# binaries that cover them (rss_gpu_tests, rss_backward_gpu_tests, rss_sharded_gpu_tests, rss_gpu_long_row_tests,
# rss_gpu_long_row_wait_test) and the diagnostics (dev/long_row_floor.cu, dev/fewrow_floor.cu,
# dev/long_row_dram.cu; dev/long_row_stamps.cu with its patch; long_row_floor once more from HEAD's headers, the
# A/B partner of the patched long_row) built for sm_90a, packed into one xz
# archive under .device/carry/ (git-ignored) with dev/device/pending_checks.sh beside it. Name
# `.device/carry` in the device tool's `carry` and run `bash .device/carry/pending_checks.sh` there. About 15
# minutes on two cores; the archive is about 25 MB.
# Usage: dev/device/build_pending.sh [PATCH.mbox...]
set -euo pipefail
case "${1-}" in -h | --help) sed -n '2,/^set /{/^set /d;s/^# \{0,1\}//;p}' "$0"; exit 0 ;; esac
cd "$(dirname "${BASH_SOURCE[0]}")/../.."
command -v nvcc >/dev/null 2>&1 || export PATH="/usr/local/cuda/bin:$PATH"
source dev/device/pending_tree.sh
pending_tree pending "$@"
cmake -S "$tree" -B "$tree/build" -DCMAKE_CUDA_ARCHITECTURES=90 -DRSS_REPORT_SPILLS=ON > "$work/configure.log"
cmake --build "$tree/build" -j "$(nproc)" --target rss_gpu_tests rss_backward_gpu_tests rss_sharded_gpu_tests \
  rss_gpu_long_row_tests rss_gpu_long_row_wait_test \
  > "$work/build.log" 2>&1 || { tail -40 "$work/build.log"; exit 1; }
python3 "$tree/tests/check_spills.py" "$work/build.log"
out=$work/pack/pending
mkdir -p "$out/tests/backward" "$out/tests/sharded" "$out/dev"
cp "$tree/build/tests/rss_gpu_tests" "$tree/build/tests/rss_gpu_long_row_tests" \
  "$tree/build/tests/rss_gpu_long_row_wait_test" "$out/tests/"
cp "$tree/build/tests/backward/rss_backward_gpu_tests" "$out/tests/backward/"
cp "$tree/build/tests/sharded/rss_sharded_gpu_tests" "$out/tests/sharded/"
flags=(-O3 -std=c++17 -gencode=arch=compute_90a,code=sm_90a -I "$tree/include" -I "$tree/bench")
for d in long_row_floor fewrow_floor long_row_dram; do
  nvcc "${flags[@]}" "$tree/dev/$d.cu" -o "$out/dev/$d"
done
# The phase stamps: the patched tree's headers with dev/long_row_stamps.patch applied, in a copy.
mkdir -p "$work/stamped"
cp -r "$tree/include" "$work/stamped/"
if (cd "$work/stamped" && patch -s -p1 --dry-run < "$tree/dev/long_row_stamps.patch" > /dev/null); then
  (cd "$work/stamped" && patch -s -p1 < "$tree/dev/long_row_stamps.patch")
  nvcc -O3 -std=c++17 -gencode=arch=compute_90a,code=sm_90a -I "$work/stamped/include" "$tree/dev/long_row_stamps.cu" \
    -o "$out/dev/long_row_stamps"
else
  echo "dev/long_row_stamps.patch does not apply to this long_row: no stamps (regenerate the patch)" >&2
fi
# The same floors against HEAD's long_row (the patches' A/B partner in the same call).
mkdir -p "$work/head"
git -C "$root" archive HEAD include | tar -x -C "$work/head"
nvcc -O3 -std=c++17 -gencode=arch=compute_90a,code=sm_90a -I "$work/head/include" -I "$tree/bench" \
  "$tree/dev/long_row_floor.cu" -o "$out/dev/long_row_floor_head"
git -C "$tree" log --oneline -n $((${#patches[@]} + 1)) > "$out/commits.txt"
mkdir -p "$root/.device/carry"
tar -cJf "$root/.device/carry/pending.tar.xz" -C "$work/pack" pending
cp "$root/dev/device/pending_checks.sh" "$root/.device/carry/"
ls -la "$root/.device/carry"
