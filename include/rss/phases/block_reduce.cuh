#pragma once
// Block-wide reduce-and-broadcast over CUB's BlockReduce: every thread gets the block's result.
#include <cub/block/block_reduce.cuh>

namespace rss::detail {

template <class V, int Threads>
struct BlockAllReduce {
  using Reduce = cub::BlockReduce<V, Threads>;
  struct TempStorage {
    typename Reduce::TempStorage reduce;
    V result;
  };

  /// Reduces one value per thread with `op` and returns the total to every thread. The storage is
  /// reusable by the next call without another barrier.
  template <class Op>
  __device__ __forceinline__ static V all_reduce(V value, Op op, TempStorage& storage) {
    const V total = Reduce(storage.reduce).Reduce(value, op);
    if (threadIdx.x == 0) storage.result = total;
    __syncthreads();
    const V result = storage.result;
    __syncthreads();  // nobody overwrites `result` or `reduce` before every thread has read them
    return result;
  }
};

}  // namespace rss::detail
