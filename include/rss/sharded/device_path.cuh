#pragma once
// Path nccl_device: one kernel per rank, rows sharded by columns over the ranks of an NCCL
// communicator whose ranks all reach each other by load/store (NCCL's LSA team is the whole
// communicator). On every rank, one thread-block cluster per row keeps the rank's share of the row in
// registers, as cluster_row does on one GPU, so x is read once and y written once:
//   1. block statistics -> cluster statistics (distributed shared memory);
//   2. every block pushes them into its slot of every rank's symmetric window (NVLink stores) and waits
//      for the same block index of every peer: either each 8-byte word carries the row's sequence number
//      and the reader polls its own window (DeviceExchange::flags, no fence), or an LSA barrier
//      (ncclLsaBarrierSession, release/acquire at system scope) follows the stores
//      (DeviceExchange::lsa_barrier); the world's values are combined in rank order;
//   3. the same for the sums of exponentials; then y.
// The combination is in rank order on every rank, so all ranks use the same bits of m, r and the sum.
#include <cooperative_groups.h>
#include <cuda_runtime.h>
#include <nccl.h>
#include <nccl_device.h>

#include <cstdint>
#include <cub/block/block_reduce.cuh>
#include <type_traits>

#include "rss/detail/cuda_status.cuh"
#include "rss/detail/launch.cuh"
#include "rss/storage.cuh"
#include "rss/phases/exp_sum.cuh"
#include "rss/phases/row_stats.cuh"
#include "rss/phases/tile_io.cuh"
#include "rss/sharded/plan.hpp"
#include "rss/detail/occupancy.cuh"
#include "rss/device.cuh"
#include "rss/sync/cluster_reduce.cuh"
#include "rss/types.hpp"

namespace rss::detail::sharded {

inline constexpr int max_cluster_blocks = 8;  // the portable cluster size

template <int Threads>
struct DeviceShared {
  typename cub::BlockReduce<RowStatsPartial, Threads>::TempStorage stats_storage;
  typename cub::BlockReduce<float, Threads>::TempStorage sum_storage;
  RowStatsPartial stats_slots[max_cluster_blocks];
  float sum_slots[max_cluster_blocks];
  RowStatsPartial peer_stats[max_device_world];  // flags: what each rank pushed for this row
  float peer_sums[max_device_world];
};

/// 8-byte words that are single-copy atomic across NVLink: the data and its sequence number arrive
/// together, so a reader that sees the number has the data (no fence on either side).
__device__ __forceinline__ void store_word(std::uint64_t* p, std::uint64_t v) {
  asm volatile("st.relaxed.sys.b64 [%0], %1;" ::"l"(p), "l"(v) : "memory");
}
__device__ __forceinline__ std::uint64_t load_word(const std::uint64_t* p) {
  std::uint64_t v;
  asm volatile("ld.relaxed.sys.b64 %0, [%1];" : "=l"(v) : "l"(p) : "memory");
  return v;
}
__device__ __forceinline__ std::uint64_t tagged(std::uint32_t seq, std::uint32_t data) {
  return (static_cast<std::uint64_t>(seq) << 32) | data;
}
/// Polls until the word carries `seq`; returns its data half.
__device__ __forceinline__ std::uint32_t wait_word(const std::uint64_t* p, std::uint32_t seq) {
  std::uint64_t v = load_word(p);
  while (static_cast<std::uint32_t>(v >> 32) != seq) v = load_word(p);
  return static_cast<std::uint32_t>(v);
}

/// Which bounds and alignment tests a kernel instantiation makes (the cheapest the call allows: every
/// test costs registers, and registers decide how many blocks share an SM).
enum class Fit : int {
  checked,  // any width and alignment: a test per element
  vectors,  // whole 16-byte vectors, 16-byte aligned: a test per vector
  exact,    // every block's part is exactly Threads * Elems elements: no tests
};

/// The cross-rank exchange of one block: its slot [block][rank] in every rank's window, and the LSA
/// barrier it shares with block `blockIdx.x` of every peer.
struct RankExchange {
  ncclWindow_t window;
  std::int64_t stats_offset;  // bytes into the window
  std::int64_t sums_offset;
  std::int64_t flags_offset;
  std::int64_t counters_offset;
  int rank;
  int world;
  DeviceExchange mode;

  __device__ std::size_t slot(std::int64_t region, int source) const {
    return static_cast<std::size_t>(region + (static_cast<std::int64_t>(blockIdx.x) * world + source) * 16);
  }
  __device__ std::size_t flag_slot(int source) const {
    return static_cast<std::size_t>(flags_offset + (static_cast<std::int64_t>(blockIdx.x) * world + source) * 32);
  }

  /// flags: pushes the row's statistics as three tagged words to every rank, then threads 0..world-1
  /// each wait for one rank's words in this rank's window. Returns the rank-ordered combination.
  template <int Threads>
  __device__ RowStatsPartial stats_by_flags(RowStatsPartial mine, std::uint32_t seq, DeviceShared<Threads>& shared) const {
    const int t = static_cast<int>(threadIdx.x);
    if (t == 0) {
      const auto bits = static_cast<std::uint64_t>(__double_as_longlong(mine.sum_sq));
      for (int p = 0; p < world; ++p) {
        auto* w = static_cast<std::uint64_t*>(ncclGetPeerPointer(window, flag_slot(rank), p));
        store_word(w + 0, tagged(seq, __float_as_uint(mine.max)));
        store_word(w + 1, tagged(seq, static_cast<std::uint32_t>(bits)));
        store_word(w + 2, tagged(seq, static_cast<std::uint32_t>(bits >> 32)));
      }
    }
    if (t < world) {
      const auto* w = static_cast<const std::uint64_t*>(ncclGetLocalPointer(window, flag_slot(t)));
      const std::uint32_t max = wait_word(w + 0, seq);
      const std::uint64_t lo = wait_word(w + 1, seq), hi = wait_word(w + 2, seq);
      shared.peer_stats[t] = {__uint_as_float(max), __longlong_as_double(static_cast<long long>(lo | (hi << 32)))};
    }
    __syncthreads();  // peer_stats is written again only after the next row's sum exchange has synchronised
    RowStatsPartial total = shared.peer_stats[0];
    for (int p = 1; p < world; ++p) total = CombineRowStats{}(total, shared.peer_stats[p]);
    return total;
  }

  template <int Threads>
  __device__ float sum_by_flags(float mine, std::uint32_t seq, DeviceShared<Threads>& shared) const {
    const int t = static_cast<int>(threadIdx.x);
    if (t == 0) {
      for (int p = 0; p < world; ++p) {
        auto* w = static_cast<std::uint64_t*>(ncclGetPeerPointer(window, flag_slot(rank), p));
        store_word(w + 3, tagged(seq, __float_as_uint(mine)));
      }
    }
    if (t < world) {
      const auto* w = static_cast<const std::uint64_t*>(ncclGetLocalPointer(window, flag_slot(t)));
      shared.peer_sums[t] = __uint_as_float(wait_word(w + 3, seq));
    }
    __syncthreads();
    float total = shared.peer_sums[0];
    for (int p = 1; p < world; ++p) total += shared.peer_sums[p];
    return total;
  }

  /// Pushes `mine` to every rank (thread 0; the barrier's release orders the NVLink stores before the
  /// peers see its arrival), waits for every peer's push, and returns the rank-ordered combination.
  template <class V, class Op, class Barrier>
  __device__ V all_reduce(V mine, std::int64_t region, Barrier& barrier, Op op) const {
    if (threadIdx.x == 0) {
      for (int p = 0; p < world; ++p) *static_cast<V*>(ncclGetPeerPointer(window, slot(region, rank), p)) = mine;
    }
    barrier.sync(ncclCoopCta(), cuda::memory_order_acq_rel);
    // Read through L2: these lines were written by peers over NVLink since this block last read them.
    const V* local = static_cast<const V*>(ncclGetLocalPointer(window, slot(region, 0)));
    V total = load(local);
    for (int p = 1; p < world; ++p) total = op(total, load(reinterpret_cast<const V*>(reinterpret_cast<const char*>(local) + 16 * p)));
    return total;
  }

  __device__ static RowStatsPartial load(const RowStatsPartial* p) { return {__ldcg(&p->max), __ldcg(&p->sum_sq)}; }
  __device__ static float load(const float* p) { return __ldcg(p); }
};

/// This block's part of one row: x_row[0, n) in, y_row[0, n) out, `global_cols` the whole row's length.
/// Slot reuse across rows is safe without double buffering. lsa_barrier: a block writes a region again
/// only after the next barrier, which every peer passes only after it has read that region. flags: a
/// block pushes row k+1's statistics only after it has every peer's row-k sum, which each peer pushed
/// after reading row k's statistics (and symmetrically for the sums), so no word is overwritten unread.
template <Fit F, class T, int Threads, int Elems, class Barrier>
__device__ __forceinline__ void process_row(const T* x_row, T* y_row, std::int64_t n, std::int64_t global_cols,
                                            int cluster_size, ClusterStart& start, DeviceShared<Threads>& shared,
                                            const RankExchange& exchange, Barrier& barrier, std::uint32_t seq) {
  using Traits = StorageTraits<T>;
  constexpr int W = vector_width<T>;
  constexpr int V = Elems / W;
  const int t = static_cast<int>(threadIdx.x);
  const auto index = [&](int u, int e) { return (u * Threads + t) * W + e; };
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
  stats = cluster_all_reduce(stats, shared.stats_slots, cluster_size, start, CombineRowStats{});
  const RowStatsPartial global = exchange.mode == DeviceExchange::flags
                                     ? exchange.stats_by_flags(stats, seq, shared)
                                     : exchange.all_reduce(stats, exchange.stats_offset, barrier, CombineRowStats{});
  const RowScale scale = make_row_scale(global, global_cols);

  // fp32 keeps the exponentials in the registers that held x; 16-bit types recompute them.
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
  sum = cluster_all_reduce(sum, shared.sum_slots, cluster_size, start, SumFloat{});
  const float inv_sum = 1.0f / (exchange.mode == DeviceExchange::flags
                                    ? exchange.sum_by_flags(sum, seq, shared)
                                    : exchange.all_reduce(sum, exchange.sums_offset, barrier, SumFloat{}));
  const auto out = [&](int u, int e) {
    if constexpr (keep_exps) return Traits::from_float(exps[u][e] * inv_sum);
    else return Traits::from_float(scale.exp_of(Traits::to_float(raw[u].v[e])) * inv_sum);
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

/// One row per cluster, rows looped over; block b uses LSA barrier b (the plan's grid is the same on
/// every rank and co-resident on every GPU). `l` is this rank's shard: l.cols local columns.
template <class T, int Threads, int Elems, Fit F>
__global__ void __launch_bounds__(Threads, 2048 / Threads / 2)  // at most 64 registers: 2 blocks of 512 per SM
    device_kernel(const T* x, T* y, Layout l, std::int64_t global_cols, std::int64_t chunk, int cluster_size,
                  ncclDevComm comm, RankExchange exchange) {
#if RSS_CLUSTER_DEVICE_CODE  // rss/sync/cluster_reduce.cuh: clusters from sm_90; the host admits no other code
  __shared__ DeviceShared<Threads> shared;
  namespace cg = cooperative_groups;
  const int crank = cluster_size > 1 ? static_cast<int>(cg::this_cluster().block_rank()) : 0;
  const std::int64_t begin = crank * chunk;
  const std::int64_t n = max(min(chunk, l.cols - begin), std::int64_t{0});
  ClusterStart start(cluster_size);
  ncclLsaBarrierSession<ncclCoopCta> barrier(ncclCoopCta(), comm, ncclTeamTagLsa(), blockIdx.x);
  // flags: one sequence number per row, continuing from the last launch (every rank's block b handles
  // the same rows, so the numbers agree); 0 is the window's initial content, never a row's number.
  auto* counter = static_cast<std::uint64_t*>(ncclGetLocalPointer(exchange.window, static_cast<std::size_t>(
                                                  exchange.counters_offset + 8 * static_cast<std::int64_t>(blockIdx.x))));
  std::uint32_t seq = static_cast<std::uint32_t>(__ldcg(reinterpret_cast<const unsigned long long*>(counter)));
  for (std::int64_t row = blockIdx.x / cluster_size; row < l.rows; row += gridDim.x / cluster_size) {
    if (++seq == 0) seq = 1;
    process_row<F, T, Threads, Elems>(x + row * l.ld_x + begin, y + row * l.ld_y + begin, n, global_cols,
                                      cluster_size, start, shared, exchange, barrier, seq);
  }
  __syncthreads();  // every thread has read `counter` before it changes
  if (threadIdx.x == 0) *counter = seq;
#else
  __trap();
#endif
}

template <class T>
using DeviceKernel = void (*)(const T*, T*, Layout, std::int64_t, std::int64_t, int, ncclDevComm, RankExchange);

template <class T, int Threads, int Elems>
DeviceKernel<T> device_instance(Fit fit) {
  if constexpr (Elems % vector_width<T> == 0) {
    switch (fit) {
      case Fit::checked: return device_kernel<T, Threads, Elems, Fit::checked>;
      case Fit::vectors: return device_kernel<T, Threads, Elems, Fit::vectors>;
      case Fit::exact: return device_kernel<T, Threads, Elems, Fit::exact>;
    }
  }
  return nullptr;
}

/// The instantiation of a configuration plan_device_config() can return; null for anything else.
template <class T>
DeviceKernel<T> device_kernel_for(const ShardedDeviceConfig& c, Fit fit) {
  const auto pick = [&](auto threads_constant) -> DeviceKernel<T> {
    constexpr int Th = decltype(threads_constant)::value;
    switch (c.elems_per_thread) {
      case 8: return device_instance<T, Th, 8>(fit);
      case 16: return device_instance<T, Th, 16>(fit);
      case 32: return device_instance<T, Th, 32>(fit);
      default: return nullptr;
    }
  };
  if (c.threads == 256) return pick(std::integral_constant<int, 256>{});
  if (c.threads == 512) return pick(std::integral_constant<int, 512>{});
  return nullptr;
}

/// The cheapest instantiation this rank's pointers and shard allow. Parts start at multiples of 8
/// elements, so aligned rows of whole vectors stay aligned in every block.
template <class T>
Fit device_fit(const ShardedDevicePlan& plan, const T* x, const T* y, const Layout& l) {
  constexpr int W = vector_width<T>;
  const bool aligned = (reinterpret_cast<std::uintptr_t>(x) | reinterpret_cast<std::uintptr_t>(y)) % 16 == 0 &&
                       l.ld_x % W == 0 && l.ld_y % W == 0;
  if (!aligned || l.cols % W != 0) return Fit::checked;
  const ShardedDeviceConfig& c = plan.config;
  const std::int64_t share = static_cast<std::int64_t>(c.threads) * c.elems_per_thread;
  return plan.chunk_elems == share && l.cols == share * c.cluster_size ? Fit::exact : Fit::vectors;
}

/// Clusters of `config` co-resident on the current device (0: none, or a build without sm_90 code for the
/// kernel), for this rank's kernel.
template <class T>
Status resident_clusters(const ShardedDeviceConfig& c, Fit fit, std::int64_t* out) noexcept {
  const DeviceKernel<T> kernel = device_kernel_for<T>(c, fit);
  if (kernel == nullptr) return Status::invalid_strategy;
  DeviceInfo d;
  RSS_TRY(current_device_info(&d));
  KernelFacts facts;
  RSS_TRY(kernel_facts(kernel, d, &facts));
  if (facts.binary_version < 90) return Status::unsupported_device;
  int clusters = 0;
  RSS_TRY(active_clusters(kernel, d, c.threads, c.cluster_size, 0, &clusters));
  *out = clusters;
  return Status::success;
}

/// Launches (or, dry, describes) the device path's one kernel: `kernel`, the instantiation the plan was
/// admitted with (device_kernel_for at planning time, kept: a pointer taken again here could name another
/// translation unit's copy of the template kernel, whose attributes were never queried or set).
template <class T>
Status launch_device_path(const ShardedDevicePlan& plan, DeviceKernel<T> kernel, const T* x, T* y, const Layout& l,
                          std::int64_t global_cols, const ncclDevComm& comm, const RankExchange& exchange,
                          Launcher launcher) {
  if (plan.grid_blocks == 0) return Status::success;
  if (kernel == nullptr) return Status::invalid_strategy;
  const ShardedDeviceConfig& c = plan.config;
  launcher.cluster_size = static_cast<unsigned>(c.cluster_size);
  return launcher("sharded::nccl_device", kernel, static_cast<unsigned>(plan.grid_blocks),
                  static_cast<unsigned>(c.threads), 0, false, 0, x, y, l, global_cols, plan.chunk_elems,
                  c.cluster_size, comm, exchange);
}

}  // namespace rss::detail::sharded
