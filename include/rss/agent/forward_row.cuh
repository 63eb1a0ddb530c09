#pragma once
// The forward's row program for the row agent (rss/agent/row_agent.cuh): statistics (max, sum of
// squares) -> combine -> the row's scale; exponentials and their sum -> combine; y = exp / sum. Two
// reduction rounds a row. The same program runs in registers or over a shared-memory tile, within a
// cluster (cluster_row) or across ranks (the sharded device path).
#include <cstdint>
#include <type_traits>

#include "rss/agent/cluster_combine.cuh"
#include "rss/phases/exp_sum.cuh"
#include "rss/phases/row_stats.cuh"
#include "rss/planner/row_split.hpp"
#include "rss/types.hpp"

namespace rss::detail {

template <class T>
struct ForwardParams {
  const T* x;
  T* y;
  RowStatistics* stats;  // WriteStatistics: stats[row]; else unused
  std::int64_t ld_x;
  std::int64_t ld_y;
  std::int64_t cols;  // the whole row's length (the mean of squares divides by it; a rank holds a share)
};

/// Where a row's statistics go. Their own instantiation, because the write costs registers in kernels tuned
/// to a register budget (ptxas: fp32 512 x 32 `vectors` 64 -> 78, one block per SM instead of two), and a
/// forward without statistics should not pay them.
struct NoStatistics {
  __device__ static void write(RowStatistics*, std::int64_t, bool, const RowStatistics&) {}
};
struct WriteStatistics {
  /// The cluster's first thread writes them, once per row, from the values that produced y.
  __device__ static void write(RowStatistics* stats, std::int64_t row, bool leader, const RowStatistics& s) {
    if (leader) stats[row] = s;
  }
};

template <class T, class Statistics>
struct ForwardRow {
  using Element = T;
  using Rounds = detail::Rounds<RowStatsPartial, float>;
  using Params = ForwardParams<T>;
  /// The register budget (forward_registers in rss/planner/row_split.hpp): enough that the row, its exponentials and the statistics' run
  /// sums fit without spills, and as many blocks share an SM as that allows (at most 2048 threads). Unbounded,
  /// ptxas gave fp32 512 x 32 `exact` 79 registers (one block per SM: 4096 x 32768 fp32 31% slower); a flat 64
  /// cost the short rows their occupancy (bf16 256 x 16 `exact` 56 registers, 4 blocks per SM instead of 5:
  /// 4096 x 4096 bf16 10% slower); 48 for every x 16 cost fp16 256 x 16 `exact` its sixth block (4096 x 4096
  /// fp16 4.6% slower). All in bench/NOTES.md.
  template <int Threads, int Elems, Fit F>
  static constexpr int min_blocks_per_sm = register_budget_blocks(
      Threads, forward_registers(Threads, Elems, F, sizeof(T), std::is_same_v<Statistics, WriteStatistics>));

  /// The tile kernels' budget (forward_tile_registers in rss/planner/row_split.hpp), the same way.
  template <int Threads, Fit F>
  static constexpr int tile_min_blocks_per_sm = register_budget_blocks(
      Threads, forward_tile_registers(F, sizeof(T), std::is_same_v<Statistics, WriteStatistics>));

  /// The row loop's stride computed in the kernel (rss/agent/row_agent.cuh): from the host, fp32 512 x 32 `exact`
  /// spilled 4 bytes at its 64 registers.
  static constexpr bool host_row_stride = false;

  __device__ static const T* held_row(const Params& p, std::int64_t row) { return p.x + row * p.ld_x; }

  template <class Share, class Combine>
  __device__ __forceinline__ static void row(const Params& p, std::int64_t row, std::int64_t begin, const Share& share,
                                             Combine& combine, bool leader) {
    // All loads first (V of them in flight per thread), on the row's aligned grid: the program holds x alone.
    const auto x = share.load_aligned(held_row(p, row) + begin);
    // 16-bit shares in registers leave the scale to the combine (one thread computes it where a block holds the
    // row alone: 16384 x 8192 16-bit 0.5-0.8% faster). Elsewhere every thread computes it: fp32's 16-element
    // kernels, at their register budgets, spilled with that and gained nothing, and the 16-bit tiles in clusters
    // were 2-3% slower with it compiled in (bench/NOTES.md).
    const auto scale_of = [&](const RowStatsPartial& s) { return make_row_scale(s, p.cols); };
    RowScale scale;
    if constexpr (sizeof(T) == 2 && Share::in_registers) {
      scale = combine.template all_reduce<0>(share.statistics(x), CombineRowStats{}, scale_of);
    } else {
      scale = scale_of(combine.template all_reduce<0>(share.statistics(x), CombineRowStats{}));
    }
    // In registers the exponentials stay in the registers that held x, as fp32 for every storage type.
    // Keeping 16-bit x as stored and recomputing the exponentials for the output saved nothing: ptxas kept
    // the converted floats alive anyway (bf16 512 x 32 `vectors`: 90 registers, 1 block per SM, against 64
    // and 2), and it paid every exponential twice (bench/NOTES.md). A tile recomputes them. What computes
    // exponentials is compiled once per form (RowScale::visit): in registers the keep alone (the rest once:
    // compiled twice, the 16- and 32-element kernels spilled), over a tile the whole second round.
    T* const y = p.y + row * p.ld_y + begin;
    float total;
    if constexpr (Share::in_registers) {
      const auto exps = scale.visit([&](const auto& exp_of) { return share.keep(x, exp_of); });
      total = combine.template all_reduce<1>(share.sum(exps), SumFloat{});
      const float inv_sum = 1.0f / total;
      share.store(y, exps, [&](float e) { return e * inv_sum; });
    } else {
      total = scale.visit([&](const auto& exp_of) {
        const auto exps = share.keep(x, exp_of);
        const float sum = combine.template all_reduce<1>(share.sum(exps), SumFloat{});
        const float inv_sum = 1.0f / sum;
        share.store(y, exps, [&](float e) { return e * inv_sum; });
        return sum;
      });
    }
    Statistics::write(p.stats, row, leader, {scale.max, scale.inv_rms, scale.true_sum(total)});
  }
};

}  // namespace rss::detail
