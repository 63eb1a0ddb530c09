#pragma once
// Argument checks shared by every strategy. They run once, at the API's boundary and before any
// launch, so bad input leaves y untouched; strategies receive validated calls. Pure host code: the
// checks that need the CUDA runtime (is this device memory?) are in rss/device.cuh.
#include <cstddef>
#include <cstdint>
#include <initializer_list>
#include <limits>

#include "rss/status.hpp"
#include "rss/types.hpp"

namespace rss {

/// Whether a rebind asks the CUDA runtime where its pointers live (Operator::rebind, BackwardOperator::rebind
/// and rebind_saved; initialize always asks). `runtime` (the default): one cudaPointerGetAttributes per matrix,
/// statistics and workspace, about 1 us each; a pointer that is not device memory of the operator's device (or
/// managed memory) is refused with not_device_memory. `vouched`: the caller guarantees that every pointer of the
/// call is device (or managed) memory of that device, as a framework can for memory its own device allocator
/// handed out; the host-side checks still run (sizes, null pointers, alignment, overlap). rss cannot check a
/// vouch: a wrong one (host memory, another device's memory) is the caller's undefined behaviour. A framework
/// tensor is not such a guarantee by itself: torch makes a CUDA tensor of pinned host memory exposed through
/// __cuda_array_interface__ (the PyTorch package vouches only for storage of torch's CUDA allocator).
enum class PointerCheck { runtime, vouched };

/// Checks sizes only: negative sizes, and rows * cols * element_bytes overflowing 64-bit indexing.
inline Status validate_shape(std::int64_t rows, std::int64_t cols, std::size_t element_bytes) noexcept {
  if (rows < 0 || cols < 0) return Status::negative_size;
  if (rows == 0 || cols == 0) return Status::success;
  const auto limit = static_cast<std::uint64_t>(std::numeric_limits<std::int64_t>::max()) / element_bytes;
  if (static_cast<std::uint64_t>(rows) > limit / static_cast<std::uint64_t>(cols)) return Status::size_overflow;
  return Status::success;
}

namespace detail {
/// Bytes from the first element of a matrix with leading dimension `ld` to one past its last element.
/// The layout has been validated, so this does not overflow.
inline std::uint64_t extent_bytes(const Layout& l, std::int64_t ld, std::size_t element_bytes) noexcept {
  return (static_cast<std::uint64_t>(l.rows - 1) * static_cast<std::uint64_t>(ld) + static_cast<std::uint64_t>(l.cols)) *
         element_bytes;
}

inline bool ranges_overlap(const void* a, std::uint64_t a_bytes, const void* b, std::uint64_t b_bytes) noexcept {
  const auto pa = reinterpret_cast<std::uintptr_t>(a), pb = reinterpret_cast<std::uintptr_t>(b);
  return pa < pb + b_bytes && pb < pa + a_bytes;
}
}  // namespace detail

/// Checks a layout: sizes, leading dimensions of at least cols, and the extent of x and y in bytes
/// fitting 64-bit arithmetic. An empty layout (rows == 0 or cols == 0) passes with any leading dimensions.
inline Status validate_layout(const Layout& l, std::size_t element_bytes) noexcept {
  if (const Status s = validate_shape(l.rows, l.cols, element_bytes); !ok(s)) return s;
  if (l.empty()) return Status::success;
  if (l.ld_x < l.cols || l.ld_y < l.cols) return Status::invalid_layout;
  const auto limit = static_cast<std::uint64_t>(std::numeric_limits<std::int64_t>::max()) / element_bytes;
  for (const std::int64_t ld : {l.ld_x, l.ld_y}) {
    const auto room = limit - static_cast<std::uint64_t>(l.cols);  // cols * element_bytes fits: checked above
    if (static_cast<std::uint64_t>(l.rows - 1) > room / static_cast<std::uint64_t>(ld)) return Status::size_overflow;
  }
  return Status::success;
}

/// Full check of a call: layout, pointers, aliasing, and the workspace against the bytes the strategy
/// needs. In place (y == x with ld_y == ld_x) is accepted; any other overlap of x and y, or of the
/// workspace with either, is refused. A call with rows == 0 or cols == 0 passes with any pointers.
inline Status validate_call(const void* x, const void* y, const Layout& l, std::size_t element_bytes,
                            const void* workspace, std::size_t workspace_bytes, std::size_t required_workspace) noexcept {
  if (const Status s = validate_layout(l, element_bytes); !ok(s)) return s;
  if (l.empty()) return Status::success;
  if (x == nullptr || y == nullptr) return Status::null_pointer;
  const std::uint64_t x_bytes = detail::extent_bytes(l, l.ld_x, element_bytes);
  const std::uint64_t y_bytes = detail::extent_bytes(l, l.ld_y, element_bytes);
  const bool in_place = x == y && l.ld_x == l.ld_y;
  if (!in_place && detail::ranges_overlap(x, x_bytes, y, y_bytes)) return Status::overlapping_buffers;
  if (required_workspace > 0) {
    if (workspace == nullptr) return Status::null_pointer;
    if (workspace_bytes < required_workspace) return Status::workspace_too_small;
    if (reinterpret_cast<std::uintptr_t>(workspace) % workspace_alignment != 0) return Status::misaligned_workspace;
    if (detail::ranges_overlap(workspace, required_workspace, x, x_bytes) ||
        detail::ranges_overlap(workspace, required_workspace, y, y_bytes)) {
      return Status::overlapping_buffers;
    }
  }
  return Status::success;
}

/// The check of the optional per-row statistics of a forward call, after validate_call: `rows` entries
/// of RowStatistics at `stats`, aligned to 4 bytes and overlapping neither x, y nor the workspace. An
/// empty call passes with any pointer.
inline Status validate_statistics(const RowStatistics* stats, const void* x, const void* y, const Layout& l,
                                  std::size_t element_bytes, const void* workspace,
                                  std::size_t required_workspace) noexcept {
  if (l.empty()) return Status::success;
  if (stats == nullptr) return Status::null_pointer;
  if (reinterpret_cast<std::uintptr_t>(stats) % alignof(RowStatistics) != 0) return Status::misaligned_statistics;
  const std::uint64_t stats_bytes = static_cast<std::uint64_t>(l.rows) * sizeof(RowStatistics);
  if (detail::ranges_overlap(stats, stats_bytes, x, detail::extent_bytes(l, l.ld_x, element_bytes)) ||
      detail::ranges_overlap(stats, stats_bytes, y, detail::extent_bytes(l, l.ld_y, element_bytes)) ||
      (required_workspace > 0 && detail::ranges_overlap(stats, stats_bytes, workspace, required_workspace))) {
    return Status::overlapping_buffers;
  }
  return Status::success;
}

}  // namespace rss
