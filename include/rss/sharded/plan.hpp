#pragma once
// Pure host planning of rows sharded over GPUs by columns (no CUDA, no NCCL: testable anywhere).
//
// Every rank holds the same rows and a contiguous column shard of each; shard widths may differ. The
// ranks must agree on what they are computing before any kernel waits on a peer, so initialisation
// all-gathers one RankShape per rank and every rank runs check_agreement() on the same table: all
// reach the same verdict, and nobody waits on a collective that a peer has left.
//
// Both paths are planned from the widest shard (max_local_cols), never from the rank's own width, so
// every rank launches the same grid: the device path pairs block b of every rank at one barrier, and
// the host path's all-gathers need the same count on every rank.
#include <cstdint>

#include "rss/planner/cluster_plan.hpp"
#include "rss/planner/row_split.hpp"
#include "rss/status.hpp"
#include "rss/types.hpp"

namespace rss {

/// How the per-row statistics and sums travel between the ranks.
enum class ShardedPath : int {
  nccl_host,    // three local kernels with an NCCL all-gather between them, on the caller's stream
  nccl_device,  // one kernel: peers' partials read through NCCL's symmetric window, LSA barriers
  automatic,    // nccl_device where it is admitted on every rank, else nccl_host
};

constexpr const char* sharded_path_name(ShardedPath p) noexcept {
  switch (p) {
    case ShardedPath::nccl_host: return "nccl_host";
    case ShardedPath::nccl_device: return "nccl_device";
    case ShardedPath::automatic: return "automatic";
  }
  return "unknown";
}

/// Why ranks disagree (or a rank refused locally); ShardedOperator::agreement() reports it.
enum class ShardAgreement : int {
  agreed = 0,
  local_refusal,        // some rank's own arguments were refused (its status says why)
  rows_differ,          // the ranks hold different numbers of rows
  total_cols_differ,    // the ranks name different global row lengths
  cols_do_not_add_up,   // the shard widths do not sum to the global row length
  dtype_differs,        // the ranks use different storage types
  path_differs,         // the ranks asked for different paths (or device exchanges)
  bad_table,            // a rank's entry is malformed (wrong version, rank or world size)
};

constexpr const char* shard_agreement_name(ShardAgreement a) noexcept {
  switch (a) {
    case ShardAgreement::agreed: return "agreed";
    case ShardAgreement::local_refusal: return "a rank refused its own arguments";
    case ShardAgreement::rows_differ: return "the ranks hold different numbers of rows";
    case ShardAgreement::total_cols_differ: return "the ranks name different global row lengths";
    case ShardAgreement::cols_do_not_add_up: return "the shard widths do not add up to the global row length";
    case ShardAgreement::dtype_differs: return "the ranks use different storage types";
    case ShardAgreement::path_differs: return "the ranks asked for different paths or device exchanges";
    case ShardAgreement::bad_table: return "a rank's description is malformed";
  }
  return "unknown";
}

/// What one rank says about its call at initialisation (all-gathered; plain 64-bit words).
struct RankShape {
  static constexpr std::int64_t current_version = 0x7373'0001;  // changes whenever the layout does
  std::int64_t version = current_version;
  std::int64_t rank = 0;
  std::int64_t world = 0;
  std::int64_t local_status = 0;  // a Status: success, or why this rank refused its own arguments
  std::int64_t rows = 0;
  std::int64_t local_cols = 0;
  std::int64_t global_cols = 0;
  std::int64_t dtype = 0;          // a DType
  std::int64_t path = 0;           // the ShardedPath asked for
  std::int64_t device_path_ok = 0; // 1 when this rank can run nccl_device (its LSA team is the whole
                                   // communicator, clusters launch, its share fits one cluster)
  std::int64_t resident_clusters = 0;  // clusters of the device plan co-resident on this GPU (0: unknown)
  std::int64_t sm_count = 0;
  std::int64_t exchange = 0;       // the DeviceExchange asked for
  std::int64_t reserved[3] = {0, 0, 0};
};
static_assert(sizeof(RankShape) == 16 * sizeof(std::int64_t), "RankShape is all-gathered as 16 words");

/// The verdict every rank reaches from the same table of `world` entries (index = rank).
inline ShardAgreement check_agreement(const RankShape* table, int world) noexcept {
  if (table == nullptr || world < 1) return ShardAgreement::bad_table;
  for (int r = 0; r < world; ++r) {
    const RankShape& s = table[r];
    if (s.version != RankShape::current_version || s.rank != r || s.world != world) return ShardAgreement::bad_table;
  }
  for (int r = 0; r < world; ++r)
    if (table[r].local_status != static_cast<std::int64_t>(Status::success)) return ShardAgreement::local_refusal;
  std::int64_t sum = 0;
  for (int r = 0; r < world; ++r) {
    const RankShape& s = table[r];
    if (s.rows != table[0].rows) return ShardAgreement::rows_differ;
    if (s.global_cols != table[0].global_cols) return ShardAgreement::total_cols_differ;
    if (s.dtype != table[0].dtype) return ShardAgreement::dtype_differs;
    if (s.path != table[0].path || s.exchange != table[0].exchange) return ShardAgreement::path_differs;
    if (s.local_cols < 0 || s.local_cols > INT64_MAX - sum) return ShardAgreement::cols_do_not_add_up;
    sum += s.local_cols;
  }
  if (sum != table[0].global_cols) return ShardAgreement::cols_do_not_add_up;
  return ShardAgreement::agreed;
}

/// The first column of `rank`'s shard in the global row: the widths of the ranks before it.
inline std::int64_t shard_offset(const RankShape* table, int rank) noexcept {
  std::int64_t offset = 0;
  for (int r = 0; r < rank; ++r) offset += table[r].local_cols;
  return offset;
}

inline std::int64_t max_local_cols(const RankShape* table, int world) noexcept {
  std::int64_t m = 0;
  for (int r = 0; r < world; ++r) m = table[r].local_cols > m ? table[r].local_cols : m;
  return m;
}

// ---------------------------------------------------------------------------------------------------
// nccl_host: rows cut into chunks as the local phases of local_fusion do (rss/planner/row_split.hpp); every
// (row, chunk) partial is all-gathered as is, and each block combines the world * chunks partials of its row
// in rank order (so every rank gets the same bits).

using HostGeometry = ChunkGeometry;

namespace detail::sharded {
inline constexpr int host_threads = 512;  // local_fusion's: the host path's first phase is its stats kernel
}  // namespace detail::sharded

/// Chunks for rows of up to `max_cols` local columns on a GPU of `sm_count` SMs (the same on every rank).
constexpr HostGeometry plan_host_geometry(std::int64_t rows, std::int64_t max_cols, int sm_count) noexcept {
  return plan_chunks(rows, max_cols, sm_count);
}

// ---------------------------------------------------------------------------------------------------
// nccl_device: one thread-block cluster per row on every rank, the rank's share of the row held in
// registers, split and configured exactly as the forward cluster_row splits a row of that length
// (rss/planner/cluster_plan.hpp). Block b of every rank meets its peers' block b, so the grid is the same
// everywhere and must be co-resident on every GPU (a block spinning for a peer block that can never start
// would hang both GPUs): ClusterGrid::resident_looping.

using ShardedDeviceConfig = ClusterConfig;
using ShardedDevicePlan = ClusterPlan;

/// The configuration for a share of `max_cols` elements: the forward's default (cluster_size 0 when no
/// cluster of up to max_cluster_size blocks holds the share).
constexpr ShardedDeviceConfig plan_device_config(std::int64_t max_cols, DType dtype, int max_cluster_size) noexcept {
  return default_cluster_config(max_cols, dtype, max_cluster_size);
}

/// Plans the device path from the widest share: not_admissible when no cluster holds it or nothing is
/// co-resident; grid = min(rows, resident clusters) clusters, rows looped over.
inline Status plan_device_path(std::int64_t rows, std::int64_t max_cols, DType dtype, int max_cluster_size,
                               std::int64_t resident_clusters, ShardedDevicePlan* out) noexcept {
  if (out == nullptr) return Status::null_pointer;
  ShardedDevicePlan p;
  RSS_TRY(plan_clusters(
      rows, max_cols, dtype, max_cluster_size, plan_device_config(max_cols, dtype, max_cluster_size), nullptr,
      [](const ClusterConfig&) { return true; }, [](const ClusterConfig&) { return true; }, &p));
  RSS_TRY(admit_cluster_plan(p, ClusterGrid::resident_looping, [&](int* resident) {
    *resident = resident_clusters > INT32_MAX ? INT32_MAX : static_cast<int>(resident_clusters);
    return Status::success;
  }));
  *out = p;
  return Status::success;
}

/// How the device path's blocks exchange their per-row partials with their peers.
enum class DeviceExchange : int {
  flags,        // each 8-byte word carries 4 bytes of data and the row's sequence number (NCCL's LL idea):
                // one NVLink store per word, the reader polls its own memory, no fence at all
  lsa_barrier,  // 16-byte slots, then ncclLsaBarrierSession::sync (release/acquire at system scope)
};

constexpr const char* device_exchange_name(DeviceExchange e) noexcept {
  return e == DeviceExchange::flags ? "flags" : e == DeviceExchange::lsa_barrier ? "lsa_barrier" : "unknown";
}

/// Ranks whose partials one block can hold (shared memory); larger LSA teams take the host path.
inline constexpr int max_device_world = 64;

/// Symmetric-window layout of the device path. Block b of rank r pushes into slot [b][r] of every rank's
/// window: lsa_barrier uses a 16-byte statistics slot and a 16-byte sum slot, flags four 8-byte words
/// (max, low and high halves of the sum of squares, sum), each with the sequence number. Each block also
/// keeps its sequence counter (8 bytes) in its own window between launches.
struct DeviceWindowLayout {
  std::int64_t stats_offset = 0;  // bytes
  std::int64_t sums_offset = 0;
  std::int64_t flags_offset = 0;
  std::int64_t counters_offset = 0;
  std::int64_t bytes = 0;
};

constexpr DeviceWindowLayout device_window_layout(std::int64_t grid_blocks, int world) noexcept {
  const std::int64_t slots = grid_blocks * world * 16;
  const std::int64_t flags = grid_blocks * world * 32;
  return {0, slots, 2 * slots, 2 * slots + flags, 2 * slots + flags + grid_blocks * 8};
}

}  // namespace rss
