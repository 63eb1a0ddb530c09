#pragma once
// Phase 2: the exponentials exp(r (x - m)) of a tile and their sum, either recomputed from x in
// global memory or computed in place over a tile retained in shared memory.
#include <cstdint>

#include "rss/phases/block_reduce.cuh"
#include "rss/phases/row_stats.cuh"
#include "rss/phases/tile_io.cuh"

namespace rss {

struct SumFloat {
  __host__ __device__ float operator()(float a, float b) const { return a + b; }
};

template <int Threads>
struct BlockExpSum {
  using AllReduce = detail::BlockAllReduce<float, Threads>;
  using TempStorage = typename AllReduce::TempStorage;

  /// Sum of exp(r (x_i - m)) over the tile x[0, n), returned to every thread.
  template <class T>
  __device__ static float tile(const T* x, std::int64_t n, const RowScale& scale, TempStorage& storage) {
    float acc = 0.0f;
    detail::tile_for_each<Threads>(x, n, [&](std::int64_t, float v) { acc += scale.exp_of(v); });
    return AllReduce::all_reduce(acc, SumFloat{}, storage);
  }

  /// Replaces the retained tile values by their exponentials and returns their sum to every thread.
  /// The caller has synchronised the block since the tile was written.
  __device__ static float retained_tile(float* tile, std::int64_t n, const RowScale& scale, TempStorage& storage) {
    float acc = 0.0f;
    for (std::int64_t i = threadIdx.x; i < n; i += Threads) {
      const float e = scale.exp_of(tile[i]);
      tile[i] = e;
      acc += e;
    }
    return AllReduce::all_reduce(acc, SumFloat{}, storage);  // its barrier also publishes tile[]
  }

  /// Combines `count` partial sums written by other blocks, returned to every thread. Each thread's
  /// running sum is a double: one row can have hundreds of thousands of partials.
  __device__ static float combine(const float* partials, int count, TempStorage& storage) {
    double acc = 0.0;
    for (int i = static_cast<int>(threadIdx.x); i < count; i += Threads) acc += __ldcg(&partials[i]);
    return AllReduce::all_reduce(static_cast<float>(acc), SumFloat{}, storage);
  }
};

/// Shared scratch of a kernel that runs phase 1's and phase 2's block reductions one after the other.
template <int Threads>
union PhaseScratch {
  typename BlockRowStats<Threads>::TempStorage stats;
  typename BlockExpSum<Threads>::TempStorage sum;
};

}  // namespace rss
