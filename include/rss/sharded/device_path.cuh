#pragma once
// Path nccl_device: one kernel per rank, rows sharded by columns over the ranks of an NCCL
// communicator whose ranks all reach each other by load/store (NCCL's LSA team is the whole
// communicator). The kernel is the row agent's (rss/agent/row_agent.cuh): the forward row program in
// registers, as cluster_row runs it on one GPU, with a combine that continues across ranks, so x is read
// once and y written once:
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
#include <type_traits>

#include "rss/agent/cluster_combine.cuh"
#include "rss/agent/forward_row.cuh"
#include "rss/agent/row_agent.cuh"
#include "rss/detail/cuda_status.cuh"
#include "rss/detail/launch.cuh"
#include "rss/device.cuh"
#include "rss/planner/cluster_plan.hpp"
#include "rss/sharded/plan.hpp"
#include "rss/storage.cuh"
#include "rss/sync/bounded_wait.cuh"
#include "rss/types.hpp"

namespace rss::detail::sharded {

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
__host__ __device__ __forceinline__ std::uint64_t tagged(std::uint32_t seq, std::uint32_t data) {
  return (static_cast<std::uint64_t>(seq) << 32) | data;
}
/// Polls until the word carries `seq`; returns its data half. Bounded (rss/sync/bounded_wait.cuh): a peer that
/// never pushes this row (its process died, or it skipped the call) fails this rank's launch instead of holding
/// its GPU forever.
__device__ __forceinline__ std::uint32_t wait_word(const std::uint64_t* p, std::uint32_t seq) {
  std::uint64_t v = 0;
  spin_until([&] {
    v = load_word(p);
    return static_cast<std::uint32_t>(v >> 32) == seq;
  });
  return static_cast<std::uint32_t>(v);
}

/// NCCL's LSA barrier wait (unicast, as nccl_device/impl/lsa_barrier__funcs.h of NCCL 2.28 writes it), bounded:
/// NCCL's own spins without end. Each thread waits for some peers' arrival words in this rank's inbox. The
/// session's epoch and inboxes are NCCL's public session members; the unicast path only (multicast stays off).
/// A newer NCCL's inbox protocol is not assumed: there its own wait runs (unbounded).
template <class Session>
__device__ void bounded_lsa_wait(Session& s) {
#if NCCL_VERSION_CODE >= NCCL_VERSION(2, 29, 0)
  s.wait(ncclCoopCta(), cuda::memory_order_acq_rel);
#else
  for (int i = static_cast<int>(threadIdx.x); i < s.team.nRanks - 1; i += static_cast<int>(blockDim.x)) {
    const int peer = i + (s.team.rank <= i ? 1 : 0);
    cuda::atomic_ref<std::uint32_t> inbox(*s.ucInbox(s.team.rank, peer));
    const std::uint32_t want = s.epoch + 1;
    spin_until([&] { return inbox.load(cuda::memory_order_acquire) - want <= (~0u >> 1); });  // reached, modulo 2^32
  }
  s.epoch += 1;
  __syncthreads();
#endif
}

/// A round's value as 4-byte words of the flag slot (max, low and high halves of the sum of squares; sum).
template <class V>
struct FlagWords;
template <>
struct FlagWords<RowStatsPartial> {
  static constexpr int count = 3;
  __device__ static std::uint32_t word(const RowStatsPartial& v, int i) {
    const auto bits = static_cast<std::uint64_t>(__double_as_longlong(v.sum_sq));
    return i == 0 ? __float_as_uint(v.max) : static_cast<std::uint32_t>(i == 1 ? bits : bits >> 32);
  }
  __device__ static RowStatsPartial value(const std::uint32_t* w) {
    const std::uint64_t bits = static_cast<std::uint64_t>(w[1]) | (static_cast<std::uint64_t>(w[2]) << 32);
    return {__uint_as_float(w[0]), __longlong_as_double(static_cast<long long>(bits))};
  }
};
template <>
struct FlagWords<float> {
  static constexpr int count = 1;
  __device__ static std::uint32_t word(float v, int) { return __float_as_uint(v); }
  __device__ static float value(const std::uint32_t* w) { return __uint_as_float(w[0]); }
};

/// Where the cross-rank exchange of block `blockIdx.x` lives in the symmetric window: its slot [block][rank]
/// in every rank's window (lsa_barrier: one 16-byte slot a round; flags: four tagged 8-byte words in all),
/// and the LSA barrier it shares with block `blockIdx.x` of every peer.
struct RankExchange {
  ncclWindow_t window;
  std::int64_t round_offsets[2];  // bytes into the window: lsa_barrier's slots of rounds 0 and 1
  std::int64_t flags_offset;
  std::int64_t counters_offset;
  int rank;
  int world;
  DeviceExchange mode;

  __device__ std::size_t slot(int round, int source) const {
    return static_cast<std::size_t>(round_offsets[round] + (static_cast<std::int64_t>(blockIdx.x) * world + source) * 16);
  }
  __device__ std::size_t flag_slot(int source) const {
    return static_cast<std::size_t>(flags_offset + (static_cast<std::int64_t>(blockIdx.x) * world + source) * 32);
  }
};

/// What the sharded kernel receives besides the row program's parameters.
struct RankParams {
  ncclDevComm comm;
  RankExchange exchange;
};

/// Block, then cluster, then every rank's block of the same index. Slot reuse across rows is safe without
/// double buffering. lsa_barrier: a block writes a round's slots again only after the next barrier, which
/// every peer passes only after it has read them. flags: a block pushes row k+1's round 0 only after it has
/// every peer's row-k round 1, which each peer pushed after reading row k's round 0 (and symmetrically), so
/// no word is overwritten unread.
template <int Threads, class R>
class RankCombine {
  static_assert(R::count == 2, "the flag words and the window's slots hold the forward's two rounds");
  using Cluster = ClusterCombine<Threads, R>;
  using V0 = typename RoundValue<0, R>::type;
  using V1 = typename RoundValue<1, R>::type;
  static_assert(FlagWords<V0>::count + FlagWords<V1>::count <= 4, "a flag slot is four 8-byte words");
  static_assert(sizeof(V0) <= 16 && sizeof(V1) <= 16, "lsa_barrier slots are 16 bytes");

 public:
  struct Storage {
    typename Cluster::Storage cluster;
    V0 peers0[max_device_world];
    V1 peers1[max_device_world];
  };

  __device__ RankCombine(const RankParams& p, int cluster_size, Storage& storage)
      : cluster_(cluster_size, storage.cluster), storage_(storage), exchange_(p.exchange),
        barrier_(ncclCoopCta(), p.comm, ncclTeamTagLsa(), blockIdx.x),
        counter_(static_cast<std::uint64_t*>(ncclGetLocalPointer(
            p.exchange.window,
            static_cast<std::size_t>(p.exchange.counters_offset + 8 * static_cast<std::int64_t>(blockIdx.x)))))
        // flags: one sequence number per row, continuing from the last launch (every rank's block b handles
        // the same rows, so the numbers agree); 0 is the window's initial content, never a row's number.
        ,
        seq_(static_cast<std::uint32_t>(__ldcg(reinterpret_cast<const unsigned long long*>(counter_)))) {}

  __device__ void begin_row() {
    if (++seq_ == 0) seq_ = 1;
  }

  /// As ClusterCombine's: every thread gets finish(the total over every rank), computed by every thread.
  template <int I, class Op, class Finish = Unfinished>
  __device__ __forceinline__ auto all_reduce(typename RoundValue<I, R>::type thread_value, Op op, Finish finish = {}) {
    using V = typename RoundValue<I, R>::type;
    const V mine = cluster_.template all_reduce<I>(thread_value, op);
    if (exchange_.mode == DeviceExchange::flags) {
      V* peers = I == 0 ? reinterpret_cast<V*>(storage_.peers0) : reinterpret_cast<V*>(storage_.peers1);
      return finish(by_flags<V>(mine, I == 0 ? 0 : FlagWords<V0>::count, peers, op));
    }
    return finish(by_barrier(mine, I, op));
  }

  __device__ void end_row() { cluster_.end_row(); }

  __device__ void finish() {
    cluster_.finish();
    __syncthreads();  // every thread has read the counter before it changes
    if (threadIdx.x == 0) *counter_ = seq_;
  }

 private:
  /// Thread 0 pushes the value as tagged words to every rank; threads 0..world-1 each wait for one rank's
  /// words in this rank's window. Returns the rank-ordered combination.
  template <class V, class Op>
  __device__ V by_flags(const V& mine, int first_word, V* peers, Op op) {
    using Words = FlagWords<V>;
    const RankExchange& x = exchange_;
    const int t = static_cast<int>(threadIdx.x);
    if (t == 0) {
      for (int p = 0; p < x.world; ++p) {
        auto* w = static_cast<std::uint64_t*>(ncclGetPeerPointer(x.window, x.flag_slot(x.rank), p)) + first_word;
        for (int i = 0; i < Words::count; ++i) store_word(w + i, tagged(seq_, Words::word(mine, i)));
      }
    }
    if (t < x.world) {
      const auto* w = static_cast<const std::uint64_t*>(ncclGetLocalPointer(x.window, x.flag_slot(t))) + first_word;
      std::uint32_t words[Words::count];
      for (int i = 0; i < Words::count; ++i) words[i] = wait_word(w + i, seq_);
      peers[t] = Words::value(words);
    }
    __syncthreads();  // peers[] is written again only after the next round's exchange has synchronised
    V total = peers[0];
    for (int p = 1; p < x.world; ++p) total = op(total, peers[p]);
    return total;
  }

  /// Pushes `mine` to every rank (thread 0; the barrier's release orders the NVLink stores before the
  /// peers see its arrival), waits for every peer's push, and returns the rank-ordered combination.
  template <class V, class Op>
  __device__ V by_barrier(const V& mine, int round, Op op) {
    const RankExchange& x = exchange_;
    if (threadIdx.x == 0) {
      for (int p = 0; p < x.world; ++p) *static_cast<V*>(ncclGetPeerPointer(x.window, x.slot(round, x.rank), p)) = mine;
    }
    barrier_.arrive(ncclCoopCta(), cuda::memory_order_acq_rel);
    bounded_lsa_wait(barrier_);
    // Read through L2: these lines were written by peers over NVLink since this block last read them.
    const auto* local = static_cast<const char*>(ncclGetLocalPointer(x.window, x.slot(round, 0)));
    V total = load(reinterpret_cast<const V*>(local));
    for (int p = 1; p < x.world; ++p) total = op(total, load(reinterpret_cast<const V*>(local + 16 * p)));
    return total;
  }

  __device__ static RowStatsPartial load(const RowStatsPartial* p) { return {__ldcg(&p->max), __ldcg(&p->sum_sq)}; }
  __device__ static float load(const float* p) { return __ldcg(p); }

  Cluster cluster_;
  Storage& storage_;
  RankExchange exchange_;
  ncclLsaBarrierSession<ncclCoopCta> barrier_;
  std::uint64_t* counter_;
  std::uint32_t seq_;
};

/// The combine of rows sharded over ranks (rss/agent/row_agent.cuh's Scope). Its grid is only the clusters
/// that stay resident, each looping over rows, so it keeps two blocks of 512 threads per SM (at most 64
/// registers): ptxas otherwise gives the widest configurations 128 and halves the blocks in flight. This
/// budget replaces the forward program's, whose tighter one for short shares leaves the flags no room.
struct AcrossRanks {
  using Params = RankParams;
  template <int Threads>
  static constexpr int min_blocks_per_sm = 2048 / Threads / 2;
  template <int Threads, class R>
  using Combine = RankCombine<Threads, R>;
};

template <class T>
using DeviceProgram = ForwardRow<T, NoStatistics>;
template <class T>
using DeviceKernel = RowKernel<DeviceProgram<T>, AcrossRanks>;
using DeviceFits = FitList<Fit::checked, Fit::vectors, Fit::exact>;

/// The instantiation of a configuration plan_device_config() can return; null for anything else.
template <class T>
DeviceKernel<T> device_kernel_for(const ShardedDeviceConfig& c, Fit fit) {
  return register_kernel_for<DeviceProgram<T>, AcrossRanks, ForwardRegisterConfigs, DeviceFits>(c, fit);
}

/// The cheapest instantiation this rank's pointers and shard allow (the plan is the widest share's, so a
/// narrower rank checks its own width).
template <class T>
Fit device_fit(const ShardedDevicePlan& plan, const T* x, const T* y, const Layout& l) {
  ClusterPlan mine = plan;
  mine.cols = l.cols;
  return row_fit({x, y}, {l.ld_x, l.ld_y}, dtype_of<T>, mine, true);
}

/// Clusters of the plan co-resident on the current device, for this rank's kernel (not_admissible: none;
/// unsupported_device: a build without sm_90 code for the kernel).
template <class T>
Status resident_clusters(const ShardedDevicePlan& plan, Fit fit, std::int64_t* out) noexcept {
  DeviceInfo d;
  RSS_TRY(current_device_info(&d));
  ClusterPlan probe = plan;
  probe.rows = max_grid_blocks;  // as many clusters as will be resident
  probe.grid_blocks = cluster_grid_blocks(probe.rows, probe.config.cluster_size);
  int unused = 0;
  RSS_TRY(admit_row_kernel(device_kernel_for<T>(plan.config, fit), d, ClusterGrid::resident_looping, &probe, &unused));
  *out = probe.grid_blocks / probe.config.cluster_size;
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
  launcher.add_logical_bytes(l.rows * l.cols * static_cast<std::int64_t>(sizeof(T)) * 2);  // this rank's share: x once, y once
  launcher.cluster_size = static_cast<unsigned>(plan.config.cluster_size);
  RowSplit split = RowSplit::of(plan);
  split.cols = l.cols;  // this rank's share; the plan's chunk is the widest share's, the same on every rank
  return launcher("sharded::nccl_device", kernel, static_cast<unsigned>(plan.grid_blocks),
                  static_cast<unsigned>(plan.config.threads), 0, false, 0,
                  ForwardParams<T>{x, y, nullptr, l.ld_x, l.ld_y, global_cols}, RankParams{comm, exchange}, split);
}

}  // namespace rss::detail::sharded
