#pragma once
// The strategy registry: the one list of the forward's strategy types, and the one dispatch from a
// strategy value to its type. Adding a strategy is one file in this folder and one entry in `Strategies`.
#include <type_traits>
#include <variant>
#include <utility>

#include "rss/strategies/baseline.cuh"
#include "rss/strategies/baseline_graph.cuh"
#include "rss/strategies/cluster_row.cuh"
#include "rss/strategies/local_fusion.cuh"
#include "rss/strategies/long_row.cuh"
#include "rss/strategies/megakernel.cuh"

namespace rss::detail {

template <class... S>
struct StrategyList {};

using Strategies =
    StrategyList<Baseline, BaselineGraph, LocalFusion, MegakernelGrid, MegakernelRow, BlockRow, ClusterRow, LongRow>;

/// Calls f(S{}) with the strategy type of the list whose id is `id`; invalid_strategy when none is
/// (automatic is not a strategy type: the operator resolves it first). Any registry: the forward's below,
/// the backward's (rss/backward/strategies.cuh).
template <class Id, class F, class... S>
Status with_strategy(Id id, F&& f, StrategyList<S...>) {
  Status result = Status::invalid_strategy;
  const bool found = ((S::id == id ? (result = f(S{}), true) : false) || ...);
  (void)found;
  return result;
}

template <class F>
Status with_strategy(Strategy id, F&& f) {
  return with_strategy(id, std::forward<F>(f), Strategies{});
}

/// A strategy's plan for storage type T, tagged with its strategy so that a std::variant of plans
/// dispatches to the right launch even when two strategies share a plan type.
template <class S, class T>
struct Planned {
  using Strategy = S;
  typename S::template Plan<T> plan;
};

template <class T, class List>
struct PlanVariantOf;
template <class T, class... S>
struct PlanVariantOf<T, StrategyList<S...>> {
  using type = std::variant<std::monostate, Planned<S, T>...>;
};

/// Any strategy's plan (monostate: none yet).
template <class T>
using AnyPlan = typename PlanVariantOf<T, Strategies>::type;

}  // namespace rss::detail
