// Bench of rows sharded over GPUs: one process driving every GPU of the machine (ncclCommInitAll),
// each shape's columns split over the GPUs (uneven when they do not divide), against the best rss
// strategy on the whole row on one GPU. Main metric: host completion time of a warm call (launch on
// every GPU, then synchronise every GPU), microseconds. A plain timing loop, its own JSON records:
//
//   sharded_bench [--shapes 32x128256,4096x128256,64x131072,1x16777216] [--dtypes fp32,bf16]
//                 [--rounds 5] [--samples 20] [--warmup 5] [--seed N] [--skip variant,...] [--out records.json]
//
// Variants: single_gpu:<strategy> (automatic, cluster_row, megakernel_grid, megakernel_row, local_fusion
// on GPU 0; the report's single_gpu is the fastest), nccl_host (its CUDA Graph replayed on every GPU),
// nccl_host_eager (rss::run_sharded, for reference), nccl_device (one kernel per GPU, flags exchange),
// nccl_device_lsa_barrier (the same kernel exchanging through NCCL's LSA barrier). In every round each
// variant is measured `samples` times, in an order shuffled per round from the recorded seed. Accuracy:
// after its timed calls, each variant's output rows 0, rows/2, rows-1 and up to 5 more are compared with
// the double reference of the whole row (max per-row relative error).
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>
#include <nccl.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <functional>
#include <memory>
#include <random>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "check.hpp"
#include "rss/reference/cpu_reference.hpp"
#include "rss/rss.cuh"
#include "rss/sharded/sharded.cuh"

namespace {

struct Options {
  std::vector<std::pair<std::int64_t, std::int64_t>> shapes = {{32, 128256}, {4096, 128256}, {64, 131072}, {1, 16777216}};
  std::vector<std::string> dtypes = {"fp32", "bf16"};
  int rounds = 5, samples = 20, warmup = 5;
  std::uint64_t seed = 0;
  std::string out = "sharded_records.json";
  std::vector<std::string> skip;  // variants not measured (recorded as skipped)
};

std::vector<std::string> split(const std::string& s, char sep) {
  std::vector<std::string> parts;
  std::stringstream in(s);
  for (std::string p; std::getline(in, p, sep);)
    if (!p.empty()) parts.push_back(p);
  return parts;
}

Options parse(int argc, char** argv) {
  Options o;
  o.seed = static_cast<std::uint64_t>(std::chrono::steady_clock::now().time_since_epoch().count());
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string k = argv[i], v = argv[i + 1];
    if (k == "--shapes") {
      o.shapes.clear();
      for (const auto& s : split(v, ',')) {
        const auto rc = split(s, 'x');
        o.shapes.push_back({std::atoll(rc.at(0).c_str()), std::atoll(rc.at(1).c_str())});
      }
    } else if (k == "--dtypes") {
      o.dtypes = split(v, ',');
    } else if (k == "--rounds") {
      o.rounds = std::atoi(v.c_str());
    } else if (k == "--samples") {
      o.samples = std::atoi(v.c_str());
    } else if (k == "--warmup") {
      o.warmup = std::atoi(v.c_str());
    } else if (k == "--seed") {
      o.seed = std::strtoull(v.c_str(), nullptr, 10);
    } else if (k == "--skip") {
      o.skip = split(v, ',');
    } else if (k == "--out") {
      o.out = v;
    } else {
      std::fprintf(stderr, "unknown option %s\n", k.c_str());
      std::exit(2);
    }
  }
  return o;
}

// Deterministic input from (seed, row, global column): row i is s_i (u + o_i), never zero, the same on
// one GPU and in every shard, generated on the device (a 4096 x 128256 host copy would dominate).
__host__ __device__ inline std::uint64_t mix(std::uint64_t z) {
  z += 0x9e3779b97f4a7c15ull;
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}
__host__ __device__ inline float unit(std::uint64_t h) { return static_cast<float>(h >> 40) * (1.0f / 16777216.0f); }
__host__ __device__ inline float input_value(std::uint64_t seed, std::int64_t row, std::int64_t col) {
  const std::uint64_t r = mix(seed ^ mix(static_cast<std::uint64_t>(row)));
  const float s = 0.25f + 3.75f * unit(r), o = -2.0f + 4.0f * unit(mix(r));
  const float v = s * (-4.0f + 8.0f * unit(mix(r ^ mix(static_cast<std::uint64_t>(col) + 1))) + o);
  return v == 0.0f ? 1e-3f : v;
}

template <class T>
__device__ T store_as(float v) { return rss::StorageTraits<T>::from_float(v); }

template <class T>
__global__ void fill(T* x, std::int64_t rows, std::int64_t cols, std::int64_t ld, std::int64_t col0, std::uint64_t seed) {
  const std::int64_t n = rows * cols;
  for (std::int64_t k = blockIdx.x * static_cast<std::int64_t>(blockDim.x) + threadIdx.x; k < n;
       k += static_cast<std::int64_t>(gridDim.x) * blockDim.x) {
    const std::int64_t i = k / cols, j = k % cols;
    x[i * ld + j] = store_as<T>(input_value(seed, i, col0 + j));
  }
}

inline float host_float(float v) { return v; }
inline float host_float(__nv_bfloat16 v) { return __bfloat162float(v); }
inline float host_float(__half v) { return __half2float(v); }

template <class T>
struct Buffer {
  T* p = nullptr;
  int device = 0;
  Buffer(int dev, std::size_t elems) : device(dev) {
    BENCH_CUDA(cudaSetDevice(dev));
    BENCH_CUDA(cudaMalloc(&p, std::max<std::size_t>(elems, 1) * sizeof(T)));
  }
  ~Buffer() {
    cudaSetDevice(device);
    cudaFree(p);
  }
};

struct Record {
  std::int64_t rows, cols;
  std::string dtype, variant, detail;
  int world;
  std::vector<double> samples_us;
  std::vector<int> round_of_sample;
  double max_rel_err = NAN;
  std::string status = "ok";
};

double percentile(std::vector<double> v, double q) {
  if (v.empty()) return NAN;
  std::sort(v.begin(), v.end());
  const double pos = q * static_cast<double>(v.size() - 1);
  const std::size_t lo = static_cast<std::size_t>(pos);
  const std::size_t hi = std::min(lo + 1, v.size() - 1);
  return v[lo] + (v[hi] - v[lo]) * (pos - static_cast<double>(lo));
}

std::string json_escape(const std::string& s) {
  std::string o;
  for (char c : s) {
    if (c == '"' || c == '\\') o += '\\';
    o += c;
  }
  return o;
}

/// A double with 6 significant digits (std::to_string's fixed 6 decimals read 1e-7 as 0).
std::string sci(double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.6e", v);
  return buf;
}

std::string uuid_of(int device) {
  cudaDeviceProp p{};
  cudaGetDeviceProperties(&p, device);
  char buf[64];
  const unsigned char* u = reinterpret_cast<const unsigned char*>(p.uuid.bytes);
  std::snprintf(buf, sizeof buf, "GPU-%02x%02x%02x%02x-%02x%02x-%02x%02x-%02x%02x-%02x%02x%02x%02x%02x%02x", u[0], u[1],
                u[2], u[3], u[4], u[5], u[6], u[7], u[8], u[9], u[10], u[11], u[12], u[13], u[14], u[15]);
  return buf;
}

/// A variant: a call to time, and a way to read one row of its output (global columns) back.
struct Variant {
  std::string name, detail;
  std::function<void()> launch;                 // launches on every GPU it uses
  std::function<void()> sync;                   // waits for every GPU it uses
  std::function<void(std::int64_t, std::vector<double>*)> read_row;
  bool usable = true;
  std::string status = "ok";
};

template <class T>
void bench_shape(const Options& o, std::int64_t rows, std::int64_t cols, const char* dtype,
                 const std::vector<ncclComm_t>& comms, std::vector<Record>* out) {
  const int world = static_cast<int>(comms.size());
  std::vector<std::int64_t> widths(static_cast<std::size_t>(world), cols / world);
  for (std::int64_t r = 0, rest = cols % world; rest > 0; ++r, --rest) ++widths[static_cast<std::size_t>(r)];
  std::vector<std::int64_t> offsets(static_cast<std::size_t>(world), 0);
  for (int r = 1; r < world; ++r) offsets[static_cast<std::size_t>(r)] = offsets[static_cast<std::size_t>(r - 1)] + widths[static_cast<std::size_t>(r - 1)];
  const std::uint64_t input_seed = o.seed ^ mix(static_cast<std::uint64_t>(rows * 1000003 + cols));

  // Streams, the whole matrix on GPU 0, and every GPU's shard.
  std::vector<cudaStream_t> streams(static_cast<std::size_t>(world));
  for (int r = 0; r < world; ++r) {
    BENCH_CUDA(cudaSetDevice(r));
    BENCH_CUDA(cudaStreamCreateWithFlags(&streams[static_cast<std::size_t>(r)], cudaStreamNonBlocking));
  }
  auto full_x = std::make_unique<Buffer<T>>(0, static_cast<std::size_t>(rows * cols));
  auto full_y = std::make_unique<Buffer<T>>(0, static_cast<std::size_t>(rows * cols));
  BENCH_CUDA(cudaSetDevice(0));
  fill<T><<<1024, 256>>>(full_x->p, rows, cols, cols, 0, input_seed);
  BENCH_CUDA(cudaGetLastError());
  std::vector<std::unique_ptr<Buffer<T>>> sx, sy_host, sy_device, sy_eager, sy_barrier;
  for (int r = 0; r < world; ++r) {
    const std::size_t n = static_cast<std::size_t>(rows * widths[static_cast<std::size_t>(r)]);
    sx.emplace_back(new Buffer<T>(r, n));
    sy_host.emplace_back(new Buffer<T>(r, n));
    sy_device.emplace_back(new Buffer<T>(r, n));
    sy_eager.emplace_back(new Buffer<T>(r, n));
    sy_barrier.emplace_back(new Buffer<T>(r, n));
    fill<T><<<1024, 256>>>(sx.back()->p, rows, widths[static_cast<std::size_t>(r)], widths[static_cast<std::size_t>(r)],
                           offsets[static_cast<std::size_t>(r)], input_seed);
    BENCH_CUDA(cudaGetLastError());
    BENCH_CUDA(cudaDeviceSynchronize());
  }

  const auto sync_all = [&] {
    for (int r = 0; r < world; ++r) {
      cudaSetDevice(r);
      BENCH_CUDA(cudaStreamSynchronize(streams[static_cast<std::size_t>(r)]));
    }
  };
  const auto read_sharded = [&](std::vector<std::unique_ptr<Buffer<T>>>& ys) {
    return [&, rows_ = rows](std::int64_t row, std::vector<double>* v) {
      (void)rows_;
      v->clear();
      for (int r = 0; r < world; ++r) {
        const std::int64_t w = widths[static_cast<std::size_t>(r)];
        std::vector<T> h(static_cast<std::size_t>(w));
        BENCH_CUDA(cudaSetDevice(r));
        if (w > 0) BENCH_CUDA(cudaMemcpy(h.data(), ys[static_cast<std::size_t>(r)]->p + row * w, w * sizeof(T), cudaMemcpyDeviceToHost));
        for (const T& e : h) v->push_back(host_float(e));
      }
    };
  };

  std::vector<Variant> variants;

  // Single GPU candidates on the whole row (GPU 0).
  const rss::Strategy singles[] = {rss::Strategy::automatic, rss::Strategy::cluster_row, rss::Strategy::megakernel_grid,
                                   rss::Strategy::megakernel_row, rss::Strategy::local_fusion};
  std::vector<std::unique_ptr<rss::Operator<T>>> single_ops;
  std::vector<std::unique_ptr<Buffer<unsigned char>>> single_ws;
  for (const rss::Strategy s : singles) {
    Variant v;
    v.name = std::string("single_gpu:") + rss::strategy_name(s);
    BENCH_CUDA(cudaSetDevice(0));
    std::size_t bytes = 0;
    rss::Status st = rss::workspace_bytes<T>(s, rows, cols, &bytes);
    single_ws.emplace_back(new Buffer<unsigned char>(0, bytes));
    single_ops.emplace_back(new rss::Operator<T>());
    rss::Operator<T>* op = single_ops.back().get();
    if (rss::ok(st)) st = op->initialize(s, full_x->p, full_y->p, rss::Layout::contiguous(rows, cols), single_ws.back()->p, bytes, streams[0]);
    if (!rss::ok(st)) {
      v.usable = false;
      v.status = rss::status_message(st);
    } else {
      v.detail = std::string("ran ") + rss::strategy_name(op->strategy());
    }
    v.launch = [op, &streams] { (void)op->run(streams[0]); };
    v.sync = [&streams] {
      cudaSetDevice(0);
      BENCH_CUDA(cudaStreamSynchronize(streams[0]));
    };
    v.read_row = [&, cols_ = cols](std::int64_t row, std::vector<double>* out_row) {
      std::vector<T> h(static_cast<std::size_t>(cols_));
      BENCH_CUDA(cudaSetDevice(0));
      BENCH_CUDA(cudaMemcpy(h.data(), full_y->p + row * cols_, cols_ * sizeof(T), cudaMemcpyDeviceToHost));
      out_row->assign(h.size(), 0.0);
      for (std::size_t k = 0; k < h.size(); ++k) (*out_row)[k] = host_float(h[k]);
    };
    variants.push_back(std::move(v));
  }

  // Sharded operators: initialised from one thread per rank (collective), then run from this thread.
  const auto make_ops = [&](rss::ShardedPath path, std::vector<std::unique_ptr<Buffer<T>>>& ys,
                            std::vector<std::unique_ptr<rss::ShardedOperator<T>>>* ops, std::vector<rss::Status>* st,
                            rss::DeviceExchange exchange = rss::DeviceExchange::flags) {
    ops->clear();
    st->assign(static_cast<std::size_t>(world), rss::Status::success);
    for (int r = 0; r < world; ++r) {
      ops->emplace_back(new rss::ShardedOperator<T>());
      ops->back()->set_device_exchange(exchange);
    }
    std::vector<std::thread> threads;
    for (int r = 0; r < world; ++r) {
      threads.emplace_back([&, r] {
        cudaSetDevice(r);
        (*st)[static_cast<std::size_t>(r)] = (*ops)[static_cast<std::size_t>(r)]->initialize(
            comms[static_cast<std::size_t>(r)], path, sx[static_cast<std::size_t>(r)]->p, ys[static_cast<std::size_t>(r)]->p,
            rss::Layout::contiguous(rows, widths[static_cast<std::size_t>(r)]), cols, streams[static_cast<std::size_t>(r)]);
      });
    }
    for (auto& t : threads) t.join();
  };
  const auto release_ops = [&](std::vector<std::unique_ptr<rss::ShardedOperator<T>>>& ops) {
    std::vector<std::thread> threads;
    for (int r = 0; r < world && r < static_cast<int>(ops.size()); ++r) {
      threads.emplace_back([&, r] {
        cudaSetDevice(r);
        (void)ops[static_cast<std::size_t>(r)]->release();
      });
    }
    for (auto& t : threads) t.join();
  };
  const auto describe = [](const rss::ShardedOperator<T>& op) {
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
  };
  const auto first_failure = [](const std::vector<rss::Status>& st) {
    for (rss::Status s : st)
      if (!rss::ok(s)) return std::string(rss::status_message(s));
    return std::string();
  };

  std::vector<std::unique_ptr<rss::ShardedOperator<T>>> host_ops, device_ops, eager_ops, barrier_ops;
  std::vector<rss::Status> st;
  std::vector<cudaGraphExec_t> graphs(static_cast<std::size_t>(world), nullptr);
  std::vector<const rss::ShardedOperator<T>*> raw;
  {  // nccl_host, captured once per GPU and replayed
    Variant v;
    v.name = "nccl_host";
    make_ops(rss::ShardedPath::nccl_host, sy_host, &host_ops, &st);
    v.status = first_failure(st);
    v.usable = v.status.empty();
    if (v.usable) {
      raw.clear();
      for (auto& p : host_ops) raw.push_back(p.get());
      for (int r = 0; r < world; ++r) {
        cudaSetDevice(r);
        BENCH_CUDA(cudaStreamBeginCapture(streams[static_cast<std::size_t>(r)], cudaStreamCaptureModeThreadLocal));
      }
      const rss::Status s = rss::run_sharded(raw.data(), streams.data(), world);
      std::vector<cudaGraph_t> captured(static_cast<std::size_t>(world), nullptr);
      for (int r = 0; r < world; ++r) {  // every capture ends before any graph is instantiated
        cudaSetDevice(r);
        BENCH_CUDA(cudaStreamEndCapture(streams[static_cast<std::size_t>(r)], &captured[static_cast<std::size_t>(r)]));
      }
      for (int r = 0; r < world; ++r) {
        cudaSetDevice(r);
        BENCH_CUDA(cudaGraphInstantiate(&graphs[static_cast<std::size_t>(r)], captured[static_cast<std::size_t>(r)], 0));
        cudaGraphDestroy(captured[static_cast<std::size_t>(r)]);
      }
      if (!rss::ok(s)) {
        v.usable = false;
        v.status = rss::status_message(s);
      }
      v.detail = describe(*host_ops[0]) + ", CUDA Graph per GPU";
    } else {
      v.status = "initialize: " + v.status;
    }
    v.launch = [&] {
      for (int r = 0; r < world; ++r) {
        cudaSetDevice(r);
        (void)cudaGraphLaunch(graphs[static_cast<std::size_t>(r)], streams[static_cast<std::size_t>(r)]);
      }
    };
    v.sync = sync_all;
    v.read_row = read_sharded(sy_host);
    variants.push_back(std::move(v));
  }
  std::vector<const rss::ShardedOperator<T>*> raw_eager, raw_device, raw_barrier;
  // A variant that calls rss::run_sharded on its own operators (made here, one per GPU), writing into ys.
  const auto add_run_sharded = [&](const char* name, rss::ShardedPath path, std::vector<std::unique_ptr<Buffer<T>>>& ys,
                                   std::vector<std::unique_ptr<rss::ShardedOperator<T>>>* ops,
                                   std::vector<const rss::ShardedOperator<T>*>* raw_ops, rss::DeviceExchange exchange,
                                   const char* detail_suffix) {
    Variant v;
    v.name = name;
    make_ops(path, ys, ops, &st, exchange);
    v.status = first_failure(st);
    v.usable = v.status.empty();
    for (auto& p : *ops) raw_ops->push_back(p.get());
    if (v.usable) v.detail = describe(*(*ops)[0]) + detail_suffix;
    v.launch = [&, raw_ops] { (void)rss::run_sharded(raw_ops->data(), streams.data(), world); };
    v.sync = sync_all;
    v.read_row = read_sharded(ys);
    variants.push_back(std::move(v));
  };
  add_run_sharded("nccl_host_eager", rss::ShardedPath::nccl_host, sy_eager, &eager_ops, &raw_eager,
                  rss::DeviceExchange::flags, ", rss::run_sharded");  // nccl_host without a graph
  add_run_sharded("nccl_device", rss::ShardedPath::nccl_device, sy_device, &device_ops, &raw_device,
                  rss::DeviceExchange::flags, "");
  add_run_sharded("nccl_device_lsa_barrier", rss::ShardedPath::nccl_device, sy_barrier, &barrier_ops, &raw_barrier,
                  rss::DeviceExchange::lsa_barrier, "");  // the LSA barrier exchange instead of flags

  for (Variant& v : variants) {
    if (std::find(o.skip.begin(), o.skip.end(), v.name) != o.skip.end()) {
      v.usable = false;
      v.status = "skipped (--skip)";
    }
  }

  // Measure: rounds x variants (shuffled per round) x samples.
  std::mt19937_64 order_gen(o.seed ^ static_cast<std::uint64_t>(rows * 31 + cols));
  std::vector<Record> recs(variants.size());
  for (std::size_t i = 0; i < variants.size(); ++i) {
    recs[i] = Record{rows, cols, dtype, variants[i].name, variants[i].detail, variants[i].name.rfind("single_gpu", 0) == 0 ? 1 : world};
    recs[i].status = variants[i].usable ? "ok" : variants[i].status;
  }
  for (int round = 0; round < o.rounds; ++round) {
    std::vector<std::size_t> order(variants.size());
    for (std::size_t i = 0; i < order.size(); ++i) order[i] = i;
    std::shuffle(order.begin(), order.end(), order_gen);
    for (const std::size_t i : order) {
      Variant& v = variants[i];
      if (!v.usable) continue;
      for (int w = 0; w < o.warmup; ++w) v.launch();
      v.sync();
      for (int s = 0; s < o.samples; ++s) {
        const auto t0 = std::chrono::steady_clock::now();
        v.launch();
        v.sync();
        const auto t1 = std::chrono::steady_clock::now();
        recs[i].samples_us.push_back(std::chrono::duration<double, std::micro>(t1 - t0).count());
        recs[i].round_of_sample.push_back(round);
      }
    }
  }

  // Accuracy of every variant's last output on a few rows, against the double reference of the row.
  std::vector<std::int64_t> check_rows = {0, rows / 2, rows - 1};
  for (int k = 0; k < 5; ++k) check_rows.push_back(static_cast<std::int64_t>(mix(o.seed + k) % static_cast<std::uint64_t>(rows)));
  std::sort(check_rows.begin(), check_rows.end());
  check_rows.erase(std::unique(check_rows.begin(), check_rows.end()), check_rows.end());
  std::vector<double> ref(static_cast<std::size_t>(cols)), in(static_cast<std::size_t>(cols)), got;
  std::vector<T> stored(static_cast<std::size_t>(cols));
  for (const std::int64_t row : check_rows) {
    BENCH_CUDA(cudaSetDevice(0));
    BENCH_CUDA(cudaMemcpy(stored.data(), full_x->p + row * cols, cols * sizeof(T), cudaMemcpyDeviceToHost));
    for (std::int64_t j = 0; j < cols; ++j) in[static_cast<std::size_t>(j)] = host_float(stored[static_cast<std::size_t>(j)]);
    rss::reference::rms_scaled_softmax_row(in.data(), ref.data(), cols);
    for (std::size_t i = 0; i < variants.size(); ++i) {
      if (!variants[i].usable) continue;
      variants[i].read_row(row, &got);
      const double e = rss::reference::row_relative_error(got.data(), ref.data(), cols);
      if (std::isnan(recs[i].max_rel_err) || !(e <= recs[i].max_rel_err)) recs[i].max_rel_err = e;
    }
  }
  for (auto& r : recs) {
    std::printf("%6lld x %-9lld %s %-28s %10.2f us  err %.3g  %s  [%s]\n", static_cast<long long>(rows),
                static_cast<long long>(cols), dtype, r.variant.c_str(), percentile(r.samples_us, 0.5), r.max_rel_err,
                r.status.c_str(), r.detail.c_str());
    std::fflush(stdout);
    out->push_back(r);
  }

  for (int r = 0; r < world; ++r) {
    if (graphs[static_cast<std::size_t>(r)] != nullptr) {
      cudaSetDevice(r);
      cudaGraphExecDestroy(graphs[static_cast<std::size_t>(r)]);
    }
  }
  release_ops(host_ops);
  release_ops(eager_ops);
  release_ops(device_ops);
  release_ops(barrier_ops);
  for (int r = 0; r < world; ++r) {
    cudaSetDevice(r);
    cudaStreamDestroy(streams[static_cast<std::size_t>(r)]);
  }
}

}  // namespace

int main(int argc, char** argv) {
  rss_bench::program_name = "sharded_bench";
  const Options o = parse(argc, argv);
  int gpus = 0;
  if (cudaGetDeviceCount(&gpus) != cudaSuccess || gpus < 1) {
    std::fprintf(stderr, "sharded_bench: no CUDA device: the sharded suite needs NVIDIA GPUs; nothing was run\n");
    return 2;
  }
  const int world = gpus < 8 ? gpus : 8;
  std::vector<ncclComm_t> comms(static_cast<std::size_t>(world));
  std::vector<int> devices(static_cast<std::size_t>(world));
  for (int i = 0; i < world; ++i) devices[static_cast<std::size_t>(i)] = i;
  if (ncclCommInitAll(comms.data(), world, devices.data()) != ncclSuccess) {
    std::fprintf(stderr, "ncclCommInitAll failed\n");
    return 1;
  }
  std::vector<Record> records;
  for (const auto& shape : o.shapes) {
    for (const auto& dt : o.dtypes) {
      if (dt == "fp32") bench_shape<float>(o, shape.first, shape.second, "fp32", comms, &records);
      else if (dt == "bf16") bench_shape<__nv_bfloat16>(o, shape.first, shape.second, "bf16", comms, &records);
      else if (dt == "fp16") bench_shape<__half>(o, shape.first, shape.second, "fp16", comms, &records);
    }
  }

  // Context and records.
  std::vector<std::string> uuids;
  std::string names;
  for (int i = 0; i < world; ++i) {
    cudaDeviceProp p{};
    cudaGetDeviceProperties(&p, i);
    uuids.push_back(uuid_of(i));
    names += (i ? "," : "") + std::string(p.name);
  }
  int driver = 0, runtime = 0, nccl = 0;
  cudaDriverGetVersion(&driver);
  cudaRuntimeGetVersion(&runtime);
  ncclGetVersion(&nccl);
  std::FILE* f = std::fopen(o.out.c_str(), "w");
  if (f == nullptr) return 1;
  const char* nvls = std::getenv("NCCL_NVLS_ENABLE");
  std::fprintf(f, "{\n  \"context\": {\"tool\": \"sharded_bench\", \"gpus\": \"%s\", \"world\": %d, \"uuids\": [", json_escape(names).c_str(), world);
  for (std::size_t i = 0; i < uuids.size(); ++i) std::fprintf(f, "%s\"%s\"", i ? ", " : "", uuids[i].c_str());
  std::fprintf(f, "], \"driver\": %d, \"runtime\": %d, \"nccl\": %d, \"NCCL_NVLS_ENABLE\": \"%s\", \"seed\": %llu, "
               "\"rounds\": %d, \"samples\": %d, \"warmup\": %d, \"time\": %lld},\n  \"records\": [\n",
               driver, runtime, nccl, nvls ? nvls : "", static_cast<unsigned long long>(o.seed), o.rounds, o.samples,
               o.warmup, static_cast<long long>(std::time(nullptr)));
  for (std::size_t k = 0; k < records.size(); ++k) {
    const Record& r = records[k];
    std::fprintf(f, "    {\"rows\": %lld, \"cols\": %lld, \"dtype\": \"%s\", \"world\": %d, \"variant\": \"%s\", "
                 "\"detail\": \"%s\", \"status\": \"%s\", \"max_rel_err\": %s, \"uuids\": [",
                 static_cast<long long>(r.rows), static_cast<long long>(r.cols), r.dtype.c_str(), r.world,
                 r.variant.c_str(), json_escape(r.detail).c_str(), json_escape(r.status).c_str(),
                 std::isnan(r.max_rel_err) ? "null" : sci(r.max_rel_err).c_str());
    for (int i = 0; i < r.world; ++i) std::fprintf(f, "%s\"%s\"", i ? ", " : "", uuids[static_cast<std::size_t>(i)].c_str());
    std::fprintf(f, "], \"samples_us\": [");
    for (std::size_t s = 0; s < r.samples_us.size(); ++s) std::fprintf(f, "%s%.3f", s ? ", " : "", r.samples_us[s]);
    std::fprintf(f, "], \"round_of_sample\": [");
    for (std::size_t s = 0; s < r.round_of_sample.size(); ++s) std::fprintf(f, "%s%d", s ? ", " : "", r.round_of_sample[s]);
    std::fprintf(f, "]}%s\n", k + 1 < records.size() ? "," : "");
  }
  std::fprintf(f, "  ]\n}\n");
  std::fclose(f);
  for (ncclComm_t c : comms) ncclCommDestroy(c);
  std::printf("wrote %s (%zu records)\n", o.out.c_str(), records.size());
  return 0;
}
