#pragma once
// Strategies megakernel_grid and megakernel_row, and their two controls: one cooperative launch per
// admitted batch of rows runs all three phases. Each block retains its first tile of the row in
// dynamic shared memory from phase 1 to phase 3, so x is read once and y written once; only small
// per-block partials cross blocks, through the workspace. The planner (rss/planner) decides the
// geometry and admits only co-resident grids, which both barriers need to terminate.
//
//   megakernel_grid          grid-wide barrier between phases, exps retained
//   megakernel_row           row-scoped barrier (only a row's blocks wait for each other), exps retained
//   control_no_retention     megakernel_grid whose phases 2 and 3 re-read x and recompute exps
//   control_ordinary_launch  the three phases as three ordinary launches per batch (nothing retained)
//   block_row                one block per row (its row retained in shared memory), one ordinary launch
//                            whose persistent grid loops over the rows: no barrier, no co-residency need
#include <cuda_runtime.h>

#include <cstdint>

#include "rss/api/launch_info.hpp"
#include "rss/api/validate.hpp"
#include "rss/detail/device.cuh"
#include "rss/detail/launch.cuh"
#include "rss/detail/storage.cuh"
#include "rss/detail/workspace.hpp"
#include "rss/phases/exp_sum.cuh"
#include "rss/phases/normalize.cuh"
#include "rss/phases/row_stats.cuh"
#include "rss/planner/device_desc.hpp"
#include "rss/planner/megakernel_plan.hpp"
#include "rss/sync/grid_barrier.cuh"
#include "rss/sync/row_barrier.cuh"

namespace rss {
namespace detail::megakernel {

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

    float sum = 0.0f;
    if (first_phase <= 2) {
      for (std::int64_t t = k; t < p.tiles_per_row; t += bpr) {
        if (Retain && t == k) {
          sum += BlockExpSum<threads>::retained_tile(retained, tile_size(t), scale, storage.sum);
        } else {
          sum += BlockExpSum<threads>::tile(x_row + t * p.tile_elems, tile_size(t), scale, storage.sum);
        }
      }
      if (!row_in_block) {
        if (threadIdx.x == 0) group_sums[k] = sum;
        if (last_phase == 2) continue;
        barrier();
      }
    }
    if (!row_in_block) sum = BlockExpSum<threads>::combine(group_sums, bpr, storage.sum);
    const float inv_sum = 1.0f / sum;
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
  bool three_launches;  // control_ordinary_launch: one ordinary launch per phase
};

template <class T>
Status variant_of(Strategy s, Variant<T>* v) {
  switch (s) {
    case Strategy::megakernel_grid: *v = {kernel<T, Sync::grid, true>, "megakernel::grid", true, false}; break;
    case Strategy::megakernel_row: *v = {kernel<T, Sync::row, true>, "megakernel::row", true, false}; break;
    case Strategy::control_no_retention:
      *v = {kernel<T, Sync::grid, false>, "megakernel::grid_no_retention", true, false};
      break;
    case Strategy::control_ordinary_launch:
      *v = {kernel<T, Sync::none, false>, "megakernel::phase", false, true};
      break;
    case Strategy::block_row: *v = {kernel<T, Sync::none, true>, "megakernel::block_row", false, false}; break;
    default: return Status::invalid_strategy;
  }
  return Status::success;
}

inline Status current_device_desc(DeviceDesc* d) {
  int device = 0;
  RSS_TRY(current_device(&device));
  int v = 0;
  const auto get = [&](cudaDeviceAttr a) { return from_cuda(cudaDeviceGetAttribute(&v, a, device)); };
  RSS_TRY(get(cudaDevAttrMultiProcessorCount)); d->sm_count = v;
  RSS_TRY(get(cudaDevAttrMaxSharedMemoryPerBlockOptin)); d->shared_per_block_optin = static_cast<std::size_t>(v);
  RSS_TRY(get(cudaDevAttrMaxSharedMemoryPerMultiprocessor)); d->shared_per_sm = static_cast<std::size_t>(v);
  RSS_TRY(get(cudaDevAttrReservedSharedMemoryPerBlock)); d->reserved_shared_per_block = static_cast<std::size_t>(v);
  RSS_TRY(get(cudaDevAttrMaxThreadsPerMultiProcessor)); d->max_threads_per_sm = v;
  RSS_TRY(get(cudaDevAttrMaxBlocksPerMultiprocessor)); d->max_blocks_per_sm = v;
  RSS_TRY(get(cudaDevAttrMaxRegistersPerMultiprocessor)); d->regs_per_sm = v;
  RSS_TRY(get(cudaDevAttrCooperativeLaunch)); d->cooperative_launch = v != 0;
  return Status::success;
}

/// Plans `strategy` on the current device, asking the driver's occupancy calculator about the very
/// kernel that will run (its registers and static shared memory included).
template <class T>
Status make_plan(Strategy strategy, std::int64_t rows, std::int64_t cols, MegakernelPlan* plan) {
  Variant<T> v{};
  RSS_TRY(variant_of<T>(strategy, &v));
  DeviceDesc desc{};
  RSS_TRY(current_device_desc(&desc));
  if (!v.cooperative) desc.cooperative_launch = true;  // ordinary launches need no co-residency guarantee
  cudaFuncAttributes attributes{};
  RSS_TRY(from_cuda(cudaFuncGetAttributes(&attributes, v.kernel)));
  const std::size_t max_dynamic = desc.shared_per_block_optin - attributes.sharedSizeBytes;
  RSS_TRY(from_cuda(cudaFuncSetAttribute(v.kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                         static_cast<int>(max_dynamic))));
  MegakernelRequest request;
  request.rows = rows;
  request.cols = cols;
  request.dtype = StorageTraits<T>::dtype;
  request.threads = threads;
  request.static_shared_bytes = attributes.sharedSizeBytes;
  Status occupancy_status = Status::success;
  const auto occupancy = [&](std::size_t dynamic_bytes) -> int {
    if (dynamic_bytes > max_dynamic) return 0;
    int blocks = 0;
    const Status s = from_cuda(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&blocks, v.kernel, threads, dynamic_bytes));
    if (!ok(s)) occupancy_status = s;
    return ok(s) ? blocks : 0;
  };
  const Status planned = strategy == Strategy::block_row ? plan_block_row(desc, request, occupancy, plan)
                                                          : plan_megakernel(desc, request, occupancy, plan);
  RSS_TRY(occupancy_status);
  return planned;
}

/// Upper bound on blocks in one launch: sizes the partial buffers without planning.
inline Status max_blocks_per_launch(std::int64_t* blocks) {
  DeviceDesc desc{};
  RSS_TRY(current_device_desc(&desc));
  *blocks = static_cast<std::int64_t>(desc.sm_count) * desc.max_blocks_per_sm;
  return Status::success;
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

/// Issues the launches of `plan`. Arguments are validated; the workspace's barrier states are zero
/// or were left by a previous call (both are valid states). A launch failing after an earlier one
/// wrote rows of y returns partial_output (rss::last_cuda_error() keeps the CUDA error).
template <class T>
Status launch_plan(Strategy strategy, const MegakernelPlan& plan, const T* x, T* y, const Layout& layout,
                   void* workspace, std::int64_t max_blocks, const Launcher& launch) {
  Variant<T> v{};
  RSS_TRY(variant_of<T>(strategy, &v));
  WorkspaceCarver carver(workspace);
  const Workspace w = Workspace::carve(carver, max_blocks);
  if (launch.record != nullptr) launch.record->evicted_tiles += plan.evicted_tiles;
  bool wrote_y = false;
  const auto issue = [&](Status s, bool writes_y) {
    if (!ok(s)) return wrote_y ? Status::partial_output : s;
    wrote_y = wrote_y || writes_y;
    return s;
  };
  for (std::int64_t i = 0; i < plan.launch_count; ++i) {
    const MegakernelLaunch l = plan.launch(i);
    const Params p{plan.cols,          layout.ld_x,         layout.ld_y, l.first_row, l.row_count,
                   plan.tile_elems,    plan.tiles_per_row,  plan.blocks_per_row,
                   w.stats,            w.sums,              w.barriers};
    const auto grid = static_cast<unsigned>(l.grid_blocks);
    if (v.three_launches) {
      for (int phase = 1; phase <= 3; ++phase)
        RSS_TRY(issue(launch(v.name, v.kernel, grid, threads, 0, false, plan.blocks_per_sm, x, y, p, phase, phase),
                      phase == 3));
    } else {
      RSS_TRY(issue(launch(v.name, v.kernel, grid, threads, plan.dynamic_shared_bytes, v.cooperative,
                           plan.blocks_per_sm, x, y, p, 1, 3),
                    true));
    }
  }
  return Status::success;
}

template <class T>
Status run(Strategy strategy, const T* x, T* y, const Layout& layout, void* workspace, const Launcher& launch) {
  MegakernelPlan plan;
  RSS_TRY(make_plan<T>(strategy, layout.rows, layout.cols, &plan));
  std::int64_t max_blocks = 0;
  RSS_TRY(max_blocks_per_launch(&max_blocks));
  return launch_plan<T>(strategy, plan, x, y, layout, workspace, max_blocks, launch);
}

}  // namespace detail::megakernel

/// Workspace bytes every megakernel strategy needs on the current device (a few tens of KB: the
/// partial statistics and barrier states of one launch; independent of rows and cols).
template <class T>
Status megakernel_workspace_bytes(std::int64_t rows, std::int64_t cols, std::size_t* bytes) noexcept {
  if (bytes == nullptr) return Status::null_pointer;
  RSS_TRY(validate_shape(rows, cols, sizeof(T)));
  std::int64_t max_blocks = 0;
  RSS_TRY(detail::megakernel::max_blocks_per_launch(&max_blocks));
  return detail::carved_bytes<detail::megakernel::Workspace>(bytes, max_blocks);
}

/// Zeroes the barrier states of a megakernel workspace, asynchronously on `stream`. Needed once
/// before a workspace's first megakernel call; every call leaves the states reusable.
inline Status prepare_megakernel_workspace(void* workspace, std::size_t workspace_bytes,
                                           cudaStream_t stream = nullptr) noexcept {
  if (workspace == nullptr) return Status::null_pointer;
  std::int64_t max_blocks = 0;
  RSS_TRY(detail::megakernel::max_blocks_per_launch(&max_blocks));
  detail::WorkspaceCarver carver;
  carver.take<RowBarrierState>(max_blocks);
  if (workspace_bytes < carver.bytes()) return Status::workspace_too_small;
  return detail::from_cuda(cudaMemsetAsync(workspace, 0, carver.bytes(), stream));
}

/// A megakernel strategy planned once for fixed arguments and run many times (the plan, the
/// occupancy queries and the workspace preparation stay out of run()).
template <class T>
class Megakernel {
 public:
  /// Validates, plans on the current device and, for megakernel_row, zeroes the workspace's barrier
  /// states on `stream`. On any refusal the object keeps its previous state.
  Status initialize(Strategy strategy, const T* x, T* y, const Layout& layout, void* workspace,
                    std::size_t workspace_bytes, cudaStream_t stream = nullptr) noexcept {
    detail::megakernel::Variant<T> v{};
    RSS_TRY(detail::megakernel::variant_of<T>(strategy, &v));
    std::size_t required = 0;
    RSS_TRY(megakernel_workspace_bytes<T>(layout.rows, layout.cols, &required));
    RSS_TRY(detail::validate_device_call(x, y, layout, sizeof(T), workspace, workspace_bytes, required));
    MegakernelPlan plan{};
    std::int64_t max_blocks = 0;
    if (!layout.empty()) {
      RSS_TRY(detail::megakernel::make_plan<T>(strategy, layout.rows, layout.cols, &plan));
      RSS_TRY(detail::megakernel::max_blocks_per_launch(&max_blocks));
      if (strategy == Strategy::megakernel_row) RSS_TRY(prepare_megakernel_workspace(workspace, workspace_bytes, stream));
    }
    strategy_ = strategy;
    x_ = x;
    y_ = y;
    layout_ = layout;
    workspace_ = workspace;
    plan_ = plan;
    max_blocks_ = max_blocks;
    ready_ = true;
    return Status::success;
  }

  /// Issues the planned launches on `stream`. Asynchronous; never synchronises.
  Status run(cudaStream_t stream = nullptr) const noexcept {
    if (!ready_) return Status::invalid_strategy;
    return detail::megakernel::launch_plan<T>(strategy_, plan_, x_, y_, layout_, workspace_, max_blocks_,
                                              detail::Launcher{stream});
  }

  /// The launches run() makes, without making them.
  Status describe(LaunchList* out) const noexcept {
    if (out == nullptr) return Status::null_pointer;
    if (!ready_) return Status::invalid_strategy;
    LaunchList list;
    RSS_TRY(detail::megakernel::launch_plan<T>(strategy_, plan_, x_, y_, layout_, workspace_, max_blocks_,
                                               detail::Launcher{nullptr, &list, true}));
    *out = list;
    return Status::success;
  }

  const MegakernelPlan& plan() const noexcept { return plan_; }

 private:
  Strategy strategy_ = Strategy::megakernel_grid;
  const T* x_ = nullptr;
  T* y_ = nullptr;
  Layout layout_{};
  void* workspace_ = nullptr;
  std::int64_t max_blocks_ = 0;
  MegakernelPlan plan_{};
  bool ready_ = false;
};

/// One-call form of the megakernel strategies: plans, prepares the workspace and runs.
template <class T>
Status megakernel(Strategy strategy, const T* x, T* y, const Layout& layout, void* workspace,
                  std::size_t workspace_bytes, cudaStream_t stream = nullptr) noexcept {
  Megakernel<T> op;
  RSS_TRY(op.initialize(strategy, x, y, layout, workspace, workspace_bytes, stream));
  return op.run(stream);
}

}  // namespace rss
