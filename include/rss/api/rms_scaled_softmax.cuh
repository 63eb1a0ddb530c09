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

#include "rss/api/operator.cuh"
#include "rss/launch_info.hpp"

namespace rss {

/// y = rms_scaled_softmax(x) with the chosen strategy over the matrices of `layout` (device memory;
/// y == x with equal leading dimensions runs in place). workspace is device memory of at least
/// workspace_bytes() bytes, aligned to workspace_alignment. Asynchronous on `stream`: never
/// synchronises. `ran` (optional) receives the concrete strategy that ran.
/// A refusal (any status but success, cuda_error and partial_output) launches nothing and leaves y
/// untouched; cuda_error means no launch of this call wrote y; partial_output means a launch failed
/// after earlier ones wrote some rows.
template <class T>
Status rms_scaled_softmax(const Config& config, const T* x, T* y, const Layout& layout, void* workspace,
                          std::size_t workspace_bytes, cudaStream_t stream = nullptr, Strategy* ran = nullptr) noexcept {
  Operator<T> op;
  RSS_TRY(op.initialize(config, x, y, layout, workspace, workspace_bytes, stream));
  return op.run(stream, ran);
}

/// The same, also writing each row's statistics to stats[0, layout.rows) (device memory, 4-byte aligned):
/// the saved state of rss::rms_scaled_softmax_backward_saved, which then needs x and dy but not y.
template <class T>
Status rms_scaled_softmax_with_statistics(const Config& config, const T* x, T* y, RowStatistics* stats,
                                          const Layout& layout, void* workspace, std::size_t workspace_bytes,
                                          cudaStream_t stream = nullptr, Strategy* ran = nullptr) noexcept {
  Operator<T> op;
  RSS_TRY(op.initialize(config, x, y, stats, layout, workspace, workspace_bytes, stream));
  return op.run(stream, ran);
}

/// The same over contiguous rows x cols matrices.
template <class T>
Status rms_scaled_softmax(const Config& config, const T* x, T* y, std::int64_t rows, std::int64_t cols, void* workspace,
                          std::size_t workspace_bytes, cudaStream_t stream = nullptr, Strategy* ran = nullptr) noexcept {
  return rms_scaled_softmax(config, x, y, Layout::contiguous(rows, cols), workspace, workspace_bytes, stream, ran);
}

/// Describes, without launching anything, the launches a call of `config` on a rows x cols problem of T
/// makes on the current device: the planning of Operator::initialize, then a dry launch. `kernels` and
/// `host_launches` of the list count them.
template <class T>
Status describe_launches(const Config& config, std::int64_t rows, std::int64_t cols, LaunchList* out) noexcept {
  if (out == nullptr) return Status::null_pointer;
  if (!config.valid()) return Status::invalid_strategy;
  RSS_TRY(validate_shape(rows, cols, sizeof(T)));
  DeviceInfo d;
  RSS_TRY(current_device_info(&d));
  const Config concrete = detail::resolve<T>(config, d, rows, cols);
  LaunchList list;
  if (rows > 0 && cols > 0) {
    detail::PlannedCall<detail::ForwardProblem<T>> planned;
    RSS_TRY(planned.make(concrete, detail::Call<T>{nullptr, nullptr, Layout::contiguous(rows, cols), nullptr, 0}, d,
                         false, nullptr));
    RSS_TRY(planned.launch(detail::Launcher{nullptr, &list, true}));
  } else {
    std::size_t unused = 0;  // an empty problem launches nothing, but the strategy must still exist
    RSS_TRY(detail::strategy_workspace_bytes<detail::ForwardProblem<T>>(concrete.strategy, rows, cols, d, &unused));
  }
  *out = list;
  return Status::success;
}

/// The strategy automatic picks for a rows x cols problem of T on the current device (before any
/// refusal makes it fall back), with its configuration.
template <class T>
Status automatic_config(std::int64_t rows, std::int64_t cols, Config* out) noexcept {
  if (out == nullptr) return Status::null_pointer;
  RSS_TRY(validate_shape(rows, cols, sizeof(T)));
  DeviceInfo d;
  RSS_TRY(current_device_info(&d));
  *out = detail::resolve<T>(Config{Strategy::automatic}, d, rows, cols);
  return Status::success;
}

}  // namespace rss
