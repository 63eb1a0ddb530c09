// The cluster_row planner (one thread-block cluster per row, the row held in registers or shared memory) and the
// choice of strategy `automatic` (tuning table first, heuristic otherwise). Pure host code.
#include <catch2/catch.hpp>

#include <cstdint>
#include <limits>
#include <utility>

#include "rss/planner/cluster_plan.hpp"
#include "rss/tuning/auto_select.hpp"
#include "rss/tuning/tables.hpp"

using rss::ClusterConfig;
using rss::ClusterPlan;
using rss::DType;
using rss::Status;
using rss::Strategy;

namespace {

/// The H200's description with clusters of up to `n` blocks (16: Hopper's non-portable size, the H200's own;
/// 8: the portable size; 0: a device without clusters).
rss::DeviceInfo clusters_of(int n, int sm_count = 132) {
  rss::DeviceInfo d = rss::h200_device_info();
  d.max_cluster_size = n;
  d.sm_count = sm_count;
  return d;
}

ClusterPlan plan_for(std::int64_t rows, std::int64_t cols, DType dtype = DType::fp32,
                     const ClusterConfig* preferred = nullptr) {
  ClusterPlan plan;
  REQUIRE(rss::plan_cluster_row(clusters_of(16), rows, cols, dtype, preferred, &plan) == Status::success);
  return plan;
}

/// The kernel contract of cluster_plan.hpp, for a plan of a non-empty shape.
void check_contract(const ClusterPlan& p, std::int64_t rows, std::int64_t cols, DType dtype) {
  CAPTURE(rows, cols, rss::dtype_name(dtype), p.config.threads, p.config.elems_per_thread, p.config.cluster_size,
          p.chunk_elems, p.grid_blocks);
  CHECK(p.rows == rows);
  CHECK(p.cols == cols);
  CHECK(p.config.cluster_size >= 1);
  CHECK(p.config.cluster_size <= 16);
  CHECK(rss::cluster_config_fits(p.config, cols, dtype, 16));
  CHECK(p.chunk_elems * p.config.cluster_size >= cols);
  CHECK(p.chunk_elems % 8 == 0);
  CHECK(p.chunk_elems <= static_cast<std::int64_t>(p.config.threads) * p.config.elems_per_thread);
  CHECK(p.config.elems_per_thread % (16 / rss::dtype_bytes(dtype)) == 0);  // whole 16-byte vectors
  CHECK(p.grid_blocks == rows * p.config.cluster_size);
  // No block of the cluster is idle: the last block owns at least one element.
  CHECK(p.chunk_elems * (p.config.cluster_size - 1) < cols);
  // A share kept in shared memory takes its bytes as stored (a pipelined one two tiles of them) and room to start
  // them on a 128-byte boundary; one in registers takes none.
  const int tiles = p.config.residence == rss::RowResidence::registers               ? 0
                    : p.config.residence == rss::RowResidence::shared_memory_pipelined ? 2
                                                                                       : 1;
  CHECK(p.shared_bytes == tiles * p.chunk_elems * rss::dtype_bytes(dtype) + (tiles > 0 ? rss::tile_alignment : 0));
}

}  // namespace

TEST_CASE("cluster_row plans one cluster per row that holds the whole row", "[planner][cluster_row]") {
  for (auto shape : {std::pair<std::int64_t, std::int64_t>{1, 131072}, {64, 131072}, {4096, 4096}, {16384, 8192},
                     {4096, 32768}, {32, 128256}, {3, 7}, {5, 4097}, {3, 70001}}) {
    const auto [rows, cols] = shape;
    for (DType dtype : {DType::fp32, DType::bf16, DType::fp16}) check_contract(plan_for(rows, cols, dtype), rows, cols, dtype);
  }
}

TEST_CASE("cluster_row's default configuration: 64 bytes per thread in one block, else 128 in the fewest", "[planner][cluster_row]") {
  // The H200 pilot's winners (bench/results/pilot/earlier/h200_pilot5.json).
  CHECK(plan_for(4096, 4096).config == ClusterConfig{256, 16, 1});
  CHECK(plan_for(16384, 8192).config == ClusterConfig{512, 16, 1});
  CHECK(plan_for(16384, 8192, DType::bf16).config == ClusterConfig{256, 32, 1});
  CHECK(plan_for(4096, 4096, DType::bf16).config == ClusterConfig{128, 32, 1});
  // Rows of more than 32 KB in registers (many of them default to tiles: the test case below).
  CHECK(rss::default_cluster_config(32768, DType::fp32, 16) == ClusterConfig{512, 32, 2});
  CHECK(rss::default_cluster_config(131072, DType::fp32, 16) == ClusterConfig{512, 32, 8});
  CHECK(rss::default_cluster_config(131072, DType::bf16, 16) == ClusterConfig{512, 32, 8});
  CHECK(plan_for(8, 131072).config == ClusterConfig{512, 32, 8});
  CHECK(plan_for(1, 131072).config == ClusterConfig{256, 32, 16});  // a few long rows spread (the case below)
  const ClusterPlan vocab = plan_for(8, 128256);
  CHECK(vocab.config == ClusterConfig{512, 32, 8});
  CHECK(vocab.chunk_elems == 16032);
  CHECK(vocab.grid_blocks == 8 * 8);
  // Short rows: the fewest elements per thread that hold the row.
  CHECK(plan_for(10, 1000).config == ClusterConfig{256, 4, 1});
  CHECK(plan_for(10, 1000, DType::bf16).config == ClusterConfig{256, 8, 1});
  // Longer than 16 x 512 x 16 elements: the largest register tile (32 per thread).
  const ClusterPlan big = plan_for(2, 200000);
  CHECK(big.config.elems_per_thread == 32);
  check_contract(big, 2, 200000, DType::fp32);
}

TEST_CASE("cluster_row refuses rows longer than a cluster of 16 holds", "[planner][cluster_row]") {
  ClusterPlan plan;
  plan.grid_blocks = 12345;  // untouched on failure
  for (DType dtype : {DType::fp32, DType::bf16}) {
    CHECK(rss::plan_cluster_row(clusters_of(16), 1, 1048576, dtype, nullptr, &plan) == Status::not_admissible);
    CHECK(plan.grid_blocks == 12345);
  }
  // The longest row a cluster of 16 holds: 16 blocks x 512 threads x 32 elements.
  const std::int64_t longest = 16 * 512 * 32;
  CHECK(rss::plan_cluster_row(clusters_of(16), 1, longest, DType::fp32, nullptr, &plan) == Status::success);
  CHECK(plan.config == ClusterConfig{512, 32, 16});
  CHECK(rss::plan_cluster_row(clusters_of(16), 1, longest + 1, DType::fp32, nullptr, &plan) ==
        Status::not_admissible);
  // Portable clusters of 8 hold half as much.
  CHECK(rss::plan_cluster_row(clusters_of(8), 1, longest / 2 + 1, DType::fp32, nullptr, &plan) == Status::not_admissible);
  CHECK(rss::plan_cluster_row(clusters_of(8), 1, longest / 2, DType::fp32, nullptr, &plan) == Status::success);
  CHECK(plan.config.cluster_size == 8);
}

TEST_CASE("clusters of up to 16 blocks where the device admits them: rows of up to 262144 elements stay in cluster_row",
          "[planner][cluster_row][auto]") {
  // Non-portable 16-block clusters on Hopper and Blackwell data-centre parts; the portable 8 elsewhere.
  CHECK(rss::h200_device_info().max_cluster_size == 16);
  CHECK(rss::h100_sxm_device_info().max_cluster_size == 16);
  CHECK(rss::cluster_limit_of(10) == 16);
  CHECK(rss::cluster_limit_of(8) == 8);
  CHECK(rss::cluster_limit_of(12) == 8);
  const rss::DeviceInfo h200 = rss::h200_device_info();
  // The default rule takes the fewest blocks of 512 threads x 32 elements: 9 to 16 of them past 131072 elements.
  for (DType dtype : {DType::fp32, DType::bf16, DType::fp16}) {
    CAPTURE(rss::dtype_name(dtype));
    CHECK(rss::default_cluster_config(131072, dtype, 16) == ClusterConfig{512, 32, 8});
    CHECK(rss::default_cluster_config(131073, dtype, 16) == ClusterConfig{512, 32, 9});
    CHECK(rss::default_cluster_config(151936, dtype, 16) == ClusterConfig{512, 32, 10});
    CHECK(rss::default_cluster_config(256000, dtype, 16) == ClusterConfig{512, 32, 16});
    CHECK(rss::default_cluster_config(262144, dtype, 16) == ClusterConfig{512, 32, 16});
    CHECK(rss::default_cluster_config(262145, dtype, 16).cluster_size == 0);
    CHECK(rss::default_cluster_config(131073, dtype, 8).cluster_size == 0);
    for (std::int64_t rows : {1, 32}) {
      CHECK(rss::heuristic_choice(h200, rows, 262144, dtype).config.strategy == Strategy::cluster_row);
      CHECK(rss::heuristic_choice(h200, rows, 262145, dtype).config.strategy != Strategy::cluster_row);
    }
  }
}

TEST_CASE("a few long rows spread over 16 blocks of 256 threads while those clusters fill at most half the SMs",
          "[planner][cluster_row][auto]") {
  const rss::DeviceInfo h200 = rss::h200_device_info();  // 132 SMs: up to 4 rows of 16 blocks
  ClusterPlan plan;
  for (DType dtype : {DType::fp32, DType::bf16, DType::fp16}) {
    CAPTURE(rss::dtype_name(dtype));
    for (std::int64_t rows : {1, 2, 4}) {
      CAPTURE(rows);
      CHECK(rss::forward_cluster_config_for(rows, 131072, dtype, 16, 132) == ClusterConfig{256, 32, 16});
      CHECK(rss::forward_cluster_config_for(rows, 100000, dtype, 16, 132) == ClusterConfig{256, 32, 16});
      REQUIRE(rss::plan_cluster_row(h200, rows, 131072, dtype, nullptr, &plan) == Status::success);
      CHECK(plan.config == ClusterConfig{256, 32, 16});
      CHECK(plan.grid_blocks == rows * 16);
    }
    // Five rows would take 80 blocks, more than half of 132 SMs: the rule's 512-thread blocks.
    CHECK(rss::forward_cluster_config_for(5, 131072, dtype, 16, 132) == ClusterConfig{512, 32, 8});
    CHECK(rss::forward_cluster_config_for(8, 131072, dtype, 16, 132) == ClusterConfig{512, 32, 8});
    CHECK(rss::forward_cluster_config_for(0, 131072, dtype, 16, 132) == ClusterConfig{512, 32, 8});
    // A smaller device: fewer rows spread (66 SMs: up to 2).
    CHECK(rss::forward_cluster_config_for(2, 131072, dtype, 16, 66) == ClusterConfig{256, 32, 16});
    CHECK(rss::forward_cluster_config_for(3, 131072, dtype, 16, 66) == ClusterConfig{512, 32, 8});
    // Only rows longer than 8 blocks of 256 x 32: 65536 elements keep 512 x 32 x 4.
    CHECK(rss::forward_cluster_config_for(1, 65536, dtype, 16, 132) == ClusterConfig{512, 32, 4});
    // Portable clusters only (no 16-block clusters): the rule's configuration.
    CHECK(rss::forward_cluster_config_for(1, 131072, dtype, 8, 132) == ClusterConfig{512, 32, 8});
    // Rows past 8 blocks of 512 x 32 already take clusters of 9 to 16.
    CHECK(rss::forward_cluster_config_for(1, 151936, dtype, 16, 132) == ClusterConfig{512, 32, 10});
  }
  // Many rows of the same length keep the tile rule's choice.
  CHECK(rss::forward_cluster_config_for(64, 131072, DType::bf16, 16, 132).residence == rss::RowResidence::shared_memory);
}

TEST_CASE("cluster_row plans empty shapes and refuses bad arguments and devices without clusters", "[planner][cluster_row]") {
  const rss::DeviceInfo hopper = clusters_of(16);
  ClusterPlan plan;
  for (auto shape : {std::pair<std::int64_t, std::int64_t>{0, 4096}, {4096, 0}, {0, 0}}) {
    plan.grid_blocks = 7;
    REQUIRE(rss::plan_cluster_row(hopper, shape.first, shape.second, DType::fp32, nullptr, &plan) == Status::success);
    CHECK(plan.grid_blocks == 0);
    CHECK(plan.rows == shape.first);
    CHECK(plan.cols == shape.second);
  }
  plan.grid_blocks = 7;
  CHECK(rss::plan_cluster_row(hopper, -1, 4096, DType::fp32, nullptr, &plan) == Status::negative_size);
  CHECK(rss::plan_cluster_row(hopper, 4096, -1, DType::fp32, nullptr, &plan) == Status::negative_size);
  CHECK(rss::plan_cluster_row(hopper, 4096, 4096, DType::fp32, nullptr, nullptr) == Status::null_pointer);
  const std::int64_t max = std::numeric_limits<std::int64_t>::max();
  CHECK(rss::plan_cluster_row(hopper, max / 1024, 1024, DType::fp32, nullptr, &plan) == Status::size_overflow);
  CHECK(rss::plan_cluster_row(clusters_of(0), 4096, 4096, DType::fp32, nullptr, &plan) == Status::unsupported_device);
  CHECK(rss::plan_cluster_row(clusters_of(16, 0), 4096, 4096, DType::fp32, nullptr, &plan) == Status::unsupported_device);
  CHECK(plan.grid_blocks == 7);  // untouched by every refusal
  // An empty problem needs nothing from the device.
  CHECK(rss::plan_cluster_row(clusters_of(0), 0, 4096, DType::fp32, nullptr, &plan) == Status::success);
  // The grid is capped at 2^31 - 1 blocks: later rows are looped over by the same clusters.
  REQUIRE(rss::plan_cluster_row(hopper, std::int64_t{1} << 33, 8, DType::fp32, nullptr, &plan) == Status::success);
  CHECK(plan.grid_blocks <= std::numeric_limits<std::int32_t>::max());
  CHECK(plan.grid_blocks % plan.config.cluster_size == 0);
}

TEST_CASE("cluster_row uses a preferred configuration as given, or refuses it", "[planner][cluster_row]") {
  const ClusterConfig fits{512, 8, 1};  // 4096 elements: exactly one 4096-element row
  CHECK(plan_for(4096, 4096, DType::fp32, &fits).config == fits);
  const ClusterConfig clustered{256, 8, 4};  // 4 x 2048 elements
  const ClusterPlan c = plan_for(100, 8000, DType::fp32, &clustered);
  CHECK(c.config == clustered);
  CHECK(c.chunk_elems == 2000);
  CHECK(c.grid_blocks == 400);
  check_contract(c, 100, 8000, DType::fp32);

  // Never a silent swap for the default: a preference that is not compiled is invalid_strategy, one that is
  // compiled but does not hold the row (or exceeds the device's clusters) not_admissible; *out is untouched.
  const auto refusal = [](const ClusterConfig& bad, DType dtype) {
    ClusterPlan untouched;
    untouched.rows = -7;
    const Status s = rss::plan_cluster_row(clusters_of(16), 4096, 4096, dtype, &bad, &untouched);
    CHECK(untouched.rows == -7);
    return s;
  };
  for (const ClusterConfig& bad : {ClusterConfig{256, 4, 1},     // holds 1024 elements only
                                   ClusterConfig{512, 16, 17},   // beyond the device's clusters
                                   ClusterConfig{512, 16, 0}}) {
    CAPTURE(bad.threads, bad.elems_per_thread, bad.cluster_size);
    CHECK_FALSE(rss::cluster_config_fits(bad, 4096, DType::fp32, 16));
    CHECK(refusal(bad, DType::fp32) == Status::not_admissible);
  }
  for (const ClusterConfig& bad : {ClusterConfig{128, 4, 1},     // 128 threads of 4: a pair left out
                                   ClusterConfig{512, 12, 1},    // 12 per thread: not instantiated
                                   ClusterConfig{512, 8, 1, static_cast<rss::RowResidence>(3)}}) {
    CAPTURE(bad.threads, bad.elems_per_thread, bad.cluster_size);
    CHECK_FALSE(rss::cluster_config_instantiated(bad, DType::fp32));
    CHECK(refusal(bad, DType::fp32) == Status::invalid_strategy);
  }
  // 4 elements are one fp32 vector but half a bf16 one: no bf16 kernel holds 4.
  const ClusterConfig four{512, 4, 2};
  CHECK(rss::cluster_config_fits(four, 4096, DType::fp32, 16));
  CHECK_FALSE(rss::cluster_config_fits(four, 4096, DType::bf16, 16));
  CHECK(refusal(four, DType::bf16) == Status::invalid_strategy);
}

TEST_CASE("cluster_row keeps a row in shared memory when the configuration says so", "[planner][cluster_row]") {
  constexpr auto shared = rss::RowResidence::shared_memory;
  const ClusterConfig wide{256, 64, 4, shared};  // 4 x 16384 elements, as stored
  for (DType dtype : {DType::fp32, DType::bf16, DType::fp16}) {
    CAPTURE(rss::dtype_name(dtype));
    const ClusterPlan p = plan_for(64, 65536, dtype, &wide);
    CHECK(p.config == wide);
    CHECK(p.chunk_elems == 16384);
    CHECK(p.shared_bytes == 16384 * rss::dtype_bytes(dtype) + rss::tile_alignment);
    check_contract(p, 64, 65536, dtype);
    // The same threads and elements in registers are another configuration, and 64 per thread is not one.
    CHECK_FALSE(ClusterConfig{256, 64, 4} == wide);
    CHECK_FALSE(rss::cluster_config_fits(ClusterConfig{256, 64, 4}, 65536, dtype, 16));
  }
  // 4 per thread is half a vector of every type once the row is in shared memory: not instantiated.
  CHECK_FALSE(rss::cluster_config_fits(ClusterConfig{512, 4, 2, shared}, 4096, DType::fp32, 16));
  CHECK_FALSE(rss::cluster_config_fits(ClusterConfig{512, 8, 1, static_cast<rss::RowResidence>(3)}, 4096,
                                       DType::fp32, 16));
  // The default keeps rows in registers.
  CHECK(plan_for(4096, 4096).config.residence == rss::RowResidence::registers);
  CHECK(plan_for(4096, 4096).shared_bytes == 0);
}

TEST_CASE("cluster_row pipelined keeps two tiles of the block's share in shared memory", "[planner][cluster_row]") {
  constexpr auto pipelined = rss::RowResidence::shared_memory_pipelined;
  const ClusterConfig c{512, 64, 1, pipelined};  // one block of 32768 elements, as stored, twice
  for (DType dtype : {DType::fp32, DType::bf16, DType::fp16}) {
    CAPTURE(rss::dtype_name(dtype));
    const ClusterPlan p = plan_for(4096, 32768, dtype, &c);
    CHECK(p.config == c);
    CHECK(p.chunk_elems == 32768);
    CHECK(p.shared_bytes == 2 * 32768 * rss::dtype_bytes(dtype) + rss::tile_alignment);
    // The planner's grid is one cluster per row; the launch caps it to the resident clusters (a runtime
    // occupancy query: tests/api/test_layout.cu checks it on a GPU).
    check_contract(p, 4096, 32768, dtype);
    CHECK_FALSE(c == ClusterConfig{512, 64, 1, rss::RowResidence::shared_memory});
  }
  // The same element counts as the one-tile configurations: 4 per thread is not instantiated.
  CHECK_FALSE(rss::cluster_config_fits(ClusterConfig{512, 4, 2, pipelined}, 4096, DType::fp32, 16));
  CHECK(rss::cluster_config_fits(ClusterConfig{256, 8, 2, pipelined}, 4096, DType::fp32, 16));
}

TEST_CASE("cluster_row never gives 2-byte types 4 elements per thread", "[planner][cluster_row]") {
  for (std::int64_t cols = 1; cols <= 300000; cols = cols * 3 / 2 + 1) {
    for (DType dtype : {DType::bf16, DType::fp16}) {
      CAPTURE(cols, rss::dtype_name(dtype));
      const ClusterConfig c = rss::default_cluster_config(cols, dtype, 16);
      if (c.cluster_size == 0) continue;  // too long for a cluster
      CHECK(c.elems_per_thread != 4);
      CHECK(c.elems_per_thread % 8 == 0);
      ClusterPlan p;
      REQUIRE(rss::plan_cluster_row(clusters_of(16), 3, cols, dtype, nullptr, &p) == Status::success);
      check_contract(p, 3, cols, dtype);
    }
  }
}

// ---------------------------------------------------------------------------------------------
// automatic

namespace {
/// A device like the H100 / H200 as the heuristic sees it, with clusters of up to `clusters`, cooperative
/// launch or not, and `shared_per_sm` bytes of shared memory per SM.
rss::DeviceInfo device_like(int clusters = 16, bool cooperative = true, std::size_t shared_per_sm = 228 * 1024) {
  rss::DeviceInfo d = clusters_of(clusters);
  d.cooperative_launch = cooperative;
  d.shared_per_sm = shared_per_sm;
  return d;
}
const rss::DeviceInfo hopper_like = device_like();
}

TEST_CASE("the automatic heuristic keeps rows in clusters, longer ones in the megakernels, one that overflows in long_row",
          "[tuning][automatic]") {
  CHECK(rss::auto_select(hopper_like, nullptr, 4096, 4096, DType::fp32).config.strategy == Strategy::cluster_row);
  for (const DType dtype : {DType::fp32, DType::bf16, DType::fp16}) {
    CAPTURE(rss::dtype_name(dtype));
    // 132 SMs x 228 KB hold the fp32 tiles of 7.7 M elements: 2^20 and 2^22 fit, 2^24 does not; from 2^20 on,
    // a single row goes to long_row all the same (below it, past what a cluster holds, to megakernel_grid).
    CHECK(rss::auto_select(hopper_like, nullptr, 1, (1 << 20) - 1, dtype).config.strategy == Strategy::megakernel_grid);
    CHECK(rss::auto_select(hopper_like, nullptr, 1, 1 << 20, dtype).config.strategy == Strategy::long_row);
    CHECK(rss::auto_select(hopper_like, nullptr, 1, 1 << 22, dtype).config.strategy == Strategy::long_row);
    CHECK(rss::auto_select(hopper_like, nullptr, 1, 7704577, dtype).config.strategy == Strategy::long_row);
    CHECK(rss::auto_select(hopper_like, nullptr, 1, 1 << 24, dtype).config.strategy == Strategy::long_row);
  }
  CHECK(rss::auto_select(hopper_like, nullptr, 2, 1048576, DType::fp32).config.strategy == Strategy::megakernel_grid);
  CHECK(rss::auto_select(hopper_like, nullptr, 2, 16777216, DType::fp32).config.strategy == Strategy::megakernel_row);
  // Where megakernel_row takes over follows the device's shared memory, not a constant.
  CHECK(rss::auto_select(hopper_like, nullptr, 3, 1398101, DType::fp32).config.strategy == Strategy::megakernel_grid);
  const rss::DeviceInfo small_shared = device_like(16, true, 48 * 1024);
  CHECK(rss::auto_select(small_shared, nullptr, 3, 1398101, DType::fp32).config.strategy == Strategy::megakernel_row);
  // Before sm_90 (no bulk copies) a long row stays with the megakernels.
  rss::DeviceInfo ampere = device_like(0, true);
  ampere.cc_major = 8;
  CHECK(rss::auto_select(ampere, nullptr, 1, 1048576, DType::fp32).config.strategy == Strategy::megakernel_grid);
  CHECK(rss::auto_select(ampere, nullptr, 1, 1 << 22, DType::fp32).config.strategy == Strategy::megakernel_grid);
  const rss::AutoChoice c = rss::auto_select(hopper_like, nullptr, 4096, 4096, DType::bf16);
  CHECK(c.config.strategy == Strategy::cluster_row);
  CHECK_FALSE(c.from_table);
  CHECK(c.config.cluster.cluster_size == 0);  // the planner's default
  // Even one row that a cluster holds stays in a cluster (it beat megakernel_grid on the H200).
  CHECK(rss::auto_select(hopper_like, nullptr, 1, 131072, DType::fp32).config.strategy == Strategy::cluster_row);
  CHECK(rss::auto_select(hopper_like, nullptr, 64, 131072, DType::fp32).config.strategy == Strategy::cluster_row);
  // The heuristic and auto_select agree when there is no table.
  CHECK(rss::heuristic_choice(hopper_like, 4096, 4096, DType::fp32).config.strategy == Strategy::cluster_row);
}

TEST_CASE("the automatic heuristic only picks what the device can launch", "[tuning][automatic]") {
  const rss::DeviceInfo no_clusters = device_like(0, true);
  const Strategy s = rss::auto_select(no_clusters, nullptr, 4096, 4096, DType::fp32).config.strategy;
  CHECK(s != Strategy::cluster_row);
  CHECK(s != Strategy::automatic);
  const rss::DeviceInfo no_cooperative = device_like(16, false);
  CHECK(rss::auto_select(no_cooperative, nullptr, 1, 131072, DType::fp32).config.strategy == Strategy::cluster_row);
  const Strategy long_row = rss::auto_select(no_cooperative, nullptr, 1, 16777216, DType::fp32).config.strategy;
  CHECK(long_row != Strategy::megakernel_grid);
  CHECK(long_row != Strategy::megakernel_row);
  CHECK(long_row != Strategy::cluster_row);
  CHECK(long_row != Strategy::long_row);  // cooperative too: its blocks wait on each other
  const rss::DeviceInfo nothing = device_like(0, false);
  CHECK(rss::auto_select(nothing, nullptr, 4096, 4096, DType::fp32).config.strategy == rss::fallback_strategy);
  CHECK(rss::auto_select(nothing, nullptr, 1, 16777216, DType::fp32).config.strategy == rss::fallback_strategy);
}

TEST_CASE("a tuning table entry wins over the heuristic for its dtype and ranges only", "[tuning][automatic]") {
  const rss::TuningEntry entries[] = {
      {DType::bf16, 1, 10000, 1, 10000, {Strategy::baseline, {}}},              // another dtype
      {DType::fp32, 1, 100, 100000, 200000, {Strategy::cluster_row, {512, 16, 16}}},
      {DType::fp32, 1000, 8192, 1000, 8192, {Strategy::block_row, {}}},
      {DType::fp32, 1, 100, 100000, 200000, {Strategy::megakernel_row, {}}},  // behind the cluster entry
  };
  const rss::TuningTable table{"Test GPU", 90, 132, 0, ~std::size_t{0}, entries,
                               static_cast<int>(sizeof(entries) / sizeof(entries[0]))};
  const rss::TuningTable* table_ptr = &table;
  rss::DeviceInfo d = hopper_like;

  const rss::AutoChoice t = rss::auto_select(d, table_ptr, 4096, 4096, DType::fp32);
  CHECK(t.config.strategy == Strategy::block_row);  // the heuristic says cluster_row
  CHECK(t.from_table);

  const rss::AutoChoice c = rss::auto_select(d, table_ptr, 1, 131072, DType::fp32);
  CHECK(c.config.strategy == Strategy::cluster_row);  // the heuristic says megakernel_grid
  CHECK(c.config.cluster == ClusterConfig{512, 16, 16});
  CHECK(c.from_table);

  // The bf16 entry covers 4096 x 4096 but is ignored for fp32, and the fp32 entries for bf16.
  const rss::AutoChoice b = rss::auto_select(d, table_ptr, 4096, 4096, DType::bf16);
  CHECK(b.config.strategy == Strategy::baseline);
  CHECK(b.from_table);
  const rss::AutoChoice h = rss::auto_select(d, table_ptr, 1, 131072, DType::bf16);
  CHECK_FALSE(h.from_table);
  CHECK(h.config.strategy == rss::heuristic_choice(d, 1, 131072, DType::bf16).config.strategy);
  // Outside every range: the heuristic.
  const rss::AutoChoice outside = rss::auto_select(d, table_ptr, 1, 16777216, DType::fp32);
  CHECK_FALSE(outside.from_table);
  CHECK(outside.config.strategy == Strategy::long_row);
  CHECK_FALSE(rss::auto_select(d, table_ptr, 999, 4096, DType::fp32).from_table);
  CHECK(rss::auto_select(d, table_ptr, 1000, 1000, DType::fp32).from_table);  // ranges are inclusive
  CHECK(rss::auto_select(d, table_ptr, 8192, 8192, DType::fp32).from_table);
  CHECK_FALSE(rss::auto_select(d, table_ptr, 8193, 8192, DType::fp32).from_table);

  // Without clusters the cluster_row entry is skipped: the next entry that covers the shape answers.
  d.max_cluster_size = 0;
  const rss::AutoChoice skipped = rss::auto_select(d, table_ptr, 1, 131072, DType::fp32);
  CHECK(skipped.config.strategy == Strategy::megakernel_row);
  CHECK(skipped.from_table);
  CHECK(rss::auto_select(d, table_ptr, 4096, 4096, DType::fp32).config.strategy == Strategy::block_row);
}

TEST_CASE("a cluster_row table entry without a later match falls to the heuristic on a device without clusters",
          "[tuning][automatic]") {
  const rss::TuningEntry entries[] = {{DType::fp32, 1, 100000, 1, 100000, {Strategy::cluster_row, {}}}};
  const rss::TuningTable table{"Test GPU", 90, 132, 0, ~std::size_t{0}, entries, 1};
  const rss::TuningTable* table_ptr = &table;
  const rss::DeviceInfo d = device_like(0, true);
  const rss::AutoChoice c = rss::auto_select(d, table_ptr, 4096, 4096, DType::fp32);
  CHECK_FALSE(c.from_table);
  CHECK(c.config.strategy != Strategy::cluster_row);
  CHECK(c.config.strategy == rss::heuristic_choice(d, 4096, 4096, DType::fp32).config.strategy);
}

TEST_CASE("shipped tuning tables are found by compute capability, SM count and memory, and never pick automatic",
          "[tuning][automatic]") {
  CHECK(rss::tuning_table_for(rss::h200_device_info()) != nullptr);
  // The H100 SXM has the H200's SMs but not its memory: the H200's measurements do not apply to it.
  CHECK(rss::tuning_table_for(rss::h100_sxm_device_info()) == nullptr);
  rss::DeviceInfo pcie = rss::h200_device_info();
  pcie.sm_count = 114;  // the H100 PCIe's SM count
  CHECK(rss::tuning_table_for(pcie) == nullptr);
  rss::DeviceInfo ampere = rss::h200_device_info();
  ampere.cc_major = 8;
  CHECK(rss::tuning_table_for(ampere) == nullptr);
  for (const rss::TuningTable& t : rss::shipped_tables) {
    CAPTURE(t.measured_on);
    for (int i = 0; i < t.count; ++i) {
      const rss::Config& c = t.entries[i].config;
      CHECK(c.strategy != Strategy::automatic);
      if (c.cluster.cluster_size > 0) CHECK(c.strategy == Strategy::cluster_row);
      // A tuned cluster configuration must fit its whole range, within the clusters the library launches.
      if (c.strategy == Strategy::cluster_row && c.cluster.cluster_size > 0) {
        CHECK(rss::cluster_config_fits(c.cluster, t.entries[i].max_cols, t.entries[i].dtype, rss::max_cluster_blocks));
      }
    }
  }
  const rss::DeviceInfo d = rss::h200_device_info();
  for (auto shape : {std::pair<std::int64_t, std::int64_t>{4096, 4096}, {1, 1048576}, {1, 16777216}, {32, 128256}}) {
    const rss::AutoChoice c = rss::automatic_choice(d, shape.first, shape.second, DType::fp32);
    CHECK(c.config.strategy != Strategy::automatic);
  }
  // The H200 pilots' entries (bench/results/pilot/h200_pilot*.json) answer for their shapes.
  const rss::AutoChoice tuned = rss::automatic_choice(d, 32, 128256, DType::fp32);
  CHECK(tuned.from_table);
  // Pilot 9 re-measured it with clusters of up to 16 blocks: 12 blocks, the row in shared memory.
  CHECK(tuned.config.cluster == rss::ClusterConfig{256, 64, 12, rss::RowResidence::shared_memory});
  // Pilot 8 re-measured 16384 x 8192 fp32 and supersedes pilot 7's entry there: the heuristic decides again.
  CHECK_FALSE(rss::automatic_choice(d, 16384, 8192, DType::fp32).from_table);
  const rss::AutoChoice long_fp16 = rss::automatic_choice(d, 1, 4194304, DType::fp16);
  CHECK(long_fp16.from_table);
  CHECK(long_fp16.config.strategy == Strategy::long_row);
}

TEST_CASE("many long rows default to shared-memory tiles: 128 bytes a thread, 512 threads while they fill four waves",
          "[planner][cluster_row][auto]") {
  const rss::DeviceInfo h200 = rss::h200_device_info();  // 132 SMs, clusters of up to 16
  const auto planned = [&](std::int64_t rows, std::int64_t cols, DType dtype) {
    ClusterPlan plan;
    REQUIRE(rss::plan_cluster_row(h200, rows, cols, dtype, nullptr, &plan) == Status::success);
    return plan.config;
  };
  const auto tile = [](int threads, int elems, int cluster) {
    return ClusterConfig{threads, elems, cluster, rss::RowResidence::shared_memory};
  };
  for (DType dtype : {DType::bf16, DType::fp16}) {
    CAPTURE(rss::dtype_name(dtype));
    CHECK(planned(64, 131072, dtype) == tile(256, 64, 8));
    CHECK(planned(32, 128256, dtype) == tile(256, 64, 8));
    CHECK(planned(32, 256000, dtype) == tile(256, 64, 16));
    CHECK(planned(4096, 32768, dtype) == tile(512, 64, 1));
    // Few rows (clusters fewer than SMs) and rows of 32 KB or less stay in registers.
    CHECK(planned(8, 131072, dtype) == ClusterConfig{512, 32, 8});
    CHECK(planned(1, 262144, dtype) == ClusterConfig{512, 32, 16});
    CHECK(planned(16384, 8192, dtype).residence == rss::RowResidence::registers);
    CHECK(planned(16384, 16384, dtype).residence == rss::RowResidence::registers);  // 32 KB
  }
  CHECK(planned(64, 131072, DType::fp32) == tile(256, 32, 16));
  CHECK(planned(32, 128256, DType::fp32) == tile(256, 32, 16));
  CHECK(planned(32, 256000, DType::fp32) == tile(256, 64, 16));  // 32 elements would take 32 blocks
  CHECK(planned(4096, 32768, DType::fp32) == tile(512, 32, 2));
  CHECK(planned(16384, 8192, DType::fp32).residence == rss::RowResidence::registers);  // 32 KB
  // The boundary: clusters of 8 for rows of 131072, so 16 rows are 128 clusters (registers), 17 are 136 (tiles).
  CHECK(planned(16, 131072, DType::bf16).residence == rss::RowResidence::registers);
  CHECK(planned(17, 131072, DType::bf16) == tile(256, 64, 8));
  // Rows that are not whole 16-byte vectors stay in registers (a tile would load them element by element).
  CHECK(planned(64, 131071, DType::bf16).residence == rss::RowResidence::registers);
  CHECK(planned(64, 131074, DType::fp32).residence == rss::RowResidence::registers);
  CHECK(planned(64, 131080, DType::bf16) == tile(256, 64, 9));
  // A caller's configuration wins over the default.
  const ClusterConfig registers{512, 32, 8};
  ClusterPlan plan;
  REQUIRE(rss::plan_cluster_row(h200, 64, 131072, DType::bf16, &registers, &plan) == Status::success);
  CHECK(plan.config == registers);
}

TEST_CASE("the tile default's row count test does not overflow on the largest shapes", "[planner][cluster_row]") {
  ClusterPlan plan;
  const std::int64_t max = std::numeric_limits<std::int64_t>::max();
  // rows x 8 blocks would overflow int64: the shape check refuses the shape, the default rule does not trap first.
  CHECK(rss::plan_cluster_row(rss::h200_device_info(), max / 4, 131072, DType::bf16, nullptr, &plan) ==
        Status::size_overflow);
  CHECK(rss::default_tile_config(max / 4, 131072, DType::bf16, 16, 132) ==
        ClusterConfig{512, 64, 4, rss::RowResidence::shared_memory});
}
