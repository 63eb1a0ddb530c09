#pragma once
// Turning CUDA runtime errors into rss::Status. Define RSS_DEBUG_SYNC to synchronise after every
// launch (debugging only: it serialises the stream and reports asynchronous faults at their source).
#include <cuda_runtime.h>

#include "rss/status.hpp"

namespace rss {

namespace detail {
/// The last error of a library (CUDA's, NCCL's) that rss turned into a Status, per host thread.
template <class Error, Error None>
Error& last_error_slot() noexcept {
  static thread_local Error err = None;
  return err;
}
inline cudaError_t& last_cuda_error_slot() noexcept { return last_error_slot<cudaError_t, cudaSuccess>(); }
}  // namespace detail

/// The CUDA error behind the last Status::cuda_error returned on this host thread.
inline cudaError_t last_cuda_error() noexcept { return detail::last_cuda_error_slot(); }

namespace detail {

inline Status from_cuda(cudaError_t err) noexcept {
  if (err == cudaSuccess) return Status::success;
  last_cuda_error_slot() = err;
  if (err == cudaErrorNoDevice || err == cudaErrorInsufficientDriver) return Status::no_device;
  if (err == cudaErrorCooperativeLaunchTooLarge || err == cudaErrorInvalidClusterSize) return Status::not_admissible;
  return Status::cuda_error;
}

/// Checks a kernel launch just made on `stream`.
inline Status check_launch(cudaStream_t stream) noexcept {
  Status s = from_cuda(cudaGetLastError());
#ifdef RSS_DEBUG_SYNC
  if (ok(s)) s = from_cuda(cudaStreamSynchronize(stream));
#else
  (void)stream;
#endif
  return s;
}

}  // namespace detail
}  // namespace rss
