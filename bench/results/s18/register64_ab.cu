// On the tree of register64.diff (256 x 64 is not instantiated on main).
// A/B of 16-bit register shares of 64 elements a thread (256-thread blocks, 8-block clusters: 128 bytes a thread,
// two blocks per SM, one wave for 32 rows) against the tuning table's configurations on the few-row 16-bit shapes:
// a diagnostic, never part of the library. Each configuration runs through the public API (rss::Operator with a
// Config), alternating A and B over `pairs` rounds of `calls` back-to-back calls timed with CUDA events; it prints
// each round's us per call and the median, with cudaMemcpyAsync of the same bytes as the reference, and the largest
// relative difference between the two outputs.
//
//   nvcc -O3 -std=c++17 -gencode=arch=compute_90a,code=sm_90a -I include bench/results/s18/register64_ab.cu -o register64_ab
//   ./register64_ab
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <random>
#include <vector>

#include <rss/rss.cuh>

namespace {

void check(cudaError_t e, const char* what) {
  if (e != cudaSuccess) {
    std::fprintf(stderr, "%s: %s\n", what, cudaGetErrorString(e));
    std::exit(1);
  }
}

constexpr int pairs = 7;
constexpr int calls = 20;

template <class T>
float round_us(rss::Operator<T>* op, const void* src, void* dst, std::size_t bytes, cudaStream_t s) {
  cudaEvent_t a, b;
  check(cudaEventCreate(&a), "event");
  check(cudaEventCreate(&b), "event");
  check(cudaEventRecord(a, s), "record");
  for (int i = 0; i < calls; ++i) {
    if (op != nullptr) {
      if (op->run(s) != rss::Status::success) { std::fprintf(stderr, "run failed\n"); std::exit(1); }
    } else {
      check(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToDevice, s), "memcpy");
    }
  }
  check(cudaEventRecord(b, s), "record");
  check(cudaEventSynchronize(b), "sync");
  float ms = 0;
  check(cudaEventElapsedTime(&ms, a, b), "elapsed");
  cudaEventDestroy(a);
  cudaEventDestroy(b);
  return ms * 1000.0f / calls;
}

float median(std::vector<float> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

template <class T>
void compare(const char* type, std::int64_t rows, std::int64_t cols, rss::ClusterConfig ca, rss::ClusterConfig cb) {
  const std::size_t n = static_cast<std::size_t>(rows * cols), bytes = n * sizeof(T);
  std::vector<T> hx(n);
  std::mt19937 gen(12345);
  std::uniform_real_distribution<float> u(-4.0f, 4.0f);
  for (auto& v : hx) v = static_cast<T>(u(gen));
  void *x, *ya, *yb;
  check(cudaMalloc(&x, bytes), "malloc");
  check(cudaMalloc(&ya, bytes), "malloc");
  check(cudaMalloc(&yb, bytes), "malloc");
  check(cudaMemcpy(x, hx.data(), bytes, cudaMemcpyHostToDevice), "copy");
  cudaStream_t s;
  check(cudaStreamCreate(&s), "stream");
  const rss::Layout layout = rss::Layout::contiguous(rows, cols);
  rss::Operator<T> a, b;
  const rss::Config fa{rss::Strategy::cluster_row, ca}, fb{rss::Strategy::cluster_row, cb};
  if (a.initialize(fa, static_cast<const T*>(x), static_cast<T*>(ya), layout, nullptr, 0) != rss::Status::success ||
      b.initialize(fb, static_cast<const T*>(x), static_cast<T*>(yb), layout, nullptr, 0) != rss::Status::success) {
    std::fprintf(stderr, "initialize failed\n");
    std::exit(1);
  }
  std::vector<float> ta, tb, tm;
  for (int w = 0; w < 3; ++w) round_us(&a, nullptr, nullptr, 0, s), round_us(&b, nullptr, nullptr, 0, s);
  for (int r = 0; r < pairs; ++r) {
    ta.push_back(round_us(&a, nullptr, nullptr, 0, s));
    tb.push_back(round_us(&b, nullptr, nullptr, 0, s));
    tm.push_back(round_us<T>(nullptr, x, ya, bytes, s));
  }
  // Both again into their own y, then compared (the memcpy overwrote ya).
  round_us(&a, nullptr, nullptr, 0, s);
  check(cudaStreamSynchronize(s), "sync");
  std::vector<T> ha(n), hb(n);
  check(cudaMemcpy(ha.data(), ya, bytes, cudaMemcpyDeviceToHost), "copy");
  check(cudaMemcpy(hb.data(), yb, bytes, cudaMemcpyDeviceToHost), "copy");
  double worst = 0;
  for (std::size_t i = 0; i < n; ++i) {
    const double va = static_cast<float>(ha[i]), vb = static_cast<float>(hb[i]);
    worst = std::max(worst, std::fabs(va - vb) / std::max(std::fabs(vb), 1e-30));
  }
  std::printf("%lldx%lld %s  A %dx%dx%d: %.1f us  B %dx%dx%d: %.1f us  memcpy %.1f us  B/A %.3f  max rel diff %.2e\n",
              static_cast<long long>(rows), static_cast<long long>(cols), type, ca.threads, ca.elems_per_thread,
              ca.cluster_size, median(ta), cb.threads, cb.elems_per_thread, cb.cluster_size, median(tb), median(tm),
              median(tb) / median(ta), worst);
  std::printf("   rounds A:");
  for (float t : ta) std::printf(" %.1f", t);
  std::printf("  B:");
  for (float t : tb) std::printf(" %.1f", t);
  std::printf("\n");
  cudaFree(x);
  cudaFree(ya);
  cudaFree(yb);
  cudaStreamDestroy(s);
}

}  // namespace

int main() {
  using rss::RowResidence;
  const rss::ClusterConfig reg64{256, 64, 8, RowResidence::registers};
  compare<__nv_bfloat16>("bf16", 32, 128256, rss::ClusterConfig{512, 64, 6, RowResidence::shared_memory}, reg64);
  compare<__half>("fp16", 32, 128256, rss::ClusterConfig{512, 64, 6, RowResidence::shared_memory}, reg64);
  compare<__nv_bfloat16>("bf16", 64, 131072, rss::ClusterConfig{256, 64, 8, RowResidence::shared_memory}, reg64);
  compare<__nv_bfloat16>("bf16", 1, 131072, rss::ClusterConfig{256, 32, 16, RowResidence::registers}, reg64);
  compare<__nv_bfloat16>("bf16", 16, 131072, rss::ClusterConfig{256, 64, 8, RowResidence::shared_memory}, reg64);
  return 0;
}
