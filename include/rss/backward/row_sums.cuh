#pragma once
// The backward pass's one reduction round and its elementwise formula, shared by every backward strategy.
//
// With g = dy, N = cols, r = 1 / sqrt(mean x^2 + eps), c = sum g y, p = sum y g x, q = sum y x:
//   dx = r y (g - c) - (r^3 / N) x (p - c q) = r (y (g - c) - x k),  k = r^2 (p - c q) / N
// r and k are formed in double from double sums; the elementwise part is fp32.
#include <cmath>
#include <cstdint>

namespace rss {
namespace detail::backward {

/// Partial sums of part of a row. The sum of squares accumulates in double per element, like the
/// forward's (an fp32 square overflows once |x| passes 1.8e19); c, p and q accumulate in fp32 over one
/// thread's few elements and in double from there on.
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

/// One thread's running sums over its elements.
struct ThreadSums {
  double sum_sq = 0.0;
  float c = 0.0f, p = 0.0f, q = 0.0f;

  __device__ __forceinline__ void add(float x, float y, float g) {
    const double d = x;
    sum_sq = fma(d, d, sum_sq);
    const float gy = g * y;
    c += gy;
    p = fmaf(gy, x, p);
    q = fmaf(y, x, q);
  }
  __device__ __forceinline__ RowSums total() const { return {sum_sq, c, p, q}; }
};

/// The row constants of dx = r (y (g - c) - x k).
struct RowGradient {
  float r;
  float c;
  float k;

  __device__ __forceinline__ float dx(float x, float y, float g) const { return r * (y * (g - c) - x * k); }
};

inline constexpr double backward_epsilon = 1e-5;

__host__ __device__ inline RowGradient make_row_gradient(const RowSums& s, std::int64_t cols) {
  const double n = static_cast<double>(cols);
  const double r = 1.0 / sqrt(s.sum_sq / n + backward_epsilon);
  const double k = r * r * (s.p - s.c * s.q) / n;
  return {static_cast<float>(r), static_cast<float>(s.c), static_cast<float>(k)};
}

}  // namespace detail::backward
}  // namespace rss
