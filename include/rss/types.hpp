#pragma once
// Vocabulary shared by host and device code: storage types and strategy names.
#include <cstdint>

namespace rss {

/// Storage type of x and y. Arithmetic is always fp32 or wider.
enum class DType : int { fp32, bf16, fp16 };

constexpr const char* dtype_name(DType t) noexcept {
  switch (t) {
    case DType::fp32: return "fp32";
    case DType::bf16: return "bf16";
    case DType::fp16: return "fp16";
  }
  return "unknown";
}

constexpr int dtype_bytes(DType t) noexcept { return t == DType::fp32 ? 4 : 2; }

/// Launch strategies. Names match the benchmark records and the report.
enum class Strategy : int {
  baseline,                 // nine kernels, full-size intermediates in global memory
  baseline_graph,           // the same nine kernels as one CUDA Graph, instantiated once, replayed
  local_fusion,             // three kernels; the last recomputes exp from x
  megakernel_grid,          // one cooperative launch per batch, grid-wide barrier, exps retained
  megakernel_row,           // one cooperative launch per batch, row-scoped barrier, exps retained
  control_no_retention,     // megakernel_grid whose last phase recomputes exp from x
  control_ordinary_launch,  // the megakernel's phases as ordinary launches
  block_row,                // one block per row, row retained in shared memory, one ordinary launch
  cluster_row,              // one thread-block cluster per row, row retained in registers, one launch
  automatic,                // picks one of the above per shape and device (rss/tuning/auto_select.hpp)
};

/// Every concrete strategy (automatic picks among them), in declaration order: tests, benches and examples iterate this.
inline constexpr Strategy all_strategies[] = {
    Strategy::baseline,       Strategy::baseline_graph,       Strategy::local_fusion,
    Strategy::megakernel_grid, Strategy::megakernel_row,      Strategy::control_no_retention,
    Strategy::control_ordinary_launch, Strategy::block_row,   Strategy::cluster_row,
};

constexpr const char* strategy_name(Strategy s) noexcept {
  switch (s) {
    case Strategy::baseline: return "baseline";
    case Strategy::baseline_graph: return "baseline_graph";
    case Strategy::local_fusion: return "local_fusion";
    case Strategy::megakernel_grid: return "megakernel_grid";
    case Strategy::megakernel_row: return "megakernel_row";
    case Strategy::control_no_retention: return "control_no_retention";
    case Strategy::control_ordinary_launch: return "control_ordinary_launch";
    case Strategy::block_row: return "block_row";
    case Strategy::cluster_row: return "cluster_row";
    case Strategy::automatic: return "automatic";
  }
  return "unknown";
}

/// The matrices of a call: x[i * ld_x + j] and y[i * ld_y + j] for 0 <= i < rows, 0 <= j < cols,
/// in elements. The leading dimensions are at least cols; y may be x itself (same leading
/// dimension) but may not otherwise overlap it.
struct Layout {
  std::int64_t rows = 0;
  std::int64_t cols = 0;
  std::int64_t ld_x = 0;
  std::int64_t ld_y = 0;

  /// Rows stored back to back: both leading dimensions equal cols.
  static constexpr Layout contiguous(std::int64_t rows, std::int64_t cols) noexcept { return {rows, cols, cols, cols}; }
  constexpr bool empty() const noexcept { return rows == 0 || cols == 0; }
};

}  // namespace rss
