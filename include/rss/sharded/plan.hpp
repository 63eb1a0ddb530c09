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
// nccl_host: rows cut into chunks as the local phases of local_fusion do; every (row, chunk) partial is
// all-gathered as is, and each block combines the world * chunks partials of its row in rank order
// (so every rank gets the same bits).

struct HostGeometry {
  std::int64_t chunks = 0;       // chunks per row, the same on every rank
  std::int64_t chunk_elems = 0;  // a multiple of 8 elements, so every chunk keeps the row's alignment
};

namespace detail::sharded {
inline constexpr int host_threads = 512;
inline constexpr std::int64_t min_chunk_elems = 4096;  // below this a block's fixed cost dominates
inline constexpr int host_blocks_per_sm = 4;           // 512 threads: 4 blocks fill an SM
}  // namespace detail::sharded

/// Chunks for rows of up to `max_cols` local columns on a GPU of `sm_count` SMs.
constexpr HostGeometry plan_host_geometry(std::int64_t rows, std::int64_t max_cols, int sm_count) noexcept {
  using namespace detail::sharded;
  if (rows <= 0 || max_cols <= 0) return {1, 8};
  const std::int64_t target = static_cast<std::int64_t>(sm_count > 0 ? sm_count : 1) * host_blocks_per_sm;
  std::int64_t chunks = (target + rows - 1) / rows;
  const std::int64_t most = (max_cols + min_chunk_elems - 1) / min_chunk_elems;
  if (chunks > most) chunks = most;
  if (chunks < 1) chunks = 1;
  std::int64_t chunk = (max_cols + chunks - 1) / chunks;
  chunk = (chunk + 7) / 8 * 8;
  return {(max_cols + chunk - 1) / chunk, chunk};
}

// ---------------------------------------------------------------------------------------------------
// nccl_device: one thread-block cluster per row on every rank, the rank's share of the row held in
// registers (as cluster_row does on one GPU). Block b of every rank meets its peers' block b at LSA
// barrier b, so the grid is the same everywhere and must be co-resident on every GPU (a block spinning
// at a barrier for a peer block that can never start would hang both GPUs).

struct ShardedDeviceConfig {
  int threads = 0;           // 256 or 512
  int elems_per_thread = 0;  // 8, 16 or 32 (whole 16-byte vectors for every storage type)
  int cluster_size = 0;      // 1..max_cluster_size; 0: no cluster holds the share
};

inline constexpr int sharded_device_threads[] = {256, 512};
inline constexpr int sharded_device_elems[] = {8, 16, 32};

constexpr std::int64_t sharded_cluster_chunk(std::int64_t cols, int cluster_size) noexcept {
  const std::int64_t share = (cols + cluster_size - 1) / cluster_size;
  return (share + 7) / 8 * 8;
}

/// The configuration for a share of `max_cols` elements: 64 bytes per thread while the share fits one
/// block of 512 threads, else 128 bytes (at most 32 elements), in the fewest blocks; 256 threads when
/// they hold a block's part, and then the fewest elements per thread that do. Every part of a block
/// starts at a multiple of 8 elements.
constexpr ShardedDeviceConfig plan_device_config(std::int64_t max_cols, DType dtype, int max_cluster_size) noexcept {
  if (max_cols <= 0) return {256, 8, 1};
  const int bytes = dtype_bytes(dtype);
  int per_thread = 64 / bytes;
  if (max_cols * bytes > 512 * 64) per_thread = 128 / bytes < 32 ? 128 / bytes : 32;
  for (int c = 1; c <= max_cluster_size; ++c) {
    const std::int64_t chunk = sharded_cluster_chunk(max_cols, c);
    if (chunk > 512 * static_cast<std::int64_t>(per_thread)) continue;
    const int threads = chunk <= 256 * static_cast<std::int64_t>(per_thread) ? 256 : 512;
    for (const int e : sharded_device_elems) {
      if (chunk <= static_cast<std::int64_t>(threads) * e) return {threads, e, c};
    }
  }
  return {};
}

struct ShardedDevicePlan {
  ShardedDeviceConfig config{};
  std::int64_t chunk_elems = 0;  // elements of a row per block
  std::int64_t grid_blocks = 0;  // clusters * cluster_size
};

/// Plans the device path: not_admissible when no cluster holds the widest share or nothing is
/// co-resident; grid = min(rows, resident clusters) clusters, rows looped over.
inline Status plan_device_path(std::int64_t rows, std::int64_t max_cols, DType dtype, int max_cluster_size,
                               std::int64_t resident_clusters, ShardedDevicePlan* out) noexcept {
  if (out == nullptr) return Status::null_pointer;
  if (rows < 0 || max_cols < 0) return Status::negative_size;
  const ShardedDeviceConfig c = plan_device_config(max_cols, dtype, max_cluster_size);
  if (c.cluster_size == 0) return Status::not_admissible;
  ShardedDevicePlan p;
  p.config = c;
  p.chunk_elems = sharded_cluster_chunk(max_cols > 0 ? max_cols : 1, c.cluster_size);
  if (resident_clusters < 1) return Status::not_admissible;
  const std::int64_t clusters = rows < resident_clusters ? rows : resident_clusters;
  p.grid_blocks = clusters * c.cluster_size;
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
