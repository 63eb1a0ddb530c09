#pragma once
// Test-side device helpers: an owning device buffer and a check that fails the test on a CUDA error.
#include <catch2/catch.hpp>
#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>
#include <vector>

#define RSS_TEST_CUDA(call)                                                  \
  do {                                                                       \
    const cudaError_t rss_test_err_ = (call);                                \
    INFO(#call << ": " << cudaGetErrorString(rss_test_err_));                \
    REQUIRE(rss_test_err_ == cudaSuccess);                                   \
  } while (0)

namespace rss_test {

/// Owning device allocation of `bytes` bytes (cudaMalloc: 256-byte aligned).
class DeviceBuffer {
 public:
  explicit DeviceBuffer(std::size_t bytes) : bytes_(bytes) {
    if (bytes > 0) RSS_TEST_CUDA(cudaMalloc(&ptr_, bytes));
  }
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;
  ~DeviceBuffer() {
    if (ptr_ != nullptr) cudaFree(ptr_);
  }
  template <class T = void>
  T* get() const { return static_cast<T*>(ptr_); }
  std::size_t bytes() const { return bytes_; }

 private:
  void* ptr_ = nullptr;
  std::size_t bytes_;
};

/// Fills b with 0xFF bytes (NaN in every storage type, so an unwritten element fails) and waits for the fill:
/// cudaMemset runs on the legacy default stream, which does not order it before work on the non-blocking streams
/// some tests run on.
inline void poison(const DeviceBuffer& b) {
  RSS_TEST_CUDA(cudaMemset(b.get(), 0xFF, b.bytes()));
  RSS_TEST_CUDA(cudaDeviceSynchronize());
}

inline bool has_device() {
  int n = 0;
  return cudaGetDeviceCount(&n) == cudaSuccess && n > 0;
}

}  // namespace rss_test
