// rss's sharded benchmark suite (Google Benchmark) over the bench harness (bench/harness/): rows split over
// GPUs, one process driving every GPU of the machine (ncclCommInitAll; world = the GPUs, at most 8, or --world),
// each shape's columns split over them (uneven where they do not divide), against the best rss strategy on the
// whole row on one GPU. Main metric: host completion time of a warm call (launch on every GPU used, then
// synchronise each).
//
//   rss_sharded_bench [google benchmark flags]                          suite mode, Google Benchmark's own loop
//   NCCL_NVLS_ENABLE=0 rss_sharded_bench --out=sharded_records.json    a session's records (rss-records/2)
//   --shapes=32x128256 --dtypes=fp32,bf16 --rounds=5 --samples=20 --skip=nccl_host_eager --world=2 --help
//
// Variants: single_gpu:<strategy> (automatic, cluster_row, megakernel_grid, megakernel_row, local_fusion on GPU 0;
// the report's single_gpu is the fastest accurate one), nccl_host (its CUDA Graph replayed on every GPU),
// nccl_host_eager (rss::run_sharded), nccl_device (one kernel per GPU, flags exchange), nccl_device_lsa_barrier (the
// same kernel exchanging through NCCL's LSA barrier). Accuracy: before its first timed call, each variant's output
// (poisoned first) on rows 0, rows/2, rows-1 and up to 5 more is compared with the double reference of the whole
// row (max_rel_err; recorded, not a refusal). Input: row i is s_i (u + o_i) from (--fixture-seed, row, global
// column), generated on the GPUs, the same on one GPU and in every shard. NCCL_NVLS_ENABLE is recorded in the
// context (NVLink multicast: run with NCCL_NVLS_ENABLE=0, as bench/sharded/device_run.sh does).
#include <benchmark/benchmark.h>
#include <cuda_runtime.h>
#include <nccl.h>

#include <algorithm>
#include <cmath>
#include <functional>
#include <memory>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "harness/check.hpp"
#include "harness/driver.hpp"
#include "harness/fixture.hpp"
#include "harness/storage.hpp"
#include "harness/timing.hpp"
#include "rss/reference/cpu_reference.hpp"
#include "rss/rss.cuh"
#include "rss/sharded/sharded.cuh"

namespace {

using namespace rss_bench;

const char* const single_strategies[] = {"automatic", "cluster_row", "megakernel_grid", "megakernel_row", "local_fusion"};
const char* const sharded_variants[] = {"nccl_host", "nccl_host_eager", "nccl_device", "nccl_device_lsa_barrier"};

int g_world = 0;
std::vector<ncclComm_t> g_comms;
std::vector<cudaStream_t> g_streams;

std::vector<std::string> variant_names() {
  std::vector<std::string> names;
  for (const char* s : single_strategies) names.push_back(std::string("single_gpu:") + s);
  for (const char* v : sharded_variants) names.push_back(v);
  return names;
}

// Row i is s_i (u + o_i), never zero, from (seed, row, global column): the same on one GPU and in every shard.
__host__ __device__ inline float unit(std::uint64_t h) { return static_cast<float>(h >> 40) * (1.0f / 16777216.0f); }
__host__ __device__ inline float input_value(std::uint64_t seed, std::int64_t row, std::int64_t col) {
  const std::uint64_t r = splitmix64(seed ^ splitmix64(static_cast<std::uint64_t>(row)));
  const float s = 0.25f + 3.75f * unit(r), o = -2.0f + 4.0f * unit(splitmix64(r));
  const float v = s * (-4.0f + 8.0f * unit(splitmix64(r ^ splitmix64(static_cast<std::uint64_t>(col) + 1))) + o);
  return v == 0.0f ? 1e-3f : v;
}

template <class T>
__global__ void fill(T* x, std::int64_t rows, std::int64_t cols, std::int64_t col0, std::uint64_t seed) {
  const std::int64_t n = rows * cols;
  for (std::int64_t k = blockIdx.x * static_cast<std::int64_t>(blockDim.x) + threadIdx.x; k < n;
       k += static_cast<std::int64_t>(gridDim.x) * blockDim.x) {
    x[k] = rss::StorageTraits<T>::from_float(input_value(seed, k / cols, col0 + k % cols));
  }
}

/// Device memory on one GPU, freed there.
struct Buffer {
  void* p = nullptr;
  int device = 0;
  Buffer(int dev, std::size_t bytes) : device(dev) {
    BENCH_CUDA(cudaSetDevice(dev));
    BENCH_CUDA(cudaMalloc(&p, std::max<std::size_t>(bytes, 1)));
  }
  Buffer(const Buffer&) = delete;
  Buffer& operator=(const Buffer&) = delete;
  ~Buffer() {
    cudaSetDevice(device);
    cudaFree(p);
  }
};

/// One row's columns of an output: every part (one GPU's columns), in order.
struct Part {
  int device;
  void* y;
  std::int64_t width;
};

/// A variant on the current shape: a call to time on `devices` GPUs, its output's parts and what it launches.
struct Variant {
  std::string name, label, status;  // status: why it cannot run ("" when it can)
  std::function<void()> launch;
  int devices = 1;
  std::vector<Part> parts;
  rss::LaunchList launches;
  std::int64_t logical_bytes = 0;
  double max_rel_err = -1.0;  // < 0: not checked yet
};

cudaError_t sync_streams(int devices) {
  cudaError_t first = cudaSuccess;
  for (int r = 0; r < devices; ++r) {
    cudaSetDevice(r);
    const cudaError_t e = cudaStreamSynchronize(g_streams[static_cast<std::size_t>(r)]);
    if (first == cudaSuccess) first = e;
  }
  return first;
}

/// The current shape, every variant set up (the sharded operators initialised together, one thread per rank).
struct ShapeState {
  Shape shape;
  std::vector<Variant> variants;
  std::vector<std::int64_t> check_rows;
  std::vector<std::vector<double>> reference;  // of each check row
  virtual ~ShapeState() = default;
};

template <class T>
struct TypedShape : ShapeState {
  std::vector<std::int64_t> widths, offsets;
  std::unique_ptr<Buffer> full_x, full_y;
  std::vector<std::unique_ptr<Buffer>> sx, single_ws;
  std::vector<std::unique_ptr<rss::Operator<T>>> single_ops;
  std::vector<std::vector<std::unique_ptr<Buffer>>> ys;                         // per sharded variant, per rank
  std::vector<std::vector<std::unique_ptr<rss::ShardedOperator<T>>>> ops;       // per sharded variant, per rank
  std::vector<std::vector<const rss::ShardedOperator<T>*>> raw;                 // the same, for run_sharded
  std::vector<cudaGraphExec_t> graphs;                                          // nccl_host's, per rank

  explicit TypedShape(const Shape& s) {
    shape = s;
    const int world = g_world;
    const std::int64_t rows = s.rows, cols = s.cols;
    for (int r = 0; r < world; ++r) widths.push_back(cols / world + (r < cols % world ? 1 : 0));
    for (int r = 0; r < world; ++r) offsets.push_back(r == 0 ? 0 : offsets.back() + widths[static_cast<std::size_t>(r - 1)]);
    const std::uint64_t seed = g_options.fixture_seed ^ splitmix64(static_cast<std::uint64_t>(rows * 1000003 + cols));
    full_x = std::make_unique<Buffer>(0, s.bytes());
    full_y = std::make_unique<Buffer>(0, s.bytes());
    fill<T><<<1024, 256>>>(static_cast<T*>(full_x->p), rows, cols, 0, seed);
    BENCH_CUDA(cudaGetLastError());
    for (int r = 0; r < world; ++r) {
      const std::int64_t w = widths[static_cast<std::size_t>(r)];
      sx.push_back(std::make_unique<Buffer>(r, static_cast<std::size_t>(rows * w) * sizeof(T)));
      fill<T><<<1024, 256>>>(static_cast<T*>(sx.back()->p), rows, w, offsets[static_cast<std::size_t>(r)], seed);
      BENCH_CUDA(cudaGetLastError());
      BENCH_CUDA(cudaDeviceSynchronize());
    }
    reference_rows();
    for (const char* strategy : single_strategies) add_single(strategy);
    add_sharded("nccl_host", rss::ShardedPath::nccl_host, rss::DeviceExchange::flags, ", CUDA Graph per GPU");
    add_sharded("nccl_host_eager", rss::ShardedPath::nccl_host, rss::DeviceExchange::flags, ", rss::run_sharded");
    add_sharded("nccl_device", rss::ShardedPath::nccl_device, rss::DeviceExchange::flags, "");
    add_sharded("nccl_device_lsa_barrier", rss::ShardedPath::nccl_device, rss::DeviceExchange::lsa_barrier, "");
    capture_host_graphs();
  }

  ~TypedShape() override {
    sync_streams(g_world);
    for (std::size_t r = 0; r < graphs.size(); ++r) {
      cudaSetDevice(static_cast<int>(r));
      if (graphs[r] != nullptr) cudaGraphExecDestroy(graphs[r]);
    }
    for (auto& per_rank : ops) {  // release() is collective: every rank's from its own thread
      std::vector<std::thread> threads;
      for (std::size_t r = 0; r < per_rank.size(); ++r)
        threads.emplace_back([&per_rank, r] {
          cudaSetDevice(static_cast<int>(r));
          (void)per_rank[r]->release();
        });
      for (auto& t : threads) t.join();
    }
  }

  /// Rows 0, rows/2, rows-1 and up to five more, and their double reference over the whole row.
  void reference_rows() {
    const std::int64_t rows = shape.rows, cols = shape.cols;
    check_rows = {0, rows / 2, rows - 1};
    for (std::uint64_t k = 0; k < 5; ++k)
      check_rows.push_back(static_cast<std::int64_t>(splitmix64(g_options.seed + k) % static_cast<std::uint64_t>(rows)));
    std::sort(check_rows.begin(), check_rows.end());
    check_rows.erase(std::unique(check_rows.begin(), check_rows.end()), check_rows.end());
    std::vector<unsigned char> raw(static_cast<std::size_t>(cols) * sizeof(T));
    for (const std::int64_t row : check_rows) {
      BENCH_CUDA(cudaSetDevice(0));
      BENCH_CUDA(cudaMemcpy(raw.data(), static_cast<T*>(full_x->p) + row * cols, raw.size(), cudaMemcpyDeviceToHost));
      const std::vector<float> in = load(shape.dtype, raw.data(), static_cast<std::size_t>(cols));
      reference.emplace_back(static_cast<std::size_t>(cols));
      const std::vector<double> in64(in.begin(), in.end());
      rss::reference::rms_scaled_softmax_row(in64.data(), reference.back().data(), cols);
    }
  }

  void add_single(const char* strategy_name) {
    Variant v;
    v.name = std::string("single_gpu:") + strategy_name;
    rss::Strategy s = rss::Strategy::automatic;
    for (const rss::Strategy c : rss::all_strategies)
      if (std::string(rss::strategy_name(c)) == strategy_name) s = c;
    BENCH_CUDA(cudaSetDevice(0));
    std::size_t bytes = 0;
    rss::Status st = rss::workspace_bytes<T>(s, shape.rows, shape.cols, &bytes);
    single_ws.push_back(std::make_unique<Buffer>(0, bytes));
    single_ops.push_back(std::make_unique<rss::Operator<T>>());
    rss::Operator<T>* op = single_ops.back().get();
    if (rss::ok(st)) {
      st = op->initialize(s, static_cast<const T*>(full_x->p), static_cast<T*>(full_y->p),
                          rss::Layout::contiguous(shape.rows, shape.cols), single_ws.back()->p, bytes, g_streams[0]);
    }
    if (rss::ok(st)) st = op->describe(&v.launches);
    v.status = rss::ok(st) ? "" : rss::status_message(st);
    v.label = rss::ok(st) ? std::string("ran ") + rss::strategy_name(op->strategy()) : "";
    v.logical_bytes = v.launches.logical_bytes;
    v.launch = [op] { (void)op->run(g_streams[0]); };
    v.parts = {{0, full_y->p, shape.cols}};
    variants.push_back(std::move(v));
  }

  std::string describe(const rss::ShardedOperator<T>& op) const {
    std::ostringstream d;
    d << "path " << rss::sharded_path_name(op.path());
    if (op.path() == rss::ShardedPath::nccl_device) {
      const auto& p = op.device_plan();
      d << ", grid " << p.grid_blocks << ", cluster " << p.config.cluster_size << " x " << p.config.threads << " x "
        << p.config.elems_per_thread << ", exchange " << rss::device_exchange_name(op.device_exchange());
    } else {
      d << ", chunks " << op.host_geometry().chunks << " x " << op.host_geometry().chunk_elems;
    }
    return d.str();
  }

  /// A sharded variant: its own operators (initialised collectively, one thread per rank) and outputs.
  void add_sharded(const char* name, rss::ShardedPath path, rss::DeviceExchange exchange, const char* suffix) {
    const int world = g_world;
    const std::int64_t rows = shape.rows;
    auto& y = ys.emplace_back();
    auto& o = ops.emplace_back();
    auto& r_ops = raw.emplace_back();
    std::vector<rss::Status> status(static_cast<std::size_t>(world), rss::Status::success);
    Variant v;
    v.name = name;
    v.devices = world;
    for (int r = 0; r < world; ++r) {
      const std::int64_t w = widths[static_cast<std::size_t>(r)];
      y.push_back(std::make_unique<Buffer>(r, static_cast<std::size_t>(rows * w) * sizeof(T)));
      o.push_back(std::make_unique<rss::ShardedOperator<T>>());
      o.back()->set_device_exchange(exchange);
      r_ops.push_back(o.back().get());
      v.parts.push_back({r, y.back()->p, w});
    }
    std::vector<std::thread> threads;
    for (int r = 0; r < world; ++r) {
      threads.emplace_back([&, r] {
        const auto i = static_cast<std::size_t>(r);
        cudaSetDevice(r);
        status[i] = o[i]->initialize(g_comms[i], path, static_cast<const T*>(sx[i]->p), static_cast<T*>(y[i]->p),
                                     rss::Layout::contiguous(rows, widths[i]), shape.cols, g_streams[i]);
      });
    }
    for (auto& t : threads) t.join();
    for (const rss::Status s : status)
      if (!rss::ok(s) && v.status.empty()) v.status = std::string("initialize: ") + rss::status_message(s);
    if (v.status.empty()) {
      v.label = describe(*o[0]) + suffix;
      for (int r = 0; r < world; ++r) {  // every rank's share of the logical bytes; kernels are rank 0's
        rss::LaunchList list;
        cudaSetDevice(r);
        if (rss::ok(o[static_cast<std::size_t>(r)]->describe(&list))) v.logical_bytes += list.logical_bytes;
        if (r == 0) v.launches = list;
      }
    }
    // The operators' array, not its vector: `raw` may move the vector when the next variant is added.
    const rss::ShardedOperator<T>* const* ops_of = r_ops.data();
    v.launch = [ops_of, world] { (void)rss::run_sharded(ops_of, g_streams.data(), world); };
    variants.push_back(std::move(v));
  }

  /// nccl_host's call captured once per GPU (every capture ends before any graph is instantiated), then replayed.
  void capture_host_graphs() {
    Variant& v = *std::find_if(variants.begin(), variants.end(), [](const Variant& c) { return c.name == "nccl_host"; });
    if (!v.status.empty()) return;
    const int world = g_world;
    for (int r = 0; r < world; ++r) {
      cudaSetDevice(r);
      BENCH_CUDA(cudaStreamBeginCapture(g_streams[static_cast<std::size_t>(r)], cudaStreamCaptureModeThreadLocal));
    }
    const rss::Status s = rss::run_sharded(raw[0].data(), g_streams.data(), world);
    std::vector<cudaGraph_t> captured(static_cast<std::size_t>(world), nullptr);
    for (int r = 0; r < world; ++r) {
      cudaSetDevice(r);
      BENCH_CUDA(cudaStreamEndCapture(g_streams[static_cast<std::size_t>(r)], &captured[static_cast<std::size_t>(r)]));
    }
    graphs.assign(static_cast<std::size_t>(world), nullptr);
    for (int r = 0; r < world; ++r) {
      cudaSetDevice(r);
      BENCH_CUDA(cudaGraphInstantiate(&graphs[static_cast<std::size_t>(r)], captured[static_cast<std::size_t>(r)], 0));
      cudaGraphDestroy(captured[static_cast<std::size_t>(r)]);
    }
    if (!rss::ok(s)) v.status = rss::status_message(s);
    v.launch = [this, world] {
      for (int r = 0; r < world; ++r) {
        cudaSetDevice(r);
        (void)cudaGraphLaunch(graphs[static_cast<std::size_t>(r)], g_streams[static_cast<std::size_t>(r)]);
      }
    };
  }
};

/// The worst relative error of a variant's output rows against the double reference (its outputs poisoned first).
double check(ShapeState& state, Variant& v) {
  for (const Part& p : v.parts) {
    BENCH_CUDA(cudaSetDevice(p.device));
    // On the part's timing stream (non-blocking: the legacy default stream would not order it before the launch).
    BENCH_CUDA(cudaMemsetAsync(p.y, 0xFF, static_cast<std::size_t>(state.shape.rows * p.width) *
                                              rss::dtype_bytes(state.shape.dtype),
                               g_streams[static_cast<std::size_t>(p.device)]));
  }
  v.launch();
  BENCH_CUDA(sync_streams(v.devices));
  double worst = 0.0;
  const std::size_t eb = static_cast<std::size_t>(rss::dtype_bytes(state.shape.dtype));
  for (std::size_t k = 0; k < state.check_rows.size(); ++k) {
    std::vector<double> row;
    for (const Part& p : v.parts) {
      std::vector<unsigned char> raw(static_cast<std::size_t>(p.width) * eb);
      BENCH_CUDA(cudaSetDevice(p.device));
      if (p.width > 0)
        BENCH_CUDA(cudaMemcpy(raw.data(), static_cast<unsigned char*>(p.y) + state.check_rows[k] * p.width * eb,
                              raw.size(), cudaMemcpyDeviceToHost));
      for (const float f : load(state.shape.dtype, raw.data(), static_cast<std::size_t>(p.width))) row.push_back(f);
    }
    const double e = rss::reference::row_relative_error(row.data(), state.reference[k].data(), state.shape.cols);
    if (!(e <= worst)) worst = e;
  }
  return worst;
}

std::unique_ptr<ShapeState> g_shape;

void run_variant(benchmark::State& st, const Shape& shape, const std::string& name, int round, int position) {
  ShapeState& state = current_shape(g_shape, shape, [&] {
    return with_storage(shape.dtype, [&](auto tag) -> std::unique_ptr<ShapeState> {
      return std::make_unique<TypedShape<typename decltype(tag)::type>>(shape);
    });
  });
  Variant& v = *std::find_if(state.variants.begin(), state.variants.end(), [&](const Variant& c) { return c.name == name; });
  const std::string skip = "," + g_options.extra["--skip"] + ",";
  const std::string why = skip.find("," + name + ",") != std::string::npos ? "skipped (--skip)" : v.status;
  st.counters["world"] = v.devices;
  st.SetLabel(v.label);
  if (!why.empty()) return skip_run(st, why);
  if (v.max_rel_err < 0) v.max_rel_err = check(state, v);
  const Samples m = time_calls(
      st, [&]() -> const char* { v.launch(); return nullptr; }, [&] { return sync_streams(v.devices); });
  launch_counters(st, v.launches, v.logical_bytes, 2 * static_cast<std::int64_t>(shape.bytes()));
  st.counters["max_rel_err"] = v.max_rel_err;
  record_samples(st, m, shape, round, position);
}

std::string names_check(const std::string& list) {
  const std::vector<std::string> known = variant_names();
  for (const std::string& n : split(list, ','))
    if (std::find(known.begin(), known.end(), n) == known.end()) return "names an unknown variant '" + n + "'";
  return "";
}

}  // namespace

int main(int argc, char** argv) {
  Suite suite{sharded_program,
              "rss's rms_scaled_softmax with rows split over the GPUs of one machine (one process,\n"
              "ncclCommInitAll), against the best rss strategy on the whole row on one GPU (Google Benchmark).",
              "",
              {{"--skip", "LIST", "variants not measured, comma list (recorded as skipped)", names_check},
               {"--world", "N", "GPUs to split the columns over, 1 to 8 (default: every GPU, at most 8)",
                [](const std::string& v) {
                  long long n = 0;
                  return integer_error(v, 1, 8, &n);
                }}}};
  suite.variants = [](const Shape&) { return variant_names(); };
  suite.run = run_variant;
  suite.start = [&suite] {
    int gpus = 0;
    BENCH_CUDA(cudaGetDeviceCount(&gpus));
    const std::string asked = g_options.extra["--world"];
    g_world = asked.empty() ? std::min(gpus, 8) : std::stoi(asked);
    if (g_world > gpus) {
      std::fprintf(stderr, "%s: --world=%d but %d GPU(s) are visible\n", program_name, g_world, gpus);
      std::exit(2);
    }
    g_comms.resize(static_cast<std::size_t>(g_world));
    std::vector<int> devices(static_cast<std::size_t>(g_world));
    std::string names;
    for (int i = 0; i < g_world; ++i) {
      devices[static_cast<std::size_t>(i)] = i;
      cudaDeviceProp p{};
      BENCH_CUDA(cudaGetDeviceProperties(&p, i));
      names += (i ? "," : "") + std::string(p.name);
      BENCH_CUDA(cudaSetDevice(i));
      g_streams.emplace_back();
      BENCH_CUDA(cudaStreamCreateWithFlags(&g_streams.back(), cudaStreamNonBlocking));
    }
    const ncclResult_t r = ncclCommInitAll(g_comms.data(), g_world, devices.data());
    if (r != ncclSuccess) {
      std::fprintf(stderr, "%s: ncclCommInitAll over %d GPU(s): %s\n", program_name, g_world, ncclGetErrorString(r));
      std::exit(1);
    }
    int nccl = 0;
    ncclGetVersion(&nccl);
    const char* nvls = std::getenv("NCCL_NVLS_ENABLE");
    suite.devices = g_world;
    suite.context = {{"world", std::to_string(g_world)}, {"gpus", names}, {"nccl", std::to_string(nccl)},
                     {"NCCL_NVLS_ENABLE", nvls != nullptr ? nvls : ""}};
    BENCH_CUDA(cudaSetDevice(0));
  };
  suite.finish = [] {
    g_shape.reset();
    for (ncclComm_t c : g_comms) ncclCommDestroy(c);
    for (std::size_t r = 0; r < g_streams.size(); ++r) {
      cudaSetDevice(static_cast<int>(r));
      cudaStreamDestroy(g_streams[r]);
    }
  };
  return run_suite(suite, argc, argv);
}
