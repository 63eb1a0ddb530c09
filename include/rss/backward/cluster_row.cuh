#pragma once
// Backward strategy `cluster_row`: one thread-block cluster per row, one ordinary launch. The row agent
// (rss/agent/row_agent.cuh) runs the backward row program (rss/backward/backward_row.cuh) within a
// cluster: each block loads its share of x, y and dy into registers, adds its partial sums (sum x^2, c,
// p, q), combines them with the cluster's other blocks through distributed shared memory (one cluster
// barrier per row), and writes dx from the registers: x, y and dy are read once and dx written once (4 N
// of traffic). Thread-block clusters need sm_90; the host refuses devices without them (unsupported_device).
#include <cuda_runtime.h>

#include <cstdint>
#include <type_traits>

#include "rss/agent/cluster_combine.cuh"
#include "rss/agent/row_agent.cuh"
#include "rss/backward/backward_row.cuh"
#include "rss/backward/cluster_plan.hpp"
#include "rss/backward/layout.hpp"
#include "rss/detail/launch.cuh"
#include "rss/device.cuh"
#include "rss/storage.cuh"

namespace rss::detail::backward::cluster_row {

using RegisterFits = FitList<Fit::checked, Fit::vectors>;

/// Both saved states share one parameter block, so one kernel pointer type holds either.
template <class T>
using Kernel = RowKernel<BackwardRow<T, ReadsY>, WithinCluster>;
static_assert(std::is_same_v<Kernel<float>, RowKernel<BackwardRow<float, RecomputesY>, WithinCluster>>);

template <class T>
Kernel<T> kernel_for(const ClusterConfig& c, Fit fit, bool saved) {
  return saved ? register_kernel_for<BackwardRow<T, RecomputesY>, WithinCluster, BackwardRegisterConfigs, RegisterFits>(c, fit)
               : register_kernel_for<BackwardRow<T, ReadsY>, WithinCluster, BackwardRegisterConfigs, RegisterFits>(c, fit);
}

/// vectors when all four matrices are 16-byte aligned with rows of whole vectors; checked otherwise.
template <class T>
Fit fit_of(const ClusterPlan& plan, const T* x, const T* y, const T* dy, const T* dx, const BackwardLayout& l) {
  return row_fit({x, y, dy, dx}, {l.ld_x, l.ld_y, l.ld_dy, l.ld_dx}, dtype_of<T>, plan, false);
}

inline const char* kernel_name(Fit fit, bool saved) {
  if (saved) return fit == Fit::vectors ? "backward::cluster_row::saved::vectors" : "backward::cluster_row::saved";
  return fit == Fit::vectors ? "backward::cluster_row::vectors" : "backward::cluster_row";
}

template <class T>
struct Plan {
  BackwardClusterPlan geometry{};
  Fit fit = Fit::checked;
  bool saved = false;  // y recomputed from saved row statistics
  int blocks_per_sm = 0;
  // The instantiation admitted, launched as is (a pointer taken again at launch could name another
  // translation unit's copy of the template kernel: docs/architecture.md).
  Kernel<T> kernel = nullptr;
};

/// Plans a call on device d and asks the driver whether its kernel and one cluster fit.
/// y null: the call recomputes y from saved row statistics.
template <class T>
Status make_plan(const T* x, const T* y, const T* dy, const T* dx, const BackwardLayout& l, const DeviceInfo& d,
                 const BackwardClusterConfig* preferred, Plan<T>* out) {
  Plan<T> p;
  p.saved = y == nullptr;
  RSS_TRY(plan_backward_cluster_row(d, l.rows, l.cols, dtype_of<T>, preferred, &p.geometry));
  if (p.geometry.grid_blocks > 0) {
    p.fit = fit_of(p.geometry, x, p.saved ? x : y, dy, dx, l);
    p.kernel = kernel_for<T>(p.geometry.config, p.fit, p.saved);
    RSS_TRY(admit_row_kernel(p.kernel, d, ClusterGrid::one_per_row, &p.geometry, &p.blocks_per_sm));
  }
  *out = p;
  return Status::success;
}

/// Issues (or, dry, describes) the launch of a plan made for the same pointers.
template <class T>
Status launch(const Plan<T>& plan, const T* x, const T* y, const RowStatistics* stats, const T* dy, T* dx,
              const BackwardLayout& l, Launcher launcher) {
  const ClusterPlan& g = plan.geometry;
  if (g.grid_blocks == 0) return Status::success;
  // x, dy and y (unless recomputed from the statistics) read once, dx written once.
  launcher.add_logical_bytes(l.rows * l.cols * static_cast<std::int64_t>(sizeof(T)) * (plan.saved ? 3 : 4));
  launcher.cluster_size = static_cast<unsigned>(g.config.cluster_size);
  return launcher(kernel_name(plan.fit, plan.saved), plan.kernel, static_cast<unsigned>(g.grid_blocks),
                  static_cast<unsigned>(g.config.threads), 0, false, plan.blocks_per_sm,
                  BackwardParams<T>{x, y, stats, dy, dx, l}, WithinCluster::Params{}, RowSplit::of(g));
}

}  // namespace rss::detail::backward::cluster_row
