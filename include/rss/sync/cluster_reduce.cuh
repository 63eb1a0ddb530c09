#pragma once
// Combining per-block values across a thread-block cluster through distributed shared memory: each
// block pushes its value into a slot of every peer with st.async, whose bytes complete a transaction
// count on the peer's mbarrier; every block waits on its own mbarrier (acquire, cluster scope) and
// reduces its own copies. No cluster barrier, no fence, no global memory, no remote reads.
#include <cooperative_groups.h>
#include <cuda/ptx>

#include <cstdint>
#include <cstring>

/// Thread-block clusters exist from compute capability 9.0. Code using them is compiled for every
/// architecture (fat binaries) but does its work only where clusters exist; the host never launches
/// it elsewhere (the strategies refuse with unsupported_device).
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ < 900
#define RSS_CLUSTER_DEVICE_CODE 0
#else
#define RSS_CLUSTER_DEVICE_CODE 1
#endif

namespace rss::detail {

/// A block may write into another block's shared memory only once that block has started and initialised
/// the mbarriers the writes complete on. Thread 0 initialises them (`init_barriers`) before every thread
/// arrives on a cluster barrier (ClusterStart's constructor; relaxed: the mbarrier-init fence is the only
/// release needed), and every thread waits on it before its first push, so the wait costs nothing unless a
/// peer is late.
struct ClusterStart {
  bool pending;
  template <class InitBarriers>
  __device__ ClusterStart(int cluster_size, InitBarriers&& init_barriers) : pending(cluster_size > 1) {
#if RSS_CLUSTER_DEVICE_CODE
    if (pending) {
      if (threadIdx.x == 0) {
        init_barriers();
        cuda::ptx::fence_mbarrier_init(cuda::ptx::sem_release, cuda::ptx::scope_cluster);
      }
      cuda::ptx::barrier_cluster_arrive(cuda::ptx::sem_relaxed);
    }
#endif
  }
  __device__ void wait() {
#if RSS_CLUSTER_DEVICE_CODE
    if (pending) cuda::ptx::barrier_cluster_wait();
#endif
    pending = false;
  }
};

#if RSS_CLUSTER_DEVICE_CODE
/// The shared::cluster address of `local` (a shared::cta address) in block `rank` of the cluster.
__device__ __forceinline__ std::uint32_t cluster_address(std::uint32_t local, int rank) {
  std::uint32_t remote;
  asm("mapa.shared::cluster.u32 %0, %1, %2;" : "=r"(remote) : "r"(local), "r"(rank));
  return remote;
}

/// v as 4-byte words (RowStatsPartial's padding travels too: the byte count is sizeof(V)).
template <class V>
struct Words {
  static_assert(sizeof(V) % 4 == 0);
  std::uint32_t w[sizeof(V) / 4];
  __device__ static Words load(const V& v) {
    Words r;
    std::memcpy(r.w, &v, sizeof(V));
    return r;
  }
};

/// st.async of the words to `slot` (shared::cluster), completing sizeof(V) bytes on `barrier` (the same
/// block's). 4 and 8 bytes take one store; multiples of 16 a v4.b32 per 16 bytes (slots are 16-byte aligned).
template <class V>
__device__ __forceinline__ void store_async(std::uint32_t slot, const Words<V>& v, std::uint32_t barrier) {
  static_assert(sizeof(V) == 4 || sizeof(V) == 8 || sizeof(V) % 16 == 0, "st.async stores 4, 8 or 16 bytes");
  if constexpr (sizeof(V) == 4) {
    asm volatile("st.async.shared::cluster.mbarrier::complete_tx::bytes.b32 [%0], %1, [%2];" ::"r"(slot), "r"(v.w[0]),
                 "r"(barrier)
                 : "memory");
  } else if constexpr (sizeof(V) == 8) {
    asm volatile("st.async.shared::cluster.mbarrier::complete_tx::bytes.v2.b32 [%0], {%1, %2}, [%3];" ::"r"(slot),
                 "r"(v.w[0]), "r"(v.w[1]), "r"(barrier)
                 : "memory");
  } else {
#pragma unroll
    for (int i = 0; i < static_cast<int>(sizeof(V) / 16); ++i) {
      asm volatile("st.async.shared::cluster.mbarrier::complete_tx::bytes.v4.b32 [%0], {%1, %2, %3, %4}, [%5];" ::"r"(
                       slot + 16 * i),
                   "r"(v.w[4 * i]), "r"(v.w[4 * i + 1]), "r"(v.w[4 * i + 2]), "r"(v.w[4 * i + 3]), "r"(barrier)
                   : "memory");
    }
  }
}
#endif

/// One round's exchange buffers for clusters of up to MaxBlocks blocks.
template <class V, int MaxBlocks>
struct alignas(16) ClusterSlots {
  V slot[MaxBlocks];  // slot[r]: block r's value
};

/// Reduces one value per block of the cluster; every thread of every block gets the total, combined in rank
/// order (the same bits in every block). `block_value` need only be valid in thread 0; every thread of the
/// block calls it. `filled` is this block's mbarrier for `slots` (arrival count 1, initialised before
/// ClusterStart's arrive); `parity` the parity of the phase this call completes. Thread 0 pushes its value
/// into slot[rank] of every peer (st.async: the bytes complete the peer's mbarrier), stores this block's own
/// copy and arms `filled` with the bytes the peers will push. (One thread issues the pushes: spreading them
/// over the lanes of warp 0 cost the 64-register kernels 16 to 48 bytes of spills.) The caller guarantees
/// that no peer pushes into these slots or this mbarrier again before every thread here has read them and
/// the phase has completed (see ClusterCombine). cluster_size 1 works without a cluster launch: a block
/// barrier replaces the exchange.
template <class V, int MaxBlocks, class Op>
__device__ __forceinline__ V cluster_all_reduce(V block_value, ClusterSlots<V, MaxBlocks>& slots, std::uint64_t* filled,
                                                std::uint32_t parity, int cluster_size, ClusterStart& start, Op op) {
  if (cluster_size == 1) {
    if (threadIdx.x == 0) slots.slot[0] = block_value;
    __syncthreads();
    return slots.slot[0];
  }
#if RSS_CLUSTER_DEVICE_CODE
  start.wait();  // every peer has started and initialised its mbarriers
  if (threadIdx.x == 0) {
    const int rank = static_cast<int>(cooperative_groups::this_cluster().block_rank());
    const auto slot = static_cast<std::uint32_t>(__cvta_generic_to_shared(&slots.slot[rank]));
    const auto barrier = static_cast<std::uint32_t>(__cvta_generic_to_shared(filled));
    const Words<V> value = Words<V>::load(block_value);
    for (int peer = 0; peer < cluster_size; ++peer) {
      if (peer != rank) store_async<V>(cluster_address(slot, peer), value, cluster_address(barrier, peer));
    }
    // The own copy is a plain store, published to this block's threads by the arrive (release); the arrive
    // also orders thread 0's reads of the block reduce's storage before the next use's writes.
    slots.slot[rank] = block_value;
    (void)cuda::ptx::mbarrier_arrive_expect_tx(cuda::ptx::sem_release, cuda::ptx::scope_cta,
                                               cuda::ptx::space_shared, filled,
                                               static_cast<std::uint32_t>((cluster_size - 1) * sizeof(V)));
  }
  // Completes once thread 0 arrived and every peer's bytes landed; acquire at cluster scope pairs with the
  // release of each st.async's complete-tx.
  while (!cuda::ptx::mbarrier_try_wait_parity(cuda::ptx::sem_acquire, cuda::ptx::scope_cluster, filled, parity)) {
  }
  V total = slots.slot[0];
  for (int r = 1; r < cluster_size; ++r) total = op(total, slots.slot[r]);
  return total;
#else
  (void)filled;
  (void)parity;
  (void)start;
  (void)op;
  __trap();
  return block_value;
#endif
}

}  // namespace rss::detail
