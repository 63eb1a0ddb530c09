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

/// The cluster sizes the library launches: up to the portable 8. Hopper's non-portable 16-block
/// clusters ran in the single-file bench but were refused at launch (cudaErrorInvalidClusterSize,
/// "cluster misconfiguration") in the multi-file test binary although the attribute was set and
/// cudaOccupancyMaxActiveClusters admitted them; until that is understood they are not used.
inline constexpr int launched_cluster_size = 8;

template <class T, int Threads>
struct SharedState {
  typename cub::BlockReduce<RowStatsPartial, Threads>::TempStorage stats_storage;
  typename cub::BlockReduce<float, Threads>::TempStorage sum_storage;
  RowStatsPartial stats_slots[launched_cluster_size];  // one per block of the cluster
  float sum_slots[launched_cluster_size];
};

/// How much of a row's bounds and alignment a kernel instantiation must test. The host picks the
/// cheapest one the call allows (fit_of): every test costs registers, and registers decide how many
/// blocks share an SM.
enum class Fit {
  checked,  // any width, any alignment: tests per element
  vectors,  // rows of whole 16-byte vectors, 16-byte aligned: one test per vector (a thread's count)
  exact,    // every block's share is exactly threads * elems_per_thread elements: no tests at all
};

/// This block's share of one row: x_row[0, n) in, y_row[0, n) out, with the tests `F` requires.
template <Fit F, class T, int Threads, int ElemsPerThread>
__device__ __forceinline__ void process_row(const T* x_row, T* y_row, std::int64_t n, std::int64_t cols,
                                            int cluster_size, ClusterStart& start, SharedState<T, Threads>& shared) {
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
}

/// One row per cluster (looping when the grid has fewer clusters than rows). See cluster_plan.hpp for
/// which elements block `rank` and thread t hold. Two cluster barriers per row: one publishes the
/// blocks' statistics, one their sums of exponentials.
template <class T, int Threads, int ElemsPerThread, Fit F>
__global__ void __launch_bounds__(Threads) kernel(const T* x, T* y, Layout l, std::int64_t chunk, int cluster_size) {
  __shared__ SharedState<T, Threads> shared;
  namespace cg = cooperative_groups;
  const int rank = cluster_size > 1 ? static_cast<int>(cg::this_cluster().block_rank()) : 0;
  const std::int64_t begin = rank * chunk;
  const std::int64_t n = max(min(chunk, l.cols - begin), std::int64_t{0});
  ClusterStart start(cluster_size);
  for (std::int64_t row = blockIdx.x / cluster_size; row < l.rows; row += gridDim.x / cluster_size) {
    process_row<F, T, Threads, ElemsPerThread>(x + row * l.ld_x + begin, y + row * l.ld_y + begin, n, l.cols,
                                               cluster_size, start, shared);
  }
}

template <class T>
using Kernel = void (*)(const T*, T*, Layout, std::int64_t, int);

template <class T, int Threads, int Elems>
constexpr Kernel<T> instance(Fit fit) {
  if constexpr (Elems % vector_width<T> == 0) {
    switch (fit) {
      case Fit::checked: return kernel<T, Threads, Elems, Fit::checked>;
      case Fit::vectors: return kernel<T, Threads, Elems, Fit::vectors>;
      case Fit::exact: return kernel<T, Threads, Elems, Fit::exact>;
    }
  }
  return nullptr;  // fewer elements than one 16-byte vector of T
}

/// The instantiation of a configuration listed in cluster_plan.hpp; null for anything else.
template <class T>
Kernel<T> kernel_for(int threads, int elems, Fit fit) {
  const auto pick = [&](auto threads_constant) -> Kernel<T> {
    constexpr int Th = decltype(threads_constant)::value;
    switch (elems) {
      case 4: return instance<T, Th, 4>(fit);
      case 8: return instance<T, Th, 8>(fit);
      case 16: return instance<T, Th, 16>(fit);
      case 32: return instance<T, Th, 32>(fit);
      default: return nullptr;
    }
  };
  if (threads == 256) return pick(std::integral_constant<int, 256>{});
  if (threads == 512) return pick(std::integral_constant<int, 512>{});
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

inline const char* kernel_name(Fit fit) {
  switch (fit) {
    case Fit::exact: return "cluster_row::exact";
    case Fit::vectors: return "cluster_row::vectors";
    default: return "cluster_row";
  }
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

/// Asks the driver whether one cluster of the configuration fits on the device.
template <class T>
Status admit_cluster(Kernel<T> kernel, const ClusterConfig& c) noexcept {
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

/// The kernel a plan launches for one call's pointers, and its occupancy.
struct Admitted {
  Fit fit = Fit::checked;
  int blocks_per_sm = 0;
};

/// Plans a shape on the current device for these pointers and admits the kernel that runs it.
template <class T>
Status make_plan(const T* x, const T* y, const Layout& layout, const ClusterConfig* preferred, ClusterPlan* plan,
                 Admitted* admitted) {
  ClusterLimits limits;
  RSS_TRY(current_cluster_limits(&limits));
  ClusterPlan p;
  RSS_TRY(plan_cluster_row(limits, layout.rows, layout.cols, StorageTraits<T>::dtype, preferred, &p));
  Admitted a;
  if (p.grid_blocks > 0) {
    const ClusterConfig& c = p.config;
    a.fit = fit_of(p, x, y, layout);
    const Kernel<T> k = kernel_for<T>(c.threads, c.elems_per_thread, a.fit);
    if (k == nullptr) return Status::invalid_strategy;
    RSS_TRY(from_cuda(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&a.blocks_per_sm, k, c.threads, 0)));
    if (a.blocks_per_sm == 0) return Status::not_admissible;
    if (c.cluster_size > 1) RSS_TRY(admit_cluster<T>(k, c));
  }
  *plan = p;
  *admitted = a;
  return Status::success;
}

/// Issues (or, dry, describes) the launch of a plan made for the same pointers.
template <class T>
Status launch_plan(const ClusterPlan& plan, const Admitted& admitted, const T* x, T* y, const Layout& layout,
                   Launcher launcher) {
  if (plan.grid_blocks == 0) return Status::success;
  const ClusterConfig& c = plan.config;
  launcher.cluster_size = static_cast<unsigned>(c.cluster_size);
  return launcher(kernel_name(admitted.fit), kernel_for<T>(c.threads, c.elems_per_thread, admitted.fit),
                  static_cast<unsigned>(plan.grid_blocks), static_cast<unsigned>(c.threads), 0, false,
                  admitted.blocks_per_sm, x, y, layout, plan.chunk_elems, c.cluster_size);
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
    detail::cluster_row::Admitted admitted;
    if (!layout.empty()) RSS_TRY(detail::cluster_row::make_plan<T>(x, y, layout, preferred, &plan, &admitted));
    x_ = x;
    y_ = y;
    layout_ = layout;
    plan_ = plan;
    admitted_ = admitted;
    ready_ = true;
    return Status::success;
  }

  /// Issues the launch on `stream`. Asynchronous; never synchronises.
  Status run(cudaStream_t stream = nullptr) const noexcept {
    if (!ready_) return Status::invalid_strategy;
    return detail::cluster_row::launch_plan(plan_, admitted_, x_, y_, layout_, detail::Launcher{stream});
  }

  /// The launch run() makes, without making it.
  Status describe(LaunchList* out) const noexcept {
    if (out == nullptr) return Status::null_pointer;
    if (!ready_) return Status::invalid_strategy;
    LaunchList list;
    RSS_TRY(detail::cluster_row::launch_plan(plan_, admitted_, x_, y_, layout_,
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
  detail::cluster_row::Admitted admitted_{};
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
