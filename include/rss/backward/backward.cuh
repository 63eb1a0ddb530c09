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
#include <cuda_runtime.h>

#include <cstdint>

#include "rss/backward/cluster_plan.hpp"
#include "rss/backward/cluster_row.cuh"
#include "rss/backward/layout.hpp"
#include "rss/backward/two_pass.cuh"
#include "rss/detail/cuda_status.cuh"
#include "rss/device.cuh"
#include "rss/detail/launch.cuh"
#include "rss/storage.cuh"
#include "rss/workspace.hpp"

namespace rss {

namespace detail::backward {


/// validate_backward_call (or, with `stats`, validate_backward_saved_call), then: a device exists and every
/// matrix (and the statistics and the workspace, when used) is its memory.
inline Status validate_device(const void* x, const void* y, const RowStatistics* stats, const void* dy, const void* dx,
                              const BackwardLayout& l, std::size_t element_bytes, const void* workspace,
                              std::size_t workspace_bytes, std::size_t required) noexcept {
  if (stats != nullptr) {
    RSS_TRY(validate_backward_saved_call(x, stats, sizeof(RowStatistics), dy, dx, l, element_bytes, workspace,
                                         workspace_bytes, required));
  } else {
    RSS_TRY(validate_backward_call(x, y, dy, dx, l, element_bytes, workspace, workspace_bytes, required));
  }
  if (l.empty()) return Status::success;
  int device = 0;
  RSS_TRY(rss::detail::current_device(&device));
  for (const void* p : {x, stats != nullptr ? static_cast<const void*>(stats) : y, dy, dx}) RSS_TRY(rss::detail::check_device_memory(p, device));
  if (required > 0) RSS_TRY(rss::detail::check_device_memory(workspace, device));
  return Status::success;
}

/// A refusal another strategy may not meet: automatic then falls back to two_pass.
inline bool refused_by_device(Status s) {
  return s == Status::not_admissible || s == Status::unsupported_device || s == Status::cooperative_unsupported;
}

inline Status current_sm_count(int* sm_count) noexcept {
  DeviceInfo d;
  RSS_TRY(current_device_info(&d));
  *sm_count = d.sm_count;
  return Status::success;
}

}  // namespace detail::backward

/// Workspace bytes a backward strategy needs for rows x cols of T (0 is a valid answer). automatic
/// asks for two_pass's, so that it can fall back when the device refuses a cluster.
template <class T>
Status backward_workspace_bytes(BackwardStrategy strategy, std::int64_t rows, std::int64_t cols, std::size_t* bytes) noexcept {
  if (bytes == nullptr) return Status::null_pointer;
  RSS_TRY(validate_backward_layout(BackwardLayout::contiguous(rows, cols), sizeof(T)));
  switch (strategy) {
    case BackwardStrategy::cluster_row: *bytes = 0; return Status::success;
    case BackwardStrategy::two_pass:
    case BackwardStrategy::automatic:
      return detail::carved_bytes<detail::backward::two_pass::Workspace>(bytes, rows, cols);
  }
  return Status::invalid_strategy;
}

/// The backward pass planned once for fixed arguments and run many times. initialize() validates,
/// queries the device and plans; run() only launches. For automatic, initialize picks cluster_row when
/// a cluster holds the row (and the device has clusters), else two_pass, and run() falls back to
/// two_pass when the device refuses the cluster launch at run time. On any refusal of initialize the
/// operator is left unready.
template <class T>
class BackwardOperator {
 public:
  /// Saved state (a): reads x, y (the forward's output) and dy.
  Status initialize(BackwardStrategy strategy, const T* x, const T* y, const T* dy, T* dx, const BackwardLayout& layout,
                    void* workspace, std::size_t workspace_bytes, cudaStream_t stream = nullptr,
                    const BackwardClusterConfig* preferred = nullptr) noexcept {
    return prepare(strategy, x, y, nullptr, dy, dx, layout, workspace, workspace_bytes, stream, preferred);
  }

  /// Saved state (b): reads x, dy and each row's statistics (written by a forward pass), recomputes y.
  /// layout.ld_y is not used.
  Status initialize_saved(BackwardStrategy strategy, const T* x, const RowStatistics* stats, const T* dy, T* dx,
                          const BackwardLayout& layout, void* workspace, std::size_t workspace_bytes,
                          cudaStream_t stream = nullptr, const BackwardClusterConfig* preferred = nullptr) noexcept {
    if (stats == nullptr && !layout.empty()) return Status::null_pointer;
    return prepare(strategy, x, nullptr, stats, dy, dx, layout, workspace, workspace_bytes, stream, preferred);
  }

 private:
  Status prepare(BackwardStrategy strategy, const T* x, const T* y, const RowStatistics* stats, const T* dy, T* dx,
                 const BackwardLayout& layout, void* workspace, std::size_t workspace_bytes, cudaStream_t stream,
                 const BackwardClusterConfig* preferred) noexcept {
    (void)stream;  // nothing to prepare on the stream: kept for the forward's signature
    ready_ = false;
    std::size_t required = 0;
    RSS_TRY(backward_workspace_bytes<T>(strategy, layout.rows, layout.cols, &required));
    RSS_TRY(detail::backward::validate_device(x, y, stats, dy, dx, layout, sizeof(T), workspace, workspace_bytes, required));
    x_ = x;
    y_ = y;
    stats_ = stats;
    dy_ = dy;
    dx_ = dx;
    layout_ = layout;
    workspace_ = workspace;
    requested_ = strategy;
    has_preferred_ = preferred != nullptr;
    if (has_preferred_) preferred_ = *preferred;
    if (layout.empty()) {
      strategy_ = strategy == BackwardStrategy::automatic ? BackwardStrategy::two_pass : strategy;
      ready_ = true;
      return Status::success;
    }
    RSS_TRY(detail::backward::current_sm_count(&sm_count_));
    if (strategy == BackwardStrategy::two_pass) return prepare_two_pass();
    if (strategy == BackwardStrategy::cluster_row) return prepare_cluster(preferred);
    if (strategy != BackwardStrategy::automatic) return Status::invalid_strategy;
    if (backward_automatic_prefers_two_pass(layout.rows, layout.cols, dtype_of<T>, stats != nullptr)) return prepare_two_pass();
    const Status s = prepare_cluster(preferred);
    if (!detail::backward::refused_by_device(s)) return s;
    return prepare_two_pass();
  }

 public:

  /// Launches on `stream`; asynchronous. `ran` (optional) receives the strategy that ran.
  Status run(cudaStream_t stream = nullptr, BackwardStrategy* ran = nullptr) const noexcept {
    if (!ready_) return Status::invalid_strategy;
    Status s = launch(strategy_, detail::Launcher{stream});
    BackwardStrategy used = strategy_;
    if (requested_ == BackwardStrategy::automatic && detail::backward::refused_by_device(s)) {
      used = BackwardStrategy::two_pass;  // a cluster launch refused at run time writes nothing
      s = launch(used, detail::Launcher{stream});
    }
    if (ok(s) && ran != nullptr) *ran = used;
    return s;
  }

  /// Points a ready operator at other matrices and another workspace of the same layout (a framework's
  /// fresh tensors on every step): validated like initialize(), planned again only when their alignment
  /// changes the kernel. On a refusal the operator keeps its previous pointers.
  Status rebind(const T* x, const T* y, const T* dy, T* dx, void* workspace, std::size_t workspace_bytes) noexcept {
    if (stats_ != nullptr) return Status::invalid_strategy;  // initialised with saved statistics: rebind_saved
    return rebind_any(x, y, nullptr, dy, dx, workspace, workspace_bytes);
  }

  /// rebind for an operator initialised with initialize_saved().
  Status rebind_saved(const T* x, const RowStatistics* stats, const T* dy, T* dx, void* workspace,
                      std::size_t workspace_bytes) noexcept {
    if (stats_ == nullptr && !layout_.empty()) return Status::invalid_strategy;
    if (stats == nullptr && !layout_.empty()) return Status::null_pointer;
    return rebind_any(x, nullptr, stats, dy, dx, workspace, workspace_bytes);
  }

 private:
  Status rebind_any(const T* x, const T* y, const RowStatistics* stats, const T* dy, T* dx, void* workspace,
                    std::size_t workspace_bytes) noexcept {
    if (!ready_) return Status::invalid_strategy;
    std::size_t required = 0;
    RSS_TRY(backward_workspace_bytes<T>(requested_, layout_.rows, layout_.cols, &required));
    RSS_TRY(detail::backward::validate_device(x, y, stats, dy, dx, layout_, sizeof(T), workspace, workspace_bytes, required));
    if (strategy_ == BackwardStrategy::cluster_row && !layout_.empty() &&
        detail::backward::cluster_row::fit_of(x, y != nullptr ? y : x, dy, dx, layout_) != cluster_.fit) {
      detail::backward::cluster_row::Plan<T> plan;
      RSS_TRY(detail::backward::cluster_row::make_plan<T>(x, y, dy, dx, layout_, preferred(), &plan));
      cluster_ = plan;
    }
    x_ = x;
    y_ = y;
    stats_ = stats;
    dy_ = dy;
    dx_ = dx;
    workspace_ = workspace;
    return Status::success;
  }

 public:
  /// The launches run() makes, without making them.
  Status describe(LaunchList* out) const noexcept {
    if (out == nullptr) return Status::null_pointer;
    if (!ready_) return Status::invalid_strategy;
    LaunchList list;
    RSS_TRY(launch(strategy_, detail::Launcher{nullptr, &list, true}));
    *out = list;
    return Status::success;
  }

  /// The concrete strategy run() launches (automatic's pick).
  BackwardStrategy strategy() const noexcept { return strategy_; }
  bool ready() const noexcept { return ready_; }
  /// cluster_row's geometry (empty for two_pass).
  const BackwardClusterPlan& cluster_plan() const noexcept { return cluster_.geometry; }

 private:
  Status prepare_two_pass() noexcept {
    strategy_ = BackwardStrategy::two_pass;
    ready_ = true;
    return Status::success;
  }

  const BackwardClusterConfig* preferred() const noexcept { return has_preferred_ ? &preferred_ : nullptr; }

  Status prepare_cluster(const BackwardClusterConfig* preferred) noexcept {
    RSS_TRY(detail::backward::cluster_row::make_plan<T>(x_, y_, dy_, dx_, layout_, preferred, &cluster_));
    strategy_ = BackwardStrategy::cluster_row;
    ready_ = true;
    return Status::success;
  }

  Status launch(BackwardStrategy s, const detail::Launcher& launcher) const noexcept {
    if (layout_.empty()) return Status::success;
    if (s == BackwardStrategy::cluster_row) {
      return detail::backward::cluster_row::launch<T>(cluster_, x_, y_, stats_, dy_, dx_, layout_, launcher);
    }
    return detail::backward::two_pass::launch<T>(x_, y_, stats_, dy_, dx_, layout_, workspace_, sm_count_, launcher);
  }

  const T* x_ = nullptr;
  const T* y_ = nullptr;
  const RowStatistics* stats_ = nullptr;  // saved state (b): y recomputed from these (y_ is null)
  const T* dy_ = nullptr;
  T* dx_ = nullptr;
  BackwardLayout layout_{};
  void* workspace_ = nullptr;
  int sm_count_ = 0;
  BackwardStrategy requested_ = BackwardStrategy::automatic;
  BackwardStrategy strategy_ = BackwardStrategy::two_pass;
  detail::backward::cluster_row::Plan<T> cluster_{};
  BackwardClusterConfig preferred_{};
  bool has_preferred_ = false;
  bool ready_ = false;
};

/// One call: validates, plans and launches the backward pass on `stream` (asynchronous). `ran`
/// (optional) receives the strategy that ran. dx is untouched on any refusal.
template <class T>
Status rms_scaled_softmax_backward(BackwardStrategy strategy, const T* x, const T* y, const T* dy, T* dx,
                                   const BackwardLayout& layout, void* workspace, std::size_t workspace_bytes,
                                   cudaStream_t stream = nullptr, BackwardStrategy* ran = nullptr) noexcept {
  BackwardOperator<T> op;
  RSS_TRY(op.initialize(strategy, x, y, dy, dx, layout, workspace, workspace_bytes, stream));
  return op.run(stream, ran);
}

/// One call with saved state (b): x, dy and each row's statistics (see RowStatistics); y is recomputed.
template <class T>
Status rms_scaled_softmax_backward_saved(BackwardStrategy strategy, const T* x, const RowStatistics* stats, const T* dy,
                                         T* dx, const BackwardLayout& layout, void* workspace,
                                         std::size_t workspace_bytes, cudaStream_t stream = nullptr,
                                         BackwardStrategy* ran = nullptr) noexcept {
  BackwardOperator<T> op;
  RSS_TRY(op.initialize_saved(strategy, x, stats, dy, dx, layout, workspace, workspace_bytes, stream));
  return op.run(stream, ran);
}

/// The launches a backward call makes for rows x cols of T (contiguous, 16-byte aligned), without
/// making them: kernel names, grids, blocks, cluster sizes, occupancy. saved_statistics: the call of
/// rms_scaled_softmax_backward_saved (its own defaults and automatic rule). Needs a device (it plans on it).
template <class T>
Status describe_backward_launches(BackwardStrategy strategy, std::int64_t rows, std::int64_t cols, LaunchList* out,
                                  bool saved_statistics = false) noexcept {
  if (out == nullptr) return Status::null_pointer;
  const BackwardLayout l = BackwardLayout::contiguous(rows, cols);
  RSS_TRY(validate_backward_layout(l, sizeof(T)));
  LaunchList list;
  if (l.empty()) {
    *out = list;
    return Status::success;
  }
  int sm_count = 0;
  RSS_TRY(detail::backward::current_sm_count(&sm_count));
  // Aligned stand-in pointers: a dry run never dereferences them.
  const auto fake = [](std::uintptr_t i) { return reinterpret_cast<T*>(std::uintptr_t{1} << 40 | i << 36); };
  const T* y = saved_statistics ? nullptr : fake(1);
  const auto* stats = saved_statistics ? reinterpret_cast<const RowStatistics*>(fake(5)) : nullptr;
  bool cluster = strategy == BackwardStrategy::cluster_row;
  if (strategy == BackwardStrategy::automatic &&
      !backward_automatic_prefers_two_pass(l.rows, l.cols, dtype_of<T>, saved_statistics)) {
    detail::backward::cluster_row::Plan<T> probe;
    const Status s = detail::backward::cluster_row::make_plan<T>(fake(0), y, fake(2), fake(3), l, nullptr, &probe);
    if (!ok(s) && !detail::backward::refused_by_device(s)) return s;
    cluster = ok(s);
  }
  const detail::Launcher dry{nullptr, &list, true};
  if (cluster) {
    detail::backward::cluster_row::Plan<T> plan;
    RSS_TRY(detail::backward::cluster_row::make_plan<T>(fake(0), y, fake(2), fake(3), l, nullptr, &plan));
    RSS_TRY(detail::backward::cluster_row::launch<T>(plan, fake(0), y, stats, fake(2), fake(3), l, dry));
  } else if (strategy == BackwardStrategy::two_pass || strategy == BackwardStrategy::automatic) {
    RSS_TRY(detail::backward::two_pass::launch<T>(fake(0), y, stats, fake(2), fake(3), l, fake(4), sm_count, dry));
  } else {
    return Status::invalid_strategy;
  }
  *out = list;
  return Status::success;
}

}  // namespace rss
