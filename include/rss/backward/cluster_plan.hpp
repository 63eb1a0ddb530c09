#pragma once
// Host planner of the backward strategy cluster_row: one thread-block cluster per row, x, y and dy held in
// the registers of the cluster's blocks between the row sums and the elementwise dx. The split is
// rss/planner/row_split.hpp's (block b owns [b * chunk_elems, (b + 1) * chunk_elems), thread t holds
// elems_per_thread elements of each array as 16-byte vectors spaced `threads` vectors apart); this file
// holds the backward's constants. Pure host C++: no CUDA headers, testable without a GPU.
#include <cstdint>

#include "rss/planner/row_split.hpp"
#include "rss/status.hpp"
#include "rss/strategy.hpp"
#include "rss/types.hpp"

namespace rss {

/// The backward's configurations: the forward's ClusterConfig, always with RowResidence::registers.
using BackwardClusterConfig = ClusterConfig;
using BackwardClusterPlan = ClusterPlan;

/// Instantiated configurations: threads x elements per thread (whole 16-byte vectors: 4 is fp32 only).
/// Three arrays share the registers, so 32 elements per thread is 96 registers of data in fp32.
using BackwardRegisterConfigs = ConfigGrid<IntList<256, 512>, IntList<4, 8, 16, 32>>;
inline constexpr const int (&backward_cluster_threads)[2] = BackwardRegisterConfigs::ThreadList::values;
inline constexpr const int (&backward_cluster_elems)[4] = BackwardRegisterConfigs::ElemList::values;
/// Blocks per cluster the library launches: the portable limit.
inline constexpr int backward_max_cluster_size = portable_cluster_size;

/// Longest row cluster_row holds: 8 blocks x 512 threads x 32 elements.
inline constexpr std::int64_t backward_cluster_max_cols = std::int64_t{backward_max_cluster_size} * 512 * 32;

/// Whether `c` is instantiated and holds a row of `cols` elements of `dtype` in clusters of at most `max_cluster_size`.
constexpr bool backward_cluster_config_fits(const BackwardClusterConfig& c, std::int64_t cols, DType dtype,
                                            int max_cluster_size) noexcept {
  const int limit = max_cluster_size < backward_max_cluster_size ? max_cluster_size : backward_max_cluster_size;
  return c.residence == RowResidence::registers && config_holds_row<BackwardRegisterConfigs>(c, cols, dtype, limit);
}

/// The backward's default rule. With y read: 8 elements of each array per thread (about 64 registers for
/// every storage type, measured with ptxas for sm_90: two blocks of 512 threads per SM, so one block's
/// reductions overlap another's loads) in the fewest blocks that hold the row; rows longer than 8 such
/// blocks take 16, then 32 elements per thread (32: 128 registers, one block per SM).
/// With saved statistics (two arrays held, x and dy), the backward pilot on the H200 (bench/NOTES.md) favoured
/// 256-thread blocks with more elements each: one block of 256 threads with the fewest elements per thread
/// that hold the row (4096 x 4096 bf16: 256 x 16, 53 us against 65 for 512 x 8; 16384 x 8192: 256 x 32, 350
/// against 550), else 256 x 16 in the fewest blocks (4096 x 32768 fp32: 473 against 692), then 256 x 32,
/// then the rule with y read.
constexpr SplitRule backward_split_rule(bool saved_statistics) noexcept {
  SplitRule rule;
  if (saved_statistics) {
    rule.steps[rule.step_count++] = {32, 256, 1, 1};
    rule.steps[rule.step_count++] = {16, 256, 2, 0};
    rule.steps[rule.step_count++] = {32, 256, 2, 0};
  }
  for (const int cap : {8, 16, 32}) rule.steps[rule.step_count++] = {cap};
  return rule;
}

/// The default configuration; cluster_size 0 when no cluster of up to max_cluster_size blocks holds the row.
constexpr BackwardClusterConfig default_backward_cluster_config(std::int64_t cols, DType dtype, int max_cluster_size,
                                                                bool saved_statistics = false) noexcept {
  const int limit = max_cluster_size < backward_max_cluster_size ? max_cluster_size : backward_max_cluster_size;
  return apply_split_rule(backward_split_rule(saved_statistics), backward_cluster_elems,
                          BackwardRegisterConfigs::ElemList::count, cols, dtype, limit);
}

/// Plans cluster_row. `preferred` (may be null) is used as given or refused: invalid_strategy when it is
/// not instantiated (threads, elements, a residence other than registers), not_admissible when it does not
/// hold the row. Also null_pointer, negative_size, size_overflow, unsupported_device (max_cluster_size < 1:
/// no clusters) or not_admissible (the row is longer than a cluster holds); *out is untouched on failure.
inline Status plan_backward_cluster_row(int max_cluster_size, std::int64_t rows, std::int64_t cols, DType dtype,
                                        const BackwardClusterConfig* preferred, BackwardClusterPlan* out,
                                        bool saved_statistics = false) noexcept {
  const int limit = max_cluster_size < backward_max_cluster_size ? max_cluster_size : backward_max_cluster_size;
  return plan_clusters(
      rows, cols, dtype, limit, default_backward_cluster_config(cols, dtype, limit, saved_statistics), preferred,
      [&](const ClusterConfig& c) { return backward_cluster_config_fits(c, cols, dtype, limit); },
      [&](const ClusterConfig& c) {
        return c.residence == RowResidence::registers && BackwardRegisterConfigs::has(c.threads, c.elems_per_thread) &&
               c.elems_per_thread % (16 / dtype_bytes(dtype)) == 0;
      },
      out);
}

/// automatic's rule between the backward's strategies, before any refusal. Reading y: cluster_row holds the
/// row in registers, but with three 16-bit arrays per thread it ran up to 1.5x slower than two_pass on the
/// H200 once a call had many long rows (4096 x 32768 bf16: 664 against 439 us; 16384 x 8192: 544 against
/// 482), while it won on 4096 x 4096 and 64 x 131072 (bench/NOTES.md). So: two_pass for 16-bit problems of
/// 2^25 elements or more. With saved statistics, since a register share keeps 16-bit elements two to a
/// register (three or four blocks per SM where there were two), cluster_row wins or ties on every 16-bit shape
/// measured (4096 x 32768 bf16: 329.5 against two_pass's 341.2 us, fp16 327.3 against 348.7; 8 x 131072 bf16
/// 14.5 against 18.0; 64 x 131072 bf16 39.3 against 39.5, fp16 38.7 against 37.9), as it did in fp32. So: never
/// two_pass with saved statistics; cluster_row wherever a cluster holds the row.
constexpr bool backward_automatic_prefers_two_pass(std::int64_t rows, std::int64_t cols, DType dtype,
                                                   bool saved_statistics = false) noexcept {
  if (dtype == DType::fp32 || rows <= 0 || saved_statistics) return false;
  return cols >= (std::int64_t{1} << 25) / rows;
}

}  // namespace rss
