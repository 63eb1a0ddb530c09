#pragma once
// Host planner for strategy cluster_row: one thread-block cluster per row, the row held on chip by the
// cluster's blocks (in registers or in shared memory) from the statistics to the normalisation, the
// blocks' partial results combined through distributed shared memory. The split itself is
// rss/planner/row_split.hpp's; this file holds the forward's constants. Pure host C++.
//
// A block keeps its share in registers (thread t holds elems_per_thread elements, as 16-byte vectors
// spaced `threads` vectors apart) or in shared memory (shared_bytes), as stored. A pipelined configuration
// keeps two tiles per block (tile 1 starts chunk_elems after tile 0) and is launched with only the clusters
// that stay resident (admit_cluster_plan, from the occupancy the runtime reports), each looping over rows.
#include <cstdint>

#include "rss/device_info.hpp"
#include "rss/planner/row_split.hpp"
#include "rss/status.hpp"
#include "rss/strategy.hpp"
#include "rss/types.hpp"

namespace rss {

/// The forward's instantiated configurations. elems_per_thread must also hold whole 16-byte vectors: 4
/// is fp32 only. A row kept in shared memory costs no registers per element, so its blocks may hold more.
/// 128-thread blocks exist for 16-bit rows of 2K-4K elements (one block each), with 8 to 32 elements a thread.
struct ForwardRegisterPairs {
  static constexpr bool allows(int threads, int elems) noexcept { return threads != 128 || elems >= 8; }
};
using ForwardRegisterConfigs = ConfigGrid<IntList<128, 256, 512>, IntList<4, 8, 16, 32>, ForwardRegisterPairs>;
using ForwardSharedConfigs = ConfigGrid<IntList<256, 512>, IntList<8, 16, 32, 64>>;
inline constexpr const int (&cluster_row_threads)[3] = ForwardRegisterConfigs::ThreadList::values;
inline constexpr const int (&cluster_row_elems)[4] = ForwardRegisterConfigs::ElemList::values;
inline constexpr const int (&cluster_row_shared_threads)[2] = ForwardSharedConfigs::ThreadList::values;
inline constexpr const int (&cluster_row_shared_elems)[4] = ForwardSharedConfigs::ElemList::values;

/// f(threads, elems) for every instantiated pair of a residence's grid: how the pilot and the tests walk them.
template <class F>
constexpr void for_each_cluster_config(RowResidence residence, F&& f) {
  const auto walk = [&](auto grid) {
    using Grid = decltype(grid);
    for (const int threads : Grid::ThreadList::values) {
      for (const int elems : Grid::ElemList::values) {
        if (Grid::has(threads, elems)) f(threads, elems);
      }
    }
  };
  if (residence == RowResidence::registers) {
    walk(ForwardRegisterConfigs{});
  } else {
    walk(ForwardSharedConfigs{});
  }
}

/// The forward's default rule, which the H200 pilot measurements follow (bench/NOTES.md): 16-bit rows of
/// 2K-4K elements in one block of 128 threads (32 elements, eight blocks per SM: 14% faster on 4096 columns than
/// 256 threads of 16); else 64 bytes per thread (four 16-byte loads in flight) while the row fits one block of
/// 512 threads; longer rows 128 bytes per thread (at most 32 elements), in the fewest blocks of 512 threads.
constexpr SplitRule forward_split_rule(std::int64_t cols, DType dtype) noexcept {
  const int bytes = dtype_bytes(dtype);
  SplitRule rule;
  if (bytes == 2 && cols > 2048 && cols <= 128 * 32) {
    rule.steps[0] = {32, 128, 1, 1, 128};
    rule.step_count = 1;
    return rule;
  }
  int per_thread = 64 / bytes;
  if (cols * bytes > 512 * 64) per_thread = 128 / bytes < 32 ? 128 / bytes : 32;
  rule.steps[0] = {per_thread};
  rule.step_count = 1;
  return rule;
}

/// Whether `c` is an instantiated configuration that holds a row of `cols` elements of `dtype`.
constexpr bool cluster_config_fits(const ClusterConfig& c, std::int64_t cols, DType dtype, int max_cluster_size) noexcept {
  switch (c.residence) {
    case RowResidence::registers: return config_holds_row<ForwardRegisterConfigs>(c, cols, dtype, max_cluster_size);
    case RowResidence::shared_memory:
    case RowResidence::shared_memory_pipelined:
      return config_holds_row<ForwardSharedConfigs>(c, cols, dtype, max_cluster_size);
  }
  return false;
}

/// Whether `c` names a kernel instantiated for `dtype` at all (whatever the row): its threads and elements
/// are listed for its residence, and the elements are whole 16-byte vectors of `dtype`.
constexpr bool cluster_config_instantiated(const ClusterConfig& c, DType dtype) noexcept {
  if (c.elems_per_thread % (16 / dtype_bytes(dtype)) != 0) return false;
  switch (c.residence) {
    case RowResidence::registers: return ForwardRegisterConfigs::has(c.threads, c.elems_per_thread);
    case RowResidence::shared_memory:
    case RowResidence::shared_memory_pipelined: return ForwardSharedConfigs::has(c.threads, c.elems_per_thread);
  }
  return false;
}

/// The default configuration for a row of `cols` elements (registers); cluster_size 0 when no cluster of
/// up to max_cluster_size blocks holds the row.
constexpr ClusterConfig default_cluster_config(std::int64_t cols, DType dtype, int max_cluster_size) noexcept {
  return apply_split_rule(forward_split_rule(cols, dtype), cluster_row_elems, ForwardRegisterConfigs::ElemList::count,
                          cols, dtype, max_cluster_size);
}

/// The default residence for many long rows: a shared-memory tile where the register rule's clusters outnumber
/// the SMs (rows x blocks > sm_count) and a row takes more than 32 KB (the register rule's 128 bytes a thread).
/// A tile costs no registers per element, so more blocks, and so more loads, share an SM, and a row needs fewer
/// blocks: 128 bytes a thread (64 elements of 16 bits, 32 of fp32; 256 bytes where that takes more than 16
/// blocks), in blocks of 512 threads while rows x blocks fill four waves of one block per SM, else of 256 (more,
/// smaller blocks). On the H200 pilot's records (bench/NOTES.md, "Tiles by default") this is the best
/// configuration or within 3.1% of it on 64 x 131072, 32 x 128256 and 32 x 256000 of every storage type and
/// 4096 x 32768 (10-30% faster than registers, 1.2% for fp32 4096 x 32768), while 8 x 131072 and fewer rows ran
/// 2-5% slower in tiles. Rows of whole 16-byte vectors only: a tile loads anything else element by element (the
/// register kernels keep whole vectors on the row's aligned grid). An empty configuration where the rule does not
/// apply or no tile holds the row.
constexpr ClusterConfig default_tile_config(std::int64_t rows, std::int64_t cols, DType dtype, int max_cluster_size,
                                            int sm_count) noexcept {
  const ClusterConfig in_registers = default_cluster_config(cols, dtype, max_cluster_size);
  const int bytes = dtype_bytes(dtype);
  // rows x blocks compared by division: rows may be as large as the shape check allows.
  if (in_registers.empty() || cols % (16 / bytes) != 0 || cols * bytes <= 512 * 64 || sm_count < 1 ||
      rows <= sm_count / in_registers.cluster_size) {
    return {};
  }
  for (const int per_thread : {128, 256}) {
    const int elems = per_thread / bytes;
    if (!ForwardSharedConfigs::ElemList::has(elems)) continue;
    const std::int64_t blocks512 = (cols + 512 * elems - 1) / (512 * elems);
    if (blocks512 <= max_cluster_size && rows >= (4 * static_cast<std::int64_t>(sm_count) + blocks512 - 1) / blocks512) {
      return {512, elems, static_cast<int>(blocks512), RowResidence::shared_memory};
    }
    const std::int64_t blocks256 = (cols + 256 * elems - 1) / (256 * elems);
    if (blocks256 <= max_cluster_size) return {256, elems, static_cast<int>(blocks256), RowResidence::shared_memory};
  }
  return {};
}

/// The configuration cluster_row runs `rows` rows of `cols` with on a device of `sm_count` SMs by default: a tile
/// where default_tile_config gives one, else the register rule with the few-long-rows exception of every row
/// program (spread_few_rows, rss/planner/row_split.hpp).
constexpr ClusterConfig forward_cluster_config_for(std::int64_t rows, std::int64_t cols, DType dtype,
                                                   int max_cluster_size, int sm_count) noexcept {
  const ClusterConfig tile = default_tile_config(rows, cols, dtype, max_cluster_size, sm_count);
  if (!tile.empty()) return tile;
  return spread_few_rows(default_cluster_config(cols, dtype, max_cluster_size), cluster_row_elems,
                         ForwardRegisterConfigs::ElemList::count, rows, cols, dtype, max_cluster_size, sm_count);
}

/// Plans cluster_row. `preferred` (may be null: the default configuration) comes from a tuning table or a
/// caller: used as given, or refused (invalid_strategy when it is not instantiated, not_admissible when it
/// does not hold the row). Also null_pointer, negative_size, size_overflow, unsupported_device (no
/// clusters) or not_admissible (the row is longer than the largest cluster holds); *out untouched on failure.
inline Status plan_cluster_row(const DeviceInfo& device, std::int64_t rows, std::int64_t cols, DType dtype,
                               const ClusterConfig* preferred, ClusterPlan* out) noexcept {
  const int max_cluster = device.sm_count < 1 ? 0 : device.max_cluster_size;
  return plan_clusters(
      rows, cols, dtype, max_cluster, forward_cluster_config_for(rows, cols, dtype, max_cluster, device.sm_count), preferred,
      [&](const ClusterConfig& c) { return cluster_config_fits(c, cols, dtype, max_cluster); },
      [&](const ClusterConfig& c) { return cluster_config_instantiated(c, dtype); }, out);
}

}  // namespace rss
