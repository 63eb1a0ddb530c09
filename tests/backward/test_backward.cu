// The backward pass on the GPU against the CPU reference in double: every strategy and automatic, fp32,
// bf16 and fp16, model and odd shapes, strided and unaligned layouts, in place (dx == dy), IEEE rows,
// refusals that leave every buffer untouched, the planned operator and its launch description.
#include <catch2/catch.hpp>
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "rss/backward/backward.cuh"
#include "rss/rss.cuh"
#include "rss/reference/cpu_backward.hpp"
#include "rss/reference/cpu_reference.hpp"
#include "support/device.cuh"
#include "support/random_input.hpp"
#include "support/storage.cuh"

namespace {

using rss::BackwardLayout;
using rss::BackwardStrategy;
using rss::Status;
using rss_test::DeviceBuffer;
using rss_test::from_float;
using rss_test::to_double;

template <class T>
const char* type_name() {
  return rss::dtype_name(rss::StorageTraits<T>::dtype);
}

const BackwardStrategy kStrategies[] = {BackwardStrategy::two_pass, BackwardStrategy::cluster_row,
                                        BackwardStrategy::automatic};

/// Special rows of a problem (IEEE behaviour): what is injected where.
enum class Special { none, x_nan, x_pos_inf, x_neg_inf, dy_nan, dy_pos_inf };

/// A backward problem in host memory with the layout's leading dimensions (padding holds NaN), its
/// y computed by the forward reference from the stored x, and the reference dx in double.
template <class T>
struct Problem {
  BackwardLayout l;
  std::vector<T> x, y, dy;
  std::vector<double> ref;     // rows x cols, dense
  std::vector<double> denom;   // per row: max(||ref||, r ||y * dy||), the scale fp32 arithmetic errs against
  std::vector<bool> special;   // rows expected all NaN
  std::vector<rss::RowStatistics> stats;  // saved state (b): per-row statistics of the stored x
  std::vector<double> ref_saved;          // the reference with y recomputed from `stats`

  Problem(const BackwardLayout& layout, std::uint64_t seed, const std::vector<Special>& specials = {},
          float x_scale = 1.0f, bool spiky = false)
      : l(layout) {
    const std::int64_t R = l.rows, C = l.cols;
    const bool fp16 = rss::StorageTraits<T>::dtype == rss::DType::fp16;
    const auto xs = spiky ? rss_test::spiky_rows(R, C, seed, fp16 ? 6e4f : 3e38f, fp16 ? 1e-3f : 1e-30f)
                          : rss_test::random_rows(R, C, seed);
    std::mt19937_64 gen(seed ^ 0x9E3779B97F4A7C15ull);
    std::uniform_real_distribution<float> u(-1.0f, 1.0f), gscale(0.1f, 10.0f);
    x.assign(static_cast<std::size_t>(extent(l.ld_x)), from_float<T>(std::nanf("")));
    y.assign(static_cast<std::size_t>(extent(l.ld_y)), from_float<T>(std::nanf("")));
    dy.assign(static_cast<std::size_t>(extent(l.ld_dy)), from_float<T>(std::nanf("")));
    ref.assign(static_cast<std::size_t>(R * C), 0.0);
    ref_saved.assign(static_cast<std::size_t>(R * C), 0.0);
    stats.assign(static_cast<std::size_t>(R), rss::RowStatistics{});
    denom.assign(static_cast<std::size_t>(R), 0.0);
    special.assign(static_cast<std::size_t>(R), false);
    std::vector<double> xr(C), yr(C), gr(C), dxr(C);
    for (std::int64_t i = 0; i < R; ++i) {
      const Special sp = i < static_cast<std::int64_t>(specials.size()) ? specials[i] : Special::none;
      special[i] = sp != Special::none;
      const float gs = gscale(gen);
      for (std::int64_t j = 0; j < C; ++j) {
        float xv = xs[static_cast<std::size_t>(i * C + j)] * x_scale;
        if (sp == Special::dy_pos_inf) xv = std::fabs(xv) + 0.5f;  // positive x: p - c q = inf - inf
        float gv = gs * u(gen);
        if (gv == 0.0f) gv = 1e-3f;
        const std::int64_t k = C > 3 ? 3 : C - 1;
        if (j == k && sp == Special::x_nan) xv = std::nanf("");
        if (j == k && sp == Special::x_pos_inf) xv = INFINITY;
        if (j == k && sp == Special::x_neg_inf) xv = -INFINITY;
        if (j == k && sp == Special::dy_nan) gv = std::nanf("");
        if (j == k && sp == Special::dy_pos_inf) gv = INFINITY;
        const T xt = from_float<T>(xv), gt = from_float<T>(gv);
        x[static_cast<std::size_t>(i * l.ld_x + j)] = xt;
        dy[static_cast<std::size_t>(i * l.ld_dy + j)] = gt;
        xr[j] = to_double(xt);
        gr[j] = to_double(gt);
      }
      // Saved statistics (what a forward pass would write) and the gradient with y recomputed from them.
      {
        double m = -INFINITY, sum_sq = 0.0;
        for (std::int64_t j = 0; j < C; ++j) {
          m = std::max(m, xr[j]);
          if (std::isnan(xr[j])) m = xr[j];
          sum_sq += xr[j] * xr[j];
        }
        const auto r = static_cast<float>(1.0 / std::sqrt(sum_sq / static_cast<double>(C) + rss::reference::epsilon));
        double z = 0.0;
        for (std::int64_t j = 0; j < C; ++j) z += std::exp(static_cast<double>(r) * (xr[j] - m));
        const rss::RowStatistics st{static_cast<float>(m), r, static_cast<float>(z)};
        stats[static_cast<std::size_t>(i)] = st;
        for (std::int64_t j = 0; j < C; ++j)
          yr[j] = std::exp(static_cast<double>(st.inv_rms) * (xr[j] - static_cast<double>(st.max))) / static_cast<double>(st.sum);
        rss::reference::rms_scaled_softmax_backward_row(xr.data(), yr.data(), gr.data(), dxr.data(), C);
        for (std::int64_t j = 0; j < C; ++j) ref_saved[static_cast<std::size_t>(i * C + j)] = dxr[j];
      }
      rss::reference::rms_scaled_softmax_row(xr.data(), yr.data(), C);
      for (std::int64_t j = 0; j < C; ++j) {
        const T yt = from_float<T>(static_cast<float>(yr[j]));
        y[static_cast<std::size_t>(i * l.ld_y + j)] = yt;
        yr[j] = to_double(yt);  // the backward reads the stored y
      }
      rss::reference::rms_scaled_softmax_backward_row(xr.data(), yr.data(), gr.data(), dxr.data(), C);
      double n_ref = 0.0, n_yg = 0.0, sum_sq = 0.0;
      for (std::int64_t j = 0; j < C; ++j) {
        ref[static_cast<std::size_t>(i * C + j)] = dxr[j];
        n_ref += dxr[j] * dxr[j];
        n_yg += yr[j] * gr[j] * yr[j] * gr[j];
        sum_sq += xr[j] * xr[j];
      }
      const double r = 1.0 / std::sqrt(sum_sq / static_cast<double>(C) + rss::reference::epsilon);
      denom[i] = std::max(std::sqrt(n_ref), r * std::sqrt(n_yg));
    }
  }

  std::int64_t extent(std::int64_t ld) const { return l.empty() ? 0 : (l.rows - 1) * ld + l.cols; }

  /// Empty when dx (leading dimension ld_dx) matches the reference; else a description of the first bad row.
  std::string check(const std::vector<T>& dx, bool saved = false) const {
    const std::vector<double>& ref = saved ? ref_saved : this->ref;
    const double tol = rss::reference::backward_tolerance(sizeof(T) == 4);
    for (std::int64_t i = 0; i < l.rows; ++i) {
      if (special[i]) {
        for (std::int64_t j = 0; j < l.cols; ++j) {
          if (!std::isnan(to_double(dx[static_cast<std::size_t>(i * l.ld_dx + j)])))
            return "row " + std::to_string(i) + " (IEEE) element " + std::to_string(j) + " is not NaN";
        }
        continue;
      }
      double diff = 0.0, rounding = 0.0;
      for (std::int64_t j = 0; j < l.cols; ++j) {
        const double want = ref[static_cast<std::size_t>(i * l.cols + j)];
        const double got = to_double(dx[static_cast<std::size_t>(i * l.ld_dx + j)]);
        diff += (got - want) * (got - want);
        const double stored = to_double(from_float<T>(static_cast<float>(want)));
        rounding += (stored - want) * (stored - want);
      }
      const double error = std::sqrt(diff) / denom[i];
      const double bound = tol + std::sqrt(rounding) / denom[i];
      if (!(error <= bound))
        return "row " + std::to_string(i) + ": relative error " + std::to_string(error) + " > " + std::to_string(bound);
    }
    return {};
  }
};

/// One call on the device: x, y, dy uploaded at `shift` elements past 256-byte aligned allocations, dx
/// poisoned (or dx == dy when in place), the result and dx's padding checked. Returns the call's status.
template <class T>
Status run_case(BackwardStrategy strategy, const Problem<T>& p, bool in_place, int shift, std::string* failure,
                BackwardStrategy* ran = nullptr, bool saved = false) {
  const BackwardLayout& l = p.l;
  const auto bytes = [&](std::int64_t ld) { return static_cast<std::size_t>(p.extent(ld) + shift) * sizeof(T); };
  DeviceBuffer bx(bytes(l.ld_x)), by(bytes(l.ld_y)), bdy(bytes(l.ld_dy)), bdx(in_place ? 0 : bytes(l.ld_dx));
  T* x = bx.get<T>() + shift;
  T* y = by.get<T>() + shift;
  T* dy = bdy.get<T>() + shift;
  T* dx = in_place ? dy : bdx.get<T>() + shift;
  RSS_TEST_CUDA(cudaMemcpy(x, p.x.data(), p.x.size() * sizeof(T), cudaMemcpyHostToDevice));
  RSS_TEST_CUDA(cudaMemcpy(y, p.y.data(), p.y.size() * sizeof(T), cudaMemcpyHostToDevice));
  if (in_place) RSS_TEST_CUDA(cudaMemset(bdy.get(), 0xFF, bdy.bytes()));
  RSS_TEST_CUDA(cudaMemcpy(dy, p.dy.data(), p.dy.size() * sizeof(T), cudaMemcpyHostToDevice));
  if (!in_place) rss_test::poison(bdx);
  std::size_t ws_bytes = 0;
  REQUIRE(rss::backward_workspace_bytes<T>(strategy, l.rows, l.cols, &ws_bytes) == Status::success);
  DeviceBuffer ws(ws_bytes);
  DeviceBuffer stats(p.stats.size() * sizeof(rss::RowStatistics));
  RSS_TEST_CUDA(cudaMemcpy(stats.get(), p.stats.data(), stats.bytes(), cudaMemcpyHostToDevice));
  if (saved) RSS_TEST_CUDA(cudaMemset(by.get(), 0xFF, by.bytes()));  // y is not an input: NaN would show
  const Status s = saved ? rss::rms_scaled_softmax_backward_saved<T>(strategy, x, stats.get<rss::RowStatistics>(), dy,
                                                                     dx, l, ws.get(), ws_bytes, nullptr, ran)
                         : rss::rms_scaled_softmax_backward<T>(strategy, x, y, dy, dx, l, ws.get(), ws_bytes, nullptr, ran);
  RSS_TEST_CUDA(cudaDeviceSynchronize());
  const std::size_t total = (in_place ? bdy.bytes() : bdx.bytes()) / sizeof(T);
  std::vector<T> out(total);
  RSS_TEST_CUDA(cudaMemcpy(out.data(), in_place ? bdy.get() : bdx.get(), total * sizeof(T), cudaMemcpyDeviceToHost));
  std::vector<T> dx_host(out.begin() + shift, out.end());
  if (!rss::ok(s)) {
    // Refused: dx untouched (all poison, or dy's values when in place).
    T poison;
    std::memset(static_cast<void*>(&poison), 0xFF, sizeof(T));
    for (std::size_t k = 0; k < dx_host.size() && failure->empty(); ++k) {
      const T& want = in_place ? p.dy[k] : poison;
      if (std::memcmp(&dx_host[k], &want, sizeof(T)) != 0) *failure = "refused call wrote element " + std::to_string(k);
    }
    return s;
  }
  *failure = p.check(dx_host, saved);
  if (failure->empty() && !in_place) {
    // dx's padding between rows stays poisoned (NaN bytes 0xFF).
    for (std::int64_t k = 0; k < static_cast<std::int64_t>(dx_host.size()); ++k) {
      if (k % l.ld_dx >= l.cols && !std::isnan(to_double(dx_host[static_cast<std::size_t>(k)]))) {
        *failure = "padding element " + std::to_string(k) + " written";
        break;
      }
    }
  }
  return s;
}

bool cluster_holds(std::int64_t cols, rss::DType dtype) {
  rss::DeviceInfo device;
  REQUIRE(rss::current_device_info(&device) == Status::success);
  const int max_cluster = std::min(device.max_cluster_size, rss::backward_max_cluster_size);
  return rss::default_backward_cluster_config(cols, dtype, max_cluster).cluster_size > 0;
}

/// What automatic runs on rows x cols of dtype on the current device.
BackwardStrategy automatic_pick(std::int64_t rows, std::int64_t cols, rss::DType dtype) {
  rss::DeviceInfo device;
  REQUIRE(rss::current_device_info(&device) == Status::success);
  const bool two_pass = !cluster_holds(cols, dtype) ||
                        rss::backward_prefers_two_pass(rows, cols, dtype, device.max_cluster_size, device.sm_count);
  return two_pass ? BackwardStrategy::two_pass : BackwardStrategy::cluster_row;
}

template <class T>
void check_strategies(const BackwardLayout& l, std::uint64_t seed, bool in_place, int shift,
                      const std::vector<Special>& specials = {}, bool saved = false, float x_scale = 1.0f,
                      bool spiky = false) {
  const Problem<T> p(l, seed, specials, x_scale, spiky);
  for (const BackwardStrategy strategy : kStrategies) {
    INFO(type_name<T>() << " " << rss::backward_strategy_name(strategy) << " " << l.rows << " x " << l.cols << " ld "
                        << l.ld_x << "/" << l.ld_y << "/" << l.ld_dy << "/" << l.ld_dx << (in_place ? " in place" : "")
                        << " shift " << shift << " seed " << seed << (saved ? " saved statistics" : "")
                        << " x scale " << x_scale << (spiky ? " spiky rows" : ""));
    std::string failure;
    BackwardStrategy ran{};
    const Status s = run_case<T>(strategy, p, in_place, shift, &failure, &ran, saved);
    const bool holds = cluster_holds(l.cols, rss::StorageTraits<T>::dtype);
    if (strategy == BackwardStrategy::cluster_row && !holds && !l.empty()) {
      CHECK(s == Status::not_admissible);
    } else {
      INFO(rss::status_message(s));
      CHECK(s == Status::success);
      if (strategy == BackwardStrategy::automatic && rss::ok(s) && !l.empty())
        CHECK(ran == automatic_pick(l.rows, l.cols, rss::StorageTraits<T>::dtype));
    }
    CHECK(failure == "");
  }
}

template <class T>
void check_shape(std::int64_t rows, std::int64_t cols) {
  check_strategies<T>(BackwardLayout::contiguous(rows, cols), rss_test::fresh_seed(), false, 0);
}

}  // namespace

TEST_CASE("backward: every strategy matches the reference on model and odd shapes", "[gpu][backward]") {
  REQUIRE(rss_test::has_device());
  const std::int64_t shapes[][2] = {{1, 1},    {1, 7},     {3, 33},     {5, 1000},  {7, 4097},    {17, 12345},
                                    {2, 65536}, {3, 65537}, {1, 131072}, {8, 131072}, {32, 128256}, {4096, 4096},
                                    {2, 131073}, {1, 300001}};
  for (const auto& shape : shapes) {
    check_shape<float>(shape[0], shape[1]);
    check_shape<__nv_bfloat16>(shape[0], shape[1]);
    check_shape<__half>(shape[0], shape[1]);
  }
}

TEST_CASE("backward: strided, unaligned and in-place layouts", "[gpu][backward][layout]") {
  REQUIRE(rss_test::has_device());
  for (const std::int64_t cols : {1, 5, 64, 1000, 4099, 16384, 70001}) {
    const std::int64_t rows = cols > 10000 ? 3 : 9;
    const std::uint64_t seed = rss_test::fresh_seed();
    // Misaligned rows (checked kernels), aligned strided rows (vector kernels), unaligned pointers, in place.
    check_strategies<float>(BackwardLayout{rows, cols, cols + 3, cols + 5, cols + 1, cols + 7}, seed, false, 0);
    check_strategies<float>(BackwardLayout{rows, cols, cols + 8, cols + 16, cols + 8, cols + 24}, seed, false, 0);
    check_strategies<float>(BackwardLayout::contiguous(rows, cols), seed, false, 1);
    check_strategies<float>(BackwardLayout::contiguous(rows, cols), seed, true, 0);
    check_strategies<float>(BackwardLayout{rows, cols, cols + 2, cols + 9, cols + 4, cols + 4}, seed, true, 3);
    check_strategies<__nv_bfloat16>(BackwardLayout{rows, cols, cols + 3, cols, cols + 8, cols + 1}, seed, false, 1);
    check_strategies<__nv_bfloat16>(BackwardLayout{rows, cols, cols + 16, cols + 8, cols + 8, cols + 8}, seed, true, 0);
    check_strategies<__half>(BackwardLayout{rows, cols, cols + 1, cols + 2, cols + 3, cols + 3}, seed, true, 5);
    check_strategies<__half>(BackwardLayout{rows, cols, cols, cols, cols, cols + 8}, seed, false, 0);
  }
}

TEST_CASE("backward: NaN and infinity in x or dy make their row NaN, like the reference; other rows are exact",
          "[gpu][backward][ieee]") {
  REQUIRE(rss_test::has_device());
  const std::vector<Special> specials = {Special::x_nan, Special::none, Special::x_pos_inf, Special::x_neg_inf,
                                         Special::dy_nan, Special::dy_pos_inf, Special::none};
  for (const std::int64_t cols : {8, 1000, 4099, 40000}) {
    const std::uint64_t seed = rss_test::fresh_seed();
    check_strategies<float>(BackwardLayout::contiguous(7, cols), seed, false, 0, specials);
    check_strategies<__nv_bfloat16>(BackwardLayout::contiguous(7, cols), seed, false, 0, specials);
    check_strategies<__half>(BackwardLayout::contiguous(7, cols), seed, true, 0, specials);
  }
}

TEST_CASE("backward: rows of tiny and huge magnitudes match the reference (beyond the storage's own rounding)",
          "[gpu][backward][ieee]") {
  REQUIRE(rss_test::has_device());
  for (const std::int64_t cols : {7, 4099, 65536}) {
    const std::uint64_t seed = rss_test::fresh_seed();
    for (const float scale : {1e-30f, 1e-8f, 1e10f, 1e30f, 1e36f}) {
      check_strategies<float>(BackwardLayout::contiguous(3, cols), seed, false, 0, {}, false, scale);
      check_strategies<__nv_bfloat16>(BackwardLayout::contiguous(3, cols), seed, false, 0, {}, false, scale);
      check_strategies<float>(BackwardLayout::contiguous(3, cols), seed, false, 0, {}, true, scale);
    }
    for (const float scale : {1e-3f, 1e3f}) check_strategies<__half>(BackwardLayout::contiguous(3, cols), seed, true, 0, {}, false, scale);
  }
}

TEST_CASE("backward from saved row statistics (y recomputed): shapes, layouts, IEEE rows", "[gpu][backward][saved]") {
  REQUIRE(rss_test::has_device());
  const std::vector<Special> specials = {Special::none, Special::x_nan, Special::x_pos_inf, Special::x_neg_inf,
                                         Special::dy_nan, Special::dy_pos_inf, Special::none};
  for (const std::int64_t cols : {1, 7, 1000, 4099, 8192, 32768, 131072, 131079}) {
    const std::uint64_t seed = rss_test::fresh_seed();
    const std::int64_t rows = cols > 10000 ? 3 : 9;
    check_strategies<float>(BackwardLayout::contiguous(rows, cols), seed, false, 0, {}, true);
    check_strategies<float>(BackwardLayout{rows, cols, cols + 3, cols, cols + 5, cols + 1}, seed, false, 1, {}, true);
    check_strategies<float>(BackwardLayout{rows, cols, cols + 8, cols, cols + 8, cols + 8}, seed, true, 0, {}, true);
    check_strategies<__nv_bfloat16>(BackwardLayout::contiguous(rows, cols), seed, true, 0, {}, true);
    check_strategies<__half>(BackwardLayout{rows, cols, cols + 1, cols, cols + 2, cols + 2}, seed, true, 3, {}, true);
    if (cols >= 7) check_strategies<float>(BackwardLayout::contiguous(7, cols), seed, false, 0, specials, true);
  }
  // Refusals: no statistics, dx over the statistics.
  const std::int64_t rows = 4, cols = 64;
  DeviceBuffer x(rows * cols * 4), dy(rows * cols * 4), dx(rows * cols * 4 + 256);
  rss_test::poison(dx);
  const BackwardLayout l = BackwardLayout::contiguous(rows, cols);
  CHECK(rss::rms_scaled_softmax_backward_saved<float>(BackwardStrategy::cluster_row, x.get<float>(), nullptr,
                                                      dy.get<float>(), dx.get<float>(), l, nullptr, 0) ==
        Status::null_pointer);
  CHECK(rss::rms_scaled_softmax_backward_saved<float>(BackwardStrategy::cluster_row, x.get<float>(),
                                                      reinterpret_cast<const rss::RowStatistics*>(dx.get<float>() + 8),
                                                      dy.get<float>(), dx.get<float>(), l, nullptr, 0) ==
        Status::overlapping_buffers);
  CHECK(rss::rms_scaled_softmax_backward_saved<float>(BackwardStrategy::cluster_row, x.get<float>(),
                                                      reinterpret_cast<const rss::RowStatistics*>(x.get<char>() + 2),
                                                      dy.get<float>(), dx.get<float>(), l, nullptr, 0) ==
        Status::misaligned_statistics);
  std::vector<unsigned char> after(dx.bytes());
  RSS_TEST_CUDA(cudaMemcpy(after.data(), dx.get(), dx.bytes(), cudaMemcpyDeviceToHost));
  CHECK(std::all_of(after.begin(), after.end(), [](unsigned char b) { return b == 0xFF; }));
}

/// The forward (`forward`, writing row statistics) then the saved backward of every strategy, against the
/// exact gradient: the pair a training step runs when it keeps x and the statistics instead of y.
template <class T>
void check_forward_statistics_feed_backward(rss::Strategy forward, std::int64_t rows, std::int64_t cols,
                                            bool spiky = false) {
  const BackwardLayout l = BackwardLayout::contiguous(rows, cols);
  const Problem<T> p(l, rss_test::fresh_seed(), {}, 1.0f, spiky);
  const std::size_t n = p.x.size();
  DeviceBuffer x(n * sizeof(T)), y(n * sizeof(T)), dy(n * sizeof(T)), dx(n * sizeof(T));
  DeviceBuffer stats(static_cast<std::size_t>(rows) * sizeof(rss::RowStatistics));
  RSS_TEST_CUDA(cudaMemcpy(x.get(), p.x.data(), n * sizeof(T), cudaMemcpyHostToDevice));
  RSS_TEST_CUDA(cudaMemcpy(dy.get(), p.dy.data(), n * sizeof(T), cudaMemcpyHostToDevice));
  std::size_t fw_bytes = 0;
  REQUIRE(rss::workspace_bytes<T>(forward, rows, cols, &fw_bytes) == Status::success);
  DeviceBuffer fw(fw_bytes);
  REQUIRE(rss::rms_scaled_softmax_with_statistics<T>(forward, x.get<const T>(), y.get<T>(), stats.get<rss::RowStatistics>(),
                                                     rss::Layout::contiguous(rows, cols), fw.get(), fw_bytes) ==
          Status::success);
  for (const BackwardStrategy strategy : kStrategies) {
    if (strategy == BackwardStrategy::cluster_row && !cluster_holds(cols, rss::dtype_of<T>)) continue;
    INFO(type_name<T>() << " forward " << rss::strategy_name(forward) << ", backward "
                        << rss::backward_strategy_name(strategy) << " " << rows << " x " << cols
                        << (spiky ? " spiky rows" : ""));
    std::size_t bytes = 0;
    REQUIRE(rss::backward_workspace_bytes<T>(strategy, rows, cols, &bytes) == Status::success);
    DeviceBuffer ws(bytes);
    rss_test::poison(dx);
    REQUIRE(rss::rms_scaled_softmax_backward_saved<T>(strategy, x.get<const T>(), stats.get<const rss::RowStatistics>(),
                                                      dy.get<const T>(), dx.get<T>(), l, ws.get(), bytes) ==
            Status::success);
    std::vector<T> out(n);
    RSS_TEST_CUDA(cudaMemcpy(out.data(), dx.get(), n * sizeof(T), cudaMemcpyDeviceToHost));
    CHECK(p.check(out) == "");
  }
}

TEST_CASE("backward from the statistics the forward wrote matches the exact gradient", "[gpu][backward][saved]") {
  REQUIRE(rss_test::has_device());
  for (const rss::Strategy forward : {rss::Strategy::automatic, rss::Strategy::local_fusion, rss::Strategy::block_row}) {
    check_forward_statistics_feed_backward<float>(forward, 9, 1000);
    check_forward_statistics_feed_backward<float>(forward, 3, 131079);
    check_forward_statistics_feed_backward<__nv_bfloat16>(forward, 32, 128256);
    check_forward_statistics_feed_backward<__half>(forward, 64, 4099);
  }
}

// Rows that a few entries dominate (spiky_rows: spikes in zeros or noise, eps-dominated rows with an offset,
// scales from 1e-30 to 3e38, squares past FLT_MAX in some runs only): both saved states, and y recomputed from the statistics the forward wrote, which
// once drifted by 2.6e-5 on such rows and took the backward past its bound.
TEST_CASE("backward on rows that a few entries dominate: both saved states, statistics from every forward",
          "[gpu][backward][spiky]") {
  REQUIRE(rss_test::has_device());
  for (const std::int64_t cols : {1000, 4099, 32768, 131072}) {
    const std::uint64_t seed = rss_test::fresh_seed();
    for (const bool saved : {false, true}) {
      check_strategies<float>(BackwardLayout::contiguous(14, cols), seed, false, 0, {}, saved, 1.0f, true);
      check_strategies<__nv_bfloat16>(BackwardLayout::contiguous(7, cols), seed, false, 0, {}, saved, 1.0f, true);
      check_strategies<__half>(BackwardLayout::contiguous(7, cols), seed, false, 0, {}, saved, 1.0f, true);
    }
  }
  for (const rss::Strategy forward : {rss::Strategy::automatic, rss::Strategy::cluster_row, rss::Strategy::local_fusion,
                                      rss::Strategy::block_row, rss::Strategy::megakernel_grid, rss::Strategy::baseline}) {
    check_forward_statistics_feed_backward<float>(forward, 14, 1000, true);
    check_forward_statistics_feed_backward<float>(forward, 14, 32768, true);
    check_forward_statistics_feed_backward<__nv_bfloat16>(forward, 7, 4099, true);
    check_forward_statistics_feed_backward<__half>(forward, 7, 32768, true);
  }
}

// The backward from y takes y as given: the kernels use no identity of a softmax output (such as sum y = 1), so
// any y gets the formula's dx. Its error is then relative to the size of the formula's two terms,
// r ||y (g - c)|| and (r^3 / N) |p - c q| ||x||, which for a y far from a softmax output can be far above ||dx||:
// here y = dy = x (one buffer, all read-only), where the two terms nearly cancel.
TEST_CASE("backward from y: any y gets the formula's dx, to fp32's bound on the size of its terms",
          "[gpu][backward][any_y]") {
  REQUIRE(rss_test::has_device());
  for (const std::int64_t cols : {7, 1000, 4099, 32768}) {
    const std::int64_t rows = 9;
    const std::uint64_t seed = rss_test::fresh_seed();
    const std::vector<float> x = rss_test::random_rows(rows, cols, seed);
    const auto n = static_cast<std::size_t>(rows * cols);
    std::vector<double> ref(n), scale(static_cast<std::size_t>(rows));
    std::vector<double> xd(x.begin(), x.end());
    rss::reference::rms_scaled_softmax_backward(xd.data(), xd.data(), xd.data(), ref.data(), rows, cols);
    for (std::int64_t i = 0; i < rows; ++i) {
      const double* xr = xd.data() + i * cols;
      const rss::reference::BackwardRowSums sums = rss::reference::backward_row_sums(xr, xr, xr, cols);
      const double r = 1.0 / std::sqrt(sums.sum_sq / static_cast<double>(cols) + rss::reference::epsilon);
      double first = 0.0, norm_ref = 0.0;
      for (std::int64_t j = 0; j < cols; ++j) {
        first += std::pow(r * xr[j] * (xr[j] - sums.c), 2);
        norm_ref += std::pow(ref[static_cast<std::size_t>(i * cols + j)], 2);
      }
      const double second = r * r * r / static_cast<double>(cols) * std::abs(sums.p - sums.c * sums.q) * std::sqrt(sums.sum_sq);
      scale[static_cast<std::size_t>(i)] = std::max({std::sqrt(norm_ref), std::sqrt(first), second});
    }
    DeviceBuffer buffer(n * sizeof(float)), dx(n * sizeof(float));
    RSS_TEST_CUDA(cudaMemcpy(buffer.get(), x.data(), n * sizeof(float), cudaMemcpyHostToDevice));
    const BackwardLayout l = BackwardLayout::contiguous(rows, cols);
    for (const BackwardStrategy strategy : kStrategies) {
      if (strategy == BackwardStrategy::cluster_row && !cluster_holds(cols, rss::DType::fp32)) continue;
      INFO(rss::backward_strategy_name(strategy) << " " << rows << " x " << cols << " seed " << seed);
      std::size_t bytes = 0;
      REQUIRE(rss::backward_workspace_bytes<float>(strategy, rows, cols, &bytes) == Status::success);
      DeviceBuffer ws(bytes);
      rss_test::poison(dx);
      const float* one = buffer.get<const float>();
      REQUIRE(rss::rms_scaled_softmax_backward<float>(strategy, one, one, one, dx.get<float>(), l, ws.get(), bytes) ==
              Status::success);
      std::vector<float> out(n);
      RSS_TEST_CUDA(cudaMemcpy(out.data(), dx.get(), n * sizeof(float), cudaMemcpyDeviceToHost));
      for (std::int64_t i = 0; i < rows; ++i) {
        double diff = 0.0;
        for (std::int64_t j = 0; j < cols; ++j) {
          const auto k = static_cast<std::size_t>(i * cols + j);
          diff += (out[k] - ref[k]) * (out[k] - ref[k]);
        }
        const double error = std::sqrt(diff) / scale[static_cast<std::size_t>(i)];
        INFO("row " << i << ": error " << error << " of the terms' size");
        CHECK(error <= rss::reference::backward_tolerance(true));
      }
    }
  }
}

TEST_CASE("backward: random shapes, layouts, storage types and strategies", "[gpu][backward][random]") {
  REQUIRE(rss_test::has_device());
  const char* env = std::getenv("RSS_BACKWARD_CASES");
  const int cases = env != nullptr ? std::atoi(env) : 200;
  const char* seed_env = std::getenv("RSS_RANDOM_SEED");
  const std::uint64_t seed = seed_env != nullptr ? std::strtoull(seed_env, nullptr, 10) : rss_test::fresh_seed();
  INFO("RSS_RANDOM_SEED=" << seed);
  std::mt19937_64 gen(seed);
  std::uniform_real_distribution<double> log_cols(0.0, std::log(140000.0));
  std::uniform_int_distribution<int> rows_d(1, 12), pad(0, 9), shift(0, 7), coin(0, 1), type(0, 2);
  for (int c = 0; c < cases; ++c) {
    const auto cols = static_cast<std::int64_t>(std::exp(log_cols(gen)));
    const std::int64_t rows = cols > 50000 ? 2 : rows_d(gen);
    const bool in_place = coin(gen) == 1;
    const std::int64_t ld_dy = cols + pad(gen);
    const BackwardLayout l{rows, cols, cols + pad(gen), cols + pad(gen), ld_dy, in_place ? ld_dy : cols + pad(gen)};
    const int s = coin(gen) == 1 ? 0 : shift(gen);
    const std::uint64_t case_seed = gen();
    switch (type(gen)) {
      case 0: check_strategies<float>(l, case_seed, in_place, s); break;
      case 1: check_strategies<__nv_bfloat16>(l, case_seed, in_place, s); break;
      default: check_strategies<__half>(l, case_seed, in_place, s); break;
    }
  }
}

TEST_CASE("backward: refused calls return their status and leave every buffer untouched", "[gpu][backward][refusal]") {
  REQUIRE(rss_test::has_device());
  const std::int64_t rows = 4, cols = 40;
  const BackwardLayout l = BackwardLayout::contiguous(rows, cols);
  const Problem<float> p(l, rss_test::fresh_seed());
  // One arena: x, y, dy, dx (poisoned) and a workspace, so that any stray write shows up in one comparison.
  const std::size_t m = static_cast<std::size_t>(rows * cols) * sizeof(float);
  const std::size_t slot = (m + 255) / 256 * 256;
  std::size_t ws_bytes = 0;
  REQUIRE(rss::backward_workspace_bytes<float>(BackwardStrategy::two_pass, rows, cols, &ws_bytes) == Status::success);
  REQUIRE(ws_bytes > 0);
  DeviceBuffer arena(4 * slot + ws_bytes + 256);
  auto* base = arena.get<unsigned char>();
  float* x = reinterpret_cast<float*>(base);
  float* y = reinterpret_cast<float*>(base + slot);
  float* dy = reinterpret_cast<float*>(base + 2 * slot);
  float* dx = reinterpret_cast<float*>(base + 3 * slot);
  unsigned char* ws = base + 4 * slot;
  RSS_TEST_CUDA(cudaMemset(base, 0xFF, arena.bytes()));
  RSS_TEST_CUDA(cudaMemcpy(x, p.x.data(), m, cudaMemcpyHostToDevice));
  RSS_TEST_CUDA(cudaMemcpy(y, p.y.data(), m, cudaMemcpyHostToDevice));
  RSS_TEST_CUDA(cudaMemcpy(dy, p.dy.data(), m, cudaMemcpyHostToDevice));
  std::vector<unsigned char> before(arena.bytes()), after(arena.bytes());
  RSS_TEST_CUDA(cudaMemcpy(before.data(), base, arena.bytes(), cudaMemcpyDeviceToHost));
  std::vector<float> host(static_cast<std::size_t>(rows * cols), 1.0f);

  struct Case {
    const char* what;
    BackwardStrategy strategy;
    const float *x, *y, *dy;
    float* dx;
    BackwardLayout l;
    void* ws;
    std::size_t ws_bytes;
    Status expected;
  };
  const BackwardStrategy two = BackwardStrategy::two_pass, cl = BackwardStrategy::cluster_row,
                         au = BackwardStrategy::automatic;
  const std::vector<Case> cases = {
      {"null x", au, nullptr, y, dy, dx, l, ws, ws_bytes, Status::null_pointer},
      {"null dx", cl, x, y, dy, nullptr, l, ws, ws_bytes, Status::null_pointer},
      {"null workspace", two, x, y, dy, dx, l, nullptr, ws_bytes, Status::null_pointer},
      {"negative rows", au, x, y, dy, dx, BackwardLayout::contiguous(-1, cols), ws, ws_bytes, Status::negative_size},
      {"ld_dx below cols", cl, x, y, dy, dx, BackwardLayout{rows, cols, cols, cols, cols, cols - 1}, ws, ws_bytes,
       Status::invalid_layout},
      {"dx is x", au, x, y, dy, const_cast<float*>(x), l, ws, ws_bytes, Status::overlapping_buffers},
      {"dx one element into dy", cl, x, y, dy, dy + 1, l, ws, ws_bytes, Status::overlapping_buffers},
      {"dx is dy with another ld", two, x, y, dy, dy, BackwardLayout{rows, cols, cols, cols, cols, cols + 1}, ws,
       ws_bytes, Status::overlapping_buffers},
      {"workspace over dx", two, x, y, dy, dx, l, dx, ws_bytes, Status::overlapping_buffers},
      {"workspace too small", au, x, y, dy, dx, l, ws, ws_bytes - 1, Status::workspace_too_small},
      {"misaligned workspace", two, x, y, dy, dx, l, ws + 16, ws_bytes, Status::misaligned_workspace},
      {"host x", cl, host.data(), y, dy, dx, l, ws, ws_bytes, Status::not_device_memory},
      {"host dx", au, x, y, dy, host.data(), l, ws, ws_bytes, Status::not_device_memory},
      {"invalid strategy", static_cast<BackwardStrategy>(42), x, y, dy, dx, l, ws, ws_bytes, Status::invalid_strategy},
  };
  for (const Case& c : cases) {
    INFO(c.what);
    const Status s = rss::rms_scaled_softmax_backward<float>(c.strategy, c.x, c.y, c.dy, c.dx, c.l, c.ws, c.ws_bytes);
    CHECK(std::string(rss::status_message(s)) == rss::status_message(c.expected));
    RSS_TEST_CUDA(cudaDeviceSynchronize());
    RSS_TEST_CUDA(cudaMemcpy(after.data(), base, arena.bytes(), cudaMemcpyDeviceToHost));
    CHECK(std::memcmp(before.data(), after.data(), before.size()) == 0);
  }
  CHECK(host == std::vector<float>(static_cast<std::size_t>(rows * cols), 1.0f));
  // Empty problems succeed with any pointers and touch nothing.
  CHECK(rss::rms_scaled_softmax_backward<float>(au, nullptr, nullptr, nullptr, nullptr, BackwardLayout::contiguous(0, 5),
                                                nullptr, 0) == Status::success);
}

TEST_CASE("backward operator: plans once, runs many times, describes its launches", "[gpu][backward][operator]") {
  REQUIRE(rss_test::has_device());
  const std::int64_t rows = 8, cols = 4096;
  const BackwardLayout l = BackwardLayout::contiguous(rows, cols);
  const Problem<float> p(l, rss_test::fresh_seed());
  const std::size_t m = p.x.size() * sizeof(float);
  DeviceBuffer x(m), y(m), dy(m), dx(m);
  RSS_TEST_CUDA(cudaMemcpy(x.get(), p.x.data(), m, cudaMemcpyHostToDevice));
  RSS_TEST_CUDA(cudaMemcpy(y.get(), p.y.data(), m, cudaMemcpyHostToDevice));
  RSS_TEST_CUDA(cudaMemcpy(dy.get(), p.dy.data(), m, cudaMemcpyHostToDevice));
  std::size_t ws_bytes = 0;
  REQUIRE(rss::backward_workspace_bytes<float>(BackwardStrategy::automatic, rows, cols, &ws_bytes) == Status::success);
  DeviceBuffer ws(ws_bytes);
  const bool holds = cluster_holds(cols, rss::DType::fp32);
  for (const BackwardStrategy strategy : kStrategies) {
    INFO(rss::backward_strategy_name(strategy));
    rss::BackwardOperator<float> op;
    CHECK_FALSE(op.ready());
    CHECK(op.run() == Status::invalid_strategy);
    const Status init = op.initialize(strategy, x.get<float>(), y.get<float>(), dy.get<float>(), dx.get<float>(), l,
                                      ws.get(), ws_bytes);
    if (strategy == BackwardStrategy::cluster_row && !holds) {
      CHECK(init == Status::not_admissible);
      continue;
    }
    REQUIRE(init == Status::success);
    for (int run = 0; run < 3; ++run) {
      rss_test::poison(dx);
      BackwardStrategy ran{};
      REQUIRE(op.run(nullptr, &ran) == Status::success);
      CHECK(ran == op.strategy());
      RSS_TEST_CUDA(cudaDeviceSynchronize());
      std::vector<float> out(p.x.size());
      RSS_TEST_CUDA(cudaMemcpy(out.data(), dx.get(), m, cudaMemcpyDeviceToHost));
      CHECK(p.check(out) == "");
    }
    rss::LaunchList list;
    REQUIRE(op.describe(&list) == Status::success);
    if (op.strategy() == BackwardStrategy::cluster_row) {
      REQUIRE(list.size == 1);
      CHECK(std::string(list.items[0].kernel) == "backward::cluster_row::vectors");
      CHECK(list.items[0].cluster_size == op.cluster_plan().config.cluster_size);
      CHECK(list.items[0].grid == static_cast<unsigned>(rows * op.cluster_plan().config.cluster_size));
      CHECK(list.items[0].block == static_cast<unsigned>(op.cluster_plan().config.threads));
      CHECK(list.items[0].blocks_per_sm > 0);
      CHECK(list.logical_bytes == rows * cols * 4 * 4);  // x, y and dy read once, dx written once
    } else {
      REQUIRE(list.size == 2);
      CHECK(std::string(list.items[0].kernel) == "backward::two_pass::sums");
      CHECK(std::string(list.items[1].kernel) == "backward::two_pass::apply");
      CHECK(list.logical_bytes == rows * cols * 4 * 7);  // both passes read x, y and dy; the second writes dx
    }
    CHECK(list.kernels == list.size);
    CHECK_FALSE(list.any_cooperative());
  }

  // rebind: the same layout at other pointers, one element off 16-byte alignment (the cluster kernel changes
  // from vectors to checked and is planned again), then back with the pointers vouched for (no runtime
  // query); every run matches the reference. A vouched rebind still makes the host-side checks, and the
  // runtime's check refuses host memory.
  {
    rss::BackwardOperator<float> op;
    REQUIRE(op.initialize(BackwardStrategy::automatic, x.get<float>(), y.get<float>(), dy.get<float>(), dx.get<float>(),
                          l, ws.get(), ws_bytes) == Status::success);
    DeviceBuffer x2(m + 16), y2(m + 16), dy2(m + 16), dx2(m + 16);
    float* px = x2.get<float>() + 1;
    float* py = y2.get<float>() + 1;
    float* pdy = dy2.get<float>() + 1;
    float* pdx = dx2.get<float>() + 1;
    RSS_TEST_CUDA(cudaMemcpy(px, p.x.data(), m, cudaMemcpyHostToDevice));
    RSS_TEST_CUDA(cudaMemcpy(py, p.y.data(), m, cudaMemcpyHostToDevice));
    RSS_TEST_CUDA(cudaMemcpy(pdy, p.dy.data(), m, cudaMemcpyHostToDevice));
    for (int pass = 0; pass < 2; ++pass) {
      float* out = pass == 0 ? pdx : dx.get<float>();
      const Status s = pass == 0 ? op.rebind(px, py, pdy, pdx, ws.get(), ws_bytes)
                                 : op.rebind(x.get<float>(), y.get<float>(), dy.get<float>(), dx.get<float>(), ws.get(), ws_bytes,
                                             nullptr, rss::PointerCheck::vouched);
      REQUIRE(s == Status::success);
      RSS_TEST_CUDA(cudaMemset(out, 0xFF, m));
      REQUIRE(op.run() == Status::success);
      RSS_TEST_CUDA(cudaDeviceSynchronize());
      std::vector<float> got(p.x.size());
      RSS_TEST_CUDA(cudaMemcpy(got.data(), out, m, cudaMemcpyDeviceToHost));
      CHECK(p.check(got) == "");
    }
    CHECK(op.rebind(px, py, pdy, px, ws.get(), ws_bytes) == Status::overlapping_buffers);  // refused: pointers kept
    CHECK(op.rebind(px, py, pdy, px, ws.get(), ws_bytes, nullptr, rss::PointerCheck::vouched) ==
          Status::overlapping_buffers);
    std::vector<float> host(p.x.size());
    CHECK(op.rebind(host.data(), py, pdy, pdx, ws.get(), ws_bytes) == Status::not_device_memory);
    RSS_TEST_CUDA(cudaMemset(dx.get(), 0xFF, m));
    REQUIRE(op.run() == Status::success);
    RSS_TEST_CUDA(cudaDeviceSynchronize());
    std::vector<float> got(p.x.size());
    RSS_TEST_CUDA(cudaMemcpy(got.data(), dx.get(), m, cudaMemcpyDeviceToHost));
    CHECK(p.check(got) == "");
  }

  // The one-call description: cluster_row on the article's long rows is one launch of 8-block clusters.
  rss::LaunchList list;
  REQUIRE(rss::describe_backward_launches<float>(BackwardStrategy::automatic, 64, 131072, &list) == Status::success);
  if (cluster_holds(131072, rss::DType::fp32)) {
    REQUIRE(list.size == 1);
    CHECK(list.items[0].cluster_size == 8);
    CHECK(list.items[0].grid == 64u * 8u);
  }
  // A single one spreads over 16 blocks of 256 threads where the device launches them and has the SMs for it.
  {
    rss::DeviceInfo device;
    REQUIRE(rss::current_device_info(&device) == Status::success);
    REQUIRE(rss::describe_backward_launches<float>(BackwardStrategy::automatic, 1, 131072, &list) == Status::success);
    if (device.max_cluster_size >= 16 && device.sm_count >= 32) {
      REQUIRE(list.size == 1);
      CHECK(list.items[0].cluster_size == 16);
      CHECK(list.items[0].block == 256u);
    }
  }
  REQUIRE(rss::describe_backward_launches<__nv_bfloat16>(BackwardStrategy::two_pass, 16, 300000, &list) == Status::success);
  CHECK(list.size == 2);
  // Past 8 blocks' rows: clusters of 9-16 where the device launches them (262144 elements at most), else refused.
  if (cluster_holds(131073, rss::DType::fp32)) {
    REQUIRE(rss::describe_backward_launches<float>(BackwardStrategy::cluster_row, 2, 131073, &list) == Status::success);
    REQUIRE(list.size == 1);
    CHECK(list.items[0].cluster_size == 9);
    CHECK(list.items[0].grid == 2u * 9u);
  } else {
    CHECK(rss::describe_backward_launches<float>(BackwardStrategy::cluster_row, 1, 131073, &list) ==
          Status::not_admissible);
  }
  CHECK(rss::describe_backward_launches<float>(BackwardStrategy::cluster_row, 1, rss::backward_cluster_max_cols + 1,
                                               &list) == Status::not_admissible);
  // From saved statistics: their defaults (one 256 x 16 block per 4096-element row) and automatic rule
  // (cluster_row wherever a cluster holds the row, two_pass beyond), as the saved call's operator plans them.
  if (cluster_holds(4096, rss::DType::bf16)) {
    REQUIRE(rss::describe_backward_launches<__nv_bfloat16>(BackwardStrategy::automatic, 4096, 4096, &list, true) ==
            Status::success);
    REQUIRE(list.size == 1);
    CHECK(list.items[0].block == 256u);
    CHECK(list.items[0].grid == 4096u);
  }
  REQUIRE(rss::describe_backward_launches<__nv_bfloat16>(BackwardStrategy::automatic, 64, 32768, &list, true) ==
          Status::success);
  CHECK(list.size == (cluster_holds(32768, rss::DType::bf16) ? 1 : 2));
  REQUIRE(rss::describe_backward_launches<__nv_bfloat16>(BackwardStrategy::automatic, 4, 131072, &list, true) ==
          Status::success);
  CHECK(list.size == (cluster_holds(131072, rss::DType::bf16) ? 1 : 2));
  REQUIRE(rss::describe_backward_launches<__nv_bfloat16>(BackwardStrategy::automatic, 4, 300000, &list, true) ==
          Status::success);
  CHECK(list.size == 2);
  // Rows that need more than 8 blocks: two_pass while their clusters do not fill the device, else cluster_row.
  REQUIRE(rss::describe_backward_launches<__nv_bfloat16>(BackwardStrategy::automatic, 2, 200003, &list, true) ==
          Status::success);
  CHECK(list.size == 2);
  rss::DeviceInfo device;
  REQUIRE(rss::current_device_info(&device) == Status::success);
  if (cluster_holds(256000, rss::DType::bf16) && device.sm_count <= 32 * 16) {
    REQUIRE(rss::describe_backward_launches<__nv_bfloat16>(BackwardStrategy::automatic, 32, 256000, &list, true) ==
            Status::success);
    REQUIRE(list.size == 1);
    CHECK(list.items[0].cluster_size == 16);
  }
  REQUIRE(rss::describe_backward_launches<float>(BackwardStrategy::automatic, 64, 32768, &list, true) == Status::success);
  CHECK(list.size == (cluster_holds(32768, rss::DType::fp32) ? 1 : 2));
}

TEST_CASE("backward without a usable device says no_device", "[.][no_device]") {
  const auto* fake = reinterpret_cast<const float*>(0x1000);  // never dereferenced: refused before any launch
  auto* fake_dx = reinterpret_cast<float*>(0x100000);
  alignas(256) static unsigned char fake_workspace[1];
  for (const BackwardStrategy strategy : kStrategies) {
    INFO(rss::backward_strategy_name(strategy));
    const Status s = rss::rms_scaled_softmax_backward<float>(strategy, fake, fake + 64, fake + 128, fake_dx,
                                                             BackwardLayout::contiguous(2, 8), fake_workspace,
                                                             std::size_t{1} << 20);
    CHECK(s == Status::no_device);
  }
}

// The backward's config(): automatic's pick with its cluster configuration; a second operator initialised with
// it plans the same launches (the PyTorch operator plans each layout this way).
TEST_CASE("backward: config() plans the same launches as the automatic pick", "[gpu][backward][api]") {
  REQUIRE(rss_test::has_device());
  for (const std::int64_t cols : {1001, 4096, 32768, 131072}) {
    for (const bool saved : {false, true}) {
      const std::int64_t rows = 64;
      CAPTURE(cols, saved);
      const auto l = BackwardLayout::contiguous(rows, cols);
      const std::size_t m = static_cast<std::size_t>(rows * cols) * sizeof(__nv_bfloat16);
      DeviceBuffer x(m), y(m), dy(m), dx(m), stats(static_cast<std::size_t>(rows) * sizeof(rss::RowStatistics));
      std::size_t bytes = 0;
      REQUIRE(rss::backward_workspace_bytes<__nv_bfloat16>(BackwardStrategy::automatic, rows, cols, &bytes) == Status::success);
      DeviceBuffer ws(bytes);
      const auto init = [&](rss::BackwardOperator<__nv_bfloat16>& op, const rss::BackwardConfig& c, std::size_t b) {
        const auto* sp = stats.get<const rss::RowStatistics>();
        return saved ? op.initialize_saved(c, x.get<__nv_bfloat16>(), sp, dy.get<__nv_bfloat16>(), dx.get<__nv_bfloat16>(), l, ws.get(), b)
                     : op.initialize(c, x.get<__nv_bfloat16>(), y.get<__nv_bfloat16>(), dy.get<__nv_bfloat16>(),
                                     dx.get<__nv_bfloat16>(), l, ws.get(), b);
      };
      rss::BackwardOperator<__nv_bfloat16> picked, again;
      REQUIRE(init(picked, BackwardStrategy::automatic, bytes) == Status::success);
      const rss::BackwardConfig config = picked.config();
      CHECK(config.strategy == picked.strategy());
      std::size_t own = 0;
      REQUIRE(rss::backward_workspace_bytes<__nv_bfloat16>(config, rows, cols, &own) == Status::success);
      CHECK(own <= bytes);
      REQUIRE(init(again, config, own) == Status::success);
      rss::LaunchList a, b;
      REQUIRE(picked.describe(&a) == Status::success);
      REQUIRE(again.describe(&b) == Status::success);
      REQUIRE(a.size == b.size);
      for (int i = 0; i < a.size; ++i) {
        CHECK(std::string(a.items[i].kernel) == b.items[i].kernel);
        CHECK(a.items[i].grid == b.items[i].grid);
        CHECK(a.items[i].block == b.items[i].block);
        CHECK(a.items[i].cluster_size == b.items[i].cluster_size);
      }
    }
  }
}
