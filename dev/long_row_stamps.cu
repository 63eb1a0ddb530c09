// Where long_row's time goes, per phase: a diagnostic for a throwaway copy of the tree, never part of the library.
// dev/long_row_stamps.patch makes thread 0 of every block record %globaltimer at fourteen points of row 0; this driver
// runs long_row on the single long rows and prints, per point, the earliest and the latest block relative to the
// earliest kernel entry (median of 30 runs), with the host completion time and the CUDA-event time of a run.
//
//   git apply dev/long_row_stamps.patch
//   nvcc -O3 -std=c++17 -gencode=arch=compute_90a,code=sm_90a -I include dev/long_row_stamps.cu -o long_row_stamps
//   ./long_row_stamps            (then: git checkout include/rss/strategies/long_row.cuh)
//
// Points: 0 entry, 1 set up (cluster combine, exchange base read, mbarriers), 2 the tile's bulk copies issued
// and the block barrier after them, 3 the first chunk landed, 4 phase 1 done (local statistics), 5 statistics in the cluster,
// 6 statistics round done (every leader's), 7 phase 2 done (local sum), 8 sum in the cluster, 9 sum round done,
// 10 phase 3 done (y stored), 11 exit, 12 phase 1's register and streamed parts loaded and their statistics
// taken (before the first chunk's wait), 13 phase 3's register and streamed parts stored (before the tile's y).
// %globaltimer counts ns, but on session 7's H200 it moved in steps of 256 ns (every median of
// bench/results/checks_s7/stamps12.log is on that grid): differences under 0.3 us are noise. After the table, one more run into a poisoned y is checked against the double reference with the tests'
// bound.
//
// It drives the strategy itself (plan, prepare, launch: what Operator::run does for it) and includes only
// long_row: a 2 MB binary that builds in 15 s (the whole registry: 10 MB, 80 s).
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <random>
#include <vector>

#include "rss/device.cuh"
#include "rss/strategies/long_row.cuh"
#include "stamps_common.hpp"

namespace {

constexpr int points = 14;
constexpr int runs = 30;
const char* const point_names[points] = {"entry",     "set up",  "issued",    "chunk 0",  "phase 1",  "cluster 1",
                                         "round 1",   "phase 2", "cluster 2", "round 2",  "phase 3",  "exit",
                                         "stream 1",  "stream 3"};

template <class T>
void measure(const char* dtype, std::int64_t cols) {
  std::vector<T> host(static_cast<std::size_t>(cols));
  std::mt19937 gen(7);
  std::uniform_real_distribution<float> u(-4.0f, 4.0f);
  for (T& v : host) v = static_cast<T>(u(gen));
  T *x = nullptr, *y = nullptr;
  void* workspace = nullptr;
  std::size_t bytes = 0;
  check(cudaMalloc(&x, host.size() * sizeof(T)), "x");
  check(cudaMalloc(&y, host.size() * sizeof(T)), "y");
  check(cudaMemcpy(x, host.data(), host.size() * sizeof(T), cudaMemcpyHostToDevice), "copy x");
  using LongRow = rss::detail::LongRow;
  rss::DeviceInfo device{};
  if (rss::current_device_info(&device) != rss::Status::success) std::exit(1);
  if (LongRow::workspace_bytes<T>(1, cols, device, &bytes) != rss::Status::success) std::exit(1);
  check(cudaMalloc(&workspace, bytes), "workspace");
  check(cudaMemset(workspace, 0, bytes), "workspace");
  rss::detail::Call<T> call;
  call.x = x;
  call.y = y;
  call.layout = rss::Layout::contiguous(1, cols);
  call.workspace = workspace;
  call.workspace_bytes = bytes;
  LongRow::Plan<T> plan;
  rss::Status s = LongRow::make_plan(call, device, rss::Config{}, &plan);
  if (s == rss::Status::success) s = LongRow::prepare(plan, call, nullptr);
  if (s != rss::Status::success) {
    std::printf("%s 1 x %lld: initialize: %s\n", dtype, static_cast<long long>(cols), rss::status_message(s));
    return;
  }
  const auto run = [&] { return LongRow::launch(plan, call, rss::detail::Launcher{}); };
  cudaEvent_t start, stop;
  check(cudaEventCreate(&start), "event");
  check(cudaEventCreate(&stop), "event");
  for (int w = 0; w < 5; ++w) (void)run();
  check(cudaDeviceSynchronize(), "warm-up");

  std::vector<std::vector<double>> lo(points), hi(points);
  std::vector<double> host_us, event_us;
  for (int r = 0; r < runs; ++r) {
    const std::vector<unsigned long long> none(points, ~0ull), zero(points, 0ull);
    check(cudaMemcpyToSymbol(rss_long_row_stamp_min, none.data(), points * sizeof(unsigned long long)), "reset");
    check(cudaMemcpyToSymbol(rss_long_row_stamp_max, zero.data(), points * sizeof(unsigned long long)), "reset");
    check(cudaDeviceSynchronize(), "reset");
    timed_run(start, stop, [&] { return run() == rss::Status::success; }, &host_us, &event_us);
    std::vector<unsigned long long> mn(points), mx(points);
    check(cudaMemcpyFromSymbol(mn.data(), rss_long_row_stamp_min, points * sizeof(unsigned long long)), "stamps");
    check(cudaMemcpyFromSymbol(mx.data(), rss_long_row_stamp_max, points * sizeof(unsigned long long)), "stamps");
    for (int i = 0; i < points; ++i) {
      lo[i].push_back((static_cast<double>(mn[i]) - static_cast<double>(mn[0])) / 1000.0);
      hi[i].push_back((static_cast<double>(mx[i]) - static_cast<double>(mn[0])) / 1000.0);
    }
  }
  std::printf("%s 1 x %lld: host %.1f us, events %.1f us; us after the first block's entry (first block / last block):\n",
              dtype, static_cast<long long>(cols), median(host_us), median(event_us));
  for (int i = 0; i < points; ++i) std::printf("  %-8s %8.2f %8.2f\n", point_names[i], median(lo[i]), median(hi[i]));

  // One more run into a poisoned y (NaN bits), against the double reference: a variant that loads the tile
  // wrong shows here, not only in the tests.
  check_poisoned_run(y, host, 1, cols, [&] { return run() == rss::Status::success; });
  release(start, stop, {workspace, y, x});
}

}  // namespace

int main() {
  for (const std::int64_t cols : {std::int64_t{1} << 20, std::int64_t{1} << 22, std::int64_t{1} << 24}) {
    measure<float>("fp32", cols);
    measure<__nv_bfloat16>("bf16", cols);
    measure<__half>("fp16", cols);
  }
  return 0;
}
