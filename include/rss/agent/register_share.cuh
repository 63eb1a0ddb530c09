#pragma once
// A block's share of a row held in registers: thread t holds Elems elements of each array it loads, as
// 16-byte vectors spaced Threads vectors apart (rss/planner/row_split.hpp's contract). The share is n
// elements of the row (n <= Threads * Elems); F says which bounds and alignment tests the instantiation
// makes. Every row program that keeps its row in registers loads, walks and stores through this.
#include <cstdint>

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
  static constexpr int V = Elems / W;  // 16-byte vectors per thread
  static_assert(Elems % W == 0, "a thread holds whole 16-byte vectors");

  /// One array's share in this thread's registers.
  struct Held {
    Vector<T> v[V];
    __device__ __forceinline__ float at(int u, int e) const { return Traits::to_float(v[u].v[e]); }
  };
  /// A value per element of the share, kept in registers (0 past the end of the share).
  struct Kept {
    float v[V][W];
  };

  __device__ explicit RegisterShare(std::int64_t n)
      : n_(n), t_(static_cast<int>(threadIdx.x)),
        held_(F == Fit::vectors ? static_cast<int>((n / W - t_ + Threads - 1) / Threads) : V) {}

  /// Loads this thread's elements of `row` (the share's first element), all V vectors in flight at once.
  __device__ __forceinline__ Held load(const T* row) const {
    Held h;
    const bool vectors = F != Fit::checked || aligned(row);
#pragma unroll
    for (int u = 0; u < V; ++u) {
      if (vectors && vector_valid(u)) {
        h.v[u] = load_vector(row + index(u, 0));
      } else {
#pragma unroll
        for (int e = 0; e < W; ++e) h.v[u].v[e] = valid(u, e) ? row[index(u, e)] : Traits::from_float(0.0f);
      }
    }
    return h;
  }

  /// f(u, count) for every 16-byte vector u this thread holds: its elements e < count are in the share (count
  /// is W but in a checked share's last vector).
  template <class Fn>
  __device__ __forceinline__ void each_run_index(Fn&& f) const {
#pragma unroll
    for (int u = 0; u < V; ++u) {
      if constexpr (F == Fit::checked) {
        const std::int64_t left = n_ - index(u, 0);
        if (left > 0) f(u, left < W ? static_cast<int>(left) : W);
      } else {
        if (vector_valid(u)) f(u, W);
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
      });
    });
    return s;
  }

  /// f(x) of every element of `h`, kept in registers.
  template <class Fn>
  __device__ __forceinline__ Kept keep(const Held& h, Fn&& f) const {
    Kept k;
#pragma unroll
    for (int u = 0; u < V; ++u) {
#pragma unroll
      for (int e = 0; e < W; ++e) k.v[u][e] = valid(u, e) ? f(h.at(u, e)) : 0.0f;
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

  /// row[i] = out(u, e) (a T) for every element of the share. In place is safe: each thread stores only
  /// the vectors it loaded.
  template <class Out>
  __device__ __forceinline__ void store_index(T* row, Out&& out) const {
    const bool vectors = F != Fit::checked || aligned(row);
#pragma unroll
    for (int u = 0; u < V; ++u) {
      Vector<T> vec;
#pragma unroll
      for (int e = 0; e < W; ++e) vec.v[e] = out(u, e);
      if (vectors && vector_valid(u)) {
        store_vector(row + index(u, 0), vec);
      } else {
#pragma unroll
        for (int e = 0; e < W; ++e)
          if (valid(u, e)) row[index(u, e)] = vec.v[e];
      }
    }
  }

  /// row[i] = g(k_i) for every kept value.
  template <class G>
  __device__ __forceinline__ void store(T* row, const Kept& k, G&& g) const {
    store_index(row, [&](int u, int e) { return Traits::from_float(g(k.v[u][e])); });
  }

 private:
  __device__ __forceinline__ int index(int u, int e) const { return (u * Threads + t_) * W + e; }  // < Threads * Elems
  __device__ __forceinline__ bool vector_valid(int u) const {
    if constexpr (F == Fit::exact) return true;
    else if constexpr (F == Fit::vectors) return u < held_;
    else return index(u, W - 1) < n_;
  }
  __device__ __forceinline__ bool valid(int u, int e) const {
    if constexpr (F == Fit::checked) return index(u, e) < n_;
    else return vector_valid(u);
  }
  __device__ static bool aligned(const void* p) { return reinterpret_cast<std::uintptr_t>(p) % 16 == 0; }

  std::int64_t n_;
  int t_;
  int held_;  // Fit::vectors: whole vectors this thread holds
};

}  // namespace rss::detail
