#pragma once
// Strategies megakernel_grid, megakernel_row and block_row, and the megakernel's two controls: one
// cooperative launch per admitted batch of rows runs all three phases. Each block retains its first tile of the row in
// dynamic shared memory from phase 1 to phase 3, so x is read once and y written once; only small
// per-block partials cross blocks, through the workspace. The planner (rss/planner) decides the
// geometry and admits only co-resident grids, which both barriers need to terminate.
//
//   megakernel_grid          grid-wide barrier between phases, exps retained
//   megakernel_row           row-scoped barrier (only a row's blocks wait for each other), exps retained
//   controls of megakernel_grid (rss::MegakernelControl):
//     no_retention           phases 2 and 3 re-read x and recompute exps
//     ordinary_launch        the three phases as three ordinary launches per batch (nothing retained)
//   block_row                one block per row (its row retained in shared memory), one ordinary launch
//                            whose persistent grid loops over the rows: no barrier, no co-residency need
#include <cuda_runtime.h>

#include <cstdint>

#include <atomic>
#include <memory>
#include <new>

#include "rss/detail/launch.cuh"
#include "rss/detail/occupancy.cuh"
#include "rss/storage.cuh"
#include "rss/workspace.hpp"
#include "rss/phases/exp_sum.cuh"
#include "rss/phases/normalize.cuh"
#include "rss/phases/row_stats.cuh"
#include "rss/planner/megakernel_plan.hpp"
#include "rss/strategies/call.cuh"
#include "rss/sync/grid_barrier.cuh"
#include "rss/sync/row_barrier.cuh"

namespace rss::detail {
namespace megakernel {

inline constexpr int threads = 512;

enum class Sync { grid, row, none };

/// The kernel's view of a plan and of its workspace buffers.
struct Params {
  std::int64_t cols;
  std::int64_t ld_x;            // row strides of x and y, in elements
  std::int64_t ld_y;
  std::int64_t first_row;       // first row of this launch
  std::int64_t rows;            // rows in this launch
  std::int64_t tile_elems;
  std::int64_t tiles_per_row;
  int blocks_per_row;
  RowStatsPartial* stats;       // [rows in launch][blocks_per_row]
  float* sums;                  // [rows in launch][blocks_per_row]
  RowBarrierState* barriers;    // [rows in launch], row-scoped barrier only
  RowStatistics* row_stats;     // [all rows] of the call, or null: not written
};

/// Phases first_phase..last_phase (1..3) of the rows of one launch. Block k of a row's group owns
/// tiles k, k + blocks_per_row, ...; with Retain its first tile stays in shared memory across phases.
/// A grid with fewer groups than rows (block_row's persistent grid) loops over rows; a grid with
/// barriers has exactly one group per row, so every block makes the same single pass.
template <class T, Sync S, bool Retain>
__global__ void __launch_bounds__(threads) kernel(const T* x, T* y, Params p,
                                                  int first_phase, int last_phase) {
  extern __shared__ float4 retained_storage[];  // float4: 16-byte alignment for the tile
  float* retained = reinterpret_cast<float*>(retained_storage);
  __shared__ PhaseScratch<threads> storage;

  const int bpr = p.blocks_per_row;
  const std::int64_t group = blockIdx.x / bpr;  // this block's row group: its partials and barrier slot
  const int k = static_cast<int>(blockIdx.x % bpr);
  RowStatsPartial* group_stats = p.stats + group * bpr;
  float* group_sums = p.sums + group * bpr;
  // One block per row needs no cross-block partials: its block-wide totals are the row's.
  const bool row_in_block = bpr == 1 && first_phase == 1 && last_phase == 3;
  const auto tile_size = [&](std::int64_t t) { return min(p.tile_elems, p.cols - t * p.tile_elems); };
  const auto barrier = [&] {
    if constexpr (S == Sync::grid) GridBarrier{}.wait();
    if constexpr (S == Sync::row) RowBarrier(p.barriers + group, static_cast<unsigned>(bpr)).wait();
  };

  for (std::int64_t local_row = group; local_row < p.rows; local_row += gridDim.x / bpr) {
    const std::int64_t row = p.first_row + local_row;
    const T* x_row = x + row * p.ld_x;
    T* y_row = y + row * p.ld_y;
    RowStatsPartial row_stats = RowStatsPartial::identity();
    if (first_phase <= 1) {
      for (std::int64_t t = k; t < p.tiles_per_row; t += bpr) {
        float* keep = (Retain && t == k) ? retained : nullptr;
        row_stats = CombineRowStats{}(row_stats, BlockRowStats<threads>::tile(x_row + t * p.tile_elems,
                                                                            tile_size(t), storage.stats, keep));
      }
      if (!row_in_block) {
        if (threadIdx.x == 0) group_stats[k] = row_stats;
        if (last_phase == 1) continue;
        barrier();
      }
    }
    if (!row_in_block) row_stats = BlockRowStats<threads>::combine(group_stats, bpr, storage.stats);
    const RowScale scale = make_row_scale(row_stats, p.cols);

    double sum = 0.0;  // a row may have tens of thousands of tiles per block (block_row): sum them wide
    if (first_phase <= 2) {
      for (std::int64_t t = k; t < p.tiles_per_row; t += bpr) {
        if (Retain && t == k) {
          sum += BlockExpSum<threads>::retained_tile(retained, tile_size(t), scale, storage.sum);
        } else {
          sum += BlockExpSum<threads>::tile(x_row + t * p.tile_elems, tile_size(t), scale, storage.sum);
        }
      }
      if (!row_in_block) {
        if (threadIdx.x == 0) group_sums[k] = static_cast<float>(sum);
        if (last_phase == 2) continue;
        barrier();
      }
    }
    if (!row_in_block) sum = BlockExpSum<threads>::combine(group_sums, bpr, storage.sum);
    const float total = static_cast<float>(sum);
    if (p.row_stats != nullptr && k == 0 && threadIdx.x == 0) p.row_stats[row] = RowStatistics{scale.max, scale.inv_rms, total};
    const float inv_sum = 1.0f / total;  // as a backward from these statistics forms it
    for (std::int64_t t = k; t < p.tiles_per_row; t += bpr) {
      const std::int64_t offset = t * p.tile_elems;
      if (Retain && t == k) {
        BlockNormalize<threads>::retained_tile(retained, y_row + offset, tile_size(t), inv_sum);
      } else {
        BlockNormalize<threads>::tile(x_row + offset, y_row + offset, tile_size(t), scale, inv_sum);
      }
    }
    if (Retain) __syncthreads();  // the next row overwrites the retained tile
  }
}

/// What a strategy launches: the kernel instantiation and how.
template <class T>
struct Variant {
  void (*kernel)(const T*, T*, Params, int, int);
  const char* name;
  bool cooperative;
  bool three_launches;  // MegakernelControl::ordinary_launch: one ordinary launch per phase
  bool retains;         // keeps a tile of each row on chip (the controls re-read x instead)
};

template <class T>
Status variant_of(Strategy s, MegakernelControl control, Variant<T>* v) {
  if (control != MegakernelControl::none && s != Strategy::megakernel_grid) return Status::invalid_strategy;
  if (s == Strategy::megakernel_row) {
    *v = {kernel<T, Sync::row, true>, "megakernel::row", true, false, true};
  } else if (s == Strategy::block_row) {
    *v = {kernel<T, Sync::none, true>, "megakernel::block_row", false, false, true};
  } else if (s != Strategy::megakernel_grid) {
    return Status::invalid_strategy;
  } else if (control == MegakernelControl::no_retention) {
    *v = {kernel<T, Sync::grid, false>, "megakernel::grid_no_retention", true, false, false};
  } else if (control == MegakernelControl::ordinary_launch) {
    *v = {kernel<T, Sync::none, false>, "megakernel::phase", false, true, false};
  } else {
    *v = {kernel<T, Sync::grid, true>, "megakernel::grid", true, false, true};
  }
  return Status::success;
}

/// Blocks in one launch at most on device d: sizes the partial buffers without planning.
inline std::int64_t max_blocks_per_launch(const DeviceInfo& d) {
  return static_cast<std::int64_t>(d.sm_count) * d.max_blocks_per_sm;
}

struct Workspace {
  RowBarrierState* barriers;  // first, so that zeroing it is one small contiguous memset
  RowStatsPartial* stats;
  float* sums;

  static Workspace carve(WorkspaceCarver& carver, std::int64_t max_blocks) {
    Workspace w{};
    w.barriers = carver.take<RowBarrierState>(max_blocks);
    w.stats = carver.take<RowStatsPartial>(max_blocks);
    w.sums = carver.take<float>(max_blocks);
    return w;
  }
};

/// Orders the zeroing of megakernel_row's barrier counters (queued on the stream of prepare) before
/// the first run on any other stream. Once the zeroing is seen complete, runs pay nothing.
class CountersZeroed {
 public:
  CountersZeroed() = default;
  CountersZeroed(const CountersZeroed&) = delete;
  CountersZeroed& operator=(const CountersZeroed&) = delete;
  ~CountersZeroed() {
    if (event_ != nullptr) cudaEventDestroy(event_);
  }

  Status zero(void* counters, std::size_t bytes, cudaStream_t stream) noexcept {
    RSS_TRY(from_cuda(cudaMemsetAsync(counters, 0, bytes, stream)));
    RSS_TRY(from_cuda(cudaEventCreateWithFlags(&event_, cudaEventDisableTiming)));
    RSS_TRY(from_cuda(cudaEventRecord(event_, stream)));
    stream_ = stream;
    return Status::success;
  }

  Status order_before(cudaStream_t stream) const noexcept {
    if (stream == stream_ || done_.load(std::memory_order_acquire)) return Status::success;
    // A query is safe inside the caller's stream capture; only the capture mode forbids it.
    cudaStreamCaptureMode mode = cudaStreamCaptureModeRelaxed;
    RSS_TRY(from_cuda(cudaThreadExchangeStreamCaptureMode(&mode)));
    const cudaError_t err = cudaEventQuery(event_);
    (void)cudaThreadExchangeStreamCaptureMode(&mode);
    if (err == cudaSuccess) {
      done_.store(true, std::memory_order_release);
      return Status::success;
    }
    if (err != cudaErrorNotReady) return from_cuda(err);
    (void)cudaGetLastError();
    cudaStreamCaptureStatus capture = cudaStreamCaptureStatusNone;
    if (cudaStreamIsCapturing(stream, &capture) != cudaSuccess) (void)cudaGetLastError();
    // Inside a capture the zeroing becomes an external dependency of the caller's graph.
    const unsigned flags = capture == cudaStreamCaptureStatusActive ? cudaEventWaitExternal : cudaEventWaitDefault;
    return from_cuda(cudaStreamWaitEvent(stream, event_, flags));
  }

 private:
  cudaEvent_t event_ = nullptr;
  cudaStream_t stream_ = nullptr;
  mutable std::atomic<bool> done_{false};
};

template <class T>
struct Plan {
  MegakernelPlan geometry{};
  Variant<T> variant{};
  std::int64_t max_blocks = 0;
  std::shared_ptr<CountersZeroed> counters;  // megakernel_row, once prepared
};

/// Plans on device d, asking the driver's occupancy calculator about the very kernel that will run
/// (its registers and static shared memory included).
template <class T>
Status make_plan(Strategy strategy, MegakernelControl control, std::int64_t rows, std::int64_t cols,
                 const DeviceInfo& device, Plan<T>* plan) {
  Variant<T> v{};
  RSS_TRY(variant_of<T>(strategy, control, &v));
  DeviceInfo d = device;
  if (!v.cooperative) d.cooperative_launch = true;  // ordinary launches need no co-residency guarantee
  KernelFacts facts;
  RSS_TRY(kernel_facts(v.kernel, d, &facts));
  MegakernelRequest request;
  request.rows = rows;
  request.cols = cols;
  request.dtype = dtype_of<T>;
  request.threads = threads;
  request.static_shared_bytes = facts.static_shared;
  Status occupancy_status = Status::success;
  const auto occupancy = [&](std::size_t dynamic_bytes) -> int {
    if (dynamic_bytes > facts.max_dynamic) return 0;
    int blocks = 0;
    const Status s = blocks_per_sm(v.kernel, d, threads, dynamic_bytes, &blocks);
    if (!ok(s)) occupancy_status = s;
    return ok(s) ? blocks : 0;
  };
  MegakernelPlan geometry;
  const Status planned = strategy == Strategy::block_row ? plan_block_row(d, request, occupancy, &geometry)
                                                          : plan_megakernel(d, request, occupancy, &geometry);
  RSS_TRY(occupancy_status);
  RSS_TRY(planned);
  plan->geometry = geometry;
  plan->variant = v;
  plan->max_blocks = max_blocks_per_launch(device);
  return Status::success;
}

/// Issues the launches of a plan. The workspace's barrier states are zero or were left by a previous
/// call (both are valid states). A launch failing after an earlier one wrote rows of y returns
/// partial_output (rss::last_cuda_error() keeps the CUDA error).
template <class T>
Status launch_plan(const Plan<T>& plan, const T* x, T* y, RowStatistics* row_stats, const Layout& layout,
                   void* workspace, const Launcher& launch) {
  const MegakernelPlan& g = plan.geometry;
  const Variant<T>& v = plan.variant;
  WorkspaceCarver carver(workspace);
  const Workspace w = Workspace::carve(carver, plan.max_blocks);
  const std::int64_t kept = static_cast<std::int64_t>(g.blocks_per_row) * g.tile_elems;
  const std::int64_t evicted_elements = g.cols > kept ? (g.cols - kept) * g.rows : 0;
  if (launch.record != nullptr) {
    launch.record->evicted_tiles += g.evicted_tiles;
    launch.record->evicted_elements += evicted_elements;
  }
  // x once and y once, and the evicted tiles' x twice more; the controls retain nothing: x three times.
  const std::int64_t io = sizeof(T);
  launch.add_logical_bytes(v.retains ? g.rows * g.cols * io * 2 + evicted_elements * io * 2 : g.rows * g.cols * io * 4);
  bool wrote_y = false;
  const auto issue = [&](Status s, bool writes_y) {
    if (!ok(s)) return wrote_y ? Status::partial_output : s;
    wrote_y = wrote_y || writes_y;
    return s;
  };
  for (std::int64_t i = 0; i < g.launch_count; ++i) {
    const MegakernelLaunch l = g.launch(i);
    const Params p{g.cols,       layout.ld_x,     layout.ld_y,      l.first_row, l.row_count,
                   g.tile_elems, g.tiles_per_row, g.blocks_per_row, w.stats,     w.sums,
                   w.barriers,   row_stats};
    const auto grid = static_cast<unsigned>(l.grid_blocks);
    if (v.three_launches) {
      for (int phase = 1; phase <= 3; ++phase)
        RSS_TRY(issue(launch(v.name, v.kernel, grid, threads, 0, false, g.blocks_per_sm, x, y, p, phase, phase),
                      phase == 3));
    } else {
      RSS_TRY(issue(launch(v.name, v.kernel, grid, threads, g.dynamic_shared_bytes, v.cooperative, g.blocks_per_sm,
                           x, y, p, 1, 3),
                    true));
    }
  }
  return Status::success;
}

}  // namespace megakernel

/// Strategies megakernel_grid (with its controls), megakernel_row and block_row. Their workspace (a
/// few tens of KB: partial statistics and barrier states of one launch) depends on the device only.
template <Strategy S>
struct MegakernelStrategy {
  static constexpr Strategy id = S;
  template <class T>
  using Plan = megakernel::Plan<T>;

  template <class T>
  static Status workspace_bytes(std::int64_t, std::int64_t, const DeviceInfo& d, std::size_t* bytes) noexcept {
    return carved_bytes<megakernel::Workspace>(bytes, megakernel::max_blocks_per_launch(d));
  }
  template <class T>
  static Status make_plan(const Call<T>& c, const DeviceInfo& d, const Config& config, Plan<T>* plan) noexcept {
    return megakernel::make_plan<T>(S, config.control, c.layout.rows, c.layout.cols, d, plan);
  }
  /// megakernel_row: zeroes the workspace's barrier states on `stream`; runs on other streams are
  /// ordered after it.
  template <class T>
  static Status prepare(Plan<T>& plan, const Call<T>& c, cudaStream_t stream) noexcept {
    if constexpr (S == Strategy::megakernel_row) {
      WorkspaceCarver counters;
      counters.take<RowBarrierState>(plan.max_blocks);
      std::shared_ptr<megakernel::CountersZeroed> zeroed(new (std::nothrow) megakernel::CountersZeroed);
      if (zeroed == nullptr) return Status::cuda_error;
      RSS_TRY(zeroed->zero(c.workspace, counters.bytes(), stream));
      plan.counters = std::move(zeroed);
    }
    (void)plan;
    (void)c;
    (void)stream;
    return Status::success;
  }
  template <class T>
  static Status launch(const Plan<T>& plan, const Call<T>& c, const Launcher& launcher) noexcept {
    if (plan.counters != nullptr && !launcher.dry_run) RSS_TRY(plan.counters->order_before(launcher.stream));
    return megakernel::launch_plan(plan, c.x, c.y, c.stats, c.layout, c.workspace, launcher);
  }
};

using MegakernelGrid = MegakernelStrategy<Strategy::megakernel_grid>;
using MegakernelRow = MegakernelStrategy<Strategy::megakernel_row>;
using BlockRow = MegakernelStrategy<Strategy::block_row>;

}  // namespace rss::detail
