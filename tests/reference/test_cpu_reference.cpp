// The CPU reference proved on hand-derived cases, and checked against the NumPy script.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <numeric>
#include <string>
#include <vector>

#include "rss/reference/cpu_reference.hpp"
#include "rss/reference/tolerance.hpp"
#include "support/random_input.hpp"

using rss::reference::rms_scaled_softmax;

TEST_CASE("a constant row gives a uniform row", "[reference]") {
  for (double c : {-3.0, 0.5, 7.0}) {
    const std::vector<double> x(10, c);
    std::vector<double> y(10);
    rms_scaled_softmax(x.data(), y.data(), 1, 10);
    for (double v : y) CHECK(v == Approx(0.1).epsilon(1e-14));
  }
}

TEST_CASE("one dominant value follows the closed form", "[reference]") {
  // x = (a, 0, 0, 0): r = 1/sqrt(a^2/4 + eps), y_0 = 1 / (1 + 3 exp(-r a)), y_j = exp(-r a) y_0.
  const double a = 100.0;
  const std::vector<double> x{a, 0.0, 0.0, 0.0};
  std::vector<double> y(4);
  rms_scaled_softmax(x.data(), y.data(), 1, 4);
  const double r = 1.0 / std::sqrt(a * a / 4.0 + 1e-5);
  const double y0 = 1.0 / (1.0 + 3.0 * std::exp(-r * a));
  CHECK(y[0] == Approx(y0).epsilon(1e-14));
  for (int j = 1; j < 4; ++j) CHECK(y[j] == Approx(std::exp(-r * a) * y0).epsilon(1e-14));
  CHECK(y[0] > y[1]);
}

TEST_CASE("each row sums to one", "[reference]") {
  const std::uint64_t seed = rss_test::fresh_seed();
  CAPTURE(seed);
  const std::int64_t rows = 17, cols = 1001;
  const auto x = rss_test::random_rows(rows, cols, seed);
  std::vector<double> y(x.size());
  rms_scaled_softmax(x.data(), y.data(), rows, cols);
  for (std::int64_t i = 0; i < rows; ++i) {
    const double sum = std::accumulate(y.begin() + i * cols, y.begin() + (i + 1) * cols, 0.0);
    CHECK(sum == Approx(1.0).epsilon(1e-12));
  }
}

TEST_CASE("subtracting max(x) before scaling equals subtracting max(r x) after", "[reference]") {
  // max(r x) = r max(x) because r > 0: the reference's shortcut is exact up to rounding.
  const std::uint64_t seed = rss_test::fresh_seed();
  CAPTURE(seed);
  const std::int64_t cols = 513;
  const auto x = rss_test::random_rows(1, cols, seed);
  std::vector<double> y(cols);
  rms_scaled_softmax(x.data(), y.data(), 1, cols);

  std::vector<double> rx(cols);
  double sum_sq = 0.0;
  for (float v : x) sum_sq += double(v) * v;
  const double r = 1.0 / std::sqrt(sum_sq / cols + 1e-5);
  for (std::int64_t j = 0; j < cols; ++j) rx[j] = r * x[j];
  const double max_rx = *std::max_element(rx.begin(), rx.end());
  double total = 0.0;
  for (double& v : rx) total += (v = std::exp(v - max_rx));
  for (std::int64_t j = 0; j < cols; ++j) CHECK(y[j] == Approx(rx[j] / total).epsilon(1e-12));
}

TEST_CASE("the row error measure catches unwritten elements", "[reference]") {
  const std::vector<double> ref{0.25, 0.25, 0.5};
  const std::vector<float> poisoned{0.25f, NAN, 0.5f};
  CHECK_FALSE(rss::reference::max_row_relative_error(poisoned.data(), ref.data(), 1, 3) <=
              rss::reference::fp32_tolerance);
  const std::vector<float> good{0.25f, 0.25f, 0.5f};
  CHECK(rss::reference::max_row_relative_error(good.data(), ref.data(), 1, 3) <= rss::reference::fp32_tolerance);
}

// Run by CTest with RSS_PYTHON and RSS_NUMPY_SCRIPT set, where Python and numpy are present.
TEST_CASE("the C++ reference agrees with the NumPy script", "[.][numpy]") {
  const char* python = std::getenv("RSS_PYTHON");
  const char* script = std::getenv("RSS_NUMPY_SCRIPT");
  REQUIRE(python != nullptr);
  REQUIRE(script != nullptr);
  const std::uint64_t seed = rss_test::fresh_seed();
  CAPTURE(seed);
  const std::int64_t rows = 5, cols = 777;
  const auto x = rss_test::random_rows(rows, cols, seed);
  const std::string in = "rss_numpy_in.f32", out = "rss_numpy_out.f64";
  std::ofstream(in, std::ios::binary).write(reinterpret_cast<const char*>(x.data()), x.size() * sizeof(float));
  const std::string command = std::string(python) + " " + script + " " + in + " " + out + " " +
                              std::to_string(rows) + " " + std::to_string(cols);
  REQUIRE(std::system(command.c_str()) == 0);
  std::vector<double> numpy_y(x.size()), cpp_y(x.size());
  std::ifstream(out, std::ios::binary).read(reinterpret_cast<char*>(numpy_y.data()), numpy_y.size() * sizeof(double));
  rms_scaled_softmax(x.data(), cpp_y.data(), rows, cols);
  CHECK(rss::reference::max_row_relative_error(cpp_y.data(), numpy_y.data(), rows, cols) < 1e-13);
  std::remove(in.c_str());
  std::remove(out.c_str());
}
