#pragma once
// Fresh random inputs for tests: never zeros, scaled per row so that the inverse RMS matters
// (a wrong r changes the output), with a per-row offset so that the maximum subtraction matters.
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
