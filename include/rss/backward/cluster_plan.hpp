#pragma once
// Host planner of the backward strategy cluster_row: one thread-block cluster per row, x, y and dy
// held in the registers of the cluster's blocks between the row sums and the elementwise dx. Pure host
// C++: no CUDA headers, testable without a GPU.
//
// Kernel contract: block b (0 <= b < cluster_size) of a row's cluster owns the elements
// [b * chunk_elems, min(cols, (b + 1) * chunk_elems)); its thread t holds elems_per_thread of them
// of each of x, y and dy, as 16-byte vectors spaced `threads` vectors apart. chunk_elems is a multiple
// of 8 (whole vectors for every storage type, so every block's share keeps the row's alignment) and at
// most threads * elems_per_thread. One cluster per row; rows beyond the largest grid are looped over.
#include <cstdint>
#include <initializer_list>

#include "rss/status.hpp"
#include "rss/types.hpp"

namespace rss {

struct BackwardClusterConfig {
  int threads = 0;           // threads per block
  int elems_per_thread = 0;  // elements of each of x, y, dy a thread keeps in registers
  int cluster_size = 0;      // blocks per cluster, one cluster per row

  friend constexpr bool operator==(const BackwardClusterConfig& a, const BackwardClusterConfig& b) noexcept {
    return a.threads == b.threads && a.elems_per_thread == b.elems_per_thread && a.cluster_size == b.cluster_size;
  }
};

/// Instantiated configurations: threads x elements per thread (whole 16-byte vectors: 4 is fp32 only).
/// Three arrays share the registers, so 32 elements per thread is 96 registers of data in fp32.
inline constexpr int backward_cluster_threads[] = {256, 512};
inline constexpr int backward_cluster_elems[] = {4, 8, 16, 32};
/// Blocks per cluster the library launches: the portable limit.
inline constexpr int backward_max_cluster_size = 8;

struct BackwardClusterPlan {
  std::int64_t rows = 0;
  std::int64_t cols = 0;
  BackwardClusterConfig config{};
  std::int64_t chunk_elems = 0;  // elements of a row per block
  std::int64_t grid_blocks = 0;  // clusters * cluster_size; 0 for an empty problem
};

namespace detail::backward {

constexpr std::int64_t cluster_chunk(std::int64_t cols, int cluster_size) noexcept {
  const std::int64_t share = cols / cluster_size + (cols % cluster_size != 0 ? 1 : 0);
  return (share + 7) / 8 * 8;
}

constexpr bool listed(const int* values, int count, int v) noexcept {
  for (int i = 0; i < count; ++i)
    if (values[i] == v) return true;
  return false;
}

}  // namespace detail::backward

/// Longest row cluster_row holds: 8 blocks x 512 threads x 32 elements.
inline constexpr std::int64_t backward_cluster_max_cols = std::int64_t{backward_max_cluster_size} * 512 * 32;

/// Whether `c` is instantiated and holds a row of `cols` elements of `dtype` in clusters of at most `max_cluster_size`.
constexpr bool backward_cluster_config_fits(const BackwardClusterConfig& c, std::int64_t cols, DType dtype,
                                            int max_cluster_size) noexcept {
  const int vector_width = 16 / dtype_bytes(dtype);
  if (!detail::backward::listed(backward_cluster_threads, 2, c.threads) ||
      !detail::backward::listed(backward_cluster_elems, 4, c.elems_per_thread)) {
    return false;
  }
  if (c.elems_per_thread % vector_width != 0) return false;
  if (c.cluster_size < 1 || c.cluster_size > max_cluster_size || c.cluster_size > backward_max_cluster_size) return false;
  return detail::backward::cluster_chunk(cols, c.cluster_size) <= static_cast<std::int64_t>(c.threads) * c.elems_per_thread;
}

/// The default configuration. With y read (saved statistics false): 8 elements of each array per thread
/// (about 64 registers for every storage type, measured with ptxas for sm_90: two blocks of 512 threads per
/// SM, so one block's reductions overlap another's loads) in the fewest blocks that hold the row; rows longer
/// than 8 such blocks take 16, then 32 elements per thread (32: 128 registers, one block per SM). 256 threads
/// when they hold the block's share, with the fewest elements per thread that do.
/// With saved statistics (two arrays held, x and dy), the backward pilot on the H200 (bench/NOTES.md) favoured
/// 256-thread blocks with more elements each: one block of 256 threads with the fewest elements per thread
/// that hold the row (4096 x 4096 bf16: 256 x 16, 53 us against 65 for 512 x 8; 16384 x 8192: 256 x 32, 350
/// against 550), else 256 x 16 in the fewest blocks (4096 x 32768 fp32: 473 against 692), then 256 x 32,
/// then 512 x 32. cluster_size 0 when no cluster of up to max_cluster_size blocks holds the row.
constexpr BackwardClusterConfig default_backward_cluster_config(std::int64_t cols, DType dtype, int max_cluster_size,
                                                                bool saved_statistics = false) noexcept {
  const int vector_width = 16 / dtype_bytes(dtype);
  const int limit = max_cluster_size < backward_max_cluster_size ? max_cluster_size : backward_max_cluster_size;
  if (saved_statistics && limit >= 1) {
    for (const int e : backward_cluster_elems)
      if (e % vector_width == 0 && cols <= std::int64_t{256} * e) return {256, e, 1};
    for (const int per_thread : {16, 32}) {
      for (int c = 2; c <= limit; ++c)
        if (detail::backward::cluster_chunk(cols, c) <= std::int64_t{256} * per_thread) return {256, per_thread, c};
    }
  }
  for (const int per_thread : {8, 16, 32}) {
    for (int c = 1; c <= limit; ++c) {
      const std::int64_t chunk = detail::backward::cluster_chunk(cols, c);
      if (chunk > 512 * per_thread) continue;
      const int threads = chunk <= 256 * per_thread ? 256 : 512;
      for (const int e : backward_cluster_elems) {
        if (e % vector_width == 0 && chunk <= static_cast<std::int64_t>(threads) * e) return {threads, e, c};
      }
    }
  }
  return {};
}

/// Plans cluster_row. `preferred` (may be null) is used when it fits the row. Returns null_pointer,
/// negative_size, size_overflow, unsupported_device (max_cluster_size < 1: no clusters) or not_admissible
/// (the row is longer than a cluster holds); *out is untouched on failure.
inline Status plan_backward_cluster_row(int max_cluster_size, std::int64_t rows, std::int64_t cols, DType dtype,
                                        const BackwardClusterConfig* preferred, BackwardClusterPlan* out,
                                        bool saved_statistics = false) noexcept {
  if (out == nullptr) return Status::null_pointer;
  if (rows < 0 || cols < 0) return Status::negative_size;
  if (rows > 0 && cols > INT64_MAX / dtype_bytes(dtype) / rows) return Status::size_overflow;
  BackwardClusterPlan plan;
  plan.rows = rows;
  plan.cols = cols;
  if (rows == 0 || cols == 0) {
    *out = plan;
    return Status::success;
  }
  if (max_cluster_size < 1) return Status::unsupported_device;
  BackwardClusterConfig c = default_backward_cluster_config(cols, dtype, max_cluster_size, saved_statistics);
  if (preferred != nullptr && backward_cluster_config_fits(*preferred, cols, dtype, max_cluster_size)) c = *preferred;
  if (c.cluster_size == 0) return Status::not_admissible;
  plan.config = c;
  plan.chunk_elems = detail::backward::cluster_chunk(cols, c.cluster_size);
  constexpr std::int64_t max_grid = 2147483647;
  const std::int64_t max_clusters = max_grid / c.cluster_size;
  plan.grid_blocks = (rows < max_clusters ? rows : max_clusters) * c.cluster_size;
  *out = plan;
  return Status::success;
}

/// automatic's rule between the backward's strategies, before any refusal. Reading y: cluster_row holds the
/// row in registers, but with three 16-bit arrays per thread it ran up to 1.5x slower than two_pass on the
/// H200 once a call had many long rows (4096 x 32768 bf16: 664 against 439 us; 16384 x 8192: 544 against
/// 482), while it won on 4096 x 4096 and 64 x 131072 (bench/NOTES.md). So: two_pass for 16-bit problems of
/// 2^25 elements or more. With saved statistics, the backward pilot's cluster_row won on every fp32 shape and
/// on 16-bit rows up to 8192 (16384 x 8192 bf16: 350 against 413 us) and lost on 16-bit rows of 32768 and more
/// (4096 x 32768 bf16: 482 against 339; 64 x 131072: 48 against 39). So: two_pass for 16-bit rows of 32768
/// elements or more. Elsewhere cluster_row where a cluster holds the row.
constexpr bool backward_automatic_prefers_two_pass(std::int64_t rows, std::int64_t cols, DType dtype,
                                                   bool saved_statistics = false) noexcept {
  if (dtype == DType::fp32 || rows <= 0) return false;
  return saved_statistics ? cols >= 32768 : cols >= (std::int64_t{1} << 25) / rows;
}

}  // namespace rss
