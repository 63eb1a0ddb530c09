// One process per GPU, as torchrun launches them, without MPI: the test starts itself once per rank
// (`--worker RANK WORLD FILE SEED`); rank 0 writes the ncclUniqueId to FILE, the others read it from there.
// Each worker runs the shared cases on its own GPU (run() on its own thread, a CUDA Graph of run()),
// and one disagreement; the launcher fails when any worker fails or all do not finish in time.
// Exit code 77 (CTest: skipped) when there are fewer GPUs than ranks.
#include <cuda_runtime.h>
#include <nccl.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <string>
#include <thread>
#include <vector>

#include "sharded_cases.cuh"

extern char** environ;

namespace {

using namespace sharded_test;

constexpr int skipped = 77;

bool write_id(const std::string& path, const ncclUniqueId& id) {
  const std::string tmp = path + ".tmp";
  {
    std::ofstream out(tmp, std::ios::binary);
    out.write(id.internal, sizeof id.internal);
    if (!out) return false;
  }
  return std::rename(tmp.c_str(), path.c_str()) == 0;  // readers never see a partial file
}

bool read_id(const std::string& path, ncclUniqueId* id) {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
  while (std::chrono::steady_clock::now() < deadline) {
    std::ifstream in(path, std::ios::binary);
    if (in && in.read(id->internal, sizeof id->internal)) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  return false;
}

template <class T>
void run_case(ncclComm_t comm, int rank, std::uint64_t run_seed, const Case& c, const PathRun& run, bool graph,
              Report& report) {
  const rss::ShardedPath path = run.path;
  // The same input on every rank: the launcher's fresh seed, mixed with the case.
  const std::uint64_t seed = run_seed ^ (0x9e3779b97f4a7c15ull * static_cast<std::uint64_t>(c.rows * 131 + total(c.widths)));
  const std::vector<float> global = make_input(c, seed);
  Rank<T> k;
  k.rank = rank;
  k.device = rank;
  k.prepare(c, global, report);
  const std::string label = c.name + " " + type_name<T>() + " " + run.name() + (graph ? " graph" : "") +
                            " seed " + std::to_string(run_seed);
  k.op.set_device_exchange(run.exchange);
  k.init_status = k.op.initialize(comm, path, k.x, k.y, k.layout, total(c.widths), k.stream);
  const rss::Status expected = expected_init(c, path);
  if (k.init_status != expected) {
    report.fail(label + ": initialize: " + rss::status_message(k.init_status) + " (expected " +
                rss::status_message(expected) + ")");
  }
  if (!rss::ok(k.init_status)) return;
  if (!graph) {
    for (int i = 0; i < (c.in_place ? 1 : 2); ++i) {  // in place, a second call would change the input
      const rss::Status s = k.op.run(k.stream);
      if (!rss::ok(s)) report.fail(label + ": run: " + rss::status_message(s));
    }
  } else {
    cudaGraph_t g = nullptr;
    cudaGraphExec_t exec = nullptr;
    cudaStreamBeginCapture(k.stream, cudaStreamCaptureModeThreadLocal);
    const rss::Status s = k.op.run(k.stream);
    const cudaError_t e = cudaStreamEndCapture(k.stream, &g);
    if (!rss::ok(s) || e != cudaSuccess || cudaGraphInstantiate(&exec, g, 0) != cudaSuccess) {
      report.fail(label + ": capture: " + rss::status_message(s) + " / " + cudaGetErrorString(e));
    } else {
      for (int i = 0; i < (c.in_place ? 1 : 3); ++i) cudaGraphLaunch(exec, k.stream);
    }
    cudaStreamSynchronize(k.stream);
    if (exec != nullptr) cudaGraphExecDestroy(exec);
    if (g != nullptr) cudaGraphDestroy(g);
  }
  k.verify(c, global, label, report);
  const rss::Status r = k.op.release();
  if (!rss::ok(r)) report.fail(label + ": release: " + rss::status_message(r));
}

int worker(int rank, int world, const std::string& id_file, std::uint64_t seed) {
  int gpus = 0;
  if (cudaGetDeviceCount(&gpus) != cudaSuccess || gpus < world) {
    std::printf("rank %d: %d GPUs for %d ranks: skipped\n", rank, gpus, world);
    return skipped;
  }
  cudaSetDevice(rank);
  ncclUniqueId id{};
  if (rank == 0) {
    if (ncclGetUniqueId(&id) != ncclSuccess || !write_id(id_file, id)) return 2;
  } else if (!read_id(id_file, &id)) {
    std::printf("rank %d: no unique id in %s\n", rank, id_file.c_str());
    return 2;
  }
  ncclComm_t comm = nullptr;
  if (ncclCommInitRank(&comm, world, id, rank) != ncclSuccess) {
    std::printf("rank %d: ncclCommInitRank failed\n", rank);
    return 2;
  }
  int loaded = 0;
  ncclGetVersion(&loaded);
  if (rank == 0) std::printf("NCCL headers %d, library %d\n", NCCL_VERSION_CODE, loaded);
  Report report;
  int runs = 0;
  for (const Case& c : cases(world)) {
    for (const PathRun& p : all_paths) {
      run_case<float>(comm, rank, seed, c, p, false, report);
      run_case<__nv_bfloat16>(comm, rank, seed, c, p, false, report);
      runs += 2;
    }
  }
  for (const Case& c : cases(world)) {
    if (c.name != "llama_32x128256" && c.name != "odd_3x2000") continue;
    for (const PathRun& p : all_paths) {
      run_case<__half>(comm, rank, seed, c, p, false, report);
      run_case<float>(comm, rank, seed, c, p, true, report);
      runs += 2;
    }
  }
  {  // rank 1 holds one row fewer: every rank gets a status
    float* x = nullptr;
    float* y = nullptr;
    const std::int64_t rows = rank == 1 ? 7 : 8;
    cudaMalloc(&x, 8 * 512 * sizeof(float));
    cudaMalloc(&y, 8 * 512 * sizeof(float));
    rss::ShardedOperator<float> op;
    const rss::Status s = op.initialize(comm, rss::ShardedPath::automatic, x, y, rss::Layout::contiguous(rows, 512),
                                        512 * world, nullptr);
    if (rss::ok(s) || op.agreement() != rss::ShardAgreement::rows_differ) {
      report.fail(std::string("rows differ: got ") + rss::status_message(s) + ", " + rss::shard_agreement_name(op.agreement()));
    }
    cudaFree(x);
    cudaFree(y);
    ++runs;
  }
  ncclCommDestroy(comm);
  std::printf("rank %d of %d: %d runs, %d failures\n%s", rank, world, runs, report.failures, report.text.str().c_str());
  return report.failures == 0 ? 0 : 1;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc == 6 && std::strcmp(argv[1], "--worker") == 0) {
    return worker(std::atoi(argv[2]), std::atoi(argv[3]), argv[4], std::strtoull(argv[5], nullptr, 10));
  }

  const char* env = std::getenv("RSS_SHARDED_WORLD");
  const int world = env != nullptr ? std::atoi(env) : 2;
  char dir[] = "/tmp/rss-sharded-XXXXXX";
  if (mkdtemp(dir) == nullptr) return 2;
  const std::string id_file = std::string(dir) + "/nccl_id";
  const char* seed_env = std::getenv("RSS_SHARDED_SEED");  // reproduces a failing run
  const std::string seed = seed_env != nullptr ? seed_env : std::to_string(fresh_seed());
  std::printf("seed %s (RSS_SHARDED_SEED reproduces it)\n", seed.c_str());
  std::fflush(stdout);
  std::vector<pid_t> pids;
  for (int r = 0; r < world; ++r) {
    const std::string rank = std::to_string(r), size = std::to_string(world);
    char* args[] = {argv[0], const_cast<char*>("--worker"), const_cast<char*>(rank.c_str()),
                    const_cast<char*>(size.c_str()), const_cast<char*>(id_file.c_str()),
                    const_cast<char*>(seed.c_str()), nullptr};
    pid_t pid = 0;
    if (posix_spawn(&pid, "/proc/self/exe", nullptr, nullptr, args, environ) != 0) return 2;
    pids.push_back(pid);
  }
  // Wait for every worker, at most 280 s: a hang is a failure, never a stuck test.
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(280);
  std::vector<int> codes(pids.size(), -1);
  std::size_t done = 0;
  while (done < pids.size() && std::chrono::steady_clock::now() < deadline) {
    for (std::size_t i = 0; i < pids.size(); ++i) {
      if (codes[i] != -1) continue;
      int status = 0;
      if (waitpid(pids[i], &status, WNOHANG) == pids[i]) {
        codes[i] = WIFEXITED(status) ? WEXITSTATUS(status) : 128;
        ++done;
      }
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  int result = 0;
  for (std::size_t i = 0; i < pids.size(); ++i) {
    if (codes[i] == -1) {
      kill(pids[i], SIGKILL);
      waitpid(pids[i], nullptr, 0);
      std::printf("rank %zu did not finish in time (killed)\n", i);
      result = 1;
    } else if (codes[i] == skipped) {
      result = result == 0 ? skipped : result;
    } else if (codes[i] != 0) {
      result = 1;
    }
  }
  std::remove(id_file.c_str());
  std::remove((id_file + ".tmp").c_str());
  rmdir(dir);
  std::printf("%d workers: %s\n", world, result == 0 ? "passed" : result == skipped ? "skipped" : "FAILED");
  return result;
}
