#pragma once
// A block's share of a row held in shared memory, as stored: a tile of n elements that the row agent has
// loaded (the copy engine, or the block element by element) before the row program runs. It offers the
// register share's walk (statistics / keep / sum / store), so one row program serves both residences; keep()
// holds nothing and the store pass recomputes the value: the SM's arithmetic affords that while memory
// bounds the kernel, and the registers it saves let more blocks, and so more loads, share an SM.
#include <cstdint>

#include "rss/phases/row_stats.cuh"
#include "rss/phases/tile_io.cuh"
#include "rss/planner/row_split.hpp"
#include "rss/storage.cuh"

namespace rss::detail {

/// F is checked or vectors: the passes test per vector either way, so exact would save nothing.
template <class T, int Threads, Fit F>
class TileShare {
 public:
  using Traits = StorageTraits<T>;
  static constexpr int W = vector_width<T>;
  static constexpr bool in_registers = false;  // row programs may choose by residence (the forward's scale)
  static_assert(F != Fit::exact, "a tile is walked by vectors with a bounds test each");

  /// The tile: 16-byte aligned, n elements.
  struct Held {
    const T* tile;
  };
  /// A value per element, recomputed where it is used.
  template <class Fn>
  struct Kept {
    Held held;
    Fn f;
  };

  __device__ TileShare(const T* tile, int n)
      : tile_(tile), vectors_(n / W), tail_index_(n / W * W + static_cast<int>(threadIdx.x)),
        has_tail_(F == Fit::checked && tail_index_ < n) {}

  /// The tile the agent loaded: `row` is where it came from, not read again.
  __device__ __forceinline__ Held load(const T*) const { return {tile_}; }
  /// The same: the tile has one grid (RegisterShare's load_aligned chooses between two).
  __device__ __forceinline__ Held load_aligned(const T* row) const { return load(row); }

  /// The tile's statistics (maximum, sum of squares) over the 16-byte vectors this thread walks, then its tail
  /// element; a run that overflows fp32 is read again from the tile at once. One test for the whole walk
  /// (as in registers) walked the tile twice in the code, and ptxas then gave fp32 512-thread tiles 64
  /// registers instead of 32.
  __device__ __forceinline__ RowStatsPartial statistics(const Held& h) const {
    RowStatsPartial s = RowStatsPartial::identity();
    const auto read = [&](int first, int count, float (&w)[W]) {
#pragma unroll
      for (int e = 0; e < W; ++e) w[e] = e < count ? Traits::to_float(h.tile[first + e]) : 0.0f;
    };
#pragma unroll 4
    for (int i = static_cast<int>(threadIdx.x); i < vectors_; i += Threads) {
      float v[W];
      vector_floats(h, i, v);
      s.add_run(v, W, [&](float (&w)[W]) { read(i * W, W, w); });
    }
    if (has_tail_) {
      float v[W];
      read(tail_index_, 1, v);
      s.add_run(v, 1, [&](float (&w)[W]) { read(tail_index_, 1, w); });
    }
    return s;
  }

  template <class Fn>
  __device__ __forceinline__ Kept<Fn> keep(const Held& h, Fn f) const {
    return {h, f};
  }

  template <class Fn>
  __device__ __forceinline__ float sum(const Kept<Fn>& k) const {
    float s = 0.0f;
    walk(k.held, [&](int, float x) { s += k.f(x); });
    return s;
  }

  /// row[i] = g(f(x_i)) for every element of the tile.
  template <class Fn, class G>
  __device__ __forceinline__ void store(T* row, const Kept<Fn>& k, G&& g) const {
    const auto out = [&](float x) { return Traits::from_float(g(k.f(x))); };
    const bool vectors = F != Fit::checked || reinterpret_cast<std::uintptr_t>(row) % 16 == 0;
#pragma unroll 4
    for (int i = static_cast<int>(threadIdx.x); i < vectors_; i += Threads) {
      float v[W];
      vector_floats(k.held, i, v);
      Vector<T> o;
#pragma unroll
      for (int e = 0; e < W; ++e) o.v[e] = out(v[e]);
      if (vectors) {
        store_vector(row + i * W, o);
      } else {
#pragma unroll
        for (int e = 0; e < W; ++e) row[i * W + e] = o.v[e];
      }
    }
    if (has_tail_) row[tail_index_] = out(Traits::to_float(k.held.tile[tail_index_]));
  }

 private:
  /// Vector i of the tile as floats, from its four 32-bit words (element_of_word: one instruction an element).
  __device__ __forceinline__ static void vector_floats(const Held& h, int i, float (&v)[W]) {
    const uint4 q = reinterpret_cast<const uint4*>(h.tile)[i];
    const unsigned w[4] = {q.x, q.y, q.z, q.w};
#pragma unroll
    for (int e = 0; e < W; ++e) v[e] = element_of_word<T>(w[e * static_cast<int>(sizeof(T)) / 4], e);
  }

  /// f(i, x) over the whole vectors (all of the tile unless F is checked), then the tail: at most W - 1
  /// elements past them, one per thread.
  template <class Fn>
  __device__ __forceinline__ void walk(const Held& h, Fn&& f) const {
#pragma unroll 4
    for (int i = static_cast<int>(threadIdx.x); i < vectors_; i += Threads) {
      float v[W];
      vector_floats(h, i, v);
#pragma unroll
      for (int e = 0; e < W; ++e) f(i * W + e, v[e]);
    }
    if (has_tail_) f(tail_index_, Traits::to_float(h.tile[tail_index_]));
  }

  const T* tile_;
  int vectors_;
  int tail_index_;
  bool has_tail_;
};

}  // namespace rss::detail
