// rss's forward benchmark suite (Google Benchmark) over the bench harness (bench/harness/).
//
//   rss_bench [google benchmark flags]            every shape x variant, Google Benchmark's own loop
//   rss_bench --session=1 --rounds=10 --iterations=30 --seed=7 --shape-order=forward --out=raw.json
//                                                 one measurement session of the project's protocol
//                                                 (docs/protocol.md): raw samples, schema rss-records/2
//   rss_bench --pilot --session=1 --out=pilot.json   the same protocol over the tuning candidates
//                                                 (cluster_row configurations, megakernels, block_row):
//                                                 its records feed the tuning tables in rss/tuning/
//   --help                                        every flag (no GPU needed)
//
// Each variant's output is checked against the CPU reference in double (a floor's byte for byte against x)
// before it is measured; a variant that fails is recorded as an error and not measured.
#include <benchmark/benchmark.h>
#include <cuda_runtime.h>

#include <map>
#include <memory>
#include <string>
#include <vector>

#include "harness/check.hpp"
#include "harness/driver.hpp"
#include "harness/fixture.hpp"
#include "harness/storage.hpp"
#include "harness/timing.hpp"
#include "rss/rss.cuh"
#include "variants.cuh"

namespace {

using namespace rss_bench;

/// The variants measured on a shape: every strategy and the floors, or the pilot's candidates.
std::vector<Variant> variants_for(const Shape& s) {
  if (!g_options.pilot) return all_variants();
  ShapeBuffers b;
  b.rows = s.rows;
  b.cols = s.cols;
  b.dtype = s.dtype;
  b.sm_count = g_sm_count;
  return pilot_variants(b);
}

/// The current shape's device buffers, host input, reference and prepared variants. Only one shape is alive at a
/// time: the largest needs several GB.
struct ShapeState {
  Shape shape;
  ShapeBuffers buffers;
  std::vector<float> x_seen;  // the input as the kernels see it (after storage rounding)
  std::vector<double> reference;
  std::vector<Variant> variants;
  std::map<std::string, Prepared> prepared;
  std::map<std::string, double> error;
  double format_error = 0.0;

  explicit ShapeState(const Shape& s) : shape(s), variants(variants_for(s)) {
    buffers.rows = s.rows;
    buffers.cols = s.cols;
    buffers.dtype = s.dtype;
    buffers.sm_count = g_sm_count;
    const std::vector<unsigned char> raw = store(s.dtype, fixture(g_options.fixture_seed, s.rows, s.cols), &x_seen);
    BENCH_CUDA(cudaMalloc(&buffers.x, raw.size()));
    BENCH_CUDA(cudaMalloc(&buffers.y, raw.size()));
    // On the timing stream, which is non-blocking: a copy or memset on the legacy default stream would not be
    // ordered before the variants' launches.
    BENCH_CUDA(cudaMemcpyAsync(buffers.x, raw.data(), raw.size(), cudaMemcpyHostToDevice, g_stream));
    BENCH_CUDA(cudaStreamSynchronize(g_stream));
  }
  ~ShapeState() {
    prepared.clear();  // graphs and plans go before the memory they point to
    cudaDeviceSynchronize();
    cudaFree(buffers.x);
    cudaFree(buffers.y);
  }

  /// Worst row error of a variant's output against the double-precision reference (y poisoned first).
  double check(const Prepared& p) {
    if (reference.empty()) {
      reference.resize(x_seen.size());
      rss::reference::rms_scaled_softmax(x_seen.data(), reference.data(), shape.rows, shape.cols);
      format_error = rounding_error_of_reference();
    }
    BENCH_CUDA(cudaMemsetAsync(buffers.y, 0xFF, shape.bytes(), g_stream));
    if (p.run(g_stream) != rss::Status::success) return -1.0;
    BENCH_CUDA(cudaStreamSynchronize(g_stream));
    std::vector<unsigned char> raw(shape.bytes());
    BENCH_CUDA(cudaMemcpy(raw.data(), buffers.y, raw.size(), cudaMemcpyDeviceToHost));
    const std::vector<float> y = load(shape.dtype, raw.data(), shape.elements());
    return rss::reference::max_row_relative_error(y.data(), reference.data(), shape.rows, shape.cols);
  }

  /// A floor's check: its output must be x's bytes. 0 when it is, 1 when any byte differs (never within the
  /// operator's tolerance), -1 when the copy failed.
  double check_copy(const Prepared& p) {
    BENCH_CUDA(cudaMemsetAsync(buffers.y, 0xFF, shape.bytes(), g_stream));
    if (p.run(g_stream) != rss::Status::success) return -1.0;
    unsigned long long* mismatches = nullptr;
    BENCH_CUDA(cudaMalloc(&mismatches, sizeof *mismatches));
    BENCH_CUDA(cudaMemsetAsync(mismatches, 0, sizeof *mismatches, g_stream));
    count_mismatches<<<1024, 256, 0, g_stream>>>(static_cast<const unsigned char*>(buffers.x),
                                                 static_cast<const unsigned char*>(buffers.y),
                                                 static_cast<std::int64_t>(shape.bytes()), mismatches);
    unsigned long long found = 0;
    BENCH_CUDA(cudaMemcpyAsync(&found, mismatches, sizeof found, cudaMemcpyDeviceToHost, g_stream));
    BENCH_CUDA(cudaStreamSynchronize(g_stream));
    BENCH_CUDA(cudaFree(mismatches));
    return found == 0 ? 0.0 : 1.0;
  }

  /// The error an exact implementation makes by storing its answer in the shape's type. Long fp16 rows (1 x 1M and
  /// more) have outputs below fp16's smallest normal (6.1e-5), where its spacing is 6e-8: there every
  /// implementation, torch's included, misses the 1e-2 tolerance by this much.
  double rounding_error_of_reference() const {
    if (shape.dtype == rss::DType::fp32) return 0.0;
    std::vector<float> rounded;
    store(shape.dtype, std::vector<float>(reference.begin(), reference.end()), &rounded);
    return rss::reference::max_row_relative_error(rounded.data(), reference.data(), shape.rows, shape.cols);
  }

  /// A variant passes within the tolerance on top of the storage type's own rounding error.
  double allowed_error() const { return rss::reference::tolerance(shape.dtype) + format_error; }
};

std::unique_ptr<ShapeState> g_shape;

/// Prepares the variant on the current shape once, checking its output against the reference.
const Prepared* prepared(ShapeState& state, const std::string& name, std::string* failure) {
  auto it = state.prepared.find(name);
  if (it == state.prepared.end()) {
    const auto v = std::find_if(state.variants.begin(), state.variants.end(), [&](const Variant& c) { return c.name == name; });
    Prepared p;
    const rss::Status s = v->prepare(state.buffers, &p);
    if (s != rss::Status::success) {
      *failure = std::string("prepare: ") + rss::status_message(s);
      return nullptr;
    }
    it = state.prepared.emplace(name, std::move(p)).first;
    // The floors copy x into y: their output must be x's bytes, not the operator's.
    const bool floor = name.size() > 6 && name.compare(name.size() - 6, 6, "_floor") == 0;
    state.error[name] = floor ? state.check_copy(it->second) : state.check(it->second);
  }
  const double err = state.error[name];
  if (!(err >= 0.0 && err <= state.allowed_error())) {
    *failure = "output does not match the reference (max row error " + std::to_string(err) + ")";
    return nullptr;
  }
  return &it->second;
}

void run_variant(benchmark::State& st, const Shape& shape, const std::string& variant, int round, int position) {
  ShapeState& state = current_shape(g_shape, shape, [&] { return std::make_unique<ShapeState>(shape); });
  std::string failure;
  const Prepared* p = prepared(state, variant, &failure);
  if (p == nullptr) return skip_run(st, failure);
  const auto call = [p]() -> const char* {
    const rss::Status s = p->run(g_stream);
    return rss::ok(s) ? nullptr : rss::status_message(s);
  };
  const Samples m = time_calls(st, call, [] { return cudaStreamSynchronize(g_stream); }, g_stream, true);
  launch_counters(st, p->launches, p->logical_bytes, 2 * static_cast<std::int64_t>(shape.bytes()));
  if (g_options.session == 0) return;
  record_samples(st, m, shape, round, position);
  st.counters["max_rel_err"] = state.error[variant];
}

}  // namespace

int main(int argc, char** argv) {
  Suite suite{forward_program,
              "the forward benchmark suite of rss's rms_scaled_softmax (Google Benchmark): every rss\n"
              "strategy, the megakernel's retention controls and floors copying the same bytes.",
              "measure the tuning candidates (every cluster_row configuration that fits, the megakernels,\n"
              "block_row, local_fusion, `heuristic`) instead of the strategies; with\n"
              "--session, records for bench/rssbench tune",
              {}};
  suite.pilot_needs_device = true;
  suite.variants = [](const Shape& s) { return names_of(variants_for(s)); };
  suite.run = run_variant;
  suite.finish = [] { g_shape.reset(); };
  return run_suite(suite, argc, argv);
}
