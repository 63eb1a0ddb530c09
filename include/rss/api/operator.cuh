#pragma once
// rss::Operator<T>: any strategy, automatic included, planned once for fixed arguments and run many
// times. initialize() does everything that does not belong in the hot path (validation, the device's
// description, planning, graph capture, workspace preparation); rebind() moves it to new tensors of the
// same layout; run() only launches. It is the operator adapter (rss/api/adapter.cuh) over the forward's
// problem and registry (rss/strategies/registry.cuh).
//
//   rss::Operator<float> op;
//   rss::Status s = op.initialize(rss::Strategy::automatic, x, y, rss::Layout::contiguous(rows, cols),
//                                 workspace, workspace_bytes, stream);
//   s = op.run(stream);        // many times, on any stream of the same device
//   s = op.rebind(x2, y2, workspace, workspace_bytes, stream);   // new tensors, same layout
//   op.strategy();             // the concrete strategy that runs
#include <cuda_runtime.h>

#include <cstdint>

#include "rss/api/adapter.cuh"
#include "rss/storage.cuh"
#include "rss/device.cuh"
#include "rss/launch_info.hpp"
#include "rss/strategies/registry.cuh"
#include "rss/tuning/tables.hpp"
#include "rss/validate.hpp"

namespace rss {

namespace detail {

/// The forward's problem for the operator adapter.
template <class T>
struct ForwardProblem {
  using Element = T;
  using Id = Strategy;
  using Config = rss::Config;
  using Call = detail::Call<T>;
  using Strategies = detail::Strategies;
  static constexpr Id automatic = Strategy::automatic;
  static constexpr Id fallback = fallback_strategy;

  static Id id(const Config& c) { return c.strategy; }
  static Config concrete(Id s) { return Config{s}; }
  static bool valid(const Config& c) { return c.valid(); }
  static Status check_shape(const Call& c) { return validate_layout(c.layout, sizeof(T)); }
  static Config resolve(const Config& config, const DeviceInfo& d, const Call& c) {
    return config.strategy == Strategy::automatic ? automatic_choice(d, c.layout.rows, c.layout.cols, dtype_of<T>).config
                                                  : config;
  }
  static Status validate(const Call& c, std::size_t required, int device, PointerCheck check) {
    if (check == PointerCheck::runtime) {
      RSS_TRY(validate_device_call(c.x, c.y, c.layout, sizeof(T), c.workspace, c.workspace_bytes, required, device));
    } else {
      RSS_TRY(validate_call(c.x, c.y, c.layout, sizeof(T), c.workspace, c.workspace_bytes, required));
    }
    if (c.with_stats) {
      RSS_TRY(validate_statistics(c.stats, c.x, c.y, c.layout, sizeof(T), c.workspace, required));
      if (check == PointerCheck::runtime && !c.layout.empty()) RSS_TRY(check_device_memory(c.stats, device));
    }
    return Status::success;
  }
  static bool empty(const Call& c) { return c.layout.empty(); }
  static void place_workspace(Call& c, void* workspace, std::size_t bytes) {
    c.workspace = workspace;
    c.workspace_bytes = bytes;
  }
};

/// The concrete configuration `config` means for a shape on device d (automatic resolved).
template <class T>
Config resolve(const Config& config, const DeviceInfo& d, std::int64_t rows, std::int64_t cols) {
  return ForwardProblem<T>::resolve(config, d, Call<T>{nullptr, nullptr, Layout::contiguous(rows, cols)});
}

}  // namespace detail

/// Workspace bytes `config` needs for a rows x cols problem of T on the current device (0 is a valid
/// answer). For automatic: its pick's and its fallback's, side by side.
template <class T>
Status workspace_bytes(const Config& config, std::int64_t rows, std::int64_t cols, std::size_t* bytes) noexcept {
  if (bytes == nullptr) return Status::null_pointer;
  RSS_TRY(validate_shape(rows, cols, sizeof(T)));
  DeviceInfo d;
  RSS_TRY(current_device_info(&d));
  std::size_t primary = 0;
  return detail::workspace_layout<detail::ForwardProblem<T>>(config, detail::resolve<T>(config, d, rows, cols), rows,
                                                             cols, d, &primary, bytes);
}

template <class T>
class Operator {
  static_assert(sizeof(StorageTraits<T>) > 0, "rss::Operator<T>: T is float, __nv_bfloat16 or __half");

 public:
  Operator() = default;
  Operator(const Operator&) = delete;
  Operator& operator=(const Operator&) = delete;

  /// Validates and prepares `config` for these arguments on the current device. For automatic, picks
  /// the strategy (tuning table, then heuristic), falls back to local_fusion when the device refuses
  /// the pick, and also plans the fallback for a refusal at run time. On any refusal the operator is
  /// left unready.
  Status initialize(const Config& config, const T* x, T* y, const Layout& layout, void* workspace,
                    std::size_t workspace_bytes, cudaStream_t stream = nullptr) noexcept {
    return adapter_.initialize(config, {x, y, layout, workspace, workspace_bytes}, stream);
  }

  /// The same, and every run also writes each row's statistics to stats[0, rows) (device memory, 4-byte
  /// aligned, overlapping neither x, y nor the workspace): what rss::rms_scaled_softmax_backward_saved
  /// reads to recompute y from x. Every strategy writes them.
  Status initialize(const Config& config, const T* x, T* y, RowStatistics* stats, const Layout& layout,
                    void* workspace, std::size_t workspace_bytes, cudaStream_t stream = nullptr) noexcept {
    return adapter_.initialize(config, {x, y, layout, workspace, workspace_bytes, stats, true}, stream);
  }

  /// Points a ready operator at new x and y (and workspace) of the layout it was initialised with: a
  /// framework's fresh tensors on every step, without validating the layout, reading the device or
  /// resolving automatic again. The same strategies are planned for the new pointers (their alignment may
  /// pick another kernel) and prepared on `stream`. invalid_strategy when the operator is not ready or was
  /// initialised with statistics (use the overload with stats); on any refusal it keeps its tensors.
  /// `check`: whether the CUDA runtime is asked that the pointers are device memory (rss::PointerCheck).
  Status rebind(const T* x, T* y, void* workspace, std::size_t workspace_bytes, cudaStream_t stream = nullptr,
                PointerCheck check = PointerCheck::runtime) noexcept {
    if (adapter_.call().with_stats) return Status::invalid_strategy;
    return adapter_.rebind({x, y, adapter_.call().layout, workspace, workspace_bytes}, stream, check);
  }

  /// rebind for an operator initialised with statistics.
  Status rebind(const T* x, T* y, RowStatistics* stats, void* workspace, std::size_t workspace_bytes,
                cudaStream_t stream = nullptr, PointerCheck check = PointerCheck::runtime) noexcept {
    if (!adapter_.call().with_stats) return Status::invalid_strategy;
    return adapter_.rebind({x, y, adapter_.call().layout, workspace, workspace_bytes, stats, true}, stream, check);
  }

  /// Launches on `stream`, on the device the operator was initialised on (made current for the call
  /// and restored). Asynchronous, never synchronises. `ran` (optional) receives the strategy that
  /// ran: for automatic, the fallback when the device refused the planned launch at run time.
  Status run(cudaStream_t stream = nullptr, Strategy* ran = nullptr) const noexcept { return adapter_.run(stream, ran); }

  /// The launches run() makes, without making them.
  Status describe(LaunchList* out) const noexcept { return adapter_.describe(out); }

  /// The concrete strategy run() launches (for automatic: the one it picked).
  Strategy strategy() const noexcept { return adapter_.strategy(); }
  /// The concrete configuration run() launches (automatic's pick with its cluster configuration): initialise
  /// another operator with it to plan the same kernels for the same layout.
  Config config() const noexcept { return adapter_.config(); }
  /// The device the operator was initialised on; run() launches there.
  int device() const noexcept { return adapter_.device(); }
  bool ready() const noexcept { return adapter_.ready(); }

 private:
  detail::OperatorAdapter<detail::ForwardProblem<T>> adapter_;
};

}  // namespace rss
