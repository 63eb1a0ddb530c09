#pragma once
// The benchmarked variants, one table: every rss strategy plus the copy floor. Each variant is
// prepared once per shape (workspace, graph capture, megakernel plan) and then run warm; its
// launch metadata comes from the library, never from the bench's own bookkeeping.
#include <cuda_runtime.h>

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "copy_floor.cuh"
#include "rss/rss.cuh"

namespace rss_bench {

/// Device buffers of one shape: the input and the output (each variant owns its workspace).
struct ShapeBuffers {
  std::int64_t rows = 0, cols = 0;
  float* x = nullptr;
  float* y = nullptr;
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
};

struct Variant {
  std::string name;
  std::function<rss::Status(const ShapeBuffers&, Prepared*)> prepare;
};

namespace detail {

inline std::int64_t elements(const ShapeBuffers& b) { return b.rows * b.cols; }

/// Logical bytes of each rss strategy: x reads, y writes and full-size intermediates.
inline std::int64_t strategy_bytes(rss::Strategy s, const ShapeBuffers& b, std::int64_t evicted_elems) {
  const std::int64_t n = elements(b), io = static_cast<std::int64_t>(sizeof(float));
  switch (s) {
    case rss::Strategy::baseline:
    case rss::Strategy::baseline_graph:
      // square r x w4, mean r4, max r x, shift r x w4, scale r4 w4, exp r4 w4, sum r4, divide r4 w y
      return n * (io + 4 + 4 + io + io + 4 + 4 + 4 + 4 + 4 + 4 + 4 + io);
    case rss::Strategy::local_fusion:
    case rss::Strategy::control_no_retention:
    case rss::Strategy::control_ordinary_launch: return n * io * 4;  // x three times, y once
    case rss::Strategy::megakernel_grid:
    case rss::Strategy::megakernel_row:
    case rss::Strategy::block_row: return n * io * 2 + evicted_elems * io * 2;  // evicted tiles: x 3 times
  }
  return 0;
}

inline rss::Status prepare_strategy(rss::Strategy s, const ShapeBuffers& b, Prepared* p) {
  const float* x = b.x;
  float* y = b.y;
  const std::int64_t rows = b.rows, cols = b.cols;
  std::size_t bytes = 0;
  RSS_TRY(rss::workspace_bytes<float>(s, rows, cols, &bytes));
  p->workspace = std::make_shared<Workspace>(bytes);
  if (!p->workspace->ok()) return rss::Status::cuda_error;
  void* ws = p->workspace->get();
  std::int64_t evicted_elems = 0;
  switch (s) {
    case rss::Strategy::baseline:
      p->run = [=](cudaStream_t st) { return rss::baseline(x, y, rows, cols, ws, bytes, st); };
      break;
    case rss::Strategy::local_fusion:
      p->run = [=](cudaStream_t st) { return rss::local_fusion(x, y, rows, cols, ws, bytes, st); };
      break;
    case rss::Strategy::baseline_graph: {
      auto graph = std::make_shared<rss::BaselineGraph<float>>();
      RSS_TRY(graph->capture(x, y, rows, cols, ws, bytes));
      p->run = [g = graph.get()](cudaStream_t st) { return g->replay(st); };
      p->state = graph;
      break;
    }
    default: {
      auto op = std::make_shared<rss::Megakernel<float>>();
      RSS_TRY(op->initialize(s, x, y, rows, cols, ws, bytes));
      p->run = [o = op.get()](cudaStream_t st) { return o->run(st); };
      p->state = op;
      evicted_elems = op->plan().evicted_tiles * op->plan().tile_elems;
      break;
    }
  }
  RSS_TRY(rss::describe_launches<float>(s, rows, cols, &p->launches));
  p->logical_bytes = strategy_bytes(s, b, evicted_elems);
  return rss::Status::success;
}

}  // namespace detail

/// Every variant the bench knows, in a fixed order (sessions shuffle it per round).
inline std::vector<Variant> all_variants() {
  std::vector<Variant> v;
  for (rss::Strategy s : rss::all_strategies) {
    v.push_back({rss::strategy_name(s), [s](const ShapeBuffers& b, Prepared* p) {
                   return detail::prepare_strategy(s, b, p);
                 }});
  }
  v.push_back({"copy_floor", [](const ShapeBuffers& b, Prepared* p) {
                 const std::int64_t bytes = detail::elements(b) * static_cast<std::int64_t>(sizeof(float));
                 const int sms = b.sm_count;
                 p->run = [=](cudaStream_t st) {
                   return cudaSuccess == copy_floor(b.x, b.y, bytes, sms, st) ? rss::Status::success
                                                                              : rss::Status::cuda_error;
                 };
                 p->launches = rss::LaunchList{};
                 p->launches.add({"copy_floor", 0, copy_threads, 0, false, 0});
                 p->logical_bytes = 2 * bytes;
                 return rss::Status::success;
               }});
  return v;
}

}  // namespace rss_bench
