#pragma once
// The row agent: the one kernel body for every kernel that keeps a row, or a rank's share of it, on chip
// between reading it and writing the result. It owns the split of rows over clusters and of a row over
// the cluster's blocks (rss/planner/row_split.hpp), the residence of the share (registers or shared
// memory as stored), the loop over rows and the kernel table; what happens to a row is the row program's,
// how partials travel the combine's:
//
//   Program (a struct)                        Scope (a struct)
//     using Element;         the storage type   struct Params;              host-side state of the combine
//     using Rounds;          values reduced     template <int Threads, class Rounds> class Combine;
//     struct Params;         pointers, strides        begin_row(), all_reduce<I>(v, op[, finish]),
//                                                     end_row(), finish()
//     template <int Threads, int Elems, Fit>   template <int Threads>
//     min_blocks_per_sm;     register budget    min_blocks_per_sm;          register budget (0: the program's)
//     template <int Threads, Fit>
//     tile_min_blocks_per_sm;  the tile kernels' (1: only the block's own bound)
//     held_row(p, row)       the array a tile residence loads (the tile kernel only)
//     host_row_stride        the register kernel's row stride from the host (see the loop)
//     row(p, row, begin, share, combine, leader)
//
// Instantiations: the forward (rss/agent/forward_row.cuh) within a cluster is strategy cluster_row; the
// backward (rss/backward/backward_row.cuh) within a cluster is the backward's cluster_row; the forward
// across ranks (AcrossRanks, rss/sharded/device_path.cuh) is the sharded nccl_device kernel.
#include <cooperative_groups.h>
#include <cuda_runtime.h>

#include <cstdint>
#include <type_traits>

#include "rss/agent/register_share.cuh"
#include "rss/agent/tile_share.cuh"
#include "rss/detail/occupancy.cuh"
#include "rss/planner/row_split.hpp"
#include "rss/sync/bulk_copy.cuh"
#include "rss/sync/cluster_reduce.cuh"

namespace rss::detail {

/// The geometry a cluster kernel runs with (a ClusterPlan's, as kernel arguments).
struct RowSplit {
  std::int64_t rows;
  std::int64_t cols;   // elements split over a cluster
  std::int64_t chunk;  // elements per block, a multiple of 8
  int cluster_size;
  std::int64_t clusters;  // clusters in the launched grid (the plan's grid_blocks / cluster_size)

  static RowSplit of(const ClusterPlan& p) {
    return {p.rows, p.cols, p.chunk_elems, p.config.cluster_size, p.grid_blocks / p.config.cluster_size};
  }
};

/// This block's rank in its cluster and its share [begin, begin + n) of every row.
struct BlockShare {
  int rank;
  std::int64_t begin;
  std::int64_t n;

  __device__ explicit BlockShare(const RowSplit& s)
      : rank(rank_in_cluster(s.cluster_size)), begin(rank * s.chunk), n(max(min(s.chunk, s.cols - begin), std::int64_t{0})) {}

  __device__ static int rank_in_cluster(int cluster_size) {
#if RSS_CLUSTER_DEVICE_CODE  // clusters exist from sm_90; other targets never launch these kernels
    return cluster_size > 1 ? static_cast<int>(cooperative_groups::this_cluster().block_rank()) : 0;
#else
    (void)cluster_size;
    return 0;
#endif
  }
};

/// The share in registers: one cluster per row (looping when the grid has fewer clusters than rows).
/// The register budget of a register kernel (blocks of Threads that must share an SM): the scope's when it
/// asks for one (its combine's registers are its own to count: the rank combine's flags and barrier need
/// more than the program's budget leaves), else the program's.
template <class Program, class Scope, int Threads, int Elems, Fit F>
inline constexpr int min_blocks_per_sm = Scope::template min_blocks_per_sm<Threads> > 0
                                             ? Scope::template min_blocks_per_sm<Threads>
                                             : Program::template min_blocks_per_sm<Threads, Elems, F>;

template <class Program, class Scope, int Threads, int Elems, Fit F>
__global__ void __launch_bounds__(Threads, (min_blocks_per_sm<Program, Scope, Threads, Elems, F>))
    register_row_kernel(typename Program::Params p, typename Scope::Params scope, RowSplit s) {
#if RSS_CLUSTER_DEVICE_CODE  // rss/sync/cluster_reduce.cuh: sm_90 and later
  using Combine = typename Scope::template Combine<Threads, typename Program::Rounds>;
  __shared__ typename Combine::Storage storage;
  const BlockShare block(s);
  Combine combine(scope, s.cluster_size, storage);
  const RegisterShare<typename Program::Element, Threads, Elems, F> share(block.n);
  const bool leader = block.rank == 0 && threadIdx.x == 0;
  // The loop's stride, the clusters in the grid, is where ptxas's register allocation tips (bench/NOTES.md, "The
  // backward's 16-bit registers"): written gridDim.x / cluster_size, nvcc widens it to a 64-bit division called
  // every row, whose clobbers cost the backward's 16-bit 32-element kernels a spill at 64 registers and its
  // 16384 x 8192 8% of its time; taken from the host in a register (the empty asm keeps it one), the forward's
  // fp32 32-element kernels spill 4 bytes instead. So the program chooses: host_row_stride.
  const auto each_row = [&](std::int64_t row) {
    combine.begin_row();
    Program::row(p, row, block.begin, share, combine, leader);
    combine.end_row();
  };
  if constexpr (Program::host_row_stride) {
    std::int64_t stride = s.clusters;
    asm("" : "+l"(stride));
    for (std::int64_t row = blockIdx.x / s.cluster_size; row < s.rows; row += stride) each_row(row);
  } else {
    for (std::int64_t row = blockIdx.x / s.cluster_size; row < s.rows; row += gridDim.x / s.cluster_size) each_row(row);
  }
  combine.finish();
#else
  __trap();  // never launched: the host admits these kernels only on sm_90 machine code
#endif
}

/// The share in shared memory, as stored (the launch's dynamic shared memory: Tiles tiles of chunk
/// elements). Whole aligned vectors are loaded by the copy engine (one mbarrier per tile); anything else
/// element by element, by every thread, when its turn comes. With two tiles the copy engine loads the
/// block's next row into one tile while the block works on the other, so loads stay in flight through the
/// reductions and the stores; the host then launches only the clusters that stay resident.
/// The register budget is the program's (Program::tile_min_blocks_per_sm; 1: only the block's own bound), through a
/// variable template: nvcc rejects the dependent member template inside __launch_bounds__.
template <class Program, int Threads, Fit F>
inline constexpr int tile_min_blocks_per_sm = Program::template tile_min_blocks_per_sm<Threads, F>;

template <class Program, class Scope, int Threads, Fit F, int Tiles>
__global__ void __launch_bounds__(Threads, (tile_min_blocks_per_sm<Program, Threads, F>))
    tile_row_kernel(typename Program::Params p, typename Scope::Params scope, RowSplit s) {
  static_assert(Tiles == 1 || Tiles == 2);
#if RSS_CLUSTER_DEVICE_CODE
  using T = typename Program::Element;
  using Combine = typename Scope::template Combine<Threads, typename Program::Rounds>;
  extern __shared__ float4 row_agent_tiles[];  // float4: the bulk copy wants 16-byte alignment
  __shared__ typename Combine::Storage storage;
  __shared__ std::uint64_t tile_loaded[Tiles];
  const BlockShare block(s);
  const int n = static_cast<int>(block.n);  // a share fits shared memory
  const std::int64_t stride = gridDim.x / s.cluster_size;
  // Tile 0 at the first 128-byte boundary (the plan holds tile_alignment bytes more); chunk is a multiple of 8
  // elements, so tile 1 is 16-byte aligned too.
  const std::int64_t offset = static_cast<std::uint32_t>(__cvta_generic_to_shared(row_agent_tiles)) % tile_alignment;
  char* const first = reinterpret_cast<char*>(row_agent_tiles) + (tile_alignment - offset) % tile_alignment;
  T* const tiles = reinterpret_cast<T*>(first);
  const auto tile = [&](int k) { return tiles + (Tiles == 2 ? (k & 1) * s.chunk : 0); };
  BulkTileLoads<Tiles> loads(tile_loaded);
  const bool bulk = F != Fit::checked && n > 0;  // n * sizeof(T) is then a multiple of 16
  const auto fetch = [&](std::int64_t row, int k) {  // thread 0: start loading `row` into tile(k)
    if (bulk && row < s.rows && threadIdx.x == 0) {
      loads.issue(k % Tiles, tile(k), Program::held_row(p, row) + block.begin, static_cast<std::uint32_t>(n * sizeof(T)));
    }
  };
  Combine combine(scope, s.cluster_size, storage);
  const bool leader = block.rank == 0 && threadIdx.x == 0;
  std::int64_t row = blockIdx.x / s.cluster_size;
  fetch(row, 0);
  for (int k = 0; row < s.rows; row += stride, ++k) {
    if constexpr (Tiles == 2) fetch(row + stride, k + 1);  // its tile was freed by the barrier that ended k - 1
    if (bulk) {
      loads.wait(k % Tiles);
    } else {
      const T* held = Program::held_row(p, row) + block.begin;
      for (int i = static_cast<int>(threadIdx.x); i < n; i += Threads) tile(k)[i] = held[i];
      __syncthreads();
    }
    combine.begin_row();
    Program::row(p, row, block.begin, TileShare<T, Threads, F>(tile(k), n), combine, leader);
    combine.end_row();
    __syncthreads();  // every thread is done with tile(k) before a load overwrites it
    if constexpr (Tiles == 1) fetch(row + stride, k + 1);
  }
  combine.finish();
#else
  __trap();  // never launched: the host admits these kernels only on sm_90 machine code
#endif
}

// ---------------------------------------------------------------------------------------------------
// The kernel table: generated from a program's ConfigGrid, never written out by hand.

template <class Program, class Scope>
using RowKernel = void (*)(typename Program::Params, typename Scope::Params, RowSplit);

/// The Fits a family is instantiated for.
template <Fit... F>
struct FitList {};

template <class Program, class Scope, int Threads, int Elems, Fit... F>
constexpr RowKernel<Program, Scope> register_instance(Fit fit, FitList<F...>) {
  RowKernel<Program, Scope> k = nullptr;
  if constexpr (Elems % vector_width<typename Program::Element> == 0) {  // else: less than one 16-byte vector
    (void)((fit == F ? (k = register_row_kernel<Program, Scope, Threads, Elems, F>, true) : false) || ...);
  }
  return k;
}

/// The register-resident instantiation of (threads, elems, fit) in Grid x Fits; null for anything else.
template <class Program, class Scope, class Grid, class Fits>
RowKernel<Program, Scope> register_kernel_for(const ClusterConfig& c, Fit fit) {
  return visit_config<Grid>(c.threads, c.elems_per_thread, RowKernel<Program, Scope>{nullptr}, [&](auto th, auto el) {
    return register_instance<Program, Scope, decltype(th)::value, decltype(el)::value>(fit, Fits{});
  });
}

/// The shared-memory instantiation for Tiles tiles (checked or vectors; elems only bound the tile's size).
template <class Program, class Scope, class Grid, int Tiles>
RowKernel<Program, Scope> tile_kernel_for(const ClusterConfig& c, Fit fit) {
  if (!Grid::ElemList::has(c.elems_per_thread)) return nullptr;
  return visit_value(typename Grid::ThreadList{}, c.threads, RowKernel<Program, Scope>{nullptr}, [&](auto th) {
    constexpr int Th = decltype(th)::value;
    return fit == Fit::checked ? tile_row_kernel<Program, Scope, Th, Fit::checked, Tiles>
                               : tile_row_kernel<Program, Scope, Th, Fit::vectors, Tiles>;
  });
}

/// Admits kernel `k` for `plan` on device d: machine code for sm_90, its dynamic shared memory within the
/// limit, at least one block per SM and one cluster resident (the planner's admit_cluster_plan, which also
/// caps a resident_looping grid). *blocks_per_sm_out: the occupancy answer, for the launch's description.
template <class Kernel>
Status admit_row_kernel(Kernel k, const DeviceInfo& d, ClusterGrid grid, ClusterPlan* plan, int* blocks_per_sm_out) {
  if (plan->grid_blocks == 0) return Status::success;
  if (k == nullptr) return Status::invalid_strategy;
  const ClusterConfig& c = plan->config;
  KernelFacts facts;
  RSS_TRY(kernel_facts(k, d, &facts));
  if (facts.binary_version < 90) return Status::unsupported_device;  // the build has no sm_90 code for it
  const auto dynamic = static_cast<std::size_t>(plan->shared_bytes);
  if (dynamic > facts.max_dynamic) return Status::not_admissible;
  int per_sm = 0;
  RSS_TRY(blocks_per_sm(k, d, c.threads, dynamic, &per_sm));
  if (per_sm == 0) return Status::not_admissible;
  RSS_TRY(admit_cluster_plan(*plan, grid, [&](int* resident) {
    if (c.cluster_size == 1) {
      *resident = per_sm * d.sm_count;
      return Status::success;
    }
    return active_clusters(k, d, c.threads, c.cluster_size, dynamic, resident);  // the driver must place one
  }));
  *blocks_per_sm_out = per_sm;
  return Status::success;
}

}  // namespace rss::detail
