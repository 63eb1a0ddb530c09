// The cooperative megakernels on a real device: thousands of random shapes against the CPU reference
// (a barrier bug shows as a moving error or a hang), row barrier reuse across launches and calls,
// refusals that write nothing, controls that leave the retained path alone, and the plans the planner
// makes on this device for the project's shapes (docs/protocol.md).
//
// Every launch is waited for with a deadline: a kernel that does not finish (blocks that are not all
// co-resident, a barrier that misses an arrival) fails the test with its seed and shape instead of
// hanging it. Reproduce a stress run with RSS_STRESS_SEED=<seed> (and RSS_STRESS_SHAPES=<count>).
#include <catch2/catch.hpp>
#include <cuda_runtime.h>

#include <algorithm>
#include <chrono>
#include <climits>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <iterator>
#include <random>
#include <sstream>
#include <utility>
#include <string>
#include <thread>
#include <vector>

#include "rss/rss.cuh"
#include "support/device.cuh"
#include "support/random_input.hpp"

namespace {

using rss::Status;
using rss::Strategy;

namespace {
/// The megakernel's strategies and its controls, as the configurations a caller passes.
struct Variant {
  const char* name;
  rss::Config config;
};
const Variant kGrid{"megakernel_grid", Strategy::megakernel_grid};
const Variant kRow{"megakernel_row", Strategy::megakernel_row};
const Variant kNoRetention{"control_no_retention",
                           {Strategy::megakernel_grid, {}, rss::MegakernelControl::no_retention}};
const Variant kOrdinaryLaunch{"control_ordinary_launch",
                              {Strategy::megakernel_grid, {}, rss::MegakernelControl::ordinary_launch}};

/// The plan an operator of this config and shape runs (the same planner, the same device).
rss::MegakernelPlan geometry(const Variant& v, std::int64_t rows, std::int64_t cols) {
  rss::MegakernelPlan plan;
  REQUIRE(rss::megakernel_geometry<float>(v.config, rows, cols, &plan) == Status::success);
  return plan;
}
}  // namespace

constexpr auto kHangDeadline = std::chrono::seconds(20);
constexpr std::int64_t kCanary = 64;  // elements past the end of y that must stay poisoned

/// Page-locked host memory: y comes back fast enough to check every call.
template <class T>
class PinnedBuffer {
 public:
  explicit PinnedBuffer(std::int64_t count) : count_(count) {
    RSS_TEST_CUDA(cudaMallocHost(&ptr_, static_cast<std::size_t>(count) * sizeof(T)));
  }
  PinnedBuffer(const PinnedBuffer&) = delete;
  PinnedBuffer& operator=(const PinnedBuffer&) = delete;
  ~PinnedBuffer() {
    if (ptr_ != nullptr) cudaFreeHost(ptr_);
  }
  T* get() const { return ptr_; }
  std::int64_t count() const { return count_; }

 private:
  T* ptr_ = nullptr;
  std::int64_t count_;
};

/// Owns a stream. A blocking one: the plain cudaMemcpy / cudaMemset of inputs and workspaces (legacy
/// default stream) stay ordered before the launches made on it.
class Stream {
 public:
  Stream() { RSS_TEST_CUDA(cudaStreamCreate(&stream_)); }
  Stream(const Stream&) = delete;
  Stream& operator=(const Stream&) = delete;
  ~Stream() {
    if (stream_ != nullptr) cudaStreamDestroy(stream_);
  }
  cudaStream_t get() const { return stream_; }

 private:
  cudaStream_t stream_ = nullptr;
};

/// Waits for `stream` with a deadline. A kernel stuck in a barrier cannot be killed from the host, and
/// freeing device memory would wait on it forever: after reporting the failure (with `what`: seed,
/// shape, strategy) the process exits, which tears the context down. CTest's TIMEOUT is the backstop.
void wait_or_fail(cudaStream_t stream, const std::string& what) {
  const auto deadline = std::chrono::steady_clock::now() + kHangDeadline;
  cudaError_t err = cudaErrorNotReady;
  while ((err = cudaStreamQuery(stream)) == cudaErrorNotReady) {
    if (std::chrono::steady_clock::now() > deadline) {
      std::fprintf(stderr, "HANG: the launch did not finish within %lld s: %s\n",
                   static_cast<long long>(kHangDeadline.count()), what.c_str());
      std::fflush(stderr);
      INFO("HANG: " << what);
      const bool finished_within_deadline = false;
      CHECK(finished_within_deadline);  // printed now, before the process ends
      std::fflush(stdout);
      std::_Exit(EXIT_FAILURE);
    }
    std::this_thread::sleep_for(std::chrono::microseconds(20));
  }
  INFO(what << ": " << cudaGetErrorString(err));
  REQUIRE(err == cudaSuccess);
}

std::string shape_text(std::int64_t rows, std::int64_t cols) {
  return std::to_string(rows) + " x " + std::to_string(cols);
}

/// The launches of one call, in one line (kernel count, grid of the first launch, shared memory, evictions).
std::string launches_text(const rss::LaunchList& list) {
  std::ostringstream s;
  s << list.kernels << (list.kernels == 1 ? " launch" : " launches");
  if (list.size > 0) {
    s << " (first: " << list.items[0].kernel << ", grid " << list.items[0].grid << " x " << list.items[0].block
      << ", " << list.items[0].shared_bytes << " B dynamic shared, " << list.items[0].blocks_per_sm
      << " blocks/SM, " << (list.items[0].cooperative ? "cooperative" : "ordinary") << ")";
  }
  s << ", evicted tiles " << list.evicted_tiles;
  return s.str();
}

std::string plan_text(const rss::MegakernelPlan& p) {
  std::ostringstream s;
  s << p.launch_count << (p.launch_count == 1 ? " launch" : " launches") << " of up to " << p.rows_per_launch
    << " rows; " << p.blocks_per_row << " blocks/row, tile " << p.tile_elems << " elems ("
    << p.dynamic_shared_bytes << " B dynamic shared), " << p.tiles_per_row << " tiles/row, " << p.blocks_per_sm
    << " blocks/SM, " << p.resident_blocks << " resident blocks, grid of first launch " << p.launch(0).grid_blocks
    << ", evicted tiles " << p.evicted_tiles << " (" << p.evicted_tiles_per_row << "/row)";
  return s.str();
}

std::string describe_call(const Variant& v, std::int64_t rows, std::int64_t cols) {
  rss::LaunchList list;
  const Status s = rss::describe_launches<float>(v.config, rows, cols, &list);
  std::string text = std::string(v.name) + " " + shape_text(rows, cols) + ": ";
  return text + (rss::ok(s) ? launches_text(list) : std::string("describe_launches: ") + rss::status_message(s));
}

/// The workspace every megakernel strategy needs on this device (independent of the shape).
std::size_t megakernel_workspace() {
  std::size_t bytes = 0;
  REQUIRE(rss::workspace_bytes<float>(Strategy::megakernel_grid, 1, 1, &bytes) == Status::success);
  return bytes;
}

/// True when the `count` floats at `p` are all poison (0xFF bytes).
bool still_poisoned(const float* p, std::int64_t count) {
  const auto* bytes = reinterpret_cast<const unsigned char*>(p);
  return std::all_of(bytes, bytes + count * static_cast<std::int64_t>(sizeof(float)),
                     [](unsigned char b) { return b == 0xFF; });
}

/// Poisons y (and the canary behind it) on `stream`.
void poison_async(float* y, std::int64_t count, cudaStream_t stream) {
  RSS_TEST_CUDA(cudaMemsetAsync(y, 0xFF, static_cast<std::size_t>(count + kCanary) * sizeof(float), stream));
}

/// Copies y (and the canary behind it) back after the stream finished.
void fetch(const float* y, std::int64_t count, const PinnedBuffer<float>& out, cudaStream_t stream) {
  REQUIRE(out.count() >= count + kCanary);
  RSS_TEST_CUDA(cudaMemcpyAsync(out.get(), y, static_cast<std::size_t>(count + kCanary) * sizeof(float),
                                cudaMemcpyDeviceToHost, stream));
  RSS_TEST_CUDA(cudaStreamSynchronize(stream));
}

std::uint64_t env_u64(const char* name, std::uint64_t fallback) {
  const char* v = std::getenv(name);
  if (v == nullptr || *v == '\0') return fallback;
  return std::strtoull(v, nullptr, 0);
}

/// Device allocation, on host, and reference of one fixed problem (fresh random input).
struct FixedProblem {
  std::int64_t rows, cols, n;
  std::uint64_t seed;
  std::vector<float> x;
  std::vector<double> reference;
  rss_test::DeviceBuffer x_device, y_device;

  FixedProblem(std::int64_t r, std::int64_t c)
      : rows(r), cols(c), n(r * c), seed(rss_test::fresh_seed()), x(rss_test::random_rows(r, c, seed)),
        reference(static_cast<std::size_t>(n)),
        x_device(static_cast<std::size_t>(n) * sizeof(float)),
        y_device(static_cast<std::size_t>(n + kCanary) * sizeof(float)) {
    rss::reference::rms_scaled_softmax(x.data(), reference.data(), rows, cols);
    RSS_TEST_CUDA(cudaMemcpy(x_device.get(), x.data(), x_device.bytes(), cudaMemcpyHostToDevice));
  }
  const float* xd() const { return x_device.get<const float>(); }
  float* yd() const { return y_device.get<float>(); }
};

/// Where the row barrier states of a megakernel workspace lie, and how many there are. Derived from
/// the library's own carving, so the test follows the layout instead of assuming it.
struct BarrierStates {
  rss::RowBarrierState* device = nullptr;
  std::int64_t count = 0;

  explicit BarrierStates(void* workspace) {
    REQUIRE(rss::megakernel_barrier_states(workspace, &device, &count) == Status::success);
  }
  std::vector<rss::RowBarrierState> read() const {
    std::vector<rss::RowBarrierState> states(static_cast<std::size_t>(count));
    RSS_TEST_CUDA(cudaMemcpy(states.data(), device, states.size() * sizeof(rss::RowBarrierState),
                             cudaMemcpyDeviceToHost));
    return states;
  }
  void write(const std::vector<rss::RowBarrierState>& states) const {
    RSS_TEST_CUDA(cudaMemcpy(device, states.data(), states.size() * sizeof(rss::RowBarrierState),
                             cudaMemcpyHostToDevice));
  }
};

// ---------------------------------------------------------------------------------------------------
// Stress: random shapes

/// What a shape exercises on this device, from the launch metadata of megakernel_row.
enum class ShapeKind { one_block_per_row, several_blocks_per_row, several_launches, evicting };

constexpr const char* kind_name(ShapeKind k) {
  switch (k) {
    case ShapeKind::one_block_per_row: return "one block per row";
    case ShapeKind::several_blocks_per_row: return "several blocks per row, one launch";
    case ShapeKind::several_launches: return "several launches";
    case ShapeKind::evicting: return "evicting";
  }
  return "?";
}

ShapeKind classify(std::int64_t rows, std::int64_t cols) {
  rss::LaunchList list;
  const Status s = rss::describe_launches<float>(Strategy::megakernel_row, rows, cols, &list);
  INFO(shape_text(rows, cols) << ": " << rss::status_message(s));
  REQUIRE(s == Status::success);
  REQUIRE(list.size > 0);
  if (list.evicted_tiles > 0) return ShapeKind::evicting;
  if (list.kernels > 1) return ShapeKind::several_launches;
  return list.items[0].grid >= 2 * static_cast<unsigned>(rows) ? ShapeKind::several_blocks_per_row
                                                                 : ShapeKind::one_block_per_row;
}

// Sizes. A single launch holds at most ~29 MiB of fp32 tiles on an H200 (about 7.6 M elements), so
// several launches (rows <= 300, cols <= 300000) and eviction (a row longer than that) need more than
// the 2 M elements the ordinary cases are kept to; those cases are rarer.
constexpr std::int64_t kMaxRows = 300;
constexpr std::int64_t kMaxCols = 300000;
constexpr std::int64_t kModestElements = std::int64_t{2} << 20;
constexpr std::int64_t kMultiLaunchMin = std::int64_t{8} << 20, kMultiLaunchMax = std::int64_t{12} << 20;
constexpr std::int64_t kEvictColsMin = std::int64_t{8} << 20, kEvictColsMax = (std::int64_t{17} << 20) / 2;
constexpr std::int64_t kEvictRowsMax = 3;
constexpr std::int64_t kMaxElements = kEvictRowsMax * kEvictColsMax;   // 25.5 M
constexpr std::int64_t kPoolElements = kMaxElements + (std::int64_t{1} << 20);  // slack for the offset

std::int64_t log_uniform(std::mt19937_64& gen, std::int64_t lo, std::int64_t hi) {
  std::uniform_real_distribution<double> u(std::log(static_cast<double>(lo)), std::log(static_cast<double>(hi) + 1.0));
  return std::clamp(static_cast<std::int64_t>(std::exp(u(gen))), lo, hi);
}
std::int64_t uniform(std::mt19937_64& gen, std::int64_t lo, std::int64_t hi) {
  return std::uniform_int_distribution<std::int64_t>(lo, hi)(gen);
}

struct StressShape {
  std::int64_t rows, cols;
  ShapeKind kind;
};

/// Draws a shape, biased towards several blocks per row and several launches: 70 % aim at several
/// blocks per row in one launch, 13 % at several launches, 2 % at eviction, 15 % anything modest
/// (tiny shapes and one block per row included). An aim is redrawn until the device's plan agrees (bounded).
StressShape draw_shape(std::mt19937_64& gen) {
  const double aim = std::uniform_real_distribution<double>(0.0, 1.0)(gen);
  StressShape s{1, 1, ShapeKind::one_block_per_row};
  for (int attempt = 0; attempt < 20; ++attempt) {
    if (aim < 0.15) {
      s.rows = log_uniform(gen, 1, kMaxRows);
      s.cols = log_uniform(gen, 1, std::min(kMaxCols, kModestElements / s.rows));
      s.kind = classify(s.rows, s.cols);
      return s;
    }
    ShapeKind wanted;
    if (aim < 0.85) {
      wanted = ShapeKind::several_blocks_per_row;
      s.rows = log_uniform(gen, 1, kMaxRows);
      s.cols = log_uniform(gen, 2048, std::min(kMaxCols, kModestElements / s.rows));
    } else if (aim < 0.98) {
      wanted = ShapeKind::several_launches;
      const std::int64_t elements = uniform(gen, kMultiLaunchMin, kMultiLaunchMax);
      s.rows = uniform(gen, (elements + kMaxCols - 1) / kMaxCols, kMaxRows);
      s.cols = elements / s.rows;
    } else {
      wanted = ShapeKind::evicting;
      s.rows = uniform(gen, 1, kEvictRowsMax);
      s.cols = uniform(gen, kEvictColsMin, kEvictColsMax);
    }
    s.kind = classify(s.rows, s.cols);
    if (s.kind == wanted) return s;
  }
  return s;  // the aim was not reachable on this device: keep the last draw, counted under what it is
}

}  // namespace

TEST_CASE("megakernel_row and megakernel_grid match the reference on thousands of random shapes, never hanging",
          "[.][gpu][stress]") {
  const std::uint64_t seed = env_u64("RSS_STRESS_SEED", rss_test::fresh_seed());
  const auto shapes = static_cast<std::int64_t>(env_u64("RSS_STRESS_SHAPES", 1500));
  CAPTURE(seed);
  WARN("megakernel stress: seed " << seed << ", " << shapes
                                  << " shapes (reproduce with RSS_STRESS_SEED=" << seed << ")");
  std::mt19937_64 gen(seed);

  // One input pool, uploaded once; each case reads rows * cols elements from a random 16-byte aligned
  // offset, so inputs differ from case to case without a copy per case.
  const std::vector<float> pool = rss_test::random_rows(kPoolElements / 4096 + 1, 4096, gen());
  rss_test::DeviceBuffer x(pool.size() * sizeof(float));
  RSS_TEST_CUDA(cudaMemcpy(x.get(), pool.data(), x.bytes(), cudaMemcpyHostToDevice));
  rss_test::DeviceBuffer y(static_cast<std::size_t>(kMaxElements + kCanary) * sizeof(float));
  PinnedBuffer<float> out(kMaxElements + kCanary);
  std::vector<double> reference(static_cast<std::size_t>(kMaxElements));
  const std::size_t workspace_bytes = megakernel_workspace();
  rss_test::DeviceBuffer workspace(workspace_bytes);
  const Stream stream;

  const Variant* controls[] = {&kNoRetention, &kOrdinaryLaunch};
  std::int64_t calls[4] = {}, kinds[4] = {}, failures = 0;
  double worst = 0.0;
  const double tolerance = rss::reference::fp32_tolerance;

  // The corners first, whatever the seed draws: 1 x 1, an odd width, two launches, eviction over two launches.
  const std::pair<std::int64_t, std::int64_t> corners[] = {{1, 1}, {3, 7}, {64, 131072}, {2, 8650752}};
  for (std::int64_t c = 0; c < shapes && failures < 10; ++c) {
    StressShape shape{};
    if (c < static_cast<std::int64_t>(std::size(corners))) {
      shape = {corners[c].first, corners[c].second, classify(corners[c].first, corners[c].second)};
    } else {
      shape = draw_shape(gen);
    }
    const std::int64_t n = shape.rows * shape.cols;
    REQUIRE(n <= kMaxElements);
    const std::int64_t offset = 4 * uniform(gen, 0, (kPoolElements - n) / 4);
    const float* xs = x.get<const float>() + offset;
    rss::reference::rms_scaled_softmax(pool.data() + offset, reference.data(), shape.rows, shape.cols);
    ++kinds[static_cast<int>(shape.kind)];

    // Both retained megakernels on every shape, in a random order; a control on about one shape in four.
    std::vector<const Variant*> order{&kRow, &kGrid};
    if (gen() % 2 == 0) std::swap(order[0], order[1]);
    if (gen() % 4 == 0) order.push_back(controls[gen() % 2]);

    for (const Variant* variant : order) {
      const rss::Config& strategy = variant->config;
      const std::string what = "seed " + std::to_string(seed) + ", case " + std::to_string(c) + ", " +
                               kind_name(shape.kind) + ", x offset " + std::to_string(offset) + ", " +
                               describe_call(*variant, shape.rows, shape.cols);
      INFO(what);
      std::size_t needed = 0;
      REQUIRE(rss::workspace_bytes<float>(strategy, shape.rows, shape.cols, &needed) == Status::success);
      REQUIRE(needed <= workspace_bytes);
      poison_async(y.get<float>(), n, stream.get());
      const Status s = rss::rms_scaled_softmax(strategy, xs, y.get<float>(), shape.rows, shape.cols, workspace.get(),
                                               workspace_bytes, stream.get());
      INFO("status: " << rss::status_message(s) << " (" << cudaGetErrorString(rss::last_cuda_error()) << ")");
      REQUIRE(s == Status::success);
      wait_or_fail(stream.get(), what);
      fetch(y.get<const float>(), n, out, stream.get());
      ++calls[variant == &kGrid ? 0 : variant == &kRow ? 1 : variant == &kNoRetention ? 2 : 3];

      const double error = rss::reference::max_row_relative_error(out.get(), reference.data(), shape.rows, shape.cols);
      const bool y_written_only_in_bounds = still_poisoned(out.get() + n, kCanary);
      INFO("max row relative error " << error << " (tolerance " << tolerance << ")");
      CHECK(error <= tolerance);  // also false for NaN: an element left poisoned
      CHECK(y_written_only_in_bounds);
      if (!(error <= tolerance) || !y_written_only_in_bounds) ++failures;
      if (!(error <= worst)) worst = error;
    }
  }
  CHECK(failures == 0);
  WARN("megakernel stress done: seed " << seed << "; calls: megakernel_grid " << calls[0] << ", megakernel_row "
                                       << calls[1] << ", control_no_retention " << calls[2]
                                       << ", control_ordinary_launch " << calls[3] << "; shapes: "
                                       << kinds[0] << " one block per row, " << kinds[1]
                                       << " several blocks per row, " << kinds[2] << " several launches, "
                                       << kinds[3] << " evicting; worst row error " << worst);
  // The draw must have reached what the stress is for on this device (when it is long enough to).
  if (shapes < 500) return;
  CHECK(kinds[static_cast<int>(ShapeKind::several_blocks_per_row)] > shapes / 2);
  CHECK(kinds[static_cast<int>(ShapeKind::several_launches)] > 0);
  CHECK(kinds[static_cast<int>(ShapeKind::evicting)] > 0);
}

namespace {

/// Runs `op` (already initialized on `p`) with a poisoned y and a deadline; returns the worst row error.
double run_checked(const rss::Operator<float>& op, const Variant& variant, const FixedProblem& p,
                   const PinnedBuffer<float>& out, cudaStream_t stream, const std::string& what) {
  poison_async(p.yd(), p.n, stream);
  const Status s = op.run(stream);
  INFO(what << ": " << rss::status_message(s));
  REQUIRE(s == Status::success);
  wait_or_fail(stream, std::string(variant.name) + " " + what);
  fetch(p.yd(), p.n, out, stream);
  CHECK(still_poisoned(out.get() + p.n, kCanary));
  return rss::reference::max_row_relative_error(out.get(), p.reference.data(), p.rows, p.cols);
}

/// Runs one call through the public one-call API with a poisoned y and a deadline; y's bytes come back in `out`.
double call_checked(const Variant& variant, const FixedProblem& p, void* workspace, std::size_t workspace_bytes,
                    const PinnedBuffer<float>& out, cudaStream_t stream) {
  const rss::Config& strategy = variant.config;
  const std::string what = describe_call(variant, p.rows, p.cols) + ", seed " + std::to_string(p.seed);
  INFO(what);
  poison_async(p.yd(), p.n, stream);
  const Status s =
      rss::rms_scaled_softmax(strategy, p.xd(), p.yd(), p.rows, p.cols, workspace, workspace_bytes, stream);
  INFO("status: " << rss::status_message(s));
  REQUIRE(s == Status::success);
  wait_or_fail(stream, what);
  fetch(p.yd(), p.n, out, stream);
  CHECK(still_poisoned(out.get() + p.n, kCanary));
  return rss::reference::max_row_relative_error(out.get(), p.reference.data(), p.rows, p.cols);
}

bool same_bytes(const float* a, const float* b, std::int64_t n) {
  return std::memcmp(a, b, static_cast<std::size_t>(n) * sizeof(float)) == 0;
}

/// Alternates megakernel_row and megakernel_grid on one workspace, prepared once, never re-zeroed.
/// After each row call every barrier count is back at 0 and the generations of the slots the row
/// kernel uses have advanced; a grid call leaves the row barrier states alone. Outputs are checked
/// against the reference and against the strategy's first output (bitwise: the kernels are deterministic).
void check_reuse(std::int64_t rows, std::int64_t cols, int repeats, bool require_several_launches) {
  const FixedProblem p(rows, cols);
  const std::size_t workspace_bytes = megakernel_workspace();
  rss_test::DeviceBuffer workspace(workspace_bytes);
  RSS_TEST_CUDA(cudaMemset(workspace.get(), 0x5A, workspace_bytes));  // initialize must zero what matters
  const Stream stream;
  PinnedBuffer<float> out(p.n + kCanary);
  std::vector<float> first_row(static_cast<std::size_t>(p.n)), first_grid(static_cast<std::size_t>(p.n));

  rss::Operator<float> row, grid;
  REQUIRE(row.initialize(Strategy::megakernel_row, p.xd(), p.yd(), rss::Layout::contiguous(rows, cols), workspace.get(), workspace_bytes,
                         stream.get()) == Status::success);
  REQUIRE(grid.initialize(Strategy::megakernel_grid, p.xd(), p.yd(), rss::Layout::contiguous(rows, cols), workspace.get(), workspace_bytes,
                          stream.get()) == Status::success);
  RSS_TEST_CUDA(cudaStreamSynchronize(stream.get()));
  const std::string where = shape_text(rows, cols) + ", seed " + std::to_string(p.seed);
  const rss::MegakernelPlan row_plan = geometry(kRow, rows, cols);
  INFO(where << "; megakernel_row plan: " << plan_text(row_plan) << "; megakernel_grid plan: "
             << plan_text(geometry(kGrid, rows, cols)));
  if (require_several_launches) REQUIRE(row_plan.launch_count >= 2);

  // The row kernel uses barrier slots [0, rows_per_launch): every launch of the call reuses them.
  const BarrierStates barriers(workspace.get());
  REQUIRE(row_plan.rows_per_launch <= barriers.count);
  const auto used = static_cast<std::size_t>(row_plan.rows_per_launch);
  std::vector<rss::RowBarrierState> before = barriers.read();
  const bool prepared_to_zero = std::all_of(before.begin(), before.end(), [](const rss::RowBarrierState& b) {
    return b.count == 0 && b.generation == 0;
  });
  REQUIRE(prepared_to_zero);

  for (int i = 0; i < repeats; ++i) {
    const bool use_row = i % 2 == 0;
    const Variant& strategy = use_row ? kRow : kGrid;
    const rss::Operator<float>& op = use_row ? row : grid;
    // Every third round runs the call twice back to back before checking.
    if (i % 3 == 2) REQUIRE(op.run(stream.get()) == Status::success);
    const double error = run_checked(op, strategy, p, out, stream.get(), where + ", round " + std::to_string(i));
    INFO(strategy.name << ", round " << i << ", max row relative error " << error);
    CHECK(error <= rss::reference::fp32_tolerance);

    std::vector<float>& first = use_row ? first_row : first_grid;
    if (i < 2) {
      std::memcpy(first.data(), out.get(), first.size() * sizeof(float));
    } else {
      CHECK(same_bytes(out.get(), first.data(), p.n));
    }

    const std::vector<rss::RowBarrierState> after = barriers.read();
    bool counts_back_at_zero = true, used_slots_advanced = true, other_slots_untouched = true;
    for (std::size_t s = 0; s < after.size(); ++s) {
      if (after[s].count != 0) counts_back_at_zero = false;
      if (use_row && s < used) {
        if (after[s].generation == before[s].generation) used_slots_advanced = false;
      } else if (after[s].generation != before[s].generation) {
        other_slots_untouched = false;
      }
    }
    CHECK(counts_back_at_zero);
    CHECK(used_slots_advanced);
    CHECK(other_slots_untouched);  // megakernel_grid never touches them; the row kernel only its own slots
    before = after;
  }
}

}  // namespace

TEST_CASE("the row barrier survives reuse across launches and calls on one workspace without re-zeroing",
          "[gpu][stress][reuse]") {
  SECTION("64 x 131072: two launches per call, every row's barrier slot used by both") {
    check_reuse(64, 131072, 300, true);
  }
  SECTION("3 x 8650752: eviction, one launch per row, every launch reuses slot 0") {
    check_reuse(3, 8650752, 40, true);
  }
  SECTION("37 x 5003: many rows of a few blocks each in one launch") { check_reuse(37, 5003, 100, false); }
}

TEST_CASE("the row barrier needs no reset: it works from any generation, across the unsigned wrap",
          "[gpu][stress][reuse]") {
  const FixedProblem p(8, 131072);
  const std::size_t workspace_bytes = megakernel_workspace();
  rss_test::DeviceBuffer workspace(workspace_bytes);
  const Stream stream;
  PinnedBuffer<float> out(p.n + kCanary);
  rss::Operator<float> row;
  REQUIRE(row.initialize(Strategy::megakernel_row, p.xd(), p.yd(), rss::Layout::contiguous(p.rows, p.cols), workspace.get(), workspace_bytes,
                         stream.get()) == Status::success);
  RSS_TEST_CUDA(cudaStreamSynchronize(stream.get()));
  const rss::MegakernelPlan row_plan = geometry(kRow, p.rows, p.cols);
  INFO("seed " << p.seed << "; plan: " << plan_text(row_plan));
  REQUIRE(row_plan.blocks_per_row >= 2);  // otherwise the barrier has nobody to wait for

  // A state a previous use could have left: count 0, any generation; here 0, 1 or 2 steps before the wrap.
  const BarrierStates barriers(workspace.get());
  std::vector<rss::RowBarrierState> states = barriers.read();
  for (std::size_t s = 0; s < states.size(); ++s) states[s] = {0u, UINT_MAX - static_cast<unsigned>(s % 3)};
  barriers.write(states);
  for (int i = 0; i < 6; ++i) {
    const double error = run_checked(row, kRow, p, out, stream.get(),
                                     "8 x 131072 from a near-wrap generation, round " + std::to_string(i));
    INFO("round " << i << ", max row relative error " << error);
    CHECK(error <= rss::reference::fp32_tolerance);
  }
  const std::vector<rss::RowBarrierState> after = barriers.read();
  for (std::size_t s = 0; s < static_cast<std::size_t>(row_plan.rows_per_launch); ++s) {
    INFO("slot " << s << ": count " << after[s].count << ", generation " << after[s].generation);
    CHECK(after[s].count == 0);
    CHECK(after[s].generation < 64);  // wrapped past zero
  }
}

// ---------------------------------------------------------------------------------------------------
// Refusals

TEST_CASE("a refused megakernel initialization gives its status and writes neither y nor the workspace",
          "[gpu][refusal]") {
  const FixedProblem p(4, 5000);
  const std::size_t bytes = megakernel_workspace();
  rss_test::DeviceBuffer workspace(bytes + 2 * rss::workspace_alignment);
  RSS_TEST_CUDA(cudaMemset(p.yd(), 0x5A, p.y_device.bytes()));
  RSS_TEST_CUDA(cudaMemset(workspace.get(), 0x5A, workspace.bytes()));
  const auto snapshot = [](const rss_test::DeviceBuffer& b) {
    std::vector<unsigned char> v(b.bytes());
    RSS_TEST_CUDA(cudaDeviceSynchronize());
    RSS_TEST_CUDA(cudaMemcpy(v.data(), b.get(), v.size(), cudaMemcpyDeviceToHost));
    return v;
  };
  const auto y_before = snapshot(p.y_device), workspace_before = snapshot(workspace);

  const float* x = p.xd();
  float* y = p.yd();
  void* ws = workspace.get();
  const std::int64_t r = p.rows, c = p.cols;
  for (const Variant* variant : {&kGrid, &kRow, &kNoRetention, &kOrdinaryLaunch}) {
    INFO(variant->name);
    const auto init = [&](const float* in, float* o, std::int64_t rows, std::int64_t cols, void* w, std::size_t b) {
      rss::Operator<float> op;
      const Status s = op.initialize(variant->config, in, o, rss::Layout::contiguous(rows, cols), w, b);
      // A refused object stays refused: it runs nothing and describes nothing.
      rss::LaunchList list;
      CHECK(op.run() == Status::invalid_strategy);
      CHECK(op.describe(&list) == Status::invalid_strategy);
      return s;
    };
    CHECK(init(nullptr, y, r, c, ws, bytes) == Status::null_pointer);
    CHECK(init(x, nullptr, r, c, ws, bytes) == Status::null_pointer);
    CHECK(init(x, y, r, c, nullptr, bytes) == Status::null_pointer);
    CHECK(init(x, y, r, c, ws, bytes - 1) == Status::workspace_too_small);
    CHECK(init(x, y, r, c, ws, 0) == Status::workspace_too_small);
    CHECK(init(x, y, r, c, static_cast<char*>(ws) + 4, bytes) == Status::misaligned_workspace);
    CHECK(init(x, y, -1, c, ws, bytes) == Status::negative_size);
    CHECK(init(x, y, r, -1, ws, bytes) == Status::negative_size);
    CHECK(init(x, y, std::int64_t{1} << 31, std::int64_t{1} << 31, ws, bytes) == Status::size_overflow);
  }
  // A control belongs to megakernel_grid only; an unknown strategy is refused.
  for (const rss::Config invalid : {rss::Config{Strategy::megakernel_row, {}, rss::MegakernelControl::no_retention},
                                    rss::Config{Strategy::local_fusion, {}, rss::MegakernelControl::ordinary_launch},
                                    rss::Config{static_cast<Strategy>(99)}}) {
    rss::Operator<float> op;
    CHECK(op.initialize(invalid, x, y, rss::Layout::contiguous(r, c), ws, bytes) == Status::invalid_strategy);
    CHECK(op.run() == Status::invalid_strategy);
  }
  rss::Operator<float> never_initialized;
  CHECK(never_initialized.run() == Status::invalid_strategy);

  CHECK(snapshot(p.y_device) == y_before);
  CHECK(snapshot(workspace) == workspace_before);
  RSS_TEST_CUDA(cudaGetLastError());
}

TEST_CASE("the planner refuses this device's description without cooperative launch or without occupancy",
          "[gpu][refusal]") {
  rss::DeviceInfo desc{};
  REQUIRE(rss::current_device_info(&desc) == Status::success);
  CHECK(desc.cooperative_launch);  // the real device: every GPU rss targets supports it
  rss::MegakernelRequest request;
  request.rows = 64;
  request.cols = 131072;
  rss::MegakernelPlan untouched;
  untouched.launch_count = 12345;
  rss::MegakernelPlan plan = untouched;

  rss::DeviceInfo no_cooperative = desc;
  no_cooperative.cooperative_launch = false;
  CHECK(rss::plan_megakernel(no_cooperative, request, [](std::size_t) { return 4; }, &plan) ==
        Status::cooperative_unsupported);
  CHECK(plan.launch_count == untouched.launch_count);
  CHECK(rss::plan_megakernel(desc, request, [](std::size_t) { return 0; }, &plan) == Status::not_admissible);
  CHECK(plan.launch_count == untouched.launch_count);
}

// A cooperative launch beyond co-residency at run time (the device has fewer SMs than planned for) is
// tested in tests/reliability/test_refusal.cu, with a green context.

TEST_CASE("selecting a control leaves the retained path unchanged: its output is bitwise identical before and after",
          "[gpu][refusal][controls]") {
  const std::size_t bytes = megakernel_workspace();
  rss_test::DeviceBuffer workspace(bytes);
  const Stream stream;
  // One launch with several blocks per row; two launches; an odd width over a few rows.
  const std::pair<std::int64_t, std::int64_t> shapes[] = {{8, 131072}, {64, 131072}, {5, 300007}};
  for (const auto& shape : shapes) {
    const FixedProblem p(shape.first, shape.second);
    PinnedBuffer<float> out(p.n + kCanary);
    std::vector<float> first(static_cast<std::size_t>(p.n));
    for (const Variant* retained : {&kGrid, &kRow}) {
      INFO(shape_text(p.rows, p.cols) << ", seed " << p.seed << ", " << retained->name);
      const double e1 = call_checked(*retained, p, workspace.get(), bytes, out, stream.get());
      CHECK(e1 <= rss::reference::fp32_tolerance);
      std::memcpy(first.data(), out.get(), first.size() * sizeof(float));
      for (const Variant* control : {&kNoRetention, &kOrdinaryLaunch}) {
        const double e = call_checked(*control, p, workspace.get(), bytes, out, stream.get());
        INFO(control->name << ": max row relative error " << e);
        CHECK(e <= rss::reference::fp32_tolerance);
      }
      const double e2 = call_checked(*retained, p, workspace.get(), bytes, out, stream.get());
      CHECK(e2 <= rss::reference::fp32_tolerance);
      CHECK(same_bytes(out.get(), first.data(), p.n));
    }
  }
}

// ---------------------------------------------------------------------------------------------------
// Plans on this device

TEST_CASE("on this device 64 x 131072 fp32 takes two launches and 1 x 16777216 evicts and is still correct",
          "[gpu][plan]") {
  cudaDeviceProp prop{};
  RSS_TEST_CUDA(cudaGetDeviceProperties(&prop, 0));
  INFO(prop.name << ", " << prop.multiProcessorCount << " SMs, " << prop.sharedMemPerMultiprocessor
                 << " B shared memory per SM");
  const std::size_t bytes = megakernel_workspace();
  rss_test::DeviceBuffer workspace(bytes);
  const Stream stream;

  {
    const FixedProblem p(64, 131072);
    for (const Variant* variant : {&kGrid, &kRow}) {
      const rss::Config& strategy = variant->config;
      INFO(variant->name);
      rss::LaunchList list;
      REQUIRE(rss::describe_launches<float>(strategy, p.rows, p.cols, &list) == Status::success);
      CHECK(list.kernels == 2);  // 32 MiB of tiles against ~29 MiB of shared memory
      CHECK(list.host_launches == 2);
      CHECK(list.evicted_tiles == 0);
      for (int i = 0; i < list.size; ++i) CHECK(list.items[i].cooperative);
      rss::Operator<float> op;
      REQUIRE(op.initialize(strategy, p.xd(), p.yd(), rss::Layout::contiguous(p.rows, p.cols), workspace.get(), bytes, stream.get()) ==
              Status::success);
      const rss::MegakernelPlan plan = geometry(*variant, p.rows, p.cols);
      INFO("plan: " << plan_text(plan));
      CHECK(plan.launch_count == 2);
      CHECK(plan.evicted_tiles == 0);
      PinnedBuffer<float> out(p.n + kCanary);
      CHECK(run_checked(op, *variant, p, out, stream.get(), "64 x 131072, seed " + std::to_string(p.seed)) <=
            rss::reference::fp32_tolerance);
    }
  }
  {
    const FixedProblem p(1, 16777216);  // 64 MiB: more than the chip's shared memory
    PinnedBuffer<float> out(p.n + kCanary);
    for (const Variant* variant : {&kGrid, &kRow}) {
      const rss::Config& strategy = variant->config;
      INFO(variant->name);
      rss::LaunchList list;
      REQUIRE(rss::describe_launches<float>(strategy, p.rows, p.cols, &list) == Status::success);
      CHECK(list.kernels == 1);
      CHECK(list.evicted_tiles > 0);
      rss::Operator<float> op;
      REQUIRE(op.initialize(strategy, p.xd(), p.yd(), rss::Layout::contiguous(p.rows, p.cols), workspace.get(), bytes, stream.get()) ==
              Status::success);
      const rss::MegakernelPlan plan = geometry(*variant, p.rows, p.cols);
      INFO("plan: " << plan_text(plan));
      CHECK(plan.evicted_tiles > 0);
      CHECK(plan.evicted_tiles == list.evicted_tiles);
      const double error =
          run_checked(op, *variant, p, out, stream.get(), "1 x 16777216, seed " + std::to_string(p.seed));
      INFO("max row relative error " << error);
      CHECK(error <= rss::reference::fp32_tolerance);
    }
  }
}

TEST_CASE("the plans for the project shapes agree with their launch metadata and respect co-residency",
          "[gpu][plan]") {
  // Printed with WARN so that the log carries the plans made on this device.
  const std::pair<std::int64_t, std::int64_t> shapes[] = {
      {1, 131072},  {8, 131072},  {64, 131072},  {32, 128256}, {4096, 4096},  {16384, 8192},
      {4096, 32768}, {1, 1048576}, {1, 4194304}, {1, 16777216}};
  std::int64_t largest = 0;
  for (const auto& s : shapes) largest = std::max(largest, s.first * s.second);
  // Initialization needs real buffers; nothing here is run, so they stay uninitialized.
  rss_test::DeviceBuffer x(static_cast<std::size_t>(largest) * sizeof(float));
  rss_test::DeviceBuffer y(static_cast<std::size_t>(largest) * sizeof(float));
  const std::size_t bytes = megakernel_workspace();
  rss_test::DeviceBuffer workspace(bytes);
  cudaDeviceProp prop{};
  RSS_TEST_CUDA(cudaGetDeviceProperties(&prop, 0));
  std::ostringstream log;
  log << "megakernel plans on " << prop.name << " (" << prop.multiProcessorCount << " SMs), fp32:";

  for (const auto& shape : shapes) {
    for (const Variant* variant : {&kGrid, &kRow, &kNoRetention, &kOrdinaryLaunch}) {
      const rss::Config& strategy = variant->config;
      const std::int64_t rows = shape.first, cols = shape.second;
      INFO(variant->name << " " << shape_text(rows, cols));
      rss::Operator<float> op;
      REQUIRE(op.initialize(strategy, x.get<const float>(), y.get<float>(), rss::Layout::contiguous(rows, cols), workspace.get(), bytes) ==
              Status::success);
      const rss::MegakernelPlan plan = geometry(*variant, rows, cols);
      rss::LaunchList list, described;
      REQUIRE(op.describe(&list) == Status::success);
      REQUIRE(rss::describe_launches<float>(strategy, rows, cols, &described) == Status::success);
      INFO("plan: " << plan_text(plan));
      log << "\n  " << shape_text(rows, cols) << " " << variant->name << ": " << plan_text(plan);

      const bool ordinary = variant == &kOrdinaryLaunch;
      CHECK(list.kernels == plan.launch_count * (ordinary ? 3 : 1));
      CHECK(described.kernels == list.kernels);
      CHECK(list.evicted_tiles == plan.evicted_tiles);
      CHECK(plan.resident_blocks == plan.blocks_per_sm * prop.multiProcessorCount);
      std::int64_t rows_covered = 0;
      for (std::int64_t i = 0; i < plan.launch_count; ++i) {
        const rss::MegakernelLaunch l = plan.launch(i);
        CHECK(l.first_row == rows_covered);
        rows_covered += l.row_count;
        CHECK(l.grid_blocks <= plan.resident_blocks);  // co-residency: the correctness condition
        const std::int64_t item = ordinary ? 3 * i : i;
        if (item < list.size) {
          CHECK(list.items[item].grid == static_cast<unsigned>(l.grid_blocks));
          CHECK(list.items[item].cooperative == !ordinary);
          CHECK(list.items[item].shared_bytes == (ordinary ? 0 : plan.dynamic_shared_bytes));
        }
      }
      CHECK(rows_covered == rows);
      CHECK(plan.tiles_per_row * plan.tile_elems >= cols);
    }
  }
  WARN(log.str());
}
