#!/usr/bin/env bash
# Builds the benches of an earlier commit and of this tree side by side, for bench/ab/run.sh: OUT_DIR/old and
# OUT_DIR/new each get rss_bench, rss_backward_bench and rss_forward_statistics_bench (the last from this tree's
# bench/ab/forward_statistics_bench.cu against each tree's headers, so both measure the same harness). Needs no GPU.
#
# Usage: bench/ab/prepare.sh OLD_COMMIT OUT_DIR [CUDA_ARCHITECTURES]   (default architectures: 90)
#   then: bench/ab/run.sh OUT_DIR/old OUT_DIR/new RESULTS [ROUNDS] [FORWARD] [BACKWARD] [STATISTICS]
# The earlier commit is checked out in a temporary git worktree, removed at the end; builds go under OUT_DIR/build.
set -euo pipefail
case "${1-}" in -h | --help) sed -n '2,/^set /{/^set /d;s/^# \{0,1\}//;p}' "$0"; exit 0 ;; esac  # this header
old_commit=${1:?OLD_COMMIT}
out=${2:?OUT_DIR}
arch=${3:-90}
tree=$(cd "$(dirname "$0")/../.." && pwd)
git -C "$tree" rev-parse --verify --quiet "$old_commit^{commit}" > /dev/null || {
  echo "prepare.sh: $old_commit is not a commit of $tree" >&2
  exit 2
}
mkdir -p "$out/old" "$out/new" "$out/build"
out=$(cd "$out" && pwd)
worktree=$(mktemp -d "${TMPDIR:-/tmp}/rss-ab-old.XXXXXX")
trap 'git -C "$tree" worktree remove --force "$worktree" 2> /dev/null || rm -rf "$worktree"' EXIT
git -C "$tree" worktree add --detach --quiet "$worktree" "$old_commit"
jobs=$(nproc 2> /dev/null || echo 2)
build() {  # SOURCE_TREE NAME: its two benches with CMake, the statistics suite with nvcc
  local src=$1 name=$2 dir="$out/build/$2"
  cmake -S "$src" -B "$dir" -DCMAKE_BUILD_TYPE=Release -DRSS_BUILD_BENCH=ON -DRSS_BUILD_TESTS=OFF \
    -DRSS_BUILD_EXAMPLES=OFF -DCMAKE_CUDA_ARCHITECTURES="$arch" > "$dir.configure.log"
  cmake --build "$dir" -j "$jobs" --target rss_bench rss_backward_bench > "$dir.build.log"
  cp "$dir/bench/rss_bench" "$dir/bench/backward/rss_backward_bench" "$out/$name/"
  local gencode=()
  for a in ${arch//;/ }; do gencode+=("-gencode=arch=compute_$a,code=sm_$a"); done
  nvcc -O3 -std=c++17 "${gencode[@]}" -I "$src/include" "$tree/bench/ab/forward_statistics_bench.cu" \
    -lbenchmark -lpthread -o "$out/$name/rss_forward_statistics_bench"
  echo "prepare.sh: $name ($( [ "$name" = old ] && echo "$old_commit" || git -C "$tree" rev-parse --short HEAD)) built in $out/$name"
}
build "$worktree" old
build "$tree" new
