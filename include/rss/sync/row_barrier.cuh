#pragma once
// Row-scoped barrier: only the blocks that share a row wait for each other, through two counters
// in global memory. Reusable across phases and across launches without any reset: the last block
// to arrive sets the arrival count back to 0 and advances the generation.
//
// Memory ordering. Before arriving, the block's __syncthreads() orders every thread's phase work
// before thread 0's arrival; the arrival is a device-scope acq_rel fetch_add, so it releases
// everything this block wrote (its partial statistics) and, for the last arriver, acquires what the
// others released. The last arriver resets the count and then publishes with a release store of the
// generation; the others spin on an acquire load of it. Release/acquire on the generation makes every
// block's partials (and the count's reset) visible to every waiter before it leaves; the final
// __syncthreads() passes that on to the rest of the block, which then reads the partials through L2.
// The generation is read before arriving: it cannot advance until this block has arrived.
//
// Correctness condition: all blocks of a row must be co-resident (cooperative launch, admitted by
// the planner); otherwise a waiting block could keep an unscheduled partner from ever arriving.
#include <cuda/atomic>

#include "rss/sync/bounded_wait.cuh"

namespace rss {

/// Global state of one row's barrier. Must be zero before its first use; every use leaves it
/// reusable (count back at 0). Nothing else may write it between uses: a corrupted state makes
/// the waiting blocks trap after max_wait_ns (a launch error) rather than hang.
struct RowBarrierState {
  unsigned int count;
  unsigned int generation;
};

class RowBarrier {
 public:
  static constexpr unsigned long long max_wait_ns = rss::max_wait_ns;  // rss/sync/bounded_wait.cuh

  __device__ RowBarrier(RowBarrierState* state, unsigned int blocks) : state_(state), blocks_(blocks) {}

  __device__ void wait() const {
    __syncthreads();
    if (threadIdx.x == 0) {
      cuda::atomic_ref<unsigned int, cuda::thread_scope_device> count(state_->count);
      cuda::atomic_ref<unsigned int, cuda::thread_scope_device> generation(state_->generation);
      const unsigned int seen = generation.load(cuda::memory_order_relaxed);
      if (count.fetch_add(1u, cuda::memory_order_acq_rel) == blocks_ - 1u) {
        count.store(0u, cuda::memory_order_relaxed);
        generation.store(seen + 1u, cuda::memory_order_release);
      } else {
        // Bounded: a corrupted state (another user wrote the workspace) or blocks that are not co-resident
        // fail the launch instead of hanging.
        detail::spin_until([&] { return generation.load(cuda::memory_order_acquire) != seen; });
      }
    }
    __syncthreads();
  }

 private:
  RowBarrierState* state_;
  unsigned int blocks_;
};

}  // namespace rss
