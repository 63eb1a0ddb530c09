#pragma once
// What the planners decide for a shape on the current device, as public queries: tools, tests and
// benches study plans through these (an Operator with the same shape and config runs exactly this plan).
#include <cstdint>

#include "rss/api/operator.cuh"
#include "rss/planner/cluster_plan.hpp"
#include "rss/planner/long_row_plan.hpp"
#include "rss/planner/megakernel_plan.hpp"
#include "rss/sync/leader_exchange.cuh"
#include "rss/sync/row_barrier.cuh"

namespace rss {

/// The geometry megakernel_grid (and its controls), megakernel_row or block_row plans for a rows x cols
/// problem of T on the current device.
template <class T>
Status megakernel_geometry(const Config& config, std::int64_t rows, std::int64_t cols, MegakernelPlan* out) noexcept {
  if (out == nullptr) return Status::null_pointer;
  RSS_TRY(validate_shape(rows, cols, sizeof(T)));
  if (config.strategy != Strategy::megakernel_grid && config.strategy != Strategy::megakernel_row &&
      config.strategy != Strategy::block_row) {
    return Status::invalid_strategy;
  }
  DeviceInfo d;
  RSS_TRY(current_device_info(&d));
  detail::megakernel::Plan<T> plan;
  RSS_TRY(detail::megakernel::make_plan<T>(config.strategy, config.control, rows, cols, d, &plan));
  *out = plan.geometry;
  return Status::success;
}

/// The plan cluster_row makes for a rows x cols problem of T on the current device (for aligned,
/// contiguous rows), with `config.cluster` when it is set (refused as a call would refuse it:
/// invalid_strategy when it is not instantiated, not_admissible when it does not hold the row), else the
/// default configuration; the grid is the one launched (a pipelined configuration's is capped by the
/// kernel's occupancy).
template <class T>
Status cluster_geometry(const Config& config, std::int64_t rows, std::int64_t cols, ClusterPlan* out) noexcept {
  if (out == nullptr) return Status::null_pointer;
  RSS_TRY(validate_shape(rows, cols, sizeof(T)));
  DeviceInfo d;
  RSS_TRY(current_device_info(&d));
  detail::cluster_row::Plan<T> plan;
  const Layout layout = Layout::contiguous(rows, cols);
  RSS_TRY(detail::cluster_row::make_plan<T>(nullptr, nullptr, false, layout, d,
                                            config.cluster.empty() ? nullptr : &config.cluster, &plan));
  *out = plan.geometry;
  return Status::success;
}

/// The plan long_row makes for a rows x cols problem of T on the current device (without row statistics: the
/// statistics' instantiation plans the same geometry unless its static shared memory differs).
template <class T>
Status long_row_geometry(std::int64_t rows, std::int64_t cols, LongRowPlan* out) noexcept {
  if (out == nullptr) return Status::null_pointer;
  RSS_TRY(validate_shape(rows, cols, sizeof(T)));
  DeviceInfo d;
  RSS_TRY(current_device_info(&d));
  detail::long_row::Plan<T> plan;
  RSS_TRY(detail::long_row::make_plan<T>(rows, cols, false, d, &plan));
  *out = plan.geometry;
  return Status::success;
}

/// Where long_row keeps its exchange state in a workspace sized for the current device. Operator::initialize
/// zeroes it; nothing else may write it between runs; tests inspect and corrupt it.
inline Status long_row_exchange_state(void* workspace, LeaderExchangeState** state) noexcept {
  if (workspace == nullptr || state == nullptr) return Status::null_pointer;
  DeviceInfo d;
  RSS_TRY(current_device_info(&d));
  WorkspaceCarver carver(workspace);
  *state = detail::long_row::Workspace::carve(carver, detail::long_row::max_leaders(d)).state;
  return Status::success;
}

/// Where megakernel_row keeps its row barriers in a workspace sized for the current device: `count`
/// states from `*states`. They must be zero before the workspace's first use (Operator::initialize
/// zeroes them) and nothing else may write them between runs; tests inspect and corrupt them.
inline Status megakernel_barrier_states(void* workspace, RowBarrierState** states, std::int64_t* count) noexcept {
  if (workspace == nullptr || states == nullptr || count == nullptr) return Status::null_pointer;
  DeviceInfo d;
  RSS_TRY(current_device_info(&d));
  *count = detail::megakernel::max_blocks_per_launch(d);
  WorkspaceCarver carver(workspace);
  *states = detail::megakernel::Workspace::carve(carver, *count).barriers;
  return Status::success;
}

}  // namespace rss
