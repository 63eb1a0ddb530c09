// Host-only parts of the backward pass: the cluster_row planner's kernel contract and the argument checks.
#include <catch2/catch.hpp>

#include <cstdint>
#include <limits>
#include <string>

#include "rss/backward/cluster_plan.hpp"
#include "rss/backward/layout.hpp"

using rss::BackwardClusterConfig;
using rss::BackwardClusterPlan;
using rss::BackwardLayout;
using rss::DType;
using rss::Status;

namespace {
/// A device that launches clusters of up to `max_cluster` blocks, with the H200's 132 SMs unless told.
rss::DeviceInfo device_with(int max_cluster, int sm_count = 132) {
  rss::DeviceInfo d;
  d.max_cluster_size = max_cluster;
  d.sm_count = sm_count;
  return d;
}
}  // namespace

TEST_CASE("backward cluster plan holds every row up to its limit, within the kernel contract", "[cpu][backward][planner]") {
  for (const DType dtype : {DType::fp32, DType::bf16, DType::fp16}) {
    const int w = 16 / rss::dtype_bytes(dtype);
    for (std::int64_t cols = 1; cols <= rss::backward_cluster_max_cols; cols = cols < 64 ? cols + 1 : cols * 3 / 2 + 7) {
      INFO(rss::dtype_name(dtype) << " cols " << cols);
      BackwardClusterPlan plan;
      const int limit = rss::max_cluster_blocks;
      REQUIRE(rss::plan_backward_cluster_row(device_with(limit), 5, cols, dtype, nullptr, &plan) == Status::success);
      const BackwardClusterConfig& c = plan.config;
      CHECK(rss::backward_cluster_config_fits(c, cols, dtype, limit));
      CHECK((c.cluster_size <= rss::portable_cluster_size) == (cols <= rss::backward_cluster_max_cols / 2));
      CHECK(c.elems_per_thread % w == 0);
      CHECK(plan.chunk_elems % 8 == 0);
      CHECK(plan.chunk_elems <= static_cast<std::int64_t>(c.threads) * c.elems_per_thread);
      CHECK(plan.chunk_elems * c.cluster_size >= cols);
      CHECK(plan.chunk_elems * (c.cluster_size - 1) < cols);  // no block without elements
      CHECK(plan.grid_blocks == 5 * c.cluster_size);
    }
    BackwardClusterPlan plan;
    CHECK(rss::plan_backward_cluster_row(device_with(16), 1, rss::backward_cluster_max_cols, dtype, nullptr, &plan) == Status::success);
    CHECK(rss::plan_backward_cluster_row(device_with(16), 1, rss::backward_cluster_max_cols + 1, dtype, nullptr, &plan) ==
          Status::not_admissible);
    // A device that launches clusters of at most 8 holds half as much.
    CHECK(rss::plan_backward_cluster_row(device_with(8), 1, rss::backward_cluster_max_cols / 2, dtype, nullptr, &plan) ==
          Status::success);
    CHECK(rss::plan_backward_cluster_row(device_with(8), 1, rss::backward_cluster_max_cols / 2 + 1, dtype, nullptr, &plan) ==
          Status::not_admissible);
  }
}

TEST_CASE("backward cluster plan: defaults on the bench shapes, preferred configurations, refusals", "[cpu][backward][planner]") {
  // One rule for both saved states: 256 x up to 32 in the fewest blocks, then 512 x 32 (bench/NOTES.md).
  CHECK(rss::default_backward_cluster_config(4096, DType::fp32, 8) == BackwardClusterConfig{256, 16, 1});
  CHECK(rss::default_backward_cluster_config(4096, DType::bf16, 8) == BackwardClusterConfig{256, 16, 1});
  CHECK(rss::default_backward_cluster_config(8192, DType::fp32, 8) == BackwardClusterConfig{256, 32, 1});
  CHECK(rss::default_backward_cluster_config(8192, DType::bf16, 8) == BackwardClusterConfig{256, 32, 1});
  CHECK(rss::default_backward_cluster_config(8193, DType::fp32, 8) == BackwardClusterConfig{256, 32, 2});
  CHECK(rss::default_backward_cluster_config(16384, DType::bf16, 8) == BackwardClusterConfig{256, 32, 2});
  CHECK(rss::default_backward_cluster_config(32768, DType::fp32, 8) == BackwardClusterConfig{256, 32, 4});
  CHECK(rss::default_backward_cluster_config(32768, DType::bf16, 8) == BackwardClusterConfig{256, 32, 4});
  CHECK(rss::default_backward_cluster_config(65536, DType::fp16, 8) == BackwardClusterConfig{256, 32, 8});
  CHECK(rss::default_backward_cluster_config(65537, DType::fp32, 8) == BackwardClusterConfig{512, 32, 5});
  CHECK(rss::default_backward_cluster_config(131072, DType::fp32, 8) == BackwardClusterConfig{512, 32, 8});
  CHECK(rss::default_backward_cluster_config(128256, DType::bf16, 8) == BackwardClusterConfig{512, 32, 8});
  CHECK(rss::default_backward_cluster_config(2048, DType::bf16, 8) == BackwardClusterConfig{256, 8, 1});
  CHECK(rss::default_backward_cluster_config(1000, DType::fp32, 8) == BackwardClusterConfig{256, 4, 1});
  CHECK(rss::default_backward_cluster_config(1000, DType::bf16, 8) == BackwardClusterConfig{256, 8, 1});
  CHECK(rss::default_backward_cluster_config(1, DType::fp16, 8) == BackwardClusterConfig{256, 8, 1});
  CHECK(rss::default_backward_cluster_config(32768, DType::fp32, 2) == BackwardClusterConfig{512, 32, 2});
  CHECK(rss::default_backward_cluster_config(131073, DType::fp32, 8).cluster_size == 0);
  // Rows that 8 blocks do not hold: 512 x 32 in 9-16 blocks where the device launches them.
  CHECK(rss::default_backward_cluster_config(131072, DType::bf16, 16) == BackwardClusterConfig{512, 32, 8});
  CHECK(rss::default_backward_cluster_config(131073, DType::fp32, 16) == BackwardClusterConfig{512, 32, 9});
  CHECK(rss::default_backward_cluster_config(256000, DType::bf16, 16) == BackwardClusterConfig{512, 32, 16});
  CHECK(rss::default_backward_cluster_config(262144, DType::fp16, 16) == BackwardClusterConfig{512, 32, 16});
  CHECK(rss::default_backward_cluster_config(262145, DType::fp32, 16).cluster_size == 0);
  // automatic leaves those rows to two_pass until their clusters fill every SM once (132 on the H200).
  CHECK(rss::backward_prefers_two_pass(2, 200003, DType::bf16, 16, 132));
  CHECK(rss::backward_prefers_two_pass(14, 131073, DType::fp32, 16, 132));     // 14 x 9 = 126 blocks
  CHECK_FALSE(rss::backward_prefers_two_pass(15, 131073, DType::fp32, 16, 132));  // 135
  CHECK_FALSE(rss::backward_prefers_two_pass(32, 256000, DType::bf16, 16, 132));
  CHECK_FALSE(rss::backward_prefers_two_pass(1, 131072, DType::fp32, 16, 132));  // 8 blocks: cluster_row
  CHECK_FALSE(rss::backward_prefers_two_pass(2, 200003, DType::bf16, 8, 132));   // no cluster holds it
  // A few rows of 65537-131072 elements spread over 16 blocks of 256 threads while those fill at most half the SMs.
  CHECK(rss::backward_cluster_config_for(1, 131072, DType::fp32, 16, 132) == BackwardClusterConfig{256, 32, 16});
  CHECK(rss::backward_cluster_config_for(4, 131072, DType::bf16, 16, 132) == BackwardClusterConfig{256, 32, 16});
  CHECK(rss::backward_cluster_config_for(2, 100000, DType::fp16, 16, 132) == BackwardClusterConfig{256, 32, 16});
  CHECK(rss::backward_cluster_config_for(5, 131072, DType::fp32, 16, 132) == BackwardClusterConfig{512, 32, 8});
  CHECK(rss::backward_cluster_config_for(8, 131072, DType::fp32, 16, 132) == BackwardClusterConfig{512, 32, 8});
  CHECK(rss::backward_cluster_config_for(1, 131072, DType::fp32, 8, 132) == BackwardClusterConfig{512, 32, 8});
  CHECK(rss::backward_cluster_config_for(1, 65536, DType::fp32, 16, 132) == BackwardClusterConfig{256, 32, 8});
  CHECK(rss::backward_cluster_config_for(1, 200003, DType::bf16, 16, 132) == BackwardClusterConfig{512, 32, 13});
  CHECK(rss::backward_cluster_config_for(0, 131072, DType::fp32, 16, 132) == BackwardClusterConfig{512, 32, 8});
  {
    BackwardClusterPlan few;
    REQUIRE(rss::plan_backward_cluster_row(device_with(16), 2, 131072, DType::bf16, nullptr, &few) == Status::success);
    CHECK(few.config == BackwardClusterConfig{256, 32, 16});
    CHECK(few.grid_blocks == 32);
    REQUIRE(rss::plan_backward_cluster_row(device_with(16, 32), 2, 131072, DType::bf16, nullptr, &few) == Status::success);
    CHECK(few.config == BackwardClusterConfig{512, 32, 8});  // 32 SMs: two rows of 16 blocks would fill them
  }
  // Every default is instantiated and holds its row.
  for (const std::int64_t cols : {1, 7, 1000, 4096, 4097, 8192, 12345, 32768, 65536, 100000, 131072}) {
    for (const DType dtype : {DType::fp32, DType::bf16, DType::fp16}) {
      const BackwardClusterConfig c = rss::default_backward_cluster_config(cols, dtype, 8);
      INFO(cols << " " << rss::dtype_name(dtype));
      CHECK(rss::backward_cluster_config_fits(c, cols, dtype, 8));
    }
  }

  BackwardClusterPlan plan;
  const BackwardClusterConfig preferred{256, 16, 2};
  REQUIRE(rss::plan_backward_cluster_row(device_with(8), 3, 8192, DType::fp32, &preferred, &plan) == Status::success);
  CHECK(plan.config == preferred);
  CHECK(plan.chunk_elems == 4096);
  // A preference is used as given or refused, never replaced by the default; *out stays as it was.
  const BackwardClusterPlan before = plan;
  const BackwardClusterConfig too_small{256, 4, 1};
  CHECK(rss::plan_backward_cluster_row(device_with(8), 3, 8192, DType::fp32, &too_small, &plan) == Status::not_admissible);
  CHECK(plan.config == before.config);
  const BackwardClusterConfig not_a_vector{256, 4, 1};  // 4 bf16 elements are half a vector
  CHECK_FALSE(rss::backward_cluster_config_fits(not_a_vector, 100, DType::bf16, 8));
  CHECK(rss::plan_backward_cluster_row(device_with(8), 3, 100, DType::bf16, &not_a_vector, &plan) == Status::invalid_strategy);
  const BackwardClusterConfig in_shared_memory{256, 8, 1, rss::RowResidence::shared_memory};  // forward only
  CHECK(rss::plan_backward_cluster_row(device_with(8), 3, 100, DType::fp32, &in_shared_memory, &plan) == Status::invalid_strategy);
  const BackwardClusterConfig odd_threads{384, 8, 1};
  CHECK(rss::plan_backward_cluster_row(device_with(8), 3, 100, DType::fp32, &odd_threads, &plan) == Status::invalid_strategy);

  CHECK(rss::plan_backward_cluster_row(device_with(0), 3, 100, DType::fp32, nullptr, &plan) == Status::unsupported_device);
  CHECK(rss::plan_backward_cluster_row(device_with(8), -1, 100, DType::fp32, nullptr, &plan) == Status::negative_size);
  CHECK(rss::plan_backward_cluster_row(device_with(8), 3, 100, DType::fp32, nullptr, nullptr) == Status::null_pointer);
  CHECK(rss::plan_backward_cluster_row(device_with(8), std::numeric_limits<std::int64_t>::max() / 2, 100, DType::fp32, nullptr, &plan) ==
        Status::size_overflow);
  REQUIRE(rss::plan_backward_cluster_row(device_with(0), 0, 100, DType::fp32, nullptr, &plan) == Status::success);  // empty: no device needed
  CHECK(plan.grid_blocks == 0);
  // A smaller cluster limit moves long rows out of reach.
  CHECK(rss::plan_backward_cluster_row(device_with(2), 1, 65536, DType::fp32, nullptr, &plan) == Status::not_admissible);
  CHECK(rss::plan_backward_cluster_row(device_with(2), 1, 32768, DType::fp32, nullptr, &plan) == Status::success);
  CHECK(plan.config == BackwardClusterConfig{512, 32, 2});
}

TEST_CASE("backward layout validation: sizes, leading dimensions, 64-bit extents", "[cpu][backward][validate]") {
  CHECK(rss::validate_backward_layout(BackwardLayout::contiguous(2, 3), 4) == Status::success);
  CHECK(rss::validate_backward_layout(BackwardLayout{2, 3, 3, 4, 5, 6}, 4) == Status::success);
  CHECK(rss::validate_backward_layout(BackwardLayout{2, 3, 2, 3, 3, 3}, 4) == Status::invalid_layout);
  CHECK(rss::validate_backward_layout(BackwardLayout{2, 3, 3, 2, 3, 3}, 4) == Status::invalid_layout);
  CHECK(rss::validate_backward_layout(BackwardLayout{2, 3, 3, 3, 2, 3}, 4) == Status::invalid_layout);
  CHECK(rss::validate_backward_layout(BackwardLayout{2, 3, 3, 3, 3, 2}, 4) == Status::invalid_layout);
  CHECK(rss::validate_backward_layout(BackwardLayout{-1, 3, 3, 3, 3, 3}, 4) == Status::negative_size);
  CHECK(rss::validate_backward_layout(BackwardLayout{2, -3, 3, 3, 3, 3}, 4) == Status::negative_size);
  CHECK(rss::validate_backward_layout(BackwardLayout{0, 3, 0, 0, 0, 0}, 4) == Status::success);
  const std::int64_t big = std::int64_t{1} << 40;
  CHECK(rss::validate_backward_layout(BackwardLayout{big, big, big, big, big, big}, 4) == Status::size_overflow);
  CHECK(rss::validate_backward_layout(BackwardLayout{1 << 20, 4, 4, 4, 4, big << 4}, 4) == Status::size_overflow);
  CHECK(rss::validate_backward_layout(BackwardLayout{1 << 20, 4, 4, 4, 4, big}, 4) == Status::success);  // 2^62 bytes
}

TEST_CASE("backward call validation: pointers, in place, overlaps and the workspace", "[cpu][backward][validate]") {
  alignas(256) static unsigned char buffer[4096];
  const BackwardLayout l = BackwardLayout::contiguous(2, 3);  // 24 bytes per matrix in fp32
  const void* x = buffer;
  const void* y = buffer + 256;
  const void* dy = buffer + 512;
  const void* dx = buffer + 768;
  void* ws = buffer + 1024;
  const auto call_ws = [&](const void* a, const void* b, const void* c, const void* d, const BackwardLayout& layout,
                           const void* w, std::size_t bytes = 256, std::size_t required = 256) {
    return rss::validate_backward_call(a, b, c, d, layout, 4, w, bytes, required);
  };
  const auto call = [&](const void* a, const void* b, const void* c, const void* d, const BackwardLayout& layout) {
    return call_ws(a, b, c, d, layout, ws);
  };
  CHECK(call(x, y, dy, dx, l) == Status::success);
  CHECK(call(nullptr, y, dy, dx, l) == Status::null_pointer);
  CHECK(call(x, nullptr, dy, dx, l) == Status::null_pointer);
  CHECK(call(x, y, nullptr, dx, l) == Status::null_pointer);
  CHECK(call(x, y, dy, nullptr, l) == Status::null_pointer);
  CHECK(call_ws(x, y, dy, dx, l, nullptr) == Status::null_pointer);
  CHECK(call_ws(x, y, dy, dx, l, ws, 255) == Status::workspace_too_small);
  CHECK(call_ws(x, y, dy, dx, l, buffer + 1025) == Status::misaligned_workspace);
  CHECK(call_ws(x, y, dy, dx, l, nullptr, 0, 0) == Status::success);

  // In place: dx is dy with the same leading dimension.
  CHECK(call(x, y, dy, dy, l) == Status::success);
  CHECK(call(x, y, dy, dy, BackwardLayout{2, 3, 3, 3, 3, 4}) == Status::overlapping_buffers);
  CHECK(call(x, y, dy, buffer + 516, l) == Status::overlapping_buffers);  // dx one element into dy
  CHECK(call(x, y, dy, x, l) == Status::overlapping_buffers);
  CHECK(call(x, y, dy, buffer + 260, l) == Status::overlapping_buffers);  // into y
  CHECK(call(x, x, x, dx, l) == Status::success);                         // inputs may share memory
  // Strided rows that would interleave without touching are still refused.
  CHECK(call(x, y, buffer + 512, buffer + 516, BackwardLayout{2, 1, 1, 1, 2, 2}) == Status::overlapping_buffers);
  // The workspace may overlap no matrix.
  CHECK(call_ws(x, y, dy, dx, l, buffer + 768) == Status::overlapping_buffers);
  CHECK(call(x, y, dy, buffer + 1024 + 128, l) == Status::overlapping_buffers);
  // Empty problems pass with any pointers; sizes are checked before pointers.
  CHECK(call_ws(nullptr, nullptr, nullptr, nullptr, BackwardLayout::contiguous(0, 3), nullptr) == Status::success);
  CHECK(call(nullptr, y, dy, dx, BackwardLayout::contiguous(-1, 3)) == Status::negative_size);
}

TEST_CASE("backward strategy names", "[cpu][backward]") {
  CHECK(std::string(rss::backward_strategy_name(rss::BackwardStrategy::two_pass)) == "two_pass");
  CHECK(std::string(rss::backward_strategy_name(rss::BackwardStrategy::cluster_row)) == "cluster_row");
  CHECK(std::string(rss::backward_strategy_name(rss::BackwardStrategy::automatic)) == "automatic");
  CHECK(std::string(rss::backward_strategy_name(static_cast<rss::BackwardStrategy>(42))) == "unknown");
}

TEST_CASE("backward call validation with saved statistics: no y, the statistics may not overlap dx",
          "[cpu][backward][validate]") {
  alignas(256) static unsigned char buffer[4096];
  const BackwardLayout l{2, 3, 3, 0, 3, 3};  // ld_y is not used
  const void* x = buffer;
  const void* stats = buffer + 256;  // 2 rows x 12 bytes
  const void* dy = buffer + 512;
  const void* dx = buffer + 768;
  const auto call = [&](const void* a, const void* s, const void* g, const void* d, const void* w = nullptr,
                        std::size_t required = 0) {
    return rss::validate_backward_saved_call(a, s, 12, g, d, l, 4, w, 256, required);
  };
  CHECK(call(x, stats, dy, dx) == Status::success);
  CHECK(call(x, nullptr, dy, dx) == Status::null_pointer);
  CHECK(call(x, stats, dy, dy) == Status::success);                      // in place
  CHECK(call(x, buffer + 768 + 20, dy, dx) == Status::overlapping_buffers);  // statistics inside dx
  CHECK(call(x, buffer + 256 + 2, dy, dx) == Status::misaligned_statistics);
  CHECK(call(x, stats, dy, buffer + 256 + 16) == Status::overlapping_buffers);
  CHECK(call(x, stats, dy, dx, buffer + 256, 256) == Status::overlapping_buffers);  // workspace over the statistics
  CHECK(call(x, stats, dy, dx, buffer + 1024, 256) == Status::success);
  CHECK(rss::validate_backward_saved_call(x, stats, 12, dy, dx, BackwardLayout{2, 3, 2, 0, 3, 3}, 4, nullptr, 0, 0) ==
        Status::invalid_layout);
}

