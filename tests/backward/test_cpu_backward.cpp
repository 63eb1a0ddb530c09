// The CPU reference of the gradient against central finite differences of the forward reference, and
// the identities the gradient satisfies. Plain C++: runs everywhere.
#include <catch2/catch.hpp>

#include <cmath>
#include <cstdint>
#include <random>
#include <vector>

#include "rss/reference/cpu_backward.hpp"
#include "rss/reference/cpu_reference.hpp"
#include "support/random_input.hpp"

namespace {

/// L(x) = sum_j g_j y_j(x): its gradient is the backward pass of dy = g.
double loss(const std::vector<double>& x, const std::vector<double>& g) {
  std::vector<double> y(x.size());
  rss::reference::rms_scaled_softmax_row(x.data(), y.data(), static_cast<std::int64_t>(x.size()));
  double l = 0.0;
  for (std::size_t j = 0; j < x.size(); ++j) l += g[j] * y[j];
  return l;
}

struct Row {
  std::vector<double> x, y, g;
};

Row random_row(std::int64_t cols, double scale, std::uint64_t seed) {
  std::mt19937_64 gen(seed);
  std::uniform_real_distribution<double> u(-1.0, 1.0), offset(-0.5, 0.5);
  Row r{std::vector<double>(cols), std::vector<double>(cols), std::vector<double>(cols)};
  const double o = offset(gen);
  for (std::int64_t j = 0; j < cols; ++j) {
    r.x[j] = scale * (u(gen) + o);
    if (r.x[j] == 0.0) r.x[j] = scale * 1e-3;
    r.g[j] = u(gen);
  }
  rss::reference::rms_scaled_softmax_row(r.x.data(), r.y.data(), cols);
  return r;
}

double norm(const std::vector<double>& v) {
  double s = 0.0;
  for (const double e : v) s += e * e;
  return std::sqrt(s);
}

}  // namespace

TEST_CASE("reference gradient matches central finite differences of the forward reference", "[cpu][backward][reference]") {
  const std::uint64_t seed = rss_test::fresh_seed();
  INFO("seed " << seed);
  for (const std::int64_t cols : {2, 3, 7, 64, 513, 4096}) {
    for (const double scale : {0.01, 1.0, 30.0}) {
      INFO("cols " << cols << " scale " << scale);
      Row row = random_row(cols, scale, seed + static_cast<std::uint64_t>(cols) * 7 + static_cast<std::uint64_t>(scale * 100));
      std::vector<double> dx(cols);
      rss::reference::rms_scaled_softmax_backward_row(row.x.data(), row.y.data(), row.g.data(), dx.data(), cols);
      // Central differences, step relative to the row's RMS; every column for short rows, 64 spread ones for long ones.
      const double h = 1e-5 * scale;
      std::vector<double> fd, analytic;
      const std::int64_t step = cols <= 128 ? 1 : cols / 64;
      for (std::int64_t k = 0; k < cols; k += step) {
        std::vector<double> xp = row.x, xm = row.x;
        xp[k] += h;
        xm[k] -= h;
        fd.push_back((loss(xp, row.g) - loss(xm, row.g)) / (2 * h));
        analytic.push_back(dx[k]);
      }
      std::vector<double> diff(fd.size());
      for (std::size_t i = 0; i < fd.size(); ++i) diff[i] = analytic[i] - fd[i];
      const double error = norm(diff) / norm(fd);
      INFO("relative error " << error);
      CHECK(error < 1e-6);
    }
  }
}

TEST_CASE("reference gradient: sum dx is not zero, x . dx = r (delta . x) eps / (mean x^2 + eps)", "[cpu][backward][reference]") {
  const std::uint64_t seed = rss_test::fresh_seed();
  INFO("seed " << seed);
  bool some_sum_nonzero = false;
  for (const std::int64_t cols : {2, 17, 1000}) {
    for (const double scale : {0.001, 0.01, 1.0, 30.0}) {
      INFO("cols " << cols << " scale " << scale);
      const Row row = random_row(cols, scale, seed ^ static_cast<std::uint64_t>(cols * 1000 + scale * 1000));
      std::vector<double> dx(cols);
      rss::reference::rms_scaled_softmax_backward_row(row.x.data(), row.y.data(), row.g.data(), dx.data(), cols);
      double c = 0.0, sum_sq = 0.0, delta_x = 0.0, x_dx = 0.0, sum_dx = 0.0, mag = 0.0;
      for (std::int64_t j = 0; j < cols; ++j) c += row.g[j] * row.y[j];
      for (std::int64_t j = 0; j < cols; ++j) {
        sum_sq += row.x[j] * row.x[j];
        delta_x += row.y[j] * (row.g[j] - c) * row.x[j];
        x_dx += row.x[j] * dx[j];
        sum_dx += dx[j];
        mag += std::abs(row.x[j] * dx[j]);
      }
      const double mean_sq = sum_sq / static_cast<double>(cols);
      const double r = 1.0 / std::sqrt(mean_sq + rss::reference::epsilon);
      const double expected = r * delta_x * rss::reference::epsilon / (mean_sq + rss::reference::epsilon);
      CHECK(std::abs(x_dx - expected) <= 1e-9 * (mag + std::abs(r * delta_x)));
      double abs_sum = 0.0;
      for (const double d : dx) abs_sum += std::abs(d);
      if (std::abs(sum_dx) > 1e-3 * abs_sum) some_sum_nonzero = true;
    }
  }
  CHECK(some_sum_nonzero);  // unlike plain softmax, the gradient's row sum is not zero
}

TEST_CASE("reference gradient of a one-element row is zero (y is always 1)", "[cpu][backward][reference]") {
  const double x = 3.5, y = 1.0, g = -2.0;
  double dx = 42.0;
  rss::reference::rms_scaled_softmax_backward_row(&x, &y, &g, &dx, 1);
  CHECK(dx == 0.0);
}

TEST_CASE("reference gradient propagates NaN and infinity to the whole row", "[cpu][backward][reference][ieee]") {
  const std::int64_t cols = 8;
  std::vector<double> x(cols, 1.5), g(cols, 0.25), y(cols), dx(cols);
  x[3] = std::nan("");
  rss::reference::rms_scaled_softmax_row(x.data(), y.data(), cols);
  rss::reference::rms_scaled_softmax_backward_row(x.data(), y.data(), g.data(), dx.data(), cols);
  for (const double d : dx) CHECK(std::isnan(d));

  x.assign(cols, 1.5);
  x[2] = INFINITY;
  rss::reference::rms_scaled_softmax_row(x.data(), y.data(), cols);
  rss::reference::rms_scaled_softmax_backward_row(x.data(), y.data(), g.data(), dx.data(), cols);
  for (const double d : dx) CHECK(std::isnan(d));

  x.assign(cols, 1.5);
  for (std::int64_t j = 0; j < cols; ++j) x[j] += 0.1 * static_cast<double>(j);
  rss::reference::rms_scaled_softmax_row(x.data(), y.data(), cols);
  g[5] = INFINITY;  // positive x: p - c q = inf - inf
  rss::reference::rms_scaled_softmax_backward_row(x.data(), y.data(), g.data(), dx.data(), cols);
  for (const double d : dx) CHECK(std::isnan(d));
}
