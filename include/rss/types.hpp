#pragma once
// Vocabulary shared by host and device code: storage types and the layout of a call.
#include <cstddef>
#include <cstdint>

namespace rss {

/// Alignment the caller's workspace pointer must have (cudaMalloc gives at least this).
inline constexpr std::size_t workspace_alignment = 256;

/// Storage type of x and y. Arithmetic is always fp32 or wider. rss::dtype_of<T> (rss/storage.cuh)
/// maps a C++ storage type (float, __nv_bfloat16, __half) to its DType.
enum class DType : int { fp32, bf16, fp16 };

namespace detail {
struct DTypeTraits {
  const char* name;
  int bytes;
};
/// One row per DType, in declaration order: a new storage type adds its row here.
inline constexpr DTypeTraits dtype_table[] = {{"fp32", 4}, {"bf16", 2}, {"fp16", 2}};
}  // namespace detail

constexpr const char* dtype_name(DType t) noexcept { return detail::dtype_table[static_cast<int>(t)].name; }
constexpr int dtype_bytes(DType t) noexcept { return detail::dtype_table[static_cast<int>(t)].bytes; }

/// The matrices of a call: x[i * ld_x + j] and y[i * ld_y + j] for 0 <= i < rows, 0 <= j < cols,
/// in elements. The leading dimensions are at least cols; y may be x itself (same leading
/// dimension) but may not otherwise overlap it.
struct Layout {
  std::int64_t rows = 0;
  std::int64_t cols = 0;
  std::int64_t ld_x = 0;
  std::int64_t ld_y = 0;

  /// Rows stored back to back: both leading dimensions equal cols.
  static constexpr Layout contiguous(std::int64_t rows, std::int64_t cols) noexcept { return {rows, cols, cols, cols}; }
  constexpr bool empty() const noexcept { return rows == 0 || cols == 0; }
};

/// Per-row statistics a forward pass can write for its backward (12 bytes a row, one entry per row, in row
/// order): y = exp(inv_rms (x - max)) / sum. With them the backward recomputes y from x instead of reading
/// it (rss::rms_scaled_softmax_backward_saved: x and dy read, dx written). Aligned to 4 bytes.
struct RowStatistics {
  float max;      // the row's maximum of x
  float inv_rms;  // r = 1 / sqrt(mean(x^2) + 1e-5)
  float sum;      // sum of exp(inv_rms (x - max)) over the row
};

}  // namespace rss
