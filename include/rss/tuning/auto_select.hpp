#pragma once
// Strategy `automatic`: which concrete strategy (and cluster configuration) runs a shape on a device.
// A tuning table measured by the bench's pilot mode (bench/README.md) answers first; shapes it does
// not cover get the heuristic below. Pure host C++, testable without a GPU.
#include <cstdint>
#include <cstring>

#include "rss/planner/cluster_plan.hpp"
#include "rss/types.hpp"

namespace rss {

/// One measured decision: rows in [min_rows, max_rows] and cols in [min_cols, max_cols] of `dtype`
/// run `strategy` (with `cluster` when it is cluster_row; a zero config means the planner's default).
struct TuningEntry {
  DType dtype;
  std::int64_t min_rows, max_rows;
  std::int64_t min_cols, max_cols;
  Strategy strategy;
  ClusterConfig cluster;
};

/// The entries measured on one kind of device, recognised by the start of its name.
struct TuningTable {
  const char* device_name_prefix;
  const TuningEntry* entries;
  int count;
};

/// What the automatic strategy needs to know about the device.
struct AutoDevice {
  int sm_count = 0;
  int max_cluster_size = 0;       // 0: no thread-block clusters
  bool cooperative_launch = false;
  const TuningTable* table = nullptr;
  std::int64_t shared_bytes_per_sm = 0;  // what the megakernels can retain per SM (0: unknown)
};

struct AutoChoice {
  Strategy strategy = Strategy::local_fusion;
  ClusterConfig cluster{};  // cluster_row only; zero: the planner's default
  bool from_table = false;
};

/// The strategy every device can run: the fallback when a choice is refused.
inline constexpr Strategy fallback_strategy = Strategy::local_fusion;

/// Heuristic: a row a cluster can hold stays in registers (cluster_row, one launch, no global
/// barrier; on the H200 it beat the megakernels on every such shape measured, one row included); a
/// longer row goes to the grid-barrier megakernel, or to megakernel_row once it overflows the chip's
/// shared memory and tiles are evicted. Without clusters: the megakernels, else local_fusion.
inline AutoChoice heuristic_choice(const AutoDevice& d, std::int64_t rows, std::int64_t cols, DType dtype) noexcept {
  if (default_cluster_config(cols, dtype, d.max_cluster_size).cluster_size > 0) return {Strategy::cluster_row, {}, false};
  if (!d.cooperative_launch) return {fallback_strategy, {}, false};
  // The megakernels retain fp32 tiles. Once the whole problem no longer fits the chip's shared memory,
  // tiles are evicted and re-read; megakernel_row, whose blocks wait only for their own row, won there.
  const std::int64_t retained_bytes = rows * cols * static_cast<std::int64_t>(sizeof(float));
  const bool overflows = d.shared_bytes_per_sm > 0 && retained_bytes > d.shared_bytes_per_sm * d.sm_count;
  return {overflows ? Strategy::megakernel_row : Strategy::megakernel_grid, {}, false};
}

/// The table's answer when an entry covers the shape, else the heuristic's.
inline AutoChoice auto_select(const AutoDevice& d, std::int64_t rows, std::int64_t cols, DType dtype) noexcept {
  if (d.table != nullptr) {
    for (int i = 0; i < d.table->count; ++i) {
      const TuningEntry& e = d.table->entries[i];
      if (e.dtype != dtype || rows < e.min_rows || rows > e.max_rows || cols < e.min_cols || cols > e.max_cols) continue;
      if (e.strategy == Strategy::cluster_row && d.max_cluster_size == 0) continue;
      return {e.strategy, e.cluster, true};
    }
  }
  return heuristic_choice(d, rows, cols, dtype);
}

}  // namespace rss
