#pragma once
// Backward strategy `two_pass`: the portable fallback, two ordinary kernels on any device and row length.
// A long row is cut into chunks handled by separate blocks. Kernel 1 writes each chunk's partial sums
// (sum x^2, c, p, q) into the workspace; kernel 2 combines its row's partials and writes dx for its chunk.
// x, y and dy are read twice (7 N of traffic against cluster_row's 4 N).
#include <cstdint>
#include <cub/block/block_reduce.cuh>

#include "rss/planner/row_split.hpp"
#include "rss/backward/layout.hpp"
#include "rss/backward/row_sums.cuh"
#include "rss/detail/launch.cuh"
#include "rss/storage.cuh"
#include "rss/workspace.hpp"
#include "rss/phases/tile_io.cuh"

namespace rss::detail::backward::two_pass {

inline constexpr int threads = 512;
/// 16-byte vectors of each matrix a thread loads before it uses the first.
inline constexpr int unroll = 2;

struct Workspace {
  RowSums* partials;  // rows x max_row_chunks(cols)

  static Workspace carve(WorkspaceCarver& carver, std::int64_t rows, std::int64_t cols) {
    return {carver.take<RowSums>(rows * max_row_chunks(cols))};
  }
};

/// Calls f(x_i, y_i, g_i) for every i in [0, n) of a tile, each element by one thread of the block;
/// f returns dx_i, stored to out[i] when Write. Saved: y is not read (f recomputes it; it gets 0). 16-byte
/// accesses when every matrix has the same alignment within 16 bytes (the usual case), scalar ones otherwise.
template <bool Write, bool Saved, class T, class F>
__device__ __forceinline__ void tile_walk(const T* x, const T* y, const T* g, T* out, std::int64_t n, F&& f) {
  using Traits = StorageTraits<T>;
  constexpr int W = vector_width<T>;
  const int t = static_cast<int>(threadIdx.x);
  const std::int64_t head = unaligned_head(x, n);
  const bool same = (Saved || head == unaligned_head(y, n)) && head == unaligned_head(g, n) &&
                    (!Write || head == unaligned_head(out, n));
  const auto scalar = [&](std::int64_t i) {
    const float v = f(Traits::to_float(x[i]), Saved ? 0.0f : Traits::to_float(y[i]), Traits::to_float(g[i]));
    if constexpr (Write) out[i] = Traits::from_float(v);
  };
  if (!same) {
    for (std::int64_t i = t; i < n; i += threads) scalar(i);
    return;
  }
  if (t < head) scalar(t);
  const std::int64_t vectors = (n - head) / W;
  const auto vector = [&](const Vector<T>& a, const Vector<T>& b, const Vector<T>& c, std::int64_t v) {
    Vector<T> d;
#pragma unroll
    for (int e = 0; e < W; ++e)
      d.v[e] = Traits::from_float(f(Traits::to_float(a.v[e]), Saved ? 0.0f : Traits::to_float(b.v[e]), Traits::to_float(c.v[e])));
    if constexpr (Write) store_vector(out + head + v * W, d);  // in place (out == g): loaded above by this thread
  };
  constexpr int Step = threads * unroll;
  std::int64_t v0 = 0;
  for (; v0 + Step <= vectors; v0 += Step) {
    Vector<T> a[unroll], b[unroll], c[unroll];
#pragma unroll
    for (int u = 0; u < unroll; ++u) {
      const std::int64_t at = head + (v0 + u * threads + t) * W;
      a[u] = load_vector(x + at);
      if constexpr (!Saved) b[u] = load_vector(y + at);
      c[u] = load_vector(g + at);
    }
#pragma unroll
    for (int u = 0; u < unroll; ++u) vector(a[u], b[u], c[u], v0 + u * threads + t);
  }
  for (std::int64_t v = v0 + t; v < vectors; v += threads) {
    const std::int64_t at = head + v * W;
    vector(load_vector(x + at), Saved ? Vector<T>{} : load_vector(y + at), load_vector(g + at), v);
  }
  for (std::int64_t i = head + vectors * W + t; i < n; i += threads) scalar(i);
}

struct Item {
  std::int64_t row, chunk, begin, size;
  __device__ Item(std::int64_t item, const BackwardLayout& l, ChunkGeometry geo)
      : row(item / geo.chunks), chunk(item % geo.chunks), begin(chunk * geo.chunk_elems),
        size(min(geo.chunk_elems, l.cols - chunk * geo.chunk_elems)) {}
};

/// Saved: y is null and each row's statistics recompute it.
template <class T, bool Saved>
__global__ void __launch_bounds__(threads) sums(const T* x, const T* y, const RowStatistics* stats, const T* dy,
                                                BackwardLayout l, ChunkGeometry geo, RowSums* partials) {
  __shared__ typename cub::BlockReduce<RowSums, threads>::TempStorage storage;
  for (std::int64_t item = blockIdx.x; item < l.rows * geo.chunks; item += gridDim.x) {
    const Item it(item, l, geo);
    ThreadSums acc;
    const SavedRow recompute = Saved ? saved_row(stats[it.row]) : SavedRow{};
    tile_walk<false, Saved>(x + it.row * l.ld_x + it.begin, Saved ? nullptr : y + it.row * l.ld_y + it.begin,
                            dy + it.row * l.ld_dy + it.begin, static_cast<T*>(nullptr), it.size,
                            [&](float xv, float yv, float gv) {
                              if constexpr (Saved) acc.add_saved(xv, recompute.y(xv), gv);
                              else acc.add(xv, yv, gv);
                              return 0.0f;
                            });
    const RowSums total = cub::BlockReduce<RowSums, threads>(storage).Reduce(acc.total(), CombineRowSums{});
    if (threadIdx.x == 0) partials[item] = total;
    __syncthreads();  // the reduction's storage is reused by the next item
  }
}

template <class T, bool Saved>
__global__ void __launch_bounds__(threads) apply(const T* x, const T* y, const RowStatistics* stats, const T* dy, T* dx,
                                                 BackwardLayout l, ChunkGeometry geo, const RowSums* partials) {
  struct Shared {
    typename cub::BlockReduce<RowSums, threads>::TempStorage reduce;
    RowSums total;
  };
  __shared__ Shared storage;
  for (std::int64_t item = blockIdx.x; item < l.rows * geo.chunks; item += gridDim.x) {
    const Item it(item, l, geo);
    RowSums acc = RowSums::identity();
    for (std::int64_t i = threadIdx.x; i < geo.chunks; i += threads) acc = CombineRowSums{}(acc, partials[it.row * geo.chunks + i]);
    const RowSums total = cub::BlockReduce<RowSums, threads>(storage.reduce).Reduce(acc, CombineRowSums{});
    if (threadIdx.x == 0) storage.total = total;
    __syncthreads();
    RowGradient grad;
    SavedRow recompute{};
    if constexpr (Saved) {
      const RowStatistics saved = stats[it.row];
      recompute = saved_row(saved);
      grad = make_row_gradient(storage.total, static_cast<double>(saved.inv_rms), l.cols);
    } else {
      grad = make_row_gradient(storage.total, l.cols);
    }
    __syncthreads();  // every thread has read the total before the next item overwrites it
    tile_walk<true, Saved>(x + it.row * l.ld_x + it.begin, Saved ? nullptr : y + it.row * l.ld_y + it.begin,
                           dy + it.row * l.ld_dy + it.begin, dx + it.row * l.ld_dx + it.begin, it.size,
                           [&](float xv, float yv, float gv) { return grad.dx(xv, Saved ? recompute.y(xv) : yv, gv); });
  }
}

/// Launches (or describes) both kernels. `stats` null: y is read; else y is recomputed from the statistics.
template <class T>
Status launch(const T* x, const T* y, const RowStatistics* stats, const T* dy, T* dx, const BackwardLayout& l,
              void* workspace, int sm_count, const Launcher& launcher) {
  WorkspaceCarver carver(workspace);
  const Workspace w = Workspace::carve(carver, l.rows, l.cols);
  const ChunkGeometry geo = plan_chunks(l.rows, l.cols, sm_count);
  const unsigned grid = grid_for(l.rows * geo.chunks);
  const auto* partials = static_cast<const RowSums*>(w.partials);
  // Both passes read x and dy, and y unless the statistics stand in for it; the second writes dx.
  launcher.add_logical_bytes(l.rows * l.cols * static_cast<std::int64_t>(sizeof(T)) * (stats != nullptr ? 5 : 7));
  if (stats != nullptr) {
    RSS_TRY(launcher("backward::two_pass::saved::sums", sums<T, true>, grid, threads, 0, false, 0, x, y, stats, dy, l,
                     geo, w.partials));
    return launcher("backward::two_pass::saved::apply", apply<T, true>, grid, threads, 0, false, 0, x, y, stats, dy, dx,
                    l, geo, partials);
  }
  RSS_TRY(launcher("backward::two_pass::sums", sums<T, false>, grid, threads, 0, false, 0, x, y, stats, dy, l, geo,
                   w.partials));
  return launcher("backward::two_pass::apply", apply<T, false>, grid, threads, 0, false, 0, x, y, stats, dy, dx, l, geo,
                  partials);
}

}  // namespace rss::detail::backward::two_pass
