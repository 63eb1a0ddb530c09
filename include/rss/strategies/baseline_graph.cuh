#pragma once
// Strategy `baseline_graph`: the nine baseline kernels captured once into a CUDA Graph, instantiated
// once and replayed. A graph separates the definition of the work from its replay (one host launch
// instead of nine); it does not fuse the kernels, which stay nine nodes.
//
// Inside someone else's stream capture it stays out of the way: prepared on a stream that is being
// captured (the one-call form inside the caller's capture), it makes no graph of its own (capturing
// and instantiating one there invalidates the caller's capture) and issues the nine kernels into the
// caller's capture; a prepared graph run on a capturing stream does the same (a graph launch cannot
// be captured). Its own graph is captured on a private stream with this thread's capture mode relaxed,
// so that a capture elsewhere in the program does not refuse it.
#include <cuda_runtime.h>

#include <cstdint>
#include <memory>

#include "rss/strategies/baseline.cuh"

namespace rss::detail {
namespace baseline_graph {

/// One captured and instantiated graph; shared by copies of a plan, released with the last.
class Graph {
 public:
  Graph() = default;
  Graph(const Graph&) = delete;
  Graph& operator=(const Graph&) = delete;
  ~Graph() {
    if (exec_ != nullptr) cudaGraphExecDestroy(exec_);  // in-flight replays finish first
    if (graph_ != nullptr) cudaGraphDestroy(graph_);
  }

  template <class T>
  Status capture(const Call<T>& c) noexcept {
    cudaStreamCaptureMode mode = cudaStreamCaptureModeRelaxed;
    RSS_TRY(from_cuda(cudaThreadExchangeStreamCaptureMode(&mode)));
    const Status s = capture_relaxed(c);
    (void)cudaThreadExchangeStreamCaptureMode(&mode);  // back to the caller's mode
    return s;
  }

  cudaGraphExec_t exec() const noexcept { return exec_; }

  /// Kernel nodes in the captured graph (read from the graph itself, not counted by hand).
  Status kernel_node_count(int* count) const noexcept {
    std::size_t n = 0;
    RSS_TRY(from_cuda(cudaGraphGetNodes(graph_, nullptr, &n)));
    constexpr std::size_t max_nodes = 64;
    if (n > max_nodes) return Status::invalid_strategy;
    cudaGraphNode_t nodes[max_nodes];
    RSS_TRY(from_cuda(cudaGraphGetNodes(graph_, nodes, &n)));
    int kernels = 0;
    for (std::size_t i = 0; i < n; ++i) {
      cudaGraphNodeType type{};
      RSS_TRY(from_cuda(cudaGraphNodeGetType(nodes[i], &type)));
      if (type == cudaGraphNodeTypeKernel) ++kernels;
    }
    *count = kernels;
    return Status::success;
  }

 private:
  template <class T>
  Status capture_relaxed(const Call<T>& c) noexcept {
    cudaStream_t stream = nullptr;
    RSS_TRY(from_cuda(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking)));
    Status s = from_cuda(cudaStreamBeginCapture(stream, cudaStreamCaptureModeRelaxed));
    if (ok(s)) {
      const Status launched = baseline::launch_nine(c, Launcher{stream});
      cudaGraph_t graph = nullptr;
      s = from_cuda(cudaStreamEndCapture(stream, &graph));  // always ends the capture
      if (!ok(launched)) s = launched;
      if (ok(s)) s = from_cuda(cudaGraphInstantiate(&exec_, graph, 0));
      if (ok(s)) {
        graph_ = graph;
      } else if (graph != nullptr) {
        cudaGraphDestroy(graph);
      }
    }
    cudaStreamDestroy(stream);
    return s;
  }

  cudaGraph_t graph_ = nullptr;
  cudaGraphExec_t exec_ = nullptr;
};

/// Whether work issued on `stream` is being captured into a graph (the caller's, not ours).
inline bool capturing(cudaStream_t stream) noexcept {
  cudaStreamCaptureStatus status = cudaStreamCaptureStatusNone;
  if (cudaStreamIsCapturing(stream, &status) != cudaSuccess) {
    (void)cudaGetLastError();
    return false;
  }
  return status == cudaStreamCaptureStatusActive;
}

}  // namespace baseline_graph

/// Strategy `baseline_graph`: the nine kernels as one instantiated graph, replayed.
struct BaselineGraph {
  static constexpr Strategy id = Strategy::baseline_graph;
  template <class T>
  struct Plan {
    std::shared_ptr<baseline_graph::Graph> graph;  // set by prepare(), unless it ran inside a capture
  };

  template <class T>
  static Status workspace_bytes(std::int64_t rows, std::int64_t cols, const DeviceInfo& d, std::size_t* bytes) noexcept {
    return Baseline::workspace_bytes<T>(rows, cols, d, bytes);
  }
  template <class T>
  static Status make_plan(const Call<T>&, const DeviceInfo&, const Config&, Plan<T>*) noexcept {
    return Status::success;
  }
  template <class T>
  static Status prepare(Plan<T>& plan, const Call<T>& c, cudaStream_t stream) noexcept {
    if (baseline_graph::capturing(stream)) return Status::success;  // the caller's graph holds the kernels
    std::shared_ptr<baseline_graph::Graph> graph(new (std::nothrow) baseline_graph::Graph);
    if (graph == nullptr) return Status::cuda_error;  // host allocation failed
    RSS_TRY(graph->capture(c));
    plan.graph = std::move(graph);
    return Status::success;
  }
  /// Replays the graph; into a capturing stream (or without a graph), issues the nine kernels. A dry run describes
  /// the nine kernels as one host launch of a graph.
  template <class T>
  static Status launch(const Plan<T>& plan, const Call<T>& c, const Launcher& launcher) noexcept {
    if (launcher.dry_run) {
      RSS_TRY(baseline::launch_nine(c, launcher));
      if (launcher.record != nullptr) {
        launcher.record->graph = true;
        launcher.record->host_launches = 1;
        int nodes = 0;
        if (plan.graph != nullptr) RSS_TRY(plan.graph->kernel_node_count(&nodes));
        launcher.record->graph_kernel_nodes = nodes;
      }
      return Status::success;
    }
    if (plan.graph == nullptr || baseline_graph::capturing(launcher.stream)) {
      return baseline::launch_nine(c, launcher);
    }
    RSS_TRY(from_cuda(cudaGraphLaunch(plan.graph->exec(), launcher.stream)));
    return check_launch(launcher.stream);
  }
};

}  // namespace rss::detail
