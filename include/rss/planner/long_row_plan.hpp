#pragma once
// Host planner for strategy long_row: one row at a time split evenly over every SM of the chip, one block per
// SM, the blocks grouped in thread-block clusters. Pure host C++: no CUDA headers, no allocation, no
// exceptions, no printing; testable from a DeviceInfo and an occupancy model.
//
// Kernel contract (rss/strategies/long_row.cuh is written to exactly this):
//  - One cooperative launch of grid_blocks = clusters * cluster_size blocks of `threads` threads, clusters of
//    cluster_size blocks. Every block waits on every cluster leader twice per row, so all blocks must be
//    co-resident: grid_blocks <= the resident clusters the occupancy answers for (cluster_size,
//    dynamic_shared_bytes), times cluster_size. A correctness condition; plan_long_row never breaks it.
//  - grid_blocks <= sm_count, and dynamic_shared_bytes is the largest tile one block may have: more than half
//    an SM's shared memory on Hopper, so one block per SM and the cross-cluster slots (one per cluster) fit a
//    workspace sized by sm_count.
//  - Block b owns elements [b * share_elems, b * share_elems + share_elems) of every row (clipped to cols;
//    trailing blocks may own nothing). share_elems is a multiple of 8, so every share of an aligned row
//    starts 16-byte aligned. The first min(share, tile_elems) elements of a block's share are held in its
//    shared memory as stored (16-bit stays 16-bit), the next up to register_elems in its threads' registers;
//    the rest is streamed: read from x in phase 1 with an L2 evict_last hint, and re-read (from L2) in
//    phases 2 and 3.
//  - Rows are processed one after another by the whole grid; each row costs two exchange rounds.
//
// Geometry rule:
//  1. The tile is the largest a block may have (opt-in per-block limit, one block's share of an SM), in
//     whole multiples of 8 elements.
//  2. For each cluster size (powers of two up to the device's limit), the resident clusters at that tile,
//     capped so that the grid stays within sm_count blocks and at the clusters it takes to give each block
//     min_share_elems (a short row gets fewer blocks; it still gets one cluster).
//  3. The most blocks wins (the most SMs, so the most shared memory and bandwidth); between equal counts, the
//     larger cluster (fewer leaders in the global round trip).
//  4. register_elems is the kernel's register_bytes in elements, a multiple of 8; registers hold no more.
#include <climits>
#include <cstddef>
#include <cstdint>

#include "rss/device_info.hpp"
#include "rss/status.hpp"
#include "rss/types.hpp"

namespace rss {

/// What to plan: the problem shape and the kernel's fixed launch parameters.
struct LongRowRequest {
  std::int64_t rows = 0;
  std::int64_t cols = 0;
  DType dtype = DType::fp32;
  int threads = 512;  // the kernel's (rss/strategies/long_row.cuh)
  std::size_t static_shared_bytes = 0;  // the kernel's static shared memory (reductions, mbarriers)
  std::size_t register_bytes = 0;  // bytes of x a block holds in its threads' registers past its tile
  std::int64_t min_share_elems = 4096;  // below this a block's share is not worth its exchange
};

/// The planner's answer for the request it was made from.
struct LongRowPlan {
  std::int64_t rows = 0;
  std::int64_t cols = 0;
  int threads = 0;
  int cluster_size = 0;
  int clusters = 0;                       // cluster leaders: the participants of each global round
  int grid_blocks = 0;                    // clusters * cluster_size, at most sm_count
  std::int64_t share_elems = 0;           // elements per block, a multiple of 8
  std::int64_t tile_elems = 0;            // elements a block holds in shared memory, a multiple of 8
  std::int64_t register_elems = 0;        // elements a block holds in registers past its tile, a multiple of 8
  std::size_t dynamic_shared_bytes = 0;   // tile_elems * element bytes
  std::int64_t streamed_elems_per_row = 0;  // elements past tiles and registers: re-read from L2 in phases 2, 3
  std::int64_t streamed_elements = 0;     // over all rows
  int launch_count = 0;                   // 0 when rows == 0 or cols == 0, else 1
};

namespace detail {

/// Elements of every share and every tile are a multiple of this: 16 bytes of the widest 16-bit vector and
/// 32 bytes of fp32, so a share of an aligned row starts on a 16-byte boundary.
constexpr std::int64_t kLongRowElemMultiple = 8;

/// The largest tile (elements, a multiple of 8) one block may hold: the opt-in limit and one block's share
/// of an SM, each less the static shared memory (and the SM's per-block reservation). 0 when none fits.
inline std::int64_t long_row_max_tile(const DeviceInfo& d, std::size_t static_bytes, DType dtype) noexcept {
  if (static_bytes >= d.shared_per_block_optin) return 0;
  std::size_t budget = d.shared_per_block_optin - static_bytes;
  const std::size_t overhead = d.reserved_shared_per_block + static_bytes;
  if (d.shared_per_sm <= overhead) return 0;
  if (d.shared_per_sm - overhead < budget) budget = d.shared_per_sm - overhead;
  const auto elems = static_cast<std::int64_t>(budget / dtype_bytes(dtype));
  return elems / kLongRowElemMultiple * kLongRowElemMultiple;
}

/// Elements of a row of `cols` past what blocks hold on chip, over all blocks: sum over b of max(0, n_b - held).
inline std::int64_t long_row_streamed(std::int64_t cols, std::int64_t share, std::int64_t held, int blocks) noexcept {
  std::int64_t streamed = 0;
  for (int b = 0; b < blocks; ++b) {
    const std::int64_t begin = static_cast<std::int64_t>(b) * share;
    if (begin >= cols) break;
    const std::int64_t n = cols - begin < share ? cols - begin : share;
    if (n > held) streamed += n - held;
  }
  return streamed;
}

}  // namespace detail

/// Plans strategy long_row for `req` on device d.
///
/// `resident_clusters` is a callable int(int cluster_size, std::size_t dynamic_shared_bytes): how many
/// clusters of that many blocks of this kernel the device holds at once (cudaOccupancyMaxActiveClusters at
/// run time, blocks per SM times sm_count for cluster size 1; a model in host tests). It should not throw.
///
/// Returns success and writes *out, or one of: null_pointer, negative_size, size_overflow (rows * cols *
/// element bytes does not fit in 64 bits), invalid_strategy (threads or min_share_elems not positive,
/// register_bytes past INT_MAX), cooperative_unsupported, unsupported_device (no SMs, or no clusters and bulk
/// copies: before sm_90), not_admissible (no tile fits, or no cluster size is resident). *out is untouched on
/// failure. rows == 0 or cols == 0 is success with launch_count 0, whatever the device.
template <class ResidentClusters>
Status plan_long_row(const DeviceInfo& d, const LongRowRequest& req, ResidentClusters&& resident_clusters,
                     LongRowPlan* out) noexcept {
  if (out == nullptr) return Status::null_pointer;
  if (req.rows < 0 || req.cols < 0) return Status::negative_size;
  if (req.rows > 0 && req.cols > INT64_MAX / dtype_bytes(req.dtype) / req.rows) return Status::size_overflow;
  if (req.threads <= 0 || req.min_share_elems <= 0 || req.register_bytes > static_cast<std::size_t>(INT_MAX)) {
    return Status::invalid_strategy;
  }
  LongRowPlan p;
  p.rows = req.rows;
  p.cols = req.cols;
  p.threads = req.threads;
  if (req.rows == 0 || req.cols == 0) {
    *out = p;
    return Status::success;
  }
  if (!d.cooperative_launch) return Status::cooperative_unsupported;
  if (d.sm_count <= 0 || d.compute_capability() < 90 || d.max_cluster_size < 1) return Status::unsupported_device;
  const std::int64_t tile = detail::long_row_max_tile(d, req.static_shared_bytes, req.dtype);
  if (tile == 0) return Status::not_admissible;
  const std::size_t dynamic = static_cast<std::size_t>(tile) * dtype_bytes(req.dtype);

  int best_size = 0, best_clusters = 0;
  for (int size = 1; size <= d.max_cluster_size && size <= portable_cluster_size; size *= 2) {
    const int resident = resident_clusters(size, dynamic);
    if (resident <= 0) continue;
    std::int64_t clusters = resident;
    if (clusters > d.sm_count / size) clusters = d.sm_count / size;
    const std::int64_t per_cluster = req.min_share_elems * size;
    const std::int64_t worth = req.cols / per_cluster + (req.cols % per_cluster != 0 ? 1 : 0);
    if (clusters > worth) clusters = worth;
    if (clusters <= 0) continue;
    const std::int64_t blocks = clusters * size;
    if (blocks >= static_cast<std::int64_t>(best_clusters) * best_size) {  // ties: the larger cluster (later)
      best_size = size;
      best_clusters = static_cast<int>(clusters);
    }
  }
  if (best_size == 0) return Status::not_admissible;

  p.cluster_size = best_size;
  p.clusters = best_clusters;
  p.grid_blocks = best_size * best_clusters;
  const std::int64_t per_block = req.cols / p.grid_blocks + (req.cols % p.grid_blocks != 0 ? 1 : 0);
  p.share_elems = (per_block + detail::kLongRowElemMultiple - 1) / detail::kLongRowElemMultiple *
                  detail::kLongRowElemMultiple;
  p.tile_elems = tile;
  p.dynamic_shared_bytes = dynamic;
  p.register_elems = static_cast<std::int64_t>(req.register_bytes / dtype_bytes(req.dtype)) /
                     detail::kLongRowElemMultiple * detail::kLongRowElemMultiple;
  p.streamed_elems_per_row =
      detail::long_row_streamed(req.cols, p.share_elems, tile + p.register_elems, p.grid_blocks);
  p.streamed_elements = p.streamed_elems_per_row * req.rows;  // <= rows * cols: no overflow
  p.launch_count = 1;
  *out = p;
  return Status::success;
}

}  // namespace rss
