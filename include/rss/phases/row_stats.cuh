#pragma once
// Phase 1: row statistics (maximum and sum of squares) of a tile, and their combination across
// the blocks that share a row. The result, RowScale, is what phases 2 and 3 need.
#include <cmath>
#include <cstdint>

#include "rss/phases/block_reduce.cuh"
#include "rss/phases/tile_io.cuh"

namespace rss {

/// Statistics of part of a row. Partials combine associatively, in any order. The sum of squares
/// accumulates in double: in fp32 it overflows once |x| passes about 1.8e19 / sqrt(cols), while every
/// finite fp32 square fits a double (FP64 throughput is not what bounds this memory-bound operator).
struct RowStatsPartial {
  float max;
  double sum_sq;

  __host__ __device__ static RowStatsPartial identity() { return {-INFINITY, 0.0}; }
  __host__ __device__ void add(float v) {
    max = fmaxf(max, v);
    const double d = v;
    sum_sq = fma(d, d, sum_sq);
  }
};

struct CombineRowStats {
  __host__ __device__ RowStatsPartial operator()(const RowStatsPartial& a, const RowStatsPartial& b) const {
    return {fmaxf(a.max, b.max), a.sum_sq + b.sum_sq};
  }
};

/// Row constants of phases 2 and 3: exp(r (x - m)) is evaluated as exp2(x * c + offset) with
/// c = r log2(e) and offset = -m c, one fused multiply-add and one exp2 per element.
struct RowScale {
  float max;
  float inv_rms;
  float exp2_scale;
  float exp2_offset;

  __device__ __forceinline__ float exp_of(float x) const { return exp2f(fmaf(x, exp2_scale, exp2_offset)); }
};

inline constexpr float rms_epsilon = 1e-5f;

/// r = 1 / sqrt(mean(x^2) + eps) > 0, so max(r x) = r max(x): the input maximum is subtracted first.
/// exp2_offset = -m c is formed in double: m c stays finite (|c m| <= log2(e) sqrt(cols)) but c alone
/// can be close to the fp32 denormal range when |x| approaches FLT_MAX.
__host__ __device__ inline RowScale make_row_scale(RowStatsPartial row, std::int64_t cols) {
  const double inv_rms = 1.0 / sqrt(row.sum_sq / static_cast<double>(cols) + static_cast<double>(rms_epsilon));
  const double scale = inv_rms * 1.4426950408889634;
  return {row.max, static_cast<float>(inv_rms), static_cast<float>(scale),
          static_cast<float>(-static_cast<double>(row.max) * scale)};
}

/// Block-scope building blocks of phase 1.
template <int Threads>
struct BlockRowStats {
  using AllReduce = detail::BlockAllReduce<RowStatsPartial, Threads>;
  using TempStorage = typename AllReduce::TempStorage;

  /// Statistics of the tile x[0, n), returned to every thread. When `retain` is not null, the tile is
  /// also copied to retain[0, n) as fp32 (the megakernel keeps it in shared memory for phase 2).
  template <class T>
  __device__ static RowStatsPartial tile(const T* x, std::int64_t n, TempStorage& storage,
                                         float* retain = nullptr) {
    RowStatsPartial acc = RowStatsPartial::identity();
    if (retain != nullptr) {
      detail::tile_for_each<Threads>(x, n, [&](std::int64_t i, float v) {
        acc.add(v);
        retain[i] = v;
      });
    } else {
      detail::tile_for_each<Threads>(x, n, [&](std::int64_t, float v) { acc.add(v); });
    }
    return AllReduce::all_reduce(acc, CombineRowStats{}, storage);
  }

  /// Combines `count` partials written by other blocks (read through L2: they were written by
  /// other multiprocessors), returned to every thread.
  __device__ static RowStatsPartial combine(const RowStatsPartial* partials, int count, TempStorage& storage) {
    RowStatsPartial acc = RowStatsPartial::identity();
    for (int i = static_cast<int>(threadIdx.x); i < count; i += Threads) {
      acc = CombineRowStats{}(acc, RowStatsPartial{__ldcg(&partials[i].max), __ldcg(&partials[i].sum_sq)});
    }
    return AllReduce::all_reduce(acc, CombineRowStats{}, storage);
  }
};

}  // namespace rss
