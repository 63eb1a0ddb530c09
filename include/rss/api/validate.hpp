#pragma once
// Argument checks shared by every strategy. They run before any launch, so bad input leaves y untouched.
#include <cstddef>
#include <cstdint>
#include <limits>

#include "rss/detail/workspace.hpp"
#include "rss/status.hpp"

namespace rss {

/// Checks sizes only: negative sizes, and rows * cols * element_bytes overflowing 64-bit indexing.
inline Status validate_shape(std::int64_t rows, std::int64_t cols, std::size_t element_bytes) noexcept {
  if (rows < 0 || cols < 0) return Status::negative_size;
  if (rows == 0 || cols == 0) return Status::success;
  const auto limit = static_cast<std::uint64_t>(std::numeric_limits<std::int64_t>::max()) / element_bytes;
  if (static_cast<std::uint64_t>(rows) > limit / static_cast<std::uint64_t>(cols)) return Status::size_overflow;
  return Status::success;
}

/// Full check of a call: shape, pointers, and the workspace against the bytes the strategy needs.
/// A call with rows == 0 or cols == 0 passes with any pointers: it does nothing.
inline Status validate_call(const void* x, const void* y, std::int64_t rows, std::int64_t cols,
                            std::size_t element_bytes, const void* workspace, std::size_t workspace_bytes,
                            std::size_t required_workspace) noexcept {
  if (const Status s = validate_shape(rows, cols, element_bytes); !ok(s)) return s;
  if (rows == 0 || cols == 0) return Status::success;
  if (x == nullptr || y == nullptr) return Status::null_pointer;
  if (required_workspace > 0) {
    if (workspace == nullptr) return Status::null_pointer;
    if (workspace_bytes < required_workspace) return Status::workspace_too_small;
    if (reinterpret_cast<std::uintptr_t>(workspace) % workspace_alignment != 0) return Status::misaligned_workspace;
  }
  return Status::success;
}

}  // namespace rss
