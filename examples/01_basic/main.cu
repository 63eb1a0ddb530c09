// Example 01: every rss strategy on one small fp32 problem, each checked against the CPU reference.
//
//   rss_example_basic            prints one line per strategy; exit 0 when all pass,
//                                1 when any fails, 2 when there is no CUDA device.
//
// The pattern for one call: ask for the workspace size, allocate it, call, synchronise, check.
// The workspace need not be zeroed: rss initialises what it keeps there before reading it.
#include <cuda_runtime.h>

#include <cstdint>
#include <cstdio>
#include <iterator>
#include <cstdlib>
#include <random>
#include <vector>

#include <rss/rss.cuh>

namespace {

constexpr std::int64_t rows = 8;
constexpr std::int64_t cols = 5000;  // not a multiple of the vector width
constexpr std::uint64_t seed = 20240501;

// Exit-on-error helper: examples may exit, the library never does.
void check_cuda(cudaError_t err, const char* what) {
  if (err != cudaSuccess) {
    std::fprintf(stderr, "CUDA error in %s: %s\n", what, cudaGetErrorString(err));
    std::exit(1);
  }
}

// The text of a status, with the CUDA error behind it when there is one.
const char* explain(rss::Status s) {
  return s == rss::Status::cuda_error ? cudaGetErrorString(rss::last_cuda_error()) : rss::status_message(s);
}

// An owning device allocation (cudaMalloc: aligned well beyond rss::workspace_alignment).
struct DeviceBuffer {
  void* ptr = nullptr;
  explicit DeviceBuffer(std::size_t bytes) {
    if (bytes > 0) check_cuda(cudaMalloc(&ptr, bytes), "cudaMalloc");
  }
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;
  ~DeviceBuffer() {
    if (ptr != nullptr) cudaFree(ptr);
  }
};

// rows x cols values, never zero: a per-row scale (so the inverse RMS matters) and offset (so the
// maximum subtraction matters).
std::vector<float> random_input() {
  std::mt19937_64 gen(seed);
  std::uniform_real_distribution<float> u(-4.0f, 4.0f), scale(0.25f, 4.0f), offset(-2.0f, 2.0f);
  std::vector<float> x(static_cast<std::size_t>(rows * cols));
  for (std::int64_t i = 0; i < rows; ++i) {
    const float s = scale(gen), o = offset(gen);
    for (std::int64_t j = 0; j < cols; ++j) {
      float v = s * (u(gen) + o);
      x[static_cast<std::size_t>(i * cols + j)] = v == 0.0f ? 1e-3f : v;
    }
  }
  return x;
}

// Runs one strategy and prints its line. Returns true when the result is within tolerance.
bool run_one(rss::Strategy strategy, const float* x, const std::vector<double>& reference) {
  const char* name = rss::strategy_name(strategy);

  std::size_t bytes = 0;
  rss::Status s = rss::workspace_bytes<float>(strategy, rows, cols, &bytes);
  if (!rss::ok(s)) {
    std::printf("%-24s FAIL  workspace_bytes: %s\n", name, explain(s));
    return false;
  }
  DeviceBuffer workspace(bytes);

  DeviceBuffer y(static_cast<std::size_t>(rows * cols) * sizeof(float));
  // 0xFF bytes are NaN: an element the strategy fails to write shows up as an error.
  check_cuda(cudaMemset(y.ptr, 0xFF, static_cast<std::size_t>(rows * cols) * sizeof(float)), "cudaMemset(y)");

  s = rss::rms_scaled_softmax(strategy, x, static_cast<float*>(y.ptr), rows, cols, workspace.ptr, bytes);
  if (!rss::ok(s)) {
    std::printf("%-24s FAIL  rms_scaled_softmax: %s\n", name, explain(s));
    return false;
  }
  check_cuda(cudaDeviceSynchronize(), name);  // asynchronous faults surface here

  std::vector<float> result(static_cast<std::size_t>(rows * cols));
  check_cuda(cudaMemcpy(result.data(), y.ptr, result.size() * sizeof(float), cudaMemcpyDeviceToHost), "cudaMemcpy(y)");
  const double error = rss::reference::max_row_relative_error(result.data(), reference.data(), rows, cols);
  const bool pass = error <= rss::reference::fp32_tolerance;  // false for NaN too

  rss::LaunchList launches;
  const bool described = rss::ok(rss::describe_launches<float>(strategy, rows, cols, &launches));
  std::printf("%-24s %s  max row error %.2e (tolerance %.0e)", name, pass ? "ok  " : "FAIL", error,
              rss::reference::fp32_tolerance);
  if (described) {
    std::printf(", %lld kernel(s), %lld host launch(es)%s", static_cast<long long>(launches.kernels),
                static_cast<long long>(launches.host_launches), launches.any_cooperative() ? ", cooperative" : "");
  }
  std::printf("\n");
  return pass;
}

}  // namespace

int main() {
  int devices = 0;
  const cudaError_t err = cudaGetDeviceCount(&devices);
  if (err != cudaSuccess || devices == 0) {
    std::fprintf(stderr, "no CUDA device: %s\n",
                 err != cudaSuccess ? cudaGetErrorString(err) : "cudaGetDeviceCount found none");
    return 2;
  }
  cudaDeviceProp prop{};
  check_cuda(cudaGetDeviceProperties(&prop, 0), "cudaGetDeviceProperties");
  std::printf("device: %s (%d SMs); problem: %lld x %lld fp32, seed %llu\n", prop.name, prop.multiProcessorCount,
              static_cast<long long>(rows), static_cast<long long>(cols), static_cast<unsigned long long>(seed));

  const std::vector<float> x = random_input();
  std::vector<double> reference(x.size());
  rss::reference::rms_scaled_softmax(x.data(), reference.data(), rows, cols);

  DeviceBuffer x_device(x.size() * sizeof(float));
  check_cuda(cudaMemcpy(x_device.ptr, x.data(), x.size() * sizeof(float), cudaMemcpyHostToDevice), "cudaMemcpy(x)");

  int failures = 0;
  for (rss::Strategy strategy : rss::all_strategies) {
    if (!run_one(strategy, static_cast<const float*>(x_device.ptr), reference)) ++failures;
  }
  if (failures > 0) {
    std::printf("%d of %zu strategies FAILED\n", failures, std::size(rss::all_strategies));
    return 1;
  }
  std::printf("all %zu strategies passed\n", std::size(rss::all_strategies));
  return 0;
}
