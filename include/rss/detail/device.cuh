#pragma once
// Reading the current device's properties, and the argument checks that need the CUDA runtime, as
// Status-returning calls.
#include <cuda_runtime.h>

#include "rss/api/validate.hpp"
#include "rss/detail/cuda_status.cuh"

namespace rss::detail {

inline Status current_device(int* device) noexcept {
  int count = 0;
  if (cudaGetDeviceCount(&count) != cudaSuccess || count == 0) {
    (void)cudaGetLastError();  // clear the non-sticky error so later calls see a clean state
    return Status::no_device;
  }
  return from_cuda(cudaGetDevice(device));
}

inline Status device_attribute(cudaDeviceAttr attribute, int* value) noexcept {
  int device = 0;
  RSS_TRY(current_device(&device));
  return from_cuda(cudaDeviceGetAttribute(value, attribute, device));
}

inline Status current_sm_count(int* sm_count) noexcept {
  return device_attribute(cudaDevAttrMultiProcessorCount, sm_count);
}

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

/// validate_call, then the checks that need a device: there is one, and x, y and the workspace (when
/// one is needed) are memory its kernels can use.
inline Status validate_device_call(const void* x, const void* y, const Layout& l, std::size_t element_bytes,
                                   const void* workspace, std::size_t workspace_bytes,
                                   std::size_t required_workspace) noexcept {
  RSS_TRY(validate_call(x, y, l, element_bytes, workspace, workspace_bytes, required_workspace));
  if (l.empty()) return Status::success;
  int device = 0;
  RSS_TRY(current_device(&device));
  RSS_TRY(check_device_memory(x, device));
  if (y != x) RSS_TRY(check_device_memory(y, device));
  if (required_workspace > 0) RSS_TRY(check_device_memory(workspace, device));
  return Status::success;
}

}  // namespace rss::detail
