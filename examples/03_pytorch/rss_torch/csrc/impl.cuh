// rss behind the PyTorch operator, for one storage type T. The forward writes y and each row's statistics;
// the backward reads x, dy and the statistics and recomputes y (saved state (b): 3 N of traffic, not 4 N).
// A framework hands over fresh tensors on every call, so what does not depend on the pointers is kept per
// shape and device:
// - forward: the strategy rss's automatic picked on the first call (later calls name it, so they skip
//   automatic's device-property query);
// - backward: a planned rss::BackwardOperator, rebound to each call's pointers (validation, no planning).
#pragma once
#include <map>
#include <memory>
#include <mutex>
#include <tuple>

#include "kernels.h"
#include "rss/backward/backward.cuh"
#include "rss/rss.cuh"

namespace rss_torch {

template <class T>
struct Impl {
  using ShapeKey = std::tuple<int, std::int64_t, std::int64_t>;  // device, rows, cols
  // device, rows, cols, ld_x, ld_dy, ld_dx
  using LayoutKey = std::tuple<int, std::int64_t, std::int64_t, std::int64_t, std::int64_t, std::int64_t>;

  static std::mutex& mutex() {
    static std::mutex m;
    return m;
  }
  static std::map<ShapeKey, rss::Strategy>& forward_picks() {
    static std::map<ShapeKey, rss::Strategy> picks;
    return picks;
  }
  static std::map<ShapeKey, rss::BackwardStrategy>& backward_picks() {
    static std::map<ShapeKey, rss::BackwardStrategy> picks;
    return picks;
  }
  static std::map<LayoutKey, std::unique_ptr<rss::BackwardOperator<T>>>& backward_ops() {
    static std::map<LayoutKey, std::unique_ptr<rss::BackwardOperator<T>>> ops;
    return ops;
  }

  static rss::Strategy forward_strategy(int device, std::int64_t rows, std::int64_t cols) {
    const auto it = forward_picks().find({device, rows, cols});
    return it == forward_picks().end() ? rss::Strategy::automatic : it->second;
  }

  static int forward_workspace(int device, std::int64_t rows, std::int64_t cols, std::size_t* bytes) {
    std::lock_guard<std::mutex> lock(mutex());
    return static_cast<int>(rss::workspace_bytes<T>(forward_strategy(device, rows, cols), rows, cols, bytes));
  }

  static int forward(int device, const Matrices& m, void* workspace, std::size_t bytes, cudaStream_t stream) {
    std::lock_guard<std::mutex> lock(mutex());
    const rss::Strategy strategy = forward_strategy(device, m.rows, m.cols);
    rss::Strategy ran{};
    const rss::Layout layout{m.rows, m.cols, m.ld_x, m.ld_out};
    const rss::Status s = rss::rms_scaled_softmax_with_statistics<T>(
        strategy, static_cast<const T*>(m.x), static_cast<T*>(m.out), static_cast<rss::RowStatistics*>(m.stats), layout,
        workspace, bytes, stream, &ran);
    if (rss::ok(s) && strategy == rss::Strategy::automatic) forward_picks()[{device, m.rows, m.cols}] = ran;
    return static_cast<int>(s);
  }

  static int backward_workspace(int device, std::int64_t rows, std::int64_t cols, std::size_t* bytes) {
    std::lock_guard<std::mutex> lock(mutex());
    const auto it = backward_picks().find({device, rows, cols});
    const rss::BackwardStrategy s = it == backward_picks().end() ? rss::BackwardStrategy::automatic : it->second;
    return static_cast<int>(rss::backward_workspace_bytes<T>(s, rows, cols, bytes));
  }

  static int backward(int device, const Matrices& m, void* workspace, std::size_t bytes, cudaStream_t stream) {
    std::lock_guard<std::mutex> lock(mutex());
    const rss::BackwardLayout layout{m.rows, m.cols, m.ld_x, m.cols, m.ld_dy, m.ld_out};  // ld_y: no y is read
    const T* x = static_cast<const T*>(m.x);
    const auto* stats = static_cast<const rss::RowStatistics*>(m.stats);
    const T* dy = static_cast<const T*>(m.dy);
    T* dx = static_cast<T*>(m.out);
    const LayoutKey key{device, m.rows, m.cols, m.ld_x, m.ld_dy, m.ld_out};
    auto& op = backward_ops()[key];
    if (op == nullptr) {
      auto fresh = std::make_unique<rss::BackwardOperator<T>>();
      const auto pick = backward_picks().find({device, m.rows, m.cols});
      const rss::BackwardStrategy requested =
          pick == backward_picks().end() ? rss::BackwardStrategy::automatic : pick->second;
      rss::Status s = fresh->initialize_saved(requested, x, stats, dy, dx, layout, workspace, bytes, stream);
      if (rss::ok(s) && requested == rss::BackwardStrategy::automatic &&
          fresh->strategy() == rss::BackwardStrategy::cluster_row) {
        // Ask for cluster_row itself: automatic keeps a two_pass workspace for its fallback.
        s = fresh->initialize_saved(rss::BackwardStrategy::cluster_row, x, stats, dy, dx, layout, workspace, bytes,
                                    stream);
      }
      if (!rss::ok(s)) {
        backward_ops().erase(key);
        return static_cast<int>(s);
      }
      // From now on this shape asks for the concrete pick (cluster_row needs no workspace).
      backward_picks()[{device, m.rows, m.cols}] = fresh->strategy();
      op = std::move(fresh);
    } else {
      const rss::Status s = op->rebind_saved(x, stats, dy, dx, workspace, bytes);
      if (!rss::ok(s)) return static_cast<int>(s);
    }
    return static_cast<int>(op->run(stream));
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
