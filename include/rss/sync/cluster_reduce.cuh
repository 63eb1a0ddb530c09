#pragma once
// Combining per-block values across a thread-block cluster through distributed shared memory: each
// block pushes its value into a slot of every block of the cluster (remote shared-memory stores),
// one cluster barrier publishes them, and every thread then reduces its own block's copies. No
// global memory, no atomics, no remote reads after the barrier, so a block may exit as soon as it
// has passed its last barrier.
#include <cooperative_groups.h>

/// Thread-block clusters exist from compute capability 9.0. Code using them is compiled for every
/// architecture (fat binaries) but does its work only where clusters exist; the host never launches
/// it elsewhere (the strategies refuse with unsupported_device).
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ < 900
#define RSS_CLUSTER_DEVICE_CODE 0
#else
#define RSS_CLUSTER_DEVICE_CODE 1
#endif

namespace rss::detail {

/// A block may write into another block's shared memory only once that block has started. Every
/// block arrives on a cluster barrier when it starts (ClusterStart's constructor, called by every
/// thread) and waits on it before its first push, so the wait costs nothing unless a peer is late.
struct ClusterStart {
  bool pending;
  __device__ explicit ClusterStart(int cluster_size) : pending(cluster_size > 1) {
#if RSS_CLUSTER_DEVICE_CODE
    if (pending) cooperative_groups::this_cluster().barrier_arrive();
#endif
  }
  __device__ void wait() {
#if RSS_CLUSTER_DEVICE_CODE
    if (pending) cooperative_groups::this_cluster().barrier_wait();
#endif
    pending = false;
  }
};

/// Reduces one value per block of the cluster; every thread of every block gets the total, combined
/// in rank order (the same bits in every block). `block_value` need only be valid in thread 0. Every
/// thread of the block calls it. `slots` is a __shared__ array of at least cluster_size elements; it is
/// pushed into again only after the caller's next cluster barrier (by which time every block has read
/// it). cluster_size 1 works without a cluster launch: a block barrier replaces the cluster's.
template <class V, class Op>
__device__ __forceinline__ V cluster_all_reduce(V block_value, V* slots, int cluster_size, ClusterStart& start, Op op) {
  namespace cg = cooperative_groups;
  if (cluster_size == 1) {
    if (threadIdx.x == 0) slots[0] = block_value;
    __syncthreads();
    return slots[0];
  }
#if RSS_CLUSTER_DEVICE_CODE
  const cg::cluster_group cluster = cg::this_cluster();
  start.wait();  // every peer has started: its shared memory exists
  if (threadIdx.x == 0) {
    const unsigned rank = cluster.block_rank();
    for (int peer = 0; peer < cluster_size; ++peer) *cluster.map_shared_rank(slots + rank, peer) = block_value;
  }
  cluster.sync();  // release/acquire at cluster scope: every pushed value is visible to its block
  V total = slots[0];
  for (int r = 1; r < cluster_size; ++r) total = op(total, slots[r]);
  return total;
#else
  __trap();
  return block_value;
#endif
}

}  // namespace rss::detail
