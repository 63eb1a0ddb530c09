#pragma once
// Strategy `cluster_row`: one thread-block cluster per row, one ordinary launch. Each block keeps its
// share of the row on chip from the statistics to the normalisation, so x is read once and y written once;
// the blocks of a cluster combine their partial statistics and sums through distributed shared memory and
// cluster barriers, never through global memory. A cluster's blocks are co-scheduled by the hardware, so no
// residency planning beyond "one cluster fits" is needed. The kernels are the row agent's
// (rss/agent/row_agent.cuh) running the forward row program within a cluster: in registers, or
// (RowResidence::shared_memory) in shared memory as stored, loaded by the copy engine; pipelined, two tiles
// let the next row load while this one is worked on. Rows longer than a cluster holds
// (rss/planner/cluster_plan.hpp) belong to the megakernels.
#include <cuda_runtime.h>

#include <cstdint>

#include "rss/agent/cluster_combine.cuh"
#include "rss/agent/forward_row.cuh"
#include "rss/agent/row_agent.cuh"
#include "rss/detail/launch.cuh"
#include "rss/planner/cluster_plan.hpp"
#include "rss/storage.cuh"
#include "rss/strategies/call.cuh"

namespace rss::detail {
namespace cluster_row {

using RegisterFits = FitList<Fit::checked, Fit::vectors, Fit::exact>;

template <class T, class Statistics>
using Program = ForwardRow<T, Statistics>;
/// Both statistics choices share one parameter block, so one kernel pointer type holds either.
template <class T>
using Kernel = RowKernel<Program<T, NoStatistics>, WithinCluster>;
static_assert(std::is_same_v<Kernel<float>, RowKernel<Program<float, WriteStatistics>, WithinCluster>>);

template <class T, class Statistics>
Kernel<T> kernel_for(const ClusterConfig& c, Fit fit) {
  using P = Program<T, Statistics>;
  switch (c.residence) {
    case RowResidence::registers: return register_kernel_for<P, WithinCluster, ForwardRegisterConfigs, RegisterFits>(c, fit);
    case RowResidence::shared_memory: return tile_kernel_for<P, WithinCluster, ForwardSharedConfigs, 1>(c, fit);
    case RowResidence::shared_memory_pipelined: return tile_kernel_for<P, WithinCluster, ForwardSharedConfigs, 2>(c, fit);
  }
  return nullptr;
}

inline const char* kernel_name(Fit fit, RowResidence residence) {
  if (residence == RowResidence::shared_memory) return fit == Fit::checked ? "cluster_row::shared" : "cluster_row::shared_vectors";
  if (residence == RowResidence::shared_memory_pipelined) {
    return fit == Fit::checked ? "cluster_row::pipelined" : "cluster_row::pipelined_vectors";
  }
  switch (fit) {
    case Fit::exact: return "cluster_row::exact";
    case Fit::vectors: return "cluster_row::vectors";
    default: return "cluster_row";
  }
}

/// The kernel a plan launches for one call's pointers, and its occupancy.
struct Admitted {
  Fit fit = Fit::checked;
  int blocks_per_sm = 0;
};

template <class T>
struct Plan {
  ClusterPlan geometry{};
  Admitted admitted{};
  // The instantiation admitted, launched as is. Every translation unit that includes rss has its own copy
  // of a template kernel, with its own address and its own attributes: a pointer taken again at launch
  // (by code the linker may take from another unit) can name a copy whose shared-memory limit was never
  // raised, and a launch of more than 48 KB then fails (cudaErrorInvalidValue; bench/NOTES.md).
  Kernel<T> kernel = nullptr;
};

/// The cheapest instantiation a call allows (exact only for registers: a tile is walked by vectors).
template <class T>
Fit fit_of(const ClusterPlan& plan, const T* x, const T* y, const Layout& l) {
  return row_fit({x, y}, {l.ld_x, l.ld_y}, dtype_of<T>, plan, plan.config.residence == RowResidence::registers);
}

/// Plans a shape on device d for these pointers (and row statistics or not) and admits the kernel that runs it.
template <class T>
Status make_plan(const T* x, const T* y, bool writes_stats, const Layout& layout, const DeviceInfo& d,
                 const ClusterConfig* preferred, Plan<T>* out) {
  Plan<T> p;
  RSS_TRY(plan_cluster_row(d, layout.rows, layout.cols, dtype_of<T>, preferred, &p.geometry));
  if (p.geometry.grid_blocks > 0) {
    const ClusterConfig& c = p.geometry.config;
    p.admitted.fit = fit_of(p.geometry, x, y, layout);
    p.kernel = writes_stats ? kernel_for<T, WriteStatistics>(c, p.admitted.fit) : kernel_for<T, NoStatistics>(c, p.admitted.fit);
    const ClusterGrid grid =
        c.residence == RowResidence::shared_memory_pipelined ? ClusterGrid::resident_looping : ClusterGrid::one_per_row;
    RSS_TRY(admit_row_kernel(p.kernel, d, grid, &p.geometry, &p.admitted.blocks_per_sm));
  }
  *out = p;
  return Status::success;
}

/// Issues (or, dry, describes) the launch of a plan made for the same pointers.
template <class T>
Status launch_plan(const Plan<T>& plan, const T* x, T* y, RowStatistics* stats, const Layout& layout,
                   Launcher launcher) {
  const ClusterPlan& g = plan.geometry;
  if (g.grid_blocks == 0) return Status::success;
  launcher.add_logical_bytes(layout.rows * layout.cols * static_cast<std::int64_t>(sizeof(T)) * 2);  // x once, y once
  const ClusterConfig& c = g.config;
  launcher.cluster_size = static_cast<unsigned>(c.cluster_size);
  return launcher(kernel_name(plan.admitted.fit, c.residence), plan.kernel, static_cast<unsigned>(g.grid_blocks),
                  static_cast<unsigned>(c.threads), static_cast<std::size_t>(g.shared_bytes), false,
                  plan.admitted.blocks_per_sm, ForwardParams<T>{x, y, stats, layout.ld_x, layout.ld_y, layout.cols},
                  WithinCluster::Params{}, RowSplit::of(g));
}

}  // namespace cluster_row

/// Strategy cluster_row: no workspace; the plan depends on the pointers' alignment (which kernel
/// instantiation may run) and takes a configuration from the caller or the tuning table as given, or
/// refuses it (rss/planner/cluster_plan.hpp).
struct ClusterRow : NothingToPrepare, NoWorkspace {
  static constexpr Strategy id = Strategy::cluster_row;
  template <class T>
  using Plan = cluster_row::Plan<T>;
  template <class T>
  static Status make_plan(const Call<T>& c, const DeviceInfo& d, const Config& config, Plan<T>* plan) noexcept {
    return cluster_row::make_plan<T>(c.x, c.y, c.stats != nullptr, c.layout, d,
                                     config.cluster.empty() ? nullptr : &config.cluster, plan);
  }
  template <class T>
  static Status launch(const Plan<T>& plan, const Call<T>& c, const Launcher& launcher) noexcept {
    return cluster_row::launch_plan(plan, c.x, c.y, c.stats, c.layout, launcher);
  }
};

}  // namespace rss::detail
