// Every strategy against the double-precision CPU reference, on fresh random inputs, for the
// article shapes, the project's model shapes (docs/protocol.md) and odd shapes. y is poisoned before each run.
// Each run is repeated with row statistics requested: the same y, and statistics that match the reference.
#include <catch2/catch.hpp>
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <cstdint>
#include <map>
#include <utility>
#include <vector>

#include "rss/rss.cuh"
#include "support/device.cuh"
#include "support/random_input.hpp"
#include "support/storage.cuh"
#include "support/strategies.cuh"

namespace {

using rss::Strategy;

struct Shape {
  std::int64_t rows, cols;
};

using rss_test::from_float;
using rss_test::to_double;

/// One problem: storage-typed input on host and device, and the reference computed from the
/// storage-typed values (so bf16 rounding of the input is not counted as error).
template <class T>
struct Problem {
  Shape shape;
  std::uint64_t seed;
  std::vector<T> x;
  std::vector<double> reference;
  rss_test::DeviceBuffer x_device;

  Problem(Shape s, std::uint64_t seed_, bool spiky = false)
      : shape(s), seed(seed_), x_device(static_cast<std::size_t>(s.rows * s.cols) * sizeof(T)) {
    const bool fp16 = rss::dtype_of<T> == rss::DType::fp16;
    const auto values = spiky ? rss_test::spiky_rows(s.rows, s.cols, seed, fp16 ? 6e4f : 3e38f, fp16 ? 1e-3f : 1e-30f)
                              : rss_test::random_rows(s.rows, s.cols, seed);
    x.resize(values.size());
    std::vector<double> as_stored(values.size());
    for (std::size_t i = 0; i < values.size(); ++i) {
      x[i] = from_float<T>(values[i]);
      as_stored[i] = to_double(x[i]);
    }
    reference.resize(values.size());
    rss::reference::rms_scaled_softmax(as_stored.data(), reference.data(), s.rows, s.cols);
    RSS_TEST_CUDA(cudaMemcpy(x_device.get(), x.data(), x.size() * sizeof(T), cudaMemcpyHostToDevice));
  }
};

/// Runs `strategy` on the problem with a poisoned y (and, when `stats` is not null, also writing each row's
/// statistics there) and returns y.
template <class T>
std::vector<T> run_strategy(const rss::Config& strategy, const Problem<T>& p, cudaStream_t stream,
                            rss::RowStatistics* stats) {
  std::size_t bytes = 0;
  REQUIRE(rss::workspace_bytes<T>(strategy, p.shape.rows, p.shape.cols, &bytes) == rss::Status::success);
  rss_test::DeviceBuffer workspace(bytes);
  if (bytes > 0) rss_test::poison(workspace);  // need not be zeroed: rss initialises what it keeps there
  rss_test::DeviceBuffer y(p.x.size() * sizeof(T));
  rss_test::poison(y);
  const rss::Layout layout = rss::Layout::contiguous(p.shape.rows, p.shape.cols);
  const T* x = p.x_device.template get<const T>();
  const rss::Status s =
      stats == nullptr
          ? rss::rms_scaled_softmax(strategy, x, y.get<T>(), layout, workspace.get(), bytes, stream)
          : rss::rms_scaled_softmax_with_statistics(strategy, x, y.get<T>(), stats, layout, workspace.get(), bytes, stream);
  INFO("status: " << rss::status_message(s) << " (" << cudaGetErrorString(rss::last_cuda_error()) << ")");
  REQUIRE(s == rss::Status::success);
  RSS_TEST_CUDA(cudaStreamSynchronize(stream));
  RSS_TEST_CUDA(cudaGetLastError());
  std::vector<T> out(p.x.size());
  RSS_TEST_CUDA(cudaMemcpy(out.data(), y.get(), out.size() * sizeof(T), cudaMemcpyDeviceToHost));
  return out;
}

/// The worst row error of an output.
template <class T>
double row_error(const std::vector<T>& out, const Problem<T>& p) {
  std::vector<double> out_d(out.size());
  for (std::size_t i = 0; i < out.size(); ++i) out_d[i] = to_double(out[i]);
  return rss::reference::max_row_relative_error(out_d.data(), p.reference.data(), p.shape.rows, p.shape.cols);
}

/// With row statistics requested, `strategy` writes the same y bit for bit, and each row's statistics:
/// the maximum exactly, r and the sum of exponentials within fp32 arithmetic's bound of the reference.
template <class T>
void check_statistics(const rss::Config& strategy, const Problem<T>& p, const std::vector<T>& plain,
                      cudaStream_t stream) {
  const auto rows = static_cast<std::size_t>(p.shape.rows);
  rss_test::DeviceBuffer stats(rows * sizeof(rss::RowStatistics));
  rss_test::poison(stats);
  const std::vector<T> with = run_strategy(strategy, p, stream, stats.get<rss::RowStatistics>());
  CHECK(std::memcmp(with.data(), plain.data(), with.size() * sizeof(T)) == 0);
  std::vector<rss::RowStatistics> got(rows);
  RSS_TEST_CUDA(cudaMemcpy(got.data(), stats.get(), stats.bytes(), cudaMemcpyDeviceToHost));
  std::vector<double> row(static_cast<std::size_t>(p.shape.cols));
  int bad = 0;
  for (std::size_t i = 0; i < rows && bad < 3; ++i) {
    for (std::size_t j = 0; j < row.size(); ++j) row[j] = to_double(p.x[i * row.size() + j]);
    const rss::reference::RowStatistics want = rss::reference::row_statistics(row.data(), p.shape.cols);
    const rss::RowStatistics& g = got[i];
    // The sum is also the one the stored max and r give: a backward recomputes y from exactly these.
    double own_sum = 0.0;
    for (std::size_t j = 0; j < row.size(); ++j) own_sum += std::exp(static_cast<double>(g.inv_rms) * (row[j] - g.max));
    const bool good = g.max == static_cast<float>(want.max) &&
                      std::abs(g.inv_rms - want.inv_rms) <= rss::reference::fp32_tolerance * want.inv_rms &&
                      std::abs(g.sum - want.sum) <= rss::reference::fp32_tolerance * want.sum &&
                      std::abs(g.sum - own_sum) <= rss::reference::fp32_tolerance * own_sum;
    if (!good) {
      ++bad;
      INFO("row " << i << ": max " << g.max << " (want " << want.max << "), inv_rms " << g.inv_rms << " (want "
                  << want.inv_rms << "), sum " << g.sum << " (want " << want.sum << ", from the stored max and r "
                  << own_sum << ")");
      CHECK(good);
    }
  }
  CHECK(bad == 0);
}

using rss_test::cluster_row_holds;

/// A refused cluster_row call: not_admissible, nothing launched, y untouched.
template <class T>
void check_cluster_row_refuses(const rss::Config& config, const Problem<T>& p, cudaStream_t stream) {
  rss_test::DeviceBuffer y(p.x.size() * sizeof(T));
  rss_test::poison(y);
  const rss::Status s = rss::rms_scaled_softmax(config, p.x_device.template get<const T>(), y.get<T>(),
                                                p.shape.rows, p.shape.cols, nullptr, 0, stream);
  CHECK(s == rss::Status::not_admissible);
  RSS_TEST_CUDA(cudaStreamSynchronize(stream));
  std::vector<unsigned char> after(y.bytes());
  RSS_TEST_CUDA(cudaMemcpy(after.data(), y.get(), after.size(), cudaMemcpyDeviceToHost));
  CHECK(std::all_of(after.begin(), after.end(), [](unsigned char b) { return b == 0xFF; }));
}

template <class T>
void check_all_strategies(const std::vector<Shape>& shapes, bool spiky = false,
                          std::int64_t long_row_max_rows = INT64_MAX) {
  cudaStream_t stream = nullptr;
  RSS_TEST_CUDA(cudaStreamCreate(&stream));
  const double tolerance = rss::reference::tolerance(rss::dtype_of<T>);
  for (const Shape& shape : shapes) {
    const Problem<T> problem(shape, rss_test::fresh_seed(), spiky);
    for (const rss_test::NamedConfig& named : rss_test::strategies_and_controls()) {
      const rss::Config& strategy = named.config;
      INFO(shape.rows << " x " << shape.cols << " " << rss::dtype_name(rss::dtype_of<T>) << " " << named.name
                      << " seed " << problem.seed << (spiky ? " spiky rows" : ""));
      if (strategy.strategy == Strategy::long_row && shape.rows > long_row_max_rows) continue;
      if (strategy.strategy == Strategy::cluster_row && !cluster_row_holds<T>(shape.cols, strategy.cluster)) {
        check_cluster_row_refuses(strategy, problem, stream);
        continue;
      }
      const std::vector<T> y = run_strategy(strategy, problem, stream, nullptr);
      const double error = row_error(y, problem);
      INFO("max row relative error " << error << " (tolerance " << tolerance << ")");
      CHECK(error <= tolerance);  // also false for NaN: an unwritten element
      check_statistics(strategy, problem, y, stream);
    }
  }
  cudaStreamDestroy(stream);
}

}  // namespace

TEST_CASE("every strategy matches the reference on the article shapes", "[gpu][article]") {
  check_all_strategies<float>({{1, 131072}, {8, 131072}, {64, 131072}});
}

TEST_CASE("every strategy matches the reference on the model shapes", "[gpu][model]") {
  check_all_strategies<float>({{32, 128256}, {4096, 4096}, {16384, 8192}, {4096, 32768}, {1, 1048576},
                               {1, 4194304}, {1, 16777216}});
}

TEST_CASE("every strategy matches the reference on odd shapes", "[gpu][odd]") {
  // 1 x 1; widths that are not a multiple of the vector width (so rows start unaligned); a prime
  // width over a few rows; more rows than any grid has blocks; a tiny width.
  check_all_strategies<float>({{1, 1}, {1, 3}, {7, 1001}, {3, 1000003}, {100000, 7}, {2, 4097}, {300000, 3}});
}

TEST_CASE("bf16 and fp16 storage with fp32 arithmetic match the reference", "[gpu][half]") {
  check_all_strategies<__nv_bfloat16>({{1, 131072}, {8, 1001}, {64, 4099}});
  check_all_strategies<__half>({{1, 131072}, {8, 1001}, {64, 4099}});
}

// Rows that a few entries dominate (tests/support/random_input.hpp's spiky_rows: a spike in zeros or noise,
// eps-dominated rows, rows of scales from 1e-30 to 3e38 in one call, squares past FLT_MAX in some runs only, and
// in the shapes of 14 rows sums of runs past FLT_MAX where no run is): y and, above all, the statistics, whose
// sum once drifted by 2.6e-5 on such rows while y stayed right.
TEST_CASE("rows that a few entries dominate: y and the row statistics of every strategy", "[gpu][spiky]") {
  check_all_strategies<float>({{7, 4096}, {14, 32768}, {14, 131072}, {7, 200003}}, true);
  check_all_strategies<__nv_bfloat16>({{14, 4099}, {14, 131072}}, true);
  check_all_strategies<__half>({{7, 4099}, {7, 32768}, {7, 150001}}, true);
}

// Small enough for compute-sanitizer (tests/run_gpu_checks.sh): several blocks per row, several
// rows per launch, several launches, odd widths, whole-vector rows (cluster_row's fast path) and a
// 2-byte type; every strategy in all_strategies. 700 and 600 rows: more than the resident clusters of
// cluster_row_pipelined, whose blocks then loop over rows with both tiles. long_row only on the shapes of
// at most 5 rows: each of its rows is two exchanges among every block of the chip, which racecheck slows to
// about a second each (200 rows took longer than 7 minutes); its own tests cover many rows. 2 x 200003: cluster_row
// in clusters of more than 8 blocks (13), where the device has them.
TEST_CASE("representative shapes for the sanitizers", "[.][sanitize]") {
  check_all_strategies<float>({{3, 20000}, {200, 1027}, {1, 70001}, {4, 131072}, {700, 1027}, {2, 200003}}, false, 5);
  check_all_strategies<__nv_bfloat16>({{5, 4096}, {2, 1001}, {600, 2048}}, false, 5);
}
