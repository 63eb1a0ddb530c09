#pragma once
// One global round trip among cluster leaders: each cluster's leader (thread 0 of the cluster's first block)
// writes its cluster's value to a slot in global memory and adds one to an arrival counter with release
// semantics; the first warp of every block of the grid polls the counter with acquire loads until every
// leader of this round has arrived, reads the slots through L2 and combines them in slot order (the same bits
// in every block). Strategy long_row makes two such rounds per row.
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
#include <cub/warp/warp_reduce.cuh>
#include <cuda/atomic>

#include <cstdint>
#include <cstring>

#include "rss/sync/bounded_wait.cuh"

namespace rss {

/// Global state of the exchange in a workspace: arrivals == base (zero, say) before the first launch; every
/// launch leaves them equal again. Nothing else may write it between launches.
struct LeaderExchangeState {
  unsigned int arrivals;
  unsigned int base;
};

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
  /// slots[cluster]. Returns the combination of all leaders' values, in slot order, to every thread; uses
  /// `broadcast` (shared memory) to pass it from the first warp to the block.
  template <class V, class Op>
  __device__ V all_reduce(const V& value, V* slots, bool leader, int cluster, const V& identity, Op op, V* broadcast) {
    ++round_;
    if (leader) {
      slots[cluster] = value;
      // Release: the slot's write is visible to whoever acquires a count that includes this arrival.
      cuda::atomic_ref<unsigned int, cuda::thread_scope_device>(state_->arrivals).fetch_add(1u, cuda::memory_order_release);
    }
    if (threadIdx.x < 32) {
      const unsigned int target = base_ + round_ * static_cast<unsigned int>(leaders_);
      wait_for(target);  // every lane acquires for itself: its slot reads below are ordered after the arrivals
      V acc = identity;
      for (int i = static_cast<int>(threadIdx.x); i < leaders_; i += 32) acc = op(acc, load_slot(slots + i));
      // CUB's warp reduction: lane 0 gets the total, combined in the same order in every block.
      using WarpReduce = cub::WarpReduce<V>;
      __shared__ typename WarpReduce::TempStorage temp;
      acc = WarpReduce(temp).Reduce(acc, op);
      if (threadIdx.x == 0) *broadcast = acc;
    }
    __syncthreads();
    const V total = *broadcast;
    return total;
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

  /// Read through L2 (the slot was written by another SM; a stale L1 line of the previous round must not answer).
  template <class V>
  __device__ static V load_slot(const V* p) {
    static_assert(sizeof(V) % 4 == 0, "slots are whole 32-bit words");
    unsigned w[sizeof(V) / 4];
    const auto* words = reinterpret_cast<const unsigned*>(p);
#pragma unroll
    for (int i = 0; i < static_cast<int>(sizeof(V) / 4); ++i) w[i] = __ldcg(words + i);
    V r;
    memcpy(&r, w, sizeof(V));
    return r;
  }

  LeaderExchangeState* state_;
  int leaders_;
  unsigned int base_ = 0;   // meaningful in the first warp only
  unsigned int round_ = 0;  // rounds of this launch so far
};

}  // namespace rss
