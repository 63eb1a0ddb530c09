#pragma once
// What rss needs to know about a GPU, in one struct: the planners, the workspace sizes and the tuning
// lookup all take it. At run time it is read once per device (rss/device.cuh); in host tests it comes
// from the descriptions below. Pure host C++: no CUDA headers.
#include <cstddef>

namespace rss {

/// Blocks per thread-block cluster that every device with clusters launches (the portable size).
inline constexpr int portable_cluster_size = 8;
/// Blocks per cluster rss launches at most: the non-portable limit of Hopper and Blackwell data-centre GPUs
/// (compute capability 9.x and 10.x). A kernel in clusters of more than portable_cluster_size blocks needs
/// cudaFuncAttributeNonPortableClusterSizeAllowed, which rss sets on its own kernels when it admits such a plan.
inline constexpr int max_cluster_blocks = 16;

/// The clusters rss launches on a device of compute capability `cc_major`.x that supports cluster launch.
constexpr int cluster_limit_of(int cc_major) noexcept {
  return cc_major == 9 || cc_major == 10 ? max_cluster_blocks : portable_cluster_size;
}

struct DeviceInfo {
  int ordinal = 0;                           // the CUDA device number
  int cc_major = 0;                          // compute capability
  int cc_minor = 0;
  int sm_count = 0;                          // cudaDevAttrMultiProcessorCount
  std::size_t shared_per_block_optin = 0;    // cudaDevAttrMaxSharedMemoryPerBlockOptin (232448 on H100/H200)
  std::size_t shared_per_sm = 0;             // cudaDevAttrMaxSharedMemoryPerMultiprocessor (233472)
  std::size_t reserved_shared_per_block = 0; // cudaDevAttrReservedSharedMemoryPerBlock (1024 on Hopper)
  int max_threads_per_sm = 0;                // cudaDevAttrMaxThreadsPerMultiProcessor (2048)
  int max_blocks_per_sm = 0;                 // cudaDevAttrMaxBlocksPerMultiprocessor (32)
  int regs_per_sm = 0;                       // cudaDevAttrMaxRegistersPerMultiprocessor (65536)
  bool cooperative_launch = false;           // cudaDevAttrCooperativeLaunch
  int max_cluster_size = 0;                  // blocks per cluster rss launches at most (cluster_limit_of), else 0
  std::size_t global_memory_bytes = 0;       // cudaDeviceProp::totalGlobalMem
  std::size_t l2_bytes = 0;                  // cudaDevAttrL2CacheSize

  constexpr int compute_capability() const noexcept { return cc_major * 10 + cc_minor; }
};

/// NVIDIA H100 SXM5: compute capability 9.0, 132 SMs, 227 KiB opt-in shared memory per block, 228 KiB per SM, 80 GB.
constexpr DeviceInfo h100_sxm_device_info() noexcept {
  DeviceInfo d{};
  d.cc_major = 9;
  d.cc_minor = 0;
  d.sm_count = 132;
  d.shared_per_block_optin = 232448;
  d.shared_per_sm = 233472;
  d.reserved_shared_per_block = 1024;
  d.max_threads_per_sm = 2048;
  d.max_blocks_per_sm = 32;
  d.regs_per_sm = 65536;
  d.cooperative_launch = true;
  d.max_cluster_size = cluster_limit_of(d.cc_major);
  d.global_memory_bytes = 85520809984ull;  // 79.6 GiB as the runtime reports it
  d.l2_bytes = 52428800;
  return d;
}

/// NVIDIA H200: the H100 SXM's SM array with 141 GB of faster memory (as read on the H200s rss is measured on).
constexpr DeviceInfo h200_device_info() noexcept {
  DeviceInfo d = h100_sxm_device_info();
  d.global_memory_bytes = 150754820096ull;  // 140.4 GiB
  d.l2_bytes = 62914560;
  return d;
}

}  // namespace rss
