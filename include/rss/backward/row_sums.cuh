#pragma once
// The backward pass's one reduction round and its elementwise formula, shared by every backward strategy.
//
// With g = dy, N = cols, r = 1 / sqrt(mean x^2 + eps), c = sum g y, p = sum y g x, q = sum y x:
//   dx = r y (g - c) - (r^3 / N) x (p - c q) = r (y (g - c) - (r x) k),  k = r (p - c q) / N
// r and k are formed in double from double sums; the elementwise part is fp32. r x and k stay near 1
// whatever the scale of x (|r x| <= sqrt(N)), so neither underflows where r (p - c q) / N alone, or r^3,
// would for |x| beyond about 1e30.
#include <cmath>
#include <cstdint>

#include "rss/phases/row_stats.cuh"
#include "rss/types.hpp"

namespace rss {

namespace detail::backward {

/// Partial sums of part of a row. The sum of squares and p reach double per element or per run (an fp32
/// square overflows once |x| passes 1.8e19, an fp32 g y x once |g x| passes 3.4e38); c and q, bounded by
/// max |g| and max |x| for y a softmax output, accumulate in fp32 over one thread's few elements and in
/// double from there on.
struct RowSums {
  double sum_sq;
  double c;
  double p;
  double q;

  __host__ __device__ static RowSums identity() { return {0.0, 0.0, 0.0, 0.0}; }
};

struct CombineRowSums {
  __host__ __device__ RowSums operator()(const RowSums& a, const RowSums& b) const {
    return {a.sum_sq + b.sum_sq, a.c + b.c, a.p + b.p, a.q + b.q};
  }
};

/// The sums of one run of at most one 16-byte vector's elements, all in fp32 (relative error <= 7 u): the
/// register kernels add a run to ThreadSums once, instead of converting every element's square and g y x to
/// double (F2F.F64 runs on the pipe of the exponentials; bench/NOTES.md).
struct RunSums {
  float sum_sq = 0.0f, p = 0.0f, c = 0.0f, q = 0.0f;

  __device__ __forceinline__ void add(float x, float y, float g) {
    sum_sq = fmaf(x, x, sum_sq);
    add_saved(x, y, g);
  }
  __device__ __forceinline__ void add_saved(float x, float y, float g) {
    const float gy = g * y;
    c += gy;
    p = fmaf(gy, x, p);
    q = fmaf(y, x, q);
  }
};

/// One thread's running sums over its elements.
struct ThreadSums {
  double sum_sq = 0.0;
  double p = 0.0;
  float c = 0.0f, q = 0.0f;

  __device__ __forceinline__ void add(float x, float y, float g) {
    const double d = x;
    sum_sq = fma(d, d, sum_sq);
    add_saved(x, y, g);
  }
  /// The same without the sum of squares: r comes from the saved statistics.
  __device__ __forceinline__ void add_saved(float x, float y, float g) {
    const float gy = g * y;
    c += gy;
    p = fma(static_cast<double>(gy), static_cast<double>(x), p);
    q = fmaf(y, x, q);
  }
  /// Adds a run; false when it overflowed fp32 (the sums are then not finite and the caller adds its part
  /// again, element by element, from a fresh ThreadSums).
  __device__ __forceinline__ bool add_run(const RunSums& run) {
    sum_sq += static_cast<double>(run.sum_sq);
    p += static_cast<double>(run.p);
    c += run.c;
    q += run.q;
    return !isinf(run.sum_sq) && !isinf(run.p);
  }
  __device__ __forceinline__ RowSums total() const { return {sum_sq, c, p, q}; }
};

/// y recomputed from x and a row's saved statistics: the forward's exponentials (the same constants, derived
/// the same way from the same fp32 values), times the forward's 1 / sum.
struct SavedRow {
  RowScale scale;
  float inv_sum;

  __device__ __forceinline__ float y(float x) const { return scale.exp_of(x) * inv_sum; }
};

__host__ __device__ inline SavedRow saved_row(const RowStatistics& s) {
  return {row_scale_of(s.max, s.inv_rms), 1.0f / s.sum};
}

/// The row constants of dx = r (y (g - c) - (r x) k).
struct RowGradient {
  float r;
  float c;
  float k;

  __device__ __forceinline__ float dx(float x, float y, float g) const { return r * fmaf(-(r * x), k, y * (g - c)); }
};

inline constexpr double backward_epsilon = 1e-5;

/// The row constants from the sums and r (from the sum of squares, or saved by the forward).
__host__ __device__ inline RowGradient make_row_gradient(const RowSums& s, double r, std::int64_t cols) {
  const double k = r * (s.p - s.c * s.q) / static_cast<double>(cols);
  return {static_cast<float>(r), static_cast<float>(s.c), static_cast<float>(k)};
}

__host__ __device__ inline RowGradient make_row_gradient(const RowSums& s, std::int64_t cols) {
  return make_row_gradient(s, 1.0 / sqrt(s.sum_sq / static_cast<double>(cols) + backward_epsilon), cols);
}

}  // namespace detail::backward
}  // namespace rss
