#pragma once
// Strategy `baseline`: the educational nine-kernel graph. Each whole-row operation is its own
// kernel and every intermediate is a full-size array in global memory:
//   square -> row mean -> inverse RMS;  row max;  shift -> scale -> exp -> row sum -> divide.
// It reads and writes far more bytes than necessary on purpose: it is the reference point.
#include <cstdint>

#include "rss/api/launch_info.hpp"
#include "rss/api/validate.hpp"
#include "rss/detail/device.cuh"
#include "rss/detail/launch.cuh"
#include "rss/detail/storage.cuh"
#include "rss/detail/workspace.hpp"
#include "rss/phases/block_reduce.cuh"
#include "rss/phases/exp_sum.cuh"
#include "rss/phases/row_stats.cuh"

namespace rss {
namespace detail::baseline {

inline constexpr int threads = 256;

/// Full-size intermediates, ping-ponged through two matrices (a: x^2 then r(x - m); b: x - m then exp).
struct Workspace {
  float* a;
  float* b;
  float* mean_sq;
  float* inv_rms;
  float* max;
  float* sum;

  static Workspace carve(WorkspaceCarver& carver, std::int64_t rows, std::int64_t cols) {
    Workspace w{};
    w.a = carver.take<float>(rows * cols);
    w.b = carver.take<float>(rows * cols);
    w.mean_sq = carver.take<float>(rows);
    w.inv_rms = carver.take<float>(rows);
    w.max = carver.take<float>(rows);
    w.sum = carver.take<float>(rows);
    return w;
  }
};

#define RSS_GRID_STRIDE(k, n)                                                              \
  for (std::int64_t k = static_cast<std::int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; k < (n); \
       k += static_cast<std::int64_t>(gridDim.x) * blockDim.x)

template <class T>
__global__ void square(const T* x, float* out, std::int64_t n) {
  RSS_GRID_STRIDE(k, n) {
    const float v = StorageTraits<T>::to_float(x[k]);
    out[k] = v * v;
  }
}

/// One block per row (grid-stride over rows): out[row] = reduce(in[row, :]) combined with `op` in
/// type Acc. Sums accumulate in double: one block walks a whole row, so a thread of a 16M-element
/// row adds 65536 terms, too many for an fp32 running sum to stay within the tolerance.
template <class Acc, class In, class Op>
__device__ void reduce_rows(const In* in, float* out, std::int64_t rows, std::int64_t cols, Acc identity,
                            Op op, Acc post_scale) {
  using AllReduce = BlockAllReduce<Acc, threads>;
  __shared__ typename AllReduce::TempStorage storage;
  for (std::int64_t row = blockIdx.x; row < rows; row += gridDim.x) {
    Acc acc = identity;
    for (std::int64_t j = threadIdx.x; j < cols; j += threads)
      acc = op(acc, static_cast<Acc>(StorageTraits<In>::to_float(in[row * cols + j])));
    const Acc total = AllReduce::all_reduce(acc, op, storage);
    if (threadIdx.x == 0) out[row] = static_cast<float>(total * post_scale);
  }
}

struct MaxFloat {
  __device__ float operator()(float a, float b) const { return fmaxf(a, b); }
};

struct SumDouble {
  __device__ double operator()(double a, double b) const { return a + b; }
};

template <class T>  // T: the storage type of the call (one instantiation per baseline)
__global__ void row_mean(const float* sq, float* mean_sq, std::int64_t rows, std::int64_t cols) {
  reduce_rows(sq, mean_sq, rows, cols, 0.0, SumDouble{}, 1.0 / static_cast<double>(cols));
}

template <class T>  // T: the storage type of the call (one instantiation per baseline)
__global__ void inverse_rms(const float* mean_sq, float* inv_rms, std::int64_t rows) {
  RSS_GRID_STRIDE(i, rows) inv_rms[i] = 1.0f / sqrtf(mean_sq[i] + rms_epsilon);
}

template <class T>
__global__ void row_max(const T* x, float* max, std::int64_t rows, std::int64_t cols) {
  reduce_rows(x, max, rows, cols, -INFINITY, MaxFloat{}, 1.0f);
}

template <class T>
__global__ void shift(const T* x, const float* max, float* out, std::int64_t n, std::int64_t cols) {
  RSS_GRID_STRIDE(k, n) out[k] = StorageTraits<T>::to_float(x[k]) - max[k / cols];
}

template <class T>  // T: the storage type of the call (one instantiation per baseline)
__global__ void scale(const float* shifted, const float* inv_rms, float* out, std::int64_t n, std::int64_t cols) {
  RSS_GRID_STRIDE(k, n) out[k] = inv_rms[k / cols] * shifted[k];
}

template <class T>  // T: the storage type of the call (one instantiation per baseline)
__global__ void exponential(const float* in, float* out, std::int64_t n) {
  RSS_GRID_STRIDE(k, n) out[k] = expf(in[k]);
}

template <class T>  // T: the storage type of the call (one instantiation per baseline)
__global__ void row_sum(const float* e, float* sum, std::int64_t rows, std::int64_t cols) {
  reduce_rows(e, sum, rows, cols, 0.0, SumDouble{}, 1.0);
}

template <class T>
__global__ void divide(const float* e, const float* sum, T* y, std::int64_t n, std::int64_t cols) {
  RSS_GRID_STRIDE(k, n) y[k] = StorageTraits<T>::from_float(e[k] / sum[k / cols]);
}

#undef RSS_GRID_STRIDE

inline std::size_t workspace_bytes(std::int64_t rows, std::int64_t cols, bool* overflow) {
  WorkspaceCarver carver;
  Workspace::carve(carver, rows, cols);
  *overflow = carver.overflowed();
  return carver.bytes();
}

/// Issues the nine kernels. Arguments are already validated and rows * cols > 0.
template <class T>
Status launch(const T* x, T* y, std::int64_t rows, std::int64_t cols, void* workspace, const Launcher& launch) {
  WorkspaceCarver carver(workspace);
  const Workspace w = Workspace::carve(carver, rows, cols);
  const std::int64_t n = rows * cols;
  // Enough blocks to fill any current GPU; the grid-stride loops cover the rest.
  const unsigned elementwise_grid = grid_for((n + threads - 1) / threads < 65536 ? (n + threads - 1) / threads : 65536);
  const unsigned row_grid = grid_for(rows < 65536 ? rows : 65536);
  const unsigned rows_grid = grid_for((rows + threads - 1) / threads);

  RSS_TRY(launch("baseline::square", square<T>, elementwise_grid, threads, 0, false, 0, x, w.a, n));
  RSS_TRY(launch("baseline::row_mean", row_mean<T>, row_grid, threads, 0, false, 0, w.a, w.mean_sq, rows, cols));
  RSS_TRY(launch("baseline::inverse_rms", inverse_rms<T>, rows_grid, threads, 0, false, 0, w.mean_sq, w.inv_rms, rows));
  RSS_TRY(launch("baseline::row_max", row_max<T>, row_grid, threads, 0, false, 0, x, w.max, rows, cols));
  RSS_TRY(launch("baseline::shift", shift<T>, elementwise_grid, threads, 0, false, 0, x, w.max, w.b, n, cols));
  RSS_TRY(launch("baseline::scale", scale<T>, elementwise_grid, threads, 0, false, 0, w.b, w.inv_rms, w.a, n, cols));
  RSS_TRY(launch("baseline::exp", exponential<T>, elementwise_grid, threads, 0, false, 0, w.a, w.b, n));
  RSS_TRY(launch("baseline::row_sum", row_sum<T>, row_grid, threads, 0, false, 0, w.b, w.sum, rows, cols));
  return launch("baseline::divide", divide<T>, elementwise_grid, threads, 0, false, 0, w.b, w.sum, y, n, cols);
}

}  // namespace detail::baseline

/// Workspace bytes `baseline` (and `baseline_graph`) need for a rows x cols problem of T.
template <class T>
Status baseline_workspace_bytes(std::int64_t rows, std::int64_t cols, std::size_t* bytes) noexcept {
  if (bytes == nullptr) return Status::null_pointer;
  RSS_TRY(validate_shape(rows, cols, sizeof(T)));
  bool overflow = false;
  const std::size_t n = detail::baseline::workspace_bytes(rows, cols, &overflow);
  if (overflow) return Status::size_overflow;
  *bytes = n;
  return Status::success;
}

/// rms_scaled_softmax as nine kernels with full-size intermediates (strategy `baseline`).
/// x and y are rows x cols row-major device arrays; workspace holds at least
/// baseline_workspace_bytes() bytes. Asynchronous on `stream`; never synchronises.
template <class T>
Status baseline(const T* x, T* y, std::int64_t rows, std::int64_t cols, void* workspace, std::size_t workspace_bytes,
                cudaStream_t stream = nullptr) noexcept {
  std::size_t required = 0;
  RSS_TRY(baseline_workspace_bytes<T>(rows, cols, &required));
  RSS_TRY(validate_call(x, y, rows, cols, sizeof(T), workspace, workspace_bytes, required));
  if (rows == 0 || cols == 0) return Status::success;
  int device = 0;
  RSS_TRY(detail::current_device(&device));
  return detail::baseline::launch(x, y, rows, cols, workspace, detail::Launcher{stream});
}

}  // namespace rss
