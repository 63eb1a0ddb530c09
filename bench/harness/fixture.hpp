#pragma once
// The benchmark input fixture, bit for bit the generator of bench/rssbench/fixture.py (read there
// for why it is exact): element k = float32(8 u - 4), u = (splitmix64(seed + k) >> 40) / 2^24.
// Host and device: the sharded bench generates its shards on the GPUs.
#include <cstdint>
#include <vector>

#ifdef __CUDACC__
#define RSS_BENCH_HD __host__ __device__
#else
#define RSS_BENCH_HD
#endif

namespace rss_bench {

inline constexpr const char* fixture_generator = "splitmix64(seed+k)>>40, 8u-4, float32";

RSS_BENCH_HD inline std::uint64_t splitmix64(std::uint64_t z) {
  z += 0x9E3779B97F4A7C15ull;
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

RSS_BENCH_HD inline float fixture_element(std::uint64_t seed, std::uint64_t k) {
  const auto top24 = static_cast<std::int64_t>(splitmix64(seed + k) >> 40);
  return static_cast<float>(top24 - (std::int64_t{1} << 23)) / static_cast<float>(1 << 21);
}

inline std::vector<float> fixture(std::uint64_t seed, std::int64_t rows, std::int64_t cols) {
  std::vector<float> x(static_cast<std::size_t>(rows * cols));
  for (std::size_t k = 0; k < x.size(); ++k) x[k] = fixture_element(seed, k);
  return x;
}

}  // namespace rss_bench
