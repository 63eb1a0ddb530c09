#pragma once
// Loading tiles from global into shared memory with the copy engine (sm_90's bulk copy,
// cp.async.bulk): one thread issues one instruction for a whole tile, and the bytes' arrival
// completes a phase of that tile's mbarrier, which every thread waits on. No thread holds data in
// flight, so a load costs no registers however long the tile. The PTX comes from CCCL's cuda::ptx.
#include <cuda/ptx>

#include <cstdint>

#include "rss/sync/cluster_reduce.cuh"  // RSS_CLUSTER_DEVICE_CODE: sm_90 and later

namespace rss::detail {

/// Successive loads into `Tiles` tiles of shared memory, each with its own mbarrier. Every thread of the
/// block constructs it (the constructor ends with a block barrier) and calls wait(i) once per issue(i);
/// thread 0 alone calls issue().
template <int Tiles>
class BulkTileLoads {
 public:
  /// `barriers`: Tiles __shared__ 8-byte slots that nothing else uses.
  __device__ explicit BulkTileLoads(std::uint64_t* barriers) : barriers_(barriers) {
#if RSS_CLUSTER_DEVICE_CODE
    if (threadIdx.x == 0) {
      for (int i = 0; i < Tiles; ++i) cuda::ptx::mbarrier_init(barriers_ + i, 1);  // one arrival per phase: issue()'s
      cuda::ptx::fence_mbarrier_init(cuda::ptx::sem_release, cuda::ptx::scope_cluster);  // seen by the copy engine
    }
    __syncthreads();
#endif
  }

  /// Thread 0 only: copies `bytes` (a positive multiple of 16) from src to dst, both 16-byte aligned, and
  /// completes tile i's barrier. The block must be done with dst's previous contents: a block barrier
  /// between its last reads and this call.
  __device__ void issue(int i, void* dst, const void* src, std::uint32_t bytes) {
#if RSS_CLUSTER_DEVICE_CODE
    // The block's reads of dst (generic proxy) come before the copy engine's writes (async proxy).
    cuda::ptx::fence_proxy_async(cuda::ptx::space_shared);
    (void)cuda::ptx::mbarrier_arrive_expect_tx(cuda::ptx::sem_release, cuda::ptx::scope_cta, cuda::ptx::space_shared,
                                               barriers_ + i, bytes);
    cuda::ptx::cp_async_bulk(cuda::ptx::space_cluster, cuda::ptx::space_global, dst, src, bytes, barriers_ + i);
#endif
  }

  /// The same with an L2 cache policy on the reads (PTX createpolicy: e.g. evict_first for bytes read once) and
  /// without the proxy fence: for a caller that issues several copies after one fence.proxy.async, made after the
  /// block's last accesses of every dst (and a block barrier between them).
  __device__ void issue_fenced(int i, void* dst, const void* src, std::uint32_t bytes, std::uint64_t policy) {
#if RSS_CLUSTER_DEVICE_CODE
    (void)cuda::ptx::mbarrier_arrive_expect_tx(cuda::ptx::sem_release, cuda::ptx::scope_cta, cuda::ptx::space_shared,
                                               barriers_ + i, bytes);
    const auto dst_addr = static_cast<std::uint32_t>(__cvta_generic_to_shared(dst));
    const auto bar_addr = static_cast<std::uint32_t>(__cvta_generic_to_shared(barriers_ + i));
    asm volatile(
        "cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes.L2::cache_hint [%0], [%1], %2, [%3], %4;" ::
            "r"(dst_addr),
        "l"(src), "r"(bytes), "r"(bar_addr), "l"(policy)
        : "memory");
#else
    (void)i, (void)dst, (void)src, (void)bytes, (void)policy;
#endif
  }

  /// Every thread: returns once the last copy issued for tile i has landed (its bytes are visible to the caller).
  __device__ void wait(int i) {
#if RSS_CLUSTER_DEVICE_CODE
    const std::uint32_t parity = (phases_ >> i) & 1u;
    while (!cuda::ptx::mbarrier_try_wait_parity(barriers_ + i, parity)) {
    }
    phases_ ^= 1u << i;
#endif
  }

 private:
  std::uint64_t* barriers_;
  std::uint32_t phases_ = 0;  // bit i: the parity of tile i's next phase
};

}  // namespace rss::detail
