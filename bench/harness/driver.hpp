#pragma once
// One driver for the three suites (forward, backward, sharded): flags, the device check, registration of
// Google Benchmark runs (suite mode: each shape x variant once; a session: per shape, rounds, each round every
// variant once in an order shuffled from the recorded seed), the session's context (schema rss-records/2) and
// Google Benchmark's own JSON reporter writing the records. A suite supplies its variants and how one runs.
#include <benchmark/benchmark.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <functional>
#include <memory>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "check.hpp"
#include "fixture.hpp"
#include "options.hpp"
#include "shapes.hpp"

namespace rss_bench {

/// The stream on GPU 0 every suite times on (the sharded suite adds one per GPU) and GPU 0's SM count: made by
/// run_suite once the device check has passed.
inline cudaStream_t g_stream = nullptr;
inline int g_sm_count = 0;

/// The names of a suite's variants (anything with a `name`).
template <class Variants>
std::vector<std::string> names_of(const Variants& variants) {
  std::vector<std::string> names;
  for (const auto& v : variants) names.push_back(v.name);
  return names;
}

/// The state of the shape being measured: made on first use and replaced, the old one freed first (the largest shapes
/// need several GB), when the runs move on to another shape.
template <class State, class Make>
State& current_shape(std::unique_ptr<State>& current, const Shape& shape, Make&& make) {
  if (!current || !(current->shape == shape)) {
    current.reset();
    current = make();
  }
  return *current;
}

/// What a program hands run_suite: its Program (name and defaults, options.hpp), its help texts and flags, brace-
/// initialised in main(); then its callbacks, set by name.
struct Suite {
  Program program;
  const char* about;       // the first lines of --help, after "PROGRAM: "
  std::string pilot_help;  // "" when the suite has no --pilot; lines after the first are indented by print_help
  std::vector<ExtraFlag> flags;
  bool pilot_needs_device = false;  // the pilot's candidates depend on the device's limits
  std::function<std::vector<std::string>(const Shape&)> variants;
  std::function<void(benchmark::State&, const Shape&, const std::string& variant, int round, int position)> run;
  std::function<void()> start;   // after the device check: communicators, context
  std::function<void()> finish;  // after the runs: release everything (before the CUDA runtime goes)
  std::vector<std::pair<std::string, std::string>> context;  // the suite's own context keys (set by start)
  int devices = 1;  // GPUs a call uses: the context lists their UUIDs (set by start)
};

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

/// Registers the runs; returns how many.
inline std::size_t register_runs(Suite& s) {
  const Options& o = g_options;
  std::size_t count = 0;
  const auto add = [&](const std::string& name, const Shape& shape, const std::string& variant, int round, int pos) {
    auto* b = benchmark::RegisterBenchmark(name.c_str(), [&s, shape, variant, round, pos](benchmark::State& st) {
      s.run(st, shape, variant, round, pos);
    });
    b->UseManualTime()->Unit(benchmark::kMicrosecond);
    if (o.session != 0) b->Iterations(o.iterations);
    ++count;
  };
  for (const Shape& shape : o.selected) {
    const std::vector<std::string> variants = s.variants(shape);
    if (o.session == 0) {
      for (const std::string& v : variants) add(shape.label() + "/" + v, shape, v, 0, 0);
      continue;
    }
    for (int round = 0; round < o.rounds; ++round) {
      std::vector<std::size_t> order(variants.size());
      for (std::size_t i = 0; i < order.size(); ++i) order[i] = i;
      std::mt19937_64 rng(splitmix64(o.seed ^ (static_cast<std::uint64_t>(o.session) << 56) ^
                                     (static_cast<std::uint64_t>(shape.rows) << 32) ^
                                     static_cast<std::uint64_t>(shape.cols) ^ (static_cast<std::uint64_t>(round) << 20) ^
                                     (static_cast<std::uint64_t>(shape.dtype) << 62)));
      std::shuffle(order.begin(), order.end(), rng);
      for (std::size_t pos = 0; pos < order.size(); ++pos) {
        const std::string& v = variants[order[pos]];
        add(shape.label() + "/round" + std::to_string(round) + "/" + v, shape, v, round, static_cast<int>(pos));
      }
    }
  }
  return count;
}

inline std::string uuid_of(int device) {
  cudaDeviceProp prop{};
  BENCH_CUDA(cudaGetDeviceProperties(&prop, device));
  const auto* u = reinterpret_cast<const unsigned char*>(prop.uuid.bytes);
  char uuid[64];
  std::snprintf(uuid, sizeof uuid, "GPU-%02x%02x%02x%02x-%02x%02x-%02x%02x-%02x%02x-%02x%02x%02x%02x%02x%02x", u[0],
                u[1], u[2], u[3], u[4], u[5], u[6], u[7], u[8], u[9], u[10], u[11], u[12], u[13], u[14], u[15]);
  return uuid;
}

/// The session's context (schema rss-records/2): Google Benchmark writes it into the records' "context"; the
/// session runner (bench/rssbench session) adds the source hash, the clocks and the fixture hash.
inline void add_session_context(const Suite& s) {
  const Options& o = g_options;
  cudaDeviceProp prop{};
  BENCH_CUDA(cudaGetDeviceProperties(&prop, 0));
  std::string uuids, dtypes, first;
  for (int d = 0; d < s.devices; ++d) uuids += (d ? "," : "") + uuid_of(d);
  for (const Shape& shape : o.selected) {
    const std::string d = rss::dtype_name(shape.dtype);
    if (("," + dtypes + ",").find("," + d + ",") == std::string::npos) dtypes += (dtypes.empty() ? "" : ",") + d;
  }
  for (int k = 0; k < 8; ++k) {
    const float v = fixture_element(o.fixture_seed, static_cast<std::uint64_t>(k));
    std::uint32_t bits;
    std::memcpy(&bits, &v, sizeof bits);
    char hex[16];
    std::snprintf(hex, sizeof hex, "%s0x%08x", k ? " " : "", bits);
    first += hex;
  }
  int driver = 0, runtime = 0;
  cudaDriverGetVersion(&driver);
  cudaRuntimeGetVersion(&runtime);
  const std::pair<const char*, std::string> context[] = {
      {"schema", "rss-records/2"}, {"producer", program_name}, {"suite", s.program.suite},
      {"session", std::to_string(o.session)}, {"gpu", prop.name}, {"uuid", uuids},
      {"driver", "cuda " + std::to_string(driver / 1000) + "." + std::to_string(driver % 1000 / 10)},
      {"toolkit", std::to_string(runtime / 1000) + "." + std::to_string(runtime % 1000 / 10)},
      {"sm_count", std::to_string(prop.multiProcessorCount)}, {"rounds", std::to_string(o.rounds)},
      {"iterations", std::to_string(o.iterations)}, {"warmup", std::to_string(o.warmup)},
      {"seed", std::to_string(o.seed)}, {"shape_order", o.shape_order}, {"dtype", dtypes},
      {"fixture_seed", std::to_string(o.fixture_seed)}, {"fixture_generator", fixture_generator},
      {"fixture_first_elements", first}};
  for (const auto& [key, value] : context) benchmark::AddCustomContext(key, value);
  for (const auto& [key, value] : s.context) benchmark::AddCustomContext(key, value);
}

/// Why there is no usable device, in words a user can act on (a missing driver reads as "CUDA driver version is
/// insufficient" in CUDA's own text).
inline std::string no_device_reason(cudaError_t err) {
  if (err == cudaSuccess) return "the driver reports no CUDA device";
  int runtime = 0;
  cudaRuntimeGetVersion(&runtime);
  if (err == cudaErrorInsufficientDriver) {
    return "no NVIDIA driver is loaded, or it is older than this CUDA runtime (" + std::to_string(runtime / 1000) +
           "." + std::to_string(runtime % 1000 / 10) + ") needs";
  }
  if (err == cudaErrorNoDevice) return "no CUDA-capable device is visible (check CUDA_VISIBLE_DEVICES)";
  return std::string(cudaGetErrorName(err)) + ": " + cudaGetErrorString(err);
}

/// The whole program: flags (before any device work), the device check, the runs, the records.
inline int run_suite(Suite& s, int argc, char** argv) {
  program_name = s.program.name;
  Options& o = g_options;
  o.shapes = s.program.shapes;
  o.dtypes = s.program.dtypes;
  o.rounds = s.program.rounds;
  o.iterations = s.program.iterations;
  o.warmup = s.program.warmup;
  o.out = s.program.out;
  const Options defaults = o;  // before the flags: what --help shows
  const bool help = parse_options(&argc, argv, s.flags, !s.pilot_help.empty());
  // A session's records are Google Benchmark's JSON reporter's output, written to --out.
  std::vector<char*> args(argv, argv + argc);
  std::string out_flag = "--benchmark_out=" + o.out, format_flag = "--benchmark_out_format=json";
  if (o.session != 0 && !o.list_tests) {
    args.push_back(out_flag.data());
    args.push_back(format_flag.data());
  }
  argc = static_cast<int>(args.size());
  args.push_back(nullptr);
  argv = args.data();
  const auto help_text = [&] { print_help(s.about, s.pilot_help, s.flags, defaults); };
  static std::function<void()> help_hook;  // Google Benchmark's --help calls a plain function
  help_hook = help_text;
  benchmark::Initialize(&argc, argv, [] { help_hook(); });
  if (help) {
    help_text();
    return 0;
  }
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) {
    std::fprintf(stderr, "%s: %s --help lists the flags\n", program_name, program_name);
    return 2;
  }
  int devices = 0;
  const cudaError_t err = cudaGetDeviceCount(&devices);
  const bool have_device = err == cudaSuccess && devices > 0;
  if (!have_device && o.list_tests && !(o.pilot && s.pilot_needs_device)) {
    register_runs(s);  // the names need no device
    benchmark::RunSpecifiedBenchmarks();
    benchmark::Shutdown();
    return 0;
  }
  if (!have_device) {
    std::fprintf(stderr, "%s: no CUDA device (%s). The %s suite needs an NVIDIA GPU%s; nothing was run.\n", program_name,
                 no_device_reason(err).c_str(), s.program.suite,
                 o.list_tests ? " (so does listing the pilot's candidates: they depend on the device)" : "");
    return 2;
  }
  BENCH_CUDA(cudaFree(nullptr));  // the context exists before anything is timed
  BENCH_CUDA(cudaStreamCreateWithFlags(&g_stream, cudaStreamNonBlocking));
  BENCH_CUDA(cudaDeviceGetAttribute(&g_sm_count, cudaDevAttrMultiProcessorCount, 0));
  if (s.start) s.start();
  const std::size_t total = register_runs(s);
  if (o.session == 0 || o.list_tests) {
    benchmark::RunSpecifiedBenchmarks();  // a listing writes no records
  } else {
    add_session_context(s);
    ProgressReporter progress(total);
    benchmark::JSONReporter records;  // Google Benchmark's own JSON, into --out (--benchmark_out, set above)
    benchmark::RunSpecifiedBenchmarks(&progress, &records);
    std::fprintf(stderr, "%s: %zu runs written to %s\n", program_name, total, o.out.c_str());
  }
  if (s.finish) s.finish();
  cudaSetDevice(0);
  cudaStreamDestroy(g_stream);
  benchmark::Shutdown();
  return 0;
}

}  // namespace rss_bench
