#pragma once
// Backward strategy `cluster_row`: one thread-block cluster per row, one ordinary launch. Each block
// loads its share of x, y and dy into registers, adds its partial sums (sum x^2, c, p, q), combines them
// with the cluster's other blocks through distributed shared memory (one cluster barrier per row), and
// writes dx from the registers: x, y and dy are read once and dx written once (4 N of traffic).
// Thread-block clusters need sm_90; the host refuses devices without them (unsupported_device).
#include <cooperative_groups.h>
#include <cuda_runtime.h>

#include <cstdint>
#include <cub/block/block_reduce.cuh>
#include <type_traits>

#include "rss/backward/cluster_plan.hpp"
#include "rss/backward/layout.hpp"
#include "rss/backward/row_sums.cuh"
#include "rss/detail/launch.cuh"
#include "rss/device.cuh"
#include "rss/storage.cuh"
#include "rss/phases/tile_io.cuh"
#include "rss/sync/cluster_reduce.cuh"

namespace rss::detail::backward::cluster_row {

template <int Threads>
struct SharedState {
  typename cub::BlockReduce<RowSums, Threads>::TempStorage reduce;
  // Two sets of slots, alternating by row: a block pushes row i + 1's sums while a slower peer may still
  // read row i's; by row i + 2 every peer has passed row i + 1's barrier, so it has read row i's slots.
  RowSums slots[2][backward_max_cluster_size];
};

/// How much of a row's bounds and alignment a kernel must test (the host picks the cheapest the call allows).
enum class Fit {
  checked,  // any width and alignment: tests per element, scalar accesses where a row is misaligned
  vectors,  // all four matrices 16-byte aligned with whole vectors per row: one test per vector
};

/// One row's share: x, y (or, when Saved, the row's statistics to recompute y from x) and dy in, dx out.
template <Fit F, bool Saved, class T, int Threads, int Elems>
__device__ __forceinline__ void process_row(const T* x, const T* y, const RowStatistics* stats, const T* g, T* dx,
                                            std::int64_t n, std::int64_t cols, int cluster_size, ClusterStart& start,
                                            SharedState<Threads>& shared, RowSums* slots) {
  using Traits = StorageTraits<T>;
  constexpr int W = vector_width<T>;
  constexpr int V = Elems / W;
  const int t = static_cast<int>(threadIdx.x);
  const auto index = [&](int u, int e) { return (u * Threads + t) * W + e; };
  const int held = F == Fit::vectors ? static_cast<int>((n / W - t + Threads - 1) / Threads) : V;
  const auto vector_valid = [&](int u) {
    if constexpr (F == Fit::vectors) return u < held;
    else return index(u, W - 1) < n;
  };
  const auto valid = [&](int u, int e) {
    if constexpr (F == Fit::checked) return index(u, e) < n;
    else return vector_valid(u);
  };
  const auto aligned = [](const void* p) { return reinterpret_cast<std::uintptr_t>(p) % 16 == 0; };
  const auto load = [&](const T* row, bool vectors, Vector<T>* out) {
#pragma unroll
    for (int u = 0; u < V; ++u) {
      if (vectors && vector_valid(u)) {
        out[u] = load_vector(row + index(u, 0));
      } else {
#pragma unroll
        for (int e = 0; e < W; ++e) out[u].v[e] = valid(u, e) ? row[index(u, e)] : Traits::from_float(0.0f);
      }
    }
  };

  // All loads first: 3 V (Saved: 2 V) of them in flight per thread.
  Vector<T> xv[V], yv[Saved ? 1 : V], gv[V];
  RowStatistics saved{};
  if constexpr (Saved) saved = *stats;
  load(x, F != Fit::checked || aligned(x), xv);
  if constexpr (!Saved) load(y, F != Fit::checked || aligned(y), yv);
  load(g, F != Fit::checked || aligned(g), gv);
  const SavedRow recompute = saved_row(saved);
  const auto y_at = [&](int u, int e) {
    if constexpr (Saved) return recompute.y(Traits::to_float(xv[u].v[e]));
    else return Traits::to_float(yv[u].v[e]);
  };

  ThreadSums acc;
#pragma unroll
  for (int u = 0; u < V; ++u) {
#pragma unroll
    for (int e = 0; e < W; ++e) {
      if (!valid(u, e)) continue;
      if constexpr (Saved) acc.add_saved(Traits::to_float(xv[u].v[e]), y_at(u, e), Traits::to_float(gv[u].v[e]));
      else acc.add(Traits::to_float(xv[u].v[e]), y_at(u, e), Traits::to_float(gv[u].v[e]));
    }
  }
  const RowSums block = cub::BlockReduce<RowSums, Threads>(shared.reduce).Reduce(acc.total(), CombineRowSums{});
  const RowSums row = cluster_all_reduce(block, slots, cluster_size, start, CombineRowSums{});
  const RowGradient grad = Saved ? make_row_gradient(row, static_cast<double>(saved.inv_rms), cols)
                                 : make_row_gradient(row, cols);

  const bool dx_vectors = F != Fit::checked || aligned(dx);
#pragma unroll
  for (int u = 0; u < V; ++u) {
    Vector<T> out;
#pragma unroll
    for (int e = 0; e < W; ++e)
      out.v[e] = Traits::from_float(grad.dx(Traits::to_float(xv[u].v[e]), y_at(u, e), Traits::to_float(gv[u].v[e])));
    if (dx_vectors && vector_valid(u)) {
      store_vector(dx + index(u, 0), out);  // in place (dx == dy): this thread loaded this vector above
    } else {
#pragma unroll
      for (int e = 0; e < W; ++e)
        if (valid(u, e)) dx[index(u, e)] = out.v[e];
    }
  }
}

/// One row per cluster, looping when the grid has fewer clusters than rows. Saved: y is null and the rows'
/// statistics recompute it.
template <class T, int Threads, int Elems, Fit F, bool Saved>
__global__ void __launch_bounds__(Threads) kernel(const T* x, const T* y, const RowStatistics* stats, const T* dy, T* dx,
                                                  BackwardLayout l, std::int64_t chunk, int cluster_size) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ < 900
  __trap();  // clusters need sm_90; the host never launches this kernel elsewhere
#else
  __shared__ SharedState<Threads> shared;
  namespace cg = cooperative_groups;
  const int rank = cluster_size > 1 ? static_cast<int>(cg::this_cluster().block_rank()) : 0;
  const std::int64_t begin = rank * chunk;
  const std::int64_t n = max(min(chunk, l.cols - begin), std::int64_t{0});
  ClusterStart start(cluster_size);
  int parity = 0;
  for (std::int64_t row = blockIdx.x / cluster_size; row < l.rows; row += gridDim.x / cluster_size) {
    process_row<F, Saved, T, Threads, Elems>(x + row * l.ld_x + begin, Saved ? nullptr : y + row * l.ld_y + begin,
                                             Saved ? stats + row : nullptr, dy + row * l.ld_dy + begin,
                                             dx + row * l.ld_dx + begin, n, l.cols, cluster_size, start, shared,
                                             shared.slots[parity]);
    parity ^= 1;
  }
  if (start.pending) start.wait();  // a block without rows still completes the start barrier it arrived on
#endif
}

template <class T>
using Kernel = void (*)(const T*, const T*, const RowStatistics*, const T*, T*, BackwardLayout, std::int64_t, int);

template <class T, int Threads, int Elems>
Kernel<T> instance(Fit fit, bool saved) {
  if constexpr (Elems % vector_width<T> == 0) {
    if (saved) return fit == Fit::vectors ? kernel<T, Threads, Elems, Fit::vectors, true> : kernel<T, Threads, Elems, Fit::checked, true>;
    return fit == Fit::vectors ? kernel<T, Threads, Elems, Fit::vectors, false> : kernel<T, Threads, Elems, Fit::checked, false>;
  }
  return nullptr;  // fewer elements than one 16-byte vector of T
}

/// The instantiation of a configuration listed in cluster_plan.hpp; null for anything else.
template <class T>
Kernel<T> kernel_for(int threads, int elems, Fit fit, bool saved) {
  const auto pick = [&](auto threads_constant) -> Kernel<T> {
    constexpr int Th = decltype(threads_constant)::value;
    switch (elems) {
      case 4: return instance<T, Th, 4>(fit, saved);
      case 8: return instance<T, Th, 8>(fit, saved);
      case 16: return instance<T, Th, 16>(fit, saved);
      case 32: return instance<T, Th, 32>(fit, saved);
      default: return nullptr;
    }
  };
  if (threads == 256) return pick(std::integral_constant<int, 256>{});
  if (threads == 512) return pick(std::integral_constant<int, 512>{});
  return nullptr;
}

/// vectors when all four matrices are 16-byte aligned with rows of whole vectors (every block's share
/// starts at a multiple of 8 elements, so it stays aligned); checked otherwise.
template <class T>
Fit fit_of(const T* x, const T* y, const T* dy, const T* dx, const BackwardLayout& l) {
  constexpr int W = vector_width<T>;
  const auto bits = reinterpret_cast<std::uintptr_t>(x) | reinterpret_cast<std::uintptr_t>(y) |
                    reinterpret_cast<std::uintptr_t>(dy) | reinterpret_cast<std::uintptr_t>(dx);
  const bool aligned = bits % 16 == 0 && l.ld_x % W == 0 && l.ld_y % W == 0 && l.ld_dy % W == 0 && l.ld_dx % W == 0;
  return aligned && l.cols % W == 0 ? Fit::vectors : Fit::checked;
}

inline const char* kernel_name(Fit fit, bool saved) {
  if (saved) return fit == Fit::vectors ? "backward::cluster_row::saved::vectors" : "backward::cluster_row::saved";
  return fit == Fit::vectors ? "backward::cluster_row::vectors" : "backward::cluster_row";
}

/// Largest cluster the current device launches for us: 0 without cluster support (before sm_90).
inline Status current_max_cluster_size(int* out) {
  DeviceInfo d;
  RSS_TRY(current_device_info(&d));
  *out = d.max_cluster_size < backward_max_cluster_size ? d.max_cluster_size : backward_max_cluster_size;
  return Status::success;
}

template <class T>
struct Plan {
  BackwardClusterPlan geometry{};
  Fit fit = Fit::checked;
  bool saved = false;  // y recomputed from saved row statistics
  int blocks_per_sm = 0;
  // The instantiation admitted, launched as is (a pointer taken again at launch could name another
  // translation unit's copy of the template kernel: docs/architecture.md).
  Kernel<T> kernel = nullptr;
};

/// Plans a call on the current device and asks the driver whether its kernel and one cluster fit.
/// y null: the call recomputes y from saved row statistics.
template <class T>
Status make_plan(const T* x, const T* y, const T* dy, const T* dx, const BackwardLayout& l,
                 const BackwardClusterConfig* preferred, Plan<T>* out) {
  int max_cluster = 0;
  RSS_TRY(current_max_cluster_size(&max_cluster));
  Plan<T> p;
  RSS_TRY(plan_backward_cluster_row(max_cluster, l.rows, l.cols, StorageTraits<T>::dtype, preferred, &p.geometry,
                                    y == nullptr));
  if (p.geometry.grid_blocks > 0) {
    const BackwardClusterConfig& c = p.geometry.config;
    p.saved = y == nullptr;
    p.fit = fit_of(x, p.saved ? x : y, dy, dx, l);
    const Kernel<T> k = kernel_for<T>(c.threads, c.elems_per_thread, p.fit, p.saved);
    if (k == nullptr) return Status::invalid_strategy;
    p.kernel = k;
    RSS_TRY(from_cuda(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&p.blocks_per_sm, k, c.threads, 0)));
    if (p.blocks_per_sm == 0) return Status::not_admissible;
    if (c.cluster_size > 1) {
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
      RSS_TRY(from_cuda(cudaOccupancyMaxActiveClusters(&clusters, k, &config)));
      if (clusters == 0) return Status::not_admissible;
    }
  }
  *out = p;
  return Status::success;
}

/// Issues (or, dry, describes) the launch of a plan made for the same pointers.
template <class T>
Status launch(const Plan<T>& plan, const T* x, const T* y, const RowStatistics* stats, const T* dy, T* dx,
              const BackwardLayout& l, Launcher launcher) {
  if (plan.geometry.grid_blocks == 0) return Status::success;
  const BackwardClusterConfig& c = plan.geometry.config;
  launcher.cluster_size = static_cast<unsigned>(c.cluster_size);
  return launcher(kernel_name(plan.fit, plan.saved), plan.kernel,
                  static_cast<unsigned>(plan.geometry.grid_blocks), static_cast<unsigned>(c.threads), 0, false,
                  plan.blocks_per_sm, x, y, stats, dy, dx, l, plan.geometry.chunk_elems, c.cluster_size);
}

}  // namespace rss::detail::backward::cluster_row
