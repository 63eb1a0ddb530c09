#pragma once
// The backward's row program for the row agent (rss/agent/row_agent.cuh), register residence: x, y (or
// the row's saved statistics, to recompute y) and dy in; the row sums (sum x^2, c, p, q) -> combine, one
// round a row; dx out from the registers. x, y and dy are read once and dx written once.
#include <cstdint>

#include "rss/agent/cluster_combine.cuh"
#include "rss/backward/layout.hpp"
#include "rss/backward/row_sums.cuh"
#include "rss/planner/row_split.hpp"
#include "rss/storage.cuh"
#include "rss/types.hpp"

namespace rss::detail::backward {

template <class T>
struct BackwardParams {
  const T* x;
  const T* y;                  // ReadsY
  const RowStatistics* stats;  // RecomputesY
  const T* dy;
  T* dx;
  BackwardLayout layout;
};

/// Saved state (a): y is read from memory.
struct ReadsY {
  static constexpr int arrays_held = 3;  // x, y, dy
  template <class Share, class T>
  struct Source {
    typename Share::Held y;

    __device__ Source(const Share& share, const BackwardParams<T>& p, std::int64_t row, std::int64_t begin)
        : y(share.load(p.y + row * p.layout.ld_y + begin)) {}
    __device__ void prepare() {}
    __device__ float at(const typename Share::Held&, int u, int e) const { return y.at(u, e); }
    template <class Sums>
    __device__ void add(Sums& acc, float x, float y_value, float g) const { acc.add(x, y_value, g); }
    __device__ RowGradient gradient(const RowSums& s, std::int64_t cols) const { return make_row_gradient(s, cols); }
  };
};

/// Saved state (b): y recomputed from x and the row's statistics, r taken from them (no sum of squares).
struct RecomputesY {
  static constexpr int arrays_held = 2;  // x, dy
  template <class Share, class T>
  struct Source {
    RowStatistics saved;
    SavedRow recompute{};

    __device__ Source(const Share&, const BackwardParams<T>& p, std::int64_t row, std::int64_t) : saved(p.stats[row]) {}
    /// After every load is issued: the division's slow path is a branch, and loads after it would wait for it
    /// (ptxas then issued dy's loads behind it: 7-9% on 4096 x 32768 bf16, bench/NOTES.md).
    __device__ void prepare() { recompute = saved_row(saved); }
    __device__ float at(const typename Share::Held& x, int u, int e) const { return recompute.y(x.at(u, e)); }
    template <class Sums>
    __device__ void add(Sums& acc, float x, float y_value, float g) const { acc.add_saved(x, y_value, g); }
    __device__ RowGradient gradient(const RowSums& s, std::int64_t cols) const {
      return make_row_gradient(s, static_cast<double>(saved.inv_rms), cols);
    }
  };
};

template <class T, class YSource>
struct BackwardRow {
  using Element = T;
  using Rounds = detail::Rounds<RowSums>;
  using Params = BackwardParams<T>;
  /// The register budget: each array's elements as stored (a 16-bit element is half a register: RegisterShare
  /// keeps whole words) plus 40 (pointers, strides, the double sums and their combine), as many blocks sharing an
  /// SM as that allows. Plus 32 where two 16-bit arrays of 16 or more elements a thread are held without bounds
  /// tests (from saved statistics, `vectors`): 256 x 16 at 48 registers (five blocks per SM), 256 x 32 at 64 (four),
  /// 512 x 32 at 64 (two, so that 32 rows of 128256 run in one wave), spill-free with the host's row stride and
  /// 12-20% faster on 16384 x 8192, 4096 x 32768, 32 x 128256 and 64 x 131072 (bench/NOTES.md); the checked
  /// kernels spill there (28 bytes) and keep plus 40. fp32 gets the blocks per SM that ptxas chose unbounded
  /// (which the backward pilot measured), and ptxas spills nowhere but in fp32's 512 x 32 reading y: 96 values a
  /// thread do not fit the 128 registers of a 512-thread block, and leaving it out costs rows of 65537-131072
  /// elements read with y 17-41% (two_pass instead; bench/NOTES.md), so it is on the allowed list
  /// (tests/spills_allowed.txt).
  template <int Threads, int Elems, Fit F>
  static constexpr int min_blocks_per_sm = register_budget_blocks(
      Threads, YSource::arrays_held * Elems * static_cast<int>(sizeof(T)) / 4 +
                   (sizeof(T) == 2 && YSource::arrays_held == 2 && F != Fit::checked && Elems >= 16 ? 32 : 40));
  /// The tile kernels' register budget: the one ptxas chooses under the block's own bound.
  template <int Threads, Fit F>
  static constexpr int tile_min_blocks_per_sm = 1;
  /// The row loop's stride from the host (rss/agent/row_agent.cuh): computed in the kernel, the 16-bit kernels of
  /// 32 elements at 64 registers spilled 4-8 bytes.
  static constexpr bool host_row_stride = true;

  template <class Share, class Combine>
  __device__ __forceinline__ static void row(const Params& p, std::int64_t row, std::int64_t begin, const Share& share,
                                             Combine& combine, bool) {
    using Traits = StorageTraits<T>;
    const BackwardLayout& l = p.layout;
    // All loads first: 3 V (recomputing y: 2 V) of them in flight per thread, then what derives from them.
    const auto x = share.load(p.x + row * l.ld_x + begin);
    typename YSource::template Source<Share, T> y(share, p, row, begin);
    const auto g = share.load(p.dy + row * l.ld_dy + begin);
    y.prepare();
    // The runs in fp32; if one overflowed (|x| or |g x| past fp32's squares), the share again in double.
    // One test per share, not per run (bench/NOTES.md: the forward's statistics).
    ThreadSums acc;
    bool finite = true;
    share.each_run_index([&](int u, int count) {
      RunSums run;
#pragma unroll
      for (int e = 0; e < Share::W; ++e)
        if (e < count) y.add(run, x.at(u, e), y.at(x, u, e), g.at(u, e));
      finite &= acc.add_run(run);
    });
    if (!finite) {
      acc = ThreadSums{};
      share.each_run_index([&](int u, int count) {
#pragma unroll
        for (int e = 0; e < Share::W; ++e)
          if (e < count) y.add(acc, x.at(u, e), y.at(x, u, e), g.at(u, e));
      });
    }
    const RowGradient grad = y.gradient(combine.template all_reduce<0>(acc.total(), CombineRowSums{}), l.cols);
    // In place (dx == dy) is safe: each thread stores only the vectors it loaded.
    share.store_index(p.dx + row * l.ld_dx + begin, [&](int u, int e) {
      return Traits::from_float(grad.dx(x.at(u, e), y.at(x, u, e), g.at(u, e)));
    });
  }
};

}  // namespace rss::detail::backward
