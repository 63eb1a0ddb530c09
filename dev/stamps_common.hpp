#pragma once
// What the stamps drivers (dev/long_row_stamps.cu, dev/cluster_row_stamps.cu) share: a CUDA check that exits, the
// median, the release of their buffers, and the output check: y, read back from a run into a poisoned output,
// against the double reference row by row, with the tests' bound (fp32's, or what rounding the exact answer to T
// costs plus twice fp32's). Diagnostics, never part of the library.
#include <cuda_runtime.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <initializer_list>
#include <cstdio>
#include <cstdlib>
#include <vector>

#include "rss/reference/cpu_reference.hpp"
#include "rss/reference/tolerance.hpp"

inline void check(cudaError_t e, const char* what) {
  if (e != cudaSuccess) {
    std::fprintf(stderr, "stamps: %s: %s\n", what, cudaGetErrorString(e));
    std::exit(1);
  }
}

inline double median(std::vector<double> v) {
  if (v.empty()) return 0.0;
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

/// One run of `run()` (true on success) between two events: appends its host completion time and its event time (us).
template <class Run>
void timed_run(cudaEvent_t start, cudaEvent_t stop, Run&& run, std::vector<double>* host_us, std::vector<double>* event_us) {
  const auto t0 = std::chrono::steady_clock::now();
  check(cudaEventRecord(start), "record");
  if (!run()) std::exit(1);
  check(cudaEventRecord(stop), "record");
  check(cudaEventSynchronize(stop), "run");
  host_us->push_back(std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - t0).count());
  float ms = 0.0f;
  check(cudaEventElapsedTime(&ms, start, stop), "elapsed");
  event_us->push_back(ms * 1000.0);
}

/// The driver's two events and device buffers (null ones skipped).
inline void release(cudaEvent_t start, cudaEvent_t stop, std::initializer_list<void*> buffers) {
  cudaEventDestroy(start);
  cudaEventDestroy(stop);
  for (void* b : buffers) cudaFree(b);
}

template <class T>
void print_output_check(const std::vector<T>& x, const std::vector<T>& y, std::int64_t rows, std::int64_t cols) {
  double worst = 0.0, bound = 0.0;
  std::vector<float> xf(static_cast<std::size_t>(cols)), yf(static_cast<std::size_t>(cols));
  std::vector<double> ref(static_cast<std::size_t>(cols));
  for (std::int64_t i = 0; i < rows; ++i) {
    for (std::int64_t j = 0; j < cols; ++j) {
      xf[j] = static_cast<float>(x[i * cols + j]);
      yf[j] = static_cast<float>(y[i * cols + j]);
    }
    rss::reference::rms_scaled_softmax_row(xf.data(), ref.data(), cols);
    const double e = rss::reference::row_relative_error(yf.data(), ref.data(), cols);
    const double tol = sizeof(T) == 4 ? rss::reference::fp32_tolerance
                                      : rss::reference::storage_tolerance(ref.data(), cols, [](double v) {
                                          return static_cast<double>(static_cast<float>(static_cast<T>(static_cast<float>(v))));
                                        });
    if (!(e <= worst)) worst = e;  // keeps NaN (an unwritten, poisoned element)
    bound = std::max(bound, tol);
  }
  std::printf("  check    worst relative error %.2e (bound %.2e): %s\n", worst, bound, worst <= bound ? "ok" : "FAILED");
}

/// One more run of `run()` (true on success) into y_device poisoned with NaN bits, then print_output_check of it.
template <class T, class Run>
void check_poisoned_run(T* y_device, const std::vector<T>& x, std::int64_t rows, std::int64_t cols, Run&& run) {
  std::vector<T> y(x.size());
  if (cudaMemset(y_device, 0xff, y.size() * sizeof(T)) != cudaSuccess || !run() ||
      cudaMemcpy(y.data(), y_device, y.size() * sizeof(T), cudaMemcpyDeviceToHost) != cudaSuccess) {
    std::printf("  check    the checked run failed: %s: FAILED\n", cudaGetErrorString(cudaGetLastError()));
    return;
  }
  print_output_check(x, y, rows, cols);
}
