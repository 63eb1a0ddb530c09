#pragma once
// Strategy `local_fusion`: three kernels, one per phase. Each kernel fuses its phase's operations,
// but nothing stays on chip between kernels: x is read three times and the last kernel recomputes
// the exponentials. A long row is cut into chunks handled by separate blocks, whose partial
// statistics and sums meet in a small workspace buffer, so one very long row still fills the GPU.
#include <cstdint>

#include "rss/detail/launch.cuh"
#include "rss/workspace.hpp"
#include "rss/phases/exp_sum.cuh"
#include "rss/phases/normalize.cuh"
#include "rss/phases/row_stats.cuh"
#include "rss/strategies/call.cuh"

namespace rss::detail {
namespace local_fusion {

inline constexpr int threads = 512;
/// A chunk below this is not worth a block of its own: per-block overhead would dominate.
inline constexpr std::int64_t min_chunk_elems = 4096;
/// Blocks per SM the chunking aims for (512 threads: 4 blocks fill an SM's 2048 threads).
inline constexpr int target_blocks_per_sm = 4;

/// How each row is cut into chunks.
struct Geometry {
  std::int64_t chunks;       // chunks per row
  std::int64_t chunk_elems;  // elements per chunk, a multiple of 8 so chunks keep the row's alignment
};

/// Most chunks a row of `cols` can be cut into: this sizes the workspace independently of the device.
inline std::int64_t max_chunks(std::int64_t cols) { return (cols + min_chunk_elems - 1) / min_chunk_elems; }

inline Geometry geometry(std::int64_t rows, std::int64_t cols, int sm_count) {
  const std::int64_t target = static_cast<std::int64_t>(sm_count) * target_blocks_per_sm;
  std::int64_t chunks = (target + rows - 1) / rows;
  if (chunks > max_chunks(cols)) chunks = max_chunks(cols);
  if (chunks < 1) chunks = 1;
  std::int64_t chunk_elems = (cols + chunks - 1) / chunks;
  chunk_elems = (chunk_elems + 7) / 8 * 8;
  return {(cols + chunk_elems - 1) / chunk_elems, chunk_elems};
}

struct Workspace {
  RowStatsPartial* stats;  // rows x chunks partial statistics
  float* sums;             // rows x chunks partial sums of exponentials

  static Workspace carve(WorkspaceCarver& carver, std::int64_t rows, std::int64_t cols) {
    Workspace w{};
    w.stats = carver.take<RowStatsPartial>(rows * max_chunks(cols));
    w.sums = carver.take<float>(rows * max_chunks(cols));
    return w;
  }
};

/// The (row, chunk) work item `item` of a launch, as a tile of x and of y.
struct Tile {
  std::int64_t row, chunk, x_offset, y_offset, size;
  __device__ Tile(std::int64_t item, const Layout& l, Geometry g)
      : row(item / g.chunks), chunk(item % g.chunks), x_offset(row * l.ld_x + chunk * g.chunk_elems),
        y_offset(row * l.ld_y + chunk * g.chunk_elems), size(min(g.chunk_elems, l.cols - chunk * g.chunk_elems)) {}
};

template <class T>
__global__ void __launch_bounds__(threads) stats(const T* x, Layout l, Geometry g, RowStatsPartial* partials) {
  __shared__ typename BlockRowStats<threads>::TempStorage storage;
  for (std::int64_t item = blockIdx.x; item < l.rows * g.chunks; item += gridDim.x) {
    const Tile tile(item, l, g);
    const RowStatsPartial p = BlockRowStats<threads>::tile(x + tile.x_offset, tile.size, storage);
    if (threadIdx.x == 0) partials[item] = p;
  }
}

template <class T>
__global__ void __launch_bounds__(threads) exp_sum(const T* x, Layout l, Geometry g, const RowStatsPartial* partials,
                                                   float* sums) {
  __shared__ PhaseScratch<threads> storage;
  for (std::int64_t item = blockIdx.x; item < l.rows * g.chunks; item += gridDim.x) {
    const Tile tile(item, l, g);
    const RowStatsPartial row =
        BlockRowStats<threads>::combine(partials + tile.row * g.chunks, static_cast<int>(g.chunks), storage.stats);
    const RowScale scale = make_row_scale(row, l.cols);
    const float s = BlockExpSum<threads>::tile(x + tile.x_offset, tile.size, scale, storage.sum);
    if (threadIdx.x == 0) sums[item] = s;
  }
}

template <class T>
__global__ void __launch_bounds__(threads) normalize(const T* x, T* y, Layout l, Geometry g,
                                                     const RowStatsPartial* partials, const float* sums,
                                                     RowStatistics* row_stats) {
  __shared__ PhaseScratch<threads> storage;
  for (std::int64_t item = blockIdx.x; item < l.rows * g.chunks; item += gridDim.x) {
    const Tile tile(item, l, g);
    const RowStatsPartial row =
        BlockRowStats<threads>::combine(partials + tile.row * g.chunks, static_cast<int>(g.chunks), storage.stats);
    const float total = BlockExpSum<threads>::combine(sums + tile.row * g.chunks, static_cast<int>(g.chunks), storage.sum);
    const RowScale scale = make_row_scale(row, l.cols);
    if (row_stats != nullptr && tile.chunk == 0 && threadIdx.x == 0)
      row_stats[tile.row] = RowStatistics{scale.max, scale.inv_rms, total};
    BlockNormalize<threads>::tile(x + tile.x_offset, y + tile.y_offset, tile.size, scale, 1.0f / total);
  }
}

template <class T>
Status launch(const T* x, T* y, RowStatistics* row_stats, const Layout& l, void* workspace, Geometry g,
              const Launcher& launch) {
  WorkspaceCarver carver(workspace);
  const Workspace w = Workspace::carve(carver, l.rows, l.cols);
  const unsigned grid = grid_for(l.rows * g.chunks);
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
    local_fusion::Geometry geometry{};
  };

  template <class T>
  static Status workspace_bytes(std::int64_t rows, std::int64_t cols, const DeviceInfo&, std::size_t* bytes) noexcept {
    return carved_bytes<local_fusion::Workspace>(bytes, rows, cols);
  }
  template <class T>
  static Status make_plan(const Call<T>& c, const DeviceInfo& d, const Config&, Plan<T>* plan) noexcept {
    plan->geometry = local_fusion::geometry(c.layout.rows, c.layout.cols, d.sm_count);
    return Status::success;
  }
  template <class T>
  static Status launch(const Plan<T>& plan, const Call<T>& c, const Launcher& launcher) noexcept {
    return local_fusion::launch(c.x, c.y, c.stats, c.layout, c.workspace, plan.geometry, launcher);
  }
};

}  // namespace rss::detail
