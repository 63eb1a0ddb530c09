#pragma once
// Phase 3: y = exp(r (x - m)) / sum, from x (exponentials recomputed) or from a retained tile.
#include <cstdint>

#include "rss/phases/row_stats.cuh"
#include "rss/phases/tile_io.cuh"

namespace rss {

template <int Threads>
struct BlockNormalize {
  /// y[i] = exp(r (x[i] - m)) * inv_sum over the tile: x is read again and the exponential recomputed.
  template <class T>
  __device__ static void tile(const T* x, T* y, std::int64_t n, const RowScale& scale, float inv_sum) {
    detail::tile_transform<Threads>(x, y, n, [&](float v) { return scale.exp_of(v) * inv_sum; });
  }

  /// y[i] = exps[i] * inv_sum from a tile of exponentials retained in shared memory.
  template <class T>
  __device__ static void retained_tile(const float* exps, T* y, std::int64_t n, float inv_sum) {
    detail::tile_generate<Threads>(y, n, [&](std::int64_t i) { return exps[i] * inv_sum; });
  }
};

}  // namespace rss
