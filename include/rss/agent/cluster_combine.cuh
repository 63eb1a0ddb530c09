#pragma once
// The combine of the row agent: a row program's per-thread partials, reduced over the block (CUB) and
// then over the row's cluster through distributed shared memory (rss/sync/cluster_reduce.cuh). A row
// program names the value of each of its reduction rounds (Rounds<...>); the combine owns their shared
// storage. WithinCluster is the combine of one GPU; AcrossRanks (rss/sharded/device_path.cuh) continues across ranks.
#include <cstdint>
#include <cub/block/block_reduce.cuh>

#include "rss/device_info.hpp"
#include "rss/sync/cluster_reduce.cuh"

namespace rss::detail {

/// The values a row program reduces, one per round, in the order it reduces them each row.
template <class... V>
struct Rounds {
  static constexpr int count = sizeof...(V);
};

template <int I, class R>
struct RoundValue;
template <class V, class... Rest>
struct RoundValue<0, Rounds<V, Rest...>> {
  using type = V;
};
template <int I, class V, class... Rest>
struct RoundValue<I, Rounds<V, Rest...>> {
  using type = typename RoundValue<I - 1, Rounds<Rest...>>::type;
};

/// Cluster slots are pushed into again only after the pusher's next cluster barrier. With two rounds or
/// more a row's round k + 1 barrier separates every push into round k's slots from the peers' reads of
/// them, so one set suffices; with one round a block may push row i + 1's value while a slower peer still
/// reads row i's, so two sets alternate by row (by row i + 2 every peer has passed row i + 1's barrier).
template <class R>
inline constexpr int slot_sets = R::count == 1 ? 2 : 1;

template <int Threads, int Sets, class V>
struct RoundStorage {
  typename cub::BlockReduce<V, Threads>::TempStorage reduce;
  V slots[Sets][portable_cluster_size];  // one per block of the cluster
};

template <int Threads, int Sets, class... V>
struct RoundStorages {};
template <int Threads, int Sets, class V, class... Rest>
struct RoundStorages<Threads, Sets, V, Rest...> {
  RoundStorage<Threads, Sets, V> head;
  RoundStorages<Threads, Sets, Rest...> tail;
};

template <int I, int Threads, int Sets, class V, class... Rest>
__device__ __forceinline__ auto& round_storage(RoundStorages<Threads, Sets, V, Rest...>& s) {
  if constexpr (I == 0) return s.head;
  else return round_storage<I - 1>(s.tail);
}

template <int Threads, class R>
struct ClusterStorage;
template <int Threads, class... V>
struct ClusterStorage<Threads, Rounds<V...>> {
  RoundStorages<Threads, slot_sets<Rounds<V...>>, V...> rounds;
};

/// Block then cluster. Every thread of every block calls each member in the same order.
template <int Threads, class R>
class ClusterCombine {
 public:
  using Storage = ClusterStorage<Threads, R>;

  __device__ ClusterCombine(int cluster_size, Storage& storage)
      : storage_(storage), cluster_size_(cluster_size), start_(cluster_size) {}

  /// Round I of this row: thread_value is this thread's partial; every thread gets the cluster's total,
  /// combined in block-rank order (the same bits in every block).
  template <int I, class Op>
  __device__ __forceinline__ typename RoundValue<I, R>::type all_reduce(typename RoundValue<I, R>::type thread_value,
                                                                        Op op) {
    using V = typename RoundValue<I, R>::type;
    auto& round = round_storage<I>(storage_.rounds);
    const V block = cub::BlockReduce<V, Threads>(round.reduce).Reduce(thread_value, op);
    return cluster_all_reduce(block, round.slots[set_], cluster_size_, start_, op);
  }

  __device__ void end_row() {
    if constexpr (slot_sets<R> == 2) set_ ^= 1;
  }
  /// A block without rows still completes the start barrier it arrived on.
  __device__ void finish() {
    if (start_.pending) start_.wait();
  }

 private:
  Storage& storage_;
  int cluster_size_;
  ClusterStart start_;
  int set_ = 0;
};

/// The combine of rows that live on one GPU: nothing from the host but the cluster size. No register budget
/// of its own (0): the row program's holds (the forward's from its share, the backward's none).
struct WithinCluster {
  struct Params {};
  template <int Threads>
  static constexpr int min_blocks_per_sm = 0;
  template <int Threads, class R>
  class Combine : public ClusterCombine<Threads, R> {
   public:
    using Storage = typename ClusterCombine<Threads, R>::Storage;
    __device__ Combine(const Params&, int cluster_size, Storage& storage) : ClusterCombine<Threads, R>(cluster_size, storage) {}
    __device__ void begin_row() {}
  };
};

}  // namespace rss::detail
