// Reliability of every strategy inside someone else's program: random shapes with unaligned
// pointers and every storage type, several streams and several calls in flight at once, and
// non-finite or extreme inputs compared with the CPU reference's IEEE behaviour.
#include <catch2/catch.hpp>
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <algorithm>
#include <iterator>
#include <limits>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "rss/rss.cuh"
#include "support/device.cuh"
#include "support/random_input.hpp"
#include "support/storage.cuh"
#include "support/strategies.cuh"

namespace {

using rss::Status;
using rss::Strategy;

using rss_test::from_float;
using rss_test::to_float;

/// Rows whose reference holds a NaN must come back all NaN; the others within the tolerance.
bool matches_reference(const std::vector<double>& y, const std::vector<double>& ref, std::int64_t rows,
                       std::int64_t cols, double tolerance, std::string* why) {
  for (std::int64_t i = 0; i < rows; ++i) {
    const double* r = ref.data() + i * cols;
    const double* o = y.data() + i * cols;
    bool ref_nan = false;
    for (std::int64_t j = 0; j < cols; ++j) ref_nan = ref_nan || std::isnan(r[j]);
    if (ref_nan) {
      for (std::int64_t j = 0; j < cols; ++j) {
        if (std::isnan(r[j]) != std::isnan(o[j])) {
          *why = "row " + std::to_string(i) + " col " + std::to_string(j) + ": NaN pattern differs (got " +
                 std::to_string(o[j]) + ", reference " + std::to_string(r[j]) + ")";
          return false;
        }
      }
      continue;
    }
    const double e = rss::reference::row_relative_error(o, r, cols);
    if (!(e <= tolerance)) {
      *why = "row " + std::to_string(i) + ": relative error " + std::to_string(e);
      return false;
    }
  }
  return true;
}

/// Runs one strategy on host values placed at element offsets in their device buffers, with y and
/// `canary` elements either side of it poisoned, and compares with the reference.
template <class T>
void check_case(Strategy strategy, const std::vector<float>& values, std::int64_t rows, std::int64_t cols,
                int x_offset, int y_offset, cudaStream_t stream) {
  constexpr std::int64_t canary = 16;
  const std::int64_t n = rows * cols;
  std::vector<T> x(static_cast<std::size_t>(n));
  std::vector<double> stored(x.size()), ref(x.size());
  for (std::size_t i = 0; i < x.size(); ++i) {
    x[i] = from_float<T>(values[i]);
    stored[i] = to_float(x[i]);
  }
  rss::reference::rms_scaled_softmax(stored.data(), ref.data(), rows, cols);

  rss_test::DeviceBuffer x_buffer((n + x_offset) * sizeof(T)), y_buffer((n + y_offset + 2 * canary) * sizeof(T));
  T* x_device = x_buffer.get<T>() + x_offset;
  T* y_device = y_buffer.get<T>() + canary + y_offset;
  RSS_TEST_CUDA(cudaMemcpy(x_device, x.data(), n * sizeof(T), cudaMemcpyHostToDevice));
  rss_test::poison(y_buffer);
  std::size_t bytes = 0;
  REQUIRE(rss::workspace_bytes<T>(strategy, rows, cols, &bytes) == Status::success);
  rss_test::DeviceBuffer workspace(bytes);
  if (bytes > 0) RSS_TEST_CUDA(cudaMemset(workspace.get(), 0, bytes));
  const Status s = rss::rms_scaled_softmax(strategy, static_cast<const T*>(x_device), y_device, rows, cols,
                                           workspace.get(), bytes, stream);
  INFO("status " << rss::status_message(s));
  std::vector<T> all(static_cast<std::size_t>(n + y_offset + 2 * canary));
  if (strategy == Strategy::cluster_row && !rss_test::cluster_row_holds<T>(cols)) {
    // A row longer than the largest launched cluster holds is refused, y untouched (documented).
    REQUIRE(s == Status::not_admissible);
    RSS_TEST_CUDA(cudaMemcpy(all.data(), y_buffer.get(), all.size() * sizeof(T), cudaMemcpyDeviceToHost));
    for (const T& v : all) REQUIRE(std::isnan(to_float(v)));
    return;
  }
  REQUIRE(s == Status::success);
  RSS_TEST_CUDA(cudaStreamSynchronize(stream));


  RSS_TEST_CUDA(cudaMemcpy(all.data(), y_buffer.get(), all.size() * sizeof(T), cudaMemcpyDeviceToHost));
  for (std::int64_t i = 0; i < canary + y_offset; ++i) REQUIRE(std::isnan(to_float(all[i])));  // nothing before y
  for (std::int64_t i = canary + y_offset + n; i < static_cast<std::int64_t>(all.size()); ++i)
    REQUIRE(std::isnan(to_float(all[i])));  // nothing after y
  std::vector<double> y(static_cast<std::size_t>(n));
  for (std::int64_t i = 0; i < n; ++i) y[i] = to_float(all[canary + y_offset + i]);
  std::string why;
  const double tolerance = rss::reference::tolerance(rss::detail::StorageTraits<T>::dtype);
  INFO("tolerance " << tolerance);
  if (!matches_reference(y, ref, rows, cols, tolerance, &why)) FAIL_CHECK(why);
}

std::uint64_t seed_from_env(const char* name) {
  const char* v = std::getenv(name);
  return v != nullptr ? std::strtoull(v, nullptr, 10) : rss_test::fresh_seed();
}

}  // namespace

TEST_CASE("every strategy matches the reference on random shapes, storage types and unaligned pointers",
          "[gpu][reliability][random]") {
  const std::uint64_t seed = seed_from_env("RSS_RANDOM_SEED");
  WARN("random cases: seed " << seed << " (reproduce with RSS_RANDOM_SEED=" << seed << ")");
  std::mt19937_64 gen(seed);
  cudaStream_t stream = nullptr;
  RSS_TEST_CUDA(cudaStreamCreate(&stream));
  const int cases = 400;
  for (int c = 0; c < cases; ++c) {
    const Strategy strategy = rss::all_strategies[gen() % std::size(rss::all_strategies)];
    const auto cols = static_cast<std::int64_t>(std::exp(std::uniform_real_distribution<double>(0.0, 12.0)(gen)));
    const std::int64_t max_rows = std::max<std::int64_t>(1, std::min<std::int64_t>(300, 400000 / cols));
    const std::int64_t rows = 1 + static_cast<std::int64_t>(gen() % max_rows);
    const int x_offset = static_cast<int>(gen() % 8), y_offset = static_cast<int>(gen() % 8);
    const int dtype = static_cast<int>(gen() % 3);
    const auto values = rss_test::random_rows(rows, cols, gen());
    INFO("case " << c << " seed " << seed << ": " << rss::strategy_name(strategy) << " " << rows << " x " << cols
                 << " dtype " << dtype << " x+" << x_offset << " y+" << y_offset);
    if (dtype == 0) check_case<float>(strategy, values, rows, cols, x_offset, y_offset, stream);
    if (dtype == 1) check_case<__nv_bfloat16>(strategy, values, rows, cols, x_offset, y_offset, stream);
    if (dtype == 2) check_case<__half>(strategy, values, rows, cols, x_offset, y_offset, stream);
  }
  cudaStreamDestroy(stream);
}

TEST_CASE("several streams and several calls in flight per stream give correct results",
          "[gpu][reliability][concurrency]") {
  constexpr int streams = 4, calls_per_stream = 3;
  const std::int64_t rows = 8, cols = 131072;
  const std::uint64_t seed = rss_test::fresh_seed();
  CAPTURE(seed);
  struct Call {
    std::vector<double> ref;
    rss_test::DeviceBuffer x, y;
  };
  std::vector<cudaStream_t> stream(streams);
  std::vector<std::unique_ptr<rss_test::DeviceBuffer>> workspace;
  std::vector<std::unique_ptr<Call>> calls;
  for (int s = 0; s < streams; ++s) {
    RSS_TEST_CUDA(cudaStreamCreateWithFlags(&stream[s], cudaStreamNonBlocking));
    std::size_t bytes = 0;
    for (Strategy st : rss::all_strategies) {
      std::size_t b = 0;
      REQUIRE(rss::workspace_bytes<float>(st, rows, cols, &b) == Status::success);
      bytes = std::max(bytes, b);
    }
    // One workspace per stream: a stream's calls are ordered, so they may share it.
    workspace.push_back(std::make_unique<rss_test::DeviceBuffer>(bytes));
    RSS_TEST_CUDA(cudaMemset(workspace.back()->get(), 0, bytes));
  }
  for (int round = 0; round < 2; ++round) {
    calls.clear();
    for (int s = 0; s < streams; ++s) {
      for (int k = 0; k < calls_per_stream; ++k) {
        const auto values = rss_test::random_rows(rows, cols, seed + static_cast<std::uint64_t>(100 * s + k));
        auto call = std::unique_ptr<Call>(new Call{std::vector<double>(values.size()),
                                                   rss_test::DeviceBuffer(values.size() * sizeof(float)),
                                                   rss_test::DeviceBuffer(values.size() * sizeof(float))});
        rss::reference::rms_scaled_softmax(values.data(), call->ref.data(), rows, cols);
        RSS_TEST_CUDA(cudaMemcpy(call->x.get(), values.data(), call->x.bytes(), cudaMemcpyHostToDevice));
        rss_test::poison(call->y);
        calls.push_back(std::move(call));
      }
    }
    RSS_TEST_CUDA(cudaDeviceSynchronize());
    // Everything is queued before anything is waited for: streams run side by side.
    for (int s = 0; s < streams; ++s) {
      for (int k = 0; k < calls_per_stream; ++k) {
        const Strategy st = rss::all_strategies[(round * streams * calls_per_stream + s * calls_per_stream + k) %
                                                std::size(rss::all_strategies)];
        Call& c = *calls[s * calls_per_stream + k];
        INFO("stream " << s << " call " << k << " " << rss::strategy_name(st));
        REQUIRE(rss::rms_scaled_softmax(st, c.x.get<const float>(), c.y.get<float>(), rows, cols,
                                        workspace[s]->get(), workspace[s]->bytes(), stream[s]) == Status::success);
      }
    }
    RSS_TEST_CUDA(cudaDeviceSynchronize());
    for (std::size_t i = 0; i < calls.size(); ++i) {
      std::vector<float> out(static_cast<std::size_t>(rows * cols));
      RSS_TEST_CUDA(cudaMemcpy(out.data(), calls[i]->y.get(), calls[i]->y.bytes(), cudaMemcpyDeviceToHost));
      INFO("round " << round << " call " << i);
      CHECK(rss::reference::max_row_relative_error(out.data(), calls[i]->ref.data(), rows, cols) <=
            rss::reference::fp32_tolerance);
    }
  }
  for (cudaStream_t s : stream) cudaStreamDestroy(s);
}

TEST_CASE("non-finite and extreme inputs follow the reference's IEEE behaviour", "[gpu][reliability][ieee]") {
  const float inf = std::numeric_limits<float>::infinity(), nan = std::numeric_limits<float>::quiet_NaN();
  const float denormal = std::numeric_limits<float>::denorm_min() * 1000.0f;
  const std::int64_t cols = 5000;
  // One row per case: equal values; a NaN; +inf; -inf; denormals mixed with normal values; all
  // denormal; magnitudes near 1e15 (their sum of squares still finite in fp32).
  std::vector<std::vector<float>> cases;
  const auto base = rss_test::random_rows(1, cols, rss_test::fresh_seed());
  cases.push_back(std::vector<float>(cols, 3.25f));
  for (float special : {nan, inf, -inf}) {
    cases.push_back(base);
    cases.back()[cols / 3] = special;
  }
  cases.push_back(base);
  for (std::int64_t j = 0; j < cols; j += 2) cases.back()[j] = denormal * static_cast<float>(j % 7 + 1);
  cases.push_back(std::vector<float>(cols));
  for (std::int64_t j = 0; j < cols; ++j) cases.back()[j] = denormal * static_cast<float>(j % 5 + 1);
  cases.push_back(base);
  for (float& v : cases.back()) v *= 1e15f;
  std::vector<float> values;
  for (const auto& row : cases) values.insert(values.end(), row.begin(), row.end());
  const auto rows = static_cast<std::int64_t>(cases.size());
  cudaStream_t stream = nullptr;
  RSS_TEST_CUDA(cudaStreamCreate(&stream));
  for (Strategy strategy : rss::all_strategies) {
    INFO(rss::strategy_name(strategy));
    check_case<float>(strategy, values, rows, cols, 0, 0, stream);
  }
  cudaStreamDestroy(stream);
}

// Magnitudes whose squares overflow fp32 (|x| above ~1.8e19): the sum of squares accumulates in
// double, so r stays positive and the output follows the double reference. Row 0: about 1e31; row 1:
// +-3e38 mixed with values spread up to FLT_MAX (the scale r log2(e) is then an fp32 denormal, and
// x - m reaches 6e38, beyond FLT_MAX); row 2: FLT_MAX and -FLT_MAX alone.
TEST_CASE("magnitudes near the float limit follow the reference", "[gpu][reliability][ieee][extreme]") {
  const std::int64_t cols = 1000;
  const std::uint64_t seed = rss_test::fresh_seed();
  CAPTURE(seed);
  const float big = std::numeric_limits<float>::max();
  std::vector<float> values = rss_test::random_rows(1, cols, seed);
  for (float& v : values) v *= 1e30f;
  std::mt19937_64 gen(seed ^ 0x9e3779b97f4a7c15ull);
  std::uniform_real_distribution<float> fraction(0.5f, 1.0f);
  for (std::int64_t j = 0; j < cols; ++j) {
    float v = (j % 3 == 0) ? 3e38f : (j % 3 == 1 ? -3e38f : fraction(gen) * big);
    if (gen() % 2 == 0) v = -v;
    values.push_back(v);
  }
  for (std::int64_t j = 0; j < cols; ++j) values.push_back(j % 2 == 0 ? big : -big);
  const std::int64_t rows = static_cast<std::int64_t>(values.size()) / cols;
  for (float v : values) REQUIRE(std::isfinite(v));
  const std::vector<Strategy> strategies = rss_test::strategies_and_automatic();
  cudaStream_t stream = nullptr;
  RSS_TEST_CUDA(cudaStreamCreate(&stream));
  for (Strategy strategy : strategies) {
    INFO(rss::strategy_name(strategy));
    check_case<float>(strategy, values, rows, cols, 0, 0, stream);
    check_case<float>(strategy, values, rows, cols, 1, 3, stream);  // unaligned rows too
  }
  cudaStreamDestroy(stream);
}

TEST_CASE("bf16 magnitudes near its limit follow the reference", "[gpu][reliability][ieee][extreme]") {
  // bf16 shares fp32's exponent range: the same overflow of the sum of squares applies.
  const std::int64_t cols = 777;
  const std::uint64_t seed = rss_test::fresh_seed();
  CAPTURE(seed);
  std::vector<float> values = rss_test::random_rows(2, cols, seed);
  for (std::int64_t j = 0; j < cols; ++j) values[static_cast<std::size_t>(j)] *= 1e37f;
  for (std::int64_t j = cols; j < 2 * cols; ++j) values[static_cast<std::size_t>(j)] = j % 2 == 0 ? 3e38f : -3e38f;
  const std::vector<Strategy> strategies = rss_test::strategies_and_automatic();
  cudaStream_t stream = nullptr;
  RSS_TEST_CUDA(cudaStreamCreate(&stream));
  for (Strategy strategy : strategies) {
    INFO(rss::strategy_name(strategy));
    check_case<__nv_bfloat16>(strategy, values, 2, cols, 0, 0, stream);
  }
  cudaStreamDestroy(stream);
}
