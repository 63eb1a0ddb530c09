#pragma once
// The backward pass's vocabulary: its strategies, the layout of its four matrices, and the argument
// checks that need no CUDA runtime (pure host code, testable without a GPU).
#include <cstddef>
#include <cstdint>
#include <initializer_list>
#include <limits>

#include "rss/workspace.hpp"
#include "rss/status.hpp"
#include "rss/types.hpp"
#include "rss/validate.hpp"

namespace rss {

/// Launch strategies of the backward pass.
enum class BackwardStrategy : int {
  two_pass,     // portable: one kernel sums each row's chunks into the workspace, one computes dx (x, y, dy read twice)
  cluster_row,  // one thread-block cluster per row, x, y and dy kept in registers: read once, dx written once (sm_90)
  automatic,    // cluster_row when a cluster holds the row and the device has clusters (a few rows of more
                // than 8 blocks' excepted: backward_prefers_two_pass), else two_pass
};

/// Every concrete backward strategy, in declaration order: tests and benches iterate this.
inline constexpr BackwardStrategy all_backward_strategies[] = {BackwardStrategy::two_pass, BackwardStrategy::cluster_row};

constexpr const char* backward_strategy_name(BackwardStrategy s) noexcept {
  switch (s) {
    case BackwardStrategy::two_pass: return "two_pass";
    case BackwardStrategy::cluster_row: return "cluster_row";
    case BackwardStrategy::automatic: return "automatic";
  }
  return "unknown";
}

/// The matrices of a backward call, row-major with leading dimensions in elements (each at least
/// cols): x and y (the forward's input and output), dy (the gradient of y) and dx (written).
/// dx may be dy itself (same leading dimension): each element of dy is read before the same thread writes it.
struct BackwardLayout {
  std::int64_t rows = 0;
  std::int64_t cols = 0;
  std::int64_t ld_x = 0;
  std::int64_t ld_y = 0;
  std::int64_t ld_dy = 0;
  std::int64_t ld_dx = 0;

  static constexpr BackwardLayout contiguous(std::int64_t rows, std::int64_t cols) noexcept {
    return {rows, cols, cols, cols, cols, cols};
  }
  constexpr bool empty() const noexcept { return rows == 0 || cols == 0; }
};

namespace detail::backward {

inline std::uint64_t extent_bytes(std::int64_t rows, std::int64_t cols, std::int64_t ld, std::size_t element_bytes) noexcept {
  return (static_cast<std::uint64_t>(rows - 1) * static_cast<std::uint64_t>(ld) + static_cast<std::uint64_t>(cols)) *
         element_bytes;
}

using rss::detail::ranges_overlap;  // rss/validate.hpp: the forward's test, the same for every call

/// A buffer of a call: its first byte and its extent in bytes.
struct Extent {
  const void* p;
  std::uint64_t bytes;
};

/// The checks both backward calls share, once their inputs are known: dx overlaps none of `read` (the
/// inputs other than dy) and overlaps dy only as exactly dy (in place); the workspace, when one is needed,
/// is present, large and aligned enough, and overlaps nothing.
inline Status validate_outputs(std::initializer_list<Extent> read, Extent dy, Extent dx, bool in_place,
                               const void* workspace, std::size_t workspace_bytes, std::size_t required_workspace) noexcept {
  for (const Extent& r : read)
    if (ranges_overlap(dx.p, dx.bytes, r.p, r.bytes)) return Status::overlapping_buffers;
  if (!in_place && ranges_overlap(dx.p, dx.bytes, dy.p, dy.bytes)) return Status::overlapping_buffers;
  if (required_workspace == 0) return Status::success;
  if (workspace == nullptr) return Status::null_pointer;
  if (workspace_bytes < required_workspace) return Status::workspace_too_small;
  if (reinterpret_cast<std::uintptr_t>(workspace) % workspace_alignment != 0) return Status::misaligned_workspace;
  for (const Extent& r : read)
    if (ranges_overlap(workspace, required_workspace, r.p, r.bytes)) return Status::overlapping_buffers;
  for (const Extent& w : {dy, dx})
    if (ranges_overlap(workspace, required_workspace, w.p, w.bytes)) return Status::overlapping_buffers;
  return Status::success;
}

}  // namespace detail::backward

/// Sizes, leading dimensions (at least cols) and every matrix's extent fitting 64-bit byte arithmetic.
/// An empty layout passes with any leading dimensions.
inline Status validate_backward_layout(const BackwardLayout& l, std::size_t element_bytes) noexcept {
  if (l.rows < 0 || l.cols < 0) return Status::negative_size;
  if (l.empty()) return Status::success;
  const auto limit = static_cast<std::uint64_t>(std::numeric_limits<std::int64_t>::max()) / element_bytes;
  if (static_cast<std::uint64_t>(l.rows) > limit / static_cast<std::uint64_t>(l.cols)) return Status::size_overflow;
  for (const std::int64_t ld : {l.ld_x, l.ld_y, l.ld_dy, l.ld_dx}) {
    if (ld < l.cols) return Status::invalid_layout;
  }
  for (const std::int64_t ld : {l.ld_x, l.ld_y, l.ld_dy, l.ld_dx}) {
    const auto room = limit - static_cast<std::uint64_t>(l.cols);
    if (static_cast<std::uint64_t>(l.rows - 1) > room / static_cast<std::uint64_t>(ld)) return Status::size_overflow;
  }
  return Status::success;
}

/// Full host-side check of a backward call. dx may be dy exactly (same pointer and leading dimension);
/// any other overlap of dx with x, y or dy, or of the workspace with any matrix, is refused. x, y and
/// dy are only read and may overlap one another. A call with rows == 0 or cols == 0 passes with any pointers.
inline Status validate_backward_call(const void* x, const void* y, const void* dy, const void* dx, const BackwardLayout& l,
                                     std::size_t element_bytes, const void* workspace, std::size_t workspace_bytes,
                                     std::size_t required_workspace) noexcept {
  using namespace detail::backward;
  if (const Status s = validate_backward_layout(l, element_bytes); !ok(s)) return s;
  if (l.empty()) return Status::success;
  if (x == nullptr || y == nullptr || dy == nullptr || dx == nullptr) return Status::null_pointer;
  const Extent xe{x, extent_bytes(l.rows, l.cols, l.ld_x, element_bytes)};
  const Extent ye{y, extent_bytes(l.rows, l.cols, l.ld_y, element_bytes)};
  const Extent dye{dy, extent_bytes(l.rows, l.cols, l.ld_dy, element_bytes)};
  const Extent dxe{dx, extent_bytes(l.rows, l.cols, l.ld_dx, element_bytes)};
  return validate_outputs({xe, ye}, dye, dxe, dx == dy && l.ld_dx == l.ld_dy, workspace, workspace_bytes,
                          required_workspace);
}

/// The same check for a backward call that recomputes y from saved per-row statistics (`stats`, rows x
/// `stats_bytes_per_row` bytes): ld_y is not used; dx may not overlap the statistics either.
inline Status validate_backward_saved_call(const void* x, const void* stats, std::size_t stats_bytes_per_row,
                                           const void* dy, const void* dx, BackwardLayout l, std::size_t element_bytes,
                                           const void* workspace, std::size_t workspace_bytes,
                                           std::size_t required_workspace) noexcept {
  using namespace detail::backward;
  l.ld_y = l.cols;  // no y matrix
  if (const Status s = validate_backward_layout(l, element_bytes); !ok(s)) return s;
  if (l.empty()) return Status::success;
  if (x == nullptr || stats == nullptr || dy == nullptr || dx == nullptr) return Status::null_pointer;
  if (reinterpret_cast<std::uintptr_t>(stats) % alignof(RowStatistics) != 0) return Status::misaligned_statistics;
  const Extent xe{x, extent_bytes(l.rows, l.cols, l.ld_x, element_bytes)};
  const Extent se{stats, static_cast<std::uint64_t>(l.rows) * stats_bytes_per_row};
  const Extent dye{dy, extent_bytes(l.rows, l.cols, l.ld_dy, element_bytes)};
  const Extent dxe{dx, extent_bytes(l.rows, l.cols, l.ld_dx, element_bytes)};
  return validate_outputs({xe, se}, dye, dxe, dx == dy && l.ld_dx == l.ld_dy, workspace, workspace_bytes,
                          required_workspace);
}

}  // namespace rss
