#pragma once
// The per-shape floor: one vectorised copy kernel moving the same bytes as the operator's minimum
// (read x once, write y once). 16-byte accesses, several loads in flight per thread, enough blocks
// to fill the GPU; a scalar tail for sizes that are not a multiple of 16 bytes.
#include <cuda_runtime.h>

#include <cstdint>

namespace rss_bench {

inline constexpr int copy_threads = 256;
inline constexpr int copy_unroll = 4;

__global__ void __launch_bounds__(copy_threads) copy_kernel(const uint4* __restrict__ in, uint4* __restrict__ out,
                                                            std::int64_t vectors, const unsigned char* tail_in,
                                                            unsigned char* tail_out, int tail_bytes) {
  const std::int64_t stride = static_cast<std::int64_t>(gridDim.x) * copy_threads;
  std::int64_t v = static_cast<std::int64_t>(blockIdx.x) * copy_threads + threadIdx.x;
  for (; v + (copy_unroll - 1) * stride < vectors; v += copy_unroll * stride) {
    uint4 buf[copy_unroll];
#pragma unroll
    for (int u = 0; u < copy_unroll; ++u) buf[u] = in[v + u * stride];
#pragma unroll
    for (int u = 0; u < copy_unroll; ++u) out[v + u * stride] = buf[u];
  }
  for (; v < vectors; v += stride) out[v] = in[v];
  if (blockIdx.x == 0 && static_cast<int>(threadIdx.x) < tail_bytes) tail_out[threadIdx.x] = tail_in[threadIdx.x];
}

/// Copies `bytes` bytes (16-byte aligned pointers) on `stream`.
inline cudaError_t copy_floor(const void* in, void* out, std::int64_t bytes, int sm_count, cudaStream_t stream) {
  const std::int64_t vectors = bytes / 16;
  const int tail = static_cast<int>(bytes % 16);
  std::int64_t blocks = (vectors + copy_threads * copy_unroll - 1) / (copy_threads * copy_unroll);
  const std::int64_t max_blocks = static_cast<std::int64_t>(sm_count) * 8;  // 8 x 256 threads: a full SM
  if (blocks > max_blocks) blocks = max_blocks;
  if (blocks < 1) blocks = 1;
  copy_kernel<<<static_cast<unsigned>(blocks), copy_threads, 0, stream>>>(
      static_cast<const uint4*>(in), static_cast<uint4*>(out), vectors,
      static_cast<const unsigned char*>(in) + vectors * 16, static_cast<unsigned char*>(out) + vectors * 16, tail);
  return cudaGetLastError();
}

}  // namespace rss_bench
