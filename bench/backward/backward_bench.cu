// Backward-pass bench (Google Benchmark): the backward strategies against a floor kernel that moves the
// same bytes (reads x, y and dy, writes dx: 4 N elements), on the model and article shapes.
//
//   rss_backward_bench [--shapes=32x128256,4096x4096] [--dtypes=fp32,bf16] [--iterations=200] [--check=1]
//                      [--pilot] [google benchmark flags, e.g. --benchmark_out=raw.json
//                      --benchmark_out_format=json --benchmark_repetitions=5
//                      --benchmark_enable_random_interleaving=true]
//
// One benchmark per (dtype, shape, variant), named backward/<dtype>/<rows>x<cols>/<variant>. Each iteration
// is one warm call's host completion time (the launch call to cudaStreamSynchronize's return), the manual
// time Google Benchmark reports; counters add the median, p10 and p90 of those samples (host_us, ...), one
// batched event interval over `iterations` back-to-back calls divided by their number (device_us), the
// launch metadata (kernels, cluster_size, blocks_per_sm), the logical bytes and the largest per-row error
// against the double reference (max_rel_err; --check=0 skips it). Variants: two_pass, cluster_row,
// automatic (the label names its pick), floor, and the same reading saved row statistics instead of y
// (two_pass_saved, cluster_row_saved, automatic_saved, floor_saved: 3 N); --pilot adds cluster_row and
// cluster_row_saved under every configuration that holds the row (cluster_row:<threads>x<elems>x<cluster>).
#include <benchmark/benchmark.h>
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <memory>
#include <random>
#include <string>
#include <tuple>
#include <vector>

#include "check.hpp"
#include "rss/backward/backward.cuh"
#include "rss/reference/cpu_backward.hpp"
#include "rss/rss.cuh"

namespace {

struct Options {
  std::string shapes = "32x128256,4096x4096,16384x8192,4096x32768,1x131072,64x131072";
  std::string dtypes = "fp32,bf16";
  int iterations = 200;
  int warmup = 10;
  bool check = true;
  bool pilot = false;
};
Options g_options;

// ---- the floor: one kernel reading three matrices and writing a fourth, 16-byte accesses ----
constexpr int floor_threads = 256;
constexpr int floor_unroll = 4;

__global__ void __launch_bounds__(floor_threads) floor_kernel(const uint4* __restrict__ a, const uint4* __restrict__ b,
                                                              const uint4* __restrict__ c, uint4* __restrict__ out,
                                                              std::int64_t vectors) {
  const std::int64_t stride = static_cast<std::int64_t>(gridDim.x) * floor_threads;
  std::int64_t v = static_cast<std::int64_t>(blockIdx.x) * floor_threads + threadIdx.x;
  for (; v + (floor_unroll - 1) * stride < vectors; v += floor_unroll * stride) {
    uint4 ra[floor_unroll], rb[floor_unroll], rc[floor_unroll];
#pragma unroll
    for (int u = 0; u < floor_unroll; ++u) {
      ra[u] = a[v + u * stride];
      rb[u] = b[v + u * stride];
      rc[u] = c[v + u * stride];
    }
#pragma unroll
    for (int u = 0; u < floor_unroll; ++u)
      out[v + u * stride] = make_uint4(ra[u].x ^ rb[u].x ^ rc[u].x, ra[u].y ^ rb[u].y ^ rc[u].y,
                                       ra[u].z ^ rb[u].z ^ rc[u].z, ra[u].w ^ rb[u].w ^ rc[u].w);
  }
  for (; v < vectors; v += stride)
    out[v] = make_uint4(a[v].x ^ b[v].x ^ c[v].x, a[v].y ^ b[v].y ^ c[v].y, a[v].z ^ b[v].z ^ c[v].z,
                        a[v].w ^ b[v].w ^ c[v].w);
}

// ---- problems: device matrices shared by every variant of a (dtype, shape) ----
struct Problem {
  rss::DType dtype;
  std::int64_t rows, cols;
  void *x = nullptr, *y = nullptr, *dy = nullptr, *dx = nullptr;
  rss::RowStatistics* stats = nullptr;
  std::vector<float> hx, hy, hdy;  // as stored (exact in float), for the reference (only with --check)
  std::size_t bytes() const { return static_cast<std::size_t>(rows * cols) * rss::dtype_bytes(dtype); }
};

template <class T>
T to_storage(float v) {
  return rss::StorageTraits<T>::from_float(v);
}
template <class T>
double to_double(T v) {
  return rss::StorageTraits<T>::to_float(v);
}

template <class T>
void fill(Problem& p, cudaStream_t stream) {
  const std::size_t n = static_cast<std::size_t>(p.rows * p.cols);
  std::mt19937_64 gen(42 + static_cast<std::uint64_t>(p.rows * 1000003 + p.cols));
  std::uniform_real_distribution<float> u(-4.0f, 4.0f), g(-1.0f, 1.0f), scale(0.25f, 4.0f);
  std::vector<T> hx(n), hdy(n), hy(n);
  for (std::int64_t i = 0; i < p.rows; ++i) {
    const float s = scale(gen);
    for (std::int64_t j = 0; j < p.cols; ++j) {
      const std::size_t k = static_cast<std::size_t>(i * p.cols + j);
      hx[k] = to_storage<T>(s * u(gen) + 1e-3f);
      hdy[k] = to_storage<T>(g(gen));
    }
  }
  BENCH_CUDA(cudaMemcpy(p.x, hx.data(), p.bytes(), cudaMemcpyHostToDevice));
  BENCH_CUDA(cudaMemcpy(p.dy, hdy.data(), p.bytes(), cudaMemcpyHostToDevice));
  // y and the row statistics are what rss's forward writes: the backward's real inputs.
  BENCH_CUDA(cudaMalloc(&p.stats, static_cast<std::size_t>(p.rows) * sizeof(rss::RowStatistics)));
  std::size_t ws_bytes = 0;
  if (!rss::ok(rss::workspace_bytes<T>(rss::Strategy::automatic, p.rows, p.cols, &ws_bytes))) rss_bench::die("workspace", cudaErrorInvalidValue);
  void* ws = nullptr;
  if (ws_bytes > 0) BENCH_CUDA(cudaMalloc(&ws, ws_bytes));
  const rss::Status s = rss::rms_scaled_softmax_with_statistics<T>(
      rss::Strategy::automatic, static_cast<const T*>(p.x), static_cast<T*>(p.y), p.stats,
      rss::Layout::contiguous(p.rows, p.cols), ws, ws_bytes, stream);
  if (!rss::ok(s)) {
    std::fprintf(stderr, "rss_backward_bench: forward: %s\n", rss::status_message(s));
    std::exit(1);
  }
  BENCH_CUDA(cudaStreamSynchronize(stream));
  if (ws != nullptr) BENCH_CUDA(cudaFree(ws));
  if (g_options.check) {
    BENCH_CUDA(cudaMemcpy(hy.data(), p.y, p.bytes(), cudaMemcpyDeviceToHost));
    p.hx.resize(n);
    p.hy.resize(n);
    p.hdy.resize(n);
    for (std::size_t k = 0; k < n; ++k) {
      p.hx[k] = static_cast<float>(to_double(hx[k]));
      p.hy[k] = static_cast<float>(to_double(hy[k]));
      p.hdy[k] = static_cast<float>(to_double(hdy[k]));
    }
  }
}

cudaStream_t g_stream = nullptr;
std::map<std::tuple<int, std::int64_t, std::int64_t>, std::unique_ptr<Problem>> g_problems;

/// The problem of a (dtype, shape), made on first use and kept (random interleaving revisits it).
Problem& problem(rss::DType dtype, std::int64_t rows, std::int64_t cols) {
  const auto key = std::make_tuple(static_cast<int>(dtype), rows, cols);
  auto it = g_problems.find(key);
  if (it != g_problems.end()) return *it->second;
  auto p = std::make_unique<Problem>();
  p->dtype = dtype;
  p->rows = rows;
  p->cols = cols;
  for (void** ptr : {&p->x, &p->y, &p->dy, &p->dx}) BENCH_CUDA(cudaMalloc(ptr, p->bytes()));
  if (dtype == rss::DType::fp32) fill<float>(*p, g_stream);
  else if (dtype == rss::DType::bf16) fill<__nv_bfloat16>(*p, g_stream);
  else fill<__half>(*p, g_stream);
  return *g_problems.emplace(key, std::move(p)).first->second;
}

template <class T>
double max_error(const Problem& p) {
  const std::size_t n = static_cast<std::size_t>(p.rows * p.cols);
  std::vector<T> dx(n);
  BENCH_CUDA(cudaMemcpy(dx.data(), p.dx, p.bytes(), cudaMemcpyDeviceToHost));
  std::vector<double> ref(static_cast<std::size_t>(p.cols));
  double worst = 0.0;
  for (std::int64_t i = 0; i < p.rows; ++i) {
    const std::size_t o = static_cast<std::size_t>(i * p.cols);
    rss::reference::rms_scaled_softmax_backward_row(p.hx.data() + o, p.hy.data() + o, p.hdy.data() + o, ref.data(), p.cols);
    double diff = 0.0, norm = 0.0, rounding = 0.0;
    for (std::int64_t j = 0; j < p.cols; ++j) {
      const double got = to_double(dx[o + j]);
      diff += (got - ref[j]) * (got - ref[j]);
      norm += ref[j] * ref[j];
      const double stored = to_double(to_storage<T>(static_cast<float>(ref[j])));
      rounding += (stored - ref[j]) * (stored - ref[j]);
    }
    // Beyond the storage type's own rounding of the exact answer.
    const double e = (std::sqrt(diff) - std::sqrt(rounding)) / std::sqrt(norm);
    if (!(e <= worst)) worst = e;
  }
  return worst;
}

struct Variant {
  std::string name;
  rss::BackwardStrategy strategy;  // ignored by the floors
  bool floor = false;
  rss::BackwardClusterConfig config{};  // pilot: a cluster_row configuration
  bool saved = false;                   // saved state (b): x, dy and row statistics; floor: 3 N bytes
};

template <class T>
void run_variant(benchmark::State& st, const Variant& v, std::int64_t rows, std::int64_t cols) {
  Problem& p = problem(rss::StorageTraits<T>::dtype, rows, cols);
  const T* x = static_cast<const T*>(p.x);
  const T* y = static_cast<const T*>(p.y);
  const T* dy = static_cast<const T*>(p.dy);
  T* dx = static_cast<T*>(p.dx);
  rss::BackwardOperator<T> op;
  void* ws = nullptr;
  std::size_t ws_bytes = 0;
  int sm_count = 0;
  BENCH_CUDA(cudaDeviceGetAttribute(&sm_count, cudaDevAttrMultiProcessorCount, 0));
  const std::int64_t vectors = static_cast<std::int64_t>(p.bytes() / 16);
  const int floor_blocks = static_cast<int>(std::max<std::int64_t>(
      1, std::min<std::int64_t>((vectors + floor_threads * floor_unroll - 1) / (floor_threads * floor_unroll),
                                static_cast<std::int64_t>(sm_count) * 8)));
  if (!v.floor) {
    rss::backward_workspace_bytes<T>(v.strategy, rows, cols, &ws_bytes);
    if (ws_bytes > 0) BENCH_CUDA(cudaMalloc(&ws, ws_bytes));
    const rss::BackwardClusterConfig* preferred = v.config.cluster_size > 0 ? &v.config : nullptr;
    const rss::BackwardLayout layout = rss::BackwardLayout::contiguous(rows, cols);
    const rss::Status s = v.saved ? op.initialize_saved(v.strategy, x, p.stats, dy, dx, layout, ws, ws_bytes, g_stream, preferred)
                                  : op.initialize(v.strategy, x, y, dy, dx, layout, ws, ws_bytes, g_stream, preferred);
    if (!rss::ok(s) || (v.config.cluster_size > 0 && !(op.cluster_plan().config == v.config))) {
      st.SkipWithError(rss::ok(s) ? "configuration not used for this row" : rss::status_message(s));
      if (ws != nullptr) cudaFree(ws);
      return;
    }
  }
  const auto call = [&] {
    if (v.floor) {
      // floor: reads x, y, dy, writes dx (4 N). floor_saved: reads x and dy, writes dx (3 N; dy's two reads
      // are one load).
      floor_kernel<<<floor_blocks, floor_threads, 0, g_stream>>>(static_cast<const uint4*>(p.x),
                                                                 static_cast<const uint4*>(v.saved ? p.dy : p.y),
                                                                 static_cast<const uint4*>(p.dy),
                                                                 static_cast<uint4*>(p.dx), vectors);
      BENCH_CUDA(cudaGetLastError());
    } else {
      const rss::Status s = op.run(g_stream);
      if (!rss::ok(s)) {
        std::fprintf(stderr, "rss_backward_bench: run: %s\n", rss::status_message(s));
        std::exit(1);
      }
    }
  };
  // Checked once per (problem, variant): repetitions reuse the answer (the reference of a large shape takes seconds).
  static std::map<std::string, double> checked;
  const std::string check_key = std::to_string(static_cast<int>(p.dtype)) + "/" + std::to_string(rows) + "x" +
                                std::to_string(cols) + "/" + v.name;
  double error = 0.0;
  if (!v.floor && g_options.check) {
    const auto it = checked.find(check_key);
    if (it != checked.end()) {
      error = it->second;
    } else {
      BENCH_CUDA(cudaMemset(p.dx, 0xFF, p.bytes()));
      call();
      BENCH_CUDA(cudaStreamSynchronize(g_stream));
      error = checked[check_key] = max_error<T>(p);
    }
  }
  for (int i = 0; i < g_options.warmup; ++i) call();
  BENCH_CUDA(cudaStreamSynchronize(g_stream));
  std::vector<double> samples;
  for (auto _ : st) {
    const auto t0 = std::chrono::steady_clock::now();
    call();
    BENCH_CUDA(cudaStreamSynchronize(g_stream));
    const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    st.SetIterationTime(seconds);
    samples.push_back(seconds * 1e6);
  }
  cudaEvent_t begin, end;
  BENCH_CUDA(cudaEventCreate(&begin));
  BENCH_CUDA(cudaEventCreate(&end));
  BENCH_CUDA(cudaEventRecord(begin, g_stream));
  for (int i = 0; i < g_options.iterations; ++i) call();
  BENCH_CUDA(cudaEventRecord(end, g_stream));
  BENCH_CUDA(cudaEventSynchronize(end));
  float ms = 0.0f;
  BENCH_CUDA(cudaEventElapsedTime(&ms, begin, end));
  cudaEventDestroy(begin);
  cudaEventDestroy(end);

  std::sort(samples.begin(), samples.end());
  const auto at = [&](double q) { return samples[static_cast<std::size_t>(q * static_cast<double>(samples.size() - 1))]; };
  st.counters["rows"] = static_cast<double>(rows);
  st.counters["cols"] = static_cast<double>(cols);
  st.counters["host_us"] = at(0.5);
  st.counters["host_p10_us"] = at(0.1);
  st.counters["host_p90_us"] = at(0.9);
  st.counters["device_us"] = 1e3 * ms / g_options.iterations;
  st.counters["logical_bytes"] = (v.saved ? 3.0 : 4.0) * static_cast<double>(p.bytes());
  st.counters["max_rel_err"] = error;
  rss::LaunchList list;
  if (v.floor) {
    st.counters["kernels"] = 1;
    st.counters["cluster_size"] = 1;
    st.SetLabel(v.name);
  } else if (rss::ok(op.describe(&list))) {
    st.counters["kernels"] = static_cast<double>(list.kernels);
    st.counters["cluster_size"] = list.size > 0 ? list.items[0].cluster_size : 0;
    st.counters["blocks_per_sm"] = list.size > 0 ? list.items[0].blocks_per_sm : 0;
    std::string label = rss::backward_strategy_name(op.strategy());
    if (op.strategy() == rss::BackwardStrategy::cluster_row) {
      const auto& c = op.cluster_plan().config;
      label += ":" + std::to_string(c.threads) + "x" + std::to_string(c.elems_per_thread) + "x" + std::to_string(c.cluster_size);
    }
    st.SetLabel(label);
  }
  if (ws != nullptr) BENCH_CUDA(cudaFree(ws));
}

std::vector<std::string> split(const std::string& s, char sep) {
  std::vector<std::string> out;
  std::size_t start = 0;
  while (start <= s.size()) {
    const std::size_t end = s.find(sep, start);
    const std::string item = s.substr(start, end == std::string::npos ? std::string::npos : end - start);
    if (!item.empty()) out.push_back(item);
    if (end == std::string::npos) break;
    start = end + 1;
  }
  return out;
}

bool take_flag(const char* arg, const char* name, std::string* value) {
  const std::size_t n = std::strlen(name);
  if (std::strncmp(arg, name, n) != 0 || arg[n] != '=') return false;
  *value = arg + n + 1;
  return true;
}

}  // namespace

int main(int argc, char** argv) {
  rss_bench::program_name = "rss_backward_bench";
  std::vector<char*> rest{argv[0]};
  for (int i = 1; i < argc; ++i) {
    std::string v;
    if (take_flag(argv[i], "--shapes", &v)) g_options.shapes = v;
    else if (take_flag(argv[i], "--dtypes", &v)) g_options.dtypes = v;
    else if (take_flag(argv[i], "--iterations", &v)) g_options.iterations = std::max(1, std::atoi(v.c_str()));
    else if (take_flag(argv[i], "--check", &v)) g_options.check = v != "0";
    else if (std::strcmp(argv[i], "--pilot") == 0) g_options.pilot = true;
    else rest.push_back(argv[i]);
  }
  int rest_argc = static_cast<int>(rest.size());
  benchmark::Initialize(&rest_argc, rest.data());
  if (benchmark::ReportUnrecognizedArguments(rest_argc, rest.data())) return 2;

  bool listing = false;
  for (int i = 1; i < argc; ++i) listing = listing || std::strncmp(argv[i], "--benchmark_list_tests", 22) == 0;
  int devices = 0;
  if (listing) {
    // Names only: registration below needs no device.
  } else if (cudaGetDeviceCount(&devices) != cudaSuccess || devices == 0) {
    std::fprintf(stderr, "rss_backward_bench: no CUDA device: the backward suite needs an NVIDIA GPU; nothing was run\n");
    return 2;
  }
  if (!listing) BENCH_CUDA(cudaStreamCreateWithFlags(&g_stream, cudaStreamNonBlocking));

  std::vector<Variant> base = {{"two_pass", rss::BackwardStrategy::two_pass},
                               {"cluster_row", rss::BackwardStrategy::cluster_row},
                               {"automatic", rss::BackwardStrategy::automatic},
                               {"floor", rss::BackwardStrategy::automatic, true},
                               {"floor_saved", rss::BackwardStrategy::automatic, true, {}, true},
                               {"two_pass_saved", rss::BackwardStrategy::two_pass, false, {}, true},
                               {"cluster_row_saved", rss::BackwardStrategy::cluster_row, false, {}, true},
                               {"automatic_saved", rss::BackwardStrategy::automatic, false, {}, true}};
  for (const std::string& dtype_name : split(g_options.dtypes, ',')) {
    rss::DType dtype;
    if (dtype_name == "fp32") dtype = rss::DType::fp32;
    else if (dtype_name == "bf16") dtype = rss::DType::bf16;
    else if (dtype_name == "fp16") dtype = rss::DType::fp16;
    else {
      std::fprintf(stderr, "rss_backward_bench: unknown dtype %s\n", dtype_name.c_str());
      return 2;
    }
    for (const std::string& shape : split(g_options.shapes, ',')) {
      const std::size_t xpos = shape.find('x');
      if (xpos == std::string::npos) {
        std::fprintf(stderr, "rss_backward_bench: bad shape %s (ROWSxCOLS)\n", shape.c_str());
        return 2;
      }
      const std::int64_t rows = std::atoll(shape.substr(0, xpos).c_str()), cols = std::atoll(shape.substr(xpos + 1).c_str());
      std::vector<Variant> variants = base;
      if (g_options.pilot) {
        for (const int threads : rss::backward_cluster_threads)
          for (const int elems : rss::backward_cluster_elems)
            for (int c = 1; c <= rss::backward_max_cluster_size; ++c) {
              const rss::BackwardClusterConfig config{threads, elems, c};
              // Only configurations that hold the row with every block busy.
              if (!rss::backward_cluster_config_fits(config, cols, dtype, rss::backward_max_cluster_size)) continue;
              // Every block busy: the first c - 1 blocks' shares (multiples of 8 elements) leave some for the last.
              if (c > 1 && (cols + 8 * c - 1) / (8 * c) * 8 * (c - 1) >= cols) continue;
              if (c > 1 && rss::backward_cluster_config_fits({threads, elems, c - 1}, cols, dtype, 8)) continue;
              if (rss::backward_cluster_config_fits({threads, elems / 2, c}, cols, dtype, 8)) continue;  // idle threads
              const std::string geometry = std::to_string(threads) + "x" + std::to_string(elems) + "x" + std::to_string(c);
              variants.push_back({"cluster_row:" + geometry, rss::BackwardStrategy::cluster_row, false, config});
              variants.push_back({"cluster_row_saved:" + geometry, rss::BackwardStrategy::cluster_row, false, config, true});
            }
      }
      for (const Variant& v : variants) {
        const std::string name = "backward/" + dtype_name + "/" + shape + "/" + v.name;
        auto* b = benchmark::RegisterBenchmark(name.c_str(), [v, rows, cols, dtype](benchmark::State& st) {
          if (dtype == rss::DType::fp32) run_variant<float>(st, v, rows, cols);
          else if (dtype == rss::DType::bf16) run_variant<__nv_bfloat16>(st, v, rows, cols);
          else run_variant<__half>(st, v, rows, cols);
        });
        b->Iterations(g_options.iterations)->UseManualTime()->Unit(benchmark::kMicrosecond);
      }
    }
  }
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  for (auto& [k, p] : g_problems)
    for (void* ptr : {p->x, p->y, p->dy, p->dx, static_cast<void*>(p->stats)}) cudaFree(ptr);
  return 0;
}
