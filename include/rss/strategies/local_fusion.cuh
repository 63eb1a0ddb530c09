#pragma once
// Strategy `local_fusion`: three kernels, one per phase. Each kernel fuses its phase's operations,
// but nothing stays on chip between kernels: x is read three times and the last kernel recomputes
// the exponentials. A long row is cut into chunks handled by separate blocks, whose partial
// statistics and sums meet in a small workspace buffer, so one very long row still fills the GPU.
#include <cstdint>

#include "rss/planner/row_split.hpp"
#include "rss/detail/launch.cuh"
#include "rss/workspace.hpp"
#include "rss/phases/exp_sum.cuh"
#include "rss/phases/normalize.cuh"
#include "rss/phases/row_stats.cuh"
#include "rss/strategies/call.cuh"

namespace rss::detail {
namespace local_fusion {

inline constexpr int threads = 512;
struct Workspace {
  RowStatsPartial* stats;  // rows x chunks partial statistics
  float* sums;             // rows x chunks partial sums of exponentials

  static Workspace carve(WorkspaceCarver& carver, std::int64_t rows, std::int64_t cols) {
    Workspace w{};
    w.stats = carver.take<RowStatsPartial>(rows * max_row_chunks(cols));
    w.sums = carver.take<float>(rows * max_row_chunks(cols));
    return w;
  }
};

/// The (row, chunk) work item `item` of a launch, as a tile of x and of y (empty past the row's end: the
/// sharded host path plans chunks from the widest rank's share).
struct Tile {
  std::int64_t row, chunk, x_offset, y_offset, size;
  __device__ Tile(std::int64_t item, const Layout& l, ChunkGeometry g)
      : row(item / g.chunks), chunk(item % g.chunks), x_offset(row * l.ld_x + chunk * g.chunk_elems),
        y_offset(row * l.ld_y + chunk * g.chunk_elems),
        size(max(min(g.chunk_elems, l.cols - chunk * g.chunk_elems), std::int64_t{0})) {}
};

/// Kernel 1: each (row, chunk) tile's statistics to partials[item] (also the sharded host path's first phase).
template <class T>
__global__ void __launch_bounds__(threads) stats(const T* x, Layout l, ChunkGeometry g, RowStatsPartial* partials) {
  __shared__ typename BlockRowStats<threads>::TempStorage storage;
  for (std::int64_t item = blockIdx.x; item < l.rows * g.chunks; item += gridDim.x) {
    const Tile tile(item, l, g);
    const RowStatsPartial p = BlockRowStats<threads>::tile(x + tile.x_offset, tile.size, storage);
    if (threadIdx.x == 0) partials[item] = p;
  }
}

/// The statistics of a tile's row, from its chunks' partials.
__device__ __forceinline__ RowStatsPartial row_stats_of(const Tile& tile, ChunkGeometry g, const RowStatsPartial* partials,
                                                        PhaseScratch<threads>& storage) {
  return BlockRowStats<threads>::combine(partials + tile.row * g.chunks, static_cast<int>(g.chunks), storage.stats);
}

template <class T>
__global__ void __launch_bounds__(threads) exp_sum(const T* x, Layout l, ChunkGeometry g, const RowStatsPartial* partials,
                                                   float* sums) {
  __shared__ PhaseScratch<threads> storage;
  for (std::int64_t item = blockIdx.x; item < l.rows * g.chunks; item += gridDim.x) {
    const Tile tile(item, l, g);
    const RowScale scale = make_row_scale(row_stats_of(tile, g, partials, storage), l.cols);
    const float s = BlockExpSum<threads>::tile(x + tile.x_offset, tile.size, scale, storage.sum);
    if (threadIdx.x == 0) sums[item] = s;
  }
}

/// Three blocks per SM asked for (40 registers): unbounded, ptxas chose 40 for bf16 and spilled, 63 for fp16 (sm_90).
template <class T>
__global__ void __launch_bounds__(threads, 3) normalize(const T* x, T* y, Layout l, ChunkGeometry g,
                                                     const RowStatsPartial* partials, const float* sums,
                                                     RowStatistics* row_stats) {
  __shared__ PhaseScratch<threads> storage;
  for (std::int64_t item = blockIdx.x; item < l.rows * g.chunks; item += gridDim.x) {
    const Tile tile(item, l, g);
    const RowScale scale = make_row_scale(row_stats_of(tile, g, partials, storage), l.cols);
    const float total = BlockExpSum<threads>::combine(sums + tile.row * g.chunks, static_cast<int>(g.chunks), storage.sum);
    if (row_stats != nullptr && tile.chunk == 0 && threadIdx.x == 0)
      row_stats[tile.row] = RowStatistics{scale.max, scale.inv_rms, total};
    BlockNormalize<threads>::tile(x + tile.x_offset, y + tile.y_offset, tile.size, scale, 1.0f / total);
  }
}

template <class T>
Status launch(const T* x, T* y, RowStatistics* row_stats, const Layout& l, void* workspace, ChunkGeometry g,
              const Launcher& launch) {
  WorkspaceCarver carver(workspace);
  const Workspace w = Workspace::carve(carver, l.rows, l.cols);
  const unsigned grid = grid_for(l.rows * g.chunks);
  launch.add_logical_bytes(l.rows * l.cols * static_cast<std::int64_t>(sizeof(T)) * 4);  // x three times, y once
  RSS_TRY(launch("local_fusion::stats", stats<T>, grid, threads, 0, false, 0, x, l, g, w.stats));
  RSS_TRY(launch("local_fusion::exp_sum", exp_sum<T>, grid, threads, 0, false, 0, x, l, g,
                 static_cast<const RowStatsPartial*>(w.stats), w.sums));
  return launch("local_fusion::normalize", normalize<T>, grid, threads, 0, false, 0, x, y, l, g,
                static_cast<const RowStatsPartial*>(w.stats), static_cast<const float*>(w.sums), row_stats);
}

}  // namespace local_fusion

/// Strategy `local_fusion`: statistics, exponential sums, normalisation as three kernels. The
/// workspace size does not depend on the device; the chunking does (read once, at planning).
struct LocalFusion : NothingToPrepare {
  static constexpr Strategy id = Strategy::local_fusion;
  template <class T>
  struct Plan {
    ChunkGeometry geometry{};
  };

  template <class T>
  static Status workspace_bytes(std::int64_t rows, std::int64_t cols, const DeviceInfo&, std::size_t* bytes) noexcept {
    return carved_bytes<local_fusion::Workspace>(bytes, rows, cols);
  }
  template <class T>
  static Status make_plan(const Call<T>& c, const DeviceInfo& d, const Config&, Plan<T>* plan) noexcept {
    plan->geometry = plan_chunks(c.layout.rows, c.layout.cols, d.sm_count);
    return Status::success;
  }
  template <class T>
  static Status launch(const Plan<T>& plan, const Call<T>& c, const Launcher& launcher) noexcept {
    return local_fusion::launch(c.x, c.y, c.stats, c.layout, c.workspace, plan.geometry, launcher);
  }
};

}  // namespace rss::detail
