// The forward, with and without each row's statistics (rss_rms_scaled_softmax_with_statistics: what the PyTorch
// operator runs, and what a backward from saved statistics reads), as a light Google Benchmark suite for
// before/after runs (bench/ab/run.sh). It uses only API that earlier trees have too (Operator<T>::initialize with
// and without a statistics pointer, run), so the same source builds against either tree's headers:
//
//   nvcc -O3 -std=c++17 -arch=sm_90 -I TREE/include bench/ab/forward_statistics_bench.cu -lbenchmark -lpthread \
//        -o DIR/rss_forward_statistics_bench
//
// (this tree's build makes it as the target rss_forward_statistics_bench). Benchmarks are
// DTYPE/ROWSxCOLS/STRATEGY (the forward) and DTYPE/ROWSxCOLS/STRATEGY_statistics, STRATEGY cluster_row or automatic;
// a sample is the host completion of one call (launch to the end of a stream synchronisation), as rss_bench
// measures. Inputs are filled on the device from a hash, never zeros; no reference is computed (the GPU tests check
// these paths), so a round of both trees takes seconds where rss_bench's suite, which prepares every shape's
// reference, takes over a minute.
#include <benchmark/benchmark.h>
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>

#include "rss/rss.cuh"

namespace {

void check(cudaError_t e, const char* what) {
  if (e != cudaSuccess) {
    std::fprintf(stderr, "rss_forward_statistics_bench: %s: %s\n", what, cudaGetErrorString(e));
    std::exit(1);
  }
}

/// x[k] = a value in [-4, 4) from a hash of k (the same on every run).
template <class T>
__global__ void fill(T* x, std::int64_t n) {
  for (std::int64_t k = blockIdx.x * static_cast<std::int64_t>(blockDim.x) + threadIdx.x; k < n;
       k += static_cast<std::int64_t>(gridDim.x) * blockDim.x) {
    std::uint64_t z = static_cast<std::uint64_t>(k) + 0x9E3779B97F4A7C15ull;
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    z ^= z >> 31;
    x[k] = static_cast<T>(static_cast<float>(z >> 40) * (8.0f / 16777216.0f) - 4.0f);
  }
}

template <class T>
void run(benchmark::State& state, rss::Strategy strategy, std::int64_t rows, std::int64_t cols, bool statistics) {
  const std::int64_t n = rows * cols;
  T *x = nullptr, *y = nullptr;
  rss::RowStatistics* stats = nullptr;
  void* workspace = nullptr;
  std::size_t bytes = 0;
  cudaStream_t stream = nullptr;
  check(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking), "stream");
  check(cudaMalloc(&x, n * sizeof(T)), "x");
  check(cudaMalloc(&y, n * sizeof(T)), "y");
  check(cudaMalloc(&stats, rows * sizeof(rss::RowStatistics)), "statistics");
  fill<T><<<1024, 256, 0, stream>>>(x, n);
  check(cudaGetLastError(), "fill");
  rss::Operator<T> op;
  rss::Status s = rss::workspace_bytes<T>(strategy, rows, cols, &bytes);
  if (rss::ok(s) && bytes > 0) {
    check(cudaMalloc(&workspace, bytes), "workspace");
    check(cudaMemsetAsync(workspace, 0, bytes, stream), "workspace");
  }
  const rss::Layout layout = rss::Layout::contiguous(rows, cols);
  if (rss::ok(s)) {
    s = statistics ? op.initialize(strategy, x, y, stats, layout, workspace, bytes, stream)
                   : op.initialize(strategy, x, y, layout, workspace, bytes, stream);
  }
  if (!rss::ok(s)) {
    state.SkipWithError(rss::status_message(s));
  } else {
    for (int warm = 0; warm < 3; ++warm) op.run(stream);
    check(cudaStreamSynchronize(stream), "warm-up");
    for (auto _ : state) {
      const auto t0 = std::chrono::steady_clock::now();
      op.run(stream);
      check(cudaStreamSynchronize(stream), "run");
      state.SetIterationTime(std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
    }
    state.SetBytesProcessed(static_cast<std::int64_t>(state.iterations()) * 2 * n * static_cast<std::int64_t>(sizeof(T)));
  }
  cudaStreamSynchronize(stream);
  cudaFree(workspace);
  cudaFree(stats);
  cudaFree(y);
  cudaFree(x);
  cudaStreamDestroy(stream);
}

struct Shape {
  std::int64_t rows, cols;
};
// The committed shapes (bench/harness/shapes.hpp), listed here so that the source needs no header of this tree.
constexpr Shape shapes[] = {{1, 131072},   {8, 131072},  {64, 131072},  {32, 128256},  {4096, 4096},
                            {16384, 8192}, {4096, 32768}, {1, 1048576}, {1, 4194304}, {1, 16777216}};

template <class T>
void register_type(const char* dtype) {
  for (const bool statistics : {false, true}) {
    for (const Shape& s : shapes) {
      for (const rss::Strategy strategy : {rss::Strategy::cluster_row, rss::Strategy::automatic}) {
        const std::string name = std::string(dtype) + "/" + std::to_string(s.rows) + "x" + std::to_string(s.cols) +
                                 "/" + rss::strategy_name(strategy) + (statistics ? "_statistics" : "");
        benchmark::RegisterBenchmark(name.c_str(), [strategy, s, statistics](benchmark::State& state) {
          run<T>(state, strategy, s.rows, s.cols, statistics);
        })
            ->UseManualTime()
            ->Unit(benchmark::kMicrosecond)
            ->MinTime(0.2);
      }
    }
  }
}

}  // namespace

int main(int argc, char** argv) {
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 2;
  register_type<float>("fp32");
  register_type<__nv_bfloat16>("bf16");
  register_type<__half>("fp16");
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
