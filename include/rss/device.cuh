#pragma once
// The one place that reads device attributes: rss::device_info reads a device's description once and
// caches it (thread-safe), so planning, workspace queries and the tuning lookup cost no attribute
// queries after the first call. Also the argument checks that need the runtime (is this device memory?).
#include <cuda_runtime.h>

#include <atomic>
#include <mutex>

#include "rss/detail/cuda_status.cuh"
#include "rss/device_info.hpp"
#include "rss/validate.hpp"

namespace rss {
namespace detail {

/// The current device; no_device when there is none (or no driver).
inline Status current_device(int* device) noexcept {
  const cudaError_t err = cudaGetDevice(device);
  if (err == cudaSuccess) return Status::success;
  (void)cudaGetLastError();  // clear the non-sticky error so later calls see a clean state
  int count = 0;
  if (cudaGetDeviceCount(&count) != cudaSuccess || count == 0) {
    (void)cudaGetLastError();
    return Status::no_device;
  }
  return from_cuda(err);
}

inline Status read_device_info(int ordinal, DeviceInfo* d) noexcept {
  int count = 0;
  if (cudaGetDeviceCount(&count) != cudaSuccess || count == 0) {
    (void)cudaGetLastError();
    return Status::no_device;
  }
  if (ordinal < 0 || ordinal >= count) return Status::no_device;
  DeviceInfo info{};
  info.ordinal = ordinal;
  int v = 0;
  const auto get = [&](cudaDeviceAttr a) { return from_cuda(cudaDeviceGetAttribute(&v, a, ordinal)); };
  RSS_TRY(get(cudaDevAttrComputeCapabilityMajor)); info.cc_major = v;
  RSS_TRY(get(cudaDevAttrComputeCapabilityMinor)); info.cc_minor = v;
  RSS_TRY(get(cudaDevAttrMultiProcessorCount)); info.sm_count = v;
  RSS_TRY(get(cudaDevAttrMaxSharedMemoryPerBlockOptin)); info.shared_per_block_optin = static_cast<std::size_t>(v);
  RSS_TRY(get(cudaDevAttrMaxSharedMemoryPerMultiprocessor)); info.shared_per_sm = static_cast<std::size_t>(v);
  RSS_TRY(get(cudaDevAttrReservedSharedMemoryPerBlock)); info.reserved_shared_per_block = static_cast<std::size_t>(v);
  RSS_TRY(get(cudaDevAttrMaxThreadsPerMultiProcessor)); info.max_threads_per_sm = v;
  RSS_TRY(get(cudaDevAttrMaxBlocksPerMultiprocessor)); info.max_blocks_per_sm = v;
  RSS_TRY(get(cudaDevAttrMaxRegistersPerMultiprocessor)); info.regs_per_sm = v;
  RSS_TRY(get(cudaDevAttrCooperativeLaunch)); info.cooperative_launch = v != 0;
  RSS_TRY(get(cudaDevAttrClusterLaunch)); info.max_cluster_size = v != 0 ? cluster_limit_of(info.cc_major) : 0;
  RSS_TRY(get(cudaDevAttrL2CacheSize)); info.l2_bytes = static_cast<std::size_t>(v);
  cudaDeviceProp prop{};  // once per device (the description is cached): totalGlobalMem has no attribute
  RSS_TRY(from_cuda(cudaGetDeviceProperties(&prop, ordinal)));
  info.global_memory_bytes = prop.totalGlobalMem;
  *d = info;
  return Status::success;
}

/// Devices whose description is cached; a larger ordinal is read on every call.
inline constexpr int cached_devices = 64;

struct DeviceInfoSlot {
  std::atomic<bool> ready{false};
  DeviceInfo info{};
};

inline DeviceInfoSlot* device_info_slots() noexcept {
  static DeviceInfoSlot slots[cached_devices];
  return slots;
}

}  // namespace detail

/// The description of device `ordinal`, read from the runtime on the first call and cached.
inline Status device_info(int ordinal, DeviceInfo* out) noexcept {
  if (out == nullptr) return Status::null_pointer;
  if (ordinal < 0 || ordinal >= detail::cached_devices) return detail::read_device_info(ordinal, out);
  detail::DeviceInfoSlot& slot = detail::device_info_slots()[ordinal];
  if (!slot.ready.load(std::memory_order_acquire)) {
    static std::mutex fill;
    const std::lock_guard<std::mutex> lock(fill);
    if (!slot.ready.load(std::memory_order_relaxed)) {
      RSS_TRY(detail::read_device_info(ordinal, &slot.info));
      slot.ready.store(true, std::memory_order_release);
    }
  }
  *out = slot.info;
  return Status::success;
}

/// The description of the current device.
inline Status current_device_info(DeviceInfo* out) noexcept {
  if (out == nullptr) return Status::null_pointer;
  int device = 0;
  RSS_TRY(detail::current_device(&device));
  return device_info(device, out);
}

namespace detail {

/// success when p is device memory of `device` or managed memory; not_device_memory for host memory
/// (pageable, pinned or registered) and for device memory of another device.
inline Status check_device_memory(const void* p, int device) noexcept {
  cudaPointerAttributes a{};
  const cudaError_t err = cudaPointerGetAttributes(&a, p);
  if (err != cudaSuccess) {
    (void)cudaGetLastError();
    return err == cudaErrorInvalidValue ? Status::not_device_memory : from_cuda(err);
  }
  if (a.type == cudaMemoryTypeManaged) return Status::success;
  if (a.type == cudaMemoryTypeDevice && a.device == device) return Status::success;
  return Status::not_device_memory;
}

/// validate_call, then the checks that need the device: x, y and the workspace (when one is needed)
/// are memory the kernels of `device` can use.
inline Status validate_device_call(const void* x, const void* y, const Layout& l, std::size_t element_bytes,
                                   const void* workspace, std::size_t workspace_bytes, std::size_t required_workspace,
                                   int device) noexcept {
  RSS_TRY(validate_call(x, y, l, element_bytes, workspace, workspace_bytes, required_workspace));
  if (l.empty()) return Status::success;
  RSS_TRY(check_device_memory(x, device));
  if (y != x) RSS_TRY(check_device_memory(y, device));
  if (required_workspace > 0) RSS_TRY(check_device_memory(workspace, device));
  return Status::success;
}

/// The same on the current device.
inline Status validate_device_call(const void* x, const void* y, const Layout& l, std::size_t element_bytes,
                                   const void* workspace, std::size_t workspace_bytes,
                                   std::size_t required_workspace) noexcept {
  int device = 0;
  RSS_TRY(current_device(&device));
  return validate_device_call(x, y, l, element_bytes, workspace, workspace_bytes, required_workspace, device);
}

}  // namespace detail
}  // namespace rss
