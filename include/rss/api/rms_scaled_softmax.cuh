#pragma once
// The one-call public API over every strategy, automatic included, and a description of the launches
// a call makes. For repeated calls with the same arguments, rss::Operator (rss/api/operator.cuh)
// keeps the planning out of the hot path.
//
//   std::size_t bytes = 0;
//   rss::workspace_bytes<float>(rss::Strategy::automatic, rows, cols, &bytes);
//   // ... cudaMalloc(&workspace, bytes) ...
//   rss::Strategy ran{};
//   rss::Status s = rss::rms_scaled_softmax(rss::Strategy::automatic, x, y, rss::Layout::contiguous(rows, cols),
//                                           workspace, bytes, stream, &ran);
//   if (!rss::ok(s)) std::puts(rss::status_message(s));
#include <cstdint>

#include "rss/api/launch_info.hpp"
#include "rss/api/operator.cuh"

namespace rss {

/// y = rms_scaled_softmax(x) with the chosen strategy over the matrices of `layout` (device memory;
/// y == x with equal leading dimensions runs in place). workspace is device memory of at least
/// workspace_bytes() bytes, aligned to workspace_alignment. Asynchronous on `stream`: never
/// synchronises. `ran` (optional) receives the concrete strategy that ran.
/// A refusal (any status but success, cuda_error and partial_output) launches nothing and leaves y
/// untouched; cuda_error means no launch of this call wrote y; partial_output means a launch failed
/// after earlier ones wrote some rows.
template <class T>
Status rms_scaled_softmax(Strategy strategy, const T* x, T* y, const Layout& layout, void* workspace,
                          std::size_t workspace_bytes, cudaStream_t stream = nullptr, Strategy* ran = nullptr) noexcept {
  Operator<T> op;
  RSS_TRY(op.initialize(strategy, x, y, layout, workspace, workspace_bytes, stream));
  return op.run(stream, ran);
}

/// The same over contiguous rows x cols matrices.
template <class T>
Status rms_scaled_softmax(Strategy strategy, const T* x, T* y, std::int64_t rows, std::int64_t cols, void* workspace,
                          std::size_t workspace_bytes, cudaStream_t stream = nullptr, Strategy* ran = nullptr) noexcept {
  return rms_scaled_softmax(strategy, x, y, Layout::contiguous(rows, cols), workspace, workspace_bytes, stream, ran);
}

/// Describes, without launching anything, the launches a call of `strategy` on a rows x cols
/// problem of T makes on the current device. `kernels` and `host_launches` of the list count them.
template <class T>
Status describe_launches(Strategy strategy, std::int64_t rows, std::int64_t cols, LaunchList* out) noexcept {
  if (out == nullptr) return Status::null_pointer;
  RSS_TRY(validate_shape(rows, cols, sizeof(T)));
  const Layout layout = Layout::contiguous(rows, cols);
  const T* x = nullptr;
  T* y = nullptr;
  LaunchList list;
  ClusterConfig preferred{};
  if (strategy == Strategy::automatic && !layout.empty()) {
    AutoChoice choice;
    RSS_TRY(detail::automatic_choice(rows, cols, detail::StorageTraits<T>::dtype, &choice));
    strategy = choice.strategy;
    preferred = choice.cluster;
  }
  if (!layout.empty()) {
    switch (strategy) {
      case Strategy::baseline:
      case Strategy::baseline_graph:
      case Strategy::local_fusion: RSS_TRY(detail::describe_unplanned(strategy, x, y, layout, nullptr, &list)); break;
      case Strategy::cluster_row: {
        ClusterPlan plan;
        detail::cluster_row::Admitted admitted;
        RSS_TRY(detail::cluster_row::make_plan<T>(x, y, layout, preferred.cluster_size > 0 ? &preferred : nullptr,
                                                  &plan, &admitted));
        RSS_TRY(detail::cluster_row::launch_plan(plan, admitted, x, y, layout, detail::Launcher{nullptr, &list, true}));
        break;
      }
      default:
        if (!detail::is_megakernel(strategy)) return Status::invalid_strategy;
        RSS_TRY(detail::megakernel::run<T>(strategy, x, y, layout, nullptr, detail::Launcher{nullptr, &list, true}));
    }
  } else {
    std::size_t unused = 0;  // an empty problem launches nothing, but the strategy must still exist
    RSS_TRY(workspace_bytes<T>(strategy, rows, cols, &unused));
  }
  *out = list;
  return Status::success;
}

}  // namespace rss
