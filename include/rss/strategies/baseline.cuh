#pragma once
// Strategy `baseline`: the educational nine-kernel graph. Each whole-row operation is its own
// kernel and every intermediate is a full-size array in global memory:
//   square -> row mean -> inverse RMS;  row max;  shift -> scale -> exp -> row sum -> divide.
// It reads and writes far more bytes than necessary on purpose: it is the reference point.
#include <cstdint>

#include "rss/detail/launch.cuh"
#include "rss/storage.cuh"
#include "rss/workspace.hpp"
#include "rss/phases/block_reduce.cuh"
#include "rss/phases/row_stats.cuh"
#include "rss/strategies/call.cuh"

namespace rss::detail {
namespace baseline {

inline constexpr int threads = 256;

/// Full-size intermediates. Squares and shifted values are doubles, so the baseline shares the fused
/// strategies' range: every finite fp32 square fits, and x - m cannot overflow. The region of the
/// squares is reused for the shifted values once the row means are taken, and again for the exps.
struct Workspace {
  double* wide;     // x^2, then x - m; its first half is finally exp(r (x - m))
  float* scaled;    // r (x - m)
  double* mean_sq;
  float* inv_rms;
  float* max;
  float* sum;

  static Workspace carve(WorkspaceCarver& carver, std::int64_t rows, std::int64_t cols) {
    Workspace w{};
    w.wide = carver.take<double>(rows * cols);
    w.scaled = carver.take<float>(rows * cols);
    w.mean_sq = carver.take<double>(rows);
    w.inv_rms = carver.take<float>(rows);
    w.max = carver.take<float>(rows);
    w.sum = carver.take<float>(rows);
    return w;
  }
  float* exps() const { return reinterpret_cast<float*>(wide); }
};

/// The elementwise kernels walk the n = rows * cols logical elements; x and y are strided.
#define RSS_GRID_STRIDE(k, n)                                                              \
  for (std::int64_t k = static_cast<std::int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; k < (n); \
       k += static_cast<std::int64_t>(gridDim.x) * blockDim.x)

__device__ __forceinline__ std::int64_t strided(std::int64_t k, std::int64_t cols, std::int64_t ld) {
  return k / cols * ld + k % cols;
}

template <class T>
__global__ void square(const T* x, double* out, std::int64_t n, std::int64_t cols, std::int64_t ld_x) {
  RSS_GRID_STRIDE(k, n) {
    const double v = StorageTraits<T>::to_float(x[strided(k, cols, ld_x)]);
    out[k] = v * v;
  }
}

/// An intermediate or a stored element, widened for a reduction.
template <class V>
__device__ __forceinline__ float to_wide(V v) { return StorageTraits<V>::to_float(v); }
__device__ __forceinline__ double to_wide(double v) { return v; }

/// One block per row (grid-stride over rows): out[row] = reduce(in[row * ld + j]) combined with `op`
/// in type Acc. Sums accumulate in double: one block walks a whole row, so a thread of a 16M-element
/// row adds 65536 terms, too many for an fp32 running sum to stay within the tolerance.
template <class Acc, class In, class Out, class Op>
__device__ void reduce_rows(const In* in, Out* out, std::int64_t rows, std::int64_t cols, std::int64_t ld,
                            Acc identity, Op op, Acc post_scale) {
  using AllReduce = BlockAllReduce<Acc, threads>;
  __shared__ typename AllReduce::TempStorage storage;
  for (std::int64_t row = blockIdx.x; row < rows; row += gridDim.x) {
    Acc acc = identity;
    for (std::int64_t j = threadIdx.x; j < cols; j += threads)
      acc = op(acc, static_cast<Acc>(to_wide(in[row * ld + j])));
    const Acc total = AllReduce::all_reduce(acc, op, storage);
    if (threadIdx.x == 0) out[row] = static_cast<Out>(total * post_scale);
  }
}

struct MaxFloat {
  __device__ float operator()(float a, float b) const { return fmaxf(a, b); }
};

struct SumDouble {
  __device__ double operator()(double a, double b) const { return a + b; }
};

// The kernels that never touch x or y are templates only so that a header can define them (one
// instantiation, whatever the storage type).
template <class = void>
__global__ void row_mean(const double* sq, double* mean_sq, std::int64_t rows, std::int64_t cols) {
  reduce_rows(sq, mean_sq, rows, cols, cols, 0.0, SumDouble{}, 1.0 / static_cast<double>(cols));
}

template <class = void>
__global__ void inverse_rms(const double* mean_sq, float* inv_rms, std::int64_t rows) {
  RSS_GRID_STRIDE(i, rows) inv_rms[i] = static_cast<float>(1.0 / sqrt(mean_sq[i] + static_cast<double>(rms_epsilon)));
}

template <class T>
__global__ void row_max(const T* x, float* max, std::int64_t rows, std::int64_t cols, std::int64_t ld_x) {
  reduce_rows(x, max, rows, cols, ld_x, -INFINITY, MaxFloat{}, 1.0f);
}

template <class T>
__global__ void shift(const T* x, const float* max, double* out, std::int64_t n, std::int64_t cols, std::int64_t ld_x) {
  RSS_GRID_STRIDE(k, n) {
    out[k] = static_cast<double>(StorageTraits<T>::to_float(x[strided(k, cols, ld_x)])) - max[k / cols];
  }
}

template <class = void>
__global__ void scale(const double* shifted, const float* inv_rms, float* out, std::int64_t n, std::int64_t cols) {
  RSS_GRID_STRIDE(k, n) out[k] = static_cast<float>(inv_rms[k / cols] * shifted[k]);
}

template <class = void>
__global__ void exponential(const float* in, float* out, std::int64_t n) {
  RSS_GRID_STRIDE(k, n) out[k] = expf(in[k]);
}

template <class = void>
__global__ void row_sum(const float* e, float* sum, std::int64_t rows, std::int64_t cols) {
  reduce_rows(e, sum, rows, cols, cols, 0.0, SumDouble{}, 1.0);
}

/// Also copies each row's statistics to row_stats when it is not null (the thread of the row's first element).
template <class T>
__global__ void divide(const float* e, const float* sum, T* y, std::int64_t n, std::int64_t cols, std::int64_t ld_y,
                       const float* max, const float* inv_rms, RowStatistics* row_stats) {
  RSS_GRID_STRIDE(k, n) {
    const std::int64_t row = k / cols;
    y[strided(k, cols, ld_y)] = StorageTraits<T>::from_float(e[k] / sum[row]);
    if (row_stats != nullptr && k % cols == 0) row_stats[row] = RowStatistics{max[row], inv_rms[row], sum[row]};
  }
}

#undef RSS_GRID_STRIDE

/// Issues the nine kernels of a validated, non-empty call.
template <class T>
Status launch_nine(const Call<T>& c, const Launcher& launch) {
  const T* x = c.x;
  const Layout& l = c.layout;
  WorkspaceCarver carver(c.workspace);
  const Workspace w = Workspace::carve(carver, l.rows, l.cols);
  const std::int64_t rows = l.rows, cols = l.cols, n = rows * cols;
  // Enough blocks to fill any current GPU; the grid-stride loops cover the rest.
  const unsigned elementwise_grid = grid_for((n + threads - 1) / threads < 65536 ? (n + threads - 1) / threads : 65536);
  const unsigned row_grid = grid_for(rows < 65536 ? rows : 65536);
  const unsigned rows_grid = grid_for((rows + threads - 1) / threads);
  // Per element: square r x w 8, mean r 8, max r x, shift r x w 8, scale r 8 w 4, exp r 4 w 4, sum r 4, divide r 4 w y.
  const std::int64_t io = sizeof(T);
  launch.add_logical_bytes(n * (io + 8 + 8 + io + io + 8 + 8 + 4 + 4 + 4 + 4 + 4 + io));

  RSS_TRY(launch("baseline::square", square<T>, elementwise_grid, threads, 0, false, 0, x, w.wide, n, cols, l.ld_x));
  RSS_TRY(launch("baseline::row_mean", row_mean<>, row_grid, threads, 0, false, 0, w.wide, w.mean_sq, rows, cols));
  RSS_TRY(launch("baseline::inverse_rms", inverse_rms<>, rows_grid, threads, 0, false, 0, w.mean_sq, w.inv_rms, rows));
  RSS_TRY(launch("baseline::row_max", row_max<T>, row_grid, threads, 0, false, 0, x, w.max, rows, cols, l.ld_x));
  RSS_TRY(launch("baseline::shift", shift<T>, elementwise_grid, threads, 0, false, 0, x, w.max, w.wide, n, cols, l.ld_x));
  RSS_TRY(launch("baseline::scale", scale<>, elementwise_grid, threads, 0, false, 0, w.wide, w.inv_rms, w.scaled, n, cols));
  RSS_TRY(launch("baseline::exp", exponential<>, elementwise_grid, threads, 0, false, 0, w.scaled, w.exps(), n));
  RSS_TRY(launch("baseline::row_sum", row_sum<>, row_grid, threads, 0, false, 0, w.exps(), w.sum, rows, cols));
  return launch("baseline::divide", divide<T>, elementwise_grid, threads, 0, false, 0, w.exps(), w.sum, c.y, n, cols,
                l.ld_y, w.max, w.inv_rms, c.stats);
}

}  // namespace baseline

/// Strategy `baseline`: nine kernels with full-size intermediates.
struct Baseline : NothingToPrepare {
  static constexpr Strategy id = Strategy::baseline;
  template <class T>
  struct Plan {};

  template <class T>
  static Status workspace_bytes(std::int64_t rows, std::int64_t cols, const DeviceInfo&, std::size_t* bytes) noexcept {
    return carved_bytes<baseline::Workspace>(bytes, rows, cols);
  }
  template <class T>
  static Status make_plan(const Call<T>&, const DeviceInfo&, const Config&, Plan<T>*) noexcept {
    return Status::success;
  }
  template <class T>
  static Status launch(const Plan<T>&, const Call<T>& c, const Launcher& launcher) noexcept {
    return baseline::launch_nine(c, launcher);
  }
};

}  // namespace rss::detail
