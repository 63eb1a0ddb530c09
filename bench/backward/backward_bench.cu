// rss's backward benchmark suite (Google Benchmark) over the bench harness (bench/harness/): the backward
// strategies against a floor kernel that moves the same bytes, on the model and article shapes.
//
//   rss_backward_bench [google benchmark flags]                       suite mode, Google Benchmark's own loop
//   rss_backward_bench --session=1 --rounds=3 --iterations=50 --out=rss_backward.json   a session's records
//   --shapes=32x128256,4096x4096 --dtypes=fp32,bf16 --check=0 --pilot --help
//
// Variants: two_pass, cluster_row, automatic (the label names its pick) and floor (reads x, y and dy, writes dx:
// 4 N), and the same from saved row statistics instead of y (two_pass_saved, cluster_row_saved, automatic_saved,
// floor_saved: 3 N); --pilot adds cluster_row and cluster_row_saved under every configuration that holds the row
// (cluster_row:<threads>x<elems>x<cluster>). Each strategy's dx is checked against the double reference before it
// is measured (max_rel_err: the worst row's 2-norm error beyond the storage type's own rounding; --check=0 skips it).
// Inputs: x the fixture of --fixture-seed, dy the fixture of the next seed over 4 (in [-1, 1)); y and the row
// statistics from rss's forward.
#include <benchmark/benchmark.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "harness/check.hpp"
#include "harness/driver.hpp"
#include "harness/fixture.hpp"
#include "harness/storage.hpp"
#include "harness/timing.hpp"
#include "rss/backward/backward.cuh"
#include "rss/reference/cpu_backward.hpp"
#include "rss/rss.cuh"

namespace {

using namespace rss_bench;

// ---- the floor: one kernel reading three matrices and writing a fourth, 16-byte accesses ----
constexpr int floor_threads = 256;
constexpr int floor_unroll = 4;

__global__ void __launch_bounds__(floor_threads) floor_kernel(const uint4* __restrict__ a, const uint4* __restrict__ b,
                                                              const uint4* __restrict__ c, uint4* __restrict__ out,
                                                              std::int64_t vectors) {
  const std::int64_t stride = static_cast<std::int64_t>(gridDim.x) * floor_threads;
  std::int64_t v = static_cast<std::int64_t>(blockIdx.x) * floor_threads + threadIdx.x;
  for (; v + (floor_unroll - 1) * stride < vectors; v += floor_unroll * stride) {
    uint4 ra[floor_unroll], rb[floor_unroll], rc[floor_unroll];
#pragma unroll
    for (int u = 0; u < floor_unroll; ++u) {
      ra[u] = a[v + u * stride];
      rb[u] = b[v + u * stride];
      rc[u] = c[v + u * stride];
    }
#pragma unroll
    for (int u = 0; u < floor_unroll; ++u)
      out[v + u * stride] = make_uint4(ra[u].x ^ rb[u].x ^ rc[u].x, ra[u].y ^ rb[u].y ^ rc[u].y,
                                       ra[u].z ^ rb[u].z ^ rc[u].z, ra[u].w ^ rb[u].w ^ rc[u].w);
  }
  for (; v < vectors; v += stride)
    out[v] = make_uint4(a[v].x ^ b[v].x ^ c[v].x, a[v].y ^ b[v].y ^ c[v].y, a[v].z ^ b[v].z ^ c[v].z,
                        a[v].w ^ b[v].w ^ c[v].w);
}

struct Variant {
  std::string name;
  rss::BackwardStrategy strategy = rss::BackwardStrategy::automatic;  // ignored by the floors
  bool floor = false;
  bool saved = false;                   // saved state (b): x, dy and row statistics; floor: 3 N bytes
  rss::BackwardClusterConfig config{};  // pilot: a cluster_row configuration
};

/// The variants of a shape (no device needed): the strategies of both saved states, the floors, the pilot's.
std::vector<Variant> variants_for(const Shape& s) {
  using B = rss::BackwardStrategy;
  std::vector<Variant> v = {{"two_pass", B::two_pass},       {"cluster_row", B::cluster_row},
                            {"automatic", B::automatic},     {"floor", B::automatic, true},
                            {"floor_saved", B::automatic, true, true}, {"two_pass_saved", B::two_pass, false, true},
                            {"cluster_row_saved", B::cluster_row, false, true},
                            {"automatic_saved", B::automatic, false, true}};
  if (!g_options.pilot) return v;
  for (const int threads : rss::backward_cluster_threads)
    for (const int elems : rss::backward_cluster_elems)
      for (int c = 1; c <= rss::backward_max_cluster_size; ++c) {
        const rss::BackwardClusterConfig config{threads, elems, c};
        const std::int64_t cols = s.cols;
        // Only configurations that hold the row with every block and thread busy: the first c - 1 blocks' shares
        // (multiples of 8 elements) leave some for the last; neither one block less nor half the elements holds it.
        if (!rss::backward_cluster_config_fits(config, cols, s.dtype, rss::backward_max_cluster_size)) continue;
        if (c > 1 && (cols + 8 * c - 1) / (8 * c) * 8 * (c - 1) >= cols) continue;
        if (c > 1 && rss::backward_cluster_config_fits({threads, elems, c - 1}, cols, s.dtype, rss::backward_max_cluster_size))
          continue;
        if (rss::backward_cluster_config_fits({threads, elems / 2, c}, cols, s.dtype, rss::backward_max_cluster_size)) continue;
        const std::string geometry = std::to_string(threads) + "x" + std::to_string(elems) + "x" + std::to_string(c);
        v.push_back({"cluster_row:" + geometry, B::cluster_row, false, false, config});
        v.push_back({"cluster_row_saved:" + geometry, B::cluster_row, false, true, config});
      }
  return v;
}

/// A variant ready to run on the current shape.
struct Prepared {
  std::function<const char*()> run;  // one call on g_stream: nullptr, or what failed
  rss::LaunchList launches;
  std::string label;            // the strategy that runs (and cluster_row's configuration)
  double max_rel_err = -1.0;    // < 0: not checked
  std::shared_ptr<void> state;  // the operator and its workspace
};

/// The current shape: device matrices shared by every variant, the host copies for the reference (as stored,
/// exact in float), and the prepared variants. One shape at a time.
struct ShapeState {
  Shape shape;
  void *x = nullptr, *y = nullptr, *dy = nullptr, *dx = nullptr;
  rss::RowStatistics* stats = nullptr;
  std::vector<float> hx, hy, hdy;
  std::vector<Variant> variants;
  std::map<std::string, Prepared> prepared;

  explicit ShapeState(const Shape& s) : shape(s), variants(variants_for(s)) {
    for (void** p : {&x, &y, &dy, &dx}) BENCH_CUDA(cudaMalloc(p, s.bytes()));
    BENCH_CUDA(cudaMalloc(&stats, static_cast<std::size_t>(s.rows) * sizeof(rss::RowStatistics)));
    std::vector<float> gradient = fixture(g_options.fixture_seed + 1, s.rows, s.cols);
    for (float& g : gradient) g *= 0.25f;
    const std::vector<unsigned char> rx = store(s.dtype, fixture(g_options.fixture_seed, s.rows, s.cols), &hx);
    const std::vector<unsigned char> rdy = store(s.dtype, gradient, &hdy);
    // On the timing stream, which is non-blocking: a copy or memset on the legacy default stream would not be
    // ordered before the forward and the variants' launches.
    BENCH_CUDA(cudaMemcpyAsync(x, rx.data(), s.bytes(), cudaMemcpyHostToDevice, g_stream));
    BENCH_CUDA(cudaMemcpyAsync(dy, rdy.data(), s.bytes(), cudaMemcpyHostToDevice, g_stream));
    // y and the row statistics are what rss's forward writes: the backward's real inputs.
    const rss::Status st = with_storage(s.dtype, [&](auto tag) {
      using T = typename decltype(tag)::type;
      std::size_t bytes = 0;
      RSS_TRY(rss::workspace_bytes<T>(rss::Strategy::automatic, s.rows, s.cols, &bytes));
      void* ws = nullptr;
      if (bytes > 0) BENCH_CUDA(cudaMalloc(&ws, bytes));
      const rss::Status r = rss::rms_scaled_softmax_with_statistics<T>(
          rss::Strategy::automatic, static_cast<const T*>(x), static_cast<T*>(y), stats,
          rss::Layout::contiguous(s.rows, s.cols), ws, bytes, g_stream);
      BENCH_CUDA(cudaStreamSynchronize(g_stream));
      if (ws != nullptr) BENCH_CUDA(cudaFree(ws));
      return r;
    });
    if (!rss::ok(st)) {
      std::fprintf(stderr, "%s: the forward pass for %s: %s\n", program_name, s.label().c_str(), rss::status_message(st));
      std::exit(1);
    }
    std::vector<unsigned char> ry(s.bytes());
    BENCH_CUDA(cudaMemcpy(ry.data(), y, s.bytes(), cudaMemcpyDeviceToHost));
    hy = load(s.dtype, ry.data(), s.elements());
  }
  ~ShapeState() {
    prepared.clear();
    cudaDeviceSynchronize();
    for (void* p : {x, y, dy, dx, static_cast<void*>(stats)}) cudaFree(p);
  }

  /// The worst row's relative 2-norm error of dx beyond the storage type's own rounding of the exact answer.
  double check(const Prepared& p) {
    BENCH_CUDA(cudaMemsetAsync(dx, 0xFF, shape.bytes(), g_stream));
    if (p.run() != nullptr) return -1.0;
    BENCH_CUDA(cudaStreamSynchronize(g_stream));
    std::vector<unsigned char> raw(shape.bytes());
    BENCH_CUDA(cudaMemcpy(raw.data(), dx, raw.size(), cudaMemcpyDeviceToHost));
    const std::vector<float> got = load(shape.dtype, raw.data(), shape.elements());
    std::vector<double> ref(static_cast<std::size_t>(shape.cols));
    std::vector<float> ref_stored(ref.size());
    double worst = 0.0;
    for (std::int64_t i = 0; i < shape.rows; ++i) {
      const std::size_t o = static_cast<std::size_t>(i * shape.cols);
      rss::reference::rms_scaled_softmax_backward_row(hx.data() + o, hy.data() + o, hdy.data() + o, ref.data(), shape.cols);
      store(shape.dtype, std::vector<float>(ref.begin(), ref.end()), &ref_stored);
      double diff = 0.0, norm = 0.0, rounding = 0.0;
      for (std::size_t j = 0; j < ref.size(); ++j) {
        diff += (got[o + j] - ref[j]) * (got[o + j] - ref[j]);
        norm += ref[j] * ref[j];
        rounding += (ref_stored[j] - ref[j]) * (ref_stored[j] - ref[j]);
      }
      const double e = (std::sqrt(diff) - std::sqrt(rounding)) / std::sqrt(norm);
      if (!(e <= worst)) worst = e;
    }
    return worst;
  }

  /// Prepares a variant once: the floor's kernel, or a BackwardOperator with its own workspace (and checks it).
  const Prepared* prepare(const std::string& name, std::string* failure) {
    const auto found = prepared.find(name);
    if (found != prepared.end()) return &found->second;
    const Variant& v = *std::find_if(variants.begin(), variants.end(), [&](const Variant& c) { return c.name == name; });
    Prepared p;
    if (v.floor) {
      // floor: reads x, y, dy, writes dx (4 N). floor_saved: reads x and dy, writes dx (3 N: dy's two reads are one).
      const std::int64_t vectors = static_cast<std::int64_t>(shape.bytes() / 16);
      const int blocks = static_cast<int>(std::max<std::int64_t>(
          1, std::min<std::int64_t>((vectors + floor_threads * floor_unroll - 1) / (floor_threads * floor_unroll),
                                    static_cast<std::int64_t>(g_sm_count) * 8)));
      const auto* a = static_cast<const uint4*>(x);
      const auto* b = static_cast<const uint4*>(v.saved ? dy : y);
      const auto* c = static_cast<const uint4*>(dy);
      auto* out = static_cast<uint4*>(dx);
      p.run = [=]() -> const char* {
        floor_kernel<<<blocks, floor_threads, 0, g_stream>>>(a, b, c, out, vectors);
        const cudaError_t e = cudaGetLastError();
        return e == cudaSuccess ? nullptr : cudaGetErrorString(e);
      };
      p.launches.add({"floor_kernel", static_cast<unsigned>(blocks), floor_threads, 0, false, 0});
      p.launches.logical_bytes = (v.saved ? 3 : 4) * static_cast<std::int64_t>(shape.bytes());
      p.label = v.name;
      return &prepared.emplace(name, std::move(p)).first->second;
    }
    const rss::Status s = with_storage(shape.dtype, [&](auto tag) -> rss::Status {
      using T = typename decltype(tag)::type;
      std::size_t bytes = 0;
      RSS_TRY(rss::backward_workspace_bytes<T>(v.strategy, shape.rows, shape.cols, &bytes));
      void* w = nullptr;
      if (bytes > 0) BENCH_CUDA(cudaMalloc(&w, bytes));
      const std::shared_ptr<void> ws(w, [](void* q) { cudaFree(q); });
      auto op = std::make_shared<rss::BackwardOperator<T>>();
      const rss::BackwardClusterConfig* preferred = v.config.cluster_size > 0 ? &v.config : nullptr;
      const auto layout = rss::BackwardLayout::contiguous(shape.rows, shape.cols);
      RSS_TRY(v.saved ? op->initialize_saved(v.strategy, static_cast<const T*>(x), stats, static_cast<const T*>(dy),
                                             static_cast<T*>(dx), layout, w, bytes, g_stream, preferred)
                      : op->initialize(v.strategy, static_cast<const T*>(x), static_cast<const T*>(y),
                                       static_cast<const T*>(dy), static_cast<T*>(dx), layout, w, bytes, g_stream,
                                       preferred));
      if (preferred != nullptr && !(op->cluster_plan().config == v.config)) {
        *failure = "configuration not used for this row";
        return rss::Status::not_admissible;
      }
      RSS_TRY(op->describe(&p.launches));
      p.label = rss::backward_strategy_name(op->strategy());
      if (op->strategy() == rss::BackwardStrategy::cluster_row) {
        const auto& c = op->cluster_plan().config;
        p.label += ":" + std::to_string(c.threads) + "x" + std::to_string(c.elems_per_thread) + "x" +
                   std::to_string(c.cluster_size);
      }
      p.run = [o = op.get()]() -> const char* {
        const rss::Status r = o->run(g_stream);
        return rss::ok(r) ? nullptr : rss::status_message(r);
      };
      p.state = std::make_shared<std::pair<std::shared_ptr<void>, std::shared_ptr<void>>>(ws, op);  // the operator goes first
      return rss::Status::success;
    });
    if (!rss::ok(s)) {
      if (failure->empty()) *failure = std::string("initialize: ") + rss::status_message(s);
      return nullptr;
    }
    if (g_options.extra["--check"] != "0") p.max_rel_err = check(p);
    return &prepared.emplace(name, std::move(p)).first->second;
  }
};

std::unique_ptr<ShapeState> g_shape;

void run_variant(benchmark::State& st, const Shape& shape, const std::string& variant, int round, int position) {
  ShapeState& state = current_shape(g_shape, shape, [&] { return std::make_unique<ShapeState>(shape); });
  std::string failure;
  const Prepared* p = state.prepare(variant, &failure);
  if (p == nullptr) return skip_run(st, failure);
  const Samples m = time_calls(st, p->run, [] { return cudaStreamSynchronize(g_stream); }, g_stream, true);
  launch_counters(st, p->launches, p->launches.logical_bytes, 4 * static_cast<std::int64_t>(shape.bytes()));
  st.counters["cluster_size"] = p->launches.size > 0 ? p->launches.items[0].cluster_size : 0;
  if (p->max_rel_err >= 0) st.counters["max_rel_err"] = p->max_rel_err;
  st.SetLabel(p->label);
  record_samples(st, m, shape, round, position);
}

}  // namespace

int main(int argc, char** argv) {
  Suite suite{backward_program,
              "the backward benchmark suite of rss's rms_scaled_softmax (Google Benchmark): the\n"
              "backward strategies of both saved states against floors moving the same bytes.",
              "add cluster_row and cluster_row_saved under every configuration that holds the row\n"
              "(cluster_row:THREADSxELEMSxCLUSTER)",
              {{"--check", "0|1", "check each strategy's dx against the double reference first (default 1)",
                [](const std::string& v) { return v == "0" || v == "1" ? std::string() : "wants 0 or 1, got '" + v + "'"; }}}};
  suite.variants = [](const Shape& s) { return names_of(variants_for(s)); };
  suite.run = run_variant;
  suite.finish = [] { g_shape.reset(); };
  return run_suite(suite, argc, argv);
}
