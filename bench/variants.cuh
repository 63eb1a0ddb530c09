#pragma once
// The benchmarked variants, one table: every rss strategy plus the floors (copies of the same bytes). Each variant is
// prepared once per shape (workspace, graph capture, megakernel plan) and then run warm; its
// launch metadata comes from the library, never from the bench's own bookkeeping.
#include <cuda_runtime.h>

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "copy_floor.cuh"
#include "harness/storage.hpp"
#include "rss/rss.cuh"

namespace rss_bench {

/// Device buffers of one shape: the input and the output in the shape's storage type (each
/// variant owns its workspace).
struct ShapeBuffers {
  std::int64_t rows = 0, cols = 0;
  rss::DType dtype = rss::DType::fp32;
  void* x = nullptr;
  void* y = nullptr;
  int sm_count = 0;
};

/// A zero-filled device workspace owned by one prepared variant: a megakernel's barrier states
/// must not be overwritten by another strategy's intermediates between its calls.
class Workspace {
 public:
  explicit Workspace(std::size_t bytes) : bytes_(bytes) {
    if (bytes > 0 && (cudaMalloc(&ptr_, bytes) != cudaSuccess || cudaMemset(ptr_, 0, bytes) != cudaSuccess)) {
      ptr_ = nullptr;
    }
  }
  Workspace(const Workspace&) = delete;
  Workspace& operator=(const Workspace&) = delete;
  ~Workspace() {
    if (ptr_ != nullptr) cudaFree(ptr_);
  }
  void* get() const { return ptr_; }
  std::size_t bytes() const { return bytes_; }
  bool ok() const { return bytes_ == 0 || ptr_ != nullptr; }

 private:
  void* ptr_ = nullptr;
  std::size_t bytes_;
};

/// A variant ready to run on one shape.
struct Prepared {
  std::function<rss::Status(cudaStream_t)> run;
  rss::LaunchList launches;
  std::int64_t logical_bytes = 0;  // global-memory bytes the algorithm reads and writes (not HBM traffic)
  std::shared_ptr<Workspace> workspace;
  std::shared_ptr<void> state;     // keeps a graph or a plan alive while `run` may be called
  rss::Strategy ran = rss::Strategy::automatic;  // the concrete strategy run() launches (rss variants)
};

struct Variant {
  std::string name;
  std::function<rss::Status(const ShapeBuffers&, Prepared*)> prepare;
};

namespace detail {

inline std::int64_t elements(const ShapeBuffers& b) { return b.rows * b.cols; }
inline std::int64_t element_bytes(const ShapeBuffers& b) { return rss::dtype_bytes(b.dtype); }

/// Prepares `config` (automatic included) through rss::Operator: initialisation (planning, graph
/// capture, workspace preparation) here, only launches in run(). With `one_call`, run() goes through
/// the one-call API instead, which validates and plans on every call (its host overhead is measured).
template <class T>
rss::Status prepare_typed(const rss::Config& config, const ShapeBuffers& b, bool one_call, Prepared* p) {
  const T* x = static_cast<const T*>(b.x);
  T* y = static_cast<T*>(b.y);
  const rss::Layout layout = rss::Layout::contiguous(b.rows, b.cols);
  std::size_t bytes = 0;
  RSS_TRY(rss::workspace_bytes<T>(config, b.rows, b.cols, &bytes));
  p->workspace = std::make_shared<Workspace>(bytes);
  if (!p->workspace->ok()) return rss::Status::cuda_error;
  auto op = std::make_shared<rss::Operator<T>>();
  RSS_TRY(op->initialize(config, x, y, layout, p->workspace->get(), bytes));
  if (one_call) {
    p->run = [=, w = p->workspace.get()](cudaStream_t st) {
      return rss::rms_scaled_softmax(config, x, y, layout, w->get(), w->bytes(), st);
    };
  } else {
    p->run = [o = op.get()](cudaStream_t st) { return o->run(st); };
  }
  RSS_TRY(op->describe(&p->launches));
  p->state = op;
  p->logical_bytes = p->launches.logical_bytes;  // counted by the strategy that runs
  p->ran = op->strategy();
  return rss::Status::success;
}

inline rss::Status prepare_config(const rss::Config& config, const ShapeBuffers& b, Prepared* p, bool one_call = false) {
  return with_storage(b.dtype, [&](auto tag) {
    return prepare_typed<typename decltype(tag)::type>(config, b, one_call, p);
  });
}

inline Variant config_variant(const std::string& name, const rss::Config& config) {
  return {name, [config](const ShapeBuffers& b, Prepared* p) { return prepare_config(config, b, p); }};
}

/// A floor: one of copy_floor.cuh's copies of the shape's bytes, x into y, on devices of compute capability
/// `min_cc_major` and later (unsupported_device before).
inline Variant floor_variant(const char* name, int min_cc_major,
                             cudaError_t (*copy)(const void*, void*, std::int64_t, int, cudaStream_t)) {
  return {name, [name, min_cc_major, copy](const ShapeBuffers& b, Prepared* p) {
            int device = 0, cc_major = 0;
            if (cudaGetDevice(&device) != cudaSuccess ||
                cudaDeviceGetAttribute(&cc_major, cudaDevAttrComputeCapabilityMajor, device) != cudaSuccess) {
              return rss::Status::cuda_error;
            }
            if (cc_major < min_cc_major) return rss::Status::unsupported_device;
            const std::int64_t bytes = elements(b) * element_bytes(b);
            const int sms = b.sm_count;
            p->run = [=](cudaStream_t st) {
              return cudaSuccess == copy(b.x, b.y, bytes, sms, st) ? rss::Status::success : rss::Status::cuda_error;
            };
            p->launches = rss::LaunchList{};
            p->launches.add({name, 0, 0, 0, false, 0});
            p->logical_bytes = 2 * bytes;
            return rss::Status::success;
          }};
}

/// The three copy kernels of copy_floor.cuh.
inline void add_copy_floors(std::vector<Variant>& v) {
  v.push_back(floor_variant("copy_floor", 0, copy_floor));
  v.push_back(floor_variant("blocked_copy_floor", 0, blocked_copy_floor));
  v.push_back(floor_variant("bulk_copy_floor", 9, bulk_copy_floor));
}

/// The runtime's own device-to-device copy of the same bytes: with the copy kernels, the shape's limit.
inline Variant memcpy_floor_variant() {
  return {"memcpy_floor", [](const ShapeBuffers& b, Prepared* p) {
            const auto bytes = static_cast<std::size_t>(elements(b) * element_bytes(b));
            p->run = [=](cudaStream_t st) {
              return cudaSuccess == cudaMemcpyAsync(b.y, b.x, bytes, cudaMemcpyDeviceToDevice, st)
                         ? rss::Status::success
                         : rss::Status::cuda_error;
            };
            p->launches = rss::LaunchList{};
            p->launches.add({"cudaMemcpyAsync", 0, 0, 0, false, 0});
            p->logical_bytes = 2 * static_cast<std::int64_t>(bytes);
            return rss::Status::success;
          }};
}

}  // namespace detail

/// The megakernel's controls, measured as variants of their own.
inline const rss::Config control_no_retention{rss::Strategy::megakernel_grid, {}, rss::MegakernelControl::no_retention};
inline const rss::Config control_ordinary_launch{rss::Strategy::megakernel_grid, {},
                                                 rss::MegakernelControl::ordinary_launch};

/// Every variant the bench knows, in a fixed order (sessions shuffle it per round): each strategy, the
/// megakernel's two controls, automatic through rss::Operator and through the one-call API, and the
/// floors (`rss_bench --benchmark_list_tests` shows them per shape).
inline std::vector<Variant> all_variants() {
  std::vector<Variant> v;
  for (rss::Strategy s : rss::all_strategies) v.push_back(detail::config_variant(rss::strategy_name(s), s));
  v.push_back(detail::config_variant("control_no_retention", control_no_retention));
  v.push_back(detail::config_variant("control_ordinary_launch", control_ordinary_launch));
  v.push_back(detail::config_variant(rss::strategy_name(rss::Strategy::automatic), rss::Strategy::automatic));
  v.push_back({"automatic_one_call", [](const ShapeBuffers& b, Prepared* p) {
                 return detail::prepare_config(rss::Strategy::automatic, b, p, true);
               }});
  detail::add_copy_floors(v);
  v.push_back(detail::memcpy_floor_variant());
  return v;
}

/// The pilot mode's candidates: cluster_row under every instantiated configuration that fits the
/// shape (named cluster_row:THREADSxELEMSxCLUSTER, with a trailing s when the row stays in shared memory,
/// p when it does so pipelined, on many-row shapes only), the megakernels, block_row, local_fusion and long_row, the
/// floors; and `heuristic`, automatic's choice without a tuning table, which the candidates must beat
/// to become table entries (bench/rssbench/tune.py).
inline std::vector<Variant> pilot_variants(const ShapeBuffers& shape) {
  std::vector<Variant> v;
  for (rss::Strategy s : {rss::Strategy::megakernel_grid, rss::Strategy::megakernel_row, rss::Strategy::block_row,
                          rss::Strategy::local_fusion, rss::Strategy::long_row}) {
    v.push_back(detail::config_variant(rss::strategy_name(s), s));
  }
  v.push_back({"heuristic", [](const ShapeBuffers& b, Prepared* p) {
                 rss::DeviceInfo d;
                 RSS_TRY(rss::current_device_info(&d));
                 return detail::prepare_config(rss::heuristic_choice(d, b.rows, b.cols, b.dtype).config, b, p);
               }});
  rss::DeviceInfo device;
  if (!rss::ok(rss::current_device_info(&device))) device.max_cluster_size = 0;
  using R = rss::RowResidence;
  for (const R residence : {R::registers, R::shared_memory, R::shared_memory_pipelined}) {
    const bool shared = residence != R::registers;
    const bool pipelined = residence == R::shared_memory_pipelined;
    // Pipelining pays only where a block loops over rows: many rows per SM, rows a cluster of 1 or 2 holds.
    if (pipelined && shape.rows < 4 * static_cast<std::int64_t>(device.sm_count)) continue;
    rss::for_each_cluster_config(residence, [&](int threads, int elems) {
      for (const int cluster : {1, 2, 3, 4, 6, 8, 12, 16}) {
        if (pipelined && cluster > 2) continue;
        const rss::ClusterConfig c{threads, elems, cluster, residence};
        // The planner uses a configuration exactly when it fits: the variant runs what its name says.
        if (!rss::cluster_config_fits(c, shape.cols, shape.dtype, device.max_cluster_size)) continue;
        // Only configurations within 2x of the tightest cluster: far larger ones leave most threads idle.
        if (static_cast<std::int64_t>(threads) * elems * cluster > 2 * shape.cols + 16384) continue;
        const std::string name = "cluster_row:" + std::to_string(threads) + "x" + std::to_string(elems) + "x" +
                                 std::to_string(cluster) + (pipelined ? "p" : shared ? "s" : "");
        v.push_back(detail::config_variant(name, rss::Config{rss::Strategy::cluster_row, c}));
      }
    });
  }
  detail::add_copy_floors(v);
  v.push_back(detail::memcpy_floor_variant());
  return v;
}

}  // namespace rss_bench
