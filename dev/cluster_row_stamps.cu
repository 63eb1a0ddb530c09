// Where cluster_row's time goes on few-row shapes, per phase: a diagnostic for a throwaway copy of the tree, never
// part of the library. dev/cluster_row_stamps.patch makes thread 0 of every block of the register and tile kernels
// record clock64 at eight points of its row, and %globaltimer at entry and exit; this driver runs cluster_row under the
// configurations named on the command line and prints, per point, the median over blocks of the cycles since the
// block's entry (and the slowest block's), with the median of 30 runs' host completion, CUDA-event and first-entry to
// last-exit times. One more run into a poisoned y is checked against the double reference with the tests' bound.
//
//   git apply dev/cluster_row_stamps.patch
//   nvcc -O3 -std=c++17 -gencode=arch=compute_90a,code=sm_90a -I include dev/cluster_row_stamps.cu -o stamps
//   ./stamps 8x131072:bf16:512x32x4 64x131072:bf16:256x64x8s 8x131072:bf16:default ...   (s: a shared-memory tile)
//   (then: git checkout include; rm the new header)
//
// Points: 0 entry, 1 combine set up (mbarriers initialised, cluster arrive), 2 local statistics (the loads landed),
// 3 statistics round done, 4 local exponentials and sum, 5 sum round done, 6 y stores issued, 7 exit.
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "rss/rss.cuh"
#include "stamps_common.hpp"

namespace {

constexpr int points = 8;
constexpr int runs = 30;
const char* const point_names[points] = {"entry",  "set up",   "stats",    "round 1",
                                         "exps",   "round 2",  "stored",   "exit"};

template <class T>
void measure(const std::string& label, std::int64_t rows, std::int64_t cols, rss::Config config, double clock_ghz) {
  const std::size_t count = static_cast<std::size_t>(rows * cols);
  std::vector<T> host(count);
  std::mt19937 gen(7);
  std::uniform_real_distribution<float> u(-4.0f, 4.0f);
  for (T& v : host) {
    const float f = u(gen);
    v = static_cast<T>(f == 0.0f ? 1e-3f : f);
  }
  T *x = nullptr, *y = nullptr;
  void* workspace = nullptr;
  std::size_t bytes = 0;
  check(cudaMalloc(&x, count * sizeof(T)), "x");
  check(cudaMalloc(&y, count * sizeof(T)), "y");
  check(cudaMemcpy(x, host.data(), count * sizeof(T), cudaMemcpyHostToDevice), "copy x");
  if (rss::workspace_bytes<T>(config, rows, cols, &bytes) != rss::Status::success) std::exit(1);
  check(cudaMalloc(&workspace, bytes > 0 ? bytes : 16), "workspace");
  check(cudaMemset(workspace, 0, bytes > 0 ? bytes : 16), "workspace");
  rss::Operator<T> op;
  rss::Status s = op.initialize(config, x, y, rss::Layout::contiguous(rows, cols), workspace, bytes);
  if (s != rss::Status::success) {
    std::printf("%s: initialize: %s\n", label.c_str(), rss::status_message(s));
    cudaFree(workspace);
    cudaFree(y);
    cudaFree(x);
    return;
  }
  rss::LaunchList launches;
  (void)rss::describe_launches<T>(config, rows, cols, &launches);
  const int blocks = launches.size > 0 ? static_cast<int>(launches.items[0].grid) : 0;
  const int used = std::min(blocks, 4096);
  cudaEvent_t start, stop;
  check(cudaEventCreate(&start), "event");
  check(cudaEventCreate(&stop), "event");
  for (int w = 0; w < 5; ++w) (void)op.run();
  check(cudaDeviceSynchronize(), "warm-up");

  std::vector<std::vector<double>> med(points), slow(points);
  std::vector<double> host_us, event_us, wall_us;
  std::vector<unsigned long long> stamps(static_cast<std::size_t>(used) * points);
  for (int r = 0; r < runs; ++r) {
    const unsigned long long wall0[2] = {~0ull, 0ull};
    check(cudaMemcpyToSymbol(rss_cluster_row_wall, wall0, sizeof(wall0)), "reset");
    check(cudaDeviceSynchronize(), "reset");
    timed_run(start, stop, [&] { return op.run() == rss::Status::success; }, &host_us, &event_us);
    unsigned long long wall[2];
    check(cudaMemcpyFromSymbol(wall, rss_cluster_row_wall, sizeof(wall)), "wall");
    wall_us.push_back(static_cast<double>(wall[1] - wall[0]) / 1000.0);
    check(cudaMemcpyFromSymbol(stamps.data(), rss_cluster_row_stamps, stamps.size() * sizeof(unsigned long long)),
          "stamps");
    for (int i = 0; i < points; ++i) {
      std::vector<double> since;
      for (int b = 0; b < used; ++b) {
        const unsigned long long* st = &stamps[static_cast<std::size_t>(b) * points];
        since.push_back(static_cast<double>(st[i] - st[0]) / (clock_ghz * 1000.0));
      }
      med[i].push_back(median(since));
      slow[i].push_back(*std::max_element(since.begin(), since.end()));
    }
  }
  std::printf("%s: %s, %d blocks of %u threads, cluster %d; host %.2f us, events %.2f us, entry to exit %.2f us\n",
              label.c_str(), rss::strategy_name(config.strategy), blocks,
              launches.size > 0 ? launches.items[0].block : 0u, launches.size > 0 ? launches.items[0].cluster_size : 0,
              median(host_us), median(event_us), median(wall_us));
  std::printf("  us since the block's entry (clock64 at %.2f GHz): median block / slowest block\n", clock_ghz);
  for (int i = 1; i < points; ++i) std::printf("  %-8s %7.2f %7.2f\n", point_names[i], median(med[i]), median(slow[i]));

  check_poisoned_run(y, host, rows, cols, [&] { return op.run() == rss::Status::success; });
  release(start, stop, {workspace, y, x});
}

}  // namespace

int main(int argc, char** argv) {
  int khz = 0;
  check(cudaDeviceGetAttribute(&khz, cudaDevAttrClockRate, 0), "clock rate");
  const double ghz = khz / 1e6;
  // ROWSxCOLS:DTYPE:THREADSxELEMSxCLUSTER[s] or ...:default (the default rule's configuration)
  for (int a = 1; a < argc; ++a) {
    const std::string arg = argv[a];
    long long rows = 0, cols = 0;
    char dtype[8] = {0}, conf[32] = {0};
    if (std::sscanf(arg.c_str(), "%lldx%lld:%7[^:]:%31s", &rows, &cols, dtype, conf) != 4) {
      std::fprintf(stderr, "cluster_row_stamps: bad case '%s'\n", arg.c_str());
      return 2;
    }
    rss::Config config{rss::Strategy::cluster_row};
    int th = 0, el = 0, cl = 0;
    if (std::sscanf(conf, "%dx%dx%d", &th, &el, &cl) == 3) {
      const bool shared = conf[std::strlen(conf) - 1] == 's';
      config.cluster = {th, el, cl, shared ? rss::RowResidence::shared_memory : rss::RowResidence::registers};
    }
    const std::string d = dtype;
    if (d == "fp32") measure<float>(arg, rows, cols, config, ghz);
    else if (d == "bf16") measure<__nv_bfloat16>(arg, rows, cols, config, ghz);
    else if (d == "fp16") measure<__half>(arg, rows, cols, config, ghz);
    else return 2;
  }
  return 0;
}
