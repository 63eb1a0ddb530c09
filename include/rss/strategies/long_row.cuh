#pragma once
// Strategy `long_row`: one row of millions of elements at a time, split evenly over every SM of the chip (one
// 512-thread block per SM, blocks in thread-block clusters), one cooperative launch. Each block holds the
// first part of its share in shared memory as stored (16-bit stays 16-bit), fp32 blocks the next 64 KB in their
// threads' registers; the rest of the share, when the row is longer than the chip's shared memory and
// registers, is streamed: read once from HBM with an L2 evict_last hint and re-read from L2 in the last two
// phases. So HBM sees x once and y once while x fits on chip plus L2.
//
//   phase 1  thread 0 issues the whole tile at once as bulk copies (cp.async.bulk, evict_first: read once),
//            one mbarrier per chunk; meanwhile every thread loads its register part, streams the share's
//            remainder (16-byte loads, several in flight, evict_last) and takes their statistics; then the
//            statistics of each chunk as it lands
//   round 1  block reduce -> cluster (distributed shared memory) -> one global round trip among the cluster
//            leaders (rss/sync/leader_exchange.cuh): max and sum of squares
//   phase 2  one exponential per element and their sum, from the tile and registers, from L2 for the remainder
//   round 2  the same for the sum
//   phase 3  y = exp / sum: the exponentials computed again, hidden behind the write stream (evict_first)
//
// Rows after the first reuse the grid (each costs its own two rounds): the strategy is for a few very long
// rows; rss/tuning's heuristic picks it only for those. The blocks of the grid wait on each other, so the
// launch is cooperative and the planner (rss/planner/long_row_plan.hpp) admits only co-resident grids.
#include <cooperative_groups.h>
#include <cuda/ptx>
#include <cuda_runtime.h>

#include <cstdint>
#include <memory>
#include <new>

#include "rss/agent/forward_row.cuh"
#include "rss/agent/register_share.cuh"
#include "rss/detail/launch.cuh"
#include "rss/detail/occupancy.cuh"
#include "rss/phases/exp_sum.cuh"
#include "rss/phases/row_stats.cuh"
#include "rss/phases/tile_io.cuh"
#include "rss/planner/long_row_plan.hpp"
#include "rss/storage.cuh"
#include "rss/strategies/call.cuh"
#include "rss/strategies/megakernel.cuh"  // CountersZeroed: the zeroing of workspace state before the first run
#include "rss/agent/cluster_combine.cuh"
#include "rss/sync/bulk_copy.cuh"
#include "rss/sync/leader_exchange.cuh"
#include "rss/workspace.hpp"

namespace rss::detail {
namespace long_row {

// 512 threads, not 1024: measured 1.0-1.9 us faster on rows of 2^20 and 2^22 elements, 2^24 bf16 level, 2^24 fp32
// 8 us slower (bench/NOTES.md, long rows step 7: a code-generation effect, open); a thread may hold 128 registers.
inline constexpr int threads = 512;
// mbarriers per tile: a chunk has a fixed cost (16 chunks made 1M rows 5 us slower: bench/NOTES.md, long rows step 4)
inline constexpr int chunks = 4;
// 16-byte vectors of x per thread held in registers past the tile, from phase 1 to phase 3 (64 KB per block of
// fp32): x read once from HBM where it would otherwise be streamed. fp32 only: the 16-bit kernels are at 128
// registers without it, and their tiles hold most of a row. 8, not 16: 16 spills 18 bytes (bench/NOTES.md,
// long rows step 9).
template <class T>
inline constexpr int register_vectors = sizeof(T) == 4 ? 8 : 0;
inline constexpr int streamed_in_flight = 8;  // 16-byte loads per thread before the first use (64 KB per SM)

template <class T>
struct Params {
  const T* x;
  T* y;
  RowStatistics* stats;  // WriteStatistics: stats[row]; else unused
  std::int64_t rows;
  std::int64_t cols;
  std::int64_t ld_x;
  std::int64_t ld_y;
  std::int64_t share;  // elements per block (multiple of 8)
  std::int64_t tile;   // elements a block holds in shared memory (multiple of 8)
  int in_registers;    // elements a block holds in registers past its tile (multiple of 8)
  int clusters;
  int cluster_size;
  LeaderExchangeState* exchange;
  RowStatsPartial* stat_slots;  // [clusters]
  float* sum_slots;             // [clusters]
};

// ---------------------------------------------------------------------------------------------------
// Walks of one block's share of a row.

/// x's 16-byte vectors [0, count) of the block's streamed part, `streamed_in_flight` loads in flight per thread
/// before the first use: f(index of the vector, the vector).
template <class T, class F>
__device__ __forceinline__ void for_each_streamed_vector(const T* x, std::int64_t count, L2Hint hint, F&& f) {
  constexpr int W = vector_width<T>;
  constexpr std::int64_t Step = static_cast<std::int64_t>(threads) * streamed_in_flight;
  const auto t = static_cast<std::int64_t>(threadIdx.x);
  std::int64_t v0 = 0;
  for (; v0 + Step <= count; v0 += Step) {
    Vector<T> buf[streamed_in_flight];
#pragma unroll
    for (int u = 0; u < streamed_in_flight; ++u) buf[u] = load_vector(x + (v0 + u * threads + t) * W, hint);
#pragma unroll
    for (int u = 0; u < streamed_in_flight; ++u) f(v0 + u * threads + t, buf[u]);
  }
  for (std::int64_t v = v0 + t; v < count; v += threads) f(v, load_vector(x + v * W, hint));
}

/// The part of the share past the tile: x[0, n) from global memory. f(values, count, reload) per run: a whole
/// 16-byte vector where `vectors` (x 16-byte aligned), else single elements; `streamed_in_flight` vectors in
/// flight per thread. Indices are 64-bit: one share of the 2^31 + 11-element row holds 16 M elements.
template <class T, class F>
__device__ __forceinline__ void walk_streamed(const T* x, std::int64_t n, bool vectors, L2Hint hint, F&& f) {
  using Traits = StorageTraits<T>;
  constexpr int W = vector_width<T>;
  const auto t = static_cast<std::int64_t>(threadIdx.x);
  const auto single = [&](std::int64_t i) {
    float v[W] = {};
    v[0] = Traits::to_float(x[i]);
    f(v, 1, [&](float (&w)[W]) {
      w[0] = Traits::to_float(x[i]);
#pragma unroll
      for (int e = 1; e < W; ++e) w[e] = 0.0f;
    });
  };
  std::int64_t done = 0;
  if (vectors) {
    const std::int64_t count = n / W;
    for_each_streamed_vector(x, count, hint, [&](std::int64_t v, const Vector<T>& vec) {
      float a[W];
#pragma unroll
      for (int e = 0; e < W; ++e) a[e] = Traits::to_float(vec.v[e]);
      f(a, W, [&](float (&w)[W]) {
        const Vector<T> again = load_vector(x + v * W);
#pragma unroll
        for (int e = 0; e < W; ++e) w[e] = Traits::to_float(again.v[e]);
      });
    });
    done = count * W;
  }
  for (std::int64_t i = done + t; i < n; i += threads) single(i);
}

/// The tile's 16-byte vectors [first, last) (in vectors of T), f(values, index of the first element, reload).
template <class T, class F>
__device__ __forceinline__ void walk_tile_vectors(const T* tile, int first, int last, F&& f) {
  using Traits = StorageTraits<T>;
  constexpr int W = vector_width<T>;
  const auto* vectors = reinterpret_cast<const Vector<T>*>(tile);
#pragma unroll 4
  for (int i = first + static_cast<int>(threadIdx.x); i < last; i += threads) {
    const Vector<T> vec = vectors[i];
    float a[W];
#pragma unroll
    for (int e = 0; e < W; ++e) a[e] = Traits::to_float(vec.v[e]);
    f(a, i * W, [&](float (&w)[W]) {
      const Vector<T> again = vectors[i];
#pragma unroll
      for (int e = 0; e < W; ++e) w[e] = Traits::to_float(again.v[e]);
    });
  }
}

// ---------------------------------------------------------------------------------------------------
// The kernel.

/// A row's two rounds within the cluster: the statistics, then the sum of exponentials (the row agent's combine).
using RowRounds = Rounds<RowStatsPartial, float>;

template <int Threads>
struct Scratch {
  typename ClusterCombine<Threads, RowRounds>::Storage combine;
  SlotReduction<RowStatsPartial, Threads> stats_total;  // the global rounds' reductions
  SlotReduction<float, Threads> sum_total;
  std::uint64_t loaded[chunks];
};

/// Every row of the launch, one after another, by the whole grid. Registers: 16-byte vectors a thread holds past
/// the tile (0 or register_vectors<T>). Statistics: NoStatistics or WriteStatistics (rss/agent/forward_row.cuh):
/// the write is its own instantiation, as in cluster_row.
template <class T, int Registers, class Statistics>
__global__ void __launch_bounds__(threads, 1) kernel(Params<T> p) {
#if RSS_CLUSTER_DEVICE_CODE  // bulk copies and clusters: sm_90 and later; the host admits nothing else
  using Traits = StorageTraits<T>;
  constexpr int W = vector_width<T>;
  extern __shared__ float4 long_row_tile[];  // float4: the bulk copy wants 16-byte alignment
  __shared__ Scratch<threads> scratch;
  T* const tile = reinterpret_cast<T*>(long_row_tile);

  const int cluster_size = p.cluster_size;
  const int rank = cluster_size > 1 ? static_cast<int>(cooperative_groups::this_cluster().block_rank()) : 0;
  const int cluster = static_cast<int>(blockIdx.x) / cluster_size;
  const bool leader = rank == 0 && threadIdx.x == 0;
  const std::int64_t begin = static_cast<std::int64_t>(blockIdx.x) * p.share;
  const std::int64_t n = begin < p.cols ? min(p.share, p.cols - begin) : 0;
  const int held = static_cast<int>(min(n, p.tile));  // a tile fits shared memory: an int
  const int in_registers = static_cast<int>(min(n - held, static_cast<std::int64_t>(p.in_registers)));
  const std::int64_t streamed_begin = held + in_registers;  // the share's streamed part: the rest
  const std::int64_t streamed = n - streamed_begin;
  // The register part (Registers > 0): elements [held, held + in_registers) of the share, thread t's vector j
  // being the part's vector j * threads + t. Read in phase 1, used in phase 2, written as y in phase 3.
  using Part = RegisterShare<T, threads, (Registers > 0 ? Registers : 1) * W, Fit::checked>;
  const Part part(in_registers);

  ClusterCombine<threads, RowRounds> combine(cluster_size, scratch.combine);  // before any peer may push to this block
  LeaderExchange exchange(p.exchange, p.clusters);  // reads the launch's base before the first cluster exchange
  BulkTileLoads<chunks> loads(scratch.loaded);  // one mbarrier per chunk of the tile
  const L2Hint keep = L2Hint::evict_last();    // the streamed part: read again in phases 2 and 3
  const L2Hint once = L2Hint::evict_first();   // the tile's loads, the register part, phase 3's last reads, y

  // Block -> cluster -> leaders; every thread gets the grid's total (the same bits in every block).
  const auto stats_round = [&](const RowStatsPartial& mine) {
    const RowStatsPartial in_cluster = combine.template all_reduce<0>(mine, CombineRowStats{});
    return exchange.all_reduce<threads>(in_cluster, p.stat_slots, leader, cluster, RowStatsPartial::identity(),
                                        CombineRowStats{}, scratch.stats_total);
  };
  const auto sum_round = [&](float mine) {
    const float in_cluster = combine.template all_reduce<1>(mine, SumFloat{});
    return exchange.all_reduce<threads>(in_cluster, p.sum_slots, leader, cluster, 0.0f, SumFloat{}, scratch.sum_total);
  };

  for (std::int64_t row = 0; row < p.rows; ++row) {
    const T* x_row = p.x + row * p.ld_x;
    T* y_row = p.y + row * p.ld_y;
    // Shares start on multiples of 8 elements: a share is 16-byte aligned exactly when its row is.
    const bool x_vectors = reinterpret_cast<std::uintptr_t>(x_row) % 16 == 0;
    const bool y_vectors = x_vectors && reinterpret_cast<std::uintptr_t>(y_row) % 16 == 0;
    const T* x_share = x_row + (n > 0 ? begin : 0);
    T* y_share = y_row + (n > 0 ? begin : 0);
    const int held_vectors = x_vectors ? held / W : 0;  // loaded by the copy engine; the rest element by element
    // Chunks of whole 128-byte lines: where the share and the tile start on a line, so does every chunk, and bulk
    // copies between line-aligned addresses run faster (bench/NOTES.md, long rows step 7).
    const int chunk_vectors = (held_vectors + chunks * 8 - 1) / (chunks * 8) * 8;

    // Phase 1: the whole tile requested at once, then the streamed part through registers, then the chunks.
    if (threadIdx.x == 0) {
      // One proxy fence for every chunk: the block's last accesses of the tile (the previous row's) precede it,
      // with a block barrier between.
      cuda::ptx::fence_proxy_async(cuda::ptx::space_shared);
      for (int i = 0; i < chunks && i * chunk_vectors < held_vectors; ++i) {
        const int count = min(chunk_vectors, held_vectors - i * chunk_vectors);
        loads.issue_fenced(i, tile + i * chunk_vectors * W, x_share + static_cast<std::int64_t>(i) * chunk_vectors * W,
                           static_cast<std::uint32_t>(count * W * sizeof(T)), once.policy);
      }
    }
    __syncthreads();  // no thread polls a chunk's mbarrier while thread 0 issues: measured 1-5 us off phase 1
    for (int i = held_vectors * W + static_cast<int>(threadIdx.x); i < held; i += threads) tile[i] = x_share[i];

    // Issued first: its statistics wait the longest. An empty part loads nothing (its words are zeros).
    typename Part::Held part_x;
    if constexpr (Registers > 0) part_x = part.load(x_share + held, once);
    RowStatsPartial mine = RowStatsPartial::identity();
    walk_streamed(x_share + streamed_begin, streamed, x_vectors, keep,
                  [&](const auto& v, int count, auto&& reload) { mine.add_run(v, count, reload); });
    if constexpr (Registers > 0) {
      if (in_registers > 0) mine = CombineRowStats{}(mine, part.statistics(part_x));
    }
    for (int i = 0; i < chunks && i * chunk_vectors < held_vectors; ++i) {
      loads.wait(i);
      walk_tile_vectors(tile, i * chunk_vectors, min((i + 1) * chunk_vectors, held_vectors),
                        [&](const auto& v, int, auto&& reload) { mine.add_run(v, W, reload); });
    }
    __syncthreads();  // the elements the block copied itself
    for (int i = held_vectors * W + static_cast<int>(threadIdx.x); i < held; i += threads) {
      const float v[W] = {Traits::to_float(tile[i])};
      mine.add_run(v, 1, [&](float (&w)[W]) {
        w[0] = Traits::to_float(tile[i]);
#pragma unroll
        for (int e = 1; e < W; ++e) w[e] = 0.0f;
      });
    }
    const RowScale scale = make_row_scale(stats_round(mine), p.cols);

    // Phase 2: the exponentials' sum, in fp32 over a thread's few tile vectors or one batch of streamed runs,
    // in double across them (a thread of a 2^31-element row sums about 16,000 exponentials).
    double wide = 0.0;
    {
      float s = 0.0f;
      walk_tile_vectors(tile, 0, held_vectors, [&](const auto& v, int, auto&&) {
#pragma unroll
        for (int e = 0; e < W; ++e) s += scale.exp_of(v[e]);
      });
      for (int i = held_vectors * W + static_cast<int>(threadIdx.x); i < held; i += threads) {
        s += scale.exp_of(Traits::to_float(tile[i]));
      }
      if constexpr (Registers > 0) {
        part.each_run_index([&](int u, int count) {
#pragma unroll
          for (int e = 0; e < W; ++e)
            if (e < count) s += scale.exp_of(part_x.at(u, e));
        });
      }
      wide += s;
    }
    {
      // Runs summed in fp32 in groups of 16 (64 or 128 exponentials), each group added to the double: a
      // conversion per run would put one F2F.F64 per vector on the exponentials' pipe.
      float group = 0.0f;
      int runs = 0;
      walk_streamed(x_share + streamed_begin, streamed, x_vectors, keep, [&](const auto& v, int count, auto&&) {
#pragma unroll
        for (int e = 0; e < W; ++e)
          if (e < count) group += scale.exp_of(v[e]);
        if (++runs == 16) {
          wide += group;
          group = 0.0f;
          runs = 0;
        }
      });
      wide += group;
    }
    const float total = sum_round(static_cast<float>(wide));
    const float inv_sum = 1.0f / total;  // as a backward from these statistics forms it
    Statistics::write(p.stats, row, blockIdx.x == 0 && threadIdx.x == 0, {scale.max, scale.inv_rms, total});

    // Phase 3: y from the registers (first: their registers are free for the rest), from the streamed part (its
    // last use: evict_first; before the tile's y passes through L2, which took 9 MB of it back to HBM on 1 x 16M
    // fp32: bench/NOTES.md, long rows step 9), then from the tile; y itself evict_first.
    const auto out = [&](float v) { return Traits::from_float(scale.exp_of(v) * inv_sum); };
    if constexpr (Registers > 0) {
      if (in_registers > 0) part.store_index(y_share + held, [&](int u, int e) { return out(part_x.at(u, e)); }, 0, once);
    }
    {
      const T* xs = x_share + streamed_begin;
      T* ys = y_share + streamed_begin;
      const auto t = static_cast<std::int64_t>(threadIdx.x);
      std::int64_t done = 0;
      if (y_vectors) {
        const std::int64_t count = streamed / W;
        for_each_streamed_vector(xs, count, once, [&](std::int64_t v, const Vector<T>& in) {
          Vector<T> o;
#pragma unroll
          for (int e = 0; e < W; ++e) o.v[e] = out(Traits::to_float(in.v[e]));
          store_vector(ys + v * W, o, once);
        });
        done = count * W;
      }
      for (std::int64_t i = done + t; i < streamed; i += threads) ys[i] = out(Traits::to_float(xs[i]));
    }
    {
      const auto* vectors = reinterpret_cast<const Vector<T>*>(tile);
#pragma unroll 4
      for (int i = static_cast<int>(threadIdx.x); i < held_vectors; i += threads) {
        const Vector<T> v = vectors[i];
        Vector<T> o;
#pragma unroll
        for (int e = 0; e < W; ++e) o.v[e] = out(Traits::to_float(v.v[e]));
        if (y_vectors) {
          store_vector(y_share + static_cast<std::int64_t>(i) * W, o, once);
        } else {
#pragma unroll
          for (int e = 0; e < W; ++e) y_share[static_cast<std::int64_t>(i) * W + e] = o.v[e];
        }
      }
      for (int i = held_vectors * W + static_cast<int>(threadIdx.x); i < held; i += threads) {
        y_share[i] = out(Traits::to_float(tile[i]));
      }
    }
    // The next row's bulk copies overwrite the tile: every thread's reads (and element-wise writes) of it are
    // ordered before the copy engine's writes (generic proxy, then the async proxy).
    cuda::ptx::fence_proxy_async(cuda::ptx::space_shared);
    __syncthreads();
    combine.end_row();
  }
  combine.finish();  // a block still completes the cluster start barrier it arrived on
  exchange.finish(blockIdx.x == 0);
#else
  (void)p;
  __trap();  // never launched: the host admits this kernel only on sm_90 machine code
#endif
}

template <class T>
using Kernel = void (*)(Params<T>);

/// The kernel with a register part (where the type has one) or without.
template <class T>
Kernel<T> kernel_for(bool writes_stats, bool register_part) {
  constexpr int R = register_vectors<T>;
  if constexpr (R > 0) {
    if (register_part) return writes_stats ? kernel<T, R, WriteStatistics> : kernel<T, R, NoStatistics>;
  }
  return writes_stats ? kernel<T, 0, WriteStatistics> : kernel<T, 0, NoStatistics>;
}

/// The workspace: the exchange's state (zeroed by prepare), then one statistics slot and one sum slot per
/// cluster leader; at most sm_count leaders (the grid has at most one block per SM).
struct Workspace {
  LeaderExchangeState* state;
  RowStatsPartial* stat_slots;
  float* sum_slots;

  static Workspace carve(WorkspaceCarver& carver, std::int64_t max_leaders) {
    Workspace w{};
    w.state = carver.take<LeaderExchangeState>(1);
    w.stat_slots = carver.take<RowStatsPartial>(max_leaders);
    w.sum_slots = carver.take<float>(max_leaders);
    return w;
  }
};

inline std::int64_t max_leaders(const DeviceInfo& d) { return d.sm_count > 0 ? d.sm_count : 1; }

template <class T>
struct Plan {
  LongRowPlan geometry{};
  Kernel<T> kernel = nullptr;  // taken once here: see docs/architecture.md (one copy per translation unit)
  int blocks_per_sm = 0;
  std::int64_t max_leaders = 0;
  std::shared_ptr<megakernel::CountersZeroed> counters;  // once prepared
};

/// Plans p.kernel for a non-empty request on device d, asking the runtime about that very kernel.
template <class T>
Status plan_kernel(const DeviceInfo& d, LongRowRequest request, Plan<T>* p) {
  KernelFacts facts;
  RSS_TRY(kernel_facts(p->kernel, d, &facts));
  if (facts.binary_version < 90) return Status::unsupported_device;  // the build has no sm_90 code for it
  request.static_shared_bytes = facts.static_shared;
  Status query = Status::success;
  const auto resident_clusters = [&](int size, std::size_t dynamic) -> int {
    if (dynamic > facts.max_dynamic) return 0;
    int answer = 0;
    Status s = Status::success;
    if (size == 1) {
      s = blocks_per_sm(p->kernel, d, threads, dynamic, &answer);
      answer *= d.sm_count;
    } else {
      s = active_clusters(p->kernel, d, threads, size, dynamic, &answer);
    }
    if (!ok(s)) query = s;
    return ok(s) ? answer : 0;
  };
  const Status planned = plan_long_row(d, request, resident_clusters, &p->geometry);
  RSS_TRY(query);
  RSS_TRY(planned);
  return blocks_per_sm(p->kernel, d, threads, p->geometry.dynamic_shared_bytes, &p->blocks_per_sm);
}

/// Plans on device d: the kernel without a register part, then, where some block's share passes its tile, the
/// kernel with one (the part's code, unused, cost 0.3 us on 1 x 2^20 and 2^22 fp32: bench/NOTES.md, long rows step
/// 9). Both kernels have the same shared memory and one block per SM, so the share and the tile stay the same.
template <class T>
Status make_plan(std::int64_t rows, std::int64_t cols, bool writes_stats, const DeviceInfo& d, Plan<T>* out) {
  Plan<T> p;
  p.max_leaders = max_leaders(d);
  LongRowRequest request;
  request.rows = rows;
  request.cols = cols;
  request.dtype = dtype_of<T>;
  request.threads = threads;
  if (rows == 0 || cols == 0) {
    p.kernel = kernel_for<T>(writes_stats, false);
    RSS_TRY(plan_long_row(d, request, [](int, std::size_t) { return 0; }, &p.geometry));
    *out = p;
    return Status::success;
  }
  if (!d.cooperative_launch) return Status::cooperative_unsupported;
  p.kernel = kernel_for<T>(writes_stats, false);
  RSS_TRY(plan_kernel(d, request, &p));
  if (register_vectors<T> > 0 && p.geometry.share_elems > p.geometry.tile_elems) {
    p.kernel = kernel_for<T>(writes_stats, true);
    request.register_bytes = static_cast<std::size_t>(threads) * register_vectors<T> * 16;
    RSS_TRY(plan_kernel(d, request, &p));
  }
  *out = p;
  return Status::success;
}

/// Issues (or, dry, describes) the launch of a plan.
template <class T>
Status launch_plan(const Plan<T>& plan, const T* x, T* y, RowStatistics* stats, const Layout& layout, void* workspace,
                   Launcher launcher) {
  const LongRowPlan& g = plan.geometry;
  if (g.launch_count == 0) return Status::success;
  const auto io = static_cast<std::int64_t>(sizeof(T));
  // x once and y once, and the streamed part of x twice more (from L2 where it stays resident).
  launcher.add_logical_bytes(g.rows * g.cols * io * 2 + g.streamed_elements * io * 2);
  if (launcher.record != nullptr) launcher.record->evicted_elements += g.streamed_elements;
  WorkspaceCarver carver(workspace);
  const Workspace w = Workspace::carve(carver, plan.max_leaders);
  const Params<T> p{x,          y,          stats,        g.rows,       g.cols,     layout.ld_x,
                    layout.ld_y, g.share_elems, g.tile_elems, static_cast<int>(g.register_elems), g.clusters,
                    g.cluster_size, w.state,      w.stat_slots, w.sum_slots};
  launcher.cluster_size = static_cast<unsigned>(g.cluster_size);
  return launcher("long_row", plan.kernel, static_cast<unsigned>(g.grid_blocks), static_cast<unsigned>(threads),
                  g.dynamic_shared_bytes, true, plan.blocks_per_sm, p);
}

}  // namespace long_row

/// Strategy long_row. Its workspace (the exchange's state and one slot pair per SM) depends on the device only.
struct LongRow {
  static constexpr Strategy id = Strategy::long_row;
  template <class T>
  using Plan = long_row::Plan<T>;

  template <class T>
  static Status workspace_bytes(std::int64_t, std::int64_t, const DeviceInfo& d, std::size_t* bytes) noexcept {
    return carved_bytes<long_row::Workspace>(bytes, long_row::max_leaders(d));
  }
  template <class T>
  static Status make_plan(const Call<T>& c, const DeviceInfo& d, const Config&, Plan<T>* plan) noexcept {
    return long_row::make_plan<T>(c.layout.rows, c.layout.cols, c.stats != nullptr, d, plan);
  }
  /// Zeroes the exchange's state on `stream`, and its slots with it: a slot's padding (RowStatsPartial's four
  /// bytes after max) is never written by the exchange but is read with the slot, which initcheck reports.
  /// Runs on other streams are ordered after it.
  template <class T>
  static Status prepare(Plan<T>& plan, const Call<T>& c, cudaStream_t stream) noexcept {
    std::size_t bytes = 0;
    RSS_TRY(carved_bytes<long_row::Workspace>(&bytes, plan.max_leaders));
    std::shared_ptr<megakernel::CountersZeroed> zeroed(new (std::nothrow) megakernel::CountersZeroed);
    if (zeroed == nullptr) return Status::cuda_error;
    RSS_TRY(zeroed->zero(c.workspace, bytes, stream));
    plan.counters = std::move(zeroed);
    return Status::success;
  }
  template <class T>
  static Status launch(const Plan<T>& plan, const Call<T>& c, const Launcher& launcher) noexcept {
    if (plan.counters != nullptr && !launcher.dry_run) RSS_TRY(plan.counters->order_before(launcher.stream));
    return long_row::launch_plan(plan, c.x, c.y, c.stats, c.layout, c.workspace, launcher);
  }
};

}  // namespace rss::detail
