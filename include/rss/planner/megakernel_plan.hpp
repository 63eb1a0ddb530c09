#pragma once
// Host planner for the cooperative megakernels (megakernel_grid, megakernel_row): tile geometry,
// residency admission, launch splitting and eviction. Pure host C++: no CUDA headers, no allocation,
// no exceptions, no printing; testable from a DeviceInfo and an occupancy model.
//
// Kernel contract (the device code is written to exactly this):
//  - A row of `cols` elements is cut into tiles of `tile_elems` elements (a multiple of 8; the last tile
//    of a row may be short). tiles_per_row = ceil(cols / tile_elems).
//  - Each row is owned by a group of `blocks_per_row` consecutive blocks. Block k of the group handles
//    tiles k, k + blocks_per_row, k + 2 * blocks_per_row, ... Only its FIRST tile is retained in dynamic
//    shared memory, as fp32 whatever the storage dtype, so dynamic_shared_bytes = tile_elems * 4. The
//    others are evicted: re-read from x in every phase and their exponentials recomputed in the last.
//    evicted_tiles_per_row = tiles_per_row - blocks_per_row (0 when every tile has a block of its own).
//  - Launch i is one cooperative launch over rows [first_row, first_row + row_count), with
//    grid_blocks = row_count * blocks_per_row blocks of `threads` threads; the blocks of row r of the
//    launch are [r * blocks_per_row, (r + 1) * blocks_per_row).
//  - The blocks spin-wait on each other, so all blocks of a launch must be co-resident:
//    grid_blocks <= blocks_per_sm * sm_count. This is a correctness condition, not a tuning knob;
//    plan_megakernel never returns a plan that violates it.
//  - The kernel also uses static_shared_bytes of static shared memory, so
//    dynamic_shared_bytes + static_shared_bytes <= shared_per_block_optin.
//
// Geometry rule (in order of priority):
//  1. Retain whole rows when any candidate tile size can: a plan without eviction beats one with it.
//  2. Fewest launches.
//  3. With the same number of launches, rows are balanced over the launches (ceil(rows / launches) per
//     launch) and each row is spread over as many co-resident blocks as useful: up to
//     resident_blocks / rows_per_launch blocks, but no tile below min_tile_elems unless the row itself is
//     shorter. Between candidates, the one using more blocks per launch wins.
//  4. A row that needs more tiles than there are resident blocks (larger than the chip's shared memory)
//     gets one launch per row, blocks_per_row = resident_blocks, the largest tiles, and eviction; between
//     candidates, the one retaining the most elements wins.
// Candidate tile sizes are the largest tiles that let 1..8 blocks share an SM's shared memory (capped by
// the opt-in per-block limit and by the row itself); `occupancy` is asked about each.
#include <climits>
#include <cstddef>
#include <cstdint>
#include "rss/device_info.hpp"
#include "rss/status.hpp"
#include "rss/types.hpp"

namespace rss {

/// What to plan: the problem shape and the kernel's fixed launch parameters.
struct MegakernelRequest {
  std::int64_t rows = 0;
  std::int64_t cols = 0;
  DType dtype = DType::fp32;
  int threads = 512;                     // threads per block
  std::size_t static_shared_bytes = 512; // the kernel's static shared memory (reduction scratch)
  // Below this a tile is not worth a block of its own. 1024 (not 2048) so that one 131072-element row
  // can still be spread over at least half of a 132-SM chip (128 blocks).
  std::int64_t min_tile_elems = 1024;
};

/// One cooperative launch of a plan.
struct MegakernelLaunch {
  std::int64_t first_row = 0;
  std::int64_t row_count = 0;
  int grid_blocks = 0;  // row_count * blocks_per_row, never above the plan's resident_blocks
};

/// The planner's answer. All counts are for the request it was made from.
struct MegakernelPlan {
  std::int64_t rows = 0;
  std::int64_t cols = 0;
  int threads = 0;
  int blocks_per_row = 0;
  std::int64_t tile_elems = 0;              // multiple of 8
  std::size_t dynamic_shared_bytes = 0;     // tile_elems * 4 (retained tiles are fp32)
  int blocks_per_sm = 0;                    // the occupancy answer the plan was admitted with
  int resident_blocks = 0;                  // blocks_per_sm * sm_count: the co-residency budget
  std::int64_t tiles_per_row = 0;
  std::int64_t evicted_tiles_per_row = 0;   // tiles re-read and recomputed instead of retained
  std::int64_t evicted_tiles = 0;           // over all rows
  std::int64_t rows_per_launch = 0;         // the last launch may have fewer
  std::int64_t launch_count = 0;            // 0 when rows == 0 or cols == 0
  /// block_row plans only: a persistent grid of at most this many blocks loops over the launch's rows
  /// (one block per row, no block waits on another). 0: one group of blocks_per_row blocks per row.
  std::int64_t max_grid_blocks = 0;

  /// Launch i, for i in [0, launch_count); an empty launch outside that range.
  MegakernelLaunch launch(std::int64_t i) const noexcept {
    MegakernelLaunch l;
    if (i < 0 || i >= launch_count) return l;
    l.first_row = i * rows_per_launch;
    const std::int64_t left = rows - l.first_row;
    l.row_count = left < rows_per_launch ? left : rows_per_launch;
    std::int64_t grid = l.row_count * blocks_per_row;
    if (max_grid_blocks > 0 && grid > max_grid_blocks) grid = max_grid_blocks;
    l.grid_blocks = static_cast<int>(grid);
    return l;
  }
};

namespace detail {

constexpr std::int64_t kTileElemMultiple = 8;         // 32 B of fp32: whole 16-byte vectors for any dtype
constexpr std::size_t kRetainedElemBytes = 4;         // retained tiles are fp32
constexpr int kMaxTargetBlocksPerSm = 8;              // candidate tiles: 1..8 blocks sharing one SM

constexpr std::int64_t ceil_div(std::int64_t a, std::int64_t b) noexcept {  // a >= 0, b > 0
  return a / b + (a % b != 0 ? 1 : 0);
}
constexpr std::int64_t round_up_tile(std::int64_t n) noexcept {  // n small enough not to overflow
  return ceil_div(n, kTileElemMultiple) * kTileElemMultiple;
}
constexpr std::int64_t min_i64(std::int64_t a, std::int64_t b) noexcept { return a < b ? a : b; }
constexpr std::int64_t max_i64(std::int64_t a, std::int64_t b) noexcept { return a > b ? a : b; }

/// The largest tile (elements, multiple of 8) whose block fits the opt-in per-block limit and lets
/// `target` blocks share one SM's shared memory, each also paying the reserved per-block bytes.
/// 0 when not even one 8-element tile fits.
inline std::int64_t max_tile_for_target(const DeviceInfo& d, std::size_t static_bytes, int target) noexcept {
  if (static_bytes >= d.shared_per_block_optin) return 0;
  std::size_t budget = d.shared_per_block_optin - static_bytes;
  const std::size_t sm_share = d.shared_per_sm / static_cast<std::size_t>(target);
  const std::size_t overhead = d.reserved_shared_per_block + static_bytes;
  if (sm_share <= overhead) return 0;
  if (sm_share - overhead < budget) budget = sm_share - overhead;
  const std::int64_t elems = static_cast<std::int64_t>(budget / kRetainedElemBytes);
  return elems / kTileElemMultiple * kTileElemMultiple;
}

/// Clamps an occupancy answer: negative means "does not launch"; the budget must fit an int grid.
inline std::int64_t resident_for(const DeviceInfo& d, int blocks_per_sm) noexcept {
  if (blocks_per_sm <= 0) return 0;
  const std::int64_t r = static_cast<std::int64_t>(blocks_per_sm) * d.sm_count;
  return r > INT_MAX ? INT_MAX : r;
}

inline void fill_plan(MegakernelPlan* p, const MegakernelRequest& req, std::int64_t bpr, std::int64_t tile,
                      int blocks_per_sm, std::int64_t resident, std::int64_t rows_per_launch) noexcept {
  p->rows = req.rows;
  p->cols = req.cols;
  p->threads = req.threads;
  p->blocks_per_row = static_cast<int>(bpr);
  p->tile_elems = tile;
  p->dynamic_shared_bytes = static_cast<std::size_t>(tile) * kRetainedElemBytes;
  p->blocks_per_sm = blocks_per_sm;
  p->resident_blocks = static_cast<int>(resident);
  p->tiles_per_row = ceil_div(req.cols, tile);
  p->evicted_tiles_per_row = max_i64(p->tiles_per_row - bpr, 0);
  p->evicted_tiles = p->evicted_tiles_per_row * req.rows;  // <= rows * cols: no overflow
  p->rows_per_launch = rows_per_launch;
  p->launch_count = ceil_div(req.rows, rows_per_launch);
}

/// The best plan whose tiles are at most `max_tile` elements, admitted at the occupancy answered for
/// that tile; false when the kernel does not launch with it.
template <class Occupancy>
bool plan_for_max_tile(const DeviceInfo& d, const MegakernelRequest& req, std::int64_t max_tile,
                       Occupancy& occupancy, MegakernelPlan* p) noexcept {
  const int level_bps = occupancy(static_cast<std::size_t>(max_tile) * kRetainedElemBytes);
  const std::int64_t resident = resident_for(d, level_bps);
  if (resident == 0) return false;

  const std::int64_t min_tiles = ceil_div(req.cols, max_tile);
  if (min_tiles > resident) {
    // The row is larger than every resident block's tile together: one row per launch, every resident
    // block holds one largest tile, the overflow is evicted.
    fill_plan(p, req, resident, max_tile, level_bps, resident, 1);
    return true;
  }

  // Whole rows retained. Fewest launches, then rows balanced over them, then each row spread over as
  // many of the resident blocks as its length justifies.
  const std::int64_t launches = ceil_div(req.rows, resident / min_tiles);
  const std::int64_t rows_per_launch = ceil_div(req.rows, launches);
  const std::int64_t worth = max_i64(req.cols / req.min_tile_elems, 1);
  // rows_per_launch * min_tiles <= resident, so bpr >= min_tiles keeps tile <= max_tile.
  std::int64_t bpr = max_i64(min_i64(resident / rows_per_launch, worth), min_tiles);
  const std::int64_t tile = round_up_tile(ceil_div(req.cols, bpr));
  bpr = ceil_div(req.cols, tile);  // rounding the tile up may leave fewer tiles than blocks: no idle block

  // The smaller tile is admitted on its own occupancy answer (usually >= level_bps). Should it be
  // lower, fall back to the tile the level was admitted with: the residency condition is never traded.
  const int tile_bps = occupancy(static_cast<std::size_t>(tile) * kRetainedElemBytes);
  const std::int64_t tile_resident = resident_for(d, tile_bps);
  if (tile_resident >= rows_per_launch * bpr) {
    fill_plan(p, req, bpr, tile, tile_bps, tile_resident, rows_per_launch);
  } else {
    fill_plan(p, req, min_tiles, max_tile, level_bps, resident, rows_per_launch);
  }
  return true;
}

/// The checks both planners make first, in this order.
inline Status check_request(const MegakernelRequest& req, const MegakernelPlan* out) noexcept {
  if (out == nullptr) return Status::null_pointer;
  if (req.rows < 0 || req.cols < 0) return Status::negative_size;
  if (req.rows > 0 && req.cols > INT64_MAX / dtype_bytes(req.dtype) / req.rows) return Status::size_overflow;
  if (req.threads <= 0 || req.min_tile_elems <= 0) return Status::invalid_strategy;
  return Status::success;
}

/// The plan of a rows == 0 or cols == 0 request: nothing is launched, whatever the device.
inline MegakernelPlan empty_plan(const MegakernelRequest& req) noexcept {
  MegakernelPlan p;
  p.rows = req.rows;
  p.cols = req.cols;
  p.threads = req.threads;
  return p;
}

/// True when plan `a` is preferable to plan `b` under the geometry rule in the file comment.
inline bool better_plan(const MegakernelPlan& a, const MegakernelPlan& b) noexcept {
  const bool a_whole = a.evicted_tiles_per_row == 0, b_whole = b.evicted_tiles_per_row == 0;
  if (a_whole != b_whole) return a_whole;
  if (a.launch_count != b.launch_count) return a.launch_count < b.launch_count;
  if (!a_whole) return a.blocks_per_row * a.tile_elems > b.blocks_per_row * b.tile_elems;  // retained elems
  return a.rows_per_launch * a.blocks_per_row > b.rows_per_launch * b.blocks_per_row;    // blocks used
}

}  // namespace detail

/// Plans the cooperative megakernel launches for `req` on device `d`.
///
/// `occupancy` is a callable int(std::size_t dynamic_shared_bytes) answering how many blocks of this
/// kernel (req.threads threads, req.static_shared_bytes static shared memory) fit on one SM with that
/// much dynamic shared memory: cudaOccupancyMaxActiveBlocksPerMultiprocessor at run time (after raising
/// cudaFuncAttributeMaxDynamicSharedMemorySize), modeled_blocks_per_sm in host tests. It is called at
/// most 2 * 8 times. It should not throw (this function is noexcept).
///
/// Returns success and writes *out, or one of: null_pointer (out is null), negative_size,
/// size_overflow (rows * cols * dtype bytes does not fit in 64 bits), invalid_strategy (threads or
/// min_tile_elems not positive), cooperative_unsupported, unsupported_device (sm_count not positive),
/// not_admissible (no tile fits shared memory, or occupancy answers 0 for every candidate).
/// *out is left untouched on failure. rows == 0 or cols == 0 is success with launch_count 0, whatever
/// the device: nothing is launched.
template <class Occupancy>
Status plan_megakernel(const DeviceInfo& d, const MegakernelRequest& req, Occupancy&& occupancy,
                       MegakernelPlan* out) noexcept {
  if (const Status s = detail::check_request(req, out); !ok(s)) return s;
  if (req.rows == 0 || req.cols == 0) {
    *out = detail::empty_plan(req);
    return Status::success;
  }
  if (!d.cooperative_launch) return Status::cooperative_unsupported;
  if (d.sm_count <= 0) return Status::unsupported_device;

  MegakernelPlan best;
  bool found = false;
  std::int64_t previous_max_tile = -1;
  for (int target = 1; target <= detail::kMaxTargetBlocksPerSm; ++target) {
    std::int64_t max_tile = detail::max_tile_for_target(d, req.static_shared_bytes, target);
    if (max_tile == 0) break;  // smaller shares only get smaller
    // A tile longer than the row buys nothing and may cost occupancy.
    if (req.cols < max_tile) max_tile = detail::round_up_tile(req.cols);
    if (max_tile == previous_max_tile) continue;  // same candidate, same plan
    previous_max_tile = max_tile;

    MegakernelPlan candidate;
    if (!detail::plan_for_max_tile(d, req, max_tile, occupancy, &candidate)) continue;
    if (!found || detail::better_plan(candidate, best)) best = candidate;
    found = true;
  }
  if (!found) return Status::not_admissible;
  *out = best;
  return Status::success;
}

/// Plans strategy block_row: one block per row, the row retained in the block's shared memory, one
/// ordinary launch whose persistent grid (at most the resident blocks) loops over all rows. No block
/// waits on another, so nothing here is a co-residency condition; the grid is capped at the resident
/// blocks only because more would queue behind them. A row longer than the largest tile keeps its first
/// tile and evicts the rest (recomputed from x), like the megakernel. Candidates as in plan_megakernel;
/// preference: no eviction, then the most resident blocks, then the larger tile. Same statuses as
/// plan_megakernel, except that cooperative launch is not needed.
template <class Occupancy>
Status plan_block_row(const DeviceInfo& d, const MegakernelRequest& req, Occupancy&& occupancy,
                      MegakernelPlan* out) noexcept {
  if (const Status s = detail::check_request(req, out); !ok(s)) return s;
  MegakernelPlan best = detail::empty_plan(req);
  if (req.rows == 0 || req.cols == 0) {
    *out = best;
    return Status::success;
  }
  if (d.sm_count <= 0) return Status::unsupported_device;
  bool found = false;
  for (int target = 1; target <= detail::kMaxTargetBlocksPerSm; ++target) {
    std::int64_t tile = detail::max_tile_for_target(d, req.static_shared_bytes, target);
    if (tile == 0) break;
    if (req.cols < tile) tile = detail::round_up_tile(req.cols);
    const int bps = occupancy(static_cast<std::size_t>(tile) * detail::kRetainedElemBytes);
    const std::int64_t resident = detail::resident_for(d, bps);
    if (resident == 0) continue;
    MegakernelPlan candidate;
    detail::fill_plan(&candidate, req, 1, tile, bps, resident, req.rows);
    candidate.max_grid_blocks = detail::min_i64(resident, req.rows);
    const bool whole = candidate.evicted_tiles_per_row == 0, best_whole = best.evicted_tiles_per_row == 0;
    const bool better = !found || (whole != best_whole ? whole
                                   : candidate.resident_blocks != best.resident_blocks
                                       ? candidate.resident_blocks > best.resident_blocks
                                       : candidate.tile_elems > best.tile_elems);
    if (better) best = candidate;
    found = true;
  }
  if (!found) return Status::not_admissible;
  *out = best;
  return Status::success;
}

}  // namespace rss
