#pragma once
// Launch metadata: every launch a strategy makes is describable without running it. Benches and
// reports count kernels from this, never from their own bookkeeping.
#include <cstddef>
#include <cstdint>

namespace rss {

struct LaunchInfo {
  const char* kernel;         // a stable, human-readable kernel name
  unsigned grid;              // blocks (1-D grids throughout)
  unsigned block;             // threads per block
  std::size_t shared_bytes;   // dynamic shared memory per block
  bool cooperative;           // launched with the cooperative attribute (co-residency guaranteed)
  int blocks_per_sm;          // occupancy answer for this kernel and shared size; 0 when not queried
  int cluster_size = 1;       // blocks per thread-block cluster (1: launched without clusters)
};

/// The launches of one call, in issue order. Holds the first `capacity` entries; `kernels` and
/// `host_launches` always count all of them.
struct LaunchList {
  static constexpr int capacity = 64;
  LaunchInfo items[capacity];
  int size = 0;                      // entries stored in items
  std::int64_t kernels = 0;          // kernel executions per call
  std::int64_t host_launches = 0;    // launch calls made by the host (a graph replay is one)
  std::int64_t evicted_tiles = 0;    // megakernel: tiles recomputed from x instead of retained
  std::int64_t evicted_elements = 0; // the elements of those tiles (each read three times)
  std::int64_t logical_bytes = 0;    // global-memory bytes the call's algorithm reads and writes: its inputs and
                                     // outputs and full-size intermediates, as often as it accesses them (per-row
                                     // values aside); not DRAM traffic, which caches change
  bool graph = false;                // the kernels run as nodes of one CUDA Graph
  std::int64_t graph_kernel_nodes = 0;  // kernel nodes read from that graph once it exists (0: none yet)

  void add(const LaunchInfo& info) {
    if (size < capacity) items[size++] = info;
    ++kernels;
    if (!graph) ++host_launches;
  }
  bool any_cooperative() const {
    for (int i = 0; i < size; ++i)
      if (items[i].cooperative) return true;
    return false;
  }
};

}  // namespace rss
