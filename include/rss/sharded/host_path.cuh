#pragma once
// Path nccl_host: the local phases as three kernels (statistics, exponential sums, normalisation, as
// local_fusion runs them on one GPU) with an NCCL all-gather after each of the first two, all on the
// caller's stream, so a CUDA Graph can capture the whole call. Each kernel writes one partial per
// (row, chunk); the all-gather brings every rank's partials of every row, and the next kernel combines
// them in rank order, so every rank gets the same bits. Works wherever NCCL does, across nodes too.
// x is read three times (statistics, sums, normalisation): nothing stays on chip across a collective.
#include <cuda_runtime.h>
#include <nccl.h>

#include <cstdint>

#include "rss/detail/launch.cuh"
#include "rss/workspace.hpp"
#include "rss/phases/exp_sum.cuh"
#include "rss/phases/normalize.cuh"
#include "rss/phases/row_stats.cuh"
#include "rss/strategies/local_fusion.cuh"
#include "rss/sharded/nccl_status.hpp"
#include "rss/sharded/plan.hpp"
#include "rss/types.hpp"

namespace rss::detail::sharded {

/// Buffers of the host path inside the operator's NCCL memory (send and receive sides of both
/// all-gathers; the receive sides hold world blocks of rows x chunks, rank-major).
struct HostBuffers {
  RowStatsPartial* stats_send;
  RowStatsPartial* stats_recv;
  float* sums_send;
  float* sums_recv;

  static HostBuffers carve(WorkspaceCarver& carver, std::int64_t rows, std::int64_t chunks, int world) {
    HostBuffers b{};
    b.stats_send = carver.take<RowStatsPartial>(rows * chunks);
    b.stats_recv = carver.take<RowStatsPartial>(rows * chunks * world);
    b.sums_send = carver.take<float>(rows * chunks);
    b.sums_recv = carver.take<float>(rows * chunks * world);
    return b;
  }
};

/// A (row, chunk) work item of this rank's shard: local_fusion's tile, empty past the rank's width.
using HostTile = local_fusion::Tile;
static_assert(host_threads == local_fusion::threads, "the host path launches local_fusion's stats kernel");

/// Combines the world * chunks gathered statistics of `row`, rank-major, identically on every rank.
template <int Threads>
__device__ RowStatsPartial combine_gathered_stats(const RowStatsPartial* recv, std::int64_t row, std::int64_t rows,
                                                  HostGeometry g, int world,
                                                  typename BlockRowStats<Threads>::TempStorage& storage) {
  RowStatsPartial acc = RowStatsPartial::identity();
  // Rank by rank: no 64-bit division per partial (its calls kept registers live and spilled them).
  for (int rank = 0; rank < world; ++rank) {
    const RowStatsPartial* rank_row = recv + (rank * rows + row) * g.chunks;
    for (std::int64_t c = threadIdx.x; c < g.chunks; c += Threads)
      acc = CombineRowStats{}(acc, RowStatsPartial{__ldcg(&rank_row[c].max), __ldcg(&rank_row[c].sum_sq)});
  }
  return BlockAllReduce<RowStatsPartial, Threads>::all_reduce(acc, CombineRowStats{}, storage);
}

template <int Threads>
__device__ float combine_gathered_sums(const float* recv, std::int64_t row, std::int64_t rows, HostGeometry g,
                                       int world, typename BlockExpSum<Threads>::TempStorage& storage) {
  double acc = 0.0;  // a long row has many partials
  for (int rank = 0; rank < world; ++rank) {
    const float* rank_row = recv + (rank * rows + row) * g.chunks;
    for (std::int64_t c = threadIdx.x; c < g.chunks; c += Threads) acc += __ldcg(rank_row + c);
  }
  return BlockAllReduce<float, Threads>::all_reduce(static_cast<float>(acc), SumFloat{}, storage);
}

template <class T>
__global__ void __launch_bounds__(host_threads)
    host_exp_sum(const T* x, Layout l, HostGeometry g, int world, std::int64_t global_cols,
                 const RowStatsPartial* stats_recv, float* sums_send) {
  __shared__ PhaseScratch<host_threads> storage;
  for (std::int64_t item = blockIdx.x; item < l.rows * g.chunks; item += gridDim.x) {
    const HostTile tile(item, l, g);
    const RowStatsPartial row = combine_gathered_stats<host_threads>(stats_recv, tile.row, l.rows, g, world, storage.stats);
    const float s = BlockExpSum<host_threads>::tile(x + tile.x_offset, tile.size, make_row_scale(row, global_cols), storage.sum);
    if (threadIdx.x == 0) sums_send[item] = s;
  }
}

template <class T>
__global__ void __launch_bounds__(host_threads)
    host_normalize(const T* x, T* y, Layout l, HostGeometry g, int world, std::int64_t global_cols,
                   const RowStatsPartial* stats_recv, const float* sums_recv) {
  __shared__ PhaseScratch<host_threads> storage;
  for (std::int64_t item = blockIdx.x; item < l.rows * g.chunks; item += gridDim.x) {
    const HostTile tile(item, l, g);
    const RowStatsPartial row = combine_gathered_stats<host_threads>(stats_recv, tile.row, l.rows, g, world, storage.stats);
    const float total = combine_gathered_sums<host_threads>(sums_recv, tile.row, l.rows, g, world, storage.sum);
    BlockNormalize<host_threads>::tile(x + tile.x_offset, y + tile.y_offset, tile.size, make_row_scale(row, global_cols),
                                       1.0f / total);
  }
}

/// The arguments of one rank's host-path call.
template <class T>
struct HostCall {
  const T* x;
  T* y;
  Layout layout;  // this rank's shard
  std::int64_t global_cols;
  HostGeometry geometry;
  HostBuffers buffers;
  int world;
  ncclComm_t comm;
};

/// The three phases of one rank's call; the all-gathers are separate so that one thread driving several
/// GPUs can group them (ncclGroupStart/End) across ranks.
template <class T>
Status host_phase(int phase, const HostCall<T>& c, Launcher launcher) {
  const unsigned grid = grid_for(c.layout.rows * c.geometry.chunks);
  // This rank's share: x read by each phase, y written by the last (the local_fusion pattern).
  launcher.add_logical_bytes(c.layout.rows * c.layout.cols * static_cast<std::int64_t>(sizeof(T)) * (phase < 2 ? 1 : 2));
  switch (phase) {
    case 0:
      return launcher("sharded::nccl_host::stats", local_fusion::stats<T>, grid, host_threads, 0, false, 0, c.x, c.layout,
                      c.geometry, c.buffers.stats_send);
    case 1:
      return launcher("sharded::nccl_host::exp_sum", host_exp_sum<T>, grid, host_threads, 0, false, 0, c.x, c.layout,
                      c.geometry, c.world, c.global_cols, static_cast<const RowStatsPartial*>(c.buffers.stats_recv),
                      c.buffers.sums_send);
    default:
      return launcher("sharded::nccl_host::normalize", host_normalize<T>, grid, host_threads, 0, false, 0, c.x, c.y,
                      c.layout, c.geometry, c.world, c.global_cols,
                      static_cast<const RowStatsPartial*>(c.buffers.stats_recv),
                      static_cast<const float*>(c.buffers.sums_recv));
  }
}

/// The all-gather after phase 0 (statistics) or 1 (sums), on `stream`.
template <class T>
Status host_gather(int phase, const HostCall<T>& c, cudaStream_t stream) {
  const auto items = static_cast<std::size_t>(c.layout.rows * c.geometry.chunks);
  if (phase == 0) {
    // RowStatsPartial is 16 bytes: 4 words each.
    return from_nccl(ncclAllGather(c.buffers.stats_send, c.buffers.stats_recv, items * 4, ncclUint32, c.comm, stream));
  }
  return from_nccl(ncclAllGather(c.buffers.sums_send, c.buffers.sums_recv, items, ncclFloat32, c.comm, stream));
}

}  // namespace rss::detail::sharded
