#!/usr/bin/env bash
# A pilot of HEAD for the H200's tuning table (include/rss/tuning/h200_table.hpp), in one device call.
#   dev/device/h200_pilot.sh build            here (no GPU; about 5 minutes on two cores): rss_bench of HEAD for
#                                             sm_90, xz-packed into .device/pilot/ with the Google Benchmark shared
#                                             library it links (the GPU machine may have another version) and this
#                                             script beside them
#   bash .device/pilot/h200_pilot.sh run      on the GPU machine (device tool, carry .device/pilot): on an H200
#                                             only (another GPU's timings would feed the wrong table), rss_bench
#                                             --pilot over SHAPES (default: the few-row shapes, then the many-row
#                                             ones), 3 rounds x 10 samples, fp32, bf16 and fp16, within LIMIT
#                                             seconds (default 500); writes $OUT/NAME.json and NAME.log (NAME
#                                             default h200_pilot10)
# Then, here: commit the two files under bench/results/pilot/ and regenerate the table from every committed pilot
# (a shape takes its newest pilot's records):
#   python3 bench/rssbench tune bench/results/pilot/h200_pilot*.json --device "NVIDIA H200" --name h200 \
#     --out include/rss/tuning/h200_table.hpp
set -euo pipefail
few=1x131072,8x131072,64x131072,32x128256,1x262144,4x151936,32x256000
many=4096x4096,16384x8192,4096x32768
case "${1-}" in
  build)
    cd "$(dirname "${BASH_SOURCE[0]}")/../.."
    source scripts/setup.sh benchmark
    build=${RSS_PILOT_BUILD:-build-pilot}
    cmake -S . -B "$build" -DCMAKE_BUILD_TYPE=Release -DCMAKE_CUDA_ARCHITECTURES=90 -DRSS_BUILD_BENCH=ON \
      -DRSS_BUILD_TESTS=OFF -DRSS_BUILD_EXAMPLES=OFF > /dev/null
    cmake --build "$build" -j "$(nproc)" --target rss_bench
    mkdir -p .device/pilot/lib
    xz -9 -T "$(nproc)" -c "$build/bench/rss_bench" > .device/pilot/rss_bench.xz
    lib=$(ldd "$build/bench/rss_bench" | awk '/libbenchmark/ {print $3}')
    if [ -n "$lib" ]; then cp -L "$lib" .device/pilot/lib/; fi
    git log --oneline -1 > .device/pilot/commit.txt
    cp dev/device/h200_pilot.sh .device/pilot/
    echo "packed .device/pilot ($(du -sh .device/pilot | cut -f1)), rss_bench of $(cat .device/pilot/commit.txt)"
    ;;
  run)
    here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
    out=${OUT:-/tmp/out}
    name=${NAME:-h200_pilot10}
    mkdir -p "$out"
    gpu=$(nvidia-smi --query-gpu=name,uuid,driver_version --format=csv,noheader 2>/dev/null | head -n 1) || true
    echo "$gpu; rss_bench of $(cat "$here/commit.txt")" | tee "$out/$name.gpu.txt"
    case $gpu in *H200*) ;; *) echo "not an H200: no pilot (its records would feed the H200's table)"; exit 3 ;; esac
    xz -dc "$here/rss_bench.xz" > /tmp/rss_bench_pilot && chmod +x /tmp/rss_bench_pilot
    rc=0
    LD_LIBRARY_PATH="$here/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}" timeout "${LIMIT:-500}" /tmp/rss_bench_pilot --pilot \
      --session=1 --rounds=3 --iterations=10 --shapes="${SHAPES:-$few,$many}" --dtypes=fp32,bf16,fp16 \
      --out="$out/$name.json" > "$out/$name.log" 2>&1 || rc=$?
    echo "pilot: exit $rc: $(tr '\r' '\n' < "$out/$name.log" | grep -E 'written|error' | tail -1)"
    exit $rc
    ;;
  *)
    sed -n '2,/^set /{/^set /d;s/^# \{0,1\}//;p}' "$0"
    [ "${1-}" = -h ] || [ "${1-}" = --help ]
    ;;
esac
