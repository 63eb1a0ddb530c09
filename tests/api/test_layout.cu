// Leading dimensions, in-place calls and the pointer checks of the public API on a real device, for
// every strategy and automatic; rss::Operator with automatic; every cluster_row configuration.
#include <catch2/catch.hpp>
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <iterator>
#include <utility>
#include <string>
#include <vector>

#include "rss/rss.cuh"
#include "support/device.cuh"
#include "support/random_input.hpp"
#include "support/storage.cuh"
#include "support/strategies.cuh"

namespace {

using rss::Layout;
using rss::Status;
using rss::Strategy;

using rss_test::from_float;
using rss_test::to_double;

template <class T>
const char* type_name() {
  return rss::dtype_name(rss::dtype_of<T>);
}

using rss_test::strategies_and_automatic;

constexpr unsigned char kSentinel = 0x5A;  // a finite, distinctive value in every storage type

/// A rows x cols problem stored with leading dimension `ld`: the matrix elements are fresh random
/// values, the padding between rows holds `padding` (NaN for x: a strategy that reads it fails).
template <class T>
struct Strided {
  Layout layout;
  std::uint64_t seed;
  std::vector<T> x;                 // (rows - 1) * ld_x + cols elements
  std::vector<double> reference;    // rows * cols, contiguous

  Strided(const Layout& l, std::uint64_t seed_) : layout(l), seed(seed_) {
    const auto values = rss_test::random_rows(l.rows, l.cols, seed);
    x.assign(static_cast<std::size_t>(extent(l.ld_x)), from_float<T>(std::nanf("")));
    std::vector<double> stored(values.size());
    for (std::int64_t i = 0; i < l.rows; ++i) {
      for (std::int64_t j = 0; j < l.cols; ++j) {
        const T v = from_float<T>(values[static_cast<std::size_t>(i * l.cols + j)]);
        x[static_cast<std::size_t>(i * l.ld_x + j)] = v;
        stored[static_cast<std::size_t>(i * l.cols + j)] = to_double(v);
      }
    }
    reference.resize(values.size());
    rss::reference::rms_scaled_softmax(stored.data(), reference.data(), l.rows, l.cols);
  }

  std::int64_t extent(std::int64_t ld) const { return (layout.rows - 1) * ld + layout.cols; }

  /// The worst row error of y (stored with leading dimension ld) against the reference.
  double error(const std::vector<T>& y, std::int64_t ld) const {
    std::vector<double> dense(reference.size());
    for (std::int64_t i = 0; i < layout.rows; ++i)
      for (std::int64_t j = 0; j < layout.cols; ++j)
        dense[static_cast<std::size_t>(i * layout.cols + j)] = to_double(y[static_cast<std::size_t>(i * ld + j)]);
    return rss::reference::max_row_relative_error(dense.data(), reference.data(), layout.rows, layout.cols);
  }

  /// Indices of y's padding (between rows, and `tail` elements after the last row) that do not hold
  /// the sentinel bytes; empty when none was written.
  std::string padding_written(const std::vector<T>& y, std::int64_t ld) const {
    std::string bad;
    T sentinel;
    std::memset(static_cast<void*>(&sentinel), kSentinel, sizeof(T));
    for (std::int64_t k = 0; k < static_cast<std::int64_t>(y.size()); ++k) {
      const bool in_matrix = k < extent(ld) && k % ld < layout.cols;
      if (!in_matrix && std::memcmp(&y[static_cast<std::size_t>(k)], &sentinel, sizeof(T)) != 0) {
        if (bad.size() < 200) bad += std::to_string(k) + " ";
      }
    }
    return bad;
  }
};

/// A device workspace of the size `strategy` asks for, zeroed.
template <class T>
std::size_t workspace_for(Strategy strategy, std::int64_t rows, std::int64_t cols) {
  std::size_t bytes = 0;
  REQUIRE(rss::workspace_bytes<T>(strategy, rows, cols, &bytes) == Status::success);
  return bytes;
}

template <class T>
std::vector<T> download(const rss_test::DeviceBuffer& b, std::size_t count) {
  std::vector<T> out(count);
  RSS_TEST_CUDA(cudaDeviceSynchronize());
  RSS_TEST_CUDA(cudaMemcpy(out.data(), b.get(), count * sizeof(T), cudaMemcpyDeviceToHost));
  return out;
}

std::vector<unsigned char> bytes_of(const rss_test::DeviceBuffer& b) {
  std::vector<unsigned char> out(b.bytes());
  RSS_TEST_CUDA(cudaDeviceSynchronize());
  RSS_TEST_CUDA(cudaMemcpy(out.data(), b.get(), out.size(), cudaMemcpyDeviceToHost));
  return out;
}

/// (a) strided x and y: the result matches the reference and y's padding is untouched.
template <class T>
void check_strided(const rss::Config& config, std::int64_t rows, std::int64_t cols, cudaStream_t stream) {
  const Strategy strategy = config.strategy;
  constexpr std::int64_t tail = 16;
  const Strided<T> p(Layout{rows, cols, cols + 3, cols + 5}, rss_test::fresh_seed());
  INFO(rss::strategy_name(strategy) << " " << type_name<T>() << " " << rows << " x " << cols << " ld_x " << cols + 3
                                    << " ld_y " << cols + 5 << " seed " << p.seed);
  rss_test::DeviceBuffer x(p.x.size() * sizeof(T));
  RSS_TEST_CUDA(cudaMemcpy(x.get(), p.x.data(), x.bytes(), cudaMemcpyHostToDevice));
  const auto y_count = static_cast<std::size_t>(p.extent(p.layout.ld_y) + tail);
  rss_test::DeviceBuffer y(y_count * sizeof(T));
  RSS_TEST_CUDA(cudaMemset(y.get(), kSentinel, y.bytes()));
  const std::size_t bytes = workspace_for<T>(strategy, rows, cols);
  rss_test::DeviceBuffer workspace(bytes);
  if (bytes > 0) RSS_TEST_CUDA(cudaMemset(workspace.get(), 0, bytes));

  Strategy ran = Strategy::automatic;
  const Status s = rss::rms_scaled_softmax(config, x.get<const T>(), y.get<T>(), p.layout, workspace.get(), bytes,
                                           stream, &ran);
  INFO("status: " << rss::status_message(s) << " (" << cudaGetErrorString(rss::last_cuda_error()) << ")");
  REQUIRE(s == Status::success);
  RSS_TEST_CUDA(cudaStreamSynchronize(stream));
  RSS_TEST_CUDA(cudaGetLastError());
  if (strategy == Strategy::automatic) {
    CHECK(ran != Strategy::automatic);
  } else {
    CHECK(ran == strategy);
  }
  INFO("ran " << rss::strategy_name(ran));
  const auto out = download<T>(y, y_count);
  const double error = p.error(out, p.layout.ld_y);
  const double tolerance = rss::reference::tolerance(rss::dtype_of<T>);
  INFO("max row relative error " << error << " (tolerance " << tolerance << ")");
  CHECK(error <= tolerance);
  const std::string written = p.padding_written(out, p.layout.ld_y);
  INFO("padding of y written at " << written);
  CHECK(written.empty());
}

/// (b) in place: y == x with the same leading dimension gives the reference, padding untouched.
template <class T>
void check_in_place(const rss::Config& config, std::int64_t rows, std::int64_t cols, std::int64_t ld,
                    cudaStream_t stream) {
  const Strategy strategy = config.strategy;
  constexpr std::int64_t tail = 16;
  const Strided<T> p(Layout{rows, cols, ld, ld}, rss_test::fresh_seed());
  INFO(rss::strategy_name(strategy) << " " << type_name<T>() << " in place " << rows << " x " << cols << " ld " << ld
                                    << " seed " << p.seed);
  const auto count = static_cast<std::size_t>(p.extent(ld) + tail);
  rss_test::DeviceBuffer xy(count * sizeof(T));
  RSS_TEST_CUDA(cudaMemset(xy.get(), kSentinel, xy.bytes()));
  // Only the matrix elements: the padding keeps the sentinel, to prove nothing writes it.
  for (std::int64_t i = 0; i < rows; ++i) {
    RSS_TEST_CUDA(cudaMemcpy(xy.get<T>() + i * ld, p.x.data() + i * ld, static_cast<std::size_t>(cols) * sizeof(T),
                             cudaMemcpyHostToDevice));
  }
  const std::size_t bytes = workspace_for<T>(strategy, rows, cols);
  rss_test::DeviceBuffer workspace(bytes);
  if (bytes > 0) RSS_TEST_CUDA(cudaMemset(workspace.get(), 0, bytes));
  const Status s = rss::rms_scaled_softmax(config, xy.get<const T>(), xy.get<T>(), p.layout, workspace.get(), bytes,
                                           stream);
  INFO("status: " << rss::status_message(s) << " (" << cudaGetErrorString(rss::last_cuda_error()) << ")");
  REQUIRE(s == Status::success);
  RSS_TEST_CUDA(cudaStreamSynchronize(stream));
  const auto out = download<T>(xy, count);
  const double error = p.error(out, ld);
  const double tolerance = rss::reference::tolerance(rss::dtype_of<T>);
  INFO("max row relative error " << error << " (tolerance " << tolerance << ")");
  CHECK(error <= tolerance);
  const std::string written = p.padding_written(out, ld);
  INFO("padding written at " << written);
  CHECK(written.empty());
}

/// (c), (d), (e): refusals that launch nothing and leave y untouched.
template <class T>
void check_refusals(Strategy strategy, cudaStream_t stream) {
  const std::int64_t rows = 5, cols = 1001;
  const Layout layout = Layout::contiguous(rows, cols);
  const auto n = static_cast<std::size_t>(rows * cols);
  const Strided<T> p(layout, rss_test::fresh_seed());
  INFO(rss::strategy_name(strategy) << " " << type_name<T>() << " seed " << p.seed);
  // One buffer for x and y (so that they can overlap), one for y alone.
  rss_test::DeviceBuffer both((2 * n + 64) * sizeof(T)), y(n * sizeof(T));
  RSS_TEST_CUDA(cudaMemcpy(both.get(), p.x.data(), n * sizeof(T), cudaMemcpyHostToDevice));
  RSS_TEST_CUDA(cudaMemset(both.get<T>() + n, kSentinel, (n + 64) * sizeof(T)));
  RSS_TEST_CUDA(cudaMemset(y.get(), kSentinel, y.bytes()));
  const std::size_t bytes = workspace_for<T>(strategy, rows, cols);
  rss_test::DeviceBuffer workspace(bytes);
  if (bytes > 0) RSS_TEST_CUDA(cudaMemset(workspace.get(), 0, bytes));
  const auto both_before = bytes_of(both);
  const auto y_before = bytes_of(y);
  const T* xd = both.get<const T>();
  const auto call = [&](const T* in, T* out, const Layout& l, void* ws = nullptr) {
    Strategy ran = Strategy::baseline;
    const Status s = rss::rms_scaled_softmax(strategy, in, out, l, ws != nullptr ? ws : workspace.get(), bytes,
                                             stream, &ran);
    CHECK(ran == Strategy::baseline);  // not written on a refusal
    return s;
  };

  {  // partial overlap of x and y
    CHECK(call(xd, both.get<T>() + 1, layout) == Status::overlapping_buffers);
    CHECK(call(xd, both.get<T>() + n - 1, layout) == Status::overlapping_buffers);
    CHECK(call(xd + 8, both.get<T>(), layout) == Status::overlapping_buffers);
    CHECK(call(xd, both.get<T>() + cols, layout) == Status::overlapping_buffers);  // y one row down
    // Same pointer, different leading dimensions: not in place.
    CHECK(call(xd, both.get<T>(), Layout{2, 1000, 1001, 1000}) == Status::overlapping_buffers);
    if (bytes > 0) {
      // The workspace may overlap neither: a workspace-sized block at the (aligned) start of x.
      rss_test::DeviceBuffer big(bytes + 2 * n * sizeof(T));
      RSS_TEST_CUDA(cudaMemset(big.get(), kSentinel, big.bytes()));
      RSS_TEST_CUDA(cudaMemcpy(big.get(), p.x.data(), n * sizeof(T), cudaMemcpyHostToDevice));
      CHECK(call(big.get<const T>(), y.get<T>(), layout, big.get()) == Status::overlapping_buffers);
    }
  }
  {  // host memory
    std::vector<T> host_x(p.x.begin(), p.x.end());
    std::vector<T> host_y(n);
    std::memset(static_cast<void*>(host_y.data()), kSentinel, n * sizeof(T));
    const std::vector<T> host_y_before = host_y;
    CHECK(call(host_x.data(), y.get<T>(), layout) == Status::not_device_memory);
    CHECK(call(xd, host_y.data(), layout) == Status::not_device_memory);
    CHECK(call(host_x.data(), host_y.data(), layout) == Status::not_device_memory);
    T* pinned_x = nullptr;
    T* pinned_y = nullptr;
    RSS_TEST_CUDA(cudaMallocHost(&pinned_x, n * sizeof(T)));
    RSS_TEST_CUDA(cudaMallocHost(&pinned_y, n * sizeof(T)));
    std::memcpy(pinned_x, p.x.data(), n * sizeof(T));
    std::memset(static_cast<void*>(pinned_y), kSentinel, n * sizeof(T));
    CHECK(call(pinned_x, y.get<T>(), layout) == Status::not_device_memory);
    CHECK(call(xd, pinned_y, layout) == Status::not_device_memory);
    CHECK(call(pinned_x, pinned_x, layout) == Status::not_device_memory);  // in place on host
    if (bytes > 0) {
      void* pinned_ws = nullptr;
      RSS_TEST_CUDA(cudaMallocHost(&pinned_ws, bytes));
      CHECK(call(xd, y.get<T>(), layout, pinned_ws) == Status::not_device_memory);
      RSS_TEST_CUDA(cudaFreeHost(pinned_ws));
    }
    RSS_TEST_CUDA(cudaDeviceSynchronize());
    CHECK(std::memcmp(host_y.data(), host_y_before.data(), n * sizeof(T)) == 0);
    CHECK(std::memcmp(pinned_x, p.x.data(), n * sizeof(T)) == 0);
    CHECK(std::memcmp(pinned_y, host_y_before.data(), n * sizeof(T)) == 0);
    RSS_TEST_CUDA(cudaFreeHost(pinned_x));
    RSS_TEST_CUDA(cudaFreeHost(pinned_y));
  }
  {  // a leading dimension below cols
    CHECK(call(xd, y.get<T>(), Layout{rows, cols, cols - 1, cols}) == Status::invalid_layout);
    CHECK(call(xd, y.get<T>(), Layout{rows, cols, cols, cols - 1}) == Status::invalid_layout);
    CHECK(call(xd, y.get<T>(), Layout{rows, cols, 0, 0}) == Status::invalid_layout);
    CHECK(call(xd, y.get<T>(), Layout{1, cols, 1, cols}) == Status::invalid_layout);
  }
  RSS_TEST_CUDA(cudaStreamSynchronize(stream));
  RSS_TEST_CUDA(cudaGetLastError());
  CHECK(bytes_of(both) == both_before);
  CHECK(bytes_of(y) == y_before);
}

/// The most blocks per cluster on this device; 0, with a warning, when it has no clusters (cluster_row is then
/// not tested).
int cluster_limit() {
  rss::DeviceInfo limits;
  REQUIRE(rss::current_device_info(&limits) == Status::success);
  if (limits.max_cluster_size == 0) WARN("no thread-block clusters on this device: cluster_row is not tested");
  return limits.max_cluster_size;
}

template <class T>
void check_layouts_all_strategies() {
  cudaStream_t stream = nullptr;
  RSS_TEST_CUDA(cudaStreamCreate(&stream));
  for (Strategy strategy : strategies_and_automatic()) {
    for (std::int64_t rows : {3, 37}) {
      // Misaligned rows: a 16-bit share on its row's aligned grid (4097 in 256 x 32), x and y misaligned alike
      // (in place) or not (strided); 4096 fills a 128 x 32 block and 1001 holds one vector a thread of 256 x 8,
      // so their misaligned rows keep the share's own grid.
      for (std::int64_t cols : {1001, 4096, 4097}) {
        check_strided<T>(strategy, rows, cols, stream);
        check_in_place<T>(strategy, rows, cols, cols, stream);
        check_in_place<T>(strategy, rows, cols, cols + 3, stream);
      }
    }
  }
  cudaStreamDestroy(stream);
}

}  // namespace

TEST_CASE("strided x and y match the reference and leave y's padding untouched (fp32)", "[gpu][api][layout]") {
  check_layouts_all_strategies<float>();
}

TEST_CASE("strided x and y match the reference and leave y's padding untouched (bf16)", "[gpu][api][layout]") {
  check_layouts_all_strategies<__nv_bfloat16>();
}

TEST_CASE("cluster_row with rows in shared memory: strided, in place and odd widths in every storage type",
          "[gpu][api][layout][cluster_row]") {
  const int max_cluster_size = cluster_limit();
  if (max_cluster_size == 0) return;
  cudaStream_t stream = nullptr;
  RSS_TEST_CUDA(cudaStreamCreate(&stream));
  // Whole aligned vectors (the copy engine loads the share), odd widths and leading dimensions (element by
  // element), one block and clusters of several, several rows per SM.
  for (std::int64_t cols : {1001, 4097, 8192, 70001}) {
    for (const int threads : rss::cluster_row_shared_threads) {
      rss::ClusterConfig c{threads, 64, 0, rss::RowResidence::shared_memory};
      while (!rss::cluster_config_fits(c, cols, rss::DType::fp32, max_cluster_size) &&
             c.cluster_size < max_cluster_size) {
        ++c.cluster_size;
      }
      INFO(cols << " columns, " << threads << " threads, cluster of " << c.cluster_size);
      REQUIRE(rss::cluster_config_fits(c, cols, rss::DType::fp32, max_cluster_size));
      const rss::Config config{Strategy::cluster_row, c};
      for (std::int64_t rows : {3, 37}) {
        check_strided<float>(config, rows, cols, stream);
        check_strided<__nv_bfloat16>(config, rows, cols, stream);
        check_strided<__half>(config, rows, cols, stream);
        check_in_place<float>(config, rows, cols, cols, stream);
        check_in_place<__nv_bfloat16>(config, rows, cols, cols, stream);
        check_in_place<__half>(config, rows, cols, cols + 8, stream);
      }
    }
  }
  cudaStreamDestroy(stream);
}

TEST_CASE("cluster_row pipelined: blocks looping over many rows, strided, in place and odd widths",
          "[gpu][api][layout][cluster_row]") {
  const int max_cluster_size = cluster_limit();
  if (max_cluster_size == 0) return;
  cudaStream_t stream = nullptr;
  RSS_TEST_CUDA(cudaStreamCreate(&stream));
  // More rows than the resident clusters, so every block loads its next row while it works on one: whole
  // aligned vectors (copy engine, both tiles in turn) and odd widths (element by element).
  struct Case {
    std::int64_t rows, cols;
    rss::ClusterConfig config;
  };
  constexpr auto P = rss::RowResidence::shared_memory_pipelined;
  for (const Case& k : {Case{3001, 1024, {256, 8, 1, P}}, Case{2500, 4097, {512, 16, 1, P}},
                        Case{1203, 8192, {256, 16, 2, P}}, Case{777, 32768, {512, 64, 1, P}}}) {
    if (!rss::cluster_config_fits(k.config, k.cols, rss::DType::bf16, max_cluster_size)) continue;
    const rss::Config config{Strategy::cluster_row, k.config};
    rss::ClusterPlan plan;
    REQUIRE(rss::cluster_geometry<__nv_bfloat16>(config, k.rows, k.cols, &plan) == Status::success);
    INFO(k.rows << " x " << k.cols << ", " << k.config.threads << " x " << k.config.elems_per_thread << " x "
                << k.config.cluster_size << " pipelined: grid " << plan.grid_blocks);
    CHECK(plan.config == k.config);
    CHECK(plan.grid_blocks < k.rows * k.config.cluster_size);  // the blocks loop
    CHECK(plan.grid_blocks % k.config.cluster_size == 0);
    check_strided<__nv_bfloat16>(config, k.rows, k.cols, stream);
    check_in_place<__nv_bfloat16>(config, k.rows, k.cols, k.cols, stream);
    // fp32 tiles take twice the bytes: two of 128 KB do not fit an H200 block's 227 KB, and are refused.
    if (2 * k.cols * static_cast<std::int64_t>(sizeof(float)) / k.config.cluster_size <= 160 * 1024) {
      check_strided<float>(config, k.rows, k.cols, stream);
      check_in_place<float>(config, k.rows, k.cols, k.cols + 4, stream);
    } else {
      CHECK(rss::cluster_geometry<float>(config, k.rows, k.cols, &plan) == Status::not_admissible);
    }
    check_strided<__half>(config, k.rows, k.cols, stream);
  }
  cudaStreamDestroy(stream);
}

TEST_CASE("overlaps, host memory and short leading dimensions are refused before any launch", "[gpu][api][layout]") {
  cudaStream_t stream = nullptr;
  RSS_TEST_CUDA(cudaStreamCreate(&stream));
  for (Strategy strategy : strategies_and_automatic()) {
    check_refusals<float>(strategy, stream);
    check_refusals<__nv_bfloat16>(strategy, stream);
  }
  cudaStreamDestroy(stream);
}

TEST_CASE("the automatic operator runs and reports a concrete strategy", "[gpu][api][automatic]") {
  cudaStream_t stream = nullptr;
  RSS_TEST_CUDA(cudaStreamCreate(&stream));
  for (auto shape : {std::pair<std::int64_t, std::int64_t>{4096, 4096}, {1, 131072}, {64, 131072}, {1, 1048576},
                     {3, 4097}, {37, 1001}}) {
    const auto [rows, cols] = shape;
    const Strided<float> p(Layout::contiguous(rows, cols), rss_test::fresh_seed());
    INFO(rows << " x " << cols << " seed " << p.seed);
    rss_test::DeviceBuffer x(p.x.size() * sizeof(float)), y(p.x.size() * sizeof(float));
    RSS_TEST_CUDA(cudaMemcpy(x.get(), p.x.data(), x.bytes(), cudaMemcpyHostToDevice));
    const std::size_t bytes = workspace_for<float>(Strategy::automatic, rows, cols);
    rss_test::DeviceBuffer workspace(bytes);
    if (bytes > 0) RSS_TEST_CUDA(cudaMemset(workspace.get(), 0, bytes));

    rss::Operator<float> op;
    CHECK_FALSE(op.ready());
    rss::LaunchList list;
    CHECK(op.describe(&list) == Status::invalid_strategy);  // not initialised
    CHECK(op.run(stream) == Status::invalid_strategy);
    const Status init = op.initialize(Strategy::automatic, x.get<const float>(), y.get<float>(), p.layout,
                                      workspace.get(), bytes, stream);
    INFO("initialize: " << rss::status_message(init));
    REQUIRE(init == Status::success);
    REQUIRE(op.ready());
    CHECK(op.strategy() != Strategy::automatic);
    INFO("picked " << rss::strategy_name(op.strategy()));

    REQUIRE(op.describe(&list) == Status::success);
    CHECK(list.kernels >= 1);
    CHECK(list.host_launches >= 1);
    CHECK(op.describe(nullptr) == Status::null_pointer);
    // The one-call description of automatic names the same kernels.
    rss::LaunchList one_call;
    REQUIRE(rss::describe_launches<float>(Strategy::automatic, rows, cols, &one_call) == Status::success);
    CHECK(one_call.kernels == list.kernels);

    for (int repeat = 0; repeat < 3; ++repeat) {
      rss_test::poison(y);
      Strategy ran = Strategy::automatic;
      const Status s = op.run(stream, &ran);
      INFO("run " << repeat << ": " << rss::status_message(s));
      REQUIRE(s == Status::success);
      CHECK(ran == op.strategy());
      const auto out = download<float>(y, p.x.size());
      CHECK(p.error(out, cols) <= rss::reference::fp32_tolerance);
    }
  }
  cudaStreamDestroy(stream);
}

TEST_CASE("cluster_row matches the reference with every configuration that fits", "[gpu][cluster_row]") {
  const int max_cluster_size = cluster_limit();
  if (max_cluster_size == 0) return;
  cudaStream_t stream = nullptr;
  RSS_TEST_CUDA(cudaStreamCreate(&stream));
  // Exact fits (every block share is threads x elems), whole vectors, and odd widths: each kernel
  // instantiation (exact fit, whole vectors, checked) runs.
  // Rows of 262144 and 200003 elements need clusters of 16 blocks (13 at least), where the device has them.
  for (auto shape : {std::pair<std::int64_t, std::int64_t>{1, 131072}, {2, 8192}, {4, 70000}, {5, 4097}, {3, 70001},
                     {1, 262144}, {2, 200003}}) {
    const std::int64_t rows = shape.first, cols = shape.second;  // a lambda capturing bindings would be C++20
    if (rss::cluster_chunk(cols, max_cluster_size) > 512 * 64) continue;  // no cluster of this device holds it
    const Strided<float> p(Layout::contiguous(rows, cols), rss_test::fresh_seed());
    rss_test::DeviceBuffer x(p.x.size() * sizeof(float)), y(p.x.size() * sizeof(float));
    RSS_TEST_CUDA(cudaMemcpy(x.get(), p.x.data(), x.bytes(), cudaMemcpyHostToDevice));
    int tested = 0;
    rss::DeviceInfo device;
    REQUIRE(rss::current_device_info(&device) == Status::success);
    using R = rss::RowResidence;
    for (const R residence : {R::registers, R::shared_memory, R::shared_memory_pipelined}) {
      const bool shared = residence != R::registers;
      const bool pipelined = residence == R::shared_memory_pipelined;
      rss::for_each_cluster_config(residence, [&](int threads, int elems) {
        for (int cluster_size : {1, 2, 3, 4, 8, 16}) {
          const rss::ClusterConfig c{threads, elems, cluster_size, residence};
          if (!rss::cluster_config_fits(c, cols, rss::DType::fp32, max_cluster_size)) continue;
          INFO(rows << " x " << cols << " threads " << threads << " elems " << elems << " cluster " << cluster_size
                    << (pipelined ? " pipelined" : shared ? " in shared memory" : " in registers") << " seed "
                    << p.seed);
          rss::Operator<float> op;
          const rss::Config config{Strategy::cluster_row, c};
          const Status init = op.initialize(config, x.get<const float>(), y.get<float>(), p.layout, nullptr, 0);
          INFO("initialize: " << rss::status_message(init) << " (" << cudaGetErrorString(rss::last_cuda_error()) << ")");
          // Tiles larger than a block's shared memory (two 128 KB fp32 tiles) are refused, not launched.
          const std::int64_t tiles = pipelined ? 2 : shared ? 1 : 0;
          const std::int64_t tile_bytes = tiles * rss::cluster_chunk(cols, cluster_size) * 4;
          if (tile_bytes > static_cast<std::int64_t>(device.shared_per_block_optin)) {
            CHECK(init == Status::not_admissible);
            continue;
          }
          REQUIRE(init == Status::success);
          rss::ClusterPlan plan;
          REQUIRE(rss::cluster_geometry<float>(config, rows, cols, &plan) == Status::success);
          CHECK(plan.config == c);
          CHECK(plan.grid_blocks == rows * cluster_size);
          rss::LaunchList list;
          REQUIRE(op.describe(&list) == Status::success);
          CHECK(list.kernels == 1);
          CHECK(list.items[0].block == static_cast<unsigned>(threads));
          CHECK(list.items[0].cluster_size == cluster_size);
          CHECK(list.items[0].grid == static_cast<unsigned>(rows * cluster_size));
          const bool exact = cols == static_cast<std::int64_t>(threads) * elems * cluster_size;
          if (shared) {
            const std::string kernel = pipelined ? "cluster_row::pipelined" : "cluster_row::shared";
            CHECK(std::string(list.items[0].kernel) == (cols % 4 == 0 ? kernel + "_vectors" : kernel));
            CHECK(list.items[0].shared_bytes ==
                  static_cast<std::size_t>(plan.chunk_elems) * sizeof(float) * (pipelined ? 2 : 1) + rss::tile_alignment);
          } else {
            CHECK(std::string(list.items[0].kernel) ==
                  (exact ? "cluster_row::exact" : cols % 4 == 0 ? "cluster_row::vectors" : "cluster_row"));
            CHECK(list.items[0].shared_bytes == 0);
          }
          rss_test::poison(y);
          const Status s = op.run(stream);
          INFO("run: " << rss::status_message(s) << " (" << cudaGetErrorString(rss::last_cuda_error()) << ")");
          CHECK(s == Status::success);
          ++tested;
          if (s != Status::success) continue;  // report every configuration, not only the first failure
          RSS_TEST_CUDA(cudaStreamSynchronize(stream));
          RSS_TEST_CUDA(cudaGetLastError());
          const auto out = download<float>(y, p.x.size());
          const double error = p.error(out, cols);
          INFO("max row relative error " << error);
          CHECK(error <= rss::reference::fp32_tolerance);
        }
      });
    }
    INFO(rows << " x " << cols);
    CHECK(tested > 0);
  }
  cudaStreamDestroy(stream);
}

template <class T>
void check_automatic_long_cluster_rows(double tolerance) {
  cudaStream_t stream = nullptr;
  RSS_TEST_CUDA(cudaStreamCreate(&stream));
  for (auto shape : {std::pair<std::int64_t, std::int64_t>{1, 131073}, {3, 151936}, {2, 262144}, {1, 262136}}) {
    const std::int64_t rows = shape.first, cols = shape.second;
    const Strided<T> p(Layout::contiguous(rows, cols), rss_test::fresh_seed());
    rss_test::DeviceBuffer x(p.x.size() * sizeof(T)), y(p.x.size() * sizeof(T));
    RSS_TEST_CUDA(cudaMemcpy(x.get(), p.x.data(), x.bytes(), cudaMemcpyHostToDevice));
    std::size_t bytes = 0;  // automatic plans its fallback too (local_fusion, which needs a workspace)
    REQUIRE(rss::workspace_bytes<T>(Strategy::automatic, rows, cols, &bytes) == Status::success);
    rss_test::DeviceBuffer workspace(bytes);
    rss::Operator<T> op;
    REQUIRE(op.initialize(Strategy::automatic, x.get<const T>(), y.get<T>(), p.layout, workspace.get(), bytes) ==
            Status::success);
    rss::LaunchList list;
    REQUIRE(op.describe(&list) == Status::success);
    INFO(rows << " x " << cols << " seed " << p.seed << ": " << list.items[0].kernel << ", cluster of "
              << list.items[0].cluster_size);
    CHECK(std::string(list.items[0].kernel).rfind("cluster_row", 0) == 0);
    CHECK(list.items[0].cluster_size > 8);
    rss_test::poison(y);
    Strategy ran{};
    REQUIRE(op.run(stream, &ran) == Status::success);
    CHECK(ran == Strategy::cluster_row);
    RSS_TEST_CUDA(cudaStreamSynchronize(stream));
    CHECK(p.error(download<T>(y, p.x.size()), cols) <= tolerance);
  }
  cudaStreamDestroy(stream);
}

TEST_CASE("automatic keeps rows of 131073 to 262144 elements in cluster_row, in clusters of 9 to 16 blocks",
          "[gpu][cluster_row][auto]") {
  if (cluster_limit() <= 8) {
    WARN("this device launches clusters of at most 8 blocks: rows past 131072 elements leave cluster_row");
    return;
  }
  check_automatic_long_cluster_rows<float>(rss::reference::fp32_tolerance);
  check_automatic_long_cluster_rows<__nv_bfloat16>(rss::reference::half_tolerance);
  check_automatic_long_cluster_rows<__half>(rss::reference::half_tolerance);
}
