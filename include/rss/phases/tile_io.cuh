#pragma once
// Block-wide traversal of one tile of a row: 16-byte vector accesses over the aligned body, scalar
// accesses for the unaligned head and the tail, several vectors in flight per thread. Every phase
// reads and writes global memory through these, so alignment and odd widths are handled once.
#include <cstdint>

#include "rss/storage.cuh"

namespace rss::detail {

/// Vectors each thread loads before it uses the first: enough independent loads in flight to cover
/// HBM latency without spilling.
inline constexpr int loads_in_flight = 4;

template <class T>
struct alignas(16) Vector {
  T v[vector_width<T>];
};

/// One 16-byte access. Copying a Vector<T> directly lets the compiler split it into element accesses
/// (seen for fp32 and bf16 stores in the PTX), and so does a plain uint4 store of memcpy'd bits;
/// __stwb (st.global.wb, the default write policy) is always one 128-bit store.
template <class T>
__device__ __forceinline__ Vector<T> load_vector(const T* p) {
  const uint4 bits = *reinterpret_cast<const uint4*>(p);
  Vector<T> v;
  memcpy(&v, &bits, sizeof bits);
  return v;
}

template <class T>
__device__ __forceinline__ void store_vector(T* p, const Vector<T>& v) {
  uint4 bits;
  memcpy(&bits, &v, sizeof bits);
  __stwb(reinterpret_cast<uint4*>(p), bits);
}

/// An access's L2 eviction policy (PTX createpolicy), for bytes whose reuse the program knows: NoL2Hint is the
/// default policy, L2Hint one made by createpolicy (evict_first: read or written once; evict_last: read again
/// soon). The accesses below take either, so a caller passes a hint without a second code path.
struct NoL2Hint {};
struct L2Hint {
  std::uint64_t policy;
  __device__ __forceinline__ static L2Hint evict_first() {
    L2Hint h;
    asm volatile("createpolicy.fractional.L2::evict_first.b64 %0, 1.0;" : "=l"(h.policy));
    return h;
  }
  __device__ __forceinline__ static L2Hint evict_last() {
    L2Hint h;
    asm volatile("createpolicy.fractional.L2::evict_last.b64 %0, 1.0;" : "=l"(h.policy));
    return h;
  }
};

template <class T>
__device__ __forceinline__ Vector<T> load_vector(const T* p, NoL2Hint) {
  return load_vector(p);
}
/// Volatile: two hinted loads of one address (a phase's and a later phase's) must not merge.
template <class T>
__device__ __forceinline__ Vector<T> load_vector(const T* p, L2Hint hint) {
  uint4 bits;
  asm volatile("ld.global.L2::cache_hint.v4.u32 {%0, %1, %2, %3}, [%4], %5;"
               : "=r"(bits.x), "=r"(bits.y), "=r"(bits.z), "=r"(bits.w)
               : "l"(p), "l"(hint.policy)
               : "memory");
  Vector<T> v;
  memcpy(&v, &bits, sizeof bits);
  return v;
}

template <class T>
__device__ __forceinline__ void store_vector(T* p, const Vector<T>& v, NoL2Hint) {
  store_vector(p, v);
}
template <class T>
__device__ __forceinline__ void store_vector(T* p, const Vector<T>& v, L2Hint hint) {
  uint4 bits;
  memcpy(&bits, &v, sizeof bits);
  asm volatile("st.global.L2::cache_hint.v4.u32 [%0], {%1, %2, %3, %4}, %5;" ::"l"(p), "r"(bits.x), "r"(bits.y),
               "r"(bits.z), "r"(bits.w), "l"(hint.policy)
               : "memory");
}

/// Elements of p before the first 16-byte boundary (0 when p is aligned), capped at n.
template <class T>
__device__ __forceinline__ std::int64_t unaligned_head(const T* p, std::int64_t n) {
  constexpr int W = vector_width<T>;
  const auto misalign = static_cast<int>((reinterpret_cast<std::uintptr_t>(p) % 16) / sizeof(T));
  const std::int64_t head = misalign == 0 ? 0 : W - misalign;
  return head < n ? head : n;
}

/// Calls f(base, values, count, reload) for runs of the tile at x: values[0, count) are the elements base,
/// base + 1, ... converted to float, a whole 16-byte vector (count = W) over the aligned body and single
/// elements (count = 1) in the unaligned head and the tail; reload(w) reads the run into w again (for a
/// rarely taken path that should not keep `values` alive). Each element is in exactly one thread's run.
template <int Threads, class T, class F>
__device__ __forceinline__ void tile_for_each_run(const T* __restrict__ x, std::int64_t n, F&& f) {
  using Traits = StorageTraits<T>;
  constexpr int W = vector_width<T>;
  const int t = static_cast<int>(threadIdx.x);
  const auto read = [&](std::int64_t base, int count, float (&v)[W]) {
#pragma unroll
    for (int e = 0; e < W; ++e) v[e] = e < count ? Traits::to_float(x[base + e]) : 0.0f;
  };
  const auto single = [&](std::int64_t i) {
    float v[W];
    read(i, 1, v);
    f(i, v, 1, [&](float (&w)[W]) { read(i, 1, w); });
  };
  const auto whole = [&](std::int64_t base, const Vector<T>& vec) {
    float v[W];
#pragma unroll
    for (int e = 0; e < W; ++e) v[e] = Traits::to_float(vec.v[e]);
    f(base, v, W, [&](float (&w)[W]) { read(base, W, w); });
  };
  const std::int64_t head = unaligned_head(x, n);
  if (t < head) single(t);
  const std::int64_t vectors = (n - head) / W;
  const T* body = x + head;

  constexpr int Step = Threads * loads_in_flight;
  std::int64_t v0 = 0;
  for (; v0 + Step <= vectors; v0 += Step) {  // full rounds: loads_in_flight loads before any use
    Vector<T> buf[loads_in_flight];
#pragma unroll
    for (int u = 0; u < loads_in_flight; ++u) buf[u] = load_vector(body + (v0 + u * Threads + t) * W);
#pragma unroll
    for (int u = 0; u < loads_in_flight; ++u) whole(head + (v0 + u * Threads + t) * W, buf[u]);
  }
  for (std::int64_t v = v0 + t; v < vectors; v += Threads) whole(head + v * W, load_vector(body + v * W));
  for (std::int64_t i = head + vectors * W + t; i < n; i += Threads) single(i);
}

/// Calls f(i, value) for every element i in [0, n) of the tile at x, value converted to float.
/// Each element is visited by exactly one thread of the block.
template <int Threads, class T, class F>
__device__ __forceinline__ void tile_for_each(const T* __restrict__ x, std::int64_t n, F&& f) {
  tile_for_each_run<Threads>(x, n, [&](std::int64_t base, const float (&v)[vector_width<T>], int count, auto&&) {
#pragma unroll
    for (int e = 0; e < vector_width<T>; ++e)
      if (e < count) f(base + e, v[e]);
  });
}

/// Writes y[i] = g(i) for every i in [0, n) of the tile at y, converting from float.
template <int Threads, class T, class G>
__device__ __forceinline__ void tile_generate(T* __restrict__ y, std::int64_t n, G&& g) {
  using Traits = StorageTraits<T>;
  constexpr int W = vector_width<T>;
  const int t = static_cast<int>(threadIdx.x);
  const std::int64_t head = unaligned_head(y, n);
  if (t < head) y[t] = Traits::from_float(g(std::int64_t{t}));
  const std::int64_t vectors = (n - head) / W;
  T* body = y + head;
  for (std::int64_t v = t; v < vectors; v += Threads) {
    Vector<T> vec;
    const std::int64_t base = head + v * W;
#pragma unroll
    for (int e = 0; e < W; ++e) vec.v[e] = Traits::from_float(g(base + e));
    store_vector(body + v * W, vec);
  }
  for (std::int64_t i = head + vectors * W + t; i < n; i += Threads) y[i] = Traits::from_float(g(i));
}

/// Writes y[i] = f(x[i]) for every i in [0, n). Vector loads and stores when x and y share their
/// alignment (the usual case); otherwise vector loads and scalar stores.
/// In place (x == y) is allowed: each element is read and then written by the same thread.
template <int Threads, class T, class F>
__device__ __forceinline__ void tile_transform(const T* x, T* y, std::int64_t n,
                                               F&& f) {
  using Traits = StorageTraits<T>;
  constexpr int W = vector_width<T>;
  if (unaligned_head(x, n) != unaligned_head(y, n)) {
    tile_for_each<Threads>(x, n, [&](std::int64_t i, float v) { y[i] = Traits::from_float(f(v)); });
    return;
  }
  const int t = static_cast<int>(threadIdx.x);
  const std::int64_t head = unaligned_head(x, n);
  if (t < head) y[t] = Traits::from_float(f(Traits::to_float(x[t])));
  const std::int64_t vectors = (n - head) / W;
  const T* in = x + head;
  T* out = y + head;

  constexpr int Step = Threads * loads_in_flight;
  std::int64_t v0 = 0;
  for (; v0 + Step <= vectors; v0 += Step) {
    Vector<T> buf[loads_in_flight];
#pragma unroll
    for (int u = 0; u < loads_in_flight; ++u) buf[u] = load_vector(in + (v0 + u * Threads + t) * W);
#pragma unroll
    for (int u = 0; u < loads_in_flight; ++u) {
#pragma unroll
      for (int e = 0; e < W; ++e) buf[u].v[e] = Traits::from_float(f(Traits::to_float(buf[u].v[e])));
      store_vector(out + (v0 + u * Threads + t) * W, buf[u]);
    }
  }
  for (std::int64_t v = v0 + t; v < vectors; v += Threads) {
    Vector<T> vec = load_vector(in + v * W);
#pragma unroll
    for (int e = 0; e < W; ++e) vec.v[e] = Traits::from_float(f(Traits::to_float(vec.v[e])));
    store_vector(out + v * W, vec);
  }
  for (std::int64_t i = head + vectors * W + t; i < n; i += Threads)
    y[i] = Traits::from_float(f(Traits::to_float(x[i])));
}

}  // namespace rss::detail
