#include "impl.cuh"
RSS_TORCH_DEFINE(fp32, float)

namespace rss_torch {
const char* status_message(int status) {
  if (status == kHostFailure) return "a host allocation of the extension's plan cache failed";
  return rss::status_message(static_cast<rss::Status>(status));
}
cudaError_t last_cuda_error() { return rss::last_cuda_error(); }
}  // namespace rss_torch
