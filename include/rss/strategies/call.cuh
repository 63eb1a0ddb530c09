#pragma once
// What every strategy receives and offers. A strategy is one struct in one file of this folder,
// listed once in rss/strategies/registry.cuh; it provides
//
//   static constexpr Strategy id;                       its name in rss::Strategy
//   template <class T> struct Plan;                     everything run() needs, decided once
//   template <class T> static Status workspace_bytes(std::int64_t rows, std::int64_t cols,
//                                                    const DeviceInfo&, std::size_t* bytes);
//   template <class T> static Status make_plan(const Call<T>&, const DeviceInfo&, const Config&, Plan<T>*);
//                                                       no device-side effect: a dry run may follow
//   template <class T> static Status prepare(Plan<T>&, const Call<T>&, cudaStream_t);
//                                                       device-side set-up: a graph, zeroed counters
//   template <class T> static Status launch(const Plan<T>&, const Call<T>&, const Launcher&);
//                                                       the launches; with a dry Launcher, their description
//
// Every strategy writes the row statistics when the call has them (stats not null).
// Calls reach a strategy validated (rss/validate.hpp, rss/device.cuh) and non-empty (rows, cols > 0):
// strategies check nothing the boundary already checked.
#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>

#include "rss/device_info.hpp"
#include "rss/detail/launch.cuh"
#include "rss/status.hpp"
#include "rss/strategy.hpp"
#include "rss/types.hpp"

namespace rss::detail {

/// The arguments of one validated call.
template <class T>
struct Call {
  const T* x = nullptr;
  T* y = nullptr;
  Layout layout{};
  void* workspace = nullptr;
  std::size_t workspace_bytes = 0;
  RowStatistics* stats = nullptr;  // optional: each row's statistics are written here too
  bool with_stats = false;         // the caller asked for statistics (validation refuses a null stats then)
};

/// The workspace_bytes() of a strategy that needs no workspace.
struct NoWorkspace {
  template <class T>
  static Status workspace_bytes(std::int64_t, std::int64_t, const DeviceInfo&, std::size_t* bytes) noexcept {
    *bytes = 0;
    return Status::success;
  }
};

/// The prepare() of a strategy that has nothing to set up on the device.
struct NothingToPrepare {
  template <class Plan, class AnyCall>
  static Status prepare(Plan&, const AnyCall&, cudaStream_t) noexcept {
    return Status::success;
  }
};

}  // namespace rss::detail
