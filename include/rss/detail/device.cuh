#pragma once
// Reading the current device's properties as Status-returning calls.
#include <cuda_runtime.h>

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

}  // namespace rss::detail
