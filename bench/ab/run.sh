#!/usr/bin/env bash
# Before/after on one GPU: two builds of the benches (an earlier tree's and this one's) measured alternately
# in one run, so that a refactoring or a kernel change is judged against the same GPU, clocks and inputs.
# Each round runs the forward suite (rss_bench), the backward suite (rss_backward_bench) and, when asked, the
# light forward suite, with and without row statistics (rss_forward_statistics_bench), of both trees, in the
# order A B in odd rounds and B A in even ones; every run writes Google Benchmark's JSON.
#
# Usage: bench/ab/run.sh OLD_DIR NEW_DIR OUT_DIR [ROUNDS] [FORWARD_FILTER] [BACKWARD_FILTER] [STATISTICS_FILTER]
#   OLD_DIR, NEW_DIR  folders holding rss_bench, rss_backward_bench (and rss_forward_statistics_bench) of the two
#                     trees; bench/ab/prepare.sh OLD_COMMIT DIR builds all three of both into DIR/old and DIR/new
#   ROUNDS            rounds (default 3)
#   FORWARD_FILTER    --benchmark_filter of the forward suite (default: cluster_row and automatic; - skips it)
#   BACKWARD_FILTER   --benchmark_filter of the backward suite (default: cluster_row, both saved states; - skips it)
#   STATISTICS_FILTER --benchmark_filter of the light forward suite (default: - , skipped; . runs all of it;
#                     '_statistics' the forward with statistics; '/cluster_row/' the plain forward's cluster_row).
#                     It computes no reference, so a round takes seconds: for the plain forward prefer it to
#                     FORWARD (rss_bench prepares every shape's reference, over a minute a tree and round)
# Environment: AB_ARGS, more flags for both suites (e.g. --benchmark_repetitions=3: every repetition is a
# sample); AB_FIRST_ROUND, the number of the first round (default 1; an even one starts with the new tree), so
# that a later call adds rounds to an earlier one's folder.
# Then: python3 bench/rssbench ab OUT_DIR  (medians and spread per benchmark, new against old).
set -u -o pipefail
case "${1-}" in -h | --help) sed -n '2,/^set /{/^set /d;s/^# \{0,1\}//;p}' "$0"; exit 0 ;; esac  # this header
old=${1:?OLD_DIR}
new=${2:?NEW_DIR}
out=${3:?OUT_DIR}
rounds=${4:-3}
forward_filter=${5:-'/(cluster_row|automatic)/'}
backward_filter=${6:-'/cluster_row(_saved)?/'}
statistics_filter=${7:--}
first=${AB_FIRST_ROUND:-1}
read -r -a extra <<< "${AB_ARGS:-}"
mkdir -p "$out"
nvidia-smi --query-gpu=uuid,name,clocks.sm,clocks.mem --format=csv,noheader > "$out/gpu.txt" 2>&1 || true
status=0
one() {  # TREE NAME ROUND: both suites of one tree
  local dir=$1 tree=$2 round=$3
  [ "$forward_filter" = - ] || "$dir/rss_bench" --benchmark_filter="$forward_filter" --benchmark_min_time=0.2 --benchmark_format=json "${extra[@]}" \
    --benchmark_out="$out/forward_${tree}_${round}.json" --benchmark_out_format=json > /dev/null 2> "$out/forward_${tree}_${round}.log" || status=1
  [ "$backward_filter" = - ] || "$dir/rss_backward_bench" --benchmark_filter="$backward_filter" --benchmark_format=json "${extra[@]}" \
    --benchmark_out="$out/backward_${tree}_${round}.json" --benchmark_out_format=json > /dev/null 2> "$out/backward_${tree}_${round}.log" || status=1
  [ "$statistics_filter" = - ] || "$dir/rss_forward_statistics_bench" --benchmark_filter="$statistics_filter" --benchmark_format=json "${extra[@]}" \
    --benchmark_out="$out/statistics_${tree}_${round}.json" --benchmark_out_format=json > /dev/null 2> "$out/statistics_${tree}_${round}.log" || status=1
  echo "round $round $tree: done at $SECONDS s"
}
for round in $(seq "$first" $((first + rounds - 1))); do
  if [ $((round % 2)) -eq 1 ]; then one "$old" old "$round"; one "$new" new "$round"
  else one "$new" new "$round"; one "$old" old "$round"; fi
done
exit $status
