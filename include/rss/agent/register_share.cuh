#pragma once
// A block's share of a row held in registers: thread t holds Elems elements of each array it loads, as
// 16-byte vectors spaced Threads vectors apart (rss/planner/row_split.hpp's contract). The share is n
// elements of the row (n <= Threads * Elems); F says which bounds and alignment tests the instantiation
// makes. Every row program that keeps its row in registers loads, walks and stores through this.
#include <cstdint>
#include <cstring>
#include <type_traits>

#include "rss/phases/row_stats.cuh"
#include "rss/phases/tile_io.cuh"
#include "rss/planner/row_split.hpp"
#include "rss/storage.cuh"

namespace rss::detail {

template <class T, int Threads, int Elems, Fit F>
class RegisterShare {
 public:
  using Traits = StorageTraits<T>;
  static constexpr int W = vector_width<T>;
  static constexpr bool in_registers = true;  // row programs may choose by residence (the forward's scale)
  static constexpr int V = Elems / W;  // 16-byte vectors per thread
  static_assert(Elems % W == 0, "a thread holds whole 16-byte vectors");

  /// One array's share in this thread's registers: each vector as its four 32-bit words, an element converted
  /// where it is used (held as Vector<T>, 16-bit elements each took a register of their own, so the backward's
  /// 16-bit kernels spilled at three blocks per SM; bench/NOTES.md). `shift`: the grid the share was loaded on
  /// (load_aligned; 0 for the share's own grid).
  struct Held {
    unsigned w[V][4];
    int shift = 0;
    __device__ __forceinline__ float at(int u, int e) const { return element_of_word<T>(w[u][e * sizeof(T) / 4], e); }
  };
  /// A value per element of the share, kept in registers (0 past the end of the share), on Held's grid.
  struct Kept {
    float v[V][W];
    int shift = 0;
  };

  __device__ explicit RegisterShare(std::int64_t n)
      : n_(n), t_(static_cast<int>(threadIdx.x)),
        held_(F == Fit::vectors ? static_cast<int>((n / W - t_ + Threads - 1) / Threads) : V) {}

  /// Loads this thread's elements of `row` (the share's first element), all V vectors in flight at once, on
  /// the share's own grid: thread t's vector u holds elements (u Threads + t) W ... + W - 1. A checked share of
  /// a row that is not 16-byte aligned is then read element by element. Programs that hold several arrays
  /// use this grid for all of them (their elements must meet in the same registers). `hint`: the whole vectors'
  /// L2 policy (rss/phases/tile_io.cuh).
  template <class Hint = NoL2Hint>
  __device__ __forceinline__ Held load(const T* row, Hint hint = {}) const {
    return load_on(row, 0, F != Fit::checked || aligned(row), hint);
  }

  /// As load, for a program that holds one array: a checked share of a misaligned row is loaded on the row's
  /// aligned grid, so that all but its first and last vectors are whole 16-byte loads. On that grid (shift s,
  /// the row's misalignment in elements) thread 0's first vector holds elements 0 ... W - s - 1 and every
  /// other vector elements (u Threads + t) W - s ... + W - 1; it needs n + s <= Threads * Elems (else the
  /// share's own grid, element by element). A misaligned row read element by element ran at 4.1x a memcpy
  /// (8192 x 4101 bf16, bench/NOTES.md). Shares of two or more vectors a thread only (with one vector a thread
  /// the shifted grid's tests cost more than its whole-vector loads save: 16384 x 1023 bf16, 256 x 8: 85.5 ->
  /// 102.2 us), and fp32 shares of at most 16 elements (fp32's checked 32-element kernels spilled 26 bytes at
  /// their budget of 64 registers, and 12 at 80).
  __device__ __forceinline__ Held load_aligned(const T* row) const {
    if constexpr (F != Fit::checked || V < 2 || (sizeof(T) == 4 && Elems > 16)) {
      return load(row);
    } else {
      const auto address = reinterpret_cast<std::uintptr_t>(row);
      int shift = static_cast<int>(address % 16 / sizeof(T));
      // Where the shifted grid does not fit: the share's own grid, as load. One load_on call for both (two
      // inlined copies spilled 8 bytes in the 256 x 32 bf16 kernels).
      const bool fits = address % sizeof(T) == 0 && n_ + shift <= static_cast<std::int64_t>(Threads) * Elems;
      if (!fits) shift = 0;
      return load_on(row, shift, fits || address % 16 == 0, NoL2Hint{});
    }
  }

  /// f(u, count) for every 16-byte vector u this thread holds on the grid of `shift`: its elements e < count
  /// are in the share (count is W but in a checked share's first and last vectors).
  template <class Fn>
  __device__ __forceinline__ void each_run_index(Fn&& f, int shift = 0) const {
#pragma unroll
    for (int u = 0; u < V; ++u) {
      if constexpr (F == Fit::checked) {
        const std::int64_t left = n_ - index(u, 0, shift);
        const int width = head(u, shift) ? W - shift : W;
        if (left > 0) f(u, left < width ? static_cast<int>(left) : width);
      } else {
        if (vector_valid(u, 0)) f(u, W);
      }
    }
  }

  /// The share's statistics (maximum, sum of squares): its runs are still in registers, so one overflow test
  /// for all of them (RowStatsPartial::add_part).
  __device__ __forceinline__ RowStatsPartial statistics(const Held& h) const {
    RowStatsPartial s = RowStatsPartial::identity();
    s.add_part([&](auto&& f) {
      each_run_index([&](int u, int count) {
        float v[W];
#pragma unroll
        for (int e = 0; e < W; ++e) v[e] = h.at(u, e);
        f(v, count);
      }, h.shift);
    });
    return s;
  }

  /// f(x) of every element of `h`, kept in registers.
  template <class Fn>
  __device__ __forceinline__ Kept keep(const Held& h, Fn&& f) const {
    Kept k;
    k.shift = h.shift;
#pragma unroll
    for (int u = 0; u < V; ++u) {
#pragma unroll
      for (int e = 0; e < W; ++e) k.v[u][e] = valid(u, e, h.shift) ? f(h.at(u, e)) : 0.0f;
    }
    return k;
  }

  __device__ __forceinline__ float sum(const Kept& k) const {
    float s = 0.0f;
#pragma unroll
    for (int u = 0; u < V; ++u) {
#pragma unroll
      for (int e = 0; e < W; ++e) s += k.v[u][e];
    }
    return s;
  }

  /// row[i] = out(u, e) (a T) for every element of the share, on the grid of `shift`: whole vectors where
  /// `row` is misaligned by exactly that shift (in place, or x and y with the same layout), else element by
  /// element. In place is safe: each thread stores only the elements it loaded. `hint`: the whole vectors' L2
  /// policy.
  template <class Out, class Hint = NoL2Hint>
  __device__ __forceinline__ void store_index(T* row, Out&& out, int shift = 0, Hint hint = {}) const {
    const bool vectors =
        F != Fit::checked || reinterpret_cast<std::uintptr_t>(row) % 16 == static_cast<std::uintptr_t>(shift) * sizeof(T);
#pragma unroll
    for (int u = 0; u < V; ++u) {
      Vector<T> vec;
#pragma unroll
      for (int e = 0; e < W; ++e) vec.v[e] = out(u, e);
      if (vectors && vector_valid(u, shift)) {
        store_vector(row + index(u, 0, shift), vec, hint);
      } else {
#pragma unroll
        for (int e = 0; e < W; ++e)
          if (valid(u, e, shift)) row[index(u, e, shift)] = vec.v[e];
      }
    }
  }

  /// row[i] = g(k_i) for every kept value.
  template <class G>
  __device__ __forceinline__ void store(T* row, const Kept& k, G&& g) const {
    store_index(row, [&](int u, int e) { return Traits::from_float(g(k.v[u][e])); }, k.shift);
  }

 private:
  /// The share's elements on the grid of `shift`, whole vectors where `vectors` and the vector is in the share.
  template <class Hint>
  __device__ __forceinline__ Held load_on(const T* row, int shift, bool vectors, Hint hint) const {
    Held h;
    h.shift = shift;
#pragma unroll
    for (int u = 0; u < V; ++u) {
      if (vectors && vector_valid(u, shift)) {  // on the grid of the row's misalignment: 16-byte aligned
        const Vector<T> vec = load_vector(row + index(u, 0, shift), hint);
        memcpy(h.w[u], &vec, sizeof vec);
      } else {
#pragma unroll
        for (int i = 0; i < 4; ++i) h.w[u][i] = 0u;
        if constexpr (F == Fit::checked) {
#pragma unroll
          for (int e = 0; e < W; ++e) {
            if (valid(u, e, shift)) h.w[u][e * sizeof(T) / 4] |= bits_of(row[index(u, e, shift)]) << (8 * (e * sizeof(T) % 4));
          }
        }
      }
    }
    return h;
  }

  /// An element's bits in the low end of a word.
  __device__ static unsigned bits_of(T v) {
    if constexpr (sizeof(T) == 4) {
      return __float_as_uint(v);
    } else {
      unsigned short b;
      memcpy(&b, &v, sizeof b);
      return b;
    }
  }

  /// The element that thread t's vector u, element e holds on the grid of `shift` (load_aligned): thread 0's
  /// first vector starts at element 0, every other one s elements before its place on the share's own grid.
  __device__ __forceinline__ int index(int u, int e, int shift) const {
    // u is a constant of the unrolled loops: past u = 0 this is one per-thread base plus a constant.
    return (u == 0 && t_ == 0 ? 0 : (u * Threads + t_) * W - shift) + e;  // < Threads * Elems
  }
  /// Thread 0's first vector on a shifted grid: W - shift elements.
  __device__ __forceinline__ bool head(int u, int shift) const { return shift > 0 && u == 0 && t_ == 0; }
  __device__ __forceinline__ bool vector_valid(int u, int shift) const {
    if constexpr (F == Fit::exact) return true;
    else if constexpr (F == Fit::vectors) return u < held_;
    else return !head(u, shift) && index(u, W - 1, shift) < n_;
  }
  __device__ __forceinline__ bool valid(int u, int e, int shift) const {
    if constexpr (F == Fit::checked) return index(u, e, shift) < n_ && (!head(u, shift) || e < W - shift);
    else return vector_valid(u, 0);
  }
  __device__ static bool aligned(const void* p) { return reinterpret_cast<std::uintptr_t>(p) % 16 == 0; }

  std::int64_t n_;
  int t_;
  int held_;  // Fit::vectors: whole vectors this thread holds
};

}  // namespace rss::detail
