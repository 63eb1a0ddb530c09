#pragma once
// Strategy `baseline_graph`: the nine baseline kernels captured once into a CUDA Graph,
// instantiated once and replayed. A graph separates the definition of the work from its replay
// (one host launch instead of nine); it does not fuse the kernels, which stay nine nodes.
#include <cuda_runtime.h>

#include <cstdint>

#include "rss/strategies/baseline.cuh"

namespace rss {

/// Owns one captured and instantiated graph of the baseline for fixed pointers and shape.
///   BaselineGraph<float> graph;
///   graph.capture(x, y, rss::Layout::contiguous(rows, cols), workspace, bytes);   // once
///   graph.replay(stream);                                 // many times
template <class T>
class BaselineGraph {
 public:
  BaselineGraph() = default;
  BaselineGraph(const BaselineGraph&) = delete;
  BaselineGraph& operator=(const BaselineGraph&) = delete;
  BaselineGraph(BaselineGraph&& other) noexcept { *this = static_cast<BaselineGraph&&>(other); }
  BaselineGraph& operator=(BaselineGraph&& other) noexcept {
    if (this != &other) {
      reset();
      graph_ = other.graph_;
      exec_ = other.exec_;
      other.graph_ = nullptr;
      other.exec_ = nullptr;
    }
    return *this;
  }
  ~BaselineGraph() { reset(); }

  /// Captures the nine kernels for these arguments (validated as `baseline` validates them) on a
  /// private stream and instantiates the graph. A rows == 0 or cols == 0 problem captures nothing.
  Status capture(const T* x, T* y, const Layout& layout, void* workspace, std::size_t workspace_bytes) noexcept {
    std::size_t required = 0;
    RSS_TRY(baseline_workspace_bytes<T>(layout.rows, layout.cols, &required));
    RSS_TRY(detail::validate_device_call(x, y, layout, sizeof(T), workspace, workspace_bytes, required));
    reset();
    if (layout.empty()) return Status::success;

    cudaStream_t capture_stream = nullptr;
    RSS_TRY(detail::from_cuda(cudaStreamCreateWithFlags(&capture_stream, cudaStreamNonBlocking)));
    Status s = detail::from_cuda(cudaStreamBeginCapture(capture_stream, cudaStreamCaptureModeThreadLocal));
    if (ok(s)) {
      const Status launched = detail::baseline::launch(x, y, layout, workspace, detail::Launcher{capture_stream});
      cudaGraph_t graph = nullptr;
      s = detail::from_cuda(cudaStreamEndCapture(capture_stream, &graph));  // always ends the capture
      if (!ok(launched)) s = launched;
      if (ok(s)) s = detail::from_cuda(cudaGraphInstantiate(&exec_, graph, 0));
      if (ok(s)) {
        graph_ = graph;
      } else if (graph != nullptr) {
        cudaGraphDestroy(graph);
      }
    }
    cudaStreamDestroy(capture_stream);
    if (!ok(s)) reset();
    return s;
  }

  /// Launches the instantiated graph on `stream`. Asynchronous; never synchronises.
  Status replay(cudaStream_t stream = nullptr) const noexcept {
    if (exec_ == nullptr) return Status::success;  // an empty problem was captured
    RSS_TRY(detail::from_cuda(cudaGraphLaunch(exec_, stream)));
    return detail::check_launch(stream);
  }

  /// Kernel nodes in the captured graph (read from the graph itself, not counted by hand).
  Status kernel_node_count(int* count) const noexcept {
    if (count == nullptr) return Status::null_pointer;
    *count = 0;
    if (graph_ == nullptr) return Status::success;
    std::size_t n = 0;
    RSS_TRY(detail::from_cuda(cudaGraphGetNodes(graph_, nullptr, &n)));
    constexpr std::size_t max_nodes = 64;
    if (n > max_nodes) return Status::invalid_strategy;
    cudaGraphNode_t nodes[max_nodes];
    RSS_TRY(detail::from_cuda(cudaGraphGetNodes(graph_, nodes, &n)));
    for (std::size_t i = 0; i < n; ++i) {
      cudaGraphNodeType type{};
      RSS_TRY(detail::from_cuda(cudaGraphNodeGetType(nodes[i], &type)));
      if (type == cudaGraphNodeTypeKernel) ++*count;
    }
    return Status::success;
  }

  bool captured() const noexcept { return exec_ != nullptr; }

 private:
  void reset() noexcept {
    if (exec_ != nullptr) cudaGraphExecDestroy(exec_);  // in-flight replays finish first
    if (graph_ != nullptr) cudaGraphDestroy(graph_);
    exec_ = nullptr;
    graph_ = nullptr;
  }

  cudaGraph_t graph_ = nullptr;
  cudaGraphExec_t exec_ = nullptr;
};

/// One-call form of `baseline_graph`: captures, instantiates, replays once and releases the graph.
/// It exists so every strategy has the same call shape; to benefit from a graph, keep a
/// BaselineGraph and replay it.
template <class T>
Status baseline_graph(const T* x, T* y, const Layout& layout, void* workspace, std::size_t workspace_bytes,
                      cudaStream_t stream = nullptr) noexcept {
  BaselineGraph<T> graph;
  RSS_TRY(graph.capture(x, y, layout, workspace, workspace_bytes));
  return graph.replay(stream);
}

}  // namespace rss
