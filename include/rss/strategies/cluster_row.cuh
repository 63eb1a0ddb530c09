#pragma once
// Strategy `cluster_row`: one thread-block cluster per row, one ordinary launch. Each block keeps its
// share of the row in registers from the statistics to the normalisation, so x is read once and y
// written once; the blocks of a cluster combine their partial statistics and sums through
// distributed shared memory and cluster barriers, never through global memory. A cluster's blocks are
// co-scheduled by the hardware, so no residency planning beyond "one cluster fits" is needed. A
// configuration may keep the share in shared memory instead (RowResidence::shared_memory): the copy
// engine loads it, as stored, and three passes over it replace the registers; pipelined, two tiles let
// the next row load while this one is worked on.
// Rows longer than a cluster holds (rss/planner/cluster_plan.hpp) belong to the megakernels.
#include <cooperative_groups.h>
#include <cuda_runtime.h>

#include <cstdint>
#include <cub/block/block_reduce.cuh>

#include "rss/detail/launch.cuh"
#include "rss/detail/occupancy.cuh"
#include "rss/storage.cuh"
#include "rss/phases/exp_sum.cuh"
#include "rss/phases/row_stats.cuh"
#include "rss/phases/tile_io.cuh"
#include "rss/planner/cluster_plan.hpp"
#include "rss/strategies/call.cuh"
#include "rss/sync/bulk_copy.cuh"
#include "rss/sync/cluster_reduce.cuh"

namespace rss::detail {
namespace cluster_row {

template <class T, int Threads>
struct SharedState {
  typename cub::BlockReduce<RowStatsPartial, Threads>::TempStorage stats_storage;
  typename cub::BlockReduce<float, Threads>::TempStorage sum_storage;
  RowStatsPartial stats_slots[portable_cluster_size];  // one per block of the cluster
  float sum_slots[portable_cluster_size];
};

/// How much of a row's bounds and alignment a kernel instantiation must test. The host picks the
/// cheapest one the call allows (fit_of): every test costs registers, and registers decide how many
/// blocks share an SM.
enum class Fit {
  checked,  // any width, any alignment: tests per element
  vectors,  // rows of whole 16-byte vectors, 16-byte aligned: one test per vector (a thread's count)
  exact,    // every block's share is exactly threads * elems_per_thread elements: no tests at all
};

/// This block's share of one row: x_row[0, n) in, y_row[0, n) out, with the tests `F` requires. Returns
/// the row's statistics (the caller writes them when asked).
template <Fit F, class T, int Threads, int ElemsPerThread>
__device__ __forceinline__ RowStatistics process_row(const T* x_row, T* y_row, std::int64_t n, std::int64_t cols,
                                                     int cluster_size, ClusterStart& start,
                                                     SharedState<T, Threads>& shared) {
  using Traits = StorageTraits<T>;
  constexpr int W = vector_width<T>;
  constexpr int V = ElemsPerThread / W;  // 16-byte vectors per thread
  const int t = static_cast<int>(threadIdx.x);
  const auto index = [&](int u, int e) { return (u * Threads + t) * W + e; };  // < Threads * Elems: fits int
  // Whole vectors this thread holds (vectors: u < held); elements checked one by one (checked).
  const int held = F == Fit::vectors ? static_cast<int>((n / W - t + Threads - 1) / Threads) : V;
  const auto vector_valid = [&](int u) {
    if constexpr (F == Fit::exact) return true;
    else if constexpr (F == Fit::vectors) return u < held;
    else return index(u, W - 1) < n;
  };
  const auto valid = [&](int u, int e) {
    if constexpr (F == Fit::checked) return index(u, e) < n;
    else return vector_valid(u);
  };

  // All loads first: V of them in flight per thread.
  Vector<T> raw[V];
  const bool x_vectors = F != Fit::checked || reinterpret_cast<std::uintptr_t>(x_row) % 16 == 0;
#pragma unroll
  for (int u = 0; u < V; ++u) {
    if (x_vectors && vector_valid(u)) {
      raw[u] = load_vector(x_row + index(u, 0));
    } else {
#pragma unroll
      for (int e = 0; e < W; ++e) raw[u].v[e] = valid(u, e) ? x_row[index(u, e)] : Traits::from_float(0.0f);
    }
  }
  RowStatsPartial stats = RowStatsPartial::identity();
#pragma unroll
  for (int u = 0; u < V; ++u) {
#pragma unroll
    for (int e = 0; e < W; ++e)
      if (valid(u, e)) stats.add(Traits::to_float(raw[u].v[e]));
  }
  stats = cub::BlockReduce<RowStatsPartial, Threads>(shared.stats_storage).Reduce(stats, CombineRowStats{});
  const RowScale scale = make_row_scale(cluster_all_reduce(stats, shared.stats_slots, cluster_size, start, CombineRowStats{}), cols);

  // The exponentials stay in the registers that held x, as fp32 for every storage type. Keeping 16-bit x
  // as stored and recomputing the exponentials for the output saved nothing: ptxas kept the converted
  // floats alive anyway (bf16 512 x 32 `vectors`: 90 registers, 1 block per SM, against 64 and 2), and
  // it paid every exponential twice (bench/NOTES.md).
  float exps[V][W];
  float sum = 0.0f;
#pragma unroll
  for (int u = 0; u < V; ++u) {
#pragma unroll
    for (int e = 0; e < W; ++e) {
      const float ex = valid(u, e) ? scale.exp_of(Traits::to_float(raw[u].v[e])) : 0.0f;
      exps[u][e] = ex;
      sum += ex;
    }
  }
  sum = cub::BlockReduce<float, Threads>(shared.sum_storage).Sum(sum);
  const float total = cluster_all_reduce(sum, shared.sum_slots, cluster_size, start, SumFloat{});
  const float inv_sum = 1.0f / total;
  const auto out = [&](int u, int e) { return Traits::from_float(exps[u][e] * inv_sum); };

  const bool y_vectors = F != Fit::checked || reinterpret_cast<std::uintptr_t>(y_row) % 16 == 0;
#pragma unroll
  for (int u = 0; u < V; ++u) {
    if (y_vectors && vector_valid(u)) {
      Vector<T> vec;
#pragma unroll
      for (int e = 0; e < W; ++e) vec.v[e] = out(u, e);
      store_vector(y_row + index(u, 0), vec);
    } else {
#pragma unroll
      for (int e = 0; e < W; ++e)
        if (valid(u, e)) y_row[index(u, e)] = out(u, e);
    }
  }
  return {scale.max, scale.inv_rms, total};
}

/// process_row for a share kept in shared memory: `tile` holds x_row[0, n) as stored. Three passes over
/// the tile (statistics, sum of exponentials, output), so each exponential is computed twice: the SM's
/// arithmetic affords that while memory bounds the kernel, and the registers it saves let more blocks,
/// and so more loads, share an SM.
template <Fit F, class T, int Threads>
__device__ __forceinline__ RowStatistics process_shared_row(const T* tile, T* y_row, int n, std::int64_t cols,
                                                            int cluster_size, ClusterStart& start,
                                                            SharedState<T, Threads>& shared) {
  using Traits = StorageTraits<T>;
  constexpr int W = vector_width<T>;
  const int t = static_cast<int>(threadIdx.x);
  const int vectors = n / W;  // whole vectors: all of the share unless F is checked
  const int tail_index = vectors * W + t;  // at most W - 1 elements past them, one per thread
  const bool has_tail = F == Fit::checked && tail_index < n;
  const auto* tile_vectors = reinterpret_cast<const Vector<T>*>(tile);  // the tile is 16-byte aligned

  RowStatsPartial stats = RowStatsPartial::identity();
#pragma unroll 4
  for (int i = t; i < vectors; i += Threads) {
    const Vector<T> v = tile_vectors[i];
#pragma unroll
    for (int e = 0; e < W; ++e) stats.add(Traits::to_float(v.v[e]));
  }
  if (has_tail) stats.add(Traits::to_float(tile[tail_index]));
  stats = cub::BlockReduce<RowStatsPartial, Threads>(shared.stats_storage).Reduce(stats, CombineRowStats{});
  const RowScale scale = make_row_scale(cluster_all_reduce(stats, shared.stats_slots, cluster_size, start, CombineRowStats{}), cols);

  float sum = 0.0f;
#pragma unroll 4
  for (int i = t; i < vectors; i += Threads) {
    const Vector<T> v = tile_vectors[i];
#pragma unroll
    for (int e = 0; e < W; ++e) sum += scale.exp_of(Traits::to_float(v.v[e]));
  }
  if (has_tail) sum += scale.exp_of(Traits::to_float(tile[tail_index]));
  sum = cub::BlockReduce<float, Threads>(shared.sum_storage).Sum(sum);
  const float total = cluster_all_reduce(sum, shared.sum_slots, cluster_size, start, SumFloat{});
  const float inv_sum = 1.0f / total;
  const auto out = [&](T x) { return Traits::from_float(scale.exp_of(Traits::to_float(x)) * inv_sum); };

  const bool y_vectors = F != Fit::checked || reinterpret_cast<std::uintptr_t>(y_row) % 16 == 0;
#pragma unroll 4
  for (int i = t; i < vectors; i += Threads) {
    const Vector<T> v = tile_vectors[i];
    Vector<T> o;
#pragma unroll
    for (int e = 0; e < W; ++e) o.v[e] = out(v.v[e]);
    if (y_vectors) {
      store_vector(y_row + i * W, o);
    } else {
#pragma unroll
      for (int e = 0; e < W; ++e) y_row[i * W + e] = o.v[e];
    }
  }
  if (has_tail) y_row[tail_index] = out(tile[tail_index]);
  return {scale.max, scale.inv_rms, total};
}

/// One row per cluster (looping when the grid has fewer clusters than rows). See cluster_plan.hpp for
/// which elements block `rank` and thread t hold. Two cluster barriers per row: one publishes the
/// blocks' statistics, one their sums of exponentials. WritesStats: the cluster's first block also writes
/// each row's statistics to stats[row]. Its own instantiation, because the write costs registers in
/// kernels tuned to a register budget (ptxas: fp32 512 x 32 `vectors` 64 -> 78, one block per SM instead
/// of two), and a forward without statistics should not pay them.
template <class T, int Threads, int ElemsPerThread, Fit F, bool WritesStats>
__global__ void __launch_bounds__(Threads) kernel(const T* x, T* y, RowStatistics* stats, Layout l, std::int64_t chunk,
                                                  int cluster_size) {
#if RSS_CLUSTER_DEVICE_CODE  // rss/sync/cluster_reduce.cuh: sm_90 and later
  __shared__ SharedState<T, Threads> shared;
  namespace cg = cooperative_groups;
  const int rank = cluster_size > 1 ? static_cast<int>(cg::this_cluster().block_rank()) : 0;
  const std::int64_t begin = rank * chunk;
  const std::int64_t n = max(min(chunk, l.cols - begin), std::int64_t{0});
  ClusterStart start(cluster_size);
  for (std::int64_t row = blockIdx.x / cluster_size; row < l.rows; row += gridDim.x / cluster_size) {
    const RowStatistics row_stats = process_row<F, T, Threads, ElemsPerThread>(
        x + row * l.ld_x + begin, y + row * l.ld_y + begin, n, l.cols, cluster_size, start, shared);
    if constexpr (WritesStats) {
      if (rank == 0 && threadIdx.x == 0) stats[row] = row_stats;
    } else {
      (void)row_stats;
    }
  }
#else
  __trap();  // never launched: the host admits these kernels only on sm_90 machine code
#endif
}

/// `kernel` for a share kept in shared memory (the launch's dynamic shared memory: Tiles tiles of chunk
/// elements of T). F is checked or vectors: the passes test per vector either way, so exact would save
/// nothing. With two tiles (pipelined) the copy engine loads the block's next row into one tile while the
/// block works on the other, so loads stay in flight through the reductions and the stores; the host then
/// launches only the clusters that stay resident, each looping over rows.
template <class T, int Threads, Fit F, bool WritesStats, int Tiles>
__global__ void __launch_bounds__(Threads) shared_kernel(const T* x, T* y, RowStatistics* stats, Layout l,
                                                         std::int64_t chunk, int cluster_size) {
  static_assert(Tiles == 1 || Tiles == 2);
#if RSS_CLUSTER_DEVICE_CODE
  extern __shared__ float4 cluster_row_share[];  // float4: the bulk copy wants 16-byte alignment
  __shared__ SharedState<T, Threads> shared;
  __shared__ std::uint64_t tile_loaded[Tiles];
  namespace cg = cooperative_groups;
  const int rank = cluster_size > 1 ? static_cast<int>(cg::this_cluster().block_rank()) : 0;
  const std::int64_t begin = rank * chunk;
  const int n = static_cast<int>(max(min(chunk, l.cols - begin), std::int64_t{0}));  // chunk fits shared memory
  const std::int64_t stride = gridDim.x / cluster_size;
  // chunk is a multiple of 8 elements (cluster_plan.hpp), so tile 1 is 16-byte aligned too.
  const auto tile = [&](int k) { return reinterpret_cast<T*>(cluster_row_share) + (Tiles == 2 ? (k & 1) * chunk : 0); };
  BulkTileLoads<Tiles> loads(tile_loaded);
  // Whole aligned vectors (n * sizeof(T) a multiple of 16) go through the copy engine; anything else is
  // copied element by element, by every thread, when its turn comes.
  const bool bulk = F != Fit::checked && n > 0;
  const auto fetch = [&](std::int64_t row, int k) {  // thread 0: start loading `row` into tile(k)
    if (bulk && row < l.rows && threadIdx.x == 0) {
      loads.issue(k % Tiles, tile(k), x + row * l.ld_x + begin, static_cast<std::uint32_t>(n * sizeof(T)));
    }
  };
  ClusterStart start(cluster_size);
  std::int64_t row = blockIdx.x / cluster_size;
  fetch(row, 0);
  for (int k = 0; row < l.rows; row += stride, ++k) {
    if constexpr (Tiles == 2) fetch(row + stride, k + 1);  // its tile was freed by the barrier that ended k - 1
    if (bulk) {
      loads.wait(k % Tiles);
    } else {
      const T* x_row = x + row * l.ld_x + begin;
      for (int i = static_cast<int>(threadIdx.x); i < n; i += Threads) tile(k)[i] = x_row[i];
      __syncthreads();
    }
    const RowStatistics row_stats =
        process_shared_row<F, T, Threads>(tile(k), y + row * l.ld_y + begin, n, l.cols, cluster_size, start, shared);
    if constexpr (WritesStats) {
      if (rank == 0 && threadIdx.x == 0) stats[row] = row_stats;
    } else {
      (void)row_stats;
    }
    __syncthreads();  // every thread is done with tile(k) before a load overwrites it
    if constexpr (Tiles == 1) fetch(row + stride, k + 1);
  }
#else
  __trap();  // never launched: the host admits these kernels only on sm_90 machine code
#endif
}

template <class T>
using Kernel = void (*)(const T*, T*, RowStatistics*, Layout, std::int64_t, int);

template <class T, int Threads, int Elems, bool WritesStats>
constexpr Kernel<T> instance(Fit fit) {
  if constexpr (Elems % vector_width<T> == 0) {
    switch (fit) {
      case Fit::checked: return kernel<T, Threads, Elems, Fit::checked, WritesStats>;
      case Fit::vectors: return kernel<T, Threads, Elems, Fit::vectors, WritesStats>;
      case Fit::exact: return kernel<T, Threads, Elems, Fit::exact, WritesStats>;
    }
  }
  return nullptr;  // fewer elements than one 16-byte vector of T
}

template <class T, int Threads, int Elems>
constexpr Kernel<T> instance(Fit fit, bool writes_stats) {
  return writes_stats ? instance<T, Threads, Elems, true>(fit) : instance<T, Threads, Elems, false>(fit);
}

template <class T, int Threads, int Tiles>
constexpr Kernel<T> shared_instance(Fit fit, bool writes_stats) {
  if (fit == Fit::checked) {
    return writes_stats ? shared_kernel<T, Threads, Fit::checked, true, Tiles>
                        : shared_kernel<T, Threads, Fit::checked, false, Tiles>;
  }
  return writes_stats ? shared_kernel<T, Threads, Fit::vectors, true, Tiles>
                      : shared_kernel<T, Threads, Fit::vectors, false, Tiles>;
}

/// The instantiation of a configuration listed in cluster_plan.hpp; null for anything else.
template <class T>
Kernel<T> kernel_for(const ClusterConfig& c, Fit fit, bool writes_stats) {
  const int elems = c.elems_per_thread;
  const auto pick = [&](auto threads_constant) -> Kernel<T> {
    constexpr int Th = decltype(threads_constant)::value;
    if (c.residence == RowResidence::shared_memory) return shared_instance<T, Th, 1>(fit, writes_stats);
    if (c.residence == RowResidence::shared_memory_pipelined) return shared_instance<T, Th, 2>(fit, writes_stats);
    switch (elems) {
      case 4: return instance<T, Th, 4>(fit, writes_stats);
      case 8: return instance<T, Th, 8>(fit, writes_stats);
      case 16: return instance<T, Th, 16>(fit, writes_stats);
      case 32: return instance<T, Th, 32>(fit, writes_stats);
      default: return nullptr;
    }
  };
  if (c.threads == 256) return pick(std::integral_constant<int, 256>{});
  if (c.threads == 512) return pick(std::integral_constant<int, 512>{});
  return nullptr;
}

/// The cheapest instantiation a call allows. Every block share starts at a multiple of 8 elements
/// (cluster_plan.hpp), so aligned rows of whole vectors stay aligned in every block.
template <class T>
Fit fit_of(const ClusterPlan& plan, const T* x, const T* y, const Layout& l) {
  constexpr int W = vector_width<T>;
  const bool aligned = (reinterpret_cast<std::uintptr_t>(x) | reinterpret_cast<std::uintptr_t>(y)) % 16 == 0 &&
                       l.ld_x % W == 0 && l.ld_y % W == 0;
  if (!aligned || l.cols % W != 0) return Fit::checked;
  const ClusterConfig& c = plan.config;
  const std::int64_t share = static_cast<std::int64_t>(c.threads) * c.elems_per_thread;
  return plan.chunk_elems == share && l.cols == share * c.cluster_size ? Fit::exact : Fit::vectors;
}

inline const char* kernel_name(Fit fit, RowResidence residence) {
  if (residence == RowResidence::shared_memory) return fit == Fit::checked ? "cluster_row::shared" : "cluster_row::shared_vectors";
  if (residence == RowResidence::shared_memory_pipelined) {
    return fit == Fit::checked ? "cluster_row::pipelined" : "cluster_row::pipelined_vectors";
  }
  switch (fit) {
    case Fit::exact: return "cluster_row::exact";
    case Fit::vectors: return "cluster_row::vectors";
    default: return "cluster_row";
  }
}

/// The kernel a plan launches for one call's pointers, and its occupancy.
struct Admitted {
  Fit fit = Fit::checked;
  bool writes_stats = false;
  int blocks_per_sm = 0;
};

template <class T>
struct Plan {
  ClusterPlan geometry{};
  Admitted admitted{};
  // The instantiation admitted, launched as is. Every translation unit that includes rss has its own copy
  // of a template kernel, with its own address and its own attributes: a pointer taken again at launch
  // (by code the linker may take from another unit) can name a copy whose shared-memory limit was never
  // raised, and a launch of more than 48 KB then fails (cudaErrorInvalidValue; bench/NOTES.md).
  Kernel<T> kernel = nullptr;
};

/// Plans a shape on device d for these pointers (and row statistics or not) and admits the kernel that runs it.
template <class T>
Status make_plan(const T* x, const T* y, bool writes_stats, const Layout& layout, const DeviceInfo& d,
                 const ClusterConfig* preferred, Plan<T>* out) {
  ClusterPlan p;
  RSS_TRY(plan_cluster_row(d, layout.rows, layout.cols, dtype_of<T>, preferred, &p));
  Admitted a;
  Kernel<T> k = nullptr;
  if (p.grid_blocks > 0) {
    const ClusterConfig& c = p.config;
    a.fit = fit_of(p, x, y, layout);
    a.writes_stats = writes_stats;
    k = kernel_for<T>(c, a.fit, writes_stats);
    if (k == nullptr) return Status::invalid_strategy;
    KernelFacts facts;
    RSS_TRY(kernel_facts(k, d, &facts));
    if (facts.binary_version < 90) return Status::unsupported_device;  // the build has no sm_90 code for it
    const auto dynamic = static_cast<std::size_t>(p.shared_bytes);
    if (dynamic > facts.max_dynamic) return Status::not_admissible;
    RSS_TRY(blocks_per_sm(k, d, c.threads, dynamic, &a.blocks_per_sm));
    if (a.blocks_per_sm == 0) return Status::not_admissible;
    int resident_clusters = a.blocks_per_sm * d.sm_count;
    if (c.cluster_size > 1) {  // the driver must be able to place one cluster
      RSS_TRY(active_clusters(k, d, c.threads, c.cluster_size, dynamic, &resident_clusters));
      if (resident_clusters == 0) return Status::not_admissible;
    }
    // A pipelined kernel overlaps one row's load with the previous row's work only by looping: launch
    // the clusters that stay resident, no more.
    if (c.residence == RowResidence::shared_memory_pipelined && p.rows > resident_clusters) {
      p.grid_blocks = static_cast<std::int64_t>(resident_clusters) * c.cluster_size;
    }
  }
  out->geometry = p;
  out->admitted = a;
  out->kernel = k;
  return Status::success;
}

/// Issues (or, dry, describes) the launch of a plan made for the same pointers.
template <class T>
Status launch_plan(const Plan<T>& plan, const T* x, T* y, RowStatistics* stats, const Layout& layout,
                   Launcher launcher) {
  const ClusterPlan& g = plan.geometry;
  if (g.grid_blocks == 0) return Status::success;
  const ClusterConfig& c = g.config;
  launcher.cluster_size = static_cast<unsigned>(c.cluster_size);
  return launcher(kernel_name(plan.admitted.fit, c.residence), plan.kernel, static_cast<unsigned>(g.grid_blocks),
                  static_cast<unsigned>(c.threads), static_cast<std::size_t>(g.shared_bytes), false,
                  plan.admitted.blocks_per_sm, x, y, stats, layout, g.chunk_elems, c.cluster_size);
}

}  // namespace cluster_row

/// Strategy cluster_row: no workspace; the plan depends on the pointers' alignment (which kernel
/// instantiation may run) and takes a configuration from the caller or the tuning table when it fits.
struct ClusterRow : NothingToPrepare {
  static constexpr Strategy id = Strategy::cluster_row;
  template <class T>
  using Plan = cluster_row::Plan<T>;

  template <class T>
  static Status workspace_bytes(std::int64_t, std::int64_t, const DeviceInfo&, std::size_t* bytes) noexcept {
    *bytes = 0;
    return Status::success;
  }
  template <class T>
  static Status make_plan(const Call<T>& c, const DeviceInfo& d, const Config& config, Plan<T>* plan) noexcept {
    return cluster_row::make_plan<T>(c.x, c.y, c.stats != nullptr, c.layout, d,
                                     config.cluster.empty() ? nullptr : &config.cluster, plan);
  }
  template <class T>
  static Status launch(const Plan<T>& plan, const Call<T>& c, const Launcher& launcher) noexcept {
    return cluster_row::launch_plan(plan, c.x, c.y, c.stats, c.layout, launcher);
  }
};

}  // namespace rss::detail
