#pragma once
// CPU reference of rms_scaled_softmax in double precision. Plain C++17: no CUDA needed, so host-only
// programs and the tests can include it.
//
//   m_i = max_j x_ij,  r_i = 1 / sqrt(mean_j x_ij^2 + 1e-5),
//   y_ij = exp(r_i (x_ij - m_i)) / sum_k exp(r_i (x_ik - m_i))
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>

namespace rss::reference {

inline constexpr double epsilon = 1e-5;

/// A row's statistics in double: y_j = exp(inv_rms (x_j - max)) / sum (what rss::RowStatistics holds).
struct RowStatistics {
  double max;
  double inv_rms;
  double sum;
};

/// The statistics of one row of `cols` > 0 elements. `x` is any type convertible to double.
template <class In>
RowStatistics row_statistics(const In* x, std::int64_t cols) {
  double max = -std::numeric_limits<double>::infinity();
  double sum_sq = 0.0;
  for (std::int64_t j = 0; j < cols; ++j) {
    const double v = static_cast<double>(x[j]);
    max = std::max(max, v);
    sum_sq += v * v;
  }
  const double r = 1.0 / std::sqrt(sum_sq / static_cast<double>(cols) + epsilon);
  double sum = 0.0;
  for (std::int64_t j = 0; j < cols; ++j) sum += std::exp(r * (static_cast<double>(x[j]) - max));
  return {max, r, sum};
}

/// y = rms_scaled_softmax(x) for one row, in double. `x` is any type convertible to double.
template <class In>
void rms_scaled_softmax_row(const In* x, double* y, std::int64_t cols) {
  if (cols <= 0) return;
  const RowStatistics s = row_statistics(x, cols);
  for (std::int64_t j = 0; j < cols; ++j) y[j] = std::exp(s.inv_rms * (static_cast<double>(x[j]) - s.max)) / s.sum;
}

/// y = rms_scaled_softmax(x) for a row-major rows x cols matrix.
template <class In>
void rms_scaled_softmax(const In* x, double* y, std::int64_t rows, std::int64_t cols) {
  for (std::int64_t i = 0; i < rows; ++i) rms_scaled_softmax_row(x + i * cols, y + i * cols, cols);
}

/// Relative error of one row, ||y - ref||_2 / ||ref||_2. NaN when y holds a NaN (an unwritten,
/// poisoned element), so `!(error <= tolerance)` catches it.
template <class Out>
double row_relative_error(const Out* y, const double* ref, std::int64_t cols) {
  double diff = 0.0, norm = 0.0;
  for (std::int64_t j = 0; j < cols; ++j) {
    const double d = static_cast<double>(y[j]) - ref[j];
    diff += d * d;
    norm += ref[j] * ref[j];
  }
  return std::sqrt(diff) / std::sqrt(norm);
}

/// Largest row_relative_error over all rows; NaN propagates.
template <class Out>
double max_row_relative_error(const Out* y, const double* ref, std::int64_t rows, std::int64_t cols) {
  double worst = 0.0;
  for (std::int64_t i = 0; i < rows; ++i) {
    const double e = row_relative_error(y + i * cols, ref + i * cols, cols);
    if (!(e <= worst)) worst = e;  // keeps NaN
  }
  return worst;
}

}  // namespace rss::reference
