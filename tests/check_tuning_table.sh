#!/usr/bin/env bash
# The shipped H200 tuning table must be exactly what `python3 bench/rssbench tune` generates from the committed
# pilot records (every bench/results/pilot/h200_pilot*.json): nobody edits a table by hand, and a new
# pilot comes with its regenerated table.
# Usage: tests/check_tuning_table.sh SOURCE_DIR [PYTHON]   (PYTHON default python3; ctest runs it as cpu.tuning_table_matches_pilot)
set -eu
case "${1-}" in
  -h | --help) sed -n '2,/^set /{/^set /d;s/^# \{0,1\}//;p}' "$0"; exit 0 ;;
  "" | -*) echo "tests/check_tuning_table.sh: usage: tests/check_tuning_table.sh SOURCE_DIR [PYTHON] (--help says what it does)" >&2; exit 2 ;;
esac
src=$1
python=${2:-python3}
generated=$(mktemp)
log=$(mktemp)
trap 'rm -f "$generated" "$log"' EXIT
pilots=("$src"/bench/results/pilot/h200_pilot*.json)
if ! "$python" "$src/bench/rssbench" tune "${pilots[@]}" --device "NVIDIA H200" --name h200 --out "$generated" \
  2> "$log"; then
  cat "$log" >&2
  exit 1
fi
if ! diff -u "$src/include/rss/tuning/h200_table.hpp" "$generated"; then
  echo "include/rss/tuning/h200_table.hpp differs from what rssbench tune makes for bench/results/pilot/h200_pilot*.json" >&2
  exit 1
fi
echo "h200_table.hpp matches bench/results/pilot/h200_pilot*.json (${#pilots[@]} files)"
