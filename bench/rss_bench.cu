// rss benchmark suites (Google Benchmark).
//
//   rss_bench [google benchmark flags]            every shape x variant, Google Benchmark's own loop
//   rss_bench --session=1 --rounds=10 --iterations=30 --seed=7 --shape-order=forward --out=raw.json
//                                                 one measurement session of the project's protocol
//                                                 (docs/protocol.md): per shape, rounds; per round every
//                                                 variant once, in an order shuffled from the recorded
//                                                 seed; raw samples
//   rss_bench --pilot --session=1 --out=pilot.json   the same protocol over the tuning candidates
//                                                 (cluster_row configurations, megakernels, block_row):
//                                                 its records feed the tuning tables in rss/tuning/
//   --shapes=4096x4096,1x131072:bf16              a subset of shapes (default: bench/shapes.hpp)
//   --help                                        rss_bench's flags and Google Benchmark's (no GPU needed)
//
// Flags are checked before the device: --help, --benchmark_list_tests and bad flags work without a GPU.
// Main metric: host completion time of a warm call (launch call to completion seen on the host).
// Second figure: one batched CUDA event interval per round, divided by the calls it spans.
#include <benchmark/benchmark.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <memory>
#include <random>
#include <regex>
#include <string>
#include <vector>

#include "check.hpp"
#include "fixture.hpp"
#include "rss/rss.cuh"
#include "shapes.hpp"
#include "variants.cuh"

namespace {

using namespace rss_bench;

/// A flag error: says what is wrong and exits with code 2 (before any device work).
[[noreturn]] void bad_flag(const std::string& message) {
  std::fprintf(stderr, "rss_bench: %s (rss_bench --help lists the flags)\n", message.c_str());
  std::exit(2);
}

struct Options {
  int session = 0;  // 0: suite mode
  bool pilot = false;
  int rounds = 10, iterations = 30, warmup = 5;
  std::uint64_t seed = 1, fixture_seed = 42;
  std::string shape_order = "forward", out = "records.json", shapes;
};

/// x as stored in T (raw bytes), read back as float: rss's own storage conversions (rss::StorageTraits).
template <class T>
std::vector<float> store_as(const std::vector<float>& x, std::vector<unsigned char>* raw) {
  std::vector<float> seen(x.size());
  raw->resize(x.size() * sizeof(T));
  for (std::size_t i = 0; i < x.size(); ++i) {
    const T v = rss::StorageTraits<T>::from_float(x[i]);
    std::memcpy(raw->data() + i * sizeof(T), &v, sizeof(T));
    seen[i] = rss::StorageTraits<T>::to_float(v);
  }
  return seen;
}

/// x as stored in `dtype`, converted back to float (what the kernels and the reference see).
std::vector<float> stored_values(const std::vector<float>& x, rss::DType dtype, std::vector<unsigned char>* raw) {
  if (dtype == rss::DType::bf16) return store_as<__nv_bfloat16>(x, raw);
  if (dtype == rss::DType::fp16) return store_as<__half>(x, raw);
  return store_as<float>(x, raw);
}

template <class T>
float load_as(const unsigned char* p) {
  T v;
  std::memcpy(&v, p, sizeof(T));
  return rss::StorageTraits<T>::to_float(v);
}

float stored_to_float(const unsigned char* p, rss::DType dtype) {
  if (dtype == rss::DType::bf16) return load_as<__nv_bfloat16>(p);
  if (dtype == rss::DType::fp16) return load_as<__half>(p);
  return load_as<float>(p);
}

/// The current shape's device buffers, host input, reference and prepared variants. Only one shape
/// is alive at a time: the largest needs several GB.
struct ShapeState {
  Shape shape;
  ShapeBuffers buffers;
  std::vector<float> x_seen;  // the input as the kernels see it (after storage rounding)
  std::vector<double> reference;
  std::vector<Variant> variants;
  std::map<std::string, Prepared> prepared;
  std::map<std::string, double> error;

  ShapeState(Shape s, std::uint64_t fixture_seed, int sm_count) : shape(s) {
    buffers.rows = s.rows;
    buffers.cols = s.cols;
    buffers.dtype = s.dtype;
    buffers.sm_count = sm_count;
    std::vector<unsigned char> raw;
    x_seen = stored_values(fixture(fixture_seed, s.rows, s.cols), s.dtype, &raw);
    BENCH_CUDA(cudaMalloc(&buffers.x, raw.size()));
    BENCH_CUDA(cudaMalloc(&buffers.y, raw.size()));
    BENCH_CUDA(cudaMemcpy(buffers.x, raw.data(), raw.size(), cudaMemcpyHostToDevice));
  }
  ~ShapeState() {
    prepared.clear();  // graphs and plans go before the memory they point to
    cudaDeviceSynchronize();
    cudaFree(buffers.x);
    cudaFree(buffers.y);
  }

  std::size_t bytes() const { return x_seen.size() * static_cast<std::size_t>(rss::dtype_bytes(shape.dtype)); }

  /// Worst row error of a variant's output against the double-precision reference (y poisoned first).
  double check(const Prepared& p, cudaStream_t stream) {
    if (reference.empty()) {
      reference.resize(x_seen.size());
      rss::reference::rms_scaled_softmax(x_seen.data(), reference.data(), shape.rows, shape.cols);
      format_error = rounding_error_of_reference();
    }
    BENCH_CUDA(cudaMemset(buffers.y, 0xFF, bytes()));
    if (p.run(stream) != rss::Status::success) return -1.0;
    BENCH_CUDA(cudaStreamSynchronize(stream));
    std::vector<unsigned char> raw(bytes());
    BENCH_CUDA(cudaMemcpy(raw.data(), buffers.y, raw.size(), cudaMemcpyDeviceToHost));
    std::vector<float> y(x_seen.size());
    const std::size_t eb = static_cast<std::size_t>(rss::dtype_bytes(shape.dtype));
    for (std::size_t i = 0; i < y.size(); ++i) y[i] = stored_to_float(raw.data() + i * eb, shape.dtype);
    return rss::reference::max_row_relative_error(y.data(), reference.data(), shape.rows, shape.cols);
  }

  /// A floor's check: its output must be x's bytes. 0 when it is, 1 when any byte differs (never within the
  /// operator's tolerance), -1 when the copy failed.
  double check_copy(const Prepared& p, cudaStream_t stream) {
    BENCH_CUDA(cudaMemset(buffers.y, 0xFF, bytes()));
    if (p.run(stream) != rss::Status::success) return -1.0;
    unsigned long long* mismatches = nullptr;
    BENCH_CUDA(cudaMalloc(&mismatches, sizeof *mismatches));
    BENCH_CUDA(cudaMemsetAsync(mismatches, 0, sizeof *mismatches, stream));
    count_mismatches<<<1024, 256, 0, stream>>>(static_cast<const unsigned char*>(buffers.x),
                                               static_cast<const unsigned char*>(buffers.y),
                                               static_cast<std::int64_t>(bytes()), mismatches);
    unsigned long long found = 0;
    BENCH_CUDA(cudaMemcpyAsync(&found, mismatches, sizeof found, cudaMemcpyDeviceToHost, stream));
    BENCH_CUDA(cudaStreamSynchronize(stream));
    BENCH_CUDA(cudaFree(mismatches));
    return found == 0 ? 0.0 : 1.0;
  }

  /// The error an exact implementation makes by storing its answer in the shape's type. Long fp16 rows
  /// (1 x 1M and more) have outputs below fp16's smallest normal (6.1e-5), where its spacing is 6e-8:
  /// there every implementation, torch's included, misses the 1e-2 tolerance by this much.
  double rounding_error_of_reference() const {
    if (shape.dtype == rss::DType::fp32) return 0.0;
    std::vector<unsigned char> raw;
    const std::vector<float> rounded = stored_values(std::vector<float>(reference.begin(), reference.end()), shape.dtype, &raw);
    return rss::reference::max_row_relative_error(rounded.data(), reference.data(), shape.rows, shape.cols);
  }

  /// A variant passes within the tolerance on top of the storage type's own rounding error.
  double allowed_error() const { return rss::reference::tolerance(shape.dtype) + format_error; }

  double format_error = 0.0;
};

Options g_options;
cudaStream_t g_stream = nullptr;
int g_sm_count = 0;
std::unique_ptr<ShapeState> g_shape;

/// The variants measured on a shape: every strategy and the floor, or the pilot's candidates.
std::vector<Variant> variants_for(const Shape& s) {
  if (!g_options.pilot) return all_variants();
  ShapeBuffers b;
  b.rows = s.rows;
  b.cols = s.cols;
  b.dtype = s.dtype;
  b.sm_count = g_sm_count;
  return pilot_variants(b);
}

ShapeState& shape_state(const Shape& s) {
  if (!g_shape || g_shape->shape.label() != s.label()) {
    g_shape.reset();
    g_shape = std::make_unique<ShapeState>(s, g_options.fixture_seed, g_sm_count);
    g_shape->variants = variants_for(s);
  }
  return *g_shape;
}

/// Prepares the variant on the current shape once, checking its output against the reference.
const Prepared* prepared(ShapeState& state, const Variant& v, std::string* failure) {
  auto it = state.prepared.find(v.name);
  if (it == state.prepared.end()) {
    Prepared p;
    const rss::Status s = v.prepare(state.buffers, &p);
    if (s != rss::Status::success) {
      *failure = std::string("prepare: ") + rss::status_message(s);
      return nullptr;
    }
    it = state.prepared.emplace(v.name, std::move(p)).first;
    // The floors copy x into y: their output must be x's bytes, not the operator's.
    const bool floor = v.name.size() > 6 && v.name.compare(v.name.size() - 6, 6, "_floor") == 0;
    state.error[v.name] = floor ? state.check_copy(it->second, g_stream) : state.check(it->second, g_stream);
  }
  const double err = state.error[v.name];
  if (!(err >= 0.0 && err <= state.allowed_error())) {
    *failure = "output does not match the reference (max row error " + std::to_string(err) + ")";
    return nullptr;
  }
  return &it->second;
}

struct Measurement {
  std::vector<double> host_us;
  double device_us = 0.0;
};

/// Warm-up, then one host-completion sample per Google Benchmark iteration, then one batched event interval.
Measurement measure(benchmark::State& st, const Prepared& p, int batched_calls) {
  Measurement m;
  for (int i = 0; i < g_options.warmup; ++i) (void)p.run(g_stream);
  BENCH_CUDA(cudaStreamSynchronize(g_stream));
  for (auto _ : st) {
    const auto t0 = std::chrono::steady_clock::now();
    const rss::Status s = p.run(g_stream);
    const cudaError_t err = cudaStreamSynchronize(g_stream);
    const auto t1 = std::chrono::steady_clock::now();
    if (s != rss::Status::success || err != cudaSuccess) {
      st.SkipWithError(s != rss::Status::success ? rss::status_message(s) : cudaGetErrorString(err));
      break;
    }
    const double seconds = std::chrono::duration<double>(t1 - t0).count();
    st.SetIterationTime(seconds);
    m.host_us.push_back(seconds * 1e6);
  }
  cudaEvent_t start, stop;
  BENCH_CUDA(cudaEventCreate(&start));
  BENCH_CUDA(cudaEventCreate(&stop));
  BENCH_CUDA(cudaEventRecord(start, g_stream));
  for (int i = 0; i < batched_calls; ++i) (void)p.run(g_stream);
  BENCH_CUDA(cudaEventRecord(stop, g_stream));
  BENCH_CUDA(cudaEventSynchronize(stop));
  float ms = 0.0f;
  BENCH_CUDA(cudaEventElapsedTime(&ms, start, stop));
  m.device_us = 1000.0 * ms / batched_calls;
  cudaEventDestroy(start);
  cudaEventDestroy(stop);
  return m;
}

void set_counters(benchmark::State& st, const Prepared& p, std::int64_t floor_bytes) {
  const rss::LaunchList& l = p.launches;
  st.counters["kernels"] = static_cast<double>(l.kernels);
  st.counters["launches"] = static_cast<double>(l.host_launches);
  st.counters["cooperative"] = l.any_cooperative() ? 1 : 0;
  st.counters["active_blocks_per_sm"] = l.size > 0 ? l.items[0].blocks_per_sm : 0;
  st.counters["logical_bytes"] = static_cast<double>(p.logical_bytes);
  st.counters["evicted_tiles"] = static_cast<double>(l.evicted_tiles);
  st.counters["logical_bw"] = benchmark::Counter(static_cast<double>(p.logical_bytes) * st.iterations(),
                                                 benchmark::Counter::kIsRate);
  st.counters["copy_equiv_bw"] = benchmark::Counter(static_cast<double>(floor_bytes) * st.iterations(),
                                                    benchmark::Counter::kIsRate);
  // Google Benchmark's own bytes_per_second: x read once and y written once, whatever the variant moves.
  st.SetBytesProcessed(floor_bytes * static_cast<std::int64_t>(st.iterations()));
}

void run_variant(benchmark::State& st, Shape shape, std::size_t variant, int round, int position) {
  ShapeState& state = shape_state(shape);
  std::string failure;
  const Prepared* p = prepared(state, state.variants[variant], &failure);
  if (p == nullptr) {
    st.SkipWithError(failure.c_str());
    for (auto _ : st) {
    }
    return;
  }
  const Measurement m = measure(st, *p, g_options.iterations);
  set_counters(st, *p, 2 * static_cast<std::int64_t>(state.bytes()));
  if (g_options.session == 0) return;
  // A session's record (schema rss-records/2, bench/rssbench/records.py): every sample and the run's facts.
  st.counters["rows"] = static_cast<double>(shape.rows);
  st.counters["cols"] = static_cast<double>(shape.cols);
  st.counters["round"] = round;
  st.counters["position"] = position;
  st.counters["device_us"] = m.device_us;
  st.counters["max_rel_err"] = state.error[state.variants[variant].name];
  for (std::size_t i = 0; i < m.host_us.size(); ++i) st.counters["host_us/" + std::to_string(i)] = m.host_us[i];
}

/// A run's error message, or "" when it succeeded. Google Benchmark 1.7 reports errors as error_occurred /
/// error_message; 1.8 replaced them by skipped / skip_message: both are accepted, whichever the build has.
template <class Run>
auto run_error(const Run& run, int) -> decltype(run.error_occurred, std::string()) {
  return run.error_occurred ? run.error_message : std::string();
}
template <class Run>
auto run_error(const Run& run, long) -> decltype(run.skip_message, std::string()) {
  return run.skipped != decltype(run.skipped){} ? run.skip_message : std::string();
}

/// Session progress on the terminal: shape, round, variant and an estimate of the time left.
class ProgressReporter : public benchmark::BenchmarkReporter {
 public:
  explicit ProgressReporter(std::size_t total) : total_(total), start_(std::chrono::steady_clock::now()) {}
  bool ReportContext(const Context&) override { return true; }
  void ReportRuns(const std::vector<Run>& runs) override {
    for (const Run& run : runs) {
      ++done_;
      const std::string error = run_error(run, 0);
      const double elapsed = std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count();
      const double left = elapsed / static_cast<double>(done_) * static_cast<double>(total_ - done_);
      std::fprintf(stderr, "\r[session %d] %-48s %9.1f us  %4zu/%zu  ~%4.0f s left%s", g_options.session,
                   run.benchmark_name().c_str(), run.GetAdjustedRealTime(), done_, total_, left,
                   error.empty() ? "   " : ("  ERROR: " + error + "\n").c_str());
    }
  }
  void Finalize() override { std::fprintf(stderr, "\n"); }

 private:
  std::size_t total_, done_ = 0;
  std::chrono::steady_clock::time_point start_;
};

std::vector<Shape> selected_shapes() {
  std::vector<Shape> shapes;
  if (g_options.shapes.empty()) {
    shapes = spec_shapes();
  } else {
    std::size_t pos = 0;
    while (pos < g_options.shapes.size()) {
      const std::size_t comma = g_options.shapes.find(',', pos);
      const std::string item = g_options.shapes.substr(pos, comma == std::string::npos ? std::string::npos : comma - pos);
      long long r = 0, c = 0;
      int used = 0;
      const int fields = std::sscanf(item.c_str(), "%lldx%lld%n", &r, &c, &used);
      // The whole item must parse: "4096x4096x" or "8x131072:bf" are errors, not silently trimmed.
      std::string dtype = "fp32";
      if (fields == 2 && item[static_cast<std::size_t>(used)] == ':') dtype = item.substr(static_cast<std::size_t>(used) + 1);
      else if (fields == 2 && item[static_cast<std::size_t>(used)] != '\0') dtype = "?";
      Shape shape{r, c, rss::DType::fp32};
      bool known = false;
      for (const rss::DType d : {rss::DType::fp32, rss::DType::bf16, rss::DType::fp16}) {
        if (dtype == rss::dtype_name(d)) {
          shape.dtype = d;
          known = true;
        }
      }
      if (fields < 2 || !known || r < 1 || c < 1) {
        bad_flag("--shapes: bad shape '" + item + "' (want ROWSxCOLS or ROWSxCOLS:fp32|bf16|fp16)");
      }
      shapes.push_back(shape);
      if (comma == std::string::npos) break;
      pos = comma + 1;
    }
  }
  if (g_options.shape_order == "reverse") std::reverse(shapes.begin(), shapes.end());
  return shapes;
}

/// Registers one session: for each shape, rounds; each round runs every variant once in an order
/// shuffled from (seed, session, shape, round). Google Benchmark runs them in registration order.
std::size_t register_session(const std::vector<Shape>& shapes) {
  std::size_t count = 0;
  for (std::size_t si = 0; si < shapes.size(); ++si) {
    const std::vector<Variant> variants = variants_for(shapes[si]);
    for (int round = 0; round < g_options.rounds; ++round) {
      std::vector<std::size_t> order(variants.size());
      for (std::size_t i = 0; i < order.size(); ++i) order[i] = i;
      std::mt19937_64 rng(splitmix64(g_options.seed ^ (static_cast<std::uint64_t>(g_options.session) << 56) ^
                                     (static_cast<std::uint64_t>(shapes[si].rows) << 32) ^
                                     static_cast<std::uint64_t>(shapes[si].cols) ^
                                     (static_cast<std::uint64_t>(round) << 20) ^
                                     (static_cast<std::uint64_t>(shapes[si].dtype) << 62)));
      std::shuffle(order.begin(), order.end(), rng);
      for (std::size_t pos = 0; pos < order.size(); ++pos) {
        const Shape shape = shapes[si];
        const std::size_t v = order[pos];
        const std::string name = shape.label() + "/round" + std::to_string(round) + "/" + variants[v].name;
        benchmark::RegisterBenchmark(name.c_str(), [=](benchmark::State& st) {
          run_variant(st, shape, v, round, static_cast<int>(pos));
        })->Iterations(g_options.iterations)->UseManualTime()->Unit(benchmark::kMicrosecond);
        ++count;
      }
    }
  }
  return count;
}

void register_suite(const std::vector<Shape>& shapes) {
  for (const Shape& shape : shapes) {
    const std::vector<Variant> variants = variants_for(shape);
    for (std::size_t v = 0; v < variants.size(); ++v) {
      const std::string name = shape.label() + "/" + variants[v].name;
      benchmark::RegisterBenchmark(name.c_str(), [=](benchmark::State& st) { run_variant(st, shape, v, 0, 0); })
          ->UseManualTime()
          ->Unit(benchmark::kMicrosecond);
    }
  }
}

/// "--name=value" -> value; "--name" alone is an error (every valued flag needs its '=').
bool take_option(const char* arg, const char* name, std::string* value) {
  const std::size_t n = std::strlen(name);
  if (std::strncmp(arg, name, n) != 0 || (arg[n] != '=' && arg[n] != '\0')) return false;
  if (arg[n] == '\0') bad_flag(std::string(name) + " needs a value: " + name + "=...");
  *value = arg + n + 1;
  return true;
}

/// The whole of `text` as an integer in [lo, hi], else a clear error naming the flag.
long long integer_flag(const char* name, const std::string& text, long long lo, long long hi) {
  errno = 0;
  char* end = nullptr;
  const long long v = std::strtoll(text.c_str(), &end, 10);
  if (text.empty() || *end != '\0' || errno == ERANGE || v < lo || v > hi) {
    bad_flag(std::string(name) + " wants an integer from " + std::to_string(lo) + " to " + std::to_string(hi) +
             ", got '" + text + "'");
  }
  return v;
}

std::uint64_t seed_flag(const char* name, const std::string& text) {
  errno = 0;
  char* end = nullptr;
  const unsigned long long v = std::strtoull(text.c_str(), &end, 10);
  if (text.empty() || text[0] == '-' || *end != '\0' || errno == ERANGE) {
    bad_flag(std::string(name) + " wants an unsigned 64-bit integer, got '" + text + "'");
  }
  return v;
}

/// A Google Benchmark boolean flag given bare or as =true/1/yes (its own spelling).
bool bool_flag_set(const char* arg, const char* name) {
  const std::size_t n = std::strlen(name);
  if (std::strncmp(arg, name, n) != 0) return false;
  if (arg[n] == '\0') return true;
  if (arg[n] != '=') return false;
  const std::string v = arg + n + 1;
  return v == "true" || v == "1" || v == "yes" || v == "t" || v == "y" || v == "on";
}

bool g_list_tests = false;  // --benchmark_list_tests: names only, no device needed (suite mode)

void print_help() {
  std::printf(
      "rss_bench: benchmark suites of rss's rms_scaled_softmax (Google Benchmark).\n"
      "\n"
      "Usage: rss_bench [rss_bench flags] [Google Benchmark flags]\n"
      "\n"
      "Without --session: suite mode, every shape x variant in Google Benchmark's own loop (its flags apply:\n"
      "--benchmark_filter, --benchmark_format, ...). With --session=N: one session of the project's measurement\n"
      "protocol (docs/protocol.md): per shape, rounds; per round every variant once, in an order shuffled from\n"
      "the recorded seed; every sample written to --out. Sessions are normally run by bench/rssbench session\n"
      "(or scripts/bench.sh), which completes the records and builds the report.\n"
      "\n"
      "rss_bench flags (each valued flag as --flag=value):\n"
      "  --session=N            session number, N >= 1 (default: none, suite mode)\n"
      "  --pilot                measure the tuning candidates (every cluster_row configuration that fits, the\n"
      "                         megakernels, block_row, local_fusion, `heuristic`) instead of the strategies;\n"
      "                         with --session, records for bench/rssbench tune\n"
      "  --rounds=N             rounds per shape, N >= 1 (default 10; sessions)\n"
      "  --iterations=N         host samples per variant and round, N >= 1 (default 30; sessions)\n"
      "  --warmup=N             unrecorded warm calls before each measurement, N >= 0 (default 5)\n"
      "  --seed=N               seed of the per-round shuffles, recorded (default 1)\n"
      "  --fixture-seed=N       seed of the input fixture, recorded (default 42)\n"
      "  --shape-order=ORDER    forward or reverse (default forward; session 2 uses reverse)\n"
      "  --shapes=LIST          comma list of ROWSxCOLS[:fp32|bf16|fp16] (default: the ten project shapes\n"
      "                         in fp32, bf16 and fp16), e.g. --shapes=4096x4096,1x131072:bf16\n"
      "  --out=FILE             a session's records: Google Benchmark's JSON with every sample as counters\n"
      "                         host_us/0.. and the session's context (schema rss-records/2; default records.json)\n"
      "  --help, -h             this help (needs no GPU)\n"
      "\n"
      "Main metric: host completion time of a warm call (launch to completion seen on the host); also one\n"
      "batched CUDA event interval per round. Both are reported as Google Benchmark counters, with\n"
      "bytes_per_second counting x read once and y written once.\n"
      "\n"
      "Exit codes: 0 done, 1 a CUDA or file error, 2 bad flags or no CUDA device.\n"
      "\n"
      "Google Benchmark's flags:\n");
  std::fflush(stdout);
  benchmark::PrintDefaultHelp();
}

/// A bad --benchmark_filter is a flag error before the device check (Google Benchmark would report it only
/// once benchmarks are registered, after rss_bench has looked for a GPU). Its syntax: an extended regular
/// expression, negated by a leading '-'.
void check_filter(const std::string& filter) {
  const std::string pattern = !filter.empty() && filter[0] == '-' ? filter.substr(1) : filter;
  try {
    std::regex(pattern, std::regex::extended);
  } catch (const std::regex_error& e) {
    bad_flag("--benchmark_filter '" + filter + "' is not a valid regular expression (" + e.what() + ")");
  }
}

/// Removes rss_bench's own flags from argv and checks them, leaving Google Benchmark's (and unknown
/// ones, which benchmark::ReportUnrecognizedArguments rejects after Google Benchmark has taken its own).
/// Returns true when help was asked for.
bool parse_options(int* argc, char** argv) {
  int kept = 1;
  bool help = false;
  for (int i = 1; i < *argc; ++i) {
    const char* arg = argv[i];
    std::string v;
    if (std::strcmp(arg, "--help") == 0 || std::strcmp(arg, "-h") == 0) help = true;
    else if (std::strcmp(arg, "--pilot") == 0) g_options.pilot = true;
    else if (take_option(arg, "--session", &v)) g_options.session = static_cast<int>(integer_flag("--session", v, 1, 1 << 20));
    else if (take_option(arg, "--rounds", &v)) g_options.rounds = static_cast<int>(integer_flag("--rounds", v, 1, 1 << 20));
    else if (take_option(arg, "--iterations", &v)) g_options.iterations = static_cast<int>(integer_flag("--iterations", v, 1, 1 << 24));
    else if (take_option(arg, "--warmup", &v)) g_options.warmup = static_cast<int>(integer_flag("--warmup", v, 0, 1 << 24));
    else if (take_option(arg, "--seed", &v)) g_options.seed = seed_flag("--seed", v);
    else if (take_option(arg, "--fixture-seed", &v)) g_options.fixture_seed = seed_flag("--fixture-seed", v);
    else if (take_option(arg, "--shape-order", &v)) {
      if (v != "forward" && v != "reverse") bad_flag("--shape-order wants forward or reverse, got '" + v + "'");
      g_options.shape_order = v;
    } else if (take_option(arg, "--shapes", &v)) {
      if (v.empty()) bad_flag("--shapes needs at least one ROWSxCOLS");
      g_options.shapes = v;
    } else if (take_option(arg, "--out", &v)) {
      if (v.empty()) bad_flag("--out needs a file name");
      g_options.out = v;
    } else {
      if (bool_flag_set(arg, "--benchmark_list_tests")) g_list_tests = true;
      if (take_option(arg, "--benchmark_filter", &v)) check_filter(v);
      argv[kept++] = argv[i];
    }
  }
  *argc = kept;
  return help;
}

/// The session's context (schema rss-records/2): Google Benchmark writes it into the records' "context";
/// the session runner adds the source hash, the clocks and the fixture hash.
void add_session_context() {
  cudaDeviceProp prop{};
  BENCH_CUDA(cudaGetDeviceProperties(&prop, 0));
  char uuid[64];
  const auto* u = reinterpret_cast<const unsigned char*>(prop.uuid.bytes);
  std::snprintf(uuid, sizeof uuid, "GPU-%02x%02x%02x%02x-%02x%02x-%02x%02x-%02x%02x-%02x%02x%02x%02x%02x%02x", u[0], u[1],
                u[2], u[3], u[4], u[5], u[6], u[7], u[8], u[9], u[10], u[11], u[12], u[13], u[14], u[15]);
  int driver = 0, runtime = 0;
  cudaDriverGetVersion(&driver);
  cudaRuntimeGetVersion(&runtime);
  std::string dtypes, first;
  for (const Shape& s : selected_shapes()) {
    const std::string d = rss::dtype_name(s.dtype);
    if (dtypes.find(d) == std::string::npos) dtypes += (dtypes.empty() ? "" : ",") + d;
  }
  for (int k = 0; k < 8; ++k) {
    const float v = fixture_element(g_options.fixture_seed, static_cast<std::uint64_t>(k));
    std::uint32_t bits;
    std::memcpy(&bits, &v, sizeof bits);
    char hex[16];
    std::snprintf(hex, sizeof hex, "%s0x%08x", k ? " " : "", bits);
    first += hex;
  }
  const std::pair<const char*, std::string> context[] = {
      {"schema", "rss-records/2"}, {"producer", "rss_bench"}, {"suite", "forward"},
      {"session", std::to_string(g_options.session)}, {"gpu", prop.name}, {"uuid", uuid},
      {"driver", "cuda " + std::to_string(driver / 1000) + "." + std::to_string(driver % 1000 / 10)},
      {"toolkit", std::to_string(runtime / 1000) + "." + std::to_string(runtime % 1000 / 10)},
      {"sm_count", std::to_string(prop.multiProcessorCount)}, {"rounds", std::to_string(g_options.rounds)},
      {"iterations", std::to_string(g_options.iterations)}, {"warmup", std::to_string(g_options.warmup)},
      {"seed", std::to_string(g_options.seed)}, {"shape_order", g_options.shape_order}, {"dtype", dtypes},
      {"fixture_seed", std::to_string(g_options.fixture_seed)}, {"fixture_generator", fixture_generator},
      {"fixture_first_elements", first}};
  for (const auto& [key, value] : context) benchmark::AddCustomContext(key, value);
}

/// Why there is no usable device, in words a user can act on (a missing driver reads as
/// "CUDA driver version is insufficient" in CUDA's own text).
std::string no_device_reason(cudaError_t err) {
  if (err == cudaSuccess) return "the driver reports no CUDA device";
  int runtime = 0;
  cudaRuntimeGetVersion(&runtime);
  if (err == cudaErrorInsufficientDriver) {
    return "no NVIDIA driver is loaded, or it is older than this CUDA runtime (" + std::to_string(runtime / 1000) + "." +
           std::to_string(runtime % 1000 / 10) + ") needs";
  }
  if (err == cudaErrorNoDevice) return "no CUDA-capable device is visible (check CUDA_VISIBLE_DEVICES)";
  return std::string(cudaGetErrorName(err)) + ": " + cudaGetErrorString(err);
}

}  // namespace

int main(int argc, char** argv) {
  // Flags first: help, listing and flag errors need no GPU.
  const bool help = parse_options(&argc, argv);
  // A session's records are Google Benchmark's JSON reporter's output, written to --out.
  std::vector<char*> args(argv, argv + argc);
  std::string out_flag = "--benchmark_out=" + g_options.out, format_flag = "--benchmark_out_format=json";
  if (g_options.session != 0 && !g_list_tests) {
    args.push_back(out_flag.data());
    args.push_back(format_flag.data());
  }
  argc = static_cast<int>(args.size());
  args.push_back(nullptr);
  argv = args.data();
  benchmark::Initialize(&argc, argv, print_help);  // takes Google Benchmark's flags; --help would exit here
  if (help) {
    print_help();
    return 0;
  }
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) {
    std::fprintf(stderr, "rss_bench: rss_bench --help lists the flags\n");
    return 2;
  }
  const std::vector<Shape> shapes = selected_shapes();  // checks --shapes

  int devices = 0;
  const cudaError_t err = cudaGetDeviceCount(&devices);
  const bool have_device = err == cudaSuccess && devices > 0;
  if (!have_device && g_list_tests && !g_options.pilot) {
    // The names need no device (the pilot's candidates do: they depend on the device's limits).
    if (g_options.session == 0) register_suite(shapes);
    else register_session(shapes);
    benchmark::RunSpecifiedBenchmarks();
    benchmark::Shutdown();
    return 0;
  }
  if (!have_device) {
    std::fprintf(stderr, "rss_bench: no CUDA device (%s). The benchmark suite needs an NVIDIA GPU%s; nothing was run.\n",
                 no_device_reason(err).c_str(),
                 g_list_tests ? " (so does listing the pilot's candidates: they depend on the device)" : "");
    return 2;
  }
  BENCH_CUDA(cudaStreamCreateWithFlags(&g_stream, cudaStreamNonBlocking));
  BENCH_CUDA(cudaDeviceGetAttribute(&g_sm_count, cudaDevAttrMultiProcessorCount, 0));
  BENCH_CUDA(cudaFree(nullptr));  // create the context before anything is timed

  if (g_options.session == 0 || g_list_tests) {
    if (g_options.session == 0) register_suite(shapes);
    else register_session(shapes);
    benchmark::RunSpecifiedBenchmarks();  // a listing writes no records
  } else {
    const std::size_t total = register_session(shapes);
    add_session_context();
    ProgressReporter progress(total);
    benchmark::JSONReporter records;  // Google Benchmark's own JSON, into --out (--benchmark_out, set above)
    benchmark::RunSpecifiedBenchmarks(&progress, &records);
    std::fprintf(stderr, "rss_bench: %zu runs written to %s\n", total, g_options.out.c_str());
  }
  g_shape.reset();
  benchmark::Shutdown();
  cudaStreamDestroy(g_stream);
  return 0;
}
