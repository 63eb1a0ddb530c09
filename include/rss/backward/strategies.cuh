#pragma once
// The backward's strategies, with the forward's strategy interface (rss/strategies/call.cuh) over the
// backward's call, and their registry: the operator adapter (rss/api/adapter.cuh) drives them as it
// drives the forward's. Adding a backward strategy is one struct here (or its own file) and one entry in
// `BackwardStrategies`.
#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>

#include "rss/backward/cluster_plan.hpp"
#include "rss/backward/cluster_row.cuh"
#include "rss/backward/layout.hpp"
#include "rss/backward/two_pass.cuh"
#include "rss/device_info.hpp"
#include "rss/strategies/call.cuh"
#include "rss/strategies/registry.cuh"
#include "rss/workspace.hpp"

namespace rss {

/// What to run for a backward call: a strategy and, for cluster_row, a configuration to use instead of
/// the default (refused when it does not hold the row). Implicit from a BackwardStrategy.
struct BackwardConfig {
  BackwardStrategy strategy = BackwardStrategy::automatic;
  ClusterConfig cluster{};

  constexpr BackwardConfig() = default;
  constexpr BackwardConfig(BackwardStrategy s) noexcept : strategy(s) {}  // NOLINT: implicit on purpose
  constexpr BackwardConfig(BackwardStrategy s, ClusterConfig c) noexcept : strategy(s), cluster(c) {}

  /// A known strategy; a cluster configuration only for cluster_row or automatic (whose pick it configures).
  constexpr bool valid() const noexcept {
    const int s = static_cast<int>(strategy);
    if (s < 0 || s > static_cast<int>(BackwardStrategy::automatic)) return false;
    return cluster.empty() || strategy != BackwardStrategy::two_pass;
  }
};

namespace detail::backward {

/// The arguments of one validated backward call.
template <class T>
struct BackwardCall {
  const T* x = nullptr;
  const T* y = nullptr;
  const RowStatistics* stats = nullptr;
  const T* dy = nullptr;
  T* dx = nullptr;
  BackwardLayout layout{};
  void* workspace = nullptr;
  std::size_t workspace_bytes = 0;
  bool saved = false;  // saved state (b): y is null and recomputed from `stats`
};

struct TwoPass : NothingToPrepare {
  static constexpr BackwardStrategy id = BackwardStrategy::two_pass;
  template <class T>
  struct Plan {
    int sm_count = 0;
  };
  template <class T>
  static Status workspace_bytes(std::int64_t rows, std::int64_t cols, const DeviceInfo&, std::size_t* bytes) noexcept {
    return carved_bytes<two_pass::Workspace>(bytes, rows, cols);
  }
  template <class T>
  static Status make_plan(const BackwardCall<T>&, const DeviceInfo& d, const BackwardConfig&, Plan<T>* plan) noexcept {
    plan->sm_count = d.sm_count;
    return Status::success;
  }
  template <class T>
  static Status launch(const Plan<T>& plan, const BackwardCall<T>& c, const Launcher& launcher) noexcept {
    return two_pass::launch<T>(c.x, c.y, c.stats, c.dy, c.dx, c.layout, c.workspace, plan.sm_count, launcher);
  }
};

struct ClusterRow : NothingToPrepare, NoWorkspace {
  static constexpr BackwardStrategy id = BackwardStrategy::cluster_row;
  template <class T>
  using Plan = cluster_row::Plan<T>;
  template <class T>
  static Status make_plan(const BackwardCall<T>& c, const DeviceInfo& d, const BackwardConfig& config,
                          Plan<T>* plan) noexcept {
    return cluster_row::make_plan<T>(c.x, c.y, c.dy, c.dx, c.layout, d, config.cluster.empty() ? nullptr : &config.cluster,
                                     plan);
  }
  template <class T>
  static Status launch(const Plan<T>& plan, const BackwardCall<T>& c, const Launcher& launcher) noexcept {
    return cluster_row::launch<T>(plan, c.x, c.y, c.stats, c.dy, c.dx, c.layout, launcher);
  }
};

using BackwardStrategies = StrategyList<TwoPass, ClusterRow>;

}  // namespace detail::backward
}  // namespace rss
