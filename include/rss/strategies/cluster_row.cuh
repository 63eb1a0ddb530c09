#pragma once
// Strategy `cluster_row`: one thread-block cluster per row, one ordinary launch. Each block keeps its
// share of the row in registers from the statistics to the normalisation, so x is read once and y
// written once; the blocks of a cluster combine their partial statistics and sums through
// distributed shared memory and cluster barriers, never through global memory. A cluster's blocks are
// co-scheduled by the hardware, so no residency planning beyond "one cluster fits" is needed.
// Rows longer than a cluster holds (rss/planner/cluster_plan.hpp) belong to the megakernels.
#include <cooperative_groups.h>
#include <cuda_runtime.h>

#include <cstdint>
#include <cub/block/block_reduce.cuh>

#include "rss/api/launch_info.hpp"
#include "rss/detail/device.cuh"
#include "rss/detail/launch.cuh"
#include "rss/detail/storage.cuh"
#include "rss/phases/exp_sum.cuh"
#include "rss/phases/row_stats.cuh"
#include "rss/phases/tile_io.cuh"
#include "rss/planner/cluster_plan.hpp"
#include "rss/sync/cluster_reduce.cuh"

namespace rss {
namespace detail::cluster_row {

inline constexpr int max_cluster_size = 16;  // Hopper's largest (non-portable) cluster: sizes the slots

/// The cluster sizes the library launches: up to the portable 8. Non-portable 16-block clusters ran
/// in the single-file bench but were refused at launch (cudaErrorInvalidClusterSize, "cluster
/// misconfiguration") in the multi-file test binary although the attribute was set and
/// cudaOccupancyMaxActiveClusters admitted them; until that is understood they are not used.
inline constexpr int launched_cluster_size = 8;

template <class T, int Threads>
struct SharedState {
  typename cub::BlockReduce<RowStatsPartial, Threads>::TempStorage stats_storage;
  typename cub::BlockReduce<float, Threads>::TempStorage sum_storage;
  RowStatsPartial stats_slots[max_cluster_size];  // one per block of the cluster
  float sum_slots[max_cluster_size];
};

/// This block's share of one row: x_row[0, n) in, y_row[0, n) out. Checked = false is the fast path
/// for rows whose every block share is whole 16-byte vectors (n a multiple of the vector width) with
/// both pointers 16-byte aligned: one bounds test per vector instead of per element and no alignment
/// tests, which also saves the registers their predicates would take.
template <bool Checked, class T, int Threads, int ElemsPerThread>
__device__ __forceinline__ void process_row(const T* x_row, T* y_row, std::int64_t n, std::int64_t cols,
                                            int cluster_size, ClusterStart& start, SharedState<T, Threads>& shared) {
  using Traits = StorageTraits<T>;
  constexpr int W = vector_width<T>;
  constexpr int V = ElemsPerThread / W;  // 16-byte vectors per thread
  const int t = static_cast<int>(threadIdx.x);
  const auto index = [&](int u, int e) { return static_cast<std::int64_t>(u * Threads + t) * W + e; };
  const auto valid = [&](int u, int e) { return index(u, Checked ? e : 0) < n; };

  // All loads first: V of them in flight per thread.
  Vector<T> raw[V];
  const bool x_vectors = !Checked || reinterpret_cast<std::uintptr_t>(x_row) % 16 == 0;
#pragma unroll
  for (int u = 0; u < V; ++u) {
    if (x_vectors && valid(u, W - 1)) {
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

  // fp32 keeps the exponentials in the registers that held x; 16-bit types keep x as stored (half the
  // registers, so twice the elements per thread at the same occupancy) and recompute the exponentials.
  constexpr bool keep_exps = sizeof(T) == sizeof(float);
  float exps[keep_exps ? V : 1][W];
  float sum = 0.0f;
#pragma unroll
  for (int u = 0; u < V; ++u) {
#pragma unroll
    for (int e = 0; e < W; ++e) {
      const float ex = valid(u, e) ? scale.exp_of(Traits::to_float(raw[u].v[e])) : 0.0f;
      if constexpr (keep_exps) exps[u][e] = ex;
      sum += ex;
    }
  }
  sum = cub::BlockReduce<float, Threads>(shared.sum_storage).Sum(sum);
  const float inv_sum = 1.0f / cluster_all_reduce(sum, shared.sum_slots, cluster_size, start, SumFloat{});
  const auto out = [&](int u, int e) {
    if constexpr (keep_exps) return Traits::from_float(exps[u][e] * inv_sum);
    return Traits::from_float(scale.exp_of(Traits::to_float(raw[u].v[e])) * inv_sum);
  };

  const bool y_vectors = !Checked || reinterpret_cast<std::uintptr_t>(y_row) % 16 == 0;
#pragma unroll
  for (int u = 0; u < V; ++u) {
    if (y_vectors && valid(u, W - 1)) {
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
}

/// One row per cluster (looping when the grid has fewer clusters than rows). See cluster_plan.hpp for
/// which elements block `rank` and thread t hold. Two cluster barriers per row: one publishes the
/// blocks' statistics, one their sums of exponentials. Checked = false only when every block's share
/// is whole vectors and every row of x and y is 16-byte aligned (the host checks).
template <class T, int Threads, int ElemsPerThread, bool Checked>
__global__ void __launch_bounds__(Threads) kernel(const T* x, T* y, Layout l, std::int64_t chunk, int cluster_size) {
  __shared__ SharedState<T, Threads> shared;
  namespace cg = cooperative_groups;
  const int rank = cluster_size > 1 ? static_cast<int>(cg::this_cluster().block_rank()) : 0;
  const std::int64_t begin = rank * chunk;
  const std::int64_t n = max(min(chunk, l.cols - begin), std::int64_t{0});
  ClusterStart start(cluster_size);
  for (std::int64_t row = blockIdx.x / cluster_size; row < l.rows; row += gridDim.x / cluster_size) {
    process_row<Checked, T, Threads, ElemsPerThread>(x + row * l.ld_x + begin, y + row * l.ld_y + begin, n, l.cols,
                                                     cluster_size, start, shared);
  }
}

template <class T>
using Kernel = void (*)(const T*, T*, Layout, std::int64_t, int);

template <class T, int Threads, int Elems>
constexpr Kernel<T> instance(bool checked) {
  if constexpr (Elems % vector_width<T> == 0) return checked ? kernel<T, Threads, Elems, true> : kernel<T, Threads, Elems, false>;
  return nullptr;  // fewer elements than one 16-byte vector of T
}

/// The instantiation of a configuration listed in cluster_plan.hpp; null for anything else.
template <class T>
Kernel<T> kernel_for(int threads, int elems, bool checked = true) {
  const auto pick = [&](auto threads_constant) -> Kernel<T> {
    constexpr int Th = decltype(threads_constant)::value;
    switch (elems) {
      case 4: return instance<T, Th, 4>(checked);
      case 8: return instance<T, Th, 8>(checked);
      case 16: return instance<T, Th, 16>(checked);
      case 32: return instance<T, Th, 32>(checked);
      default: return nullptr;
    }
  };
  if (threads == 256) return pick(std::integral_constant<int, 256>{});
  if (threads == 512) return pick(std::integral_constant<int, 512>{});
  return nullptr;
}

inline Status current_cluster_limits(ClusterLimits* limits) {
  int device = 0;
  RSS_TRY(current_device(&device));
  int sms = 0, cluster_launch = 0;
  RSS_TRY(from_cuda(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device)));
  RSS_TRY(from_cuda(cudaDeviceGetAttribute(&cluster_launch, cudaDevAttrClusterLaunch, device)));
  *limits = {sms, cluster_launch != 0 ? launched_cluster_size : 0};
  return Status::success;
}

/// Allows a non-portable cluster size when needed, and asks the driver whether one cluster fits.
template <class T>
Status admit_cluster(Kernel<T> kernel, const ClusterConfig& c) noexcept {
  if (c.cluster_size > 8) {
    RSS_TRY(from_cuda(cudaFuncSetAttribute(kernel, cudaFuncAttributeNonPortableClusterSizeAllowed, 1)));
  }
  cudaLaunchConfig_t config{};
  config.gridDim = dim3(static_cast<unsigned>(c.cluster_size));
  config.blockDim = dim3(static_cast<unsigned>(c.threads));
  cudaLaunchAttribute attribute{};
  attribute.id = cudaLaunchAttributeClusterDimension;
  attribute.val.clusterDim.x = static_cast<unsigned>(c.cluster_size);
  attribute.val.clusterDim.y = 1;
  attribute.val.clusterDim.z = 1;
  config.attrs = &attribute;
  config.numAttrs = 1;
  int clusters = 0;
  RSS_TRY(from_cuda(cudaOccupancyMaxActiveClusters(&clusters, kernel, &config)));
  return clusters > 0 ? Status::success : Status::not_admissible;
}

/// Occupancy answers (blocks per SM) of a configuration's two instantiations.
struct Occupancy {
  int full = 0;     // the fast path: whole vectors, aligned rows
  int checked = 0;  // bounds and alignment tests
};

/// Plans a shape on the current device and admits its kernels.
template <class T>
Status make_plan(const Layout& layout, const ClusterConfig* preferred, ClusterPlan* plan, Occupancy* occupancy) {
  *occupancy = {};
  ClusterLimits limits;
  RSS_TRY(current_cluster_limits(&limits));
  RSS_TRY(plan_cluster_row(limits, layout.rows, layout.cols, StorageTraits<T>::dtype, preferred, plan));
  if (plan->grid_blocks == 0) return Status::success;
  const ClusterConfig& c = plan->config;
  // Both instantiations are admitted: launch_plan picks one from the pointers' alignment.
  for (const bool checked : {false, true}) {
    const Kernel<T> k = kernel_for<T>(c.threads, c.elems_per_thread, checked);
    if (k == nullptr) return Status::invalid_strategy;
    int& blocks_per_sm = checked ? occupancy->checked : occupancy->full;
    RSS_TRY(from_cuda(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&blocks_per_sm, k, c.threads, 0)));
    if (blocks_per_sm == 0) return Status::not_admissible;
    if (c.cluster_size > 1) RSS_TRY(admit_cluster<T>(k, c));
  }
  return Status::success;
}

/// Issues (or, dry, describes) the launch of a plan.
template <class T>
Status launch_plan(const ClusterPlan& plan, Occupancy occupancy, const T* x, T* y, const Layout& layout,
                   Launcher launcher) {
  if (plan.grid_blocks == 0) return Status::success;
  const ClusterConfig& c = plan.config;
  launcher.cluster_size = static_cast<unsigned>(c.cluster_size);
  constexpr int W = vector_width<T>;
  const bool aligned = (reinterpret_cast<std::uintptr_t>(x) | reinterpret_cast<std::uintptr_t>(y)) % 16 == 0 &&
                       layout.ld_x % W == 0 && layout.ld_y % W == 0;
  const bool checked = !(aligned && layout.cols % W == 0);  // chunk_elems is a multiple of every W
  return launcher(checked ? "cluster_row" : "cluster_row::vectors", kernel_for<T>(c.threads, c.elems_per_thread, checked),
                  static_cast<unsigned>(plan.grid_blocks),
                  static_cast<unsigned>(c.threads), 0, false, checked ? occupancy.checked : occupancy.full, x, y, layout,
                  plan.chunk_elems,
                  c.cluster_size);
}

}  // namespace detail::cluster_row

/// Strategy cluster_row planned once for fixed arguments and run many times. It needs no workspace.
///   rss::ClusterRow<float> op;
///   op.initialize(x, y, rss::Layout::contiguous(rows, cols));   // plans; may take a tuned config
///   op.run(stream);
template <class T>
class ClusterRow {
 public:
  /// Validates and plans on the current device. `preferred` overrides the default configuration when
  /// it fits the row (the bench's pilot mode and the tuning tables use it). On any refusal the object
  /// keeps its previous state.
  Status initialize(const T* x, T* y, const Layout& layout, const ClusterConfig* preferred = nullptr) noexcept {
    RSS_TRY(detail::validate_device_call(x, y, layout, sizeof(T), nullptr, 0, 0));
    ClusterPlan plan;
    detail::cluster_row::Occupancy occupancy;
    if (!layout.empty()) RSS_TRY(detail::cluster_row::make_plan<T>(layout, preferred, &plan, &occupancy));
    x_ = x;
    y_ = y;
    layout_ = layout;
    plan_ = plan;
    occupancy_ = occupancy;
    ready_ = true;
    return Status::success;
  }

  /// Issues the launch on `stream`. Asynchronous; never synchronises.
  Status run(cudaStream_t stream = nullptr) const noexcept {
    if (!ready_) return Status::invalid_strategy;
    return detail::cluster_row::launch_plan(plan_, occupancy_, x_, y_, layout_, detail::Launcher{stream});
  }

  /// The launch run() makes, without making it.
  Status describe(LaunchList* out) const noexcept {
    if (out == nullptr) return Status::null_pointer;
    if (!ready_) return Status::invalid_strategy;
    LaunchList list;
    RSS_TRY(detail::cluster_row::launch_plan(plan_, occupancy_, x_, y_, layout_,
                                             detail::Launcher{nullptr, &list, true}));
    *out = list;
    return Status::success;
  }

  const ClusterPlan& plan() const noexcept { return plan_; }

 private:
  const T* x_ = nullptr;
  T* y_ = nullptr;
  Layout layout_{};
  ClusterPlan plan_{};
  detail::cluster_row::Occupancy occupancy_{};
  bool ready_ = false;
};

/// One-call form of cluster_row: plans and launches.
template <class T>
Status cluster_row(const T* x, T* y, const Layout& layout, cudaStream_t stream = nullptr) noexcept {
  ClusterRow<T> op;
  RSS_TRY(op.initialize(x, y, layout));
  return op.run(stream);
}

}  // namespace rss
