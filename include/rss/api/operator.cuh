#pragma once
// rss::Operator<T>: any strategy, automatic included, planned once for fixed arguments and run many
// times. Initialisation does everything that does not belong in the hot path (validation, device
// queries, planning, graph capture, workspace preparation); run() only launches.
//
//   rss::Operator<float> op;
//   rss::Status s = op.initialize(rss::Strategy::automatic, x, y, rss::Layout::contiguous(rows, cols),
//                                 workspace, workspace_bytes, stream);
//   s = op.run(stream);        // many times
//   op.strategy();             // the concrete strategy that runs
#include <cuda_runtime.h>

#include <cstdint>

#include "rss/api/launch_info.hpp"
#include "rss/strategies/baseline.cuh"
#include "rss/strategies/baseline_graph.cuh"
#include "rss/strategies/cluster_row.cuh"
#include "rss/strategies/local_fusion.cuh"
#include "rss/strategies/megakernel.cuh"
#include "rss/tuning/tables.hpp"

namespace rss {

namespace detail {
inline bool is_megakernel(Strategy s) {
  return s == Strategy::megakernel_grid || s == Strategy::megakernel_row || s == Strategy::control_no_retention ||
         s == Strategy::control_ordinary_launch || s == Strategy::block_row;
}

/// A refusal that another strategy may not meet: automatic then falls back.
inline bool refused_by_device(Status s) {
  return s == Status::not_admissible || s == Status::cooperative_unsupported || s == Status::unsupported_device;
}

inline Status current_auto_device(AutoDevice* out) {
  int device = 0;
  RSS_TRY(current_device(&device));
  cudaDeviceProp prop{};
  RSS_TRY(from_cuda(cudaGetDeviceProperties(&prop, device)));
  ClusterLimits limits;
  RSS_TRY(cluster_row::current_cluster_limits(&limits));
  out->sm_count = prop.multiProcessorCount;
  out->max_cluster_size = limits.max_cluster_size;
  out->cooperative_launch = prop.cooperativeLaunch != 0;
  out->table = tuning_table_for(prop.name);
  out->shared_bytes_per_sm = static_cast<std::int64_t>(prop.sharedMemPerMultiprocessor);
  return Status::success;
}

/// Launches (or, with a dry launcher, describes) the strategies that plan nothing: baseline,
/// baseline_graph (described as its captured kernels) and local_fusion. Arguments are validated and
/// rows * cols > 0. invalid_strategy for any other strategy.
template <class T>
Status launch_unplanned(Strategy s, const T* x, T* y, const Layout& l, void* workspace, int sm_count,
                        const Launcher& launcher) {
  switch (s) {
    case Strategy::baseline:
    case Strategy::baseline_graph: return baseline::launch(x, y, l, workspace, launcher);
    case Strategy::local_fusion: return local_fusion::launch(x, y, l, workspace, sm_count, launcher);
    default: return Status::invalid_strategy;
  }
}

/// A dry run of an unplanned strategy into `list`; a graph is one host launch of its kernels.
template <class T>
Status describe_unplanned(Strategy s, const T* x, T* y, const Layout& l, void* workspace, LaunchList* list) {
  int sm_count = 0;
  RSS_TRY(current_sm_count(&sm_count));
  RSS_TRY(launch_unplanned(s, x, y, l, workspace, sm_count, Launcher{nullptr, list, true}));
  if (s == Strategy::baseline_graph) {
    list->graph = true;
    list->host_launches = 1;
  }
  return Status::success;
}

/// The choice of `automatic` for a shape on the current device.
inline Status automatic_choice(std::int64_t rows, std::int64_t cols, DType dtype, AutoChoice* choice) {
  AutoDevice d;
  RSS_TRY(current_auto_device(&d));
  *choice = auto_select(d, rows, cols, dtype);
  return Status::success;
}
}  // namespace detail

/// Workspace bytes `strategy` needs for a rows x cols problem of T (0 is a valid answer). For
/// automatic: enough for whichever strategy it picks and for its fallback.
template <class T>
Status workspace_bytes(Strategy strategy, std::int64_t rows, std::int64_t cols, std::size_t* bytes) noexcept {
  if (bytes == nullptr) return Status::null_pointer;
  switch (strategy) {
    case Strategy::baseline:
    case Strategy::baseline_graph: return baseline_workspace_bytes<T>(rows, cols, bytes);
    case Strategy::local_fusion: return local_fusion_workspace_bytes<T>(rows, cols, bytes);
    case Strategy::cluster_row:
      RSS_TRY(validate_shape(rows, cols, sizeof(T)));
      *bytes = 0;
      return Status::success;
    case Strategy::automatic: {
      std::size_t mega = 0, fused = 0;
      RSS_TRY(megakernel_workspace_bytes<T>(rows, cols, &mega));
      RSS_TRY(local_fusion_workspace_bytes<T>(rows, cols, &fused));
      *bytes = mega > fused ? mega : fused;
      return Status::success;
    }
    default:
      if (detail::is_megakernel(strategy)) return megakernel_workspace_bytes<T>(rows, cols, bytes);
      return Status::invalid_strategy;
  }
}

template <class T>
class Operator {
 public:
  Operator() = default;
  Operator(const Operator&) = delete;
  Operator& operator=(const Operator&) = delete;

  /// Validates and prepares `strategy` for these arguments. For automatic, picks the strategy (tuning
  /// table, then heuristic) and falls back to local_fusion when the device refuses the pick. On any
  /// refusal the operator is left unready.
  Status initialize(Strategy strategy, const T* x, T* y, const Layout& layout, void* workspace,
                    std::size_t workspace_bytes, cudaStream_t stream = nullptr) noexcept {
    ready_ = false;
    std::size_t required = 0;
    RSS_TRY(rss::workspace_bytes<T>(strategy, layout.rows, layout.cols, &required));
    RSS_TRY(detail::validate_device_call(x, y, layout, sizeof(T), workspace, workspace_bytes, required));
    x_ = x;
    y_ = y;
    layout_ = layout;
    workspace_ = workspace;
    workspace_bytes_ = workspace_bytes;
    requested_ = strategy;
    if (!layout.empty()) RSS_TRY(detail::current_sm_count(&sm_count_));  // local_fusion's grid, fallback included
    if (strategy != Strategy::automatic) return prepare(strategy, nullptr, stream);

    AutoChoice choice;
    if (!layout.empty()) RSS_TRY(detail::automatic_choice(layout.rows, layout.cols, detail::StorageTraits<T>::dtype, &choice));
    const ClusterConfig* config = choice.cluster.cluster_size > 0 ? &choice.cluster : nullptr;
    const Status s = prepare(choice.strategy, config, stream);
    if (!detail::refused_by_device(s)) return s;
    return prepare(fallback_strategy, nullptr, stream);
  }

  /// Launches on `stream`; asynchronous, never synchronises. `ran` (optional) receives the strategy
  /// that ran: for automatic, the fallback when the device refused the planned launch at run time.
  Status run(cudaStream_t stream = nullptr, Strategy* ran = nullptr) const noexcept {
    if (!ready_) return Status::invalid_strategy;
    Status s = run_concrete(strategy_, stream);
    Strategy used = strategy_;
    if (requested_ == Strategy::automatic && detail::refused_by_device(s) && strategy_ != fallback_strategy) {
      used = fallback_strategy;
      s = run_concrete(fallback_strategy, stream);
    }
    if (ran != nullptr && ok(s)) *ran = used;
    return s;
  }

  /// The launches run() makes, without making them.
  Status describe(LaunchList* out) const noexcept {
    if (out == nullptr) return Status::null_pointer;
    if (!ready_) return Status::invalid_strategy;
    LaunchList list;
    if (!layout_.empty()) {
      switch (strategy_) {
        case Strategy::cluster_row: RSS_TRY(cluster_.describe(&list)); break;
        case Strategy::baseline:
        case Strategy::baseline_graph:
        case Strategy::local_fusion:
          RSS_TRY(detail::describe_unplanned(strategy_, x_, y_, layout_, workspace_, &list));
          break;
        default: RSS_TRY(megakernel_.describe(&list)); break;
      }
    }
    *out = list;
    return Status::success;
  }

  /// The concrete strategy run() launches (for automatic: the one it picked).
  Strategy strategy() const noexcept { return strategy_; }
  bool ready() const noexcept { return ready_; }
  const MegakernelPlan& megakernel_plan() const noexcept { return megakernel_.plan(); }
  const ClusterPlan& cluster_plan() const noexcept { return cluster_.plan(); }

 private:
  Status prepare(Strategy s, const ClusterConfig* config, cudaStream_t stream) noexcept {
    switch (s) {
      case Strategy::baseline:
      case Strategy::local_fusion: break;  // nothing to plan: run() launches on the validated arguments
      case Strategy::baseline_graph: RSS_TRY(graph_.capture(x_, y_, layout_, workspace_, workspace_bytes_)); break;
      case Strategy::cluster_row: RSS_TRY(cluster_.initialize(x_, y_, layout_, config)); break;
      default:
        if (!detail::is_megakernel(s)) return Status::invalid_strategy;
        RSS_TRY(megakernel_.initialize(s, x_, y_, layout_, workspace_, workspace_bytes_, stream));
    }
    strategy_ = s;
    ready_ = true;
    return Status::success;
  }

  Status run_concrete(Strategy s, cudaStream_t stream) const noexcept {
    switch (s) {
      case Strategy::baseline:
      case Strategy::local_fusion:
        if (layout_.empty()) return Status::success;
        return detail::launch_unplanned(s, x_, y_, layout_, workspace_, sm_count_, detail::Launcher{stream});
      case Strategy::baseline_graph: return graph_.replay(stream);
      case Strategy::cluster_row: return cluster_.run(stream);
      default: return megakernel_.run(stream);
    }
  }

  Strategy requested_ = Strategy::automatic;
  Strategy strategy_ = Strategy::automatic;
  const T* x_ = nullptr;
  T* y_ = nullptr;
  Layout layout_{};
  void* workspace_ = nullptr;
  std::size_t workspace_bytes_ = 0;
  int sm_count_ = 0;
  BaselineGraph<T> graph_;
  Megakernel<T> megakernel_;
  ClusterRow<T> cluster_;
  bool ready_ = false;
};

}  // namespace rss
