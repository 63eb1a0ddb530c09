#pragma once
// The per-shape floors: copies of the operator's minimum traffic (read x once, write y once). The limit a
// strategy is held to is the fastest of them (with the runtime's cudaMemcpyAsync, variants.cuh), so each is
// written to be as fast as we can make a copy on Hopper:
//   copy_floor       the register copy: 16-byte accesses, `copy_unroll` loads in flight per thread, 8 blocks of
//                    256 threads per SM; unchanged since the first sessions, so that limits stay comparable
//   blocked_copy_floor  one block per contiguous 16 KB tile instead of a grid stride (as generated copies,
//                    Triton's for one, lay it out), the stores streamed (evict-first: y is not read again)
//   bulk_copy_floor  the copy engine (sm_90's cp.async.bulk): per block, a ring of shared-memory stages, each
//                    loaded from x and stored to y by single bulk copies; no thread holds data in flight
// Each handles any byte count (a scalar tail past the last 16-byte vector) on 16-byte aligned pointers.
#include <cuda/ptx>
#include <cuda_runtime.h>

#include <cstdint>

namespace rss_bench {

inline constexpr int copy_threads = 256;
inline constexpr int copy_unroll = 4;

/// The register copy's tail: the bytes past the last 16-byte vector (fewer than 16), by block 0.
__device__ __forceinline__ void copy_tail(const unsigned char* in, unsigned char* out, int bytes) {
  if (blockIdx.x == 0 && static_cast<int>(threadIdx.x) < bytes) out[threadIdx.x] = in[threadIdx.x];
}

/// Grid-stride: each thread copies vectors v, v + stride, ... (`copy_unroll` in flight), over a persistent grid.
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
  copy_tail(tail_in, tail_out, tail_bytes);
}

/// Blocked: block b copies the contiguous tile [b, b + 1) x copy_threads x copy_unroll vectors, one block per
/// tile (the layout of generated copies, e.g. Triton's), stores streamed (evict-first: y is not read again).
__global__ void __launch_bounds__(copy_threads) blocked_copy_kernel(const uint4* __restrict__ in,
                                                                    uint4* __restrict__ out, std::int64_t vectors,
                                                                    const unsigned char* tail_in,
                                                                    unsigned char* tail_out, int tail_bytes) {
  const std::int64_t first = static_cast<std::int64_t>(blockIdx.x) * copy_threads * copy_unroll + threadIdx.x;
  uint4 buf[copy_unroll];
#pragma unroll
  for (int u = 0; u < copy_unroll; ++u) {
    const std::int64_t v = first + u * copy_threads;
    if (v < vectors) buf[u] = in[v];
  }
#pragma unroll
  for (int u = 0; u < copy_unroll; ++u) {
    const std::int64_t v = first + u * copy_threads;
    if (v < vectors) __stcs(out + v, buf[u]);
  }
  copy_tail(tail_in, tail_out, tail_bytes);
}

/// Copies `bytes` bytes (16-byte aligned pointers) on `stream`: the grid-stride register copy, 8 blocks an SM.
inline cudaError_t copy_floor(const void* in, void* out, std::int64_t bytes, int sm_count, cudaStream_t stream) {
  const std::int64_t vectors = bytes / 16;
  std::int64_t blocks = (vectors + copy_threads * copy_unroll - 1) / (copy_threads * copy_unroll);
  const std::int64_t max_blocks = static_cast<std::int64_t>(sm_count) * 8;  // 8 x 256 threads: a full SM
  blocks = blocks > max_blocks ? max_blocks : blocks < 1 ? 1 : blocks;
  copy_kernel<<<static_cast<unsigned>(blocks), copy_threads, 0, stream>>>(
      static_cast<const uint4*>(in), static_cast<uint4*>(out), vectors,
      static_cast<const unsigned char*>(in) + vectors * 16, static_cast<unsigned char*>(out) + vectors * 16,
      static_cast<int>(bytes % 16));
  return cudaGetLastError();
}

/// The same bytes by the blocked copy: one block per 16 KB tile.
inline cudaError_t blocked_copy_floor(const void* in, void* out, std::int64_t bytes, int, cudaStream_t stream) {
  const std::int64_t vectors = bytes / 16;
  const std::int64_t blocks = (vectors + copy_threads * copy_unroll - 1) / (copy_threads * copy_unroll);
  if (blocks > 0x7fffffff) return cudaErrorInvalidValue;  // 32 TB: not a shape anyone benches
  blocked_copy_kernel<<<static_cast<unsigned>(blocks < 1 ? 1 : blocks), copy_threads, 0, stream>>>(
      static_cast<const uint4*>(in), static_cast<uint4*>(out), vectors,
      static_cast<const unsigned char*>(in) + vectors * 16, static_cast<unsigned char*>(out) + vectors * 16,
      static_cast<int>(bytes % 16));
  return cudaGetLastError();
}

// ---- the copy engine: bulk copies through a ring of shared-memory stages ----

inline constexpr int bulk_stages = 4;
inline constexpr int bulk_stage_bytes = 24 * 1024;  // 4 x 24 KB a block, 2 blocks an SM: 192 KB in flight per SM
inline constexpr int bulk_blocks_per_sm = 2;

/// Thread 0 of each block copies the block's chunks (chunk c of `chunk_bytes`, c = block, block + grid, ...):
/// every stage's load is issued ahead, and a stage is loaded again once its store has read it. The other 31
/// threads copy the tail.
__global__ void __launch_bounds__(32) bulk_copy_kernel(const unsigned char* __restrict__ in,
                                                       unsigned char* __restrict__ out, std::int64_t body_bytes,
                                                       int tail_bytes) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  extern __shared__ __align__(128) unsigned char stage[];
  __shared__ std::uint64_t landed[bulk_stages];
  const std::int64_t chunks = (body_bytes + bulk_stage_bytes - 1) / bulk_stage_bytes;
  if (threadIdx.x == 0) {
    for (int s = 0; s < bulk_stages; ++s) cuda::ptx::mbarrier_init(landed + s, 1);
    cuda::ptx::fence_mbarrier_init(cuda::ptx::sem_release, cuda::ptx::scope_cluster);  // seen by the copy engine
    const auto size_of = [&](std::int64_t c) {
      const std::int64_t left = body_bytes - c * bulk_stage_bytes;
      return static_cast<std::uint32_t>(left < bulk_stage_bytes ? left : bulk_stage_bytes);
    };
    const auto load = [&](std::int64_t c, int s) {
      (void)cuda::ptx::mbarrier_arrive_expect_tx(cuda::ptx::sem_release, cuda::ptx::scope_cta,
                                                 cuda::ptx::space_shared, landed + s, size_of(c));
      cuda::ptx::cp_async_bulk(cuda::ptx::space_cluster, cuda::ptx::space_global, stage + s * bulk_stage_bytes,
                               in + c * bulk_stage_bytes, size_of(c), landed + s);
    };
    const std::int64_t first = blockIdx.x, step = gridDim.x;
    int issued = 0;
    for (std::int64_t c = first; c < chunks && issued < bulk_stages; c += step) load(c, issued++);
    std::uint32_t phases = 0;  // bit s: the parity of stage s's next completion
    int k = 0;
    for (std::int64_t c = first; c < chunks; c += step, ++k) {
      const int s = k % bulk_stages;
      while (!cuda::ptx::mbarrier_try_wait_parity(landed + s, (phases >> s) & 1u)) {
      }
      phases ^= 1u << s;
      cuda::ptx::cp_async_bulk(cuda::ptx::space_global, cuda::ptx::space_shared, out + c * bulk_stage_bytes,
                               stage + s * bulk_stage_bytes, size_of(c));
      cuda::ptx::cp_async_bulk_commit_group();
      const std::int64_t next = c + static_cast<std::int64_t>(bulk_stages) * step;
      if (next < chunks) {
        cuda::ptx::cp_async_bulk_wait_group_read(cuda::ptx::n32_t<0>{});  // stage s read by its store
        load(next, s);
      }
    }
    cuda::ptx::cp_async_bulk_wait_group(cuda::ptx::n32_t<0>{});  // the stores complete before the block exits
  } else if (const int t = static_cast<int>(threadIdx.x) - 1; blockIdx.x == 0 && t < tail_bytes) {
    out[body_bytes + t] = in[body_bytes + t];  // threads 1..31: the tail's bytes (at most 15)
  }
#else
  (void)in, (void)out, (void)body_bytes, (void)tail_bytes;
  __trap();  // launched only on sm_90 and later (its bench variant checks the device)
#endif
}

/// Copies `bytes` bytes (16-byte aligned pointers) on `stream` with the copy engine: sm_90 and later only.
inline cudaError_t bulk_copy_floor(const void* in, void* out, std::int64_t bytes, int sm_count, cudaStream_t stream) {
  const std::int64_t body = bytes / 16 * 16;
  const int tail = static_cast<int>(bytes - body);
  const std::int64_t chunks = (body + bulk_stage_bytes - 1) / bulk_stage_bytes;
  std::int64_t blocks = static_cast<std::int64_t>(sm_count) * bulk_blocks_per_sm;
  if (blocks > chunks) blocks = chunks;
  if (blocks < 1) blocks = 1;
  const int smem = bulk_stages * bulk_stage_bytes;
  static const cudaError_t attribute =  // once (the bench uses one device): the ring exceeds the default 48 KB
      cudaFuncSetAttribute(bulk_copy_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, smem);
  if (attribute != cudaSuccess) return attribute;
  bulk_copy_kernel<<<static_cast<unsigned>(blocks), 32, smem, stream>>>(static_cast<const unsigned char*>(in),
                                                                        static_cast<unsigned char*>(out), body, tail);
  return cudaGetLastError();
}

/// The number of bytes where out differs from in (a floor's check: its output must be x's bytes).
__global__ void count_mismatches(const unsigned char* a, const unsigned char* b, std::int64_t bytes,
                                 unsigned long long* mismatches) {
  unsigned long long mine = 0;
  for (std::int64_t i = blockIdx.x * static_cast<std::int64_t>(blockDim.x) + threadIdx.x; i < bytes;
       i += static_cast<std::int64_t>(gridDim.x) * blockDim.x) {
    mine += a[i] != b[i];
  }
  if (mine != 0) atomicAdd(mismatches, mine);
}

}  // namespace rss_bench
