// DRAM traffic of one call, for ncu's range replay: a diagnostic, never part of the library. ncu's kernel and
// application replay fail on long_row's cooperative cluster launch (LaunchFailed); range replay captures what runs
// between cudaProfilerStart and cudaProfilerStop and replays it as a whole. It measured megakernel_grid, but on
// long_row it failed as well (H200, CUDA 13.0: "An error was reported by the driver: UnknownError"; bench/NOTES.md,
// "Long rows, step 5"). This driver warms one strategy up on a single row (the default: long_row on 1 x 2^24),
// then makes exactly one call inside the profiler range:
//
//   nvcc -O3 -std=c++17 -gencode=arch=compute_90a,code=sm_90a -I include dev/long_row_dram.cu -o long_row_dram
//   ncu --replay-mode range \
//       --metrics dram__bytes_read.sum,dram__bytes_write.sum,lts__t_bytes.sum ./long_row_dram [fp32|bf16|fp16] [cols] [strategy]
//
// and prints the bytes of x and y to compare with ncu's dram__bytes_read.sum and dram__bytes_write.sum.
//
// A fifth argument `plain` (long_row only) makes the measured call a plain launch of long_row's kernel: the same
// plan, parameters, clusters and shared memory, without the cooperative attribute, which is what ncu's kernel
// replay fails on (its cluster kernels and the megakernels' cooperative launches profile fine). The grid is one
// block per SM, so its blocks are co-resident on an idle GPU all the same:
//
//   ncu --profile-from-start off --metrics dram__bytes_read.sum,dram__bytes_write.sum \
//       ./long_row_dram fp32 16777216 long_row plain
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_profiler_api.h>
#include <cuda_runtime.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>
#include <vector>

#include "rss/rss.cuh"

namespace {

void check(cudaError_t e, const char* what) {
  if (e != cudaSuccess) {
    std::fprintf(stderr, "long_row_dram: %s: %s\n", what, cudaGetErrorString(e));
    std::exit(1);
  }
}

void check(rss::Status s, const char* what) {
  if (!rss::ok(s)) {
    std::fprintf(stderr, "long_row_dram: %s: %s\n", what, rss::status_message(s));
    std::exit(1);
  }
}

/// long_row's launch for a plan, as the strategy makes it (long_row::launch_plan), without the cooperative attribute.
template <class T>
void plain_long_row_call(const T* x, T* y, std::int64_t cols, void* workspace, std::size_t workspace_bytes) {
  using LongRow = rss::detail::LongRow;
  namespace lr = rss::detail::long_row;
  rss::DeviceInfo device{};
  check(rss::current_device_info(&device), "device");
  rss::detail::Call<T> call;
  call.x = x;
  call.y = y;
  call.layout = rss::Layout::contiguous(1, cols);
  call.workspace = workspace;
  call.workspace_bytes = workspace_bytes;
  LongRow::Plan<T> plan;
  check(LongRow::make_plan(call, device, rss::Config{}, &plan), "long_row plan");
  check(LongRow::prepare(plan, call, nullptr), "long_row prepare");
  check(LongRow::launch(plan, call, rss::detail::Launcher{}), "long_row, cooperative (warm-up)");
  check(cudaDeviceSynchronize(), "warm-up");
  const rss::LongRowPlan& g = plan.geometry;
  rss::WorkspaceCarver carver(workspace);
  const lr::Workspace w = lr::Workspace::carve(carver, plan.max_leaders);
  const lr::Params<T> p{x,          y,          nullptr,      g.rows,       g.cols,     call.layout.ld_x,
                        call.layout.ld_y, g.share_elems, g.tile_elems, static_cast<int>(g.register_elems),
                        g.clusters,       g.cluster_size, w.state,       w.stat_slots, w.sum_slots};
  cudaLaunchConfig_t config{};
  config.gridDim = dim3(static_cast<unsigned>(g.grid_blocks));
  config.blockDim = dim3(static_cast<unsigned>(lr::threads));
  config.dynamicSmemBytes = g.dynamic_shared_bytes;
  cudaLaunchAttribute cluster{};
  cluster.id = cudaLaunchAttributeClusterDimension;
  cluster.val.clusterDim = {static_cast<unsigned>(g.cluster_size), 1, 1};
  config.attrs = g.cluster_size > 1 ? &cluster : nullptr;
  config.numAttrs = g.cluster_size > 1 ? 1 : 0;
  check(cudaProfilerStart(), "cudaProfilerStart");
  check(cudaLaunchKernelEx(&config, plan.kernel, p), "long_row, plain launch");
  check(cudaDeviceSynchronize(), "the measured call");
  check(cudaProfilerStop(), "cudaProfilerStop");
  std::printf("long_row_dram: plain launch of %lld blocks in clusters of %d, %zu bytes of shared memory each\n",
              static_cast<long long>(g.grid_blocks), g.cluster_size, static_cast<std::size_t>(g.dynamic_shared_bytes));
}

template <class T>
int run(std::int64_t cols, rss::Strategy strategy, bool plain) {
  std::vector<T> host(static_cast<std::size_t>(cols));
  std::mt19937 gen(11);
  std::uniform_real_distribution<float> u(-3.0f, 3.0f);
  for (auto& v : host) v = static_cast<T>(u(gen));
  const std::size_t bytes = host.size() * sizeof(T);
  T *x = nullptr, *y = nullptr;
  void* workspace = nullptr;
  std::size_t workspace_bytes = 0;
  check(rss::workspace_bytes<T>(strategy, 1, cols, &workspace_bytes), "workspace_bytes");
  check(cudaMalloc(&x, bytes), "cudaMalloc(x)");
  check(cudaMalloc(&y, bytes), "cudaMalloc(y)");
  check(cudaMalloc(&workspace, workspace_bytes > 0 ? workspace_bytes : 1), "cudaMalloc(workspace)");
  check(cudaMemcpy(x, host.data(), bytes, cudaMemcpyHostToDevice), "cudaMemcpy(x)");
  for (int i = 0; i < 3; ++i) check(rss::rms_scaled_softmax(strategy, x, y, 1, cols, workspace, workspace_bytes), "warm-up");
  check(cudaDeviceSynchronize(), "warm-up");
  if (plain) {
    plain_long_row_call(x, y, cols, workspace, workspace_bytes);
  } else {
    check(cudaProfilerStart(), "cudaProfilerStart");
    check(rss::rms_scaled_softmax(strategy, x, y, 1, cols, workspace, workspace_bytes), "the measured call");
    check(cudaDeviceSynchronize(), "the measured call");
    check(cudaProfilerStop(), "cudaProfilerStop");
  }
  std::printf("long_row_dram: %s 1 x %lld, %s: x %zu bytes, y %zu bytes\n", rss::strategy_name(strategy),
              static_cast<long long>(cols), sizeof(T) == 4 ? "fp32" : "16-bit", bytes, bytes);
  cudaFree(x);
  cudaFree(y);
  cudaFree(workspace);
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  const char* dtype = argc > 1 ? argv[1] : "fp32";
  const std::int64_t cols = argc > 2 ? std::atoll(argv[2]) : (std::int64_t{1} << 24);
  rss::Strategy strategy = rss::Strategy::long_row;
  if (argc > 3 && !rss::strategy_from_name(argv[3], &strategy)) {
    std::fprintf(stderr, "long_row_dram: unknown strategy '%s'\n", argv[3]);
    return 2;
  }
  const bool plain = argc > 4 && std::strcmp(argv[4], "plain") == 0;
  if (plain && strategy != rss::Strategy::long_row) {
    std::fprintf(stderr, "long_row_dram: 'plain' launches long_row only\n");
    return 2;
  }
  if (cols < 1) {
    std::fprintf(stderr, "long_row_dram: cols must be at least 1\n");
    return 2;
  }
  if (std::strcmp(dtype, "fp32") == 0) return run<float>(cols, strategy, plain);
  if (std::strcmp(dtype, "bf16") == 0) return run<__nv_bfloat16>(cols, strategy, plain);
  if (std::strcmp(dtype, "fp16") == 0) return run<__half>(cols, strategy, plain);
  std::fprintf(stderr, "long_row_dram: dtype must be fp32, bf16 or fp16\n");
  return 2;
}
