#!/usr/bin/env bash
# Runs a series of checks or measurements on this machine's GPU, each with a time limit and its own log, with
# a one-line summary each. Source it, then call step once per check:
#
#   OUT=/tmp/my-logs source bench/device_trial.sh      # from the repository root; OUT default /tmp/rss-out
#   step 1800 gpu_tests bash tests/run_gpu_checks.sh build /tmp/rss-gpu-logs
#   step 600 bench_4096 build-bench/bench/rss_bench --benchmark_filter=4096x4096
#
# step LIMIT NAME COMMAND...: runs COMMAND under `timeout LIMIT` (seconds), its output in $OUT/NAME.log, and
# prints "NAME: exit RC in S s: " and the log's last lines with passed, failed, PASS, FAIL or error (exit 124:
# the time limit). Shared libraries in ./.device/lib (git ignores it: for libraries the system lacks, e.g. a
# newer NCCL) come first on LD_LIBRARY_PATH; Python output is unbuffered. Run on its own, it prints this text.
if [[ "${BASH_SOURCE[0]}" == "$0" ]]; then
  sed -n '2,/^if /{/^if /d;s/^# \{0,1\}//;p}' "$0"
  exit 0
fi
set -u
out=${OUT:-/tmp/rss-out}
mkdir -p "$out"
export LD_LIBRARY_PATH=$PWD/.device/lib:${LD_LIBRARY_PATH:-}
export PYTHONUNBUFFERED=1
step() { local limit=$1 name=$2; shift 2; local t0=$SECONDS
  timeout "$limit" "$@" > "$out/$name.log" 2>&1; local rc=$?
  echo "$name: exit $rc in $((SECONDS - t0)) s: $(tr '\r' '\n' < "$out/$name.log" | grep -E 'passed|failed|records written|PASS|FAIL|error' | tail -2 | tr '\n' ' ')"; }
