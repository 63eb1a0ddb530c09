// Strategy long_row on a real device: the issue's rows (1 x 2^20, 2^22, 2^24) in fp32, bf16 and fp16 against the
// CPU reference, with the plan the launch describes (one cooperative launch, every SM, the streamed part
// counted); rows whose magnitude changes along them (the partials the exchanges combine differ widely); rows that
// are not 16-byte aligned, odd widths and several rows (the copy engine's fallback, the
// tails, the rounds of later rows); the exchange state reused across calls without re-zeroing, from any
// starting count and across the unsigned wrap. The bounded wait (a corrupted state traps instead of hanging)
// is tests/strategies/test_long_row_wait.cu, in a process of its own: a trap ends the CUDA context.
#include <catch2/catch.hpp>
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <algorithm>
#include <climits>
#include <cmath>
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "rss/rss.cuh"
#include "support/device.cuh"
#include "support/random_input.hpp"
#include "support/storage.cuh"

namespace {

using rss::Status;
using rss::Strategy;

/// x (as stored) on host and device at an element offset into its buffer, and its reference from the stored values.
template <class T>
struct LongProblem {
  rss::Layout layout;
  std::int64_t x_offset, y_offset;
  std::uint64_t seed;
  std::vector<T> x;
  std::vector<double> reference;  // rows x cols, packed
  rss_test::DeviceBuffer x_device, y_device;

  /// shape(column, value): the row's random values reshaped (drifts, steps, spikes); identity by default.
  LongProblem(rss::Layout l, std::int64_t x_off = 0, std::int64_t y_off = 0,
              const std::function<float(std::int64_t, float)>& shape = nullptr)
      : layout(l), x_offset(x_off), y_offset(y_off), seed(rss_test::fresh_seed()),
        x_device(static_cast<std::size_t>(x_off + l.rows * l.ld_x) * sizeof(T)),
        y_device(static_cast<std::size_t>(y_off + l.rows * l.ld_y) * sizeof(T)) {
    const std::vector<float> values = rss_test::random_rows(l.rows, l.ld_x, seed);
    x.resize(values.size());
    for (std::size_t i = 0; i < values.size(); ++i) {
      const auto column = static_cast<std::int64_t>(i) % l.ld_x;
      x[i] = rss_test::from_float<T>(shape ? shape(column, values[i]) : values[i]);
    }
    std::vector<double> packed(static_cast<std::size_t>(l.rows * l.cols));
    for (std::int64_t r = 0; r < l.rows; ++r)
      for (std::int64_t c = 0; c < l.cols; ++c)
        packed[static_cast<std::size_t>(r * l.cols + c)] = rss_test::to_double(x[static_cast<std::size_t>(r * l.ld_x + c)]);
    reference.resize(packed.size());
    rss::reference::rms_scaled_softmax(packed.data(), reference.data(), l.rows, l.cols);
    RSS_TEST_CUDA(cudaMemcpy(x_device.get<T>() + x_off, x.data(), x.size() * sizeof(T), cudaMemcpyHostToDevice));
  }
  const T* xd() const { return x_device.get<const T>() + x_offset; }
  T* yd() const { return y_device.get<T>() + y_offset; }

  /// The worst row error of y (poisoned before the run: an unwritten element is NaN and fails).
  double error() const {
    std::vector<T> all(y_device.bytes() / sizeof(T));
    RSS_TEST_CUDA(cudaMemcpy(all.data(), y_device.get(), y_device.bytes(), cudaMemcpyDeviceToHost));
    std::vector<double> got(static_cast<std::size_t>(layout.rows * layout.cols));
    for (std::int64_t r = 0; r < layout.rows; ++r)
      for (std::int64_t c = 0; c < layout.cols; ++c)
        got[static_cast<std::size_t>(r * layout.cols + c)] =
            rss_test::to_double(all[static_cast<std::size_t>(y_offset + r * layout.ld_y + c)]);
    return rss::reference::max_row_relative_error(got.data(), reference.data(), layout.rows, layout.cols);
  }
};

/// The stated bound for a one-row problem (rss/reference/tolerance.hpp): fp32's, or for 16-bit storage what rounding
/// the exact answer to T costs plus twice fp32's. A row of 2^22 or more fp16 values has most outputs below fp16's normal range, where that
/// cost alone exceeds the 1e-2 of ordinary rows.
template <class T>
double stated_tolerance(const LongProblem<T>& p) {
  if (sizeof(T) == 4) return rss::reference::fp32_tolerance;
  return rss::reference::storage_tolerance(p.reference.data(), p.layout.cols, [](double v) {
    return rss_test::to_double(rss_test::from_float<T>(static_cast<float>(v)));
  });
}

std::size_t long_row_workspace() {
  std::size_t bytes = 0;
  REQUIRE(rss::workspace_bytes<float>(Strategy::long_row, 1, 1, &bytes) == Status::success);
  return bytes;
}

/// Runs long_row once (statistics optional) with y poisoned; returns the worst row error.
template <class T>
double run_once(const LongProblem<T>& p, void* workspace, std::size_t bytes, rss::RowStatistics* stats = nullptr) {
  rss_test::poison(p.y_device);
  rss::Operator<T> op;
  const Status init = stats == nullptr ? op.initialize(Strategy::long_row, p.xd(), p.yd(), p.layout, workspace, bytes)
                                       : op.initialize(Strategy::long_row, p.xd(), p.yd(), stats, p.layout, workspace, bytes);
  INFO("initialize: " << rss::status_message(init));
  REQUIRE(init == Status::success);
  const Status s = op.run();
  INFO("run: " << rss::status_message(s) << " (" << cudaGetErrorString(rss::last_cuda_error()) << ")");
  REQUIRE(s == Status::success);
  RSS_TEST_CUDA(cudaDeviceSynchronize());
  return p.error();
}

template <class T>
void check_issue_shapes() {
  const std::size_t bytes = long_row_workspace();
  rss_test::DeviceBuffer workspace(bytes);
  rss_test::poison(workspace);  // initialize zeroes what long_row keeps there
  int sms = 0;
  RSS_TEST_CUDA(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0));
  for (const std::int64_t cols : {std::int64_t{1} << 20, std::int64_t{1} << 22, std::int64_t{1} << 24}) {
    const LongProblem<T> p(rss::Layout::contiguous(1, cols));
    rss::LongRowPlan plan;
    REQUIRE(rss::long_row_geometry<T>(1, cols, &plan) == Status::success);
    rss::LaunchList list;
    REQUIRE(rss::describe_launches<T>(Strategy::long_row, 1, cols, &list) == Status::success);
    INFO("1 x " << cols << " " << rss::dtype_name(rss::dtype_of<T>) << ", seed " << p.seed << ": " << plan.clusters
                << " clusters of " << plan.cluster_size << ", share " << plan.share_elems << ", tile "
                << plan.tile_elems << ", streamed " << plan.streamed_elems_per_row);
    REQUIRE(list.size == 1);
    CHECK(list.kernels == 1);
    CHECK(list.items[0].cooperative);
    CHECK(list.items[0].grid == static_cast<unsigned>(plan.grid_blocks));
    CHECK(list.items[0].cluster_size == plan.cluster_size);
    CHECK(list.items[0].shared_bytes == plan.dynamic_shared_bytes);
    CHECK(list.evicted_elements == plan.streamed_elements);
    CHECK(plan.grid_blocks <= sms);
    CHECK(plan.grid_blocks * 10 >= sms * 8);  // the row is spread over (nearly) every SM
    if (cols == std::int64_t{1} << 24 && sizeof(T) == 4) CHECK(plan.streamed_elems_per_row > 0);
    // A register part (fp32 only) exactly where a block's share passes its tile: the kernel without one elsewhere.
    CHECK((plan.register_elems > 0) == (sizeof(T) == 4 && plan.share_elems > plan.tile_elems));
    if (cols <= std::int64_t{1} << 22) CHECK(plan.streamed_elems_per_row == 0);

    const double tolerance = stated_tolerance(p);
    const double error = run_once(p, workspace.get(), bytes);
    INFO("max row relative error " << error << " (tolerance " << tolerance << ")");
    CHECK(error <= tolerance);

    // With statistics: the same y bit for bit, and statistics the reference agrees with.
    std::vector<T> plain(static_cast<std::size_t>(cols));
    RSS_TEST_CUDA(cudaMemcpy(plain.data(), p.yd(), plain.size() * sizeof(T), cudaMemcpyDeviceToHost));
    rss_test::DeviceBuffer stats(sizeof(rss::RowStatistics));
    rss_test::poison(stats);
    CHECK(run_once(p, workspace.get(), bytes, stats.get<rss::RowStatistics>()) <= tolerance);
    std::vector<T> with(plain.size());
    RSS_TEST_CUDA(cudaMemcpy(with.data(), p.yd(), with.size() * sizeof(T), cudaMemcpyDeviceToHost));
    CHECK(std::equal(reinterpret_cast<const unsigned char*>(with.data()),
                     reinterpret_cast<const unsigned char*>(with.data() + with.size()),
                     reinterpret_cast<const unsigned char*>(plain.data())));
    rss::RowStatistics got{};
    RSS_TEST_CUDA(cudaMemcpy(&got, stats.get(), sizeof got, cudaMemcpyDeviceToHost));
    std::vector<double> row(static_cast<std::size_t>(cols));
    for (std::size_t j = 0; j < row.size(); ++j) row[j] = rss_test::to_double(p.x[j]);
    const rss::reference::RowStatistics want = rss::reference::row_statistics(row.data(), cols);
    INFO("max " << got.max << " (want " << want.max << "), inv_rms " << got.inv_rms << " (want " << want.inv_rms
                << "), sum " << got.sum << " (want " << want.sum << ")");
    CHECK(got.max == static_cast<float>(want.max));
    CHECK(std::abs(got.inv_rms - want.inv_rms) <= rss::reference::fp32_tolerance * want.inv_rms);
    CHECK(std::abs(got.sum - want.sum) <= rss::reference::fp32_tolerance * want.sum);
  }
}

}  // namespace

TEST_CASE("long_row matches the reference on 1 x 2^20, 2^22 and 2^24 in fp32, bf16 and fp16, over every SM",
          "[gpu][long_row]") {
  check_issue_shapes<float>();
  check_issue_shapes<__nv_bfloat16>();
  check_issue_shapes<__half>();
}

// Rows whose magnitude changes along them, so that the blocks' and clusters' partial statistics differ widely
// (a drift, a step, segments of different scale, a quarter of zeros, one spike, values near FLT_MAX, a constant row):
// the combination across blocks, clusters and the global rounds must still give the reference's answer.
TEST_CASE("long_row: rows that change along their length, spikes, zeros, near FLT_MAX", "[gpu][long_row][shapes]") {
  const std::size_t bytes = long_row_workspace();
  rss_test::DeviceBuffer workspace(bytes);
  const std::int64_t cols = std::int64_t{1} << 20;
  const double n = static_cast<double>(cols);
  struct Shape {
    const char* what;
    std::function<float(std::int64_t, float)> f;
  };
  const Shape shapes[] = {
      {"a constant row", [](std::int64_t, float) { return 0.75f; }},
      {"magnitude growing 4x along the row", [n](std::int64_t c, float v) { return v * static_cast<float>(1.0 + 3.0 * c / n); }},
      {"a step: the second half 10x the first", [n](std::int64_t c, float v) { return c < n / 2 ? v : 10.0f * v; }},
      {"magnitudes 0.5x-2x in 64 segments",
       [n](std::int64_t c, float v) { return v * static_cast<float>(0.5 + 1.5 * ((c * 64 / static_cast<std::int64_t>(n)) * 37 % 64) / 63.0); }},
      {"the first quarter zeros", [n](std::int64_t c, float v) { return c < n / 4 ? 0.0f : v; }},
      {"one spike of 1e30", [](std::int64_t c, float v) { return c == 700001 ? 1e30f : v; }},
      {"near FLT_MAX, growing", [n](std::int64_t c, float v) { return v * 1e36f * static_cast<float>(1.0 + c / n); }},
  };
  for (const Shape& shape : shapes) {
    const auto check = [&](auto tag) {
      using T = decltype(tag);
      const LongProblem<T> p(rss::Layout::contiguous(1, cols), 0, 0, shape.f);
      INFO(shape.what << ", " << rss::dtype_name(rss::dtype_of<T>) << ", seed " << p.seed);
      const double tolerance = stated_tolerance(p);
      const double error = run_once(p, workspace.get(), bytes);
      INFO("max row relative error " << error << " (tolerance " << tolerance << ")");
      CHECK(error <= tolerance);
    };
    check(float{});
    check(__nv_bfloat16{});
  }
}

// fp32 blocks hold the elements after their tile in registers, and take those elements' sum of squares in fp32
// with one overflow test for the whole part (RowStatsPartial::add_part): values whose squares pass FLT_MAX there,
// alone (a spike) or everywhere, must still give the reference's answer, as must parts cut short.
TEST_CASE("long_row: fp32 register parts with spikes, values near FLT_MAX, and parts cut short",
          "[gpu][long_row][registers]") {
  const std::size_t bytes = long_row_workspace();
  rss_test::DeviceBuffer workspace(bytes);
  for (const std::int64_t cols : {std::int64_t{12000000}, std::int64_t{8000003}}) {
    rss::LongRowPlan plan;
    REQUIRE(rss::long_row_geometry<float>(1, cols, &plan) == Status::success);
    INFO("1 x " << cols << ": share " << plan.share_elems << ", tile " << plan.tile_elems << ", registers "
                << plan.register_elems << ", streamed " << plan.streamed_elems_per_row);
    REQUIRE(plan.register_elems > 0);
    // 12000000: every part whole, and a streamed remainder; 8000003: parts cut short, nothing streamed.
    CHECK(plan.share_elems - plan.tile_elems > (cols == 12000000 ? plan.register_elems : 0));
    CHECK((cols == 12000000) == (plan.streamed_elems_per_row > 0));
    const std::int64_t part = std::min(plan.register_elems, plan.share_elems - plan.tile_elems);
    const std::int64_t in_block0 = plan.tile_elems + part / 3;  // in block 0's register part
    const std::int64_t in_block7 = 7 * plan.share_elems + plan.tile_elems + part - 1;  // the last of block 7's part
    const double n = static_cast<double>(cols);
    struct Shape {
      const char* what;
      std::function<float(std::int64_t, float)> f;
    };
    const Shape shapes[] = {
        {"one spike of 3e30 in block 0's register part", [=](std::int64_t c, float v) { return c == in_block0 ? 3e30f : v; }},
        {"spikes of -2e25 at the end of block 7's part and in block 0's",
         [=](std::int64_t c, float v) { return c == in_block7 || c == in_block0 ? -2e25f : v; }},
        {"near FLT_MAX, growing", [n](std::int64_t c, float v) { return v * 1e36f * static_cast<float>(1.0 + c / n); }},
        {"magnitude growing 4x along the row", [n](std::int64_t c, float v) { return v * static_cast<float>(1.0 + 3.0 * c / n); }},
    };
    for (const Shape& shape : shapes) {
      const LongProblem<float> p(rss::Layout::contiguous(1, cols), 0, 0, shape.f);
      INFO(shape.what << ", seed " << p.seed);
      const double error = run_once(p, workspace.get(), bytes);
      INFO("max row relative error " << error << " (tolerance " << rss::reference::fp32_tolerance << ")");
      CHECK(error <= rss::reference::fp32_tolerance);
    }
  }
}

TEST_CASE("long_row: unaligned rows, odd widths, several rows and strided layouts", "[gpu][long_row][layouts]") {
  const std::size_t bytes = long_row_workspace();
  rss_test::DeviceBuffer workspace(bytes);
  struct Case {
    rss::Layout layout;
    std::int64_t x_offset, y_offset;
    const char* what;
  };
  const Case cases[] = {
      {rss::Layout::contiguous(1, 1), 0, 0, "1 x 1: one block holds it all, the others own nothing"},
      {rss::Layout::contiguous(1, 13), 0, 0, "1 x 13: a share that is not a whole number of vectors"},
      {rss::Layout::contiguous(3, 1000003), 0, 0, "3 x 1000003: rows alternate 16-byte alignment (element-wise tiles)"},
      {rss::Layout::contiguous(2, 9000001), 0, 0, "2 x 9000001: streamed parts, unaligned second row"},
      {rss::Layout::contiguous(1, 5000000), 1, 0, "x one element off alignment: every tile element by element"},
      {rss::Layout::contiguous(1, 9000000), 0, 3, "y off alignment only: scalar stores"},
      {rss::Layout{4, 300000, 300008, 300016}, 0, 0, "4 rows, padded leading dimensions"},
      {rss::Layout::contiguous(40, 70001), 0, 0, "40 rows of 70001: 80 exchange rounds in one launch"},
  };
  for (const Case& c : cases) {
    {
      const LongProblem<float> p(c.layout, c.x_offset, c.y_offset);
      INFO(c.what << ", fp32, seed " << p.seed);
      CHECK(run_once(p, workspace.get(), bytes) <= rss::reference::fp32_tolerance);
    }
    {
      const LongProblem<__nv_bfloat16> p(c.layout, c.x_offset, c.y_offset);
      INFO(c.what << ", bf16, seed " << p.seed);
      CHECK(run_once(p, workspace.get(), bytes) <= rss::reference::half_tolerance);
    }
  }
}

TEST_CASE("long_row's exchange state needs no reset: reused across calls, from any count, across the wrap",
          "[gpu][long_row][reuse]") {
  const std::size_t bytes = long_row_workspace();
  rss_test::DeviceBuffer workspace(bytes);
  rss::LeaderExchangeState* state = nullptr;
  REQUIRE(rss::long_row_exchange_state(workspace.get(), &state) == Status::success);
  const auto read = [&] {
    rss::LeaderExchangeState s{};
    RSS_TEST_CUDA(cudaMemcpy(&s, state, sizeof s, cudaMemcpyDeviceToHost));
    return s;
  };
  const rss::Layout layout = rss::Layout::contiguous(3, 1 << 20);
  const LongProblem<float> p(layout);
  rss::LongRowPlan plan;
  REQUIRE(rss::long_row_geometry<float>(layout.rows, layout.cols, &plan) == Status::success);
  const unsigned per_call = static_cast<unsigned>(2 * layout.rows * plan.clusters);

  rss::Operator<float> op;
  REQUIRE(op.initialize(Strategy::long_row, p.xd(), p.yd(), layout, workspace.get(), bytes) == Status::success);
  RSS_TEST_CUDA(cudaDeviceSynchronize());
  rss::LeaderExchangeState s = read();
  CHECK(s.arrivals == 0);  // initialize zeroed it
  CHECK(s.base == 0);
  for (const unsigned start : {0u, 12345u, UINT_MAX - per_call / 2, UINT_MAX}) {
    const rss::LeaderExchangeState preset{start, start};  // any equal pair is a valid state
    RSS_TEST_CUDA(cudaMemcpy(state, &preset, sizeof preset, cudaMemcpyHostToDevice));
    for (int call = 0; call < 5; ++call) {
      INFO("start " << start << ", call " << call << ", seed " << p.seed);
      rss_test::poison(p.y_device);
      REQUIRE(op.run() == Status::success);
      RSS_TEST_CUDA(cudaDeviceSynchronize());
      CHECK(p.error() <= rss::reference::fp32_tolerance);
      s = read();
      CHECK(s.arrivals == s.base);  // left equal for the next launch
      CHECK(s.base == start + static_cast<unsigned>(call + 1) * per_call);  // modulo 2^32
    }
  }
}
