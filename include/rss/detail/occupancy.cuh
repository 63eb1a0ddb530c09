#pragma once
// The runtime's answers about one kernel on one device (its attributes, how many blocks fit an SM),
// asked once and cached: planning a call repeats the same questions, and the one-call API plans on
// every call. Thread-safe; a full cache answers uncached.
#include <cuda_runtime.h>

#include <cstddef>
#include <mutex>

#include "rss/detail/cuda_status.cuh"
#include "rss/device_info.hpp"

namespace rss::detail {

/// What planning needs to know about a compiled kernel.
struct KernelFacts {
  int binary_version = 0;         // compute capability of the machine code that runs (90: sm_90)
  std::size_t static_shared = 0;  // its static shared memory
  std::size_t max_dynamic = 0;    // dynamic shared memory it may launch with (limit raised to this)
};

struct OccupancyKey {
  const void* kernel;
  int device;
  int threads;           // 0: the KernelFacts entry
  std::size_t dynamic;
  int cluster_size = 0;  // > 0: the active_clusters entry
  bool operator==(const OccupancyKey& o) const noexcept {
    return kernel == o.kernel && device == o.device && threads == o.threads && dynamic == o.dynamic &&
           cluster_size == o.cluster_size;
  }
};

/// Open addressing over a fixed table: no allocation, a few probes per question.
class OccupancyCache {
 public:
  static OccupancyCache& instance() noexcept {
    static OccupancyCache cache;
    return cache;
  }
  bool find(const OccupancyKey& k, KernelFacts* facts, int* blocks) noexcept {
    const std::lock_guard<std::mutex> lock(mutex_);
    for (std::size_t i = hash(k), probes = 0; probes < capacity && entries_[i].used; i = (i + 1) % capacity, ++probes) {
      if (entries_[i].key == k) {
        if (facts != nullptr) *facts = entries_[i].facts;
        if (blocks != nullptr) *blocks = entries_[i].blocks;
        return true;
      }
    }
    return false;
  }
  void insert(const OccupancyKey& k, const KernelFacts& facts, int blocks) noexcept {
    const std::lock_guard<std::mutex> lock(mutex_);
    if (size_ * 2 >= capacity) return;  // half full: answer uncached from now on
    std::size_t i = hash(k);
    while (entries_[i].used && !(entries_[i].key == k)) i = (i + 1) % capacity;
    if (!entries_[i].used) ++size_;
    entries_[i] = {k, facts, blocks, true};
  }

 private:
  static constexpr std::size_t capacity = 4096;
  static std::size_t hash(const OccupancyKey& k) noexcept {
    std::size_t h = reinterpret_cast<std::size_t>(k.kernel) * 0x9E3779B97F4A7C15ull;
    h ^= (static_cast<std::size_t>(k.device) << 40) ^ (static_cast<std::size_t>(k.threads) << 20) ^ k.dynamic ^
         (static_cast<std::size_t>(k.cluster_size) << 56);
    h *= 0xBF58476D1CE4E5B9ull;
    return (h >> 17) % capacity;
  }
  struct Entry {
    OccupancyKey key;
    KernelFacts facts;
    int blocks;
    bool used;
  };
  std::mutex mutex_;
  Entry entries_[capacity]{};
  std::size_t size_ = 0;
};

/// The facts of `kernel` on device d; the first call also raises its dynamic shared-memory limit to
/// the most a block may have, so that every later launch and occupancy query may use up to that.
template <class Kernel>
Status kernel_facts(Kernel kernel, const DeviceInfo& d, KernelFacts* out) noexcept {
  const OccupancyKey key{reinterpret_cast<const void*>(kernel), d.ordinal, 0, 0};
  if (OccupancyCache::instance().find(key, out, nullptr)) return Status::success;
  cudaFuncAttributes a{};
  RSS_TRY(from_cuda(cudaFuncGetAttributes(&a, kernel)));
  KernelFacts facts;
  facts.binary_version = a.binaryVersion;
  facts.static_shared = a.sharedSizeBytes;
  facts.max_dynamic = d.shared_per_block_optin > a.sharedSizeBytes ? d.shared_per_block_optin - a.sharedSizeBytes : 0;
  if (facts.max_dynamic > static_cast<std::size_t>(a.maxDynamicSharedSizeBytes)) {
    RSS_TRY(from_cuda(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                           static_cast<int>(facts.max_dynamic))));
  }
  OccupancyCache::instance().insert(key, facts, 0);
  *out = facts;
  return Status::success;
}

/// Blocks of `kernel` (threads per block, dynamic shared bytes) that fit one SM of device d. Call
/// kernel_facts first when `dynamic` may pass 48 KB.
template <class Kernel>
Status blocks_per_sm(Kernel kernel, const DeviceInfo& d, int threads, std::size_t dynamic, int* out) noexcept {
  const OccupancyKey key{reinterpret_cast<const void*>(kernel), d.ordinal, threads, dynamic};
  if (OccupancyCache::instance().find(key, nullptr, out)) return Status::success;
  int blocks = 0;
  RSS_TRY(from_cuda(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&blocks, kernel, threads, dynamic)));
  OccupancyCache::instance().insert(key, KernelFacts{}, blocks);
  *out = blocks;
  return Status::success;
}

/// Clusters of `cluster_size` blocks of `kernel` (threads per block, dynamic shared bytes per block) that
/// device d can hold at once (cudaOccupancyMaxActiveClusters); 0: not even one. Call kernel_facts first
/// when `dynamic` may pass 48 KB. A cluster of more than portable_cluster_size blocks needs the kernel's
/// non-portable attribute, for this query and for the launch: it is set here, once per kernel, size and device
/// (with the answer cached), not on every plan.
template <class Kernel>
Status active_clusters(Kernel kernel, const DeviceInfo& d, int threads, int cluster_size, std::size_t dynamic,
                       int* out) noexcept {
  const OccupancyKey key{reinterpret_cast<const void*>(kernel), d.ordinal, threads, dynamic, cluster_size};
  if (OccupancyCache::instance().find(key, nullptr, out)) return Status::success;
  cudaLaunchConfig_t config{};
  config.gridDim = dim3(static_cast<unsigned>(cluster_size));
  config.blockDim = dim3(static_cast<unsigned>(threads));
  config.dynamicSmemBytes = dynamic;
  cudaLaunchAttribute attribute{};
  attribute.id = cudaLaunchAttributeClusterDimension;
  attribute.val.clusterDim.x = static_cast<unsigned>(cluster_size);
  attribute.val.clusterDim.y = 1;
  attribute.val.clusterDim.z = 1;
  config.attrs = &attribute;
  config.numAttrs = 1;
  if (cluster_size > portable_cluster_size) {
    RSS_TRY(from_cuda(cudaFuncSetAttribute(kernel, cudaFuncAttributeNonPortableClusterSizeAllowed, 1)));
  }
  int clusters = 0;
  RSS_TRY(from_cuda(cudaOccupancyMaxActiveClusters(&clusters, kernel, &config)));
  OccupancyCache::instance().insert(key, KernelFacts{}, clusters);
  *out = clusters;
  return Status::success;
}

}  // namespace rss::detail
