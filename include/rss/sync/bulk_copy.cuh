#pragma once
// Loading a tile from global into shared memory with the copy engine (sm_90's bulk copy,
// cp.async.bulk): one thread issues one instruction for the whole tile, and the bytes' arrival
// completes a phase of an mbarrier that every thread waits on. No thread holds data in flight, so a
// load costs no registers however long the tile. The PTX comes from CCCL's cuda::ptx.
#include <cuda/ptx>

#include <cstdint>

#include "rss/sync/cluster_reduce.cuh"  // RSS_CLUSTER_DEVICE_CODE: sm_90 and later

namespace rss::detail {

/// Successive loads into one tile of shared memory. Every thread of the block constructs it (the
/// constructor ends with a block barrier) and calls wait(); thread 0 alone calls issue().
class BulkTileLoad {
 public:
  /// `barrier`: a __shared__ 8-byte slot that nothing else uses.
  __device__ explicit BulkTileLoad(std::uint64_t* barrier) : barrier_(barrier) {
#if RSS_CLUSTER_DEVICE_CODE
    if (threadIdx.x == 0) {
      cuda::ptx::mbarrier_init(barrier_, 1);  // one arrival per phase: issue()'s
      cuda::ptx::fence_mbarrier_init(cuda::ptx::sem_release, cuda::ptx::scope_cluster);  // seen by the copy engine
    }
    __syncthreads();
#endif
  }

  /// Thread 0 only: copies `bytes` (a positive multiple of 16) from src to dst, both 16-byte aligned.
  /// The block must be done with dst's previous contents: a block barrier between its last reads and
  /// this call.
  __device__ void issue(void* dst, const void* src, std::uint32_t bytes) {
#if RSS_CLUSTER_DEVICE_CODE
    // The block's reads of dst (generic proxy) come before the copy engine's writes (async proxy).
    cuda::ptx::fence_proxy_async(cuda::ptx::space_shared);
    (void)cuda::ptx::mbarrier_arrive_expect_tx(cuda::ptx::sem_release, cuda::ptx::scope_cta, cuda::ptx::space_shared,
                                               barrier_, bytes);
    cuda::ptx::cp_async_bulk(cuda::ptx::space_cluster, cuda::ptx::space_global, dst, src, bytes, barrier_);
#endif
  }

  /// Every thread: returns once the last issued copy has landed (its bytes are visible to the caller).
  __device__ void wait() {
#if RSS_CLUSTER_DEVICE_CODE
    while (!cuda::ptx::mbarrier_try_wait_parity(barrier_, phase_)) {
    }
    phase_ ^= 1u;
#endif
  }

 private:
  std::uint64_t* barrier_;
  std::uint32_t phase_ = 0;
};

}  // namespace rss::detail
