#!/usr/bin/env bash
# GPU checks in one go (what the device call runs): the GPU test suite, then compute-sanitizer's
# memcheck, racecheck, synccheck and initcheck over representative shapes of every strategy.
# Usage: tests/run_gpu_checks.sh BUILD_DIR LOG_DIR [TEST_FILTER]
set -u -o pipefail
build=${1:-build}
logs=${2:-.}
filter=${3:-}
mkdir -p "$logs"
status=0
"$build/tests/rss_gpu_tests" $filter 2>&1 | tee "$logs/gpu_tests.log" | tail -25 || status=1
# Sanitizers: small but representative (multi-block rows, two launches, eviction-free odd widths).
for tool in memcheck racecheck synccheck initcheck; do
  compute-sanitizer --tool "$tool" --error-exitcode 9 "$build/tests/rss_gpu_tests" "[sanitize]" \
    > "$logs/sanitize_$tool.log" 2>&1
  rc=$?
  echo "compute-sanitizer $tool: exit $rc, $(grep -E 'ERROR SUMMARY|RACECHECK SUMMARY' "$logs/sanitize_$tool.log" | tail -1)"
  [ "$rc" -eq 0 ] || status=1
done
exit $status
