#pragma once
// NCCL results as rss::Status. rss has no NCCL status of its own: a failed NCCL call returns
// Status::cuda_error, and rss::last_nccl_error() says which NCCL result it was (ncclSuccess when the
// failure came from the CUDA runtime instead).
#include <nccl.h>

#include "rss/detail/cuda_status.cuh"
#include "rss/status.hpp"

#if !defined(NCCL_VERSION_CODE) || NCCL_VERSION_CODE < 22800
#error "rss/sharded needs NCCL 2.28 or newer (its device API and symmetric windows)"
#endif

namespace rss {

/// The NCCL result behind the last Status::cuda_error that rss/sharded returned on this host thread.
inline ncclResult_t last_nccl_error() noexcept { return detail::last_error_slot<ncclResult_t, ncclSuccess>(); }

namespace detail {

inline Status from_nccl(ncclResult_t r) noexcept {
  if (r == ncclSuccess) return Status::success;
  last_error_slot<ncclResult_t, ncclSuccess>() = r;
  if (r == ncclUnhandledCudaError) {  // keep the CUDA error for rss::last_cuda_error() (reading it clears it)
    const cudaError_t cuda = cudaGetLastError();
    (void)from_cuda(cuda != cudaSuccess ? cuda : cudaErrorUnknown);
  }
  return Status::cuda_error;
}

}  // namespace detail
}  // namespace rss

/// Returns from the enclosing function when an NCCL call fails.
#define RSS_TRY_NCCL(expr) RSS_TRY(::rss::detail::from_nccl(expr))
