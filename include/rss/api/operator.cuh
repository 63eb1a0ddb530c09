#pragma once
// rss::Operator<T>: any strategy, automatic included, planned once for fixed arguments and run many
// times. initialize() does everything that does not belong in the hot path (validation, the device's
// description, planning, graph capture, workspace preparation); run() only launches. It is the one
// dispatch point from a strategy to its plan and launches (rss/strategies/registry.cuh).
//
//   rss::Operator<float> op;
//   rss::Status s = op.initialize(rss::Strategy::automatic, x, y, rss::Layout::contiguous(rows, cols),
//                                 workspace, workspace_bytes, stream);
//   s = op.run(stream);        // many times, on any stream of the same device
//   op.strategy();             // the concrete strategy that runs
#include <cuda_runtime.h>

#include <cstdint>
#include <variant>

#include "rss/storage.cuh"
#include "rss/device.cuh"
#include "rss/launch_info.hpp"
#include "rss/strategies/registry.cuh"
#include "rss/tuning/tables.hpp"
#include "rss/validate.hpp"

namespace rss {

namespace detail {

/// A refusal that another strategy may not meet: automatic then falls back.
inline bool refused_by_device(Status s) {
  return s == Status::not_admissible || s == Status::cooperative_unsupported || s == Status::unsupported_device;
}

/// The concrete configuration `config` means for a shape on device d (automatic resolved).
inline Config resolve(const Config& config, const DeviceInfo& d, std::int64_t rows, std::int64_t cols, DType dtype) {
  return config.strategy == Strategy::automatic ? automatic_choice(d, rows, cols, dtype).config : config;
}

/// Workspace bytes of a concrete strategy.
template <class T>
Status concrete_workspace_bytes(Strategy s, std::int64_t rows, std::int64_t cols, const DeviceInfo& d,
                                std::size_t* bytes) {
  return with_strategy(s, [&](auto strategy) {
    return decltype(strategy)::template workspace_bytes<T>(rows, cols, d, bytes);
  });
}

/// Workspace of `config` for the shape: for automatic, its pick's region followed by its fallback's,
/// so that a fallback never overwrites the pick's state (megakernel_row's barrier counters).
template <class T>
Status workspace_layout(const Config& config, std::int64_t rows, std::int64_t cols, const DeviceInfo& d,
                        std::size_t* primary, std::size_t* total) {
  if (!config.valid()) return Status::invalid_strategy;
  const Config concrete = resolve(config, d, rows, cols, dtype_of<T>);
  RSS_TRY(concrete_workspace_bytes<T>(concrete.strategy, rows, cols, d, primary));
  *total = *primary;
  if (config.strategy == Strategy::automatic && concrete.strategy != fallback_strategy) {
    std::size_t fallback = 0;
    RSS_TRY(concrete_workspace_bytes<T>(fallback_strategy, rows, cols, d, &fallback));
    if (fallback > SIZE_MAX - *primary) return Status::size_overflow;
    *total += fallback;  // primary is a multiple of workspace_alignment: the fallback's region stays aligned
  }
  return Status::success;
}

/// One strategy planned for one call.
template <class T>
struct PlannedCall {
  AnyPlan<T> plan;
  Call<T> call;
  Strategy strategy = Strategy::automatic;

  /// Plans (and, unless describing, prepares) strategy `config.strategy` for `c` on device d.
  Status make(const Config& config, const Call<T>& c, const DeviceInfo& d, bool prepare, cudaStream_t stream) {
    return with_strategy(config.strategy, [&](auto tag) {
      using S = decltype(tag);
      Planned<S, T> planned;
      RSS_TRY(S::template make_plan<T>(c, d, config, &planned.plan));
      if (prepare) RSS_TRY(S::template prepare<T>(planned.plan, c, stream));
      plan = std::move(planned);
      call = c;
      strategy = S::id;
      return Status::success;
    });
  }

  Status launch(const Launcher& launcher) const {
    return std::visit(
        [&](const auto& planned) -> Status {
          using P = std::decay_t<decltype(planned)>;
          if constexpr (std::is_same_v<P, std::monostate>) {
            return Status::invalid_strategy;
          } else {
            return P::Strategy::template launch<T>(planned.plan, call, launcher);
          }
        },
        plan);
  }
};

/// Switches to `device` for the scope of a run and back (a no-op when it is already current).
class DeviceScope {
 public:
  explicit DeviceScope(int device) noexcept {
    if (cudaGetDevice(&previous_) != cudaSuccess) {
      (void)cudaGetLastError();
      status_ = Status::no_device;
    } else if (previous_ != device) {
      status_ = from_cuda(cudaSetDevice(device));
      switched_ = ok(status_);
    }
  }
  ~DeviceScope() {
    if (switched_) (void)cudaSetDevice(previous_);
  }
  DeviceScope(const DeviceScope&) = delete;
  DeviceScope& operator=(const DeviceScope&) = delete;
  Status status() const noexcept { return status_; }

 private:
  int previous_ = 0;
  bool switched_ = false;
  Status status_ = Status::success;
};

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
  return detail::workspace_layout<T>(config, rows, cols, d, &primary, bytes);
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
    return prepare(config, x, y, nullptr, false, layout, workspace, workspace_bytes, stream);
  }

  /// The same, and every run also writes each row's statistics to stats[0, rows) (device memory, 4-byte
  /// aligned, overlapping neither x, y nor the workspace): what rss::rms_scaled_softmax_backward_saved
  /// reads to recompute y from x. Every strategy writes them.
  Status initialize(const Config& config, const T* x, T* y, RowStatistics* stats, const Layout& layout,
                    void* workspace, std::size_t workspace_bytes, cudaStream_t stream = nullptr) noexcept {
    return prepare(config, x, y, stats, true, layout, workspace, workspace_bytes, stream);
  }

 private:
  Status prepare(const Config& config, const T* x, T* y, RowStatistics* stats, bool with_stats, const Layout& layout,
                 void* workspace, std::size_t workspace_bytes, cudaStream_t stream) noexcept {
    ready_ = false;
    primary_ = {};
    fallback_ = {};
    RSS_TRY(validate_layout(layout, sizeof(T)));
    RSS_TRY(detail::current_device(&device_));
    DeviceInfo d;
    RSS_TRY(device_info(device_, &d));
    const Config concrete = detail::resolve(config, d, layout.rows, layout.cols, dtype_of<T>);
    std::size_t primary_bytes = 0, required = 0;
    RSS_TRY(detail::workspace_layout<T>(config, layout.rows, layout.cols, d, &primary_bytes, &required));
    RSS_TRY(detail::validate_device_call(x, y, layout, sizeof(T), workspace, workspace_bytes, required, device_));
    if (with_stats) {
      RSS_TRY(validate_statistics(stats, x, y, layout, sizeof(T), workspace, required));
      if (!layout.empty()) RSS_TRY(detail::check_device_memory(stats, device_));
    }
    layout_ = layout;
    const detail::Call<T> call{x, y, layout, workspace, workspace_bytes, stats};
    if (layout.empty()) {
      primary_.strategy = concrete.strategy;
      ready_ = true;
      return Status::success;
    }
    Status s = primary_.make(concrete, call, d, true, stream);
    if (config.strategy == Strategy::automatic && concrete.strategy != fallback_strategy) {
      detail::Call<T> fallback_call = call;
      fallback_call.workspace = static_cast<unsigned char*>(workspace) + primary_bytes;
      fallback_call.workspace_bytes = required - primary_bytes;
      RSS_TRY(fallback_.make(Config{fallback_strategy}, fallback_call, d, true, stream));
      if (detail::refused_by_device(s)) {  // refused at planning: the fallback is what runs
        primary_ = std::move(fallback_);
        fallback_ = {};
        s = Status::success;
      }
    }
    RSS_TRY(s);
    ready_ = true;
    return Status::success;
  }

 public:
  /// Launches on `stream`, on the device the operator was initialised on (made current for the call
  /// and restored). Asynchronous, never synchronises. `ran` (optional) receives the strategy that
  /// ran: for automatic, the fallback when the device refused the planned launch at run time.
  Status run(cudaStream_t stream = nullptr, Strategy* ran = nullptr) const noexcept {
    if (!ready_) return Status::invalid_strategy;
    Strategy used = primary_.strategy;
    Status s = Status::success;
    if (!layout_.empty()) {
      const detail::DeviceScope scope(device_);
      RSS_TRY(scope.status());
      s = primary_.launch(detail::Launcher{stream});
      if (detail::refused_by_device(s) && fallback_.strategy != Strategy::automatic) {
        used = fallback_.strategy;
        s = fallback_.launch(detail::Launcher{stream});
      }
    }
    if (ran != nullptr && ok(s)) *ran = used;
    return s;
  }

  /// The launches run() makes, without making them.
  Status describe(LaunchList* out) const noexcept {
    if (out == nullptr) return Status::null_pointer;
    if (!ready_) return Status::invalid_strategy;
    LaunchList list;
    if (!layout_.empty()) RSS_TRY(primary_.launch(detail::Launcher{nullptr, &list, true}));
    *out = list;
    return Status::success;
  }

  /// The concrete strategy run() launches (for automatic: the one it picked).
  Strategy strategy() const noexcept { return primary_.strategy; }
  /// The device the operator was initialised on; run() launches there.
  int device() const noexcept { return device_; }
  bool ready() const noexcept { return ready_; }

 private:
  Layout layout_{};
  int device_ = 0;
  detail::PlannedCall<T> primary_;
  detail::PlannedCall<T> fallback_;  // automatic only: strategy stays `automatic` when there is none
  bool ready_ = false;
};

}  // namespace rss
