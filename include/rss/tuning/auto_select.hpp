#pragma once
// Strategy `automatic`: which concrete strategy (and configuration) runs a shape on a device. A tuning
// table measured by the bench's pilot mode answers first; shapes it does not cover get the heuristic
// below. Pure host C++, testable without a GPU.
#include <cstddef>
#include <cstdint>

#include "rss/device_info.hpp"
#include "rss/planner/cluster_plan.hpp"
#include "rss/strategy.hpp"
#include "rss/types.hpp"

namespace rss {

/// One measured decision: rows in [min_rows, max_rows] and cols in [min_cols, max_cols] of `dtype`
/// run `config` (for cluster_row, an empty cluster configuration means the planner's default).
struct TuningEntry {
  DType dtype;
  std::int64_t min_rows, max_rows;
  std::int64_t min_cols, max_cols;
  Config config;
};

/// The entries measured on one kind of device, recognised by what decides performance: the compute
/// capability, the SM count and the memory size (which tells an H200 from an H100 of the same SMs).
struct TuningTable {
  const char* measured_on;  // the device the pilot ran on, for people
  int compute_capability;   // e.g. 90
  int sm_count;
  std::size_t min_memory_bytes, max_memory_bytes;
  const TuningEntry* entries;
  int count;

  constexpr bool matches(const DeviceInfo& d) const noexcept {
    return d.compute_capability() == compute_capability && d.sm_count == sm_count &&
           d.global_memory_bytes >= min_memory_bytes && d.global_memory_bytes <= max_memory_bytes;
  }
};

/// What automatic picked.
struct AutoChoice {
  Config config{Strategy::local_fusion};
  bool from_table = false;
};

/// The strategy every device can run: the fallback when a choice is refused.
inline constexpr Strategy fallback_strategy = Strategy::local_fusion;

/// Single rows at least this long go to long_row (below it, to the megakernels while their tiles fit).
inline constexpr std::int64_t long_row_min_cols = std::int64_t{1} << 20;

/// Heuristic: a row a cluster can hold stays in registers (cluster_row, one launch, no global
/// barrier; on the H200 it beat the megakernels on every such shape measured, one row included). Longer rows
/// go to the grid-barrier megakernel, which retains their fp32 tiles on chip, or, once those overflow the
/// chip's shared memory or the row has long_row_min_cols elements or more: one row to long_row (x held as
/// stored, only the overflow re-read, from L2); several rows that overflow to megakernel_row (tiles evicted and
/// re-read). Without clusters: the megakernels, else local_fusion.
inline AutoChoice heuristic_choice(const DeviceInfo& d, std::int64_t rows, std::int64_t cols, DType dtype) noexcept {
  if (default_cluster_config(cols, dtype, d.max_cluster_size).cluster_size > 0) return {Config{Strategy::cluster_row}, false};
  if (!d.cooperative_launch) return {Config{fallback_strategy}, false};
  const std::int64_t retained_bytes = rows * cols * static_cast<std::int64_t>(sizeof(float));
  const auto shared = static_cast<std::int64_t>(d.shared_per_sm);
  const bool overflows = shared > 0 && retained_bytes > shared * d.sm_count;
  // A single row of 2^20 elements or more goes to long_row even while its fp32 tiles fit: with its four-chunk load
  // it beat megakernel_grid on 2^22 (H200, 1 x 2^22: 25.9 against 26.2 us fp32, 23.9 against 27.4 bf16, 23.9
  // against 28.9 fp16; bench/NOTES.md, "Long rows, step 5"), and with 512-thread blocks on 2^20 as well (H100,
  // 10.5 against 11.5 us fp32, 10.0 against 11.0 bf16, device time; "Long rows, step 7").
  // long_row needs sm_90 (bulk copies, clusters): a device with clusters has both.
  const bool long_single_row = rows == 1 && (overflows || cols >= long_row_min_cols);
  if (long_single_row && d.max_cluster_size > 0 && d.compute_capability() >= 90) {
    return {Config{Strategy::long_row}, false};
  }
  return {Config{overflows ? Strategy::megakernel_row : Strategy::megakernel_grid}, false};
}

/// The table's answer when an entry covers the shape (and the device can run it), else the heuristic's.
inline AutoChoice auto_select(const DeviceInfo& d, const TuningTable* table, std::int64_t rows, std::int64_t cols,
                              DType dtype) noexcept {
  if (table != nullptr) {
    for (int i = 0; i < table->count; ++i) {
      const TuningEntry& e = table->entries[i];
      if (e.dtype != dtype || rows < e.min_rows || rows > e.max_rows || cols < e.min_cols || cols > e.max_cols) continue;
      if (e.config.strategy == Strategy::cluster_row && d.max_cluster_size == 0) continue;
      return {e.config, true};
    }
  }
  return heuristic_choice(d, rows, cols, dtype);
}

}  // namespace rss
