#!/usr/bin/env bash
# One device call's worth of checks, each bounded in time, logs under $OUT (see README "GPU tests").
set -u
out=${OUT:-/tmp/rss-out}
mkdir -p "$out"
export LD_LIBRARY_PATH=$PWD/.device/lib:${LD_LIBRARY_PATH:-}
export PYTHONUNBUFFERED=1
step() { local limit=$1 name=$2; shift 2; local t0=$SECONDS
  timeout "$limit" "$@" > "$out/$name.log" 2>&1; local rc=$?
  echo "$name: exit $rc in $((SECONDS - t0)) s: $(tr '\r' '\n' < "$out/$name.log" | grep -E 'passed|failed|records written|PASS|FAIL|error' | tail -2 | tr '\n' ' ')"; }
