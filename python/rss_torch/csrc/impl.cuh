// rss behind the PyTorch operator, for one storage type T. The forward writes y and each row's statistics;
// the backward reads x, dy and the statistics and recomputes y (saved state (b): 3 N of traffic, not 4 N).
// A framework hands over fresh tensors on every call, so nothing is planned per call: each direction keeps
// one planned operator per device and layout (rss::Operator, rss::BackwardOperator), made on the layout's
// first call and rebound to each later call's tensors (validation and a cached kernel choice, no automatic,
// no device query), with the workspace size it needs. The first call asks for automatic; the operator is
// then planned again for the concrete configuration automatic picked (its strategy with the cluster
// configuration the tuning table chose: the strategy alone would take its default geometry), so later
// calls size their workspace for that pick alone (0 bytes for most picks: no workspace is allocated then).
// rebind asks the runtime where the pointers live (cudaPointerGetAttributes, about 1 us per matrix) unless
// ops.cpp vouched for every one of them (Matrices::vouched: storage torch's CUDA allocator handed out). Being a
// CUDA tensor is not enough: pinned host memory through __cuda_array_interface__ is one
// (python/tests/test_errors.py), and only the runtime's answer refuses it; skipping the checks for every tensor
// was tried (8876266) and let that test's call run (5a5840a).
// Nothing here throws (ops.cpp turns the codes into exceptions): the entry points catch what the standard
// library could throw (allocation) and answer kHostFailure.
#pragma once
#include <map>
#include <memory>
#include <mutex>
#include <tuple>

#include "kernels.h"
#include "rss/backward/backward.cuh"
#include "rss/rss.cuh"

namespace rss_torch {

/// Planned operators of one kind, one per (device, layout), and the configuration each shape runs once picked.
/// Bounded: a model with many shapes (dynamic sequence lengths) would otherwise grow it without limit; an
/// evicted layout is planned again when it comes back.
template <class Op, class Config>
struct OperatorCache {
  static constexpr std::size_t kMaxEntries = 512;
  using ShapeKey = std::tuple<int, std::int64_t, std::int64_t>;  // device, rows, cols
  // device, rows, cols and the leading dimensions of the matrices the call reads and writes
  using LayoutKey = std::tuple<int, std::int64_t, std::int64_t, std::int64_t, std::int64_t, std::int64_t>;
  struct Planned {
    std::unique_ptr<Op> op;
    std::size_t workspace = 0;  // what the planned strategy needs
  };

  std::map<ShapeKey, Config> picks;
  std::map<LayoutKey, Planned> ops;

  static ShapeKey shape_of(const LayoutKey& key) { return {std::get<0>(key), std::get<1>(key), std::get<2>(key)}; }

  Config config_for(const ShapeKey& shape, Config automatic) const {
    const auto it = picks.find(shape);
    return it == picks.end() ? automatic : it->second;
  }

  /// The workspace bytes of a call of this layout: the planned operator's, else those of the strategy its
  /// first call will ask for (query(config, &bytes): for automatic, its pick's and its fallback's).
  template <class Query>
  rss::Status workspace(const LayoutKey& key, Config automatic, Query&& query, std::size_t* bytes) const {
    const auto it = ops.find(key);
    if (it != ops.end()) {
      *bytes = it->second.workspace;
      return rss::Status::success;
    }
    return query(config_for(shape_of(key), automatic), bytes);
  }

  /// Runs the call: initialize(op, config) plans a new layout (asked for automatic first, then for its
  /// pick), rebind(op) moves a planned one to this call's tensors.
  template <class Initialize, class Rebind, class Query>
  rss::Status run(const LayoutKey& key, Config automatic, Initialize&& initialize, Rebind&& rebind, Query&& query,
                  cudaStream_t stream) {
    auto it = ops.find(key);
    if (it != ops.end()) {
      RSS_TRY(rebind(*it->second.op));
      return it->second.op->run(stream);
    }
    const ShapeKey shape = shape_of(key);
    auto fresh = std::make_unique<Op>();
    const Config requested = config_for(shape, automatic);
    // Ask for the pick itself: automatic keeps its fallback's workspace too.
    RSS_TRY(initialize(*fresh, requested));
    if (requested.strategy == automatic.strategy) RSS_TRY(initialize(*fresh, fresh->config()));
    std::size_t bytes = 0;
    RSS_TRY(query(fresh->config(), &bytes));
    if (ops.size() >= kMaxEntries) ops.erase(ops.begin());
    if (picks.size() >= kMaxEntries && picks.count(shape) == 0) picks.erase(picks.begin());
    picks[shape] = fresh->config();
    Planned& planned = ops[key];
    planned.op = std::move(fresh);
    planned.workspace = bytes;
    return planned.op->run(stream);
  }
};

/// How a planned layout's rebind checks this call's pointers.
inline rss::PointerCheck pointer_check(const Matrices& m) {
  return m.vouched ? rss::PointerCheck::vouched : rss::PointerCheck::runtime;
}

/// An entry point's body without exceptions: what the standard library may throw (std::bad_alloc from the
/// caches, std::system_error from the mutex) becomes kHostFailure.
template <class Body>
int guarded(Body&& body) noexcept {
  try {
    return static_cast<int>(body());
  } catch (...) {
    return kHostFailure;
  }
}

template <class T>
struct Impl {
  static std::mutex& mutex() {
    static std::mutex m;
    return m;
  }
  using ForwardCache = OperatorCache<rss::Operator<T>, rss::Config>;
  using BackwardCache = OperatorCache<rss::BackwardOperator<T>, rss::BackwardConfig>;
  static ForwardCache& forward_ops() {
    static ForwardCache cache;
    return cache;
  }
  static BackwardCache& backward_ops() {
    static BackwardCache cache;
    return cache;
  }

  static typename ForwardCache::LayoutKey forward_key(int device, const Matrices& m) {
    return {device, m.rows, m.cols, m.ld_x, m.ld_out, 0};
  }
  static typename BackwardCache::LayoutKey backward_key(
      int device, const Matrices& m) {
    return {device, m.rows, m.cols, m.ld_x, m.ld_dy, m.ld_out};
  }

  static int forward_workspace(int device, const Matrices& m, std::size_t* bytes) noexcept {
    return guarded([&] {
      std::lock_guard<std::mutex> lock(mutex());
      return forward_ops().workspace(
          forward_key(device, m), rss::Strategy::automatic,
          [&](const rss::Config& c, std::size_t* b) { return rss::workspace_bytes<T>(c, m.rows, m.cols, b); }, bytes);
    });
  }

  static int forward(int device, const Matrices& m, void* workspace, std::size_t bytes, cudaStream_t stream) noexcept {
    return guarded([&] {
      std::lock_guard<std::mutex> lock(mutex());
      const rss::Layout layout{m.rows, m.cols, m.ld_x, m.ld_out};
      const T* x = static_cast<const T*>(m.x);
      T* y = static_cast<T*>(m.out);
      auto* stats = static_cast<rss::RowStatistics*>(m.stats);
      return forward_ops().run(
          forward_key(device, m), rss::Strategy::automatic,
          [&](rss::Operator<T>& op, const rss::Config& c) {
            return op.initialize(c, x, y, stats, layout, workspace, bytes, stream);
          },
          [&](rss::Operator<T>& op) { return op.rebind(x, y, stats, workspace, bytes, stream, pointer_check(m)); },
          [&](const rss::Config& c, std::size_t* b) { return rss::workspace_bytes<T>(c, m.rows, m.cols, b); }, stream);
    });
  }

  static int backward_workspace(int device, const Matrices& m, std::size_t* bytes) noexcept {
    return guarded([&] {
      std::lock_guard<std::mutex> lock(mutex());
      return backward_ops().workspace(
          backward_key(device, m), rss::BackwardStrategy::automatic,
          [&](const rss::BackwardConfig& c, std::size_t* b) { return rss::backward_workspace_bytes<T>(c, m.rows, m.cols, b); },
          bytes);
    });
  }

  static int backward(int device, const Matrices& m, void* workspace, std::size_t bytes, cudaStream_t stream) noexcept {
    return guarded([&] {
      std::lock_guard<std::mutex> lock(mutex());
      const rss::BackwardLayout layout{m.rows, m.cols, m.ld_x, m.cols, m.ld_dy, m.ld_out};  // ld_y: no y is read
      const T* x = static_cast<const T*>(m.x);
      const auto* stats = static_cast<const rss::RowStatistics*>(m.stats);
      const T* dy = static_cast<const T*>(m.dy);
      T* dx = static_cast<T*>(m.out);
      return backward_ops().run(
          backward_key(device, m), rss::BackwardStrategy::automatic,
          [&](rss::BackwardOperator<T>& op, const rss::BackwardConfig& c) {
            return op.initialize_saved(c, x, stats, dy, dx, layout, workspace, bytes, stream);
          },
          [&](rss::BackwardOperator<T>& op) {
            return op.rebind_saved(x, stats, dy, dx, workspace, bytes, stream, pointer_check(m));
          },
          [&](const rss::BackwardConfig& c, std::size_t* b) { return rss::backward_workspace_bytes<T>(c, m.rows, m.cols, b); },
          stream);
    });
  }
};

}  // namespace rss_torch

#define RSS_TORCH_DEFINE(NAME, T)                                                                               \
  namespace rss_torch {                                                                                         \
  int NAME##_forward_workspace(int device, const Matrices& m, std::size_t* bytes) {                             \
    return Impl<T>::forward_workspace(device, m, bytes);                                                        \
  }                                                                                                             \
  int NAME##_forward(int device, const Matrices& m, void* workspace, std::size_t bytes, cudaStream_t stream) {  \
    return Impl<T>::forward(device, m, workspace, bytes, stream);                                               \
  }                                                                                                             \
  int NAME##_backward_workspace(int device, const Matrices& m, std::size_t* bytes) {                            \
    return Impl<T>::backward_workspace(device, m, bytes);                                                       \
  }                                                                                                             \
  int NAME##_backward(int device, const Matrices& m, void* workspace, std::size_t bytes, cudaStream_t stream) { \
    return Impl<T>::backward(device, m, workspace, bytes, stream);                                              \
  }                                                                                                             \
  }
