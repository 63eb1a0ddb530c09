// RowScale's two forms of the exponential, on the host (its constants and the saved sum's correction are
// __host__ __device__): which rows get the one-FFMA form, and that the sum a forward saves is the row's true sum
// of exp(r (x - m)) although the fused form's exponentials are all off by the same factor 2^-e.
#include <catch2/catch.hpp>

#include <cmath>
#include <cstdint>
#include <limits>
#include <random>
#include <vector>

#include "rss/phases/row_stats.cuh"
#include "rss/reference/tolerance.hpp"

namespace {

/// The fused form's exponentials of a row as the kernels compute them, but with an exact exp2: the FFMA's
/// rounding (fmaf) is the kernels', MUFU.EX2's error is not what this test is about.
double fused_total(const rss::RowScale& s, const std::vector<float>& x) {
  double total = 0.0;
  for (const float v : x) total += std::exp2(static_cast<double>(std::fmaf(v, s.fused_scale, s.fused_offset)));
  return total;
}

double true_sum(const std::vector<float>& x, float max, float inv_rms) {
  double sum = 0.0;
  for (const float v : x) sum += std::exp(static_cast<double>(inv_rms) * (static_cast<double>(v) - max));
  return sum;
}

}  // namespace

TEST_CASE("the one-FFMA exponential is used exactly where c = r log2(e) is a normal float", "[host][row_scale]") {
  CHECK(rss::row_scale_of(3.0f, 0.5f).fused_scale == static_cast<float>(0.5 * 1.4426950408889634));
  CHECK(rss::row_scale_of(3.0f, 0.5f).fused_offset == -3.0f * static_cast<float>(0.5 * 1.4426950408889634));
  CHECK(rss::row_scale_of(1e38f, 3e-39f).fused_scale == 0.0f);  // c subnormal: a row of RMS about 3e38
  CHECK(rss::row_scale_of(1e38f, 8.2e-39f).fused_scale != 0.0f);  // c just above FLT_MIN
  CHECK(rss::row_scale_of(1.0f, 0.0f).fused_scale == 0.0f);  // a row with an infinite entry: r = 0
  CHECK(rss::row_scale_of(1.0f, std::numeric_limits<float>::quiet_NaN()).fused_scale == 0.0f);
  // The scaled form's constants are the same either way.
  const rss::RowScale s = rss::row_scale_of(3.0f, 0.5f);
  CHECK(s.exp2_scale == static_cast<float>(0.5 * 4.0 * 1.4426950408889634));
  CHECK(s.exp2_offset == -0.75f);
  const rss::RowScale big = rss::row_scale_of(300.3f, 0.5f);  // fl(-m c) rounds by about 4e-6 of a unit of t
  REQUIRE(std::abs(std::fmaf(-big.max, big.fused_scale, -big.fused_offset)) > 1e-6f);
  CHECK(big.true_sum(10.0f) != 10.0f);  // fused: corrected
  CHECK(rss::row_scale_of(1.0f, 0.0f).true_sum(10.0f) == 10.0f);  // scaled: the sum as it is
}

TEST_CASE("the sum a forward saves for a fused row is its true sum", "[host][row_scale]") {
  // Rows of 131072 N(0, 1) entries with one spike: |m c| up to about 500, so fl(-m c) is off by up to 2^-24 |m c|
  // in the exponent, about 2e-5 of the sum. Spikes are chosen so that the rounding is large.
  std::mt19937 gen(7);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::vector<float> x(131072);
  int rows = 0;
  double worst_uncorrected = 0.0;
  for (float spike = 20.0f; rows < 8 && spike < 1000.0f; spike += 7.31f) {
    for (float& v : x) v = normal(gen);
    x[977] = spike;
    double sum_sq = 0.0;
    for (const float v : x) sum_sq += static_cast<double>(v) * v;
    const auto inv_rms = static_cast<float>(1.0 / std::sqrt(sum_sq / x.size() + rss::rms_epsilon));
    const rss::RowScale s = rss::row_scale_of(spike, inv_rms);
    REQUIRE(s.fused_scale != 0.0f);
    const double total = fused_total(s, x);
    const double want = true_sum(x, spike, inv_rms);
    const double uncorrected = std::abs(total - want) / want;
    if (uncorrected < 4 * rss::reference::fp32_tolerance) continue;  // a small rounding: shows nothing
    ++rows;
    worst_uncorrected = std::max(worst_uncorrected, uncorrected);
    const float saved = s.true_sum(static_cast<float>(total));
    INFO("spike " << spike << ": sum of exponentials " << total << ", true sum " << want << ", saved " << saved);
    CHECK(std::abs(saved - want) <= rss::reference::fp32_tolerance * want);
  }
  CHECK(rows == 8);
  CHECK(worst_uncorrected > 4 * rss::reference::fp32_tolerance);
}
