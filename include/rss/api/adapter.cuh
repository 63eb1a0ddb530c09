#pragma once
// The operator adapter: one object that drives any registry of strategies for one call shape (CUTLASS's
// device adapter is the model). initialize() validates, reads the device once, resolves `automatic`,
// plans (and prepares) the pick and, for automatic, the fallback; rebind() points a ready operator at new
// tensors of the same layout; run() only launches, on the device it was initialised on, falling back when
// the device refuses the pick; describe() is run() with a dry Launcher. The forward's rss::Operator and the
// backward's rss::BackwardOperator are this adapter over their problems (rss/api/operator.cuh,
// rss/backward/backward.cuh). A problem is a struct:
//
//   using Element, Id, Config, Call, Strategies;   the storage type, the strategy names, what to run, the
//                                                  arguments, the registry (a StrategyList)
//   static constexpr Id automatic, fallback;
//   static Id id(const Config&);  static Config concrete(Id);  static bool valid(const Config&);
//   static Status check_shape(const Call&);        sizes and leading dimensions (no device needed)
//   static Config resolve(const Config&, const DeviceInfo&, const Call&);   automatic -> a concrete pick
//   static Status validate(const Call&, std::size_t workspace_required, int device, PointerCheck);
//   static bool empty(const Call&);  static void place_workspace(Call&, void*, std::size_t);
#include <cuda_runtime.h>

#include <cstdint>
#include <type_traits>
#include <utility>
#include <variant>

#include "rss/detail/cuda_status.cuh"
#include "rss/detail/launch.cuh"
#include "rss/device.cuh"
#include "rss/launch_info.hpp"
#include "rss/status.hpp"
#include "rss/strategies/registry.cuh"

namespace rss::detail {

/// A refusal that another strategy may not meet: automatic then falls back.
inline bool refused_by_device(Status s) {
  return s == Status::not_admissible || s == Status::cooperative_unsupported || s == Status::unsupported_device;
}

/// Switches to `device` for a scope and back (a no-op when it is already current).
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

/// Workspace bytes of a concrete strategy of problem P.
template <class P>
Status strategy_workspace_bytes(typename P::Id id, std::int64_t rows, std::int64_t cols, const DeviceInfo& d,
                                std::size_t* bytes) {
  return with_strategy(id, [&](auto strategy) {
    return decltype(strategy)::template workspace_bytes<typename P::Element>(rows, cols, d, bytes);
  }, typename P::Strategies{});
}

/// The workspace of `requested` once resolved to `concrete`: for automatic, its pick's region followed by
/// its fallback's, so that a fallback never overwrites the pick's state (megakernel_row's barrier counters).
template <class P>
Status workspace_layout(const typename P::Config& requested, const typename P::Config& concrete, std::int64_t rows,
                        std::int64_t cols, const DeviceInfo& d, std::size_t* primary, std::size_t* total) {
  if (!P::valid(requested)) return Status::invalid_strategy;
  RSS_TRY(strategy_workspace_bytes<P>(P::id(concrete), rows, cols, d, primary));
  *total = *primary;
  if (P::id(requested) == P::automatic && P::id(concrete) != P::fallback) {
    std::size_t fallback = 0;
    RSS_TRY(strategy_workspace_bytes<P>(P::fallback, rows, cols, d, &fallback));
    if (fallback > SIZE_MAX - *primary) return Status::size_overflow;
    *total += fallback;  // primary is a multiple of workspace_alignment: the fallback's region stays aligned
  }
  return Status::success;
}

/// One strategy of problem P planned for one call.
template <class P>
struct PlannedCall {
  using T = typename P::Element;
  typename PlanVariantOf<T, typename P::Strategies>::type plan;
  typename P::Call call{};
  typename P::Id strategy = P::automatic;

  /// Plans (and, unless describing, prepares) `config`'s strategy for `c` on device d.
  Status make(const typename P::Config& config, const typename P::Call& c, const DeviceInfo& d, bool prepare,
              cudaStream_t stream) {
    return with_strategy(P::id(config), [&](auto tag) {
      using S = decltype(tag);
      Planned<S, T> planned;
      RSS_TRY(S::template make_plan<T>(c, d, config, &planned.plan));
      if (prepare) RSS_TRY(S::prepare(planned.plan, c, stream));
      plan = std::move(planned);
      call = c;
      strategy = S::id;
      return Status::success;
    }, typename P::Strategies{});
  }

  Status launch(const Launcher& launcher) const {
    return std::visit(
        [&](const auto& planned) -> Status {
          using Q = std::decay_t<decltype(planned)>;
          if constexpr (std::is_same_v<Q, std::monostate>) {
            return Status::invalid_strategy;
          } else {
            return Q::Strategy::template launch<T>(planned.plan, call, launcher);
          }
        },
        plan);
  }

  bool planned() const noexcept { return strategy != P::automatic; }
};

template <class P>
class OperatorAdapter {
 public:
  using Id = typename P::Id;
  using Config = typename P::Config;
  using Call = typename P::Call;

  /// Validates and prepares `config` for `call` on the current device. For automatic, picks the strategy,
  /// falls back when the device refuses the pick at planning, and also plans the fallback for a refusal at
  /// run time. On any refusal the operator is left unready.
  Status initialize(const Config& config, const Call& call, cudaStream_t stream) noexcept {
    ready_ = false;
    primary_ = {};
    fallback_ = {};
    RSS_TRY(P::check_shape(call));
    RSS_TRY(current_device(&device_));
    RSS_TRY(device_info(device_, &device_info_));
    if (!P::valid(config)) return Status::invalid_strategy;
    requested_ = config;
    concrete_ = P::resolve(config, device_info_, call);
    RSS_TRY(workspace_layout<P>(config, concrete_, call.layout.rows, call.layout.cols, device_info_, &primary_bytes_,
                                &required_));
    RSS_TRY(P::validate(call, required_, device_, PointerCheck::runtime));
    empty_ = P::empty(call);
    if (empty_) {
      primary_.strategy = P::id(concrete_);
      primary_.call = call;
      ready_ = true;
      return Status::success;
    }
    RSS_TRY(plan(call, stream, &primary_, &fallback_));
    ready_ = true;
    return Status::success;
  }

  /// Points a ready operator at new tensors of the same layout and another workspace (a framework's fresh
  /// tensors on every step): validated like initialize(), the same strategies planned again for them (their
  /// alignment may pick another kernel) and prepared on `stream`. On a refusal the operator keeps its
  /// previous tensors and stays ready. `check`: whether the runtime is asked where the pointers live.
  Status rebind(const Call& call, cudaStream_t stream, PointerCheck check) noexcept {
    if (!ready_) return Status::invalid_strategy;
    RSS_TRY(P::check_shape(call));
    RSS_TRY(P::validate(call, required_, device_, check));
    if (empty_) {
      primary_.call = call;
      return Status::success;
    }
    const DeviceScope scope(device_);
    RSS_TRY(scope.status());
    PlannedCall<P> primary, fallback;
    RSS_TRY(plan(call, stream, &primary, &fallback));
    primary_ = std::move(primary);
    fallback_ = std::move(fallback);
    return Status::success;
  }

  /// Launches on `stream`, on the device the operator was initialised on (made current for the call and
  /// restored). Asynchronous, never synchronises. `ran` (optional) receives the strategy that ran: for
  /// automatic, the fallback when the device refused the planned launch at run time.
  Status run(cudaStream_t stream, Id* ran) const noexcept {
    if (!ready_) return Status::invalid_strategy;
    Id used = primary_.strategy;
    Status s = Status::success;
    if (!empty_) {
      const DeviceScope scope(device_);
      RSS_TRY(scope.status());
      s = primary_.launch(Launcher{stream});
      if (refused_by_device(s) && fallback_.planned()) {
        used = fallback_.strategy;
        s = fallback_.launch(Launcher{stream});
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
    if (!empty_) RSS_TRY(primary_.launch(Launcher{nullptr, &list, true}));
    *out = list;
    return Status::success;
  }

  /// The concrete strategy run() launches (for automatic: the one it picked, or its fallback).
  Id strategy() const noexcept { return primary_.strategy; }
  /// The concrete configuration run() launches: automatic's pick with the cluster configuration it chose
  /// (the tuning table's residence and geometry), or the fallback it fell back to. Initialising an operator
  /// with it plans the same kernels without resolving automatic again; initialising with strategy() alone
  /// would take that strategy's default configuration.
  Config config() const noexcept { return P::id(concrete_) == primary_.strategy ? concrete_ : P::concrete(primary_.strategy); }
  int device() const noexcept { return device_; }
  bool ready() const noexcept { return ready_; }
  const Call& call() const noexcept { return primary_.call; }

  /// The plan of strategy S when it is the one that runs; null otherwise.
  template <class S>
  const typename S::template Plan<typename P::Element>* plan_of() const noexcept {
    const auto* planned = std::get_if<Planned<S, typename P::Element>>(&primary_.plan);
    return planned != nullptr ? &planned->plan : nullptr;
  }

 private:
  /// Plans the concrete pick for `call`, and for automatic its fallback (in the workspace after the pick's).
  Status plan(const Call& call, cudaStream_t stream, PlannedCall<P>* primary, PlannedCall<P>* fallback) noexcept {
    Status s = primary->make(concrete_, call, device_info_, true, stream);
    if (P::id(requested_) == P::automatic && P::id(concrete_) != P::fallback) {
      Call fallback_call = call;
      P::place_workspace(fallback_call, call.workspace == nullptr ? nullptr : static_cast<unsigned char*>(call.workspace) + primary_bytes_,
                         required_ - primary_bytes_);
      RSS_TRY(fallback->make(P::concrete(P::fallback), fallback_call, device_info_, true, stream));
      if (refused_by_device(s)) {  // refused at planning: the fallback is what runs
        *primary = std::move(*fallback);
        *fallback = {};
        s = Status::success;
      }
    }
    return s;
  }

  Config requested_{};
  Config concrete_{};
  DeviceInfo device_info_{};
  std::size_t primary_bytes_ = 0;
  std::size_t required_ = 0;
  int device_ = 0;
  bool empty_ = false;
  PlannedCall<P> primary_;
  PlannedCall<P> fallback_;  // automatic only: not planned when there is none
  bool ready_ = false;
};

}  // namespace rss::detail
