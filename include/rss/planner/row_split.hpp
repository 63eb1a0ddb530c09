#pragma once
// The one vocabulary for splitting rows over blocks and clusters, used by every planner: the forward's
// strategies, the backward's and the sharded paths. Pure host C++: no CUDA headers, testable without a GPU.
//
// Two ways to split a row:
//  - chunks: a row is cut into chunks of at most chunk_elems elements, each handled by its own block, whose
//    partial results meet in global memory (local_fusion, backward two_pass, sharded nccl_host);
//  - clusters: one thread-block cluster per row, block r of it owns elements [r * chunk, (r + 1) * chunk), and
//    its thread t keeps elems_per_thread of them on chip (cluster_row forward and backward, sharded
//    nccl_device, which splits a rank's share the same way).
// Either way every chunk is a multiple of 8 elements (whole 16-byte vectors for every storage type), so a
// row's alignment holds in every block.
#include <cstdint>
#include <initializer_list>
#include <type_traits>

#include "rss/device_info.hpp"
#include "rss/planner/occupancy_model.hpp"
#include "rss/status.hpp"
#include "rss/strategy.hpp"
#include "rss/types.hpp"

namespace rss {

/// Elements every chunk is a multiple of: 16 bytes for 2-byte types, 32 for fp32.
inline constexpr std::int64_t chunk_multiple = 8;
/// The largest 1-D grid a launch takes.
inline constexpr std::int64_t max_grid_blocks = 2147483647;

constexpr std::int64_t round_up_to_chunk_multiple(std::int64_t elems) noexcept {
  return (elems + chunk_multiple - 1) / chunk_multiple * chunk_multiple;
}

/// Elements per block when a row of `cols` is split over `cluster_size` blocks.
constexpr std::int64_t cluster_chunk(std::int64_t cols, int cluster_size) noexcept {
  return round_up_to_chunk_multiple(cols / cluster_size + (cols % cluster_size != 0 ? 1 : 0));
}

/// Blocks of a grid with one cluster per row, at most the grid limit (further rows are looped over).
constexpr std::int64_t cluster_grid_blocks(std::int64_t rows, int cluster_size) noexcept {
  const std::int64_t max_clusters = max_grid_blocks / cluster_size;
  return (rows < max_clusters ? rows : max_clusters) * cluster_size;
}

// ---------------------------------------------------------------------------------------------------
// Chunks.

struct ChunkGeometry {
  std::int64_t chunks = 1;       // chunks per row
  std::int64_t chunk_elems = 8;  // a multiple of chunk_multiple
};

/// A chunk below this is not worth a block of its own: the block's fixed cost would dominate.
inline constexpr std::int64_t min_chunk_elems = 4096;
/// Blocks per SM the chunking aims for (blocks of 512 threads: 4 fill an SM's 2048 threads).
inline constexpr int chunk_blocks_per_sm = 4;

/// Most chunks a row of `cols` is cut into: sizes workspaces independently of the device.
constexpr std::int64_t max_row_chunks(std::int64_t cols) noexcept {
  return (cols + min_chunk_elems - 1) / min_chunk_elems;
}

/// Enough chunks per row that rows x chunks blocks fill a GPU of `sm_count` SMs, none under min_chunk_elems.
constexpr ChunkGeometry plan_chunks(std::int64_t rows, std::int64_t cols, int sm_count) noexcept {
  if (rows <= 0 || cols <= 0) return {};
  const std::int64_t target = static_cast<std::int64_t>(sm_count > 0 ? sm_count : 1) * chunk_blocks_per_sm;
  std::int64_t chunks = (target + rows - 1) / rows;
  if (chunks > max_row_chunks(cols)) chunks = max_row_chunks(cols);
  if (chunks < 1) chunks = 1;
  const std::int64_t chunk = round_up_to_chunk_multiple((cols + chunks - 1) / chunks);
  return {(cols + chunk - 1) / chunk, chunk};
}

// ---------------------------------------------------------------------------------------------------
// Clusters: the instantiated configurations, the default rule, the plan.

/// The configurations a kernel family is compiled for: every (threads, elems per thread) pair of two
/// lists. The fit check and the kernel table (rss/agent/kernel_table.cuh) are both generated from it.
template <int... Values>
struct IntList {
  static constexpr int count = sizeof...(Values);
  static constexpr int values[count] = {Values...};
  static constexpr bool has(int v) noexcept { return ((v == Values) || ...); }
};

/// Every (threads, elems) pair of a grid's two lists.
struct AllPairs {
  static constexpr bool allows(int, int) noexcept { return true; }
};

/// Pairs = which pairs of the two lists are instantiated (a grid may leave out pairs that no plan wants).
template <class Threads, class Elems, class Pairs = AllPairs>
struct ConfigGrid {
  using ThreadList = Threads;
  using ElemList = Elems;
  static constexpr bool has(int threads, int elems) noexcept {
    return Threads::has(threads) && Elems::has(elems) && Pairs::allows(threads, elems);
  }
};

/// Calls f(std::integral_constant<int, V>{}) for the value of List equal to `v`; returns what f returns, or
/// `none` when no value is. This is how a runtime configuration meets its compile-time instantiation.
template <class R, class F, int... Values>
constexpr R visit_value(IntList<Values...>, int v, R none, F&& f) {
  R result = none;
  (void)((v == Values ? (result = f(std::integral_constant<int, Values>{}), true) : false) || ...);
  return result;
}

/// f(threads constant, elems constant) for the pair of Grid equal to (threads, elems); `none` if absent.
template <class Grid, class R, class F>
constexpr R visit_config(int threads, int elems, R none, F&& f) {
  return visit_value(typename Grid::ThreadList{}, threads, none, [&](auto th) {
    return visit_value(typename Grid::ElemList{}, elems, none, [&](auto el) {
      if constexpr (Grid::has(std::decay_t<decltype(th)>::value, std::decay_t<decltype(el)>::value)) {
        return f(th, el);
      } else {
        return none;  // a pair the grid leaves out: never instantiated
      }
    });
  });
}

/// The blocks of `threads` that must share an SM for each thread to get at most `registers` registers: what a
/// kernel's __launch_bounds__ asks of ptxas for that budget. The occupancy model's register and thread limits on
/// Hopper's SM (65536 registers, 2048 threads: the same on every architecture rss compiles for).
constexpr int register_budget_blocks(int threads, int registers) noexcept {
  const int blocks = modeled_blocks_per_sm(h100_sxm_device_info(), threads, registers, 0);
  return blocks > 1 ? blocks : 1;
}

/// How much of a row's bounds and alignment a kernel instantiation tests. The host picks the cheapest one a
/// call allows (row_fit): every test costs registers, and registers decide how many blocks share an SM.
enum class Fit : int {
  checked,  // any width, any alignment: tests per element, scalar accesses where a row is misaligned
  vectors,  // every matrix 16-byte aligned, rows of whole vectors: one test per vector
  exact,    // also every block's share is exactly threads * elems_per_thread elements: no tests at all
};

/// The forward row program's registers a thread for a share of `elems` in registers (its register budget:
/// register_budget_blocks of this). A share without bounds tests (`exact`, `vectors`) fits in elems + 24: x 16 at
/// 40, 6 blocks of 256 or 3 of 512 per SM instead of 5 or 2, which measured faster for 16-bit storage and for 512
/// threads, but 2% slower for fp32 at 256 (4096 x 4096): that one keeps elems + 32, as bounds tests need
/// (bench/NOTES.md). Never below 40. `writes_statistics`: the instantiation that also writes the row's statistics.
/// A 16-bit `vectors` share of 32 in 256-thread blocks without statistics takes 48 (five blocks per SM, where 56
/// gave four): 32 rows of 128256 in 16-block clusters are then one wave, as the few-row skeleton that meets that
/// shape's target has them; `exact` spilled 50 bytes at 48 and the statistics' write 4 (bench/NOTES.md).
/// At every budget here ptxas (sm_90, CUDA 13.0) spills no register in any cluster_row instantiation.
constexpr int forward_registers(int threads, int elems, Fit fit, int storage_bytes, bool writes_statistics = false) noexcept {
  if (fit == Fit::vectors && !writes_statistics && storage_bytes == 2 && threads == 256 && elems == 32) return 48;
  // 128-thread blocks (16-bit rows of 2K-4K elements) hold 32 elements a thread in elems + 32 registers (eight
  // blocks): at elems + 24 ptxas spills there (bench/NOTES.md, the many-row geometry); so does the statistics'
  // write in 512-thread blocks of 16 elements (bf16 at 40 registers), which then take two blocks per SM.
  const bool tight = fit != Fit::checked && threads > 128 && (storage_bytes == 2 || threads >= 512) &&
                     !(writes_statistics && threads >= 512 && elems == 16);
  // A checked 16-bit share of 16 or more elements spills at elems + 32 (since the share keeps 32-bit words, not
  // elements: the checked loads and stores need the rest); it takes elems + 40, elems + 48 writing the
  // statistics (128 x 32 fp16 spilled 4 bytes at 72). 512 x 32 then takes one block per SM.
  const bool checked16 = fit == Fit::checked && storage_bytes == 2 && elems >= 16;
  const int registers = elems + (tight ? 24 : checked16 ? (writes_statistics ? 48 : 40) : 32);
  return registers > 40 ? registers : 40;
}

/// The forward row program's registers a thread for a share in a shared-memory tile (its tile kernels' budget:
/// register_budget_blocks of this). Compiled once per exponential form (RowScale::visit), ptxas gave unbounded
/// `vectors` tiles 40-64 registers where they had 32 (the statistics-writing ones 64: two 512-thread blocks per SM
/// where a 64 KB tile admits three), and `checked` ones up to 96. Spill-free: 32 for 16-bit `vectors` tiles, 40
/// for fp32's and the statistics-writing ones (at 32 they spill 8 bytes), 64 for `checked` ones (at 40 they spill
/// 16-32 bytes).
constexpr int forward_tile_registers(Fit fit, int storage_bytes, bool writes_statistics) noexcept {
  if (fit == Fit::checked) return 64;
  return storage_bytes == 2 && !writes_statistics ? 32 : 40;
}

/// One step of a default rule: the fewest blocks of `min_threads` to `max_threads` threads holding at most
/// `cap` elements each, from clusters of `min_cluster` blocks up to `max_cluster` (0: the device's limit).
struct SplitStep {
  int cap = 0;
  int max_threads = 512;
  int min_cluster = 1;
  int max_cluster = 0;
  int min_threads = 256;
};

/// A row program's planning constants: its instantiated configurations and its default rule, tried step
/// by step. Within a step: the fewest blocks; the fewest threads (from min_threads, doubling) that hold a block's
/// share; then the fewest elements per thread that do (and hold whole 16-byte vectors).
struct SplitRule {
  SplitStep steps[6]{};
  int step_count = 0;
};

/// The first configuration `rule` gives for rows of `cols`, with elements from `elems` (count of them);
/// cluster_size 0 when none holds the row in clusters of up to `max_cluster_size` blocks.
constexpr ClusterConfig apply_split_rule(const SplitRule& rule, const int* elems, int elem_count, std::int64_t cols,
                                         DType dtype, int max_cluster_size) noexcept {
  const int vector_width = 16 / dtype_bytes(dtype);
  for (int s = 0; s < rule.step_count; ++s) {
    const SplitStep& step = rule.steps[s];
    const int last = step.max_cluster > 0 && step.max_cluster < max_cluster_size ? step.max_cluster : max_cluster_size;
    for (int c = step.min_cluster; c <= last; ++c) {
      const std::int64_t chunk = cluster_chunk(cols, c);
      if (chunk > static_cast<std::int64_t>(step.max_threads) * step.cap) continue;
      int threads = step.min_threads;  // the fewest threads, doubling, whose share holds the block's chunk
      while (threads < step.max_threads && chunk > static_cast<std::int64_t>(threads) * step.cap) threads *= 2;
      for (int i = 0; i < elem_count; ++i) {
        const int e = elems[i];
        if (e % vector_width == 0 && chunk <= static_cast<std::int64_t>(threads) * e) return {threads, e, c};
      }
    }
  }
  return {};
}

/// The default rules' exception for a few long rows: rows longer than 8 blocks of 256 x 32 hold (more than 65536
/// elements), which the rules give 512-thread blocks in clusters of up to 8, spread over 16 blocks of 256 threads
/// (at most 32 elements each) while those clusters fill at most half the SMs. Each SM then holds half the row's
/// bytes, so its loads, exponentials and stores halve, on SMs that would otherwise stay idle. Measured
/// (bench/NOTES.md): the backward's H200 pilot, 1, 2 and 4 x 131072 0.3-1.2 us faster in fp32 and bf16, 8 x 131072
/// (128 blocks) 3-5 us slower; the forward's 1 x 131072, 0.3-0.7 us of events faster (fp32 and bf16 on H100s,
/// fp32 on an H200). `c` unchanged where the exception does not apply; `elems` as for apply_split_rule.
constexpr ClusterConfig spread_few_rows(const ClusterConfig& c, const int* elems, int elem_count, std::int64_t rows,
                                        std::int64_t cols, DType dtype, int max_cluster_size, int sm_count) noexcept {
  const bool few_rows = rows >= 1 && rows <= sm_count / (2 * max_cluster_blocks);
  const bool past_eight_blocks = cols > static_cast<std::int64_t>(portable_cluster_size) * 256 * 32;
  if (c.threads != 512 || c.cluster_size > portable_cluster_size || max_cluster_size < max_cluster_blocks ||
      !few_rows || !past_eight_blocks) {
    return c;
  }
  SplitRule wide;
  wide.steps[wide.step_count++] = {32, 256, max_cluster_blocks, max_cluster_blocks};
  const ClusterConfig spread = apply_split_rule(wide, elems, elem_count, cols, dtype, max_cluster_size);
  return spread.cluster_size > 0 ? spread : c;
}

/// Whether `c` is in `Grid` (residence aside) and holds a row of `cols` elements of `dtype`.
template <class Grid>
constexpr bool config_holds_row(const ClusterConfig& c, std::int64_t cols, DType dtype, int max_cluster_size) noexcept {
  if (!Grid::has(c.threads, c.elems_per_thread)) return false;
  if (c.elems_per_thread % (16 / dtype_bytes(dtype)) != 0) return false;
  if (c.cluster_size < 1 || c.cluster_size > max_cluster_size) return false;
  return cluster_chunk(cols, c.cluster_size) <= static_cast<std::int64_t>(c.threads) * c.elems_per_thread;
}

/// A row split into clusters: the kernel contract of every cluster kernel (see the top of this file).
/// A tile kernel starts its tiles at the first 128-byte boundary of its dynamic shared memory, which begins right
/// after the kernel's static shared memory (576 or 752 bytes: 64- or 16-byte aligned). Aligned, the bulk copies into
/// the tiles ran faster: 4096 x 32768 16-bit 1.2-1.6%, 64 x 131072 fp32 4.5% (bench/NOTES.md).
inline constexpr std::int64_t tile_alignment = 128;

struct ClusterPlan {
  std::int64_t rows = 0;
  std::int64_t cols = 0;          // the elements split over a cluster (a rank's share for sharded rows)
  ClusterConfig config{};
  std::int64_t chunk_elems = 0;   // elements of a row per block
  std::int64_t grid_blocks = 0;   // clusters * cluster_size; 0 when rows == 0 or cols == 0
  std::int64_t shared_bytes = 0;  // dynamic shared memory per block: one tile of the block's share, as stored,
                                  // for RowResidence::shared_memory, two when pipelined, plus tile_alignment
                                  // bytes; else 0
};

/// Plans one cluster per row (rows beyond the grid limit looped over). `preferred` (may be null: the
/// default rule) comes from a tuning table or a caller; `fits` says whether a configuration is
/// instantiated and holds the row. Returns null_pointer, negative_size, size_overflow, unsupported_device
/// (max_cluster_size < 1: no clusters), invalid_strategy (a preference that is not instantiated: threads,
/// elements or residence not compiled) or not_admissible (the preference, or every configuration, is too
/// small for the row); a preference is used as given or refused, never replaced. *out is untouched on failure.
template <class Fits, class Instantiated>
Status plan_clusters(std::int64_t rows, std::int64_t cols, DType dtype, int max_cluster_size, ClusterConfig fallback,
                     const ClusterConfig* preferred, Fits&& fits, Instantiated&& instantiated, ClusterPlan* out) noexcept {
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
  if (max_cluster_size < 1) return Status::unsupported_device;
  ClusterConfig c = fallback;
  if (preferred != nullptr) {
    if (!instantiated(*preferred)) return Status::invalid_strategy;
    if (!fits(*preferred)) return Status::not_admissible;
    c = *preferred;
  }
  if (c.cluster_size == 0) return Status::not_admissible;
  plan.config = c;
  plan.chunk_elems = cluster_chunk(cols, c.cluster_size);
  plan.grid_blocks = cluster_grid_blocks(rows, c.cluster_size);
  const int tiles = c.residence == RowResidence::shared_memory ? 1 : c.residence == RowResidence::registers ? 0 : 2;
  plan.shared_bytes = tiles * plan.chunk_elems * dtype_bytes(dtype) + (tiles > 0 ? tile_alignment : 0);
  *out = plan;
  return Status::success;
}

/// Which clusters a kernel's grid holds.
enum class ClusterGrid : int {
  one_per_row,       // one cluster per row (up to the grid limit): clusters come and go as the GPU has room
  resident_looping,  // only the clusters that are resident at once, each looping over rows: a pipelined
                     // kernel overlaps rows only by looping, and the sharded kernel's blocks wait for peers
};

/// Admits a plan on a device: `resident_clusters(int*)` asks the runtime how many clusters of the plan's
/// kernel are resident at once (a Status back). not_admissible when not even one is; a resident_looping grid
/// is capped to them.
template <class ResidentClusters>
Status admit_cluster_plan(ClusterPlan& plan, ClusterGrid grid, ResidentClusters&& resident_clusters) noexcept {
  if (plan.grid_blocks == 0) return Status::success;
  int resident = 0;
  RSS_TRY(resident_clusters(&resident));
  if (resident < 1) return Status::not_admissible;
  if (grid == ClusterGrid::resident_looping && plan.rows > resident) {
    plan.grid_blocks = static_cast<std::int64_t>(resident) * plan.config.cluster_size;
  }
  return Status::success;
}

/// The cheapest Fit a call allows: `pointers` are every matrix the kernel reads or writes, `lds` their
/// leading dimensions. exact needs `exact_instantiated` and a row that fills every block's share.
inline Fit row_fit(std::initializer_list<const void*> pointers, std::initializer_list<std::int64_t> lds, DType dtype,
                   const ClusterPlan& plan, bool exact_instantiated) noexcept {
  const int vector_width = 16 / dtype_bytes(dtype);
  std::uintptr_t bits = 0;
  for (const void* p : pointers) bits |= reinterpret_cast<std::uintptr_t>(p);
  bool aligned = bits % 16 == 0 && plan.cols % vector_width == 0;
  for (const std::int64_t ld : lds) aligned = aligned && ld % vector_width == 0;
  if (!aligned) return Fit::checked;
  const ClusterConfig& c = plan.config;
  const std::int64_t share = static_cast<std::int64_t>(c.threads) * c.elems_per_thread;
  const bool exact = plan.chunk_elems == share && plan.cols == share * c.cluster_size;
  return exact && exact_instantiated ? Fit::exact : Fit::vectors;
}

}  // namespace rss
