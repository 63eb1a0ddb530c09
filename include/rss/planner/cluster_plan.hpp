#pragma once
// Host planner for strategy cluster_row: one thread-block cluster per row, the row held on chip by the
// cluster's blocks (in registers or in shared memory) from the statistics to the normalisation, the
// blocks' partial results combined through distributed shared memory. Pure host C++: no CUDA headers, testable
// without a GPU.
//
// Kernel contract: block r (0 <= r < cluster_size) of a row's cluster owns the elements
// [r * chunk_elems, min(cols, (r + 1) * chunk_elems)); its thread t holds elems_per_thread of them
// in registers, as 16-byte vectors spaced `threads` vectors apart, or the block keeps the share in
// shared memory (shared_bytes), as stored. chunk_elems is a multiple of 8
// (a whole number of vectors for every dtype, so each block's share keeps the row's alignment) and
// at most threads * elems_per_thread. The grid has one cluster per row; rows beyond the largest grid
// are looped over by the same clusters. A pipelined configuration keeps two tiles per block (tile 1
// starts chunk_elems after tile 0) and its kernel is launched with only the clusters that stay resident
// (the launch caps grid_blocks: occupancy is a runtime query), each looping over rows.
#include <cstdint>

#include "rss/device_info.hpp"
#include "rss/status.hpp"
#include "rss/strategy.hpp"
#include "rss/types.hpp"

namespace rss {

/// The configurations the library instantiates (threads x elems_per_thread; any cluster size up to the
/// device's limit). elems_per_thread must also hold whole 16-byte vectors: 4 is fp32 only. A row kept in
/// shared memory costs no registers per element, so its blocks may hold more.
inline constexpr int cluster_row_threads[] = {256, 512};
inline constexpr int cluster_row_elems[] = {4, 8, 16, 32};
inline constexpr int cluster_row_shared_elems[] = {8, 16, 32, 64};

struct ClusterPlan {
  std::int64_t rows = 0;
  std::int64_t cols = 0;
  ClusterConfig config{};
  std::int64_t chunk_elems = 0;  // elements of a row per block
  std::int64_t grid_blocks = 0;  // clusters * cluster_size; 0 when rows == 0 or cols == 0
  std::int64_t shared_bytes = 0;  // dynamic shared memory per block: the block's share, as stored, when the
                                  // configuration keeps the row in shared memory (twice that when
                                  // pipelined: two tiles); else 0
};

namespace detail {
inline constexpr std::int64_t kClusterChunkMultiple = 8;
inline constexpr std::int64_t kMaxGridBlocks = 2147483647;

constexpr std::int64_t cluster_chunk(std::int64_t cols, int cluster_size) noexcept {
  const std::int64_t share = cols / cluster_size + (cols % cluster_size != 0 ? 1 : 0);
  return (share + kClusterChunkMultiple - 1) / kClusterChunkMultiple * kClusterChunkMultiple;
}

constexpr bool listed(const int* values, int count, int v) noexcept {
  for (int i = 0; i < count; ++i)
    if (values[i] == v) return true;
  return false;
}
}  // namespace detail

/// Whether `c` is an instantiated configuration that holds a row of `cols` elements of `dtype`.
constexpr bool cluster_config_fits(const ClusterConfig& c, std::int64_t cols, DType dtype, int max_cluster_size) noexcept {
  const int vector_width = 16 / dtype_bytes(dtype);
  const bool shared = c.residence != RowResidence::registers;
  if (shared && c.residence != RowResidence::shared_memory && c.residence != RowResidence::shared_memory_pipelined) {
    return false;
  }
  if (!detail::listed(cluster_row_threads, 2, c.threads) ||
      !detail::listed(shared ? cluster_row_shared_elems : cluster_row_elems, 4, c.elems_per_thread)) {
    return false;
  }
  if (c.elems_per_thread % vector_width != 0) return false;
  if (c.cluster_size < 1 || c.cluster_size > max_cluster_size) return false;
  return detail::cluster_chunk(cols, c.cluster_size) <= static_cast<std::int64_t>(c.threads) * c.elems_per_thread;
}

/// The default configuration for a row of `cols` elements, the rule the H200 pilot measurements
/// follow (bench/NOTES.md): 64 bytes per thread (four 16-byte loads in flight) while the row fits one
/// block of 512 threads; longer rows 128 bytes per thread (at most 32 elements), in the fewest blocks
/// of 512 threads. 256 threads when they hold the block's share, and then the fewest elements per
/// thread that do. cluster_size 0 when no cluster of up to max_cluster_size blocks holds the row.
constexpr ClusterConfig default_cluster_config(std::int64_t cols, DType dtype, int max_cluster_size) noexcept {
  const int bytes = dtype_bytes(dtype);
  const int vector_width = 16 / bytes;
  int per_thread = 64 / bytes;
  if (cols * bytes > 512 * 64) per_thread = 128 / bytes < 32 ? 128 / bytes : 32;
  for (int c = 1; c <= max_cluster_size; ++c) {
    const std::int64_t chunk = detail::cluster_chunk(cols, c);
    if (chunk > 512 * per_thread) continue;
    const int threads = chunk <= 256 * per_thread ? 256 : 512;
    for (const int e : cluster_row_elems) {
      if (e % vector_width == 0 && chunk <= static_cast<std::int64_t>(threads) * e) return {threads, e, c};
    }
  }
  return {};
}

/// Plans cluster_row. `preferred` (may be null: the default configuration) comes from a tuning table
/// or a caller; it is used when it fits the row, else the default is. Returns null_pointer,
/// negative_size, size_overflow, unsupported_device (no clusters) or not_admissible (the row is longer
/// than the largest cluster holds); *out is untouched on failure.
inline Status plan_cluster_row(const DeviceInfo& device, std::int64_t rows, std::int64_t cols, DType dtype,
                               const ClusterConfig* preferred, ClusterPlan* out) noexcept {
  if (out == nullptr) return Status::null_pointer;
  if (rows < 0 || cols < 0) return Status::negative_size;
  if (rows > 0 && cols > INT64_MAX / dtype_bytes(dtype) / rows) return Status::size_overflow;
  ClusterPlan plan;
  plan.rows = rows;
  plan.cols = cols;
  if (rows == 0 || cols == 0) {
    *out = plan;
    return Status::success;
  }
  if (device.max_cluster_size < 1 || device.sm_count < 1) return Status::unsupported_device;
  ClusterConfig c = default_cluster_config(cols, dtype, device.max_cluster_size);
  if (preferred != nullptr && cluster_config_fits(*preferred, cols, dtype, device.max_cluster_size)) c = *preferred;
  if (c.cluster_size == 0) return Status::not_admissible;
  plan.config = c;
  plan.chunk_elems = detail::cluster_chunk(cols, c.cluster_size);
  const std::int64_t max_clusters = detail::kMaxGridBlocks / c.cluster_size;
  plan.grid_blocks = (rows < max_clusters ? rows : max_clusters) * c.cluster_size;
  const int tiles = c.residence == RowResidence::shared_memory ? 1 : c.residence == RowResidence::registers ? 0 : 2;
  plan.shared_bytes = tiles * plan.chunk_elems * dtype_bytes(dtype);
  *out = plan;
  return Status::success;
}

}  // namespace rss
