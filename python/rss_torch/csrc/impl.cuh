// rss behind the PyTorch operator, for one storage type T. The forward writes y and each row's statistics;
// the backward reads x, dy and the statistics and recomputes y (saved state (b): 3 N of traffic, not 4 N).
// A framework hands over fresh tensors on every call, so nothing is planned per call: each direction keeps
// one planned operator per device and layout (rss::Operator, rss::BackwardOperator), made on the layout's
// first call and rebound to each later call's tensors (validation and a cached kernel choice, no automatic,
// no device query). The first call asks for automatic; the operator is then planned again for the
// concrete strategy automatic picked, so later calls size their workspace for that strategy alone.
#pragma once
#include <map>
#include <memory>
#include <mutex>
#include <tuple>

#include "kernels.h"
#include "rss/backward/backward.cuh"
#include "rss/rss.cuh"

namespace rss_torch {

/// Planned operators of one kind, one per (device, layout), and the strategy each shape runs once picked.
template <class Op, class Strategy>
struct OperatorCache {
  using ShapeKey = std::tuple<int, std::int64_t, std::int64_t>;  // device, rows, cols
  // device, rows, cols and the leading dimensions of the matrices the call reads and writes
  using LayoutKey = std::tuple<int, std::int64_t, std::int64_t, std::int64_t, std::int64_t, std::int64_t>;

  std::map<ShapeKey, Strategy> picks;
  std::map<LayoutKey, std::unique_ptr<Op>> ops;

  Strategy strategy_for(int device, std::int64_t rows, std::int64_t cols, Strategy automatic) const {
    const auto it = picks.find({device, rows, cols});
    return it == picks.end() ? automatic : it->second;
  }

  /// Runs the call: initialize(op, strategy) plans a new layout (asked for automatic first, then for its
  /// pick), rebind(op) moves a planned one to this call's tensors.
  template <class Initialize, class Rebind>
  rss::Status run(const LayoutKey& key, Strategy automatic, Initialize&& initialize, Rebind&& rebind, cudaStream_t stream) {
    const ShapeKey shape{std::get<0>(key), std::get<1>(key), std::get<2>(key)};
    auto& op = ops[key];
    if (op == nullptr) {
      auto fresh = std::make_unique<Op>();
      const Strategy requested = strategy_for(std::get<0>(key), std::get<1>(key), std::get<2>(key), automatic);
      rss::Status s = initialize(*fresh, requested);
      // Ask for the pick itself: automatic keeps its fallback's workspace too.
      if (rss::ok(s) && requested == automatic) s = initialize(*fresh, fresh->strategy());
      if (!rss::ok(s)) {
        ops.erase(key);
        return s;
      }
      picks[shape] = fresh->strategy();
      op = std::move(fresh);
    } else {
      RSS_TRY(rebind(*op));
    }
    return op->run(stream);
  }
};

template <class T>
struct Impl {
  static std::mutex& mutex() {
    static std::mutex m;
    return m;
  }
  static OperatorCache<rss::Operator<T>, rss::Strategy>& forward_ops() {
    static OperatorCache<rss::Operator<T>, rss::Strategy> cache;
    return cache;
  }
  static OperatorCache<rss::BackwardOperator<T>, rss::BackwardStrategy>& backward_ops() {
    static OperatorCache<rss::BackwardOperator<T>, rss::BackwardStrategy> cache;
    return cache;
  }

  static int forward_workspace(int device, std::int64_t rows, std::int64_t cols, std::size_t* bytes) {
    std::lock_guard<std::mutex> lock(mutex());
    const rss::Strategy s = forward_ops().strategy_for(device, rows, cols, rss::Strategy::automatic);
    return static_cast<int>(rss::workspace_bytes<T>(s, rows, cols, bytes));
  }

  static int forward(int device, const Matrices& m, void* workspace, std::size_t bytes, cudaStream_t stream) {
    std::lock_guard<std::mutex> lock(mutex());
    const rss::Layout layout{m.rows, m.cols, m.ld_x, m.ld_out};
    const T* x = static_cast<const T*>(m.x);
    T* y = static_cast<T*>(m.out);
    auto* stats = static_cast<rss::RowStatistics*>(m.stats);
    return static_cast<int>(forward_ops().run(
        {device, m.rows, m.cols, m.ld_x, m.ld_out, 0}, rss::Strategy::automatic,
        [&](rss::Operator<T>& op, rss::Strategy s) { return op.initialize(s, x, y, stats, layout, workspace, bytes, stream); },
        [&](rss::Operator<T>& op) { return op.rebind(x, y, stats, workspace, bytes, stream); }, stream));
  }

  static int backward_workspace(int device, std::int64_t rows, std::int64_t cols, std::size_t* bytes) {
    std::lock_guard<std::mutex> lock(mutex());
    const rss::BackwardStrategy s = backward_ops().strategy_for(device, rows, cols, rss::BackwardStrategy::automatic);
    return static_cast<int>(rss::backward_workspace_bytes<T>(s, rows, cols, bytes));
  }

  static int backward(int device, const Matrices& m, void* workspace, std::size_t bytes, cudaStream_t stream) {
    std::lock_guard<std::mutex> lock(mutex());
    const rss::BackwardLayout layout{m.rows, m.cols, m.ld_x, m.cols, m.ld_dy, m.ld_out};  // ld_y: no y is read
    const T* x = static_cast<const T*>(m.x);
    const auto* stats = static_cast<const rss::RowStatistics*>(m.stats);
    const T* dy = static_cast<const T*>(m.dy);
    T* dx = static_cast<T*>(m.out);
    return static_cast<int>(backward_ops().run(
        {device, m.rows, m.cols, m.ld_x, m.ld_dy, m.ld_out}, rss::BackwardStrategy::automatic,
        [&](rss::BackwardOperator<T>& op, rss::BackwardStrategy s) {
          return op.initialize_saved(s, x, stats, dy, dx, layout, workspace, bytes, stream);
        },
        [&](rss::BackwardOperator<T>& op) { return op.rebind_saved(x, stats, dy, dx, workspace, bytes, stream); }, stream));
  }
};

}  // namespace rss_torch

#define RSS_TORCH_DEFINE(NAME, T)                                                                               \
  namespace rss_torch {                                                                                         \
  int NAME##_forward_workspace(int device, std::int64_t rows, std::int64_t cols, std::size_t* bytes) {          \
    return Impl<T>::forward_workspace(device, rows, cols, bytes);                                               \
  }                                                                                                             \
  int NAME##_forward(int device, const Matrices& m, void* workspace, std::size_t bytes, cudaStream_t stream) {  \
    return Impl<T>::forward(device, m, workspace, bytes, stream);                                               \
  }                                                                                                             \
  int NAME##_backward_workspace(int device, std::int64_t rows, std::int64_t cols, std::size_t* bytes) {         \
    return Impl<T>::backward_workspace(device, rows, cols, bytes);                                              \
  }                                                                                                             \
  int NAME##_backward(int device, const Matrices& m, void* workspace, std::size_t bytes, cudaStream_t stream) { \
    return Impl<T>::backward(device, m, workspace, bytes, stream);                                              \
  }                                                                                                             \
  }
