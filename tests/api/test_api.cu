// The public host API on a real device: bad input gets a status and leaves y untouched, empty
// problems succeed (row statistics included), launch metadata counts what runs, the graph holds nine kernel nodes.
#include <catch2/catch.hpp>

#include <cstdint>
#include <cstring>
#include <limits>
#include <utility>
#include <vector>

#include "rss/rss.cuh"
#include "support/device.cuh"
#include "support/random_input.hpp"
#include "support/strategies.cuh"

namespace {

using rss::Status;
using rss::Strategy;

/// y's bytes, to prove a refused call wrote nothing.
std::vector<unsigned char> snapshot(const rss_test::DeviceBuffer& y) {
  std::vector<unsigned char> bytes(y.bytes());
  RSS_TEST_CUDA(cudaDeviceSynchronize());
  RSS_TEST_CUDA(cudaMemcpy(bytes.data(), y.get(), bytes.size(), cudaMemcpyDeviceToHost));
  return bytes;
}

}  // namespace

TEST_CASE("bad arguments get a status and leave y untouched", "[gpu][api]") {
  const std::int64_t rows = 4, cols = 1000;
  const auto values = rss_test::random_rows(rows, cols, rss_test::fresh_seed());
  rss_test::DeviceBuffer x(values.size() * sizeof(float)), y(values.size() * sizeof(float));
  RSS_TEST_CUDA(cudaMemcpy(x.get(), values.data(), x.bytes(), cudaMemcpyHostToDevice));
  RSS_TEST_CUDA(cudaMemset(y.get(), 0x5A, y.bytes()));
  const auto before = snapshot(y);

  for (Strategy strategy : rss::all_strategies) {
    INFO(rss::strategy_name(strategy));
    std::size_t bytes = 0;
    REQUIRE(rss::workspace_bytes<float>(strategy, rows, cols, &bytes) == Status::success);
    rss_test::DeviceBuffer workspace(bytes + 2 * rss::workspace_alignment);
    const float* xp = x.get<const float>();
    float* yp = y.get<float>();
    void* ws = workspace.get();
    const auto call = [&](const float* in, float* out, std::int64_t r, std::int64_t c, void* w, std::size_t b) {
      return rss::rms_scaled_softmax(strategy, in, out, r, c, w, b);
    };
    CHECK(call(nullptr, yp, rows, cols, ws, bytes) == Status::null_pointer);
    CHECK(call(xp, nullptr, rows, cols, ws, bytes) == Status::null_pointer);
    CHECK(call(xp, yp, -1, cols, ws, bytes) == Status::negative_size);
    CHECK(call(xp, yp, rows, -5, ws, bytes) == Status::negative_size);
    const std::int64_t huge = std::numeric_limits<std::int64_t>::max() / 2;
    CHECK(call(xp, yp, huge, huge, ws, bytes) == Status::size_overflow);
    CHECK(call(xp, yp, std::int64_t{1} << 31, std::int64_t{1} << 31, ws, bytes) == Status::size_overflow);
    if (bytes > 0) {
      CHECK(call(xp, yp, rows, cols, nullptr, bytes) == Status::null_pointer);
      CHECK(call(xp, yp, rows, cols, ws, bytes - 1) == Status::workspace_too_small);
      CHECK(call(xp, yp, rows, cols, static_cast<char*>(ws) + 4, bytes) == Status::misaligned_workspace);
    }
    std::size_t ignored = 0;
    CHECK(rss::workspace_bytes<float>(strategy, -1, cols, &ignored) == Status::negative_size);
    CHECK(rss::workspace_bytes<float>(strategy, rows, cols, nullptr) == Status::null_pointer);
    // Empty problems succeed and touch nothing, whatever the pointers.
    CHECK(call(nullptr, nullptr, 0, cols, nullptr, 0) == Status::success);
    CHECK(call(nullptr, nullptr, rows, 0, nullptr, 0) == Status::success);
  }
  CHECK(snapshot(y) == before);
  CHECK(rss::rms_scaled_softmax(static_cast<Strategy>(99), x.get<const float>(), y.get<float>(), rows, cols,
                                nullptr, 0) == Status::invalid_strategy);
  CHECK(snapshot(y) == before);
}

TEST_CASE("bad row statistics get a status and leave y and the statistics untouched", "[gpu][api]") {
  const std::int64_t rows = 4, cols = 1000;
  const auto values = rss_test::random_rows(rows, cols, rss_test::fresh_seed());
  rss_test::DeviceBuffer x(values.size() * sizeof(float)), y(values.size() * sizeof(float));
  rss_test::DeviceBuffer stats(rows * sizeof(rss::RowStatistics) + 8);
  RSS_TEST_CUDA(cudaMemcpy(x.get(), values.data(), x.bytes(), cudaMemcpyHostToDevice));
  RSS_TEST_CUDA(cudaMemset(y.get(), 0x5A, y.bytes()));
  RSS_TEST_CUDA(cudaMemset(stats.get(), 0x5A, stats.bytes()));
  const auto y_before = snapshot(y);
  const auto stats_before = snapshot(stats);
  std::vector<rss::RowStatistics> host(static_cast<std::size_t>(rows));
  const rss::Layout layout = rss::Layout::contiguous(rows, cols);
  for (Strategy strategy : rss_test::strategies_and_automatic()) {
    INFO(rss::strategy_name(strategy));
    std::size_t bytes = 0;
    REQUIRE(rss::workspace_bytes<float>(strategy, rows, cols, &bytes) == Status::success);
    rss_test::DeviceBuffer workspace(bytes);
    const auto call = [&](rss::RowStatistics* st, float* out) {
      return rss::rms_scaled_softmax_with_statistics<float>(strategy, x.get<const float>(), out, st, layout,
                                                            workspace.get(), bytes);
    };
    CHECK(call(nullptr, y.get<float>()) == Status::null_pointer);
    CHECK(call(reinterpret_cast<rss::RowStatistics*>(stats.get<char>() + 2), y.get<float>()) ==
          Status::misaligned_statistics);
    CHECK(call(host.data(), y.get<float>()) == Status::not_device_memory);
    // The statistics inside y, or y inside the statistics' range.
    CHECK(call(reinterpret_cast<rss::RowStatistics*>(y.get<float>() + 100), y.get<float>()) ==
          Status::overlapping_buffers);
    CHECK(call(reinterpret_cast<rss::RowStatistics*>(x.get<float>() + 100), y.get<float>()) ==
          Status::overlapping_buffers);
    // An empty problem succeeds with any statistics pointer.
    CHECK(rss::rms_scaled_softmax_with_statistics<float>(strategy, x.get<const float>(), y.get<float>(), nullptr,
                                                         rss::Layout::contiguous(0, cols), nullptr, 0) ==
          Status::success);
  }
  CHECK(snapshot(y) == y_before);
  CHECK(snapshot(stats) == stats_before);
}

TEST_CASE("launch metadata counts the kernels each strategy runs", "[gpu][api]") {
  rss::LaunchList list;
  REQUIRE(rss::describe_launches<float>(Strategy::baseline, 8, 131072, &list) == Status::success);
  CHECK(list.kernels == 9);
  CHECK(list.host_launches == 9);
  CHECK_FALSE(list.any_cooperative());
  REQUIRE(rss::describe_launches<float>(Strategy::baseline_graph, 8, 131072, &list) == Status::success);
  CHECK(list.kernels == 9);
  CHECK(list.host_launches == 1);
  REQUIRE(rss::describe_launches<float>(Strategy::local_fusion, 8, 131072, &list) == Status::success);
  CHECK(list.kernels == 3);
  CHECK(std::strcmp(list.items[0].kernel, "local_fusion::stats") == 0);
  REQUIRE(rss::describe_launches<float>(Strategy::local_fusion, 1, 4194304, &list) == Status::success);
  int sm_count = 0;
  RSS_TEST_CUDA(cudaDeviceGetAttribute(&sm_count, cudaDevAttrMultiProcessorCount, 0));
  CHECK(list.items[0].grid >= static_cast<unsigned>(sm_count));  // one long row still fills the GPU

  REQUIRE(rss::describe_launches<float>(Strategy::megakernel_row, 64, 131072, &list) == Status::success);
  CHECK(list.kernels == 2);  // 32 MiB of tiles against ~29 MiB of shared memory: two launches
  CHECK(list.any_cooperative());
  CHECK(list.evicted_tiles == 0);
  REQUIRE(rss::describe_launches<float>(Strategy::megakernel_grid, 1, 131072, &list) == Status::success);
  CHECK(list.kernels == 1);
  CHECK(list.items[0].grid >= static_cast<unsigned>(sm_count / 2));
  REQUIRE(rss::describe_launches<float>(Strategy::megakernel_grid, 1, 16777216, &list) == Status::success);
  CHECK(list.evicted_tiles > 0);
  const rss::Config ordinary_launch{Strategy::megakernel_grid, {}, rss::MegakernelControl::ordinary_launch};
  REQUIRE(rss::describe_launches<float>(ordinary_launch, 64, 131072, &list) == Status::success);
  CHECK(list.kernels == 6);
  CHECK_FALSE(list.any_cooperative());
}

/// The logical bytes a strategy's description should count for rows x cols of `io`-byte elements (the
/// definitions rss_bench's bandwidth uses): x, y and full-size intermediates, as often as each is accessed.
std::int64_t expected_logical_bytes(const rss::Config& c, std::int64_t rows, std::int64_t cols, std::int64_t io,
                                    std::int64_t evicted_elements) {
  const std::int64_t n = rows * cols;
  if (c.control != rss::MegakernelControl::none) return n * io * 4;  // nothing retained: x three times, y once
  switch (c.strategy) {
    case Strategy::baseline:
    case Strategy::baseline_graph: return n * (4 * io + 52);  // nine passes over fp32/fp64 intermediates
    case Strategy::local_fusion: return n * io * 4;
    case Strategy::megakernel_grid:
    case Strategy::megakernel_row:
    case Strategy::block_row: return n * io * 2 + evicted_elements * io * 2;
    case Strategy::cluster_row: return n * io * 2;
    case Strategy::long_row: return n * io * 2 + evicted_elements * io * 2;  // the streamed part twice more (L2)
    case Strategy::automatic: break;
  }
  return -1;
}

template <class T>
void check_logical_bytes(std::int64_t rows, std::int64_t cols) {
  for (Strategy strategy : rss::all_strategies) {
    rss::Config config{strategy};
    INFO(rss::strategy_name(strategy) << " " << rows << "x" << cols << " of " << sizeof(T) << "-byte elements");
    rss::LaunchList list;
    const Status s = rss::describe_launches<T>(config, rows, cols, &list);
    if (s == Status::not_admissible || s == Status::invalid_strategy) continue;  // not for this shape or type
    REQUIRE(s == Status::success);
    if (strategy == Strategy::automatic) REQUIRE(rss::automatic_config<T>(rows, cols, &config) == Status::success);
    CHECK(list.logical_bytes == expected_logical_bytes(config, rows, cols, sizeof(T), list.evicted_elements));
  }
  const rss::Config control{Strategy::megakernel_grid, {}, rss::MegakernelControl::no_retention};
  rss::LaunchList list;
  REQUIRE(rss::describe_launches<T>(control, rows, cols, &list) == Status::success);
  CHECK(list.logical_bytes == expected_logical_bytes(control, rows, cols, sizeof(T), 0));
}

TEST_CASE("each strategy's description counts the bytes its algorithm reads and writes", "[gpu][api]") {
  check_logical_bytes<float>(37, 5003);
  check_logical_bytes<__nv_bfloat16>(37, 5003);
  check_logical_bytes<float>(1, 16777216);  // the megakernel evicts tiles: their x is read twice more
  rss::LaunchList list;
  REQUIRE(rss::describe_launches<float>(Strategy::megakernel_grid, 1, 16777216, &list) == Status::success);
  CHECK(list.evicted_elements > 0);
  REQUIRE(rss::describe_launches<float>(Strategy::cluster_row, 0, 100, &list) == Status::success);
  CHECK(list.logical_bytes == 0);  // nothing launched, nothing counted
}

TEST_CASE("the baseline graph holds exactly nine kernel nodes and replays correctly", "[gpu][api]") {
  const std::int64_t rows = 3, cols = 5000;
  const auto values = rss_test::random_rows(rows, cols, rss_test::fresh_seed());
  std::vector<double> reference(values.size());
  rss::reference::rms_scaled_softmax(values.data(), reference.data(), rows, cols);
  rss_test::DeviceBuffer x(values.size() * sizeof(float)), y(values.size() * sizeof(float));
  RSS_TEST_CUDA(cudaMemcpy(x.get(), values.data(), x.bytes(), cudaMemcpyHostToDevice));
  std::size_t bytes = 0;
  REQUIRE(rss::workspace_bytes<float>(Strategy::baseline_graph, rows, cols, &bytes) == Status::success);
  rss_test::DeviceBuffer workspace(bytes);

  rss::Operator<float> graph;
  REQUIRE(graph.initialize(Strategy::baseline_graph, x.get<const float>(), y.get<float>(),
                           rss::Layout::contiguous(rows, cols), workspace.get(), bytes) == Status::success);
  rss::LaunchList list;
  REQUIRE(graph.describe(&list) == Status::success);
  CHECK(list.graph);
  CHECK(list.graph_kernel_nodes == 9);  // read from the instantiated graph itself
  CHECK(list.kernels == 9);
  CHECK(list.host_launches == 1);
  for (int replay = 0; replay < 3; ++replay) {
    rss_test::poison(y);
    REQUIRE(graph.run() == Status::success);
    RSS_TEST_CUDA(cudaDeviceSynchronize());
    std::vector<float> out(values.size());
    RSS_TEST_CUDA(cudaMemcpy(out.data(), y.get(), y.bytes(), cudaMemcpyDeviceToHost));
    CHECK(rss::reference::max_row_relative_error(out.data(), reference.data(), rows, cols) <=
          rss::reference::fp32_tolerance);
  }
}

namespace {

bool same_launches(const rss::LaunchList& a, const rss::LaunchList& b) {
  if (a.size != b.size || a.kernels != b.kernels) return false;
  for (int i = 0; i < a.size; ++i) {
    const rss::LaunchInfo &p = a.items[i], &q = b.items[i];
    if (std::strcmp(p.kernel, q.kernel) != 0 || p.grid != q.grid || p.block != q.block ||
        p.shared_bytes != q.shared_bytes || p.cluster_size != q.cluster_size || p.cooperative != q.cooperative)
      return false;
  }
  return true;
}

/// automatic's pick, as config(), planned again by a second operator: the same launches (the tuning table's
/// residence and geometry included), without the first operator's fallback.
template <class T>
void check_config_plans_the_same(std::int64_t rows, std::int64_t cols) {
  CAPTURE(rows, cols, rss::dtype_name(rss::dtype_of<T>));
  const std::size_t n = static_cast<std::size_t>(rows * cols);
  rss_test::DeviceBuffer x(n * sizeof(T)), y(n * sizeof(T)), stats(static_cast<std::size_t>(rows) * sizeof(rss::RowStatistics));
  const auto layout = rss::Layout::contiguous(rows, cols);
  auto* row_stats = stats.get<rss::RowStatistics>();
  std::size_t bytes = 0;
  REQUIRE(rss::workspace_bytes<T>(Strategy::automatic, rows, cols, &bytes) == Status::success);
  rss_test::DeviceBuffer workspace(bytes);
  if (bytes > 0) RSS_TEST_CUDA(cudaMemset(workspace.get(), 0, bytes));
  rss::Operator<T> picked;
  REQUIRE(picked.initialize(Strategy::automatic, x.get<const T>(), y.get<T>(), row_stats, layout, workspace.get(), bytes) ==
          Status::success);
  const rss::Config config = picked.config();
  CHECK(config.strategy == picked.strategy());
  CHECK(config.strategy != Strategy::automatic);
  std::size_t own = 0;
  REQUIRE(rss::workspace_bytes<T>(config, rows, cols, &own) == Status::success);
  CHECK(own <= bytes);
  rss::Operator<T> again;
  REQUIRE(again.initialize(config, x.get<const T>(), y.get<T>(), row_stats, layout, workspace.get(), own) == Status::success);
  CHECK(again.strategy() == picked.strategy());
  rss::LaunchList a, b;
  REQUIRE(picked.describe(&a) == Status::success);
  REQUIRE(again.describe(&b) == Status::success);
  INFO("picked " << rss::strategy_name(picked.strategy()) << ": " << (a.size > 0 ? a.items[0].kernel : "-") << " x "
                 << (a.size > 0 ? a.items[0].grid : 0) << ", again " << (b.size > 0 ? b.items[0].kernel : "-") << " x "
                 << (b.size > 0 ? b.items[0].grid : 0));
  CHECK(same_launches(a, b));
}

}  // namespace

// A framework plans a layout once with automatic, then plans the pick alone (its workspace without the
// fallback's): config() carries the pick's cluster configuration, which strategy() alone would lose.
TEST_CASE("an operator's config() plans the same launches as its automatic pick", "[gpu][api]") {
  for (const auto& [rows, cols] : std::vector<std::pair<std::int64_t, std::int64_t>>{
           {32, 128256}, {4096, 4096}, {4096, 32768}, {64, 131072}, {8, 131072}, {1, 1048576}, {7, 1001}}) {
    check_config_plans_the_same<float>(rows, cols);
    check_config_plans_the_same<__nv_bfloat16>(rows, cols);
    check_config_plans_the_same<__half>(rows, cols);
  }
}

// rebind with the pointers vouched for (a framework's tensors): no runtime queries, the same results; with the
// runtime asked, a host pointer is still refused and the operator keeps its tensors.
TEST_CASE("rebind with vouched pointers runs on the new tensors; the runtime check still refuses host memory", "[gpu][api]") {
  const std::int64_t rows = 5, cols = 40000;
  const auto values = rss_test::random_rows(rows, cols, rss_test::fresh_seed());
  std::vector<double> reference(values.size());
  rss::reference::rms_scaled_softmax(values.data(), reference.data(), rows, cols);
  const std::size_t bytes_xy = values.size() * sizeof(float);
  rss_test::DeviceBuffer x1(bytes_xy), y1(bytes_xy), x2(bytes_xy + 16), y2(bytes_xy + 16),
      stats(static_cast<std::size_t>(rows) * sizeof(rss::RowStatistics));
  RSS_TEST_CUDA(cudaMemcpy(x1.get(), values.data(), bytes_xy, cudaMemcpyHostToDevice));
  float* x2p = x2.get<float>() + 1;  // off 16-byte alignment: the rebind plans another kernel
  float* y2p = y2.get<float>() + 1;
  RSS_TEST_CUDA(cudaMemcpy(x2p, values.data(), bytes_xy, cudaMemcpyHostToDevice));
  std::size_t bytes = 0;
  REQUIRE(rss::workspace_bytes<float>(Strategy::automatic, rows, cols, &bytes) == Status::success);
  rss_test::DeviceBuffer workspace(bytes);
  if (bytes > 0) RSS_TEST_CUDA(cudaMemset(workspace.get(), 0, bytes));
  auto* row_stats = stats.get<rss::RowStatistics>();
  rss::Operator<float> op;
  REQUIRE(op.initialize(Strategy::automatic, x1.get<const float>(), y1.get<float>(), row_stats,
                        rss::Layout::contiguous(rows, cols), workspace.get(), bytes) == Status::success);
  std::vector<float> host(values.size());
  CHECK(op.rebind(host.data(), y2p, row_stats, workspace.get(), bytes) == Status::not_device_memory);
  // Vouched, the host-side checks still run: overlap and null pointers are refused, the tensors kept.
  constexpr auto vouched = rss::PointerCheck::vouched;
  CHECK(op.rebind(x2p, x2p + 1, row_stats, workspace.get(), bytes, nullptr, vouched) == Status::overlapping_buffers);
  CHECK(op.rebind(nullptr, y2p, row_stats, workspace.get(), bytes, nullptr, vouched) == Status::null_pointer);
  CHECK(op.rebind(x2p, y2p, nullptr, workspace.get(), bytes, nullptr, vouched) == Status::null_pointer);
  for (float* x_in : {x2p, x1.get<float>()}) {
    float* y_out = x_in == x2p ? y2p : y1.get<float>();
    REQUIRE(op.rebind(x_in, y_out, row_stats, workspace.get(), bytes, nullptr, vouched) == Status::success);
    REQUIRE(op.run() == Status::success);
    RSS_TEST_CUDA(cudaDeviceSynchronize());
    std::vector<float> out(values.size());
    RSS_TEST_CUDA(cudaMemcpy(out.data(), y_out, bytes_xy, cudaMemcpyDeviceToHost));
    CHECK(rss::reference::max_row_relative_error(out.data(), reference.data(), rows, cols) <= rss::reference::fp32_tolerance);
  }
}

// Run by CTest with CUDA_VISIBLE_DEVICES set to no device: also runs where there is no GPU at all.
TEST_CASE("without a usable device every strategy says no_device", "[.][no_device]") {
  std::vector<float> host(16, 1.0f);
  const auto* fake_x = reinterpret_cast<const float*>(0x1000);  // never dereferenced: refused before any launch
  auto* fake_y = reinterpret_cast<float*>(0x2000);
  alignas(256) static unsigned char fake_workspace[1];
  for (Strategy strategy : rss::all_strategies) {
    INFO(rss::strategy_name(strategy));
    const Status s = rss::rms_scaled_softmax(strategy, fake_x, fake_y, 4, 4, fake_workspace,
                                             std::size_t{1} << 40);
    CHECK(s == Status::no_device);
  }
}
