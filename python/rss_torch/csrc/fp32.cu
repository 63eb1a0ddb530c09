#include "impl.cuh"
RSS_TORCH_DEFINE(fp32, float)

namespace rss_torch {
const char* status_message(int status) { return rss::status_message(static_cast<rss::Status>(status)); }
}  // namespace rss_torch
