#pragma once
// One global round trip among cluster leaders: each cluster's leader (thread 0 of the cluster's first block)
// writes its cluster's value to a slot in global memory and adds one to an arrival counter with release
// semantics; the first warp of every block of the grid polls the counter with acquire loads until every leader
// of this round has arrived, a block barrier passes that on, and the whole block reads the slots through L2 (a
// slot a thread, all in flight at once) and combines them in a fixed order (the same bits in every block).
// Strategy long_row makes two such rounds per row.
//
// The counter is never reset. A launch's targets are `base + k * leaders` for its rounds k = 1, 2, ..., where
// `base` is a second word of the state that the previous launch left equal to the counter: every block reads
// it before its first cluster exchange, and the first block writes the next base after the launch's last round
// (by then every block has read it: a leader arrives only after its cluster's exchange of that round, which
// waits for every block of the cluster's push, made after that block's read). Counts wrap modulo 2^32; waits
// compare by signed difference.
//
// Slots are reused every second round: a leader writes round k + 2's slot only after round k + 1 completed,
// and every block reads round k's slots before it takes part in round k + 1 (its push to its cluster), so one slot
// per leader and per kind of value (long_row alternates statistics and sums) is enough.
//
// Correctness condition: every block of the grid must be co-resident (cooperative launch, admitted by the
// planner). A wait longer than max_wait_ns (a corrupted state, blocks that are not co-resident) traps: the
// launch fails with an error instead of hanging, as RowBarrier's does.
#include <cuda/atomic>

#include <cstdint>
#include <cstring>

#include "rss/phases/block_reduce.cuh"
#include "rss/sync/bounded_wait.cuh"

namespace rss {

/// Global state of the exchange in a workspace: arrivals == base (zero, say) before the first launch; every
/// launch leaves them equal again. Nothing else may write it between launches.
struct LeaderExchangeState {
  unsigned int arrivals;
  unsigned int base;
};

/// Read through L2 (the slot was written by another SM; a stale L1 line of the previous round must not answer).
template <class V>
__device__ V load_slot_through_l2(const V* p) {
  static_assert(sizeof(V) % 4 == 0, "slots are whole 32-bit words");
  unsigned w[sizeof(V) / 4];
  const auto* words = reinterpret_cast<const unsigned*>(p);
#pragma unroll
  for (int i = 0; i < static_cast<int>(sizeof(V) / 4); ++i) w[i] = __ldcg(words + i);
  V r;
  memcpy(&r, w, sizeof(V));
  return r;
}

/// Shared memory of a block's reduction over the leaders' slots (reduce_slots), per value type.
template <class V, int Threads>
using SlotReduction = typename detail::BlockAllReduce<V, Threads>::TempStorage;

/// The slots [0, count) reduced with op by the block and returned to every thread: thread t takes slots t,
/// t + Threads, ... (read through L2, all in flight at once), then the block's reduction (CUB's, the same bits in
/// every block for the same slots).
template <int Threads, class V, class Op>
__device__ V reduce_slots(const V* slots, int count, const V& identity, Op op, SlotReduction<V, Threads>& scratch) {
  V mine = identity;
  for (int i = static_cast<int>(threadIdx.x); i < count; i += Threads) mine = op(mine, load_slot_through_l2(slots + i));
  return detail::BlockAllReduce<V, Threads>::all_reduce(mine, op, scratch);
}

class LeaderExchange {
 public:
  static constexpr unsigned long long max_wait_ns = rss::max_wait_ns;  // rss/sync/bounded_wait.cuh

  /// Every thread of every block constructs it at the start of the kernel, before the block's first cluster
  /// exchange. `leaders`: the clusters of the grid.
  __device__ LeaderExchange(LeaderExchangeState* state, int leaders) : state_(state), leaders_(leaders) {
    if (threadIdx.x < 32) {
      base_ = cuda::atomic_ref<unsigned int, cuda::thread_scope_device>(state_->base).load(cuda::memory_order_relaxed);
    }
  }

  /// One round. Every thread of every block calls it, the same number of times. `value` is the cluster's total,
  /// needed only in the leader thread (`leader`: thread 0 of the cluster's first block), which writes it to
  /// slots[cluster]. Returns the combination of all leaders' values to every thread, the same bits in every block
  /// (reduce_slots' order).
  template <int Threads, class V, class Op>
  __device__ V all_reduce(const V& value, V* slots, bool leader, int cluster, const V& identity, Op op,
                          SlotReduction<V, Threads>& scratch) {
    ++round_;
    if (leader) {
      slots[cluster] = value;
      // Release: the slot's write is visible to whoever acquires a count that includes this arrival.
      cuda::atomic_ref<unsigned int, cuda::thread_scope_device>(state_->arrivals).fetch_add(1u, cuda::memory_order_release);
    }
    if (threadIdx.x < 32) wait_for(base_ + round_ * static_cast<unsigned int>(leaders_));
    // The first warp's acquire, then the block barrier: every thread's slot reads come after the arrivals. A slot a
    // thread, all in flight at once, however many leaders (the first warp alone read 32 at a time; on the plans
    // measured the two ran alike: bench/NOTES.md, long rows step 7).
    __syncthreads();
    return reduce_slots<Threads>(static_cast<const V*>(slots), leaders_, identity, op, scratch);
  }

  /// After the launch's last round: the grid's first block leaves the next launch its base (the counter's
  /// value now). Every thread of every block calls it.
  __device__ void finish(bool first_block) const {
    if (first_block && threadIdx.x == 0) {
      cuda::atomic_ref<unsigned int, cuda::thread_scope_device>(state_->base)
          .store(base_ + round_ * static_cast<unsigned int>(leaders_), cuda::memory_order_relaxed);
    }
  }

 private:
  __device__ void wait_for(unsigned int target) const {
    cuda::atomic_ref<unsigned int, cuda::thread_scope_device> arrivals(state_->arrivals);
    // Bounded: a corrupted state or blocks that are not co-resident fail the launch instead of hanging.
    detail::spin_until([&] { return static_cast<int>(arrivals.load(cuda::memory_order_acquire) - target) >= 0; });
  }

  LeaderExchangeState* state_;
  int leaders_;
  unsigned int base_ = 0;   // meaningful in the first warp only
  unsigned int round_ = 0;  // rounds of this launch so far
};

}  // namespace rss
