#pragma once
// CPU reference of the gradient of rms_scaled_softmax in double precision. Plain C++17, no CUDA.
//
// Softmax ignores a per-row shift, so y = softmax(r x) and the maximum drops out of the gradient.
// With g = dL/dy, N = cols and r = 1 / sqrt(mean x^2 + 1e-5):
//   c = sum g y,  p = sum y g x,  q = sum y x
//   dx = r y (g - c) - (r^3 / N) x (p - c q)
// (delta = y (g - c) is the ordinary softmax backward of z = r x; delta . x = p - c q; dr/dx = -r^3 x / N.)
// y is taken as given (it is what the forward stored), not recomputed from x.
#include <cmath>
#include <cstdint>

#include "rss/reference/cpu_reference.hpp"

namespace rss::reference {

/// The row sums the gradient needs, in double.
struct BackwardRowSums {
  double sum_sq = 0.0;  // sum x^2
  double c = 0.0;       // sum g y
  double p = 0.0;       // sum y g x
  double q = 0.0;       // sum y x
};

template <class In>
BackwardRowSums backward_row_sums(const In* x, const In* y, const In* dy, std::int64_t cols) {
  BackwardRowSums s;
  for (std::int64_t j = 0; j < cols; ++j) {
    const double xv = static_cast<double>(x[j]), yv = static_cast<double>(y[j]), gv = static_cast<double>(dy[j]);
    s.sum_sq += xv * xv;
    s.c += gv * yv;
    s.p += yv * gv * xv;
    s.q += yv * xv;
  }
  return s;
}

/// dx of one row, in double, from x, y (the forward's output) and dy. `In` is any type convertible to double.
template <class In>
void rms_scaled_softmax_backward_row(const In* x, const In* y, const In* dy, double* dx, std::int64_t cols) {
  if (cols <= 0) return;
  const BackwardRowSums s = backward_row_sums(x, y, dy, cols);
  const double n = static_cast<double>(cols);
  const double r = 1.0 / std::sqrt(s.sum_sq / n + epsilon);
  const double k = r * r * r / n * (s.p - s.c * s.q);
  for (std::int64_t j = 0; j < cols; ++j) {
    const double xv = static_cast<double>(x[j]), yv = static_cast<double>(y[j]), gv = static_cast<double>(dy[j]);
    dx[j] = r * yv * (gv - s.c) - k * xv;
  }
}

/// dx for row-major rows x cols matrices (leading dimension cols).
template <class In>
void rms_scaled_softmax_backward(const In* x, const In* y, const In* dy, double* dx, std::int64_t rows,
                                 std::int64_t cols) {
  for (std::int64_t i = 0; i < rows; ++i)
    rms_scaled_softmax_backward_row(x + i * cols, y + i * cols, dy + i * cols, dx + i * cols, cols);
}

/// The gradient's tolerance per row, ||dx - ref|| / max(||ref||, r ||y * dy||), on top of the error the storage
/// type makes when it rounds the exact answer, for y the forward's output for x. The scale is not ||ref||
/// alone: dx = r y (g - c) - (r^3 / N) x (p - c q) is a difference, and where its terms nearly cancel fp32
/// arithmetic errs relative to them. For any other y (the kernels assume no identity of a softmax output) the
/// scale is the terms' size, r ||y (g - c)|| and (r^3 / N) |p - c q| ||x||. With 16-bit storage the inputs are
/// exact (the reference reads the same stored values) and the output's rounding dominates.
constexpr double backward_tolerance(bool fp32_storage) { return fp32_storage ? 1e-5 : 1e-2; }

}  // namespace rss::reference
