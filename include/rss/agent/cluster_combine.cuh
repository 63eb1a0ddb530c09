#pragma once
// The combine of the row agent: a row program's per-thread partials, reduced over the block (CUB) and
// then over the row's cluster through distributed shared memory (rss/sync/cluster_reduce.cuh: st.async
// into every peer's slots, one mbarrier a round, no cluster barrier in the row loop). A row
// program names the value of each of its reduction rounds (Rounds<...>); the combine owns their shared
// storage. WithinCluster is the combine of one GPU; AcrossRanks (rss/sharded/device_path.cuh) continues across ranks.
#include <cstdint>
#include <type_traits>
#include <cub/block/block_reduce.cuh>
#include <cuda/ptx>

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

/// Slots and mbarriers are reused with no cluster barrier between rows. A block pushes row i + 1's round k
/// only after its wait on the round before that one, which needs every peer's push of it; a peer's thread 0
/// pushes a round after its block reduce, whose block barrier (CUB's, Threads > 32) every thread of the peer
/// passes after reading the slots of its earlier rounds and after its phases of them completed. With two
/// rounds or more the round before row i + 1's round k comes after row i's round k, so that round's slots
/// were read and its phase completed before any byte of the next use can arrive (no early complete-tx).
/// With one round the round before is row i's own, which a peer pushes before reading it: two sets, each
/// with its mbarrier, alternate by row (row i + 2 reuses row i's set after row i + 1's round). A thread never
/// misses a phase: thread 0 arms the next use of an mbarrier only after that block barrier too.
template <class R>
inline constexpr int slot_sets = R::count == 1 ? 2 : 1;

template <int Threads, int Sets, class V>
struct RoundStorage {
  typename cub::BlockReduce<V, Threads>::TempStorage reduce;
  ClusterSlots<V, max_cluster_blocks> slots[Sets];
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
  static constexpr int sets = slot_sets<Rounds<V...>>;
  RoundStorages<Threads, sets, V...> rounds;
  std::uint64_t filled[sizeof...(V)][sets];  // mbarriers: round I's slots[set] are complete
};

/// The finish of a round that wants the total itself.
struct Unfinished {
  template <class V>
  __device__ V operator()(const V& total) const {
    return total;
  }
};

/// Block then cluster. Every thread of every block calls each member in the same order.
template <int Threads, class R>
class ClusterCombine {
  static_assert(Threads > 32, "slot reuse relies on the block barrier inside CUB's block reduce");

 public:
  using Storage = ClusterStorage<Threads, R>;

  __device__ ClusterCombine(int cluster_size, Storage& storage)
      : storage_(storage), cluster_size_(cluster_size), start_(cluster_size, [&storage] {
#if RSS_CLUSTER_DEVICE_CODE
          for (auto& round : storage.filled)
            for (auto& barrier : round) cuda::ptx::mbarrier_init(&barrier, 1);  // thread 0's arrive per phase
#endif
        }) {}

  /// Round I of this row: thread_value is this thread's partial; every thread gets finish(the cluster's total),
  /// the total combined in block-rank order (the same bits in every block). What the row needs of the total
  /// (its scale) may go in `finish`: where the block holds the row alone, one thread computes it before the
  /// barrier that publishes it, instead of every thread after (16-bit rows of 8K: 0.5-0.8%; bench/NOTES.md).
  template <int I, class Op, class Finish = Unfinished>
  __device__ __forceinline__ auto all_reduce(typename RoundValue<I, R>::type thread_value, Op op, Finish finish = {}) {
    using V = typename RoundValue<I, R>::type;
    using Out = decltype(finish(thread_value));
    constexpr int sets = Storage::sets;
    auto& round = round_storage<I>(storage_.rounds);
    const V block = cub::BlockReduce<V, Threads>(round.reduce).Reduce(thread_value, op);  // valid in thread 0
    if constexpr (!std::is_same_v<Finish, Unfinished>) {
      if (cluster_size_ == 1) {  // no cluster launch: a block barrier publishes the finished total
        // In the round's slots, which no peer writes then: a field of its own moved the tile kernels' dynamic
        // tiles off their alignment, and 256-thread tiles slowed by 8-13% (bench/NOTES.md).
        static_assert(sizeof(Out) <= sizeof(round.slots[0]) && alignof(Out) <= 16);
        Out* published = reinterpret_cast<Out*>(&round.slots[0]);
        if (threadIdx.x == 0) *published = finish(block);
        __syncthreads();
        return Out(*published);
      }
    }
    // Each (round, set) mbarrier completes one phase per use: every row with one set, every other row with two.
    const int set = sets == 2 ? static_cast<int>(rows_ & 1u) : 0;
    const std::uint32_t parity = (sets == 2 ? rows_ >> 1 : rows_) & 1u;
    return finish(
        cluster_all_reduce(block, round.slots[set], &storage_.filled[I][set], parity, cluster_size_, start_, op));
  }

  __device__ void end_row() { ++rows_; }
  /// A block without rows still completes the start barrier it arrived on. A block with rows may exit after
  /// its last wait: every byte pushed to it belongs to a row and round it waited for (the blocks of a cluster
  /// share their rows), and its own last st.async need nothing of it (the data left with the instruction, and
  /// the peer it lands in waits for it).
  __device__ void finish() {
    if (start_.pending) start_.wait();
  }

 private:
  Storage& storage_;
  int cluster_size_;
  ClusterStart start_;
  std::uint32_t rows_ = 0;  // rows this block has combined
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
