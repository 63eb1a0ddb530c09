// The floor of long_row's structure on single rows of 1M to 16M elements: how fast can any kernel be that reads
// a row once, makes the two dependent grid-wide exchanges an exact one-pass rms_scaled_softmax needs (the row's
// max and sum of squares give the scale; the sum of exponentials needs the scale; y needs that sum), and writes
// the row once? A diagnostic, never part of the library.
//
// Skeletons with no arithmetic (the row's bytes as 16-byte integer vectors; a block's partial is their sum, y is
// x plus the round's total, so the stores wait for it), one cooperative launch of one 1024-thread block per SM,
// each block's share held in registers:
//   empty      the launch alone (cooperative, 1024 threads)
//   copy       load the share, store it: the structure's copy
//   1 round    load, one exchange, store
//   2 rounds   load, two exchanges, store: the floor of the structure
//   2 rounds, nap   the same, the polling lane sleeping 64 ns between polls (less traffic on the counter's line)
// and, for rows of more than 2 vectors a thread (4M and 16M), streaming skeletons that hold nothing (x summed as it
// streams in, y written from the last total): read then write; read, two exchanges, write; and read, an exchange,
// one exponential a row element (MUFU, from registers), an exchange, write, the floor of a row too long to hold.
// An exchange: each block writes its partial to a slot, thread 0 adds one to a global counter with release
// semantics and polls it with acquire loads until every block has arrived (the counter is never reset: the host
// passes each launch its base); the first warp then reads every slot through L2 and sums them (as long_row's
// leaders' round does, with one leader per block instead of per cluster). Beside them, in the same process:
// cudaMemcpyAsync of the same bytes, the bench's blocked copy floor (bench/copy_floor.cuh), and long_row itself
// (fp32 and bf16). Per variant: host completion time of one synchronised call (median of 300), CUDA-event time
// of one synchronised call (median), and event time per call in a burst of 300.
//
//   nvcc -O3 -std=c++17 -gencode=arch=compute_90a,code=sm_90a -I include -I bench dev/long_row_floor.cu -o long_row_floor
//   ./long_row_floor
//
// The long-rows target is the limit + 3 us (host) on these rows, the limit being the faster copy: where the
// skeleton of two rounds already takes more, no exact one-pass kernel of this structure meets it.
#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <string>
#include <vector>

#include "copy_floor.cuh"
#include "rss/device.cuh"
#include "rss/rss.cuh"
#include "rss/strategies/long_row.cuh"

namespace {

void check(cudaError_t e, const char* what) {
  if (e != cudaSuccess) {
    std::fprintf(stderr, "long_row_floor: %s: %s\n", what, cudaGetErrorString(e));
    std::exit(1);
  }
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.empty() ? 0.0 : v[v.size() / 2];
}

constexpr int threads = 1024;

struct Exchange {
  unsigned int* counter;
  unsigned int* slots;  // [blocks]
  unsigned int base;    // the counter's value when this launch started
};

__device__ __forceinline__ void arrive(unsigned int* counter) {
  asm volatile("red.release.gpu.global.add.u32 [%0], 1;" ::"l"(counter) : "memory");
}
__device__ __forceinline__ unsigned int poll(const unsigned int* counter) {
  unsigned int v;
  asm volatile("ld.acquire.gpu.global.u32 %0, [%1];" : "=r"(v) : "l"(counter) : "memory");
  return v;
}

/// One exchange: the block's partial in (thread 0's) `partial`; returns the sum of every block's, to every thread.
template <bool Nap>
__device__ unsigned int exchange(const Exchange& e, unsigned int partial, int round, unsigned int* broadcast) {
  __syncthreads();  // every thread's part of `partial` reduced before (the callers reduce into shared memory)
  if (threadIdx.x == 0) {
    e.slots[(round & 1) * gridDim.x + blockIdx.x] = partial;
    arrive(e.counter);
    const unsigned int target = e.base + static_cast<unsigned int>(round + 1) * gridDim.x;
    while (static_cast<int>(poll(e.counter) - target) < 0) {
      if (Nap) __nanosleep(64);
    }
  }
  __syncthreads();
  if (threadIdx.x < 32) {
    unsigned int acc = 0;
    for (unsigned int b = threadIdx.x; b < gridDim.x; b += 32) acc += __ldcg(e.slots + (round & 1) * gridDim.x + b);
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) acc += __shfl_xor_sync(0xffffffffu, acc, o);
    if (threadIdx.x == 0) *broadcast = acc;
  }
  __syncthreads();
  return *broadcast;
}

/// The block's sum of its threads' values (shared memory, one warp level then thread 0 over 32 warps).
__device__ unsigned int block_sum(unsigned int v, unsigned int* warp_sums) {
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
  if ((threadIdx.x & 31) == 0) warp_sums[threadIdx.x / 32] = v;
  __syncthreads();
  unsigned int total = 0;
  if (threadIdx.x == 0)
    for (int w = 0; w < threads / 32; ++w) total += warp_sums[w];
  return total;
}

/// Rounds < 0: the empty kernel. Each block's share: `per_block` vectors (the last block fewer), held in registers.
template <int Vectors, bool Nap>
__global__ void __launch_bounds__(threads, 1) skeleton(const uint4* x, uint4* y, std::int64_t vectors, int rounds, Exchange e) {
  __shared__ unsigned int warp_sums[threads / 32];
  __shared__ unsigned int broadcast;
  if (rounds < 0) return;
  const std::int64_t per_block = static_cast<std::int64_t>(Vectors) * threads;
  const std::int64_t first = static_cast<std::int64_t>(blockIdx.x) * per_block + threadIdx.x;
  uint4 v[Vectors];
  unsigned int mine = 0;
#pragma unroll
  for (int u = 0; u < Vectors; ++u) {
    const std::int64_t i = first + static_cast<std::int64_t>(u) * threads;
    v[u] = i < vectors ? __ldcs(x + i) : make_uint4(0, 0, 0, 0);
  }
#pragma unroll
  for (int u = 0; u < Vectors; ++u) mine += v[u].x + v[u].y + v[u].z + v[u].w;
  unsigned int add = 0;
  for (int r = 0; r < rounds; ++r) {
    const unsigned int partial = block_sum(mine + add, warp_sums);
    add = exchange<Nap>(e, partial, r, &broadcast);
  }
#pragma unroll
  for (int u = 0; u < Vectors; ++u) {
    const std::int64_t i = first + static_cast<std::int64_t>(u) * threads;
    if (i < vectors) __stcs(y + i, make_uint4(v[u].x + add, v[u].y, v[u].z, v[u].w));
  }
}

/// The floor for rows too long to hold (1 x 2^24: 254-508 KB a block): the share streamed in (16-byte loads, 8 in
/// flight a thread, summed), `rounds` exchanges, with Exps an exponential pass between the first and the second
/// (one ex2.approx a row element from registers, as phase 2 must make after the first round and before the second),
/// then the share streamed out (a value from the last total). Any exact one-pass kernel reads all of x before it
/// writes any y and makes both exchanges and that pass between: this is its floor.
template <bool Exps>
__global__ void __launch_bounds__(threads, 1) streaming_skeleton(const uint4* x, uint4* y, std::int64_t vectors,
                                                                 std::int64_t elements, int rounds, Exchange e) {
  __shared__ unsigned int warp_sums[threads / 32];
  __shared__ unsigned int broadcast;
  const std::int64_t per_block = (vectors + gridDim.x - 1) / gridDim.x;
  const std::int64_t begin = static_cast<std::int64_t>(blockIdx.x) * per_block;
  const std::int64_t end = begin + per_block < vectors ? begin + per_block : vectors;
  unsigned int mine = 0;
  std::int64_t i = begin + threadIdx.x;
  for (; i + 7 * threads < end; i += 8 * threads) {
    uint4 v[8];
#pragma unroll
    for (int u = 0; u < 8; ++u) v[u] = __ldcs(x + i + u * threads);
#pragma unroll
    for (int u = 0; u < 8; ++u) mine += v[u].x + v[u].y + v[u].z + v[u].w;
  }
  for (; i < end; i += threads) {
    const uint4 v = __ldcs(x + i);
    mine += v.x + v.y + v.z + v.w;
  }
  unsigned int add = 0;
  for (int r = 0; r < rounds; ++r) {
    unsigned int partial = mine + add;
    if (Exps && r == 1) {
      // This block's elements' exponentials: elements / gridDim.x of them, spread over the threads.
      const std::int64_t per_thread = (elements / gridDim.x + threads - 1) / threads;
      const float c = static_cast<float>(add & 0xff) * 1e-9f + 1e-6f;
      float sum = 0.0f;
      float t = static_cast<float>(threadIdx.x) * c;
      for (std::int64_t k = 0; k < per_thread; ++k) {
        float ex;
        asm("ex2.approx.ftz.f32 %0, %1;" : "=f"(ex) : "f"(t));
        sum += ex;
        t -= c;
      }
      partial += static_cast<unsigned int>(sum);
    }
    add = exchange<false>(e, block_sum(partial, warp_sums), r, &broadcast);
  }
  for (i = begin + threadIdx.x; i < end; i += threads) __stcs(y + i, make_uint4(add, add + 1, add + 2, add + 3));
}

/// One cooperative launch of `blocks` 1024-thread blocks; the exchange's base moves past its rounds.
template <class... Params, class... Args>
void launch_cooperative(void (*kernel)(Params...), int rounds, Exchange& e, int blocks, cudaStream_t stream,
                        Args... args) {
  cudaLaunchConfig_t cfg{};
  cfg.gridDim = dim3(static_cast<unsigned>(blocks));
  cfg.blockDim = dim3(threads);
  cfg.stream = stream;
  cudaLaunchAttribute attr{};
  attr.id = cudaLaunchAttributeCooperative;
  attr.val.cooperative = 1;
  cfg.attrs = &attr;
  cfg.numAttrs = 1;
  check(cudaLaunchKernelEx(&cfg, kernel, args...), "cooperative launch");
  if (rounds > 0) e.base += static_cast<unsigned int>(rounds) * static_cast<unsigned int>(blocks);
}

void launch_streaming(const uint4* x, uint4* y, std::int64_t vectors, std::int64_t elements, int rounds, bool exps,
                      Exchange& e, int blocks, cudaStream_t stream) {
  launch_cooperative(exps ? streaming_skeleton<true> : streaming_skeleton<false>, rounds, e, blocks, stream, x, y,
                     vectors, elements, rounds, e);
}

struct Timing {
  double host, single, burst;
};

Timing time_it(const std::function<void(cudaStream_t)>& call, cudaStream_t stream) {
  cudaEvent_t a, b;
  check(cudaEventCreate(&a), "event");
  check(cudaEventCreate(&b), "event");
  for (int i = 0; i < 30; ++i) call(stream);
  check(cudaStreamSynchronize(stream), "warm-up");
  std::vector<double> host, single;
  for (int i = 0; i < 300; ++i) {
    const auto t0 = std::chrono::steady_clock::now();
    check(cudaEventRecord(a, stream), "record");
    call(stream);
    check(cudaEventRecord(b, stream), "record");
    check(cudaEventSynchronize(b), "call");
    host.push_back(std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - t0).count());
    float ms = 0;
    check(cudaEventElapsedTime(&ms, a, b), "elapsed");
    single.push_back(ms * 1000.0);
  }
  check(cudaEventRecord(a, stream), "record");
  for (int i = 0; i < 300; ++i) call(stream);
  check(cudaEventRecord(b, stream), "record");
  check(cudaEventSynchronize(b), "burst");
  float ms = 0;
  check(cudaEventElapsedTime(&ms, a, b), "elapsed");
  check(cudaGetLastError(), "launches");
  cudaEventDestroy(a);
  cudaEventDestroy(b);
  return {median(host), median(single), ms * 1000.0 / 300};
}

void row(const std::string& what, const Timing& t) {
  std::printf("  %-34s host %7.2f us   events one %7.2f us   burst %7.2f us per call\n", what.c_str(), t.host,
              t.single, t.burst);
  std::fflush(stdout);
}

template <int Vectors, bool Nap>
void launch_skeleton(const uint4* x, uint4* y, std::int64_t vectors, int rounds, Exchange& e, int blocks,
                     cudaStream_t stream) {
  launch_cooperative(skeleton<Vectors, Nap>, rounds, e, blocks, stream, x, y, vectors, rounds, e);
}

template <int Vectors>
void skeletons(const uint4* x, uint4* y, std::int64_t vectors, Exchange& e, int blocks, cudaStream_t stream) {
  struct Variant {
    const char* name;
    int rounds;
    bool nap;
  };
  const Variant variants[] = {{"empty (cooperative, 1024 threads)", -1, false},
                              {"skeleton: copy", 0, false},
                              {"skeleton: 1 round", 1, false},
                              {"skeleton: 2 rounds", 2, false},
                              {"skeleton: 2 rounds, nap", 2, true}};
  for (const Variant& v : variants) {
    const Timing t = time_it(
        [&](cudaStream_t s) {
          if (v.nap) {
            launch_skeleton<Vectors, true>(x, y, vectors, v.rounds, e, blocks, s);
          } else {
            launch_skeleton<Vectors, false>(x, y, vectors, v.rounds, e, blocks, s);
          }
        },
        stream);
    row(v.name, t);
  }
}

template <class T>
void long_row(const char* dtype, std::int64_t cols, const rss::DeviceInfo& device, cudaStream_t stream) {
  std::vector<T> host(static_cast<std::size_t>(cols));
  for (std::size_t i = 0; i < host.size(); ++i) host[i] = static_cast<T>(static_cast<float>((i * 7919) % 1000) * 0.004f - 2.0f);
  T *x = nullptr, *y = nullptr;
  void* workspace = nullptr;
  std::size_t bytes = 0;
  check(cudaMalloc(&x, host.size() * sizeof(T)), "x");
  check(cudaMalloc(&y, host.size() * sizeof(T)), "y");
  check(cudaMemcpy(x, host.data(), host.size() * sizeof(T), cudaMemcpyHostToDevice), "copy x");
  using LongRow = rss::detail::LongRow;
  if (LongRow::workspace_bytes<T>(1, cols, device, &bytes) != rss::Status::success) std::exit(1);
  check(cudaMalloc(&workspace, bytes), "workspace");
  check(cudaMemset(workspace, 0, bytes), "workspace");
  rss::detail::Call<T> call;
  call.x = x;
  call.y = y;
  call.layout = rss::Layout::contiguous(1, cols);
  call.workspace = workspace;
  call.workspace_bytes = bytes;
  LongRow::Plan<T> plan;
  rss::Status s = LongRow::make_plan(call, device, rss::Config{}, &plan);
  if (s == rss::Status::success) s = LongRow::prepare(plan, call, stream);
  if (s != rss::Status::success) {
    std::printf("  long_row %s: %s\n", dtype, rss::status_message(s));
  } else {
    row(std::string("long_row ") + dtype,
        time_it([&](cudaStream_t st) { (void)LongRow::launch(plan, call, rss::detail::Launcher{st}); }, stream));
    // What automatic picks for the row, through the public API (its own workspace).
    {
      std::size_t auto_bytes = 0;
      void* auto_ws = nullptr;
      if (rss::workspace_bytes<T>(rss::Strategy::automatic, 1, cols, &auto_bytes) == rss::Status::success && auto_bytes > 0)
        check(cudaMalloc(&auto_ws, auto_bytes), "workspace");
      rss::Operator<T> op;
      if (op.initialize(rss::Strategy::automatic, x, y, rss::Layout::contiguous(1, cols), auto_ws, auto_bytes, stream) ==
          rss::Status::success) {
        row(std::string("rss automatic (") + rss::strategy_name(op.strategy()) + ") " + dtype,
            time_it([&](cudaStream_t st) { (void)op.run(st); }, stream));
      }
      check(cudaStreamSynchronize(stream), "automatic");
      if (auto_ws != nullptr) cudaFree(auto_ws);
    }
    // The same row with its magnitude growing 4x along it: the clusters' own scales differ from the row's, the
    // moments' estimate does not hold, and every row takes the second round.
    for (std::size_t i = 0; i < host.size(); ++i) {
      host[i] = static_cast<T>(static_cast<float>(host[i]) * (1.0f + 3.0f * static_cast<float>(i) / static_cast<float>(cols)));
    }
    check(cudaMemcpy(x, host.data(), host.size() * sizeof(T), cudaMemcpyHostToDevice), "copy x");
    row(std::string("long_row ") + dtype + ", drifting row",
        time_it([&](cudaStream_t st) { (void)LongRow::launch(plan, call, rss::detail::Launcher{st}); }, stream));
  }
  check(cudaStreamSynchronize(stream), "long_row");
  cudaFree(workspace);
  cudaFree(y);
  cudaFree(x);
}

}  // namespace

int main() {
  rss::DeviceInfo device{};
  if (rss::current_device_info(&device) != rss::Status::success) return 1;
  int dev = 0;
  cudaDeviceProp prop{};
  check(cudaGetDevice(&dev), "device");
  check(cudaGetDeviceProperties(&prop, dev), "properties");
  char uuid[64];
  std::snprintf(uuid, sizeof uuid, "GPU-%02x%02x%02x%02x", static_cast<unsigned char>(prop.uuid.bytes[0]),
                static_cast<unsigned char>(prop.uuid.bytes[1]), static_cast<unsigned char>(prop.uuid.bytes[2]),
                static_cast<unsigned char>(prop.uuid.bytes[3]));
  std::printf("%s (%s), %d SMs\n", prop.name, uuid, prop.multiProcessorCount);
  const int blocks = prop.multiProcessorCount;
  cudaStream_t stream;
  check(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking), "stream");
  unsigned int* state = nullptr;
  check(cudaMalloc(&state, (1 + 2 * blocks) * sizeof(unsigned int)), "exchange");
  check(cudaMemset(state, 0, (1 + 2 * blocks) * sizeof(unsigned int)), "exchange");
  Exchange e{state, state + 1, 0};

  for (const std::int64_t cols : {std::int64_t{1} << 20, std::int64_t{1} << 22, std::int64_t{1} << 24}) {
    for (const int element_bytes : {4, 2}) {
      const std::int64_t bytes = cols * element_bytes;
      const std::int64_t vectors = bytes / 16;
      const std::int64_t per_thread = (vectors + static_cast<std::int64_t>(blocks) * threads - 1) / (static_cast<std::int64_t>(blocks) * threads);
      std::printf("1 x %lld, %d-byte elements (%.1f MB each way), %lld vectors a thread:\n", static_cast<long long>(cols),
                  element_bytes, bytes / 1e6, static_cast<long long>(per_thread));
      uint4 *x = nullptr, *y = nullptr;
      check(cudaMalloc(&x, static_cast<std::size_t>(bytes)), "x");
      check(cudaMalloc(&y, static_cast<std::size_t>(bytes)), "y");
      check(cudaMemset(x, 1, static_cast<std::size_t>(bytes)), "x");
      row("cudaMemcpyAsync", time_it([&](cudaStream_t s) { check(cudaMemcpyAsync(y, x, bytes, cudaMemcpyDeviceToDevice, s), "memcpy"); }, stream));
      row("blocked_copy_floor", time_it([&](cudaStream_t s) { check(rss_bench::blocked_copy_floor(x, y, bytes, blocks, s), "blocked copy"); }, stream));
      if (per_thread <= 2) {
        skeletons<2>(x, y, vectors, e, blocks, stream);
      } else if (per_thread <= 4) {
        skeletons<4>(x, y, vectors, e, blocks, stream);
      } else if (per_thread <= 8) {
        skeletons<8>(x, y, vectors, e, blocks, stream);
      }
      if (per_thread > 2) {  // rows too long to hold in registers: the streaming floor
        const std::int64_t elements = cols;
        struct Streaming {
          const char* name;
          int rounds;
          bool exps;
        };
        for (const Streaming& v : {Streaming{"streaming: read, write", 0, false},
                                   Streaming{"streaming: read, 2 rounds, write", 2, false},
                                   Streaming{"streaming: read, round, exps, round, write", 2, true}}) {
          row(v.name, time_it([&](cudaStream_t st) { launch_streaming(x, y, vectors, elements, v.rounds, v.exps, e, blocks, st); },
                              stream));
        }
      }
      if (element_bytes == 4) long_row<float>("fp32", cols, device, stream);
      if (element_bytes == 2) long_row<__nv_bfloat16>("bf16", cols, device, stream);
      cudaFree(x);
      cudaFree(y);
    }
  }
  check(cudaStreamSynchronize(stream), "end");
  std::printf("done\n");
  return 0;
}
