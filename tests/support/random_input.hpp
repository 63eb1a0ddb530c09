#pragma once
// Fresh random inputs for tests. random_rows: never zeros, scaled per row so that the inverse RMS matters
// (a wrong r changes the output), with a per-row offset so that the maximum subtraction matters. spiky_rows:
// rows that a few entries dominate (exact zeros among them on purpose).
#include <cmath>
#include <cstdint>
#include <random>
#include <vector>

namespace rss_test {

/// A fresh seed per call, so every run draws new inputs; tests print it on failure.
inline std::uint64_t fresh_seed() {
  std::random_device device;
  return (static_cast<std::uint64_t>(device()) << 32) ^ device();
}

/// rows x cols values: row i is s_i * (u + o_i) with u uniform in [-4, 4), s_i in [0.25, 4), o_i in [-2, 2).
inline std::vector<float> random_rows(std::int64_t rows, std::int64_t cols, std::uint64_t seed) {
  std::mt19937_64 gen(seed);
  std::uniform_real_distribution<float> u(-4.0f, 4.0f), scale(0.25f, 4.0f), offset(-2.0f, 2.0f);
  std::vector<float> x(static_cast<std::size_t>(rows * cols));
  for (std::int64_t i = 0; i < rows; ++i) {
    const float s = scale(gen), o = offset(gen);
    for (std::int64_t j = 0; j < cols; ++j) {
      float v = s * (u(gen) + o);
      if (v == 0.0f) v = 1e-3f;  // never an exact zero
      x[static_cast<std::size_t>(i * cols + j)] = v;
    }
  }
  return x;
}

}  // namespace rss_test

namespace rss_test {

/// Rows where a few entries dominate: the rows that test the row statistics and the backward's sums. Row i is
/// of kind i % 7, each with fresh random positions and values:
///   0  one spike of 30 in exact zeros (every other exponential underflows: the sum is 1)
///   1  one spike of 50 in noise of unit scale
///   2  two spikes of 100 in noise of scale 0.5
///   3  noise of scale 1e-3 around a random offset of up to 1e-2, one spike of 12 times the scale (eps
///      dominates the mean square)
///   4  noise at a scale drawn log-uniformly in [min_scale, max_scale / 8], one spike of 8 times the scale
///   5  unit noise and one entry of max_scale / 4
///   6  noise of scale 2e18 and every 32nd entry +-2e19 (for fp16: max_scale / 8 and / 2): an fp32 run of squares
///      overflows only where it holds one of those entries, and they carry about 90% of the mean square, so
///      dropping those runs or counting the others twice moves r by 5% or more; every other such row (i % 14 ==
///      13) is noise of scale 6e18 alone: no run of a 16-byte vector's squares overflows fp32 (8 x 3.6e37), but
///      the sum of a few runs does, which a thread adding its runs in fp32 must notice
/// max_scale and min_scale keep every value finite in the storage type (fp32 and bf16: 3e38 and 1e-30; fp16:
/// 6e4 and 1e-3).
inline std::vector<float> spiky_rows(std::int64_t rows, std::int64_t cols, std::uint64_t seed, float max_scale = 3e38f,
                                     float min_scale = 1e-30f) {
  std::mt19937_64 gen(seed);
  std::uniform_real_distribution<float> unit(-1.0f, 1.0f);
  std::uniform_real_distribution<double> log_scale(std::log(static_cast<double>(min_scale)),
                                                   std::log(static_cast<double>(max_scale) / 8.0));
  std::uniform_int_distribution<std::int64_t> at(0, cols - 1);
  std::vector<float> x(static_cast<std::size_t>(rows * cols));
  for (std::int64_t i = 0; i < rows; ++i) {
    float* row = x.data() + i * cols;
    const int kind = static_cast<int>(i % 7);
    const float offset = 1e-2f * unit(gen);
    const float scale = kind == 4 ? static_cast<float>(std::exp(log_scale(gen))) : 1.0f;
    for (std::int64_t j = 0; j < cols; ++j) {
      switch (kind) {
        case 0: row[j] = 0.0f; break;
        case 1: case 5: row[j] = unit(gen); break;
        case 2: row[j] = 0.5f * unit(gen); break;
        case 3: row[j] = offset + 1e-3f * unit(gen); break;
        case 6: row[j] = std::fmin(i % 14 == 13 ? 6e18f : 2e18f, max_scale / 8.0f) * unit(gen); break;
        default: row[j] = scale * unit(gen); break;
      }
    }
    switch (kind) {
      case 0: row[at(gen)] = 30.0f; break;
      case 1: row[at(gen)] = 50.0f; break;
      case 2: row[at(gen)] = 100.0f; row[at(gen)] = 100.0f; break;
      case 3: row[at(gen)] = offset + 12e-3f; break;
      case 4: row[at(gen)] = 8.0f * scale; break;
      case 5: row[at(gen)] = max_scale / 4.0f; break;
      default:
        if (i % 14 == 13) break;
        for (std::int64_t j = at(gen) % 32; j < cols; j += 32) row[j] = std::copysign(std::fmin(2e19f, max_scale / 2.0f), unit(gen));
        break;
    }
  }
  return x;
}

}  // namespace rss_test
