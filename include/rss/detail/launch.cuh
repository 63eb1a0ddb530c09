#pragma once
// One place where kernels are launched: it records the launch's metadata, can describe a call
// without running it (dry run), and checks every launch's error.
#include <cuda_runtime.h>

#include <utility>

#include "rss/launch_info.hpp"
#include "rss/detail/cuda_status.cuh"

namespace rss::detail {

struct Launcher {
  cudaStream_t stream = nullptr;
  LaunchList* record = nullptr;  // optional: receives each launch's metadata
  bool dry_run = false;          // describe only: record, never launch
  unsigned cluster_size = 1;     // blocks per thread-block cluster (1: no cluster attribute)

  /// Adds to the description's logical bytes (LaunchList::logical_bytes): each strategy counts its own.
  void add_logical_bytes(std::int64_t bytes) const {
    if (record != nullptr) record->logical_bytes += bytes;
  }

  template <class... KernelArgs, class... Args>
  Status operator()(const char* name, void (*kernel)(KernelArgs...), unsigned grid, unsigned block,
                    std::size_t shared_bytes, bool cooperative, int blocks_per_sm, Args&&... args) const {
    if (record != nullptr) record->add({name, grid, block, shared_bytes, cooperative, blocks_per_sm, static_cast<int>(cluster_size)});
    if (dry_run) return Status::success;
    cudaLaunchConfig_t config{};
    config.gridDim = dim3(grid);
    config.blockDim = dim3(block);
    config.dynamicSmemBytes = shared_bytes;
    config.stream = stream;
    cudaLaunchAttribute attributes[2]{};
    unsigned count = 0;
    if (cooperative) {
      attributes[count].id = cudaLaunchAttributeCooperative;
      attributes[count++].val.cooperative = 1;
    }
    if (cluster_size > 1) {
      attributes[count].id = cudaLaunchAttributeClusterDimension;
      attributes[count++].val.clusterDim = {cluster_size, 1, 1};
    }
    config.attrs = count > 0 ? attributes : nullptr;
    config.numAttrs = count;
    const cudaError_t err = cudaLaunchKernelEx(&config, kernel, std::forward<Args>(args)...);
    if (err != cudaSuccess) {
      (void)cudaGetLastError();  // a refused launch leaves no error behind for the caller's next check
      return from_cuda(err);
    }
    return check_launch(stream);
  }
};

/// Blocks for a grid-stride loop over `work` items, at most what one 1-D launch allows.
inline unsigned grid_for(std::int64_t work) {
  constexpr std::int64_t max_grid = 2147483647;
  return static_cast<unsigned>(work < max_grid ? work : max_grid);
}

}  // namespace rss::detail
