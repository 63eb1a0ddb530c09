#pragma once
// The backward pass of rms_scaled_softmax: given x, the forward's output y and dy = dL/dy, writes
// dx = dL/dx. Same conventions as the forward: a strategy, a caller workspace asked for by a size query,
// the stream last, an rss::Status back; never synchronises, prints, exits or throws.
//
//   const rss::BackwardLayout layout = rss::BackwardLayout::contiguous(rows, cols);
//   std::size_t bytes = 0;
//   rss::backward_workspace_bytes<float>(rss::BackwardStrategy::automatic, rows, cols, &bytes);
//   rss::Status s = rss::rms_scaled_softmax_backward(rss::BackwardStrategy::automatic, x, y, dy, dx, layout,
//                                                    workspace, bytes, stream);
//   // or plan once, run many times:
//   rss::BackwardOperator<float> op;
//   s = op.initialize(rss::BackwardStrategy::automatic, x, y, dy, dx, layout, workspace, bytes);
//   s = op.run(stream);
//   s = op.rebind(x2, y2, dy2, dx2, workspace, bytes);   // new tensors, same layout
// BackwardOperator is the operator adapter (rss/api/adapter.cuh) over the backward's problem and registry
// (rss/backward/strategies.cuh), as rss::Operator is over the forward's.
#include <cuda_runtime.h>

#include <cstdint>

#include "rss/api/adapter.cuh"
#include "rss/backward/cluster_plan.hpp"
#include "rss/backward/layout.hpp"
#include "rss/backward/strategies.cuh"
#include "rss/detail/cuda_status.cuh"
#include "rss/device.cuh"
#include "rss/storage.cuh"
#include "rss/workspace.hpp"

namespace rss {

namespace detail::backward {

/// The backward's problem for the operator adapter.
template <class T>
struct BackwardProblem {
  using Element = T;
  using Id = BackwardStrategy;
  using Config = BackwardConfig;
  using Call = BackwardCall<T>;
  using Strategies = BackwardStrategies;
  static constexpr Id automatic = BackwardStrategy::automatic;
  static constexpr Id fallback = BackwardStrategy::two_pass;

  static Id id(const Config& c) { return c.strategy; }
  static Config concrete(Id s) { return Config{s}; }
  static bool valid(const Config& c) { return c.valid(); }
  static Status check_shape(const Call& c) {
    BackwardLayout l = c.layout;
    if (c.saved) l.ld_y = l.cols;  // recomputing y: there is no y matrix
    return validate_backward_layout(l, sizeof(T));
  }
  /// automatic: cluster_row, which the H200 measured faster than two_pass wherever a cluster holds the row, in
  /// both saved states (bench/NOTES.md), except on a few rows that need clusters of more than 8 blocks
  /// (backward_prefers_two_pass; a caller's cluster configuration keeps cluster_row); a refusal (a row longer
  /// than a cluster holds) falls back to two_pass.
  static Config resolve(const Config& config, const DeviceInfo& d, const Call& c) {
    if (config.strategy != BackwardStrategy::automatic) return config;
    if (config.cluster.empty() && backward_prefers_two_pass(c.layout.rows, c.layout.cols, dtype_of<T>,
                                                            d.max_cluster_size, d.sm_count)) {
      return Config{BackwardStrategy::two_pass};
    }
    return Config{BackwardStrategy::cluster_row, config.cluster};
  }
  /// validate_backward_call (or, with statistics, validate_backward_saved_call), then every matrix (and the
  /// statistics and the workspace, when used) is memory of `device`.
  static Status validate(const Call& c, std::size_t required, int device, PointerCheck check) {
    const BackwardLayout& l = c.layout;
    if (c.saved) {
      RSS_TRY(validate_backward_saved_call(c.x, c.stats, sizeof(RowStatistics), c.dy, c.dx, l, sizeof(T), c.workspace,
                                           c.workspace_bytes, required));
    } else {
      RSS_TRY(validate_backward_call(c.x, c.y, c.dy, c.dx, l, sizeof(T), c.workspace, c.workspace_bytes, required));
    }
    if (l.empty() || check == PointerCheck::vouched) return Status::success;
    const void* y_or_stats = c.saved ? static_cast<const void*>(c.stats) : static_cast<const void*>(c.y);
    for (const void* p : {static_cast<const void*>(c.x), y_or_stats, static_cast<const void*>(c.dy), static_cast<const void*>(c.dx)}) {
      RSS_TRY(check_device_memory(p, device));
    }
    if (required > 0) RSS_TRY(check_device_memory(c.workspace, device));
    return Status::success;
  }
  static bool empty(const Call& c) { return c.layout.empty(); }
  static void place_workspace(Call& c, void* workspace, std::size_t bytes) {
    c.workspace = workspace;
    c.workspace_bytes = bytes;
  }
};

}  // namespace detail::backward

/// Workspace bytes a backward strategy needs for rows x cols of T (0 is a valid answer; no device needed).
/// automatic asks for two_pass's, so that it can fall back when the device refuses a cluster.
template <class T>
Status backward_workspace_bytes(const BackwardConfig& config, std::int64_t rows, std::int64_t cols, std::size_t* bytes) noexcept {
  if (bytes == nullptr) return Status::null_pointer;
  RSS_TRY(validate_backward_layout(BackwardLayout::contiguous(rows, cols), sizeof(T)));
  using P = detail::backward::BackwardProblem<T>;
  std::size_t primary = 0;
  // The strategies' sizes need no device; automatic is sized as if it picked cluster_row (0 bytes) with
  // two_pass's region after it, which is two_pass's size whichever it picks.
  const BackwardConfig concrete = config.strategy == BackwardStrategy::automatic ? BackwardConfig{BackwardStrategy::cluster_row} : config;
  return detail::workspace_layout<P>(config, concrete, rows, cols, DeviceInfo{}, &primary, bytes);
}

/// The backward pass planned once for fixed arguments and run many times. initialize() validates,
/// queries the device and plans; run() only launches, on the device it was initialised on (made current
/// and restored). For automatic, initialize picks cluster_row when a cluster holds the row (and the device
/// has clusters; backward_prefers_two_pass names the exception), else two_pass, and run() falls back to
/// two_pass when the device refuses the cluster launch at run time. On any refusal of initialize the operator
/// is left unready. `preferred` (may be null) is a cluster_row configuration used as given, or refused
/// (not_admissible: it does not hold the row; invalid_strategy: not instantiated); for automatic a refusal
/// falls back to two_pass.
template <class T>
class BackwardOperator {
 public:
  /// Saved state (a): reads x, y (the forward's output) and dy.
  Status initialize(const BackwardConfig& config, const T* x, const T* y, const T* dy, T* dx, const BackwardLayout& layout,
                    void* workspace, std::size_t workspace_bytes, cudaStream_t stream = nullptr,
                    const BackwardClusterConfig* preferred = nullptr) noexcept {
    return adapter_.initialize(with(config, preferred), {x, y, nullptr, dy, dx, layout, workspace, workspace_bytes}, stream);
  }

  /// Saved state (b): reads x, dy and each row's statistics (written by a forward pass), recomputes y.
  /// layout.ld_y is not used.
  Status initialize_saved(const BackwardConfig& config, const T* x, const RowStatistics* stats, const T* dy, T* dx,
                          const BackwardLayout& layout, void* workspace, std::size_t workspace_bytes,
                          cudaStream_t stream = nullptr, const BackwardClusterConfig* preferred = nullptr) noexcept {
    if (stats == nullptr && !layout.empty()) return Status::null_pointer;
    return adapter_.initialize(with(config, preferred), {x, nullptr, stats, dy, dx, layout, workspace, workspace_bytes, true},
                               stream);
  }

  /// Launches on `stream`; asynchronous. `ran` (optional) receives the strategy that ran.
  Status run(cudaStream_t stream = nullptr, BackwardStrategy* ran = nullptr) const noexcept { return adapter_.run(stream, ran); }

  /// Points a ready operator at other matrices and another workspace of the same layout (a framework's
  /// fresh tensors on every step): validated like initialize(), planned again for the new pointers (their
  /// alignment may change the kernel). On a refusal the operator keeps its previous pointers.
  /// `check`: whether the CUDA runtime is asked that the pointers are device memory (rss::PointerCheck).
  Status rebind(const T* x, const T* y, const T* dy, T* dx, void* workspace, std::size_t workspace_bytes,
                cudaStream_t stream = nullptr, PointerCheck check = PointerCheck::runtime) noexcept {
    if (saved()) return Status::invalid_strategy;  // initialised with saved statistics: rebind_saved
    return adapter_.rebind({x, y, nullptr, dy, dx, adapter_.call().layout, workspace, workspace_bytes}, stream, check);
  }

  /// rebind for an operator initialised with initialize_saved().
  Status rebind_saved(const T* x, const RowStatistics* stats, const T* dy, T* dx, void* workspace,
                      std::size_t workspace_bytes, cudaStream_t stream = nullptr,
                      PointerCheck check = PointerCheck::runtime) noexcept {
    if (adapter_.ready() && !saved()) return Status::invalid_strategy;
    if (stats == nullptr && !adapter_.call().layout.empty()) return Status::null_pointer;
    return adapter_.rebind({x, nullptr, stats, dy, dx, adapter_.call().layout, workspace, workspace_bytes, true}, stream,
                           check);
  }

  /// The launches run() makes, without making them.
  Status describe(LaunchList* out) const noexcept { return adapter_.describe(out); }

  /// The concrete strategy run() launches (automatic's pick).
  BackwardStrategy strategy() const noexcept { return adapter_.strategy(); }
  /// The concrete configuration run() launches (automatic's pick with its cluster configuration).
  BackwardConfig config() const noexcept { return adapter_.config(); }
  bool ready() const noexcept { return adapter_.ready(); }
  /// The device the operator was initialised on; run() launches there.
  int device() const noexcept { return adapter_.device(); }
  /// cluster_row's geometry (empty for two_pass).
  const BackwardClusterPlan& cluster_plan() const noexcept {
    static constexpr BackwardClusterPlan none{};
    const auto* plan = adapter_.template plan_of<detail::backward::ClusterRow>();
    return plan != nullptr ? plan->geometry : none;
  }

 private:
  static BackwardConfig with(BackwardConfig config, const BackwardClusterConfig* preferred) {
    if (preferred != nullptr) config.cluster = *preferred;
    return config;
  }
  bool saved() const noexcept { return adapter_.call().saved; }

  detail::OperatorAdapter<detail::backward::BackwardProblem<T>> adapter_;
};

/// One call: validates, plans and launches the backward pass on `stream` (asynchronous). `ran`
/// (optional) receives the strategy that ran. dx is untouched on any refusal.
template <class T>
Status rms_scaled_softmax_backward(const BackwardConfig& config, const T* x, const T* y, const T* dy, T* dx,
                                   const BackwardLayout& layout, void* workspace, std::size_t workspace_bytes,
                                   cudaStream_t stream = nullptr, BackwardStrategy* ran = nullptr) noexcept {
  BackwardOperator<T> op;
  RSS_TRY(op.initialize(config, x, y, dy, dx, layout, workspace, workspace_bytes, stream));
  return op.run(stream, ran);
}

/// One call with saved state (b): x, dy and each row's statistics (see RowStatistics); y is recomputed.
template <class T>
Status rms_scaled_softmax_backward_saved(const BackwardConfig& config, const T* x, const RowStatistics* stats,
                                         const T* dy, T* dx, const BackwardLayout& layout, void* workspace,
                                         std::size_t workspace_bytes, cudaStream_t stream = nullptr,
                                         BackwardStrategy* ran = nullptr) noexcept {
  BackwardOperator<T> op;
  RSS_TRY(op.initialize_saved(config, x, stats, dy, dx, layout, workspace, workspace_bytes, stream));
  return op.run(stream, ran);
}

/// The launches a backward call makes for rows x cols of T (contiguous, 16-byte aligned), without
/// making them: kernel names, grids, blocks, cluster sizes, occupancy. saved_statistics: the call of
/// rms_scaled_softmax_backward_saved (its own defaults and automatic rule). Needs a device (it plans on it).
template <class T>
Status describe_backward_launches(const BackwardConfig& config, std::int64_t rows, std::int64_t cols, LaunchList* out,
                                  bool saved_statistics = false) noexcept {
  if (out == nullptr) return Status::null_pointer;
  using P = detail::backward::BackwardProblem<T>;
  const BackwardLayout l = BackwardLayout::contiguous(rows, cols);
  RSS_TRY(validate_backward_layout(l, sizeof(T)));
  if (!config.valid()) return Status::invalid_strategy;
  LaunchList list;
  if (l.empty()) {
    *out = list;
    return Status::success;
  }
  DeviceInfo d;
  RSS_TRY(current_device_info(&d));
  // Aligned stand-in pointers: a dry run never dereferences them.
  const auto fake = [](std::uintptr_t i) { return reinterpret_cast<T*>(std::uintptr_t{1} << 40 | i << 36); };
  typename P::Call call{fake(0), saved_statistics ? nullptr : fake(1), nullptr, fake(2), fake(3), l, fake(4), 0,
                        saved_statistics};
  if (saved_statistics) call.stats = reinterpret_cast<const RowStatistics*>(fake(5));
  detail::PlannedCall<P> planned;
  Status s = planned.make(P::resolve(config, d, call), call, d, false, nullptr);
  if (config.strategy == BackwardStrategy::automatic && detail::refused_by_device(s)) {
    s = planned.make(P::concrete(P::fallback), call, d, false, nullptr);  // what automatic runs then
  }
  RSS_TRY(s);
  RSS_TRY(planned.launch(detail::Launcher{nullptr, &list, true}));
  *out = list;
  return Status::success;
}

}  // namespace rss
