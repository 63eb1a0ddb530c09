#pragma once
// rss::ShardedOperator<T>: rms_scaled_softmax over rows whose columns are sharded over the ranks of an
// NCCL communicator (tensor-parallel logits: rank r holds columns [offset_r, offset_r + cols_r) of every
// row). initialize() is collective: every rank calls it, from its own host thread (it waits for its
// peers), with its own shard; run() then only launches, on the communicator's device.
//
//   rss::ShardedOperator<float> op;
//   rss::Status s = op.initialize(comm, rss::ShardedPath::automatic, x_shard, y_shard,
//                                 rss::Layout::contiguous(rows, local_cols), global_cols, stream);
//   s = op.run(stream);                 // many times; capturable in a CUDA Graph
//   op.path();                          // nccl_host or nccl_device: what runs
//   op.release();                       // collective too (the destructor calls it)
//   // a peer stopped (run()'s launch failed at the bounded wait, or the host path's collective hangs):
//   ncclCommAbort(comm); op.release_after_abort();   // local; then a new communicator, a new initialize()
//
// One host thread driving several GPUs (ncclCommInitAll): initialise each operator from its own thread,
// then run them together with rss::run_sharded(ops, streams, count), which groups the collectives.
//
// The operator owns its NCCL memory (ncclMemAlloc, registered as one symmetric window): the device
// path's exchange slots and the host path's all-gather buffers; no caller workspace. A rank whose own
// arguments are refused, or whose shape disagrees with its peers', still takes part in the
// initialisation's exchange, so every rank returns a status instead of waiting forever.
#include <cuda_runtime.h>
#include <nccl.h>
#include <nccl_device.h>

#include <cstdint>
#include <vector>

#include "rss/api/adapter.cuh"
#include "rss/detail/cuda_status.cuh"
#include "rss/detail/launch.cuh"
#include "rss/storage.cuh"
#include "rss/workspace.hpp"
#include "rss/device.cuh"
#include "rss/launch_info.hpp"
#include "rss/sharded/device_path.cuh"
#include "rss/sharded/host_path.cuh"
#include "rss/sharded/nccl_status.hpp"
#include "rss/sharded/plan.hpp"
#include "rss/status.hpp"
#include "rss/types.hpp"

namespace rss {

namespace detail::sharded {

static_assert(sizeof(RowStatsPartial) == 16, "exchange slots and all-gathers move 16-byte statistics");

/// All-gathers one RankShape per rank into `table` (world entries) and waits for it on the host.
/// `scratch` is device memory of (world + 1) RankShapes.
inline Status exchange_shapes(ncclComm_t comm, const RankShape& mine, RankShape* scratch, int world,
                              std::vector<RankShape>* table, cudaStream_t stream) {
  RSS_TRY(from_cuda(cudaMemcpyAsync(scratch, &mine, sizeof mine, cudaMemcpyHostToDevice, stream)));
  RSS_TRY(from_nccl(ncclAllGather(scratch, scratch + 1, sizeof(RankShape) / 8, ncclInt64, comm, stream)));
  table->assign(static_cast<std::size_t>(world), RankShape{});
  RSS_TRY(from_cuda(cudaMemcpyAsync(table->data(), scratch + 1, sizeof(RankShape) * world, cudaMemcpyDeviceToHost, stream)));
  return from_cuda(cudaStreamSynchronize(stream));
}

/// Whether every rank's entry has `flag` set.
inline bool all_ranks(const std::vector<RankShape>& table, std::int64_t RankShape::*flag) {
  for (const RankShape& s : table)
    if (s.*flag == 0) return false;
  return true;
}

inline std::int64_t min_over_ranks(const std::vector<RankShape>& table, std::int64_t RankShape::*field) {
  std::int64_t m = table.empty() ? 0 : table[0].*field;
  for (const RankShape& s : table) m = s.*field < m ? s.*field : m;
  return m;
}

}  // namespace detail::sharded

template <class T>
class ShardedOperator {
 public:
  ShardedOperator() = default;
  ShardedOperator(const ShardedOperator&) = delete;
  ShardedOperator& operator=(const ShardedOperator&) = delete;
  ~ShardedOperator() { (void)release(); }

  /// Collective over `comm`. x and y are this rank's shards (device memory of the communicator's
  /// device), `local` their layout (rows x this rank's columns, leading dimensions), `global_cols` the
  /// whole row's length. The ranks' shards follow rank order. Synchronises `stream` (a few small
  /// all-gathers agree on the shapes and the plan). Returns:
  ///  - the rank's own refusal (null_pointer, negative_size, invalid_layout, overlapping_buffers,
  ///    not_device_memory, invalid_strategy) on the rank that made it, invalid_layout on its peers;
  ///  - invalid_layout on every rank when the ranks disagree (rows, global length, widths that do not
  ///    add up, dtype, path): agreement() says how;
  ///  - for nccl_device: unsupported_device when some rank's LSA team is smaller than the communicator
  ///    (another node), clusters do not launch, or the NCCL library loaded is not the version of the
  ///    headers rss was compiled with (the device API's structures are compiled in), not_admissible when a share is longer than one
  ///    cluster holds (8 blocks x 512 threads x 32 elements) or nothing is co-resident. automatic then
  ///    takes nccl_host, which runs wherever NCCL does;
  ///  - cuda_error for a failed CUDA or NCCL call (rss::last_cuda_error(), rss::last_nccl_error()).
  /// On failure the operator is left released (unready).
  Status initialize(ncclComm_t comm, ShardedPath path, const T* x, T* y, const Layout& local, std::int64_t global_cols,
                    cudaStream_t stream = nullptr) noexcept {
    using namespace detail::sharded;
    RSS_TRY(release());
    agreement_ = ShardAgreement::agreed;
    if (comm == nullptr) return Status::null_pointer;
    int world = 0, rank = 0, device = 0;
    RSS_TRY_NCCL(ncclCommCount(comm, &world));
    RSS_TRY_NCCL(ncclCommUserRank(comm, &rank));
    RSS_TRY_NCCL(ncclCommCuDevice(comm, &device));
    detail::DeviceScope scope(device);
    RSS_TRY(scope.status());

    RankShape mine;
    mine.rank = rank;
    mine.world = world;
    mine.rows = local.rows;
    mine.local_cols = local.cols;
    mine.global_cols = global_cols;
    mine.dtype = static_cast<std::int64_t>(StorageTraits<T>::dtype);
    mine.path = static_cast<std::int64_t>(path);
    mine.exchange = static_cast<std::int64_t>(exchange_mode_);
    Status own = Status::success;
    if (path != ShardedPath::nccl_host && path != ShardedPath::nccl_device && path != ShardedPath::automatic) {
      own = Status::invalid_strategy;
    } else if (global_cols < 0) {
      own = Status::negative_size;
    } else {
      own = detail::validate_device_call(x, y, local, sizeof(T), nullptr, 0, 0, device);
    }
    mine.local_status = static_cast<std::int64_t>(own);
    DeviceInfo info{};
    RSS_TRY(current_device_info(&info));
    mine.sm_count = info.sm_count;
    // The device path compiles NCCL's device structures (ncclDevComm, windows) from the headers, so the
    // library loaded at run time must be the same version (2.28.3's ncclDevComm differs from 2.28.9's).
    int loaded = 0;
    if (ncclGetVersion(&loaded) != ncclSuccess) loaded = 0;
    mine.device_path_ok = ncclTeamLsa(comm).nRanks == world && world <= max_device_world && info.max_cluster_size > 0 &&
                                  info.cc_major >= 9 && loaded == NCCL_VERSION_CODE
                              ? 1
                              : 0;

    RankShape* scratch = nullptr;
    RSS_TRY(detail::from_cuda(cudaMalloc(&scratch, sizeof(RankShape) * (world + 1))));
    std::vector<RankShape> table;
    Status s = exchange_shapes(comm, mine, scratch, world, &table, stream);
    if (ok(s)) {
      agreement_ = check_agreement(table.data(), world);
      if (agreement_ != ShardAgreement::agreed) s = !ok(own) ? own : Status::invalid_layout;
    }
    if (ok(s)) s = plan(comm, path, x, y, local, global_cols, world, rank, device, table, mine, scratch, stream);
    (void)cudaFree(scratch);
    if (!ok(s)) {
      (void)release();
      return s;
    }
    ready_ = true;
    return Status::success;
  }

  /// Launches one call on `stream` (the communicator's device is made current for the launch).
  /// Asynchronous; never synchronises. Every rank must run, or its peers wait for it.
  Status run(cudaStream_t stream = nullptr) const noexcept {
    if (!ready_) return Status::invalid_strategy;
    detail::DeviceScope scope(device_);
    RSS_TRY(scope.status());
    for (int phase = 0; phase < phases(); ++phase) {
      RSS_TRY(launch_phase(phase, stream, detail::Launcher{stream}));
      if (has_gather(phase)) RSS_TRY(gather(phase, stream));
    }
    return Status::success;
  }

  /// Collective: frees the window, the device communicator and the NCCL memory. Every rank that
  /// initialised must release (its peers wait for it), each from its own host thread.
  Status release() noexcept {
    Status s = Status::success;
    if (comm_ != nullptr && (dev_comm_ready_ || window_ != nullptr || memory_ != nullptr)) {
      detail::DeviceScope scope(device_);
      if (dev_comm_ready_) s = detail::from_nccl(ncclDevCommDestroy(comm_, &dev_comm_));
      if (window_ != nullptr) {
        const Status w = detail::from_nccl(ncclCommWindowDeregister(comm_, window_));
        if (ok(s)) s = w;
      }
      if (memory_ != nullptr) {
        const Status m = detail::from_nccl(ncclMemFree(memory_));
        if (ok(s)) s = m;
      }
    }
    forget_nccl_resources();
    return s;
  }

  /// Not collective: for a communicator that this rank has aborted (ncclCommAbort, as after a peer stopped).
  /// The abort released the window and the device communicator with the communicator; this frees the
  /// operator's NCCL memory (ncclMemFree, local) and leaves it unready, without release()'s collective calls,
  /// which would wait for peers that are gone. Call it after the abort, once this rank's last run() has ended
  /// on its stream (a run() waiting for a stopped peer ends at the bounded wait). The destructor then makes no
  /// NCCL call; initialize() with a new communicator starts afresh.
  Status release_after_abort() noexcept {
    Status s = Status::success;
    if (memory_ != nullptr) {
      detail::DeviceScope scope(device_);
      s = detail::from_nccl(ncclMemFree(memory_));
    }
    forget_nccl_resources();
    return s;
  }

  /// The launches run() makes (kernels only; the all-gathers between them are NCCL's).
  Status describe(LaunchList* out) const noexcept {
    if (out == nullptr) return Status::null_pointer;
    if (!ready_) return Status::invalid_strategy;
    LaunchList list;
    for (int phase = 0; phase < phases(); ++phase) RSS_TRY(launch_phase(phase, nullptr, detail::Launcher{nullptr, &list, true}));
    *out = list;
    return Status::success;
  }

  /// How nccl_device's blocks exchange partials (every rank must choose the same; the next initialize()
  /// uses it). flags by default: no fence, so a block's stores of y never delay its next exchange.
  void set_device_exchange(DeviceExchange e) noexcept { exchange_mode_ = e; }
  DeviceExchange device_exchange() const noexcept { return exchange_mode_; }

  bool ready() const noexcept { return ready_; }
  ShardedPath path() const noexcept { return path_; }
  ShardAgreement agreement() const noexcept { return agreement_; }
  int rank() const noexcept { return rank_; }
  int world() const noexcept { return world_; }
  int device() const noexcept { return device_; }
  std::int64_t column_offset() const noexcept { return column_offset_; }
  const ShardedDevicePlan& device_plan() const noexcept { return device_plan_; }
  const HostGeometry& host_geometry() const noexcept { return host_.geometry; }

  // Used by run_sharded(): a call as phases, with an all-gather after some of them.
  int phases() const noexcept { return empty_ ? 0 : (path_ == ShardedPath::nccl_device ? 1 : 3); }
  bool has_gather(int phase) const noexcept { return path_ == ShardedPath::nccl_host && phase < 2; }
  Status launch_phase(int phase, cudaStream_t stream, detail::Launcher launcher) const noexcept {
    launcher.stream = stream;
    if (path_ == ShardedPath::nccl_device) {
      return detail::sharded::launch_device_path<T>(device_plan_, device_kernel_, host_.x, host_.y, host_.layout,
                                                    host_.global_cols, dev_comm_, exchange_, launcher);
    }
    return detail::sharded::host_phase<T>(phase, host_, launcher);
  }
  Status gather(int phase, cudaStream_t stream) const noexcept { return detail::sharded::host_gather<T>(phase, host_, stream); }

 private:
  Status plan(ncclComm_t comm, ShardedPath path, const T* x, T* y, const Layout& local, std::int64_t global_cols,
              int world, int rank, int device, std::vector<RankShape>& table, RankShape mine, RankShape* scratch,
              cudaStream_t stream) noexcept {
    using namespace detail::sharded;
    const DType dtype = StorageTraits<T>::dtype;
    const std::int64_t rows = local.rows;
    const std::int64_t max_cols = max_local_cols(table.data(), world);
    comm_ = comm;
    device_ = device;
    world_ = world;
    rank_ = rank;
    column_offset_ = shard_offset(table.data(), rank);
    empty_ = rows == 0 || global_cols == 0;
    host_ = HostCall<T>{x, y, local, global_cols, plan_host_geometry(rows, max_cols, static_cast<int>(min_over_ranks(table, &RankShape::sm_count))),
                        HostBuffers{}, world, comm};
    if (empty_) {
      path_ = path == ShardedPath::automatic ? ShardedPath::nccl_host : path;
      return Status::success;
    }

    // The device path's plan, admitted on every rank (the same table gives every rank the same verdict).
    Status device_status = Status::success;
    if (path == ShardedPath::nccl_host) {
      device_status = Status::invalid_strategy;
    } else if (!all_ranks(table, &RankShape::device_path_ok)) {
      device_status = Status::unsupported_device;
    } else {
      ShardedDevicePlan trial;
      device_status = plan_device_path(rows, max_cols, dtype, portable_cluster_size, 1, &trial);
      if (ok(device_status)) {
        const Fit fit = device_fit<T>(trial, x, y, local);
        mine.resident_clusters = 0;
        const Status q = resident_clusters<T>(trial, fit, &mine.resident_clusters);
        if (!ok(q)) mine.resident_clusters = 0;
        RSS_TRY(exchange_shapes(comm, mine, scratch, world, &table, stream));
        device_status = plan_device_path(rows, max_cols, dtype, portable_cluster_size,
                                         min_over_ranks(table, &RankShape::resident_clusters), &device_plan_);
        device_kernel_ = device_kernel_for<T>(device_plan_.config, fit);  // launched as is
      }
    }
    if (path == ShardedPath::nccl_device && !ok(device_status)) return device_status;
    path_ = ok(device_status) ? ShardedPath::nccl_device : ShardedPath::nccl_host;

    // One NCCL allocation, one symmetric window: [device exchange slots][host all-gather buffers].
    const DeviceWindowLayout wl =
        path_ == ShardedPath::nccl_device ? device_window_layout(device_plan_.grid_blocks, world) : DeviceWindowLayout{};
    WorkspaceCarver carver;
    (void)carver.take<unsigned char>(wl.bytes);
    (void)HostBuffers::carve(carver, rows, host_.geometry.chunks, world);
    if (carver.overflowed()) return Status::size_overflow;
    const std::size_t bytes = (carver.bytes() + NCCL_WIN_REQUIRED_ALIGNMENT) / NCCL_WIN_REQUIRED_ALIGNMENT * NCCL_WIN_REQUIRED_ALIGNMENT;
    mine.local_status = ok(detail::from_nccl(ncclMemAlloc(&memory_, bytes))) ? 1 : 0;
    RSS_TRY(exchange_shapes(comm, mine, scratch, world, &table, stream));  // nobody registers unless all allocated
    if (!all_ranks(table, &RankShape::local_status)) return Status::cuda_error;
    RSS_TRY(detail::from_cuda(cudaMemsetAsync(memory_, 0, bytes, stream)));
    RSS_TRY_NCCL(ncclCommWindowRegister(comm, memory_, bytes, &window_, NCCL_WIN_COLL_SYMMETRIC));
    WorkspaceCarver layout(memory_);
    (void)layout.take<unsigned char>(wl.bytes);
    host_.buffers = HostBuffers::carve(layout, rows, host_.geometry.chunks, world);

    if (path_ == ShardedPath::nccl_device) {
      ncclDevCommRequirements reqs{};
      reqs.lsaBarrierCount = static_cast<int>(device_plan_.grid_blocks);
      const Status created = detail::from_nccl(ncclDevCommCreate(comm, &reqs, &dev_comm_));
      dev_comm_ready_ = ok(created);
      mine.local_status = dev_comm_ready_ ? 1 : 0;
      RSS_TRY(exchange_shapes(comm, mine, scratch, world, &table, stream));
      if (!all_ranks(table, &RankShape::local_status)) {
        if (path == ShardedPath::nccl_device) return ok(created) ? Status::unsupported_device : created;
        if (dev_comm_ready_) RSS_TRY_NCCL(ncclDevCommDestroy(comm, &dev_comm_));  // collective: all created it
        dev_comm_ready_ = false;
        path_ = ShardedPath::nccl_host;
      }
      exchange_ = RankExchange{window_, {wl.stats_offset, wl.sums_offset}, wl.flags_offset, wl.counters_offset,
                               rank, world, exchange_mode_};
    }
    return detail::from_cuda(cudaStreamSynchronize(stream));
  }

  void forget_nccl_resources() noexcept {
    dev_comm_ready_ = false;
    window_ = nullptr;
    memory_ = nullptr;
    comm_ = nullptr;
    ready_ = false;
  }

  ncclComm_t comm_ = nullptr;
  int device_ = 0;
  int world_ = 0;
  int rank_ = 0;
  std::int64_t column_offset_ = 0;
  bool empty_ = false;
  bool ready_ = false;
  ShardedPath path_ = ShardedPath::nccl_host;
  ShardAgreement agreement_ = ShardAgreement::agreed;
  detail::sharded::HostCall<T> host_{};
  ShardedDevicePlan device_plan_{};
  detail::sharded::DeviceKernel<T> device_kernel_ = nullptr;
  void* memory_ = nullptr;
  ncclWindow_t window_ = nullptr;
  ncclDevComm dev_comm_{};
  bool dev_comm_ready_ = false;
  detail::sharded::RankExchange exchange_{};
  DeviceExchange exchange_mode_ = DeviceExchange::flags;
};

/// Runs several ranks' operators from one host thread (a process driving several GPUs): phase by
/// phase, each phase launched on every rank, the all-gathers between phases in one NCCL group (NCCL
/// needs a group when one thread issues a collective on several communicators). streams[i] is a
/// stream of ops[i]'s device. Capturable: begin a capture on every stream, call this, end them.
template <class T>
Status run_sharded(const ShardedOperator<T>* const* ops, const cudaStream_t* streams, int count) noexcept {
  if (ops == nullptr || streams == nullptr) return Status::null_pointer;
  int phases = 0;
  for (int i = 0; i < count; ++i) {
    if (ops[i] == nullptr) return Status::null_pointer;
    if (!ops[i]->ready()) return Status::invalid_strategy;
    phases = ops[i]->phases() > phases ? ops[i]->phases() : phases;
  }
  for (int phase = 0; phase < phases; ++phase) {
    bool gathers = false;
    for (int i = 0; i < count; ++i) {
      if (phase >= ops[i]->phases()) continue;
      detail::DeviceScope scope(ops[i]->device());
      RSS_TRY(scope.status());
      RSS_TRY(ops[i]->launch_phase(phase, streams[i], detail::Launcher{streams[i]}));
      gathers = gathers || ops[i]->has_gather(phase);
    }
    if (!gathers) continue;
    RSS_TRY_NCCL(ncclGroupStart());
    Status s = Status::success;
    for (int i = 0; i < count && ok(s); ++i) {
      if (phase < ops[i]->phases() && ops[i]->has_gather(phase)) s = ops[i]->gather(phase, streams[i]);
    }
    const Status end = detail::from_nccl(ncclGroupEnd());
    RSS_TRY(s);
    RSS_TRY(end);
  }
  return Status::success;
}

}  // namespace rss
