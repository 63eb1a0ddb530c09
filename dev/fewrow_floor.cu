// The floor of the few-row structure: how fast can a kernel be that gives each row one thread-block cluster, as
// cluster_row does, and does only what the operator cannot do without? Per row: load the share (a shared-memory
// tile by one bulk copy per block, or registers), the max and the sum of squares in fp32, one cluster exchange,
// exp2 of one FFMA per element and their sum, a second exchange, y = e / sum stored as T. No FP64, no overflow
// path, no non-finite handling, no odd layouts: a lower bound for the same geometry, not a kernel to ship (its
// answer is checked against the double reference with a loose bound, 1e-3 of the row's norm, to show it does the
// work). A diagnostic, never part of the library. Beside the 256-thread tile skeleton, the same with rss's own
// choices added one at a time (`Adds`: y stored with the default policy instead of streamed; the sum of squares
// of each vector added in double with rss's overflow test), to divide what rss pays over the skeleton, and two
// other ways to keep the sum of squares exact enough (double without a test per vector; compensated fp32).
//
// A single 16-bit row of 2^20 elements runs the tile skeleton as one 16-block cluster (128 KB a block), its tile
// loaded by one bulk copy or in pieces (an mbarrier each, the statistics taken as each lands): can one cluster, one
// GPC, move the row at the copy's speed?
//
// Beside the skeletons, in the same process: cudaMemcpyAsync of x's bytes (read x, write y), the bench's blocked
// copy floor, and rss's automatic strategy through the public API (the one-call function, and rss::Operator's
// run: planned once). Per variant: CUDA-event time per call in a burst of 200 (the bench's device time), and the
// host completion time of one synchronised call (median of 200).
//
//   nvcc -O3 -std=c++17 -gencode=arch=compute_90a,code=sm_90a -I include -I bench dev/fewrow_floor.cu -o fewrow_floor
//   ./fewrow_floor                       # every shape below
//   ./fewrow_floor 64 131072 bf16        # one shape
//   FEWROW_ONCE=1 ncu --metrics smsp__inst_executed.sum,smsp__cycles_active.avg ./fewrow_floor 64 131072 bf16
//                                        # each kernel launched once, for ncu (times print as 0)
//
// The Performance IV target on these shapes is the limit + 3 us in host time (the limit: the faster copy): where
// even a skeleton of this structure misses it, the structure cannot meet it; where the skeleton meets it, the
// difference to rss is the implementation's.
#include <cooperative_groups.h>
#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <random>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "copy_floor.cuh"
#include "rss/reference/cpu_reference.hpp"
#include "rss/rss.cuh"
#include "rss/sync/bulk_copy.cuh"

namespace cg = cooperative_groups;

namespace {

void check(cudaError_t e, const char* what) {
  if (e != cudaSuccess) {
    std::fprintf(stderr, "fewrow_floor: %s: %s\n", what, cudaGetErrorString(e));
    std::exit(1);
  }
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.empty() ? 0.0 : v[v.size() / 2];
}

// ---- Element conversions on 16-byte vectors: 4 fp32 or 8 bf16. ----

template <class T>
struct Vec;
template <>
struct Vec<float> {
  static constexpr int width = 4;
  __device__ static void to_float(const uint4& v, float (&f)[4]) {
    f[0] = __uint_as_float(v.x), f[1] = __uint_as_float(v.y), f[2] = __uint_as_float(v.z), f[3] = __uint_as_float(v.w);
  }
  __device__ static uint4 from_float(const float (&f)[4]) {
    return make_uint4(__float_as_uint(f[0]), __float_as_uint(f[1]), __float_as_uint(f[2]), __float_as_uint(f[3]));
  }
};
template <>
struct Vec<__nv_bfloat16> {
  static constexpr int width = 8;
  __device__ static void to_float(const uint4& v, float (&f)[8]) {
    const unsigned w[4] = {v.x, v.y, v.z, v.w};
#pragma unroll
    for (int i = 0; i < 4; ++i) {
      f[2 * i] = __uint_as_float(w[i] << 16);
      f[2 * i + 1] = __uint_as_float(w[i] & 0xffff0000u);
    }
  }
  __device__ static uint4 from_float(const float (&f)[8]) {
    unsigned w[4];
#pragma unroll
    for (int i = 0; i < 4; ++i) {
      const __nv_bfloat162 p = __floats2bfloat162_rn(f[2 * i], f[2 * i + 1]);
      std::memcpy(&w[i], &p, 4);
    }
    return make_uint4(w[0], w[1], w[2], w[3]);
  }
};

__device__ __forceinline__ float fast_exp2(float x) {
  float y;
  asm("ex2.approx.ftz.f32 %0, %1;" : "=f"(y) : "f"(x));
  return y;
}

/// One row per cluster; each block's share is `share` elements (a multiple of the vector width) from
/// rank * share, clipped to cols. Tile: the share in dynamic shared memory by one bulk copy; else registers
/// (at most Vectors 16-byte vectors a thread). KeepExp (registers only): the exponentials kept for the store.
/// The two exchanges are rss's own (rss::detail::ClusterCombine: st.async into every peer's slots, one mbarrier a
/// round, no cluster barrier): cluster.sync() a round, measured beside it, was 1.1-8.2 us slower (bench/NOTES.md,
/// long rows step 10), and a floor must not pay more for its exchange than rss does.
/// What a skeleton adds of rss's own choices, to measure each alone (flags; 0: none).
enum Adds : int {
  plain_stores = 1,  // y stored with the default policy (rss's __stwb), not streamed (__stcs, evict-first)
  wide_sums = 2,     // the sum of squares of each 16-byte vector added in double, with rss's overflow test
  deferred_wide = 4,  // the same in double without a test per vector: one at the end (then the share in double)
  compensated = 8,   // the vectors' sums added in fp32 with their rounding errors kept (TwoSum), one test at the end
};

template <class T, int Threads, int Vectors, bool Tile, bool KeepExp, int Pieces = 1, int With = 0>
__global__ void __launch_bounds__(Threads) skeleton(const T* x, T* y, std::int64_t cols, std::int64_t share) {
  constexpr int W = Vec<T>::width;
  extern __shared__ __align__(128) unsigned char tile_bytes[];
  __shared__ std::uint64_t barrier[Pieces];
  using Combine = rss::detail::ClusterCombine<Threads, rss::detail::Rounds<float2, float>>;
  __shared__ typename Combine::Storage combine_storage;
  cg::cluster_group cluster = cg::this_cluster();
  const std::int64_t row = blockIdx.x / cluster.num_blocks();
  const std::int64_t first = static_cast<std::int64_t>(cluster.block_rank()) * share;
  const std::int64_t left = cols - first;
  const std::int64_t mine = left <= 0 ? 0 : left < share ? left : share;  // elements of this block
  const int vectors = static_cast<int>(mine / W);
  const T* xr = x + row * cols + first;
  T* yr = y + row * cols + first;
  const int t = static_cast<int>(threadIdx.x);

  uint4 held[Tile ? 1 : Vectors];
  const uint4* tile = reinterpret_cast<const uint4*>(tile_bytes);
  // A tile's load: Pieces bulk copies, each with its own mbarrier; the first pass takes each piece as it lands.
  const int piece = (vectors + Pieces - 1) / Pieces;  // vectors per piece
  rss::detail::BulkTileLoads<Pieces> loads(barrier);
  if constexpr (Tile) {
    if (t == 0) {
      for (int p = 0; p < Pieces; ++p) {
        const int first_vector = p * piece, count = min(piece, vectors - first_vector);
        if (count > 0) {
          loads.issue(p, tile_bytes + first_vector * 16, xr + first_vector * W, static_cast<std::uint32_t>(count * 16));
        }
      }
    }
  } else {
#pragma unroll
    for (int u = 0; u < Vectors; ++u) {
      const int v = u * Threads + t;
      held[u] = v < vectors ? __ldcs(reinterpret_cast<const uint4*>(xr) + v) : make_uint4(0, 0, 0, 0);
    }
  }
  // Arrives on the cluster's start barrier; its first round waits there (the first pass overlaps the peers' start).
  Combine combine(static_cast<int>(cluster.num_blocks()), combine_storage);
  // f(u, v, vector) over this thread's vectors (u: the register index, v: the vector's index in the share).
  const auto each = [&](auto&& f) {
    if constexpr (Tile) {
#pragma unroll 4
      for (int v = t; v < vectors; v += Threads) f(0, v, tile[v]);
    } else {
#pragma unroll
      for (int u = 0; u < Vectors; ++u) {
        const int v = u * Threads + t;
        if (v < vectors) f(u, v, held[u]);
      }
    }
  };

  float mx = -INFINITY, ss = 0.0f;
  double wide = 0.0;  // the runs' sums in double (wide_sums: as rss's RowStatsPartial::add_run keeps them)
  float lost = 0.0f;  // compensated: what the fp32 sum ss has rounded away
  const auto squares_in_double = [&](int, int, const uint4& vec) {
    float f[W];
    Vec<T>::to_float(vec, f);
#pragma unroll
    for (int e = 0; e < W; ++e) wide = fma(static_cast<double>(f[e]), static_cast<double>(f[e]), wide);
  };
  const auto stats = [&](int u, int v, const uint4& vec) {
    float f[W];
    Vec<T>::to_float(vec, f);
    if constexpr ((With & (wide_sums | deferred_wide | compensated)) != 0) {
      float run = 0.0f;
#pragma unroll
      for (int e = 0; e < W; ++e) mx = fmaxf(mx, f[e]), run = fmaf(f[e], f[e], run);
      if constexpr ((With & wide_sums) != 0) {
        if (!isinf(run)) {
          wide += static_cast<double>(run);
        } else {
          squares_in_double(u, v, vec);
        }
      } else if constexpr ((With & deferred_wide) != 0) {
        wide += static_cast<double>(run);
      } else {
        const float t = ss + run, b = t - ss;
        lost += (ss - (t - b)) + (run - b);
        ss = t;
      }
    } else {
#pragma unroll
      for (int e = 0; e < W; ++e) mx = fmaxf(mx, f[e]), ss = fmaf(f[e], f[e], ss);
    }
  };
  if constexpr (Tile) {
    for (int p = 0; p < Pieces; ++p) {
      const int end = min((p + 1) * piece, vectors);
      if (p * piece >= end) break;
      loads.wait(p);
#pragma unroll 4
      for (int v = p * piece + t; v < end; v += Threads) stats(0, v, tile[v]);
    }
  } else {
    each(stats);
  }
  if constexpr ((With & (deferred_wide | compensated)) != 0) {
    if ((With & compensated) != 0 ? isinf(ss) : isinf(wide)) {  // a square, or the fp32 sum, past FLT_MAX
      wide = 0.0;
      each(squares_in_double);
    } else if constexpr ((With & compensated) != 0) {
      wide = static_cast<double>(ss) + static_cast<double>(lost);
    }
  }
  if constexpr ((With & (wide_sums | deferred_wide | compensated)) != 0) ss = static_cast<float>(wide);
  const float2 total = combine.template all_reduce<0>(make_float2(mx, ss), [](const float2& a, const float2& b) {
    return make_float2(fmaxf(a.x, b.x), a.y + b.y);
  });
  mx = total.x, ss = total.y;
  const float k = rsqrtf(ss / static_cast<float>(cols)) * 1.4426950408889634f;  // r log2(e)
  const float offset = -mx * k;

  float kept[KeepExp ? Vectors * W : 1];
  float sum = 0.0f;
  each([&](int u, int, const uint4& vec) {
    float f[W];
    Vec<T>::to_float(vec, f);
#pragma unroll
    for (int e = 0; e < W; ++e) {
      const float ex = fast_exp2(fmaf(f[e], k, offset));
      if constexpr (KeepExp) kept[u * W + e] = ex;
      sum += ex;
    }
  });
  sum = combine.template all_reduce<1>(sum, [](float a, float b) { return a + b; });
  const float inv = 1.0f / sum;

  each([&](int u, int v, const uint4& vec) {
    float f[W];
    if constexpr (KeepExp) {
#pragma unroll
      for (int e = 0; e < W; ++e) f[e] = kept[u * W + e] * inv;
    } else {
      Vec<T>::to_float(vec, f);
#pragma unroll
      for (int e = 0; e < W; ++e) f[e] = fast_exp2(fmaf(f[e], k, offset)) * inv;
    }
    if constexpr ((With & plain_stores) != 0) {
      __stwb(reinterpret_cast<uint4*>(yr) + v, Vec<T>::from_float(f));
    } else {
      __stcs(reinterpret_cast<uint4*>(yr) + v, Vec<T>::from_float(f));
    }
  });
  combine.finish();  // a block exits after its last wait: every byte pushed to it came before that
}

struct Timing {
  double burst, host;
};

Timing time_it(const std::function<void(cudaStream_t)>& call, cudaStream_t stream) {
  // FEWROW_ONCE=1: one call per variant and no timing (under ncu, so that each kernel is profiled once).
  static const bool once = std::getenv("FEWROW_ONCE") != nullptr && std::strcmp(std::getenv("FEWROW_ONCE"), "1") == 0;
  if (once) {
    call(stream);
    check(cudaStreamSynchronize(stream), "call");
    return {0.0, 0.0};
  }
  cudaEvent_t a, b;
  check(cudaEventCreate(&a), "event");
  check(cudaEventCreate(&b), "event");
  for (int i = 0; i < 20; ++i) call(stream);
  check(cudaStreamSynchronize(stream), "warm-up");
  std::vector<double> host;
  for (int i = 0; i < 200; ++i) {
    const auto t0 = std::chrono::steady_clock::now();
    call(stream);
    check(cudaStreamSynchronize(stream), "call");
    host.push_back(std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - t0).count());
  }
  check(cudaEventRecord(a, stream), "record");
  for (int i = 0; i < 200; ++i) call(stream);
  check(cudaEventRecord(b, stream), "record");
  check(cudaEventSynchronize(b), "burst");
  float ms = 0;
  check(cudaEventElapsedTime(&ms, a, b), "elapsed");
  check(cudaGetLastError(), "launches");
  cudaEventDestroy(a);
  cudaEventDestroy(b);
  return {ms * 1000.0 / 200, median(host)};
}

void report(const std::string& what, const Timing& t, const std::string& note = "") {
  std::printf("  %-44s events %7.2f us   host %7.2f us %s\n", what.c_str(), t.burst, t.host, note.c_str());
  std::fflush(stdout);
}

template <class T>
float to_host_float(T v) {
  if constexpr (std::is_same_v<T, float>) {
    return v;
  } else {
    return __bfloat162float(v);
  }
}

/// The largest error of rows 0 and rows-1 against the double reference, relative to each row's norm.
template <class T>
double row_error(const std::vector<T>& x, const std::vector<T>& y, std::int64_t rows, std::int64_t cols) {
  double worst = 0.0;
  for (const std::int64_t i : {std::int64_t{0}, rows - 1}) {
    std::vector<double> in(static_cast<std::size_t>(cols)), ref(static_cast<std::size_t>(cols));
    for (std::int64_t j = 0; j < cols; ++j) in[static_cast<std::size_t>(j)] = to_host_float(x[static_cast<std::size_t>(i * cols + j)]);
    rss::reference::rms_scaled_softmax(in.data(), ref.data(), 1, cols);
    double d = 0, n = 0;
    for (std::int64_t j = 0; j < cols; ++j) {
      const double g = to_host_float(y[static_cast<std::size_t>(i * cols + j)]), r = ref[static_cast<std::size_t>(j)];
      d += (g - r) * (g - r);
      n += r * r;
    }
    worst = std::max(worst, std::sqrt(d / n));
  }
  return worst;
}

template <class T, int Threads, int Vectors, bool Tile, bool KeepExp, int Pieces = 1, int With = 0>
void skeleton_variant(const T* x, T* y, std::int64_t rows, std::int64_t cols, int cluster, const std::vector<T>& hx,
                      cudaStream_t stream) {
  constexpr int W = Vec<T>::width;
  const std::int64_t per_block = (cols + cluster - 1) / cluster;
  const std::int64_t share = (per_block + W - 1) / W * W;
  const std::int64_t per_thread_vectors = (share / W + Threads - 1) / Threads;
  const std::string name = std::string(Tile ? "skeleton tile " : KeepExp ? "skeleton registers, exp kept " : "skeleton registers ") +
                           std::to_string(Threads) + " x " + std::to_string(per_thread_vectors * W) + " x " + std::to_string(cluster) +
                           (Pieces > 1 ? " in " + std::to_string(Pieces) + " pieces" : "") +
                           ((With & plain_stores) != 0 ? ", plain stores" : "") + ((With & wide_sums) != 0 ? ", wide sums" : "") +
                           ((With & deferred_wide) != 0 ? ", wide sums tested once" : "") +
                           ((With & compensated) != 0 ? ", compensated sums" : "");
  const std::size_t smem = Tile ? static_cast<std::size_t>(share * sizeof(T)) : 0;
  // A register variant runs only where it is the smallest of its kind that holds the share (2, 4 or 8 vectors).
  if (!Tile && (per_thread_vectors > Vectors || (Vectors > 2 && per_thread_vectors <= Vectors / 2 && !KeepExp))) return;
  if (Tile && smem > 227 * 1024) return;
  auto kernel = skeleton<T, Threads, Vectors, Tile, KeepExp, Pieces, With>;
  check(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, static_cast<int>(smem)), "smem");
  check(cudaFuncSetAttribute(kernel, cudaFuncAttributeNonPortableClusterSizeAllowed, 1), "cluster 16");
  cudaLaunchConfig_t cfg{};
  cfg.gridDim = dim3(static_cast<unsigned>(rows * cluster));
  cfg.blockDim = dim3(Threads);
  cfg.dynamicSmemBytes = smem;
  cudaLaunchAttribute attr{};
  attr.id = cudaLaunchAttributeClusterDimension;
  attr.val.clusterDim.x = static_cast<unsigned>(cluster);
  attr.val.clusterDim.y = 1;
  attr.val.clusterDim.z = 1;
  cfg.attrs = &attr;
  cfg.numAttrs = 1;
  int resident = 0;
  cfg.stream = stream;
  if (cudaOccupancyMaxActiveClusters(&resident, kernel, &cfg) != cudaSuccess || resident == 0) {
    (void)cudaGetLastError();
    std::printf("  %-44s does not launch here\n", name.c_str());
    return;
  }
  check(cudaMemsetAsync(y, 0xFF, static_cast<std::size_t>(rows * cols) * sizeof(T), stream), "poison");
  const Timing t = time_it([&](cudaStream_t s) {
    cfg.stream = s;
    check(cudaLaunchKernelEx(&cfg, kernel, x, y, cols, share), "skeleton");
  }, stream);
  std::vector<T> hy(static_cast<std::size_t>(rows * cols));
  check(cudaMemcpy(hy.data(), y, hy.size() * sizeof(T), cudaMemcpyDeviceToHost), "y");
  char note[96];
  std::snprintf(note, sizeof note, "(%d clusters resident, waves %.2f; error %.1e)", resident,
                static_cast<double>(rows) / resident, row_error(hx, hy, rows, cols));
  report(name, t, note);
}

template <class T>
void shape(const char* dtype, std::int64_t rows, std::int64_t cols, cudaStream_t stream) {
  const std::size_t n = static_cast<std::size_t>(rows * cols);
  std::vector<T> hx(n);
  std::mt19937 gen(11);
  std::uniform_real_distribution<float> u(-4.0f, 4.0f);
  for (T& v : hx) v = static_cast<T>(u(gen) + 0.001f);
  T *x = nullptr, *y = nullptr;
  check(cudaMalloc(&x, n * sizeof(T)), "x");
  check(cudaMalloc(&y, n * sizeof(T)), "y");
  check(cudaMemcpy(x, hx.data(), n * sizeof(T), cudaMemcpyHostToDevice), "x");
  const std::int64_t bytes = static_cast<std::int64_t>(n * sizeof(T));
  int sms = 0;
  check(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0), "SMs");
  std::printf("%lld x %lld %s (%.1f MB each way):\n", static_cast<long long>(rows), static_cast<long long>(cols), dtype,
              bytes / 1e6);
  const Timing memcpy_t = time_it([&](cudaStream_t s) { check(cudaMemcpyAsync(y, x, bytes, cudaMemcpyDeviceToDevice, s), "memcpy"); }, stream);
  report("cudaMemcpyAsync", memcpy_t);
  const Timing blocked = time_it([&](cudaStream_t s) { check(rss_bench::blocked_copy_floor(x, y, bytes, sms, s), "copy"); }, stream);
  report("blocked_copy_floor", blocked);
  std::printf("  target (the limit + 3 us, host): %.2f us\n", std::min(memcpy_t.host, blocked.host) + 3.0);

  std::size_t ws_bytes = 0;
  void* ws = nullptr;
  if (rss::workspace_bytes<T>(rss::Strategy::automatic, rows, cols, &ws_bytes) == rss::Status::success && ws_bytes > 0)
    check(cudaMalloc(&ws, ws_bytes), "workspace");
  report("rss automatic", time_it([&](cudaStream_t s) {
           (void)rss::rms_scaled_softmax<T>(rss::Strategy::automatic, x, y, rows, cols, ws, ws_bytes, s);
         }, stream));
  {  // the same pick planned once (rss::Operator): the hot path of a framework's call, no validation or planning
    rss::Operator<T> op;
    if (rss::ok(op.initialize(rss::Config{rss::Strategy::automatic}, x, y, rss::Layout::contiguous(rows, cols), ws,
                              ws_bytes, stream))) {
      report("rss automatic, Operator::run", time_it([&](cudaStream_t s) { (void)op.run(s); }, stream));
    }
  }
  if (ws != nullptr) cudaFree(ws);
  rss::LaunchList launches;
  if (rss::ok(rss::describe_launches<T>(rss::Config{rss::Strategy::automatic}, rows, cols, &launches))) {
    for (int i = 0; i < launches.size; ++i) {
      const rss::LaunchInfo& l = launches.items[i];
      std::printf("    automatic runs %s: %u blocks of %u, clusters of %d, %zu B dynamic shared, %d blocks per SM\n", l.kernel,
                  l.grid, l.block, l.cluster_size, l.shared_bytes, l.blocks_per_sm);
    }
  }
  // cluster_row in the skeletons' geometries (threads x elems x cluster, tile or registers): the same work per
  // block, so the difference to a skeleton below is the implementation's.
  struct Geometry {
    int threads, elems, cluster;
    rss::RowResidence residence;
  };
  const Geometry geometries[] = {
      {256, 64, 8, rss::RowResidence::shared_memory}, {256, 128, 4, rss::RowResidence::shared_memory},
      {512, 128, 2, rss::RowResidence::shared_memory}, {256, 32, 16, rss::RowResidence::shared_memory},
      {512, 64, 16, rss::RowResidence::shared_memory}, {256, 32, 16, rss::RowResidence::registers},
      {256, 64, 8, rss::RowResidence::registers},      {512, 32, 8, rss::RowResidence::registers}};
  for (const Geometry& g : geometries) {
    const rss::Config config{rss::Strategy::cluster_row, {g.threads, g.elems, g.cluster, g.residence}};
    const std::string name = std::string("rss cluster_row ") + (g.residence == rss::RowResidence::shared_memory ? "tile " : "registers ") +
                             std::to_string(g.threads) + " x " + std::to_string(g.elems) + " x " + std::to_string(g.cluster);
    const rss::Status refused = rss::rms_scaled_softmax<T>(config, x, y, rows, cols, nullptr, 0, stream);
    if (!rss::ok(refused)) {
      std::printf("  %-44s refused: %s\n", name.c_str(), rss::status_message(refused));
      continue;
    }
    check(cudaMemsetAsync(y, 0xFF, n * sizeof(T), stream), "poison");
    const Timing t = time_it([&](cudaStream_t s) { (void)rss::rms_scaled_softmax<T>(config, x, y, rows, cols, nullptr, 0, s); }, stream);
    std::vector<T> hy(n);
    check(cudaMemcpy(hy.data(), y, n * sizeof(T), cudaMemcpyDeviceToHost), "y");
    char note[64];
    std::snprintf(note, sizeof note, "(error %.1e)", row_error(hx, hy, rows, cols));
    report(name, t, note);
  }

  if (cols >= (1 << 20)) {  // a single long row: one 16-block cluster of tiles, loaded whole or in pieces
    skeleton_variant<T, 512, 1, true, false>(x, y, rows, cols, 16, hx, stream);
    skeleton_variant<T, 512, 1, true, false, 4>(x, y, rows, cols, 16, hx, stream);
    skeleton_variant<T, 512, 1, true, false, 8>(x, y, rows, cols, 16, hx, stream);
    skeleton_variant<T, 512, 1, true, false, 16>(x, y, rows, cols, 16, hx, stream);
    skeleton_variant<T, 1024, 1, true, false>(x, y, rows, cols, 16, hx, stream);
    skeleton_variant<T, 1024, 1, true, false, 8>(x, y, rows, cols, 16, hx, stream);
    cudaFree(x);
    cudaFree(y);
    return;
  }
  // Clusters of 2 and 4 too: fewer, larger shares (a 16-bit tile of 128 KB a block on 64 x 131072), one wave.
  for (const int cluster : {2, 4, 8, 16}) {
    skeleton_variant<T, 512, 1, true, false, 4>(x, y, rows, cols, cluster, hx, stream);
    skeleton_variant<T, 256, 1, true, false>(x, y, rows, cols, cluster, hx, stream);
    // rss's choices one at a time on the tile of 256 threads (64 x 131072's and 32 x 128256's default geometry)
    skeleton_variant<T, 256, 1, true, false, 1, plain_stores>(x, y, rows, cols, cluster, hx, stream);
    skeleton_variant<T, 256, 1, true, false, 1, wide_sums>(x, y, rows, cols, cluster, hx, stream);
    skeleton_variant<T, 256, 1, true, false, 1, plain_stores | wide_sums>(x, y, rows, cols, cluster, hx, stream);
    skeleton_variant<T, 256, 1, true, false, 1, deferred_wide>(x, y, rows, cols, cluster, hx, stream);
    skeleton_variant<T, 256, 1, true, false, 1, compensated>(x, y, rows, cols, cluster, hx, stream);
    skeleton_variant<T, 512, 1, true, false>(x, y, rows, cols, cluster, hx, stream);
    skeleton_variant<T, 256, 8, false, false>(x, y, rows, cols, cluster, hx, stream);
    skeleton_variant<T, 512, 8, false, false>(x, y, rows, cols, cluster, hx, stream);
    skeleton_variant<T, 256, 4, false, false>(x, y, rows, cols, cluster, hx, stream);
    skeleton_variant<T, 512, 4, false, false>(x, y, rows, cols, cluster, hx, stream);
    skeleton_variant<T, 512, 2, false, false>(x, y, rows, cols, cluster, hx, stream);
    skeleton_variant<T, 256, 8, false, true>(x, y, rows, cols, cluster, hx, stream);
    skeleton_variant<T, 512, 4, false, true>(x, y, rows, cols, cluster, hx, stream);
    skeleton_variant<T, 256, 4, false, true>(x, y, rows, cols, cluster, hx, stream);
  }
  cudaFree(x);
  cudaFree(y);
}

}  // namespace

int main(int argc, char** argv) {
  // ROWS COLS DTYPE: that shape alone (bf16 or fp32); none: every shape below.
  if (argc != 1 && argc != 4) {
    std::fprintf(stderr, "usage: %s [ROWS COLS bf16|fp32]\n", argv[0]);
    return 2;
  }
  cudaDeviceProp prop{};
  check(cudaGetDeviceProperties(&prop, 0), "properties");
  std::printf("%s (GPU-%02x%02x%02x%02x), %d SMs\n", prop.name, static_cast<unsigned char>(prop.uuid.bytes[0]),
              static_cast<unsigned char>(prop.uuid.bytes[1]), static_cast<unsigned char>(prop.uuid.bytes[2]),
              static_cast<unsigned char>(prop.uuid.bytes[3]), prop.multiProcessorCount);
  cudaStream_t stream;
  check(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking), "stream");
  if (argc == 4) {
    const std::int64_t rows = std::atoll(argv[1]), cols = std::atoll(argv[2]);
    if (rows < 1 || cols < 1) {
      std::fprintf(stderr, "ROWS and COLS must be positive\n");
      return 2;
    }
    if (std::strcmp(argv[3], "bf16") == 0) shape<__nv_bfloat16>("bf16", rows, cols, stream);
    else if (std::strcmp(argv[3], "fp32") == 0) shape<float>("fp32", rows, cols, stream);
    else {
      std::fprintf(stderr, "DTYPE: bf16 or fp32\n");
      return 2;
    }
    std::printf("done\n");
    return 0;
  }
  shape<__nv_bfloat16>("bf16", 1, 1048576, stream);
  shape<__nv_bfloat16>("bf16", 64, 131072, stream);
  shape<__nv_bfloat16>("bf16", 32, 128256, stream);
  shape<__nv_bfloat16>("bf16", 8, 131072, stream);
  shape<__nv_bfloat16>("bf16", 1, 131072, stream);
  shape<float>("fp32", 64, 131072, stream);
  shape<float>("fp32", 32, 128256, stream);
  shape<float>("fp32", 1, 131072, stream);
  std::printf("done\n");
  return 0;
}
