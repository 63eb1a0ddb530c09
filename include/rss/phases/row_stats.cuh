#pragma once
// Phase 1: row statistics (maximum and sum of squares) of a tile, and their combination across
// the blocks that share a row. The result, RowScale, is what phases 2 and 3 need.
#include <cmath>
#include <cstdint>

#include "rss/phases/block_reduce.cuh"
#include "rss/phases/tile_io.cuh"

namespace rss {

/// Statistics of part of a row. Partials combine associatively, in any order. The sum of squares
/// accumulates in double: in fp32 it overflows once |x| passes about 1.8e19 / sqrt(cols), while every
/// finite fp32 square fits a double. Per element the squares are summed in fp32 over a run of at most
/// one 16-byte vector (8 elements: relative error <= 7 u), and the run is added to the double once: a
/// conversion to double per element (F2F.F64 runs on the pipe of the exponentials) cost 5-7% on the
/// many-row shapes (bench/NOTES.md). A run that overflows fp32 (|x| beyond about 6e18) is summed again in
/// double, so the FLT_MAX guarantee holds: at once (add_run with a reload), or, for a part held in
/// registers, after all its runs (add_part: one test a part instead of one a run).
struct RowStatsPartial {
  float max;
  double sum_sq;

  __host__ __device__ static RowStatsPartial identity() { return {-INFINITY, 0.0}; }
  /// A run: the first `count` of v (a 16-byte vector's elements as float; count <= N). reload(w) fills w with
  /// the same values from where they are held (shared or global memory): the overflow path reads them again
  /// rather than keep v alive past the common path (that doubled the megakernel's registers).
  template <int N, class Reload>
  __device__ __forceinline__ void add_run(const float (&v)[N], int count, Reload&& reload) {
    const float run = run_squares(v, count);
    if (!isinf(run)) {
      sum_sq += static_cast<double>(run);
      return;
    }
    float w[N];  // finite squares past FLT_MAX, or an infinite x (which stays infinite in double)
    reload(w);
    add_wide(w, count);
  }

  /// The runs of a part that walk(f) visits as f(values, count), the same runs on each call: all of them in
  /// fp32 with one overflow test at the end, and only if one overflowed, the part again in double. For parts
  /// held in registers, where walking again reads no memory: a test and a reload path per run put 25 branches
  /// and 130 instructions in front of fp32 512 x 32's first exchange (bench/NOTES.md).
  template <class Walk>
  __device__ __forceinline__ void add_part(Walk&& walk) {
    const double before = sum_sq;
    bool finite = true;
    walk([&](const auto& v, int count) {
      const float run = run_squares(v, count);
      sum_sq += static_cast<double>(run);
      finite &= !isinf(run);
    });
    if (!finite) {
      sum_sq = before;
      walk([&](const auto& v, int count) { add_wide(v, count); });
    }
  }

 private:
  /// The run's sum of squares in fp32; the maximum is taken here.
  template <int N>
  __device__ __forceinline__ float run_squares(const float (&v)[N], int count) {
    float run_max = -INFINITY, run = 0.0f;
#pragma unroll
    for (int e = 0; e < N; ++e) {
      if (e < count) {
        run_max = fmaxf(run_max, v[e]);
        run = fmaf(v[e], v[e], run);
      }
    }
    max = fmaxf(max, run_max);
    return run;
  }
  /// The run's squares in double (the maximum already taken).
  template <int N>
  __device__ __forceinline__ void add_wide(const float (&v)[N], int count) {
    double wide = 0.0;
#pragma unroll
    for (int e = 0; e < N; ++e)
      if (e < count) wide = fma(static_cast<double>(v[e]), static_cast<double>(v[e]), wide);
    sum_sq += wide;
  }
};

struct CombineRowStats {
  __host__ __device__ RowStatsPartial operator()(const RowStatsPartial& a, const RowStatsPartial& b) const {
    return {fmaxf(a.max, b.max), a.sum_sq + b.sum_sq};
  }
};

/// Row constants of phases 2 and 3: exp(r (x - m)) = exp2(t), t = (x - m) c, c = r log2(e), in one of two forms.
///   Scaled (every row; exp_of): t = ((x - m) / 4) (4 c). The difference is formed first, so that x = m gives
///     exactly 1 and every exponent's error is relative to itself. The factor 4 (exact in binary) keeps
///     (x - m) / 4 finite for |x| up to FLT_MAX and 4 c a normal float where c alone would be subnormal (and a
///     caller's flush-to-zero, -ftz=true, would make it 0).
///   Fused (where c is a normal float: every finite row whose RMS is below about 1.2e38): t = fl(x c + fl(-m c)),
///     one FFMA instead of an FMA and an FMUL. x c is exact inside the FFMA, so t's error is its own rounding
///     plus the rounding e of fl(-m c), the same for every element: every exponential is scaled by 2^-e, which y,
///     normalised by their sum, does not see, and which the sum does (u |m c| is up to 3e-5 on rows of 131072):
///     true_sum() takes it out of the sum a forward saves.
/// visit() hands a pass the row's form; a pass so compiled once per form saves the FMUL where a test per element
/// would not (nvcc unswitched a tile's sum loop on such a test, not its store loop; bench/NOTES.md).
/// The exponential is the hardware's ex2.approx (the same MUFU.EX2 that exp2f runs, without exp2f's fix-ups for
/// subnormal results: those flush to 0, a weight of at most 2^-126 against a sum of about 1 or more).
struct RowScale {
  float max;
  float inv_rms;
  float exp2_scale;    // 4 c
  float exp2_offset;   // -m / 4
  float fused_scale;   // c where it is a normal float, else 0 (the scaled form only)
  float fused_offset;  // fl(-m c)

  struct ScaledExp {
    float scale, offset;
    __device__ __forceinline__ float operator()(float x) const { return fast_exp2(fmaf(x, 0.25f, offset) * scale); }
    /// The sum of exp(r (x - m)) from the sum of these exponentials: the same.
    __host__ __device__ float true_sum(float total) const { return total; }
  };
  struct FusedExp {
    float scale, offset, max;
    __device__ __forceinline__ float operator()(float x) const { return fast_exp2(fmaf(x, scale, offset)); }
    /// total 2^e, e = -m c - fl(-m c) exactly (an FMA gives a product's rounding error), |e| <= 2^-24 |m c|, so
    /// 2^e = 1 + e ln 2 to fp32 precision.
    __host__ __device__ float true_sum(float total) const {
      return fmaf(total, fmaf(-max, scale, -offset) * 0.69314718f, total);
    }
  };

  /// The sum of exp(r (x - m)) from the sum of the exponentials of visit()'s form.
  __host__ __device__ float true_sum(float total) const {
    return fused_scale != 0.0f ? FusedExp{fused_scale, fused_offset, max}.true_sum(total) : total;
  }
  /// The scaled form's exponential: valid for every row.
  __device__ __forceinline__ float exp_of(float x) const { return ScaledExp{exp2_scale, exp2_offset}(x); }
  /// f(exp), exp the row's fused form where it has one, else its scaled form: f is compiled for both.
  template <class F>
  __device__ __forceinline__ decltype(auto) visit(F&& f) const {
    if (fused_scale != 0.0f) return f(FusedExp{fused_scale, fused_offset, max});
    return f(ScaledExp{exp2_scale, exp2_offset});
  }

  __device__ __forceinline__ static float fast_exp2(float t) {
    float r;
    asm("ex2.approx.ftz.f32 %0, %1;" : "=f"(r) : "f"(t));
    return r;
  }
};

inline constexpr float rms_epsilon = 1e-5f;

/// The constants of both forms from a row's maximum and its inverse RMS as stored (fp32): the forward and a
/// backward that recomputes y from saved statistics derive them the same way, so their exponentials of the
/// scaled form agree bit for bit.
__host__ __device__ inline RowScale row_scale_of(float max, float inv_rms) {
  const double c = static_cast<double>(inv_rms) * 1.4426950408889634;
  const auto c_float = static_cast<float>(c);
  const bool normal = c_float >= 1.17549435e-38f;  // FLT_MIN; false for 0 and NaN (non-finite rows)
  return {max,
          inv_rms,
          static_cast<float>(c * 4.0),
          -0.25f * max,
          normal ? c_float : 0.0f,
          normal ? -max * c_float : 0.0f};
}

/// r = 1 / sqrt(mean(x^2) + eps) > 0, so max(r x) = r max(x): the input maximum is subtracted first.
/// Every block of a row waits for this after its first round, so the device takes one reciprocal square root
/// (error 1 double ulp: r rounds to the same float for all but a few inputs in 2^28) where a square root and a
/// reciprocal were two dependent FP64 iterations: 16-bit rows of 8K 1% faster (bench/NOTES.md). The division
/// stays: a product by a reciprocal of cols hoisted out of the row loop cost registers, and spills.
__host__ __device__ inline RowScale make_row_scale(RowStatsPartial row, std::int64_t cols) {
  const double mean_sq = row.sum_sq / static_cast<double>(cols) + static_cast<double>(rms_epsilon);
#ifdef __CUDA_ARCH__
  const double inv_rms = rsqrt(mean_sq);
#else
  const double inv_rms = 1.0 / std::sqrt(mean_sq);
#endif
  return row_scale_of(row.max, static_cast<float>(inv_rms));
}

/// Block-scope building blocks of phase 1.
template <int Threads>
struct BlockRowStats {
  using AllReduce = detail::BlockAllReduce<RowStatsPartial, Threads>;
  using TempStorage = typename AllReduce::TempStorage;

  /// Statistics of the tile x[0, n), returned to every thread. When `retain` is not null, the tile is
  /// also copied to retain[0, n) as fp32 (the megakernel keeps it in shared memory for phase 2).
  template <class T>
  __device__ static RowStatsPartial tile(const T* x, std::int64_t n, TempStorage& storage,
                                         float* retain = nullptr) {
    RowStatsPartial acc = RowStatsPartial::identity();
    detail::tile_for_each_run<Threads>(x, n, [&](std::int64_t base, const auto& v, int count, auto&& reload) {
      acc.add_run(v, count, reload);
      if (retain != nullptr) {
#pragma unroll
        for (int e = 0; e < detail::vector_width<T>; ++e)
          if (e < count) retain[base + e] = v[e];
      }
    });
    return AllReduce::all_reduce(acc, CombineRowStats{}, storage);
  }

  /// Combines `count` partials written by other blocks (read through L2: they were written by
  /// other multiprocessors), returned to every thread.
  __device__ static RowStatsPartial combine(const RowStatsPartial* partials, int count, TempStorage& storage) {
    RowStatsPartial acc = RowStatsPartial::identity();
    for (int i = static_cast<int>(threadIdx.x); i < count; i += Threads) {
      acc = CombineRowStats{}(acc, RowStatsPartial{__ldcg(&partials[i].max), __ldcg(&partials[i].sum_sq)});
    }
    return AllReduce::all_reduce(acc, CombineRowStats{}, storage);
  }
};

}  // namespace rss
