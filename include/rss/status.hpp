#pragma once
// Status codes returned by every rss host function. The library never throws, exits or prints:
// it reports through these values, and status_message() turns one into text for the caller.

namespace rss {

enum class Status : int {
  success = 0,
  null_pointer,            // x, y or workspace is null while rows * cols > 0
  negative_size,           // rows or cols < 0
  size_overflow,           // rows * cols (or a workspace size derived from it) does not fit in 64 bits
  workspace_too_small,     // the caller's workspace is smaller than the size query answered
  misaligned_workspace,    // the workspace is not aligned to rss::workspace_alignment bytes
  no_device,               // no usable CUDA device (none present, or the driver is missing)
  unsupported_device,      // the device lacks what the strategy needs (compute capability, shared memory)
  cooperative_unsupported, // the device cannot launch cooperative kernels
  not_admissible,          // the blocks that wait on each other cannot be made co-resident (or one cluster cannot hold the row)
  invalid_strategy,        // an unknown strategy or configuration value
  cuda_error,              // a CUDA runtime call failed; rss::last_cuda_error() says which error
  invalid_layout,          // a leading dimension is below cols
  overlapping_buffers,     // y overlaps x without being exactly x (in place), or overlaps the workspace
  not_device_memory,       // x, y or the workspace is not device (or managed) memory of the current device
  partial_output,          // a CUDA error after the first launch: some rows of y may already be written
  misaligned_statistics,   // the row statistics pointer is not aligned to alignof(rss::RowStatistics) (4 bytes)
};

/// A short, static, human-readable description of a status. Never null.
constexpr const char* status_message(Status s) noexcept {
  switch (s) {
    case Status::success: return "success";
    case Status::null_pointer: return "a required pointer is null while rows * cols > 0";
    case Status::negative_size: return "rows and cols must be non-negative";
    case Status::size_overflow: return "rows * cols, or a size derived from it, overflows 64-bit arithmetic";
    case Status::workspace_too_small: return "the workspace is smaller than the size query returned";
    case Status::misaligned_workspace: return "the workspace pointer is not aligned to rss::workspace_alignment";
    case Status::no_device: return "no usable CUDA device";
    case Status::unsupported_device: return "the device lacks a capability this strategy needs";
    case Status::cooperative_unsupported: return "the device does not support cooperative launches";
    case Status::not_admissible:
      return "the cooperating blocks cannot be made co-resident on this device (for cluster_row: the row is longer "
             "than one cluster holds)";
    case Status::invalid_strategy: return "unknown strategy or configuration value";
    case Status::cuda_error: return "a CUDA runtime call failed";
    case Status::invalid_layout: return "a leading dimension (ld_x or ld_y) is smaller than cols";
    case Status::overlapping_buffers:
      return "y overlaps x without being the same matrix, or a matrix overlaps the workspace";
    case Status::not_device_memory: return "x, y or the workspace is not device or managed memory";
    case Status::partial_output:
      return "a CUDA launch failed after earlier launches of the call: y may be partly written";
    case Status::misaligned_statistics: return "the row statistics pointer is not aligned to 4 bytes";
  }
  return "unknown status";
}

constexpr bool ok(Status s) noexcept { return s == Status::success; }

}  // namespace rss

/// Returns from the enclosing function when `expr` (an rss::Status) is not success.
#define RSS_TRY(expr)                                        \
  do {                                                       \
    const ::rss::Status rss_try_status_ = (expr);            \
    if (!::rss::ok(rss_try_status_)) return rss_try_status_; \
  } while (0)
