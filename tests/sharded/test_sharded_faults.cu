// Two ranks, one process per GPU (as torchrun starts them): a peer that stops must not hold this rank's GPU
// forever. Four scenarios: the peer skips a run() (its process lives on) or is killed, under each device
// exchange (flags, lsa_barrier). Each scenario has two generations of processes:
//   1. Both ranks initialise nccl_device on one communicator and make one call, checked against the
//      reference. Rank 1 then stops. Rank 0's next run() is accepted, and its stream's synchronisation
//      returns cudaErrorLaunchFailure after the bounded wait (20 s; the check allows 19-60 s). y is left
//      untouched: rank 0 keeps y in managed memory on the host, so the host can still read it after the trap
//      ended the CUDA context. ncclCommAbort then returns.
//   2. The communicator is rebuilt: a fresh process for rank 0 (a device fault ends its process's context,
//      as after any fault) and, for rank 1, the same process after ncclCommAbort and release_after_abort()
//      when it only skipped, a fresh one when it was killed. A fresh ShardedOperator's calls on the new
//      communicator are checked against the reference.
// The test starts itself for each rank (`--worker ROLE RANK EXCHANGE DIR SEED`); processes meet through
// files in DIR: the ncclUniqueId of each generation, and the launcher's and ranks' markers. The launcher
// bounds every wait: a hang is a failure, never a stuck test. Exit code 77 (CTest: skipped) with fewer than
// two GPUs or where nccl_device is not admitted.
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
using Clock = std::chrono::steady_clock;

constexpr int skipped = 77;
constexpr int world = 2;

// ---- Files through which the processes meet. ----

bool write_file(const std::string& path, const void* data, std::size_t bytes) {
  const std::string tmp = path + ".tmp";
  {
    std::ofstream out(tmp, std::ios::binary);
    out.write(static_cast<const char*>(data), static_cast<std::streamsize>(bytes));
    if (!out) return false;
  }
  return std::rename(tmp.c_str(), path.c_str()) == 0;  // readers never see a partial file
}

bool mark(const std::string& path) { return write_file(path, "1", 1); }

/// Waits for a file to exist and hold `bytes` bytes, at most `seconds`.
bool wait_file(const std::string& path, void* data, std::size_t bytes, int seconds) {
  const auto deadline = Clock::now() + std::chrono::seconds(seconds);
  while (Clock::now() < deadline) {
    std::ifstream in(path, std::ios::binary);
    if (in && in.read(static_cast<char*>(data), static_cast<std::streamsize>(bytes))) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  return false;
}

bool wait_mark(const std::string& path, int seconds) {
  char c = 0;
  return wait_file(path, &c, 1, seconds);
}

/// The communicator of one generation: rank 0 writes the id, rank 1 reads it.
ncclComm_t join(const std::string& dir, int generation, int rank) {
  const std::string path = dir + "/id" + std::to_string(generation);
  ncclUniqueId id{};
  if (rank == 0) {
    if (ncclGetUniqueId(&id) != ncclSuccess || !write_file(path, id.internal, sizeof id.internal)) return nullptr;
  } else if (!wait_file(path, id.internal, sizeof id.internal, 60)) {
    std::printf("rank %d: no unique id in %s\n", rank, path.c_str());
    return nullptr;
  }
  ncclComm_t comm = nullptr;
  if (ncclCommInitRank(&comm, world, id, rank) != ncclSuccess) return nullptr;
  return comm;
}

// ---- What a rank does. ----

/// 64 rows of 8193 columns, uneven over the two ranks (4097 + 4096).
Case fault_case() { return {"faults_64x8193", 64, {4097, 4096}}; }

/// Initialises nccl_device on `comm` with the given exchange and makes `calls` checked calls. Returns 77
/// (skipped) when nccl_device is not admitted here, 1 on a failure, 0 otherwise.
int initialise_and_check(ncclComm_t comm, rss::DeviceExchange exchange, std::uint64_t seed, int calls, Rank<float>& k,
                         Report& report) {
  const Case c = fault_case();
  const std::vector<float> global = make_input(c, seed);
  k.prepare(c, global, report);
  if (report.failures != 0) return 1;
  k.op.set_device_exchange(exchange);
  k.init_status = k.op.initialize(comm, rss::ShardedPath::nccl_device, k.x, k.y, k.layout, total(c.widths), k.stream);
  if (k.init_status == rss::Status::unsupported_device || k.init_status == rss::Status::not_admissible) {
    std::printf("rank %d: nccl_device is not admitted here (%s): skipped\n", k.rank, rss::status_message(k.init_status));
    return skipped;
  }
  if (!rss::ok(k.init_status)) {
    report.fail(std::string("initialize: ") + rss::status_message(k.init_status));
    return 1;
  }
  for (int i = 0; i < calls; ++i) {
    const rss::Status s = k.op.run(k.stream);
    if (!rss::ok(s)) report.fail(std::string("run: ") + rss::status_message(s));
  }
  k.verify(c, global, std::string("rank ") + std::to_string(k.rank) + " " + rss::device_exchange_name(exchange), report);
  return report.failures == 0 ? 0 : 1;
}

int finish(int rank, const char* role, const Report& report, int code) {
  std::printf("rank %d (%s): %s\n%s", rank, role, code == 0 ? "passed" : code == skipped ? "skipped" : "FAILED",
              report.text.str().c_str());
  std::fflush(stdout);
  return code;
}

/// Generation 1, rank 0: its peer stops after the first call; its second call must end at the bound.
int faulted_rank(rss::DeviceExchange exchange, const std::string& dir, std::uint64_t seed) {
  Report report;
  if (cudaSetDevice(0) != cudaSuccess) return 2;
  ncclComm_t comm = join(dir, 1, 0);
  if (comm == nullptr) return finish(0, "faulted", report, 2);
  Rank<float> k;
  k.rank = 0;
  k.device = 0;
  k.y_on_host = true;
  const int checked = initialise_and_check(comm, exchange, seed, 1, k, report);
  if (checked != 0) return finish(0, "faulted", report, checked);

  // y as a sentinel the failed call must leave as it is (managed memory on the host: written by the CPU).
  const std::size_t y_elems = static_cast<std::size_t>(k.layout.rows * k.layout.ld_y);
  const std::uint32_t sentinel = 0x7FC0BEEFu;  // a NaN no result produces
  if (cudaDeviceSynchronize() != cudaSuccess) report.fail("synchronize before the sentinel");
  for (std::size_t i = 0; i < y_elems; ++i) std::memcpy(k.y + i, &sentinel, sizeof sentinel);

  if (!wait_mark(dir + "/stopped", 120)) {
    report.fail("rank 1 never stopped");
    return finish(0, "faulted", report, 1);
  }
  const auto start = Clock::now();
  const rss::Status s = k.op.run(k.stream);
  if (!rss::ok(s)) report.fail(std::string("run() without a peer was refused: ") + rss::status_message(s));
  const cudaError_t e = cudaStreamSynchronize(k.stream);
  const double waited = std::chrono::duration<double>(Clock::now() - start).count();
  std::printf("rank 0: run() without its peer: synchronize returned %s after %.1f s (bound %llu s)\n",
              cudaGetErrorName(e), waited, rss::max_wait_ns / 1000000000ull);
  if (e != cudaErrorLaunchFailure) report.fail(std::string("expected cudaErrorLaunchFailure, got ") + cudaGetErrorName(e));
  if (waited < 19.0) report.fail("the wait ended before the bound: a slow peer would be cut short");
  if (waited > 60.0) report.fail("the wait ended long after the bound");

  std::size_t written = 0;
  for (std::size_t i = 0; i < y_elems; ++i) {
    std::uint32_t bits = 0;
    std::memcpy(&bits, k.y + i, sizeof bits);
    written += bits != sentinel ? 1 : 0;
  }
  if (written != 0) report.fail(std::to_string(written) + " elements of y were written by the failed call");

  const ncclResult_t aborted = ncclCommAbort(comm);  // must return; its result in a faulted context is NCCL's
  std::printf("rank 0: ncclCommAbort returned %s; release_after_abort: %s\n", ncclGetErrorString(aborted),
              rss::status_message(k.op.release_after_abort()));
  mark(dir + "/faulted");
  return finish(0, "faulted", report, report.failures == 0 ? 0 : 1);
}

/// A new communicator (generation 2) and a fresh operator: two checked calls, then a collective release.
int rebuilt_rank(int rank, rss::DeviceExchange exchange, const std::string& dir, std::uint64_t seed, Report& report,
                 const char* role) {
  ncclComm_t comm = join(dir, 2, rank);
  if (comm == nullptr) {
    report.fail("the new communicator was not built");
    return finish(rank, role, report, 1);
  }
  int code = 0;
  {
    Rank<float> k;
    k.rank = rank;
    k.device = rank;
    code = initialise_and_check(comm, exchange, seed ^ 0x5bd1e995u, 2, k, report);
    const rss::Status r = k.op.release();
    if (!rss::ok(r)) report.fail(std::string("release: ") + rss::status_message(r));
  }
  if (ncclCommDestroy(comm) != ncclSuccess) report.fail("ncclCommDestroy of the new communicator");
  return finish(rank, role, report, code != 0 ? code : report.failures == 0 ? 0 : 1);
}

/// Generation 1, rank 1: one checked call, then it stops: skips the next call (and, once rank 0 has seen its
/// failure, aborts its communicator and joins generation 2 in this process) or is killed.
int stopping_rank(bool killed, rss::DeviceExchange exchange, const std::string& dir, std::uint64_t seed) {
  Report report;
  if (cudaSetDevice(1) != cudaSuccess) return 2;
  ncclComm_t comm = join(dir, 1, 1);
  if (comm == nullptr) return finish(1, "stopping", report, 2);
  int code = 0;
  {
    Rank<float> k;
    k.rank = 1;
    k.device = 1;
    code = initialise_and_check(comm, exchange, seed, 1, k, report);
    if (code != 0) return finish(1, "stopping", report, code);
    if (killed) {
      std::fflush(stdout);
      raise(SIGKILL);  // dies as a crashed process does: no NCCL or CUDA teardown; the launcher marks "stopped"
    }
    mark(dir + "/stopped");  // the skipped call: rank 0 now runs alone
    if (!wait_mark(dir + "/faulted", 150)) report.fail("rank 0 never reported its failed call");
    const ncclResult_t aborted = ncclCommAbort(comm);
    if (aborted != ncclSuccess) report.fail(std::string("ncclCommAbort: ") + ncclGetErrorString(aborted));
    const rss::Status released = k.op.release_after_abort();
    if (!rss::ok(released)) report.fail(std::string("release_after_abort: ") + rss::status_message(released));
    if (k.op.ready()) report.fail("the operator is still ready after release_after_abort");
  }
  if (report.failures != 0) return finish(1, "stopping", report, 1);
  return rebuilt_rank(1, exchange, dir, seed, report, "stopped, rebuilt in its process");
}

int worker(const std::string& role, int rank, rss::DeviceExchange exchange, const std::string& dir, std::uint64_t seed) {
  int gpus = 0;
  if (cudaGetDeviceCount(&gpus) != cudaSuccess || gpus < world) {
    std::printf("rank %d: %d GPUs for %d ranks: skipped\n", rank, gpus, world);
    return skipped;
  }
  if (role == "faulted") return faulted_rank(exchange, dir, seed);
  if (role == "skipping") return stopping_rank(false, exchange, dir, seed);
  if (role == "killed") return stopping_rank(true, exchange, dir, seed);
  if (role == "fresh") {
    Report report;
    if (cudaSetDevice(rank) != cudaSuccess) return 2;
    return rebuilt_rank(rank, exchange, dir, seed, report, "fresh process");
  }
  return 2;
}

// ---- The launcher. ----

struct Process {
  pid_t pid = -1;
  int status = 0;
  bool ended = false;
};

Process spawn(const char* self, const std::string& role, int rank, const std::string& exchange, const std::string& dir,
              const std::string& seed) {
  const std::string r = std::to_string(rank);
  char* args[] = {const_cast<char*>(self),          const_cast<char*>("--worker"),       const_cast<char*>(role.c_str()),
                  const_cast<char*>(r.c_str()),     const_cast<char*>(exchange.c_str()), const_cast<char*>(dir.c_str()),
                  const_cast<char*>(seed.c_str()), nullptr};
  Process p;
  if (posix_spawn(&p.pid, "/proc/self/exe", nullptr, nullptr, args, environ) != 0) p.pid = -1;
  return p;
}

/// Waits for p to end, until `deadline`; kills it past the deadline. Returns whether it ended by itself.
bool reap(Process& p, Clock::time_point deadline) {
  while (!p.ended && p.pid > 0) {
    if (waitpid(p.pid, &p.status, WNOHANG) == p.pid) {
      p.ended = true;
      break;
    }
    if (Clock::now() > deadline) {
      kill(p.pid, SIGKILL);
      waitpid(p.pid, &p.status, 0);
      return false;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  return p.ended;
}

int exit_code(const Process& p) { return WIFEXITED(p.status) ? WEXITSTATUS(p.status) : 128 + (WIFSIGNALED(p.status) ? WTERMSIG(p.status) : 0); }

/// One scenario; returns 0 (passed), 77 (skipped) or 1.
int scenario(const char* self, bool killed, const std::string& exchange, const std::string& seed) {
  char dir_template[] = "/tmp/rss-faults-XXXXXX";
  if (mkdtemp(dir_template) == nullptr) return 1;
  const std::string dir = dir_template;
  const std::string name = std::string(killed ? "peer killed" : "peer skips a call") + ", " + exchange;
  std::printf("--- %s\n", name.c_str());
  std::fflush(stdout);
  const auto deadline = Clock::now() + std::chrono::seconds(200);
  int result = 0;
  const auto outcome = [&](Process& p, const char* who, int want) {
    if (!reap(p, deadline)) {
      std::printf("%s did not finish in time (killed)\n", who);
      result = 1;
    } else if (exit_code(p) == skipped) {
      result = result == 0 ? skipped : result;
    } else if (exit_code(p) != want) {
      std::printf("%s ended with %d, expected %d\n", who, exit_code(p), want);
      result = 1;
    }
  };

  Process faulted = spawn(self, "faulted", 0, exchange, dir, seed);
  Process stopping = spawn(self, killed ? "killed" : "skipping", 1, exchange, dir, seed);
  if (killed) {
    outcome(stopping, "rank 1 (killed)", 128 + SIGKILL);
    mark(dir + "/stopped");
  }
  outcome(faulted, "rank 0 (faulted)", 0);
  if (result == 0) {  // generation 2: rank 0 in a fresh process; rank 1 too if it was killed
    Process fresh0 = spawn(self, "fresh", 0, exchange, dir, seed);
    Process fresh1;
    if (killed) fresh1 = spawn(self, "fresh", 1, exchange, dir, seed);
    outcome(fresh0, "rank 0 (rebuilt)", 0);
    outcome(killed ? fresh1 : stopping, killed ? "rank 1 (rebuilt)" : "rank 1 (skipped, rebuilt)", 0);
  } else {
    if (!stopping.ended && stopping.pid > 0) {
      kill(stopping.pid, SIGKILL);
      waitpid(stopping.pid, nullptr, 0);
    }
  }
  for (const char* f : {"id1", "id2", "stopped", "faulted"}) std::remove((dir + "/" + f).c_str());
  rmdir(dir.c_str());
  std::printf("--- %s: %s\n", name.c_str(), result == 0 ? "passed" : result == skipped ? "skipped" : "FAILED");
  std::fflush(stdout);
  return result;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc == 7 && std::strcmp(argv[1], "--worker") == 0) {
    const std::string exchange = argv[4];
    return worker(argv[2], std::atoi(argv[3]),
                  exchange == "lsa_barrier" ? rss::DeviceExchange::lsa_barrier : rss::DeviceExchange::flags, argv[5],
                  std::strtoull(argv[6], nullptr, 10));
  }
  const char* seed_env = std::getenv("RSS_SHARDED_SEED");  // reproduces a failing run
  const std::string seed = seed_env != nullptr ? seed_env : std::to_string(fresh_seed());
  std::printf("seed %s (RSS_SHARDED_SEED reproduces it)\n", seed.c_str());
  int result = 0;
  for (const bool killed : {false, true}) {
    for (const char* exchange : {"flags", "lsa_barrier"}) {
      const int r = scenario(argv[0], killed, exchange, seed);
      if (r == skipped) {  // this machine cannot run any of them (fewer than two GPUs, nccl_device not admitted)
        std::printf("sharded faults: skipped\n");
        return result == 0 ? skipped : result;
      }
      if (r != 0) result = 1;
    }
  }
  std::printf("sharded faults: %s\n", result == 0 ? "passed" : result == skipped ? "skipped" : "FAILED");
  return result;
}
