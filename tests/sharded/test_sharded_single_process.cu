// One process driving every GPU (ncclCommInitAll): each rank's operator is initialised (and released)
// from its own host thread, as initialize() is collective; calls run from this thread through
// rss::run_sharded (grouped collectives), from one thread per rank through run(), and as CUDA Graphs
// captured from rss::run_sharded on every rank's stream.
#include <catch2/catch.hpp>
#include <cuda_runtime.h>
#include <nccl.h>

#include <cstring>
#include <functional>
#include <memory>
#include <thread>
#include <vector>

#include "sharded_cases.cuh"

namespace {

using namespace sharded_test;

int gpu_count() {
  int n = 0;
  if (cudaGetDeviceCount(&n) != cudaSuccess) {
    (void)cudaGetLastError();
    return 0;
  }
  return n;
}

/// One communicator per GPU (at most 8), created once for the whole binary.
struct Comms {
  std::vector<ncclComm_t> comms;
  Comms() {
    const int n = gpu_count() < 8 ? gpu_count() : 8;
    if (n < 1) return;
    comms.resize(static_cast<std::size_t>(n));
    std::vector<int> devices(static_cast<std::size_t>(n));
    for (int i = 0; i < n; ++i) devices[static_cast<std::size_t>(i)] = i;
    if (ncclCommInitAll(comms.data(), n, devices.data()) != ncclSuccess) comms.clear();
    int loaded = 0;
    ncclGetVersion(&loaded);
    std::printf("NCCL headers %d, library %d, %d GPUs\n", NCCL_VERSION_CODE, loaded, n);
  }
  ~Comms() {
    for (ncclComm_t c : comms) ncclCommDestroy(c);
  }
  int world() const { return static_cast<int>(comms.size()); }
};

Comms& comms() {
  static Comms c;
  return c;
}

/// Runs f(rank) on one host thread per rank and waits for all.
void per_rank(int world, const std::function<void(int)>& f) {
  std::vector<std::thread> threads;
  for (int r = 0; r < world; ++r) threads.emplace_back([&, r] { f(r); });
  for (auto& t : threads) t.join();
}

enum class Mode { grouped, threads, graph };

template <class T>
void run_case(const Case& c, const PathRun& run, Mode mode, Report& report) {
  const rss::ShardedPath path = run.path;
  const int world = comms().world();
  const std::uint64_t seed = fresh_seed();
  const std::vector<float> global = make_input(c, seed);
  std::vector<std::unique_ptr<Rank<T>>> ranks;
  std::vector<Report> reports(static_cast<std::size_t>(world));
  for (int r = 0; r < world; ++r) {
    ranks.emplace_back(new Rank<T>());
    ranks.back()->rank = r;
    ranks.back()->device = r;
    ranks.back()->prepare(c, global, reports[static_cast<std::size_t>(r)]);
  }
  const std::string label = c.name + " " + type_name<T>() + " " + run.name() +
                            (mode == Mode::grouped ? " grouped" : mode == Mode::threads ? " threads" : " graph") +
                            " seed " + std::to_string(seed);
  per_rank(world, [&](int r) {
    Rank<T>& k = *ranks[static_cast<std::size_t>(r)];
    cudaSetDevice(k.device);
    k.op.set_device_exchange(run.exchange);
    k.init_status = k.op.initialize(comms().comms[static_cast<std::size_t>(r)], path, k.x, k.y, k.layout,
                                    total(c.widths), k.stream);
  });
  const rss::Status expected = expected_init(c, path);
  bool initialised = true;
  for (auto& k : ranks) {
    if (k->init_status != expected) {
      report.fail(label + ": rank " + std::to_string(k->rank) + " initialize: " + rss::status_message(k->init_status) +
                  " (expected " + rss::status_message(expected) + ")");
    }
    initialised = initialised && rss::ok(k->init_status);
    if (rss::ok(k->init_status) && path == rss::ShardedPath::automatic) {
      const rss::ShardedPath want = c.device_refuses ? rss::ShardedPath::nccl_host : rss::ShardedPath::nccl_device;
      if (k->op.path() != want) report.fail(label + ": automatic chose " + rss::sharded_path_name(k->op.path()));
    }
  }
  const int calls = c.in_place ? 1 : 2;  // in place, a second call would take the softmax of the softmax
  if (initialised) {
    std::vector<const rss::ShardedOperator<T>*> ops;
    std::vector<cudaStream_t> streams;
    for (auto& k : ranks) {
      ops.push_back(&k->op);
      streams.push_back(k->stream);
    }
    if (mode == Mode::grouped) {
      for (int i = 0; i < calls; ++i) {  // twice: the second call reuses barriers, slots and counters
        const rss::Status s = rss::run_sharded(ops.data(), streams.data(), world);
        if (!rss::ok(s)) report.fail(label + ": run_sharded: " + rss::status_message(s));
      }
    } else if (mode == Mode::threads) {
      per_rank(world, [&](int r) {
        for (int i = 0; i < calls; ++i) {
          const rss::Status s = ranks[static_cast<std::size_t>(r)]->op.run(streams[static_cast<std::size_t>(r)]);
          if (!rss::ok(s)) reports[static_cast<std::size_t>(r)].fail(label + ": run: " + rss::status_message(s));
        }
      });
    } else {
      std::vector<cudaGraph_t> graphs(static_cast<std::size_t>(world), nullptr);
      std::vector<cudaGraphExec_t> execs(static_cast<std::size_t>(world), nullptr);
      for (int r = 0; r < world; ++r) {
        cudaSetDevice(r);
        cudaStreamBeginCapture(streams[static_cast<std::size_t>(r)], cudaStreamCaptureModeThreadLocal);
      }
      const rss::Status s = rss::run_sharded(ops.data(), streams.data(), world);
      if (!rss::ok(s)) report.fail(label + ": captured run_sharded: " + rss::status_message(s));
      bool captured = true;
      for (int r = 0; r < world; ++r) {  // every capture ends before any graph is instantiated
        cudaSetDevice(r);
        const cudaError_t e = cudaStreamEndCapture(streams[static_cast<std::size_t>(r)], &graphs[static_cast<std::size_t>(r)]);
        if (e != cudaSuccess) {
          report.fail(label + ": capture failed on rank " + std::to_string(r) + ": " + cudaGetErrorString(e));
          (void)cudaGetLastError();
          captured = false;
        }
      }
      for (int r = 0; r < world && captured; ++r) {
        cudaSetDevice(r);
        const cudaError_t e = cudaGraphInstantiate(&execs[static_cast<std::size_t>(r)], graphs[static_cast<std::size_t>(r)], 0);
        if (e != cudaSuccess) {
          report.fail(label + ": instantiate failed on rank " + std::to_string(r) + ": " + cudaGetErrorString(e));
          (void)cudaGetLastError();
          captured = false;
        }
      }
      for (int i = 0; i < (c.in_place ? 1 : 3) && captured; ++i) {
        for (int r = 0; r < world; ++r) {
          cudaSetDevice(r);
          const cudaError_t e = cudaGraphLaunch(execs[static_cast<std::size_t>(r)], streams[static_cast<std::size_t>(r)]);
          if (e != cudaSuccess) report.fail(label + ": graph launch: " + cudaGetErrorString(e));
        }
      }
      for (int r = 0; r < world; ++r) {
        cudaSetDevice(r);
        cudaStreamSynchronize(streams[static_cast<std::size_t>(r)]);
        if (execs[static_cast<std::size_t>(r)] != nullptr) cudaGraphExecDestroy(execs[static_cast<std::size_t>(r)]);
        if (graphs[static_cast<std::size_t>(r)] != nullptr) cudaGraphDestroy(graphs[static_cast<std::size_t>(r)]);
      }
    }
    per_rank(world, [&](int r) {
      ranks[static_cast<std::size_t>(r)]->verify(c, global, label, reports[static_cast<std::size_t>(r)]);
    });
  }
  per_rank(world, [&](int r) {
    cudaSetDevice(r);
    const rss::Status s = ranks[static_cast<std::size_t>(r)]->op.release();
    if (!rss::ok(s)) reports[static_cast<std::size_t>(r)].fail(label + ": release: " + rss::status_message(s));
  });
  for (auto& r : reports) {
    report.failures += r.failures;
    report.text << r.text.str();
  }
}

template <class T>
void run_all(Mode mode, bool all_cases) {
  if (comms().world() < 1) {
    WARN("no GPU or ncclCommInitAll failed: nothing to test");
    return;
  }
  Report report;
  const std::vector<Case> list = cases(comms().world());
  for (const Case& c : list) {
    if (!all_cases && c.name != "llama_32x128256" && c.name != "odd_3x2000" && c.name != "nan_inf_rows_8x6001") continue;
    for (const PathRun& p : all_paths) run_case<T>(c, p, mode, report);
  }
  INFO(report.text.str());
  CHECK(report.failures == 0);
}

}  // namespace

TEST_CASE("one process, every GPU: each rank matches the reference and the single-GPU result (fp32)", "[sharded]") {
  run_all<float>(Mode::grouped, true);
}
TEST_CASE("one process, every GPU: each rank matches the reference and the single-GPU result (bf16)", "[sharded]") {
  run_all<__nv_bfloat16>(Mode::grouped, true);
}
TEST_CASE("one process, every GPU: each rank matches the reference and the single-GPU result (fp16)", "[sharded]") {
  run_all<__half>(Mode::grouped, true);
}
TEST_CASE("one process, one host thread per rank: run() on each thread", "[sharded]") {
  run_all<float>(Mode::threads, false);
  run_all<__nv_bfloat16>(Mode::threads, false);
}
TEST_CASE("one process: run_sharded captured into one CUDA Graph per GPU and replayed", "[sharded]") {
  run_all<float>(Mode::graph, false);
  run_all<__half>(Mode::graph, false);
}

TEST_CASE("ranks that disagree get a status on every rank, not a hang", "[sharded]") {
  const int world = comms().world();
  if (world < 2) {
    WARN("fewer than 2 GPUs: the disagreement cases need two ranks");
    return;
  }
  struct Bad {
    const char* name;
    std::int64_t rows1, cols_total1, width0, width1;
    rss::ShardedPath path1;
    bool null_x1;
    rss::ShardAgreement why;
  };
  const Bad bads[] = {
      {"rows differ", 31, 1000, 500, 500, rss::ShardedPath::automatic, false, rss::ShardAgreement::rows_differ},
      {"global cols differ", 32, 1001, 500, 500, rss::ShardedPath::automatic, false, rss::ShardAgreement::total_cols_differ},
      {"widths do not add up", 32, 1000, 500, 400, rss::ShardedPath::automatic, false, rss::ShardAgreement::cols_do_not_add_up},
      {"paths differ", 32, 1000, 500, 500, rss::ShardedPath::nccl_host, false, rss::ShardAgreement::path_differs},
      {"rank 1 passes a null x", 32, 1000, 500, 500, rss::ShardedPath::automatic, true, rss::ShardAgreement::local_refusal},
  };
  for (const Bad& b : bads) {
    std::vector<rss::Status> got(static_cast<std::size_t>(world));
    std::vector<rss::ShardAgreement> why(static_cast<std::size_t>(world));
    per_rank(world, [&](int r) {
      cudaSetDevice(r);
      const bool second = r == 1;
      const std::int64_t rows = second ? b.rows1 : 32;
      const std::int64_t width = r == 0 ? b.width0 : b.width1;
      float* x = nullptr;
      float* y = nullptr;
      cudaMalloc(&x, static_cast<std::size_t>(rows * width) * sizeof(float));
      cudaMalloc(&y, static_cast<std::size_t>(rows * width) * sizeof(float));
      cudaMemset(y, 0xFF, static_cast<std::size_t>(rows * width) * sizeof(float));
      rss::ShardedOperator<float> op;
      // Ranks past 1 hold a copy of rank 1's width so that only the named difference is wrong.
      got[static_cast<std::size_t>(r)] =
          op.initialize(comms().comms[static_cast<std::size_t>(r)], second ? b.path1 : rss::ShardedPath::automatic,
                        second && b.null_x1 ? nullptr : x, y, rss::Layout::contiguous(rows, width),
                        second ? b.cols_total1 : 1000 + (world - 2) * b.width1, nullptr);
      why[static_cast<std::size_t>(r)] = op.agreement();
      cudaFree(x);
      cudaFree(y);
    });
    for (int r = 0; r < world; ++r) {
      INFO(b.name << ": rank " << r << " -> " << rss::status_message(got[static_cast<std::size_t>(r)]) << ", "
                  << rss::shard_agreement_name(why[static_cast<std::size_t>(r)]));
      CHECK_FALSE(rss::ok(got[static_cast<std::size_t>(r)]));
      CHECK(why[static_cast<std::size_t>(r)] == b.why);
      if (b.null_x1 && r == 1) CHECK(got[static_cast<std::size_t>(r)] == rss::Status::null_pointer);
    }
  }
}

TEST_CASE("an aborted communicator: release_after_abort() frees the operator locally; a new one works", "[sharded]") {
  const int n = comms().world();
  if (n < 1) {
    WARN("no GPU or ncclCommInitAll failed: nothing to test");
    return;
  }
  std::vector<int> devices(static_cast<std::size_t>(n));
  for (int i = 0; i < n; ++i) devices[static_cast<std::size_t>(i)] = i;
  const Case c{"abort_16x3001", 16, uneven(3001, n)};
  for (const PathRun& p : all_paths) {
    const std::string label = c.name + " " + p.name();
    std::vector<ncclComm_t> first(static_cast<std::size_t>(n)), second(static_cast<std::size_t>(n));
    REQUIRE(ncclCommInitAll(first.data(), n, devices.data()) == ncclSuccess);
    std::vector<std::unique_ptr<Rank<float>>> ranks;
    Report report;
    std::vector<Report> reports(static_cast<std::size_t>(n));
    const std::vector<float> global = make_input(c, fresh_seed());
    for (int r = 0; r < n; ++r) {
      ranks.emplace_back(new Rank<float>());
      ranks.back()->rank = r;
      ranks.back()->device = r;
      ranks.back()->prepare(c, global, reports[static_cast<std::size_t>(r)]);
    }
    per_rank(n, [&](int r) {
      Rank<float>& k = *ranks[static_cast<std::size_t>(r)];
      cudaSetDevice(k.device);
      k.op.set_device_exchange(p.exchange);
      k.init_status = k.op.initialize(first[static_cast<std::size_t>(r)], p.path, k.x, k.y, k.layout, total(c.widths), k.stream);
      if (rss::ok(k.init_status)) (void)k.op.run(k.stream);
      cudaStreamSynchronize(k.stream);
    });
    // As after a peer stopped: every rank aborts its communicator, then releases its operator without peers.
    for (int r = 0; r < n; ++r) {
      Rank<float>& k = *ranks[static_cast<std::size_t>(r)];
      INFO(label << ": rank " << r << " initialize: " << rss::status_message(k.init_status));
      REQUIRE(rss::ok(k.init_status));
      cudaSetDevice(r);
      CHECK(ncclCommAbort(first[static_cast<std::size_t>(r)]) == ncclSuccess);
      CHECK(k.op.release_after_abort() == rss::Status::success);
      CHECK_FALSE(k.op.ready());
      CHECK(k.op.run(k.stream) == rss::Status::invalid_strategy);  // unready: refused, nothing launched
      CHECK(k.op.release() == rss::Status::success);               // nothing left to release
    }
    // A new communicator and the same operators, initialised afresh, give the reference's answer.
    REQUIRE(ncclCommInitAll(second.data(), n, devices.data()) == ncclSuccess);
    per_rank(n, [&](int r) {
      Rank<float>& k = *ranks[static_cast<std::size_t>(r)];
      cudaSetDevice(k.device);
      cudaMemset(k.y, 0xFF, static_cast<std::size_t>(k.layout.rows * k.layout.ld_y) * sizeof(float));
      k.init_status = k.op.initialize(second[static_cast<std::size_t>(r)], p.path, k.x, k.y, k.layout, total(c.widths), k.stream);
      if (rss::ok(k.init_status)) (void)k.op.run(k.stream);
    });
    for (int r = 0; r < n; ++r) {
      if (!rss::ok(ranks[static_cast<std::size_t>(r)]->init_status)) {
        report.fail(label + ": initialize after the abort: " + rss::status_message(ranks[static_cast<std::size_t>(r)]->init_status));
      }
    }
    per_rank(n, [&](int r) {
      Rank<float>& k = *ranks[static_cast<std::size_t>(r)];
      k.verify(c, global, label + " after the abort", reports[static_cast<std::size_t>(r)]);
      const rss::Status s = k.op.release();
      if (!rss::ok(s)) reports[static_cast<std::size_t>(r)].fail(label + ": release: " + rss::status_message(s));
    });
    for (int r = 0; r < n; ++r) ncclCommDestroy(second[static_cast<std::size_t>(r)]);
    for (auto& r : reports) {
      report.failures += r.failures;
      report.text << r.text.str();
    }
    INFO(report.text.str());
    CHECK(report.failures == 0);
  }
}
