#pragma once
// The public host API over every strategy: one call shape, a workspace size query, and a
// description of the launches a call makes.
//
//   std::size_t bytes = 0;
//   rss::workspace_bytes<float>(rss::Strategy::local_fusion, rows, cols, &bytes);
//   // ... cudaMalloc(&workspace, bytes) ...
//   rss::Status s = rss::rms_scaled_softmax(rss::Strategy::local_fusion, x, y, rows, cols, workspace, bytes, stream);
//   if (!rss::ok(s)) std::puts(rss::status_message(s));
#include <cstdint>

#include "rss/api/launch_info.hpp"
#include "rss/strategies/baseline.cuh"
#include "rss/strategies/baseline_graph.cuh"
#include "rss/strategies/local_fusion.cuh"
#include "rss/strategies/megakernel.cuh"

namespace rss {

/// Workspace bytes `strategy` needs for a rows x cols problem of T (0 is a valid answer).
template <class T>
Status workspace_bytes(Strategy strategy, std::int64_t rows, std::int64_t cols, std::size_t* bytes) noexcept {
  switch (strategy) {
    case Strategy::baseline:
    case Strategy::baseline_graph: return baseline_workspace_bytes<T>(rows, cols, bytes);
    case Strategy::local_fusion: return local_fusion_workspace_bytes<T>(rows, cols, bytes);
    case Strategy::megakernel_grid:
    case Strategy::megakernel_row:
    case Strategy::control_no_retention:
    case Strategy::control_ordinary_launch:
    case Strategy::block_row: return megakernel_workspace_bytes<T>(rows, cols, bytes);
  }
  return Status::invalid_strategy;
}

/// y = rms_scaled_softmax(x) with the chosen strategy. x and y are rows x cols row-major device
/// arrays (y may not alias x); workspace is device memory of at least workspace_bytes() bytes,
/// aligned to workspace_alignment. Asynchronous on `stream`: never synchronises. On any status
/// other than success nothing was launched and y is untouched.
template <class T>
Status rms_scaled_softmax(Strategy strategy, const T* x, T* y, std::int64_t rows, std::int64_t cols, void* workspace,
                          std::size_t workspace_bytes, cudaStream_t stream = nullptr) noexcept {
  switch (strategy) {
    case Strategy::baseline: return baseline(x, y, rows, cols, workspace, workspace_bytes, stream);
    case Strategy::baseline_graph: return baseline_graph(x, y, rows, cols, workspace, workspace_bytes, stream);
    case Strategy::local_fusion: return local_fusion(x, y, rows, cols, workspace, workspace_bytes, stream);
    case Strategy::megakernel_grid:
    case Strategy::megakernel_row:
    case Strategy::control_no_retention:
    case Strategy::control_ordinary_launch:
    case Strategy::block_row: return megakernel(strategy, x, y, rows, cols, workspace, workspace_bytes, stream);
  }
  return Status::invalid_strategy;
}

/// Describes, without launching anything, the launches a call of `strategy` on a rows x cols
/// problem of T makes on the current device. `kernels` and `host_launches` of the list count them.
template <class T>
Status describe_launches(Strategy strategy, std::int64_t rows, std::int64_t cols, LaunchList* out) noexcept {
  if (out == nullptr) return Status::null_pointer;
  RSS_TRY(validate_shape(rows, cols, sizeof(T)));
  LaunchList list;
  if (rows > 0 && cols > 0) {
    const detail::Launcher dry{nullptr, &list, true};
    switch (strategy) {
      case Strategy::baseline: RSS_TRY(detail::baseline::launch<T>(nullptr, nullptr, rows, cols, nullptr, dry)); break;
      case Strategy::baseline_graph:
        list.graph = true;
        RSS_TRY(detail::baseline::launch<T>(nullptr, nullptr, rows, cols, nullptr, dry));
        list.host_launches = 1;
        break;
      case Strategy::local_fusion: {
        int sm_count = 0;
        RSS_TRY(detail::current_sm_count(&sm_count));
        RSS_TRY(detail::local_fusion::launch<T>(nullptr, nullptr, rows, cols, nullptr, sm_count, dry));
        break;
      }
      case Strategy::megakernel_grid:
      case Strategy::megakernel_row:
      case Strategy::control_no_retention:
      case Strategy::control_ordinary_launch:
      case Strategy::block_row:
        RSS_TRY(detail::megakernel::run<T>(strategy, static_cast<const T*>(nullptr), static_cast<T*>(nullptr), rows,
                                           cols, nullptr, dry));
        break;
      default: return Status::invalid_strategy;
    }
  }
  *out = list;
  return Status::success;
}

}  // namespace rss
