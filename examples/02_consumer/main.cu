// A downstream program using the installed rss headers: one strategy, checked against the CPU
// reference. Exit 0 on success, 1 on failure, 2 when there is no CUDA device.
#include <cuda_runtime.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <random>
#include <vector>

#include <rss/rss.cuh>

namespace {

void check_cuda(cudaError_t err, const char* what) {
  if (err != cudaSuccess) {
    std::fprintf(stderr, "CUDA error in %s: %s\n", what, cudaGetErrorString(err));
    std::exit(1);
  }
}

void check_rss(rss::Status s, const char* what) {
  if (!rss::ok(s)) {
    std::fprintf(stderr, "rss error in %s: %s\n", what,
                 s == rss::Status::cuda_error ? cudaGetErrorString(rss::last_cuda_error()) : rss::status_message(s));
    std::exit(1);
  }
}

}  // namespace

int main() {
  int devices = 0;
  const cudaError_t err = cudaGetDeviceCount(&devices);
  if (err != cudaSuccess || devices == 0) {
    // Without a driver CUDA says "driver version is insufficient": name the likelier cause too.
    std::fprintf(stderr, "no CUDA device: %s%s\n",
                 err != cudaSuccess ? cudaGetErrorString(err) : "cudaGetDeviceCount found none",
                 err == cudaErrorInsufficientDriver ? " (no NVIDIA driver is loaded, or it is too old)" : "");
    return 2;
  }

  const std::int64_t rows = 4, cols = 3000;
  const rss::Strategy strategy = rss::Strategy::megakernel_row;
  const std::size_t n = static_cast<std::size_t>(rows * cols);

  // Input: never zero, with enough spread that the inverse RMS matters.
  std::mt19937 gen(7);
  std::uniform_real_distribution<float> u(0.5f, 3.0f);
  std::vector<float> x(n);
  for (std::size_t i = 0; i < n; ++i) x[i] = (i % 3 == 0 ? -1.0f : 1.0f) * u(gen);

  float *x_device = nullptr, *y_device = nullptr;
  void* workspace = nullptr;
  std::size_t bytes = 0;
  check_rss(rss::workspace_bytes<float>(strategy, rows, cols, &bytes), "workspace_bytes");
  check_cuda(cudaMalloc(&x_device, n * sizeof(float)), "cudaMalloc(x)");
  check_cuda(cudaMalloc(&y_device, n * sizeof(float)), "cudaMalloc(y)");
  // The workspace need not be zeroed: rss initialises what it keeps there before reading it.
  if (bytes > 0) check_cuda(cudaMalloc(&workspace, bytes), "cudaMalloc(workspace)");
  check_cuda(cudaMemcpy(x_device, x.data(), n * sizeof(float), cudaMemcpyHostToDevice), "cudaMemcpy(x)");

  check_rss(rss::rms_scaled_softmax(strategy, x_device, y_device, rows, cols, workspace, bytes), "rms_scaled_softmax");
  check_cuda(cudaDeviceSynchronize(), "cudaDeviceSynchronize");

  std::vector<float> y(n);
  std::vector<double> reference(n);
  check_cuda(cudaMemcpy(y.data(), y_device, n * sizeof(float), cudaMemcpyDeviceToHost), "cudaMemcpy(y)");
  rss::reference::rms_scaled_softmax(x.data(), reference.data(), rows, cols);
  const double error = rss::reference::max_row_relative_error(y.data(), reference.data(), rows, cols);
  const bool pass = error <= rss::reference::fp32_tolerance;

  cudaFree(workspace);
  cudaFree(y_device);
  cudaFree(x_device);
  std::printf("rss_consumer: %s on %lld x %lld fp32: max row error %.2e (tolerance %.0e): %s\n",
              rss::strategy_name(strategy), static_cast<long long>(rows), static_cast<long long>(cols), error,
              rss::reference::fp32_tolerance, pass ? "ok" : "FAIL");
  return pass ? 0 : 1;
}
