#pragma once
// Host planner of the backward strategy cluster_row: one thread-block cluster per row, x, y and dy held in
// the registers of the cluster's blocks between the row sums and the elementwise dx. The split is
// rss/planner/row_split.hpp's (block b owns [b * chunk_elems, (b + 1) * chunk_elems), thread t holds
// elems_per_thread elements of each array as 16-byte vectors spaced `threads` vectors apart); this file
// holds the backward's constants. Pure host C++: no CUDA headers, testable without a GPU.
#include <cstdint>

#include "rss/device_info.hpp"
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
/// Blocks per cluster the library launches at most: the forward's limit (DeviceInfo::max_cluster_size caps it
/// per device: 16 on compute capability 9.x and 10.x, else the portable 8). The defaults take more than 8 for
/// rows that 8 blocks do not hold and for a few long rows (backward_cluster_config_for); a caller may ask for up
/// to 16 on any row.
inline constexpr int backward_max_cluster_size = max_cluster_blocks;

/// Longest row cluster_row holds: 16 blocks x 512 threads x 32 elements (8 x 512 x 32 = 131072 where the device
/// launches clusters of at most 8).
inline constexpr std::int64_t backward_cluster_max_cols = std::int64_t{backward_max_cluster_size} * 512 * 32;

/// Whether `c` is instantiated and holds a row of `cols` elements of `dtype` in clusters of at most `max_cluster_size`.
constexpr bool backward_cluster_config_fits(const BackwardClusterConfig& c, std::int64_t cols, DType dtype,
                                            int max_cluster_size) noexcept {
  const int limit = max_cluster_size < backward_max_cluster_size ? max_cluster_size : backward_max_cluster_size;
  return c.residence == RowResidence::registers && config_holds_row<BackwardRegisterConfigs>(c, cols, dtype, limit);
}

/// The backward's default rule, for y read and for y recomputed from saved statistics alike: 256-thread blocks of
/// up to 32 elements per thread in the fewest blocks that hold the row (the fewest elements per thread that do), then
/// 512 x 32 in clusters of up to 8, then 512 x 32 in clusters of 9 to 16 for rows that 8 do not hold (as the
/// forward does: there 16-block clusters ran 262144-element rows faster than a grid-wide kernel). The H200 pilot
/// of both saved states in all three types (bench/NOTES.md, "The backward's default rule from a pilot") found 32
/// elements per thread in few blocks fastest or within 1% on every shape measured: each block's row sums and its
/// cluster's exchange are paid once per row, whatever its share, so fewer blocks per row pay them fewer times
/// (4096 x 32768 bf16 from saved statistics: 256 x 32 x 4 213.9 us against the former 256 x 16 x 8 295.9; reading
/// y 295.9 against the former 512 x 8 x 8 568.3).
constexpr SplitRule backward_split_rule() noexcept {
  SplitRule rule;
  rule.steps[rule.step_count++] = {32, 256, 1, portable_cluster_size};
  rule.steps[rule.step_count++] = {32, 512, 1, portable_cluster_size};
  rule.steps[rule.step_count++] = {32, 512, portable_cluster_size + 1, 0};
  return rule;
}

/// The default configuration; cluster_size 0 when no cluster of up to max_cluster_size blocks holds the row.
constexpr BackwardClusterConfig default_backward_cluster_config(std::int64_t cols, DType dtype,
                                                                int max_cluster_size) noexcept {
  const int limit = max_cluster_size < backward_max_cluster_size ? max_cluster_size : backward_max_cluster_size;
  return apply_split_rule(backward_split_rule(), backward_cluster_elems, BackwardRegisterConfigs::ElemList::count, cols,
                          dtype, limit);
}

/// Whether automatic leaves rows of `cols` to two_pass although a cluster holds them: rows that 8 blocks do not
/// hold take clusters of 9-16 blocks, and until those clusters fill every SM once two_pass, which spreads each
/// row over the whole device, is faster (H200, bench/NOTES.md: 2 x 200003 two_pass 15-18 us against cluster_row
/// 22-23 in fp32 and bf16; 32 x 256000 cluster_row 42 against 50 in bf16, 62 against 80 in fp32).
constexpr bool backward_prefers_two_pass(std::int64_t rows, std::int64_t cols, DType dtype, int max_cluster_size,
                                         int sm_count) noexcept {
  const BackwardClusterConfig c = default_backward_cluster_config(cols, dtype, max_cluster_size);
  return c.cluster_size > portable_cluster_size && rows * c.cluster_size < sm_count;
}

/// The configuration cluster_row runs `rows` rows of `cols` with on a device of `sm_count` SMs by default: the rule
/// above, with the few-long-rows exception of every row program (spread_few_rows, rss/planner/row_split.hpp).
constexpr BackwardClusterConfig backward_cluster_config_for(std::int64_t rows, std::int64_t cols, DType dtype,
                                                            int max_cluster_size, int sm_count) noexcept {
  return spread_few_rows(default_backward_cluster_config(cols, dtype, max_cluster_size), backward_cluster_elems,
                         BackwardRegisterConfigs::ElemList::count, rows, cols, dtype, max_cluster_size, sm_count);
}

/// Plans cluster_row on `device` (its max_cluster_size caps the clusters, its SM count sizes the few-row rule).
/// `preferred` (may be null) is used as given or refused: invalid_strategy when it is not instantiated (threads,
/// elements, a residence other than registers), not_admissible when it does not hold the row. Also null_pointer,
/// negative_size, size_overflow, unsupported_device (max_cluster_size < 1: no clusters) or not_admissible (the row is
/// longer than a cluster holds); *out is untouched on failure.
inline Status plan_backward_cluster_row(const DeviceInfo& device, std::int64_t rows, std::int64_t cols, DType dtype,
                                        const BackwardClusterConfig* preferred, BackwardClusterPlan* out) noexcept {
  const int limit =
      device.max_cluster_size < backward_max_cluster_size ? device.max_cluster_size : backward_max_cluster_size;
  return plan_clusters(
      rows, cols, dtype, limit, backward_cluster_config_for(rows, cols, dtype, limit, device.sm_count), preferred,
      [&](const ClusterConfig& c) { return backward_cluster_config_fits(c, cols, dtype, limit); },
      [&](const ClusterConfig& c) {
        return c.residence == RowResidence::registers && BackwardRegisterConfigs::has(c.threads, c.elems_per_thread) &&
               c.elems_per_thread % (16 / dtype_bytes(dtype)) == 0;
      },
      out);
}

}  // namespace rss
