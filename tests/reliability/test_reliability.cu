// Reliability of every strategy inside someone else's program: random shapes, leading dimensions,
// in-place calls, unaligned pointers and every storage type; several streams and several calls in
// flight at once; and non-finite or extreme inputs compared with the CPU reference's IEEE behaviour.
#include <catch2/catch.hpp>
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <algorithm>
#include <iterator>
#include <limits>
#include <memory>
#include <ostream>
#include <random>
#include <string>
#include <vector>

#include "rss/rss.cuh"
#include "support/device.cuh"
#include "support/random_input.hpp"
#include "support/storage.cuh"
#include "support/strategies.cuh"

namespace {

using rss::DType;
using rss::Layout;
using rss::Status;
using rss::Strategy;

using rss_test::from_float;
using rss_test::to_float;

constexpr std::int64_t canary = 16;  // poisoned elements before and after every output matrix

/// One call to check: the strategy, the matrices' layout, the element offsets of x and y from the
/// start of their (256-byte aligned) allocations, and whether y is x. In place, ld_y == ld_x and
/// y_offset == x_offset.
struct Case {
  Strategy strategy = Strategy::automatic;
  Layout layout;
  rss::ClusterConfig cluster{};  // cluster_row: the configuration to ask for (empty: the default)
  int x_offset = 0;
  int y_offset = 0;
  bool in_place = false;
};

std::ostream& operator<<(std::ostream& os, const Case& c) {
  os << rss::strategy_name(c.strategy) << (c.cluster.residence == rss::RowResidence::shared_memory ? " (shared memory)" : "")
     << " " << c.layout.rows << " x " << c.layout.cols << " ld_x " << c.layout.ld_x
     << " ld_y " << c.layout.ld_y << " x+" << c.x_offset << " y+" << c.y_offset;
  return os << (c.in_place ? " in place" : " out of place");
}

/// Contiguous rows, y apart from x, at the given element offsets.
Case contiguous_case(Strategy strategy, std::int64_t rows, std::int64_t cols, int x_offset, int y_offset) {
  return Case{strategy, Layout::contiguous(rows, cols), x_offset, y_offset, false};
}

/// Elements from a matrix's first element to one past its last, its rows `ld` apart.
std::int64_t span(const Layout& l, std::int64_t ld) { return (l.rows - 1) * ld + l.cols; }

/// Whether element k, counted from a matrix's first element (rows `ld` apart), belongs to the matrix.
bool in_matrix(std::int64_t k, const Layout& l, std::int64_t ld) {
  return k >= 0 && k < span(l, ld) && k % ld < l.cols;
}

/// `values` rounded to T, as the device reads them.
template <class T>
std::vector<T> stored_as(const std::vector<float>& values) {
  std::vector<T> x(values.size());
  std::transform(values.begin(), values.end(), x.begin(), [](float v) { return from_float<T>(v); });
  return x;
}

/// The reference output for the contiguous matrix x, computed from the values as stored.
template <class T>
std::vector<double> reference_of(const std::vector<T>& x, const Layout& l) {
  std::vector<double> stored(x.size()), ref(x.size());
  std::transform(x.begin(), x.end(), stored.begin(), [](const T& v) { return to_float(v); });
  rss::reference::rms_scaled_softmax(stored.data(), ref.data(), l.rows, l.cols);
  return ref;
}

/// Copies the contiguous host matrix to `device`, its rows `ld` apart; the gaps keep what they held.
template <class T>
void upload_matrix(const std::vector<T>& matrix, const Layout& l, std::int64_t ld, T* device) {
  const auto row_bytes = static_cast<std::size_t>(l.cols) * sizeof(T);
  RSS_TEST_CUDA(cudaMemcpy2D(device, static_cast<std::size_t>(ld) * sizeof(T), matrix.data(), row_bytes, row_bytes,
                             static_cast<std::size_t>(l.rows), cudaMemcpyHostToDevice));
}

template <class T>
std::vector<T> download(const rss_test::DeviceBuffer& b) {
  std::vector<T> out(b.bytes() / sizeof(T));
  RSS_TEST_CUDA(cudaMemcpy(out.data(), b.get(), b.bytes(), cudaMemcpyDeviceToHost));
  return out;
}

/// The matrix whose first element is buffer[first], rows `ld` apart, as contiguous values.
template <class T>
std::vector<T> matrix_at(const std::vector<T>& buffer, std::int64_t first, const Layout& l, std::int64_t ld) {
  std::vector<T> m(static_cast<std::size_t>(l.rows * l.cols));
  for (std::int64_t i = 0; i < l.rows; ++i) {
    const auto row = buffer.begin() + first + i * ld;
    std::copy(row, row + l.cols, m.begin() + i * l.cols);
  }
  return m;
}

/// The first element of `buffer` outside the matrix (first element at buffer[first], rows `ld` apart)
/// that no longer holds the poison (NaN), described; empty when there is none.
template <class T>
std::string written_outside_matrix(const std::vector<T>& buffer, std::int64_t first, const Layout& l, std::int64_t ld) {
  for (std::int64_t k = 0; k < static_cast<std::int64_t>(buffer.size()); ++k) {
    const float v = to_float(buffer[static_cast<std::size_t>(k)]);
    const std::int64_t from_first = k - first;
    if (std::isnan(v) || in_matrix(from_first, l, ld)) continue;
    const std::string where = from_first < 0                ? "canary before y"
                              : from_first >= span(l, ld) ? "canary after y"
                                                          : "padding after row " + std::to_string(from_first / ld);
    return "element " + std::to_string(from_first) + " from y's first (" + where + ") holds " + std::to_string(v);
  }
  return "";
}

/// Whether a refused call left the matrix as it was: still x in place, still the poison otherwise.
template <class T>
bool left_untouched(const std::vector<T>& y, const std::vector<T>& x, bool in_place) {
  if (in_place) return std::memcmp(y.data(), x.data(), x.size() * sizeof(T)) == 0;
  return std::all_of(y.begin(), y.end(), [](const T& v) { return std::isnan(to_float(v)); });
}

bool is_concrete(Strategy s) {
  return std::find(std::begin(rss::all_strategies), std::end(rss::all_strategies), s) != std::end(rss::all_strategies);
}

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

/// Runs one case on `values` rounded to T and compares with the reference. y sits `canary` poisoned
/// elements into its buffer, with as many after it; every element outside the matrices holds the
/// poison (NaN), x's padding too, so that reading or writing outside them shows. In place, x's
/// matrix is copied into y's buffer and read back from there.
template <class T>
void check_case(const Case& c, const std::vector<float>& values, cudaStream_t stream) {
  const Layout& l = c.layout;
  const std::vector<T> x = stored_as<T>(values);
  const std::vector<double> ref = reference_of(x, l);

  const std::int64_t y_first = canary + c.y_offset;
  rss_test::DeviceBuffer y_buffer(static_cast<std::size_t>(y_first + span(l, l.ld_y) + canary) * sizeof(T));
  rss_test::DeviceBuffer x_buffer(c.in_place ? 0 : static_cast<std::size_t>(c.x_offset + span(l, l.ld_x)) * sizeof(T));
  T* y_device = y_buffer.get<T>() + y_first;
  T* x_device = c.in_place ? y_device : x_buffer.get<T>() + c.x_offset;
  rss_test::poison(y_buffer);
  if (!c.in_place) rss_test::poison(x_buffer);
  upload_matrix(x, l, l.ld_x, x_device);

  std::size_t bytes = 0;
  REQUIRE(rss::workspace_bytes<T>(c.strategy, l.rows, l.cols, &bytes) == Status::success);
  rss_test::DeviceBuffer workspace(bytes);
  if (bytes > 0) RSS_TEST_CUDA(cudaMemset(workspace.get(), 0, bytes));
  Strategy ran = Strategy::automatic;  // written only by a successful call
  const Status s = rss::rms_scaled_softmax(rss::Config{c.strategy, c.cluster}, static_cast<const T*>(x_device), y_device,
                                           l, workspace.get(), bytes, stream, &ran);
  INFO("status " << rss::status_message(s) << ", ran " << rss::strategy_name(ran));
  RSS_TEST_CUDA(cudaStreamSynchronize(stream));

  const std::vector<T> y_after = download<T>(y_buffer);
  const std::string outside = written_outside_matrix(y_after, y_first, l, l.ld_y);
  INFO("outside the matrix: " << outside);
  REQUIRE(outside.empty());
  const std::vector<T> y = matrix_at(y_after, y_first, l, l.ld_y);
  if (c.strategy == Strategy::cluster_row && !rss_test::cluster_row_holds<T>(l.cols, c.cluster)) {
    // A row longer than the largest launched cluster holds is refused, y untouched (documented).
    REQUIRE(s == Status::not_admissible);
    REQUIRE(ran == Strategy::automatic);
    REQUIRE(left_untouched(y, x, c.in_place));
    return;
  }
  REQUIRE(s == Status::success);
  if (c.strategy == Strategy::automatic) {
    REQUIRE(is_concrete(ran));
  } else {
    REQUIRE(ran == c.strategy);
  }
  std::vector<double> y_values(y.size());
  std::transform(y.begin(), y.end(), y_values.begin(), [](const T& v) { return to_float(v); });
  std::string why;
  const double tolerance = rss::reference::tolerance(rss::dtype_of<T>);
  INFO("tolerance " << tolerance);
  if (!matches_reference(y_values, ref, l.rows, l.cols, tolerance, &why)) FAIL_CHECK(why);
}

void check_case_as(DType dtype, const Case& c, const std::vector<float>& values, cudaStream_t stream) {
  switch (dtype) {
    case DType::fp32: return check_case<float>(c, values, stream);
    case DType::bf16: return check_case<__nv_bfloat16>(c, values, stream);
    case DType::fp16: return check_case<__half>(c, values, stream);
  }
}

/// A random case: log-uniform cols up to about 160k; rows up to 300 and at most ~400k elements; half
/// the time padded rows, ld_x and ld_y drawn apart (odd pads misalign rows); element offsets 0..7;
/// in place about one call in seven; cluster_row's row in shared memory half the time. One draw per statement, so that a seed replays on any compiler.
Case draw_case(std::mt19937_64& gen, const std::vector<Strategy>& strategies) {
  constexpr std::uint64_t pads = 9;  // a padded leading dimension is cols + 0..8
  Case c;
  c.strategy = strategies[gen() % strategies.size()];
  const auto cols = static_cast<std::int64_t>(std::exp(std::uniform_real_distribution<double>(0.0, 12.0)(gen)));
  const std::int64_t max_rows = std::max<std::int64_t>(1, std::min<std::int64_t>(300, 400000 / cols));
  const std::int64_t rows = 1 + static_cast<std::int64_t>(gen() % static_cast<std::uint64_t>(max_rows));
  c.layout = Layout::contiguous(rows, cols);
  if (gen() % 2 == 0) {
    c.layout.ld_x = cols + static_cast<std::int64_t>(gen() % pads);
    c.layout.ld_y = cols + static_cast<std::int64_t>(gen() % pads);
  }
  c.x_offset = static_cast<int>(gen() % 8);
  c.y_offset = static_cast<int>(gen() % 8);
  c.in_place = gen() % 100 < 15;
  if (c.in_place) {
    c.layout.ld_y = c.layout.ld_x;
    c.y_offset = c.x_offset;
  }
  // cluster_row keeps the row in shared memory half the time (clusters of 8 blocks: short rows leave some
  // blocks without elements).
  const bool shared = gen() % 2 == 0;
  const int threads = gen() % 2 == 0 ? 256 : 512;
  if (c.strategy == Strategy::cluster_row && shared) {
    c.cluster = rss::ClusterConfig{threads, 64, 8, rss::RowResidence::shared_memory};
  }
  return c;
}

std::uint64_t seed_from_env(const char* name) {
  const char* v = std::getenv(name);
  return v != nullptr ? std::strtoull(v, nullptr, 10) : rss_test::fresh_seed();
}

long count_from_env(const char* name, long fallback) {
  const char* v = std::getenv(name);
  return v != nullptr ? std::strtol(v, nullptr, 10) : fallback;
}

}  // namespace

TEST_CASE("every strategy matches the reference on random shapes, storage types and unaligned pointers",
          "[gpu][reliability][random]") {
  const std::uint64_t seed = seed_from_env("RSS_RANDOM_SEED");
  const long cases = count_from_env("RSS_RANDOM_CASES", 2000);
  WARN(cases << " random cases: seed " << seed << " (reproduce with RSS_RANDOM_SEED=" << seed << ")");
  REQUIRE(cases > 0);
  const std::vector<Strategy> strategies = rss_test::strategies_and_automatic();
  std::mt19937_64 gen(seed);
  cudaStream_t stream = nullptr;
  RSS_TEST_CUDA(cudaStreamCreate(&stream));
  for (long k = 0; k < cases; ++k) {
    const Case c = draw_case(gen, strategies);
    const auto dtype = static_cast<DType>(gen() % 3);
    const auto values = rss_test::random_rows(c.layout.rows, c.layout.cols, gen());
    // The cases before this one replay too: RSS_RANDOM_CASES=k+1 stops right after it.
    INFO("case " << k << ": " << c << " " << rss::dtype_name(dtype) << " (reproduce with RSS_RANDOM_SEED=" << seed
                 << " RSS_RANDOM_CASES=" << k + 1 << ")");
    check_case_as(dtype, c, values, stream);
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
    check_case<float>(contiguous_case(strategy, rows, cols, 0, 0), values, stream);
  }
  // cluster_row with the row in shared memory: the copy engine's loads (aligned) and element loads (not).
  for (int offset : {0, 1}) {
    Case c = contiguous_case(Strategy::cluster_row, rows, cols, offset, offset);
    c.cluster = rss::ClusterConfig{256, 16, 2, rss::RowResidence::shared_memory};
    check_case<float>(c, values, stream);
    check_case<__nv_bfloat16>(c, values, stream);
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
    check_case<float>(contiguous_case(strategy, rows, cols, 0, 0), values, stream);
    check_case<float>(contiguous_case(strategy, rows, cols, 1, 3), values, stream);  // unaligned rows too
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
    check_case<__nv_bfloat16>(contiguous_case(strategy, 2, cols, 0, 0), values, stream);
  }
  cudaStreamDestroy(stream);
}
