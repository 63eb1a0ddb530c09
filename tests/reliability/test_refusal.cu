// Cooperative launches refused at run time. An operator is planned on the whole chip, then run on a
// stream of a green context that holds only a few SMs: the situation of a library whose caller has
// given most of the GPU to other work. The planned cooperative grid no longer fits, so the launch is
// refused; the concrete megakernels must say so and leave y untouched, and automatic must fall back,
// report the strategy that ran, and still give the right answer. Never a hang.
#include <catch2/catch.hpp>
#include <cuda.h>

#include <chrono>
#include <cmath>
#include <cstdint>
#include <vector>

#include "rss/rss.cuh"
#include "support/device.cuh"
#include "support/random_input.hpp"

namespace {

using rss::Status;
using rss::Strategy;

#define RSS_TEST_CU(call)                                     \
  do {                                                        \
    const CUresult rss_test_cu_ = (call);                     \
    const char* rss_test_name_ = nullptr;                     \
    cuGetErrorName(rss_test_cu_, &rss_test_name_);            \
    INFO(#call << ": " << (rss_test_name_ ? rss_test_name_ : "?")); \
    REQUIRE(rss_test_cu_ == CUDA_SUCCESS);                    \
  } while (0)

/// A green context of the current device holding `sm_count` SMs (rounded up as the driver requires),
/// with a stream of its own. While `enter()`ed it is the current context, so runtime calls run in it.
class SmallPartition {
 public:
  explicit SmallPartition(unsigned sm_count) {
    RSS_TEST_CUDA(cudaFree(nullptr));  // the primary context exists before the green one retains it
    int ordinal = 0;
    RSS_TEST_CUDA(cudaGetDevice(&ordinal));
    CUdevice device = 0;
    RSS_TEST_CU(cuDeviceGet(&device, ordinal));
    CUdevResource all{}, part{}, rest{};
    RSS_TEST_CU(cuDeviceGetDevResource(device, &all, CU_DEV_RESOURCE_TYPE_SM));
    unsigned groups = 1;
    RSS_TEST_CU(cuDevSmResourceSplitByCount(&part, &groups, &all, &rest, 0, sm_count));
    REQUIRE(groups == 1);
    sm_count_ = part.sm.smCount;
    CUdevResourceDesc desc = nullptr;
    RSS_TEST_CU(cuDevResourceGenerateDesc(&desc, &part, 1));
    RSS_TEST_CU(cuGreenCtxCreate(&green_, desc, device, CU_GREEN_CTX_DEFAULT_STREAM));
    RSS_TEST_CU(cuCtxFromGreenCtx(&context_, green_));
    RSS_TEST_CU(cuGreenCtxStreamCreate(&stream_, green_, CU_STREAM_NON_BLOCKING, 0));
  }
  SmallPartition(const SmallPartition&) = delete;
  SmallPartition& operator=(const SmallPartition&) = delete;
  ~SmallPartition() {
    if (stream_ != nullptr) cuStreamDestroy(stream_);
    if (green_ != nullptr) cuGreenCtxDestroy(green_);
  }

  void enter() const { RSS_TEST_CU(cuCtxPushCurrent(context_)); }
  void leave() const {
    CUcontext popped = nullptr;
    RSS_TEST_CU(cuCtxPopCurrent(&popped));
  }
  cudaStream_t stream() const { return reinterpret_cast<cudaStream_t>(stream_); }
  unsigned sm_count() const { return sm_count_; }

 private:
  CUgreenCtx green_ = nullptr;
  CUcontext context_ = nullptr;
  CUstream stream_ = nullptr;
  unsigned sm_count_ = 0;
};

__global__ void touch(int* flag) {
  if (threadIdx.x == 0 && blockIdx.x == 0) *flag = 1;
}

/// Whether the driver refuses, in the partition, a cooperative grid of one block per SM of the
/// whole chip. The probe kernel never waits, so a launch that is not refused cannot hang.
bool partition_refuses_full_grid(const SmallPartition& p, int chip_sms) {
  rss_test::DeviceBuffer flag(sizeof(int));
  cudaLaunchConfig_t config{};
  config.gridDim = dim3(static_cast<unsigned>(chip_sms));
  config.blockDim = dim3(1024);
  config.stream = p.stream();
  cudaLaunchAttribute cooperative{};
  cooperative.id = cudaLaunchAttributeCooperative;
  cooperative.val.cooperative = 1;
  config.attrs = &cooperative;
  config.numAttrs = 1;
  p.enter();
  const cudaError_t err = cudaLaunchKernelEx(&config, touch, flag.get<int>());
  (void)cudaGetLastError();
  if (err == cudaSuccess) RSS_TEST_CUDA(cudaStreamSynchronize(p.stream()));
  p.leave();
  INFO("probe launch: " << cudaGetErrorString(err));
  return err == cudaErrorCooperativeLaunchTooLarge;
}

struct Problem {
  std::int64_t rows, cols;
  rss_test::DeviceBuffer x, y, workspace;
  std::vector<float> host_x;
  Problem(std::int64_t r, std::int64_t c, std::size_t workspace_bytes)
      : rows(r), cols(c), x(r * c * sizeof(float)), y(r * c * sizeof(float)), workspace(workspace_bytes),
        host_x(rss_test::random_rows(r, c, rss_test::fresh_seed())) {
    RSS_TEST_CUDA(cudaMemcpy(x.get(), host_x.data(), x.bytes(), cudaMemcpyHostToDevice));
    rss_test::poison(y);
    if (workspace_bytes > 0) RSS_TEST_CUDA(cudaMemset(workspace.get(), 0, workspace_bytes));
  }
  std::vector<float> result() const {
    std::vector<float> out(static_cast<std::size_t>(rows * cols));
    RSS_TEST_CUDA(cudaMemcpy(out.data(), y.get(), y.bytes(), cudaMemcpyDeviceToHost));
    return out;
  }
};

}  // namespace

TEST_CASE("a cooperative launch refused at run time: a status for the megakernels, a fallback for automatic",
          "[gpu][reliability][refusal]") {
  int chip_sms = 0;
  RSS_TEST_CUDA(cudaDeviceGetAttribute(&chip_sms, cudaDevAttrMultiProcessorCount, 0));
  SmallPartition partition(16);
  INFO("green context of " << partition.sm_count() << " SMs out of " << chip_sms);
  REQUIRE(partition.sm_count() < static_cast<unsigned>(chip_sms) / 2);
  // The test's premise: the driver refuses a cooperative grid larger than the partition holds.
  REQUIRE(partition_refuses_full_grid(partition, chip_sms));

  // One row longer than a cluster holds in registers, shorter than long_row's rule: automatic picks megakernel_grid.
  const std::int64_t rows = 1, cols = 1 << 19;
  std::size_t bytes = 0;
  REQUIRE(rss::workspace_bytes<float>(Strategy::automatic, rows, cols, &bytes) == Status::success);

  SECTION("megakernel_grid, megakernel_row and long_row return not_admissible and leave y untouched") {
    for (const Strategy s : {Strategy::megakernel_grid, Strategy::megakernel_row, Strategy::long_row}) {
      INFO(rss::strategy_name(s));
      std::size_t own = 0;  // each strategy's own workspace: automatic's covers long_row and the fallback only
      REQUIRE(rss::workspace_bytes<float>(s, rows, cols, &own) == Status::success);
      Problem p(rows, cols, own);
      rss::Operator<float> op;
      REQUIRE(op.initialize(s, p.x.get<float>(), p.y.get<float>(), rss::Layout::contiguous(rows, cols),
                            p.workspace.get(), own) == Status::success);
      partition.enter();
      const Status status = op.run(partition.stream());
      RSS_TEST_CUDA(cudaStreamSynchronize(partition.stream()));
      partition.leave();
      CHECK(status == Status::not_admissible);
      for (const float v : p.result()) REQUIRE(std::isnan(v));
    }
  }

  SECTION("automatic falls back to local_fusion, reports it, and is correct") {
    Problem p(rows, cols, bytes);
    rss::Operator<float> op;
    REQUIRE(op.initialize(Strategy::automatic, p.x.get<float>(), p.y.get<float>(), rss::Layout::contiguous(rows, cols),
                          p.workspace.get(), bytes) == Status::success);
    REQUIRE(op.strategy() == Strategy::megakernel_grid);  // planned for the whole chip
    Strategy ran = Strategy::automatic;
    partition.enter();
    const Status status = op.run(partition.stream(), &ran);
    RSS_TEST_CUDA(cudaStreamSynchronize(partition.stream()));
    partition.leave();
    REQUIRE(status == Status::success);
    CHECK(ran == rss::fallback_strategy);

    std::vector<double> in(p.host_x.begin(), p.host_x.end()), ref(in.size());
    rss::reference::rms_scaled_softmax(in.data(), ref.data(), rows, cols);
    const std::vector<float> out = p.result();
    const std::vector<double> got(out.begin(), out.end());
    CHECK(rss::reference::row_relative_error(got.data(), ref.data(), cols) <=
          rss::reference::tolerance(rss::DType::fp32));

    // Back on the whole chip the planned megakernel runs again.
    rss_test::poison(p.y);
    REQUIRE(op.run(nullptr, &ran) == Status::success);
    RSS_TEST_CUDA(cudaDeviceSynchronize());
    CHECK(ran == op.strategy());
  }
}

TEST_CASE("automatic's run-time fallback leaves long_row's exchange state intact: the next full-chip run works",
          "[gpu][reliability][refusal]") {
  int chip_sms = 0;
  RSS_TEST_CUDA(cudaDeviceGetAttribute(&chip_sms, cudaDevAttrMultiProcessorCount, 0));
  SmallPartition partition(16);
  REQUIRE(partition_refuses_full_grid(partition, chip_sms));

  // 1 x 2^23 fp32 overflows the chip's shared memory: automatic plans long_row, whose exchange state (a
  // counter and a base that every launch leaves equal) lives in the workspace. The fallback (local_fusion) has
  // a region of its own: it once wrote its row statistics over megakernel_row's counters, and the next
  // megakernel_row run trapped after 20 s. A refused launch must not touch the state either.
  const std::int64_t rows = 1, cols = std::int64_t{1} << 23;
  std::size_t bytes = 0;
  REQUIRE(rss::workspace_bytes<float>(Strategy::automatic, rows, cols, &bytes) == Status::success);
  Problem p(rows, cols, bytes);
  rss::Operator<float> op;
  REQUIRE(op.initialize(Strategy::automatic, p.x.get<float>(), p.y.get<float>(), rss::Layout::contiguous(rows, cols),
                        p.workspace.get(), bytes) == Status::success);
  REQUIRE(op.strategy() == Strategy::long_row);
  std::vector<double> in(p.host_x.begin(), p.host_x.end()), ref(in.size());
  rss::reference::rms_scaled_softmax(in.data(), ref.data(), rows, cols);
  const auto error = [&] {
    const std::vector<float> out = p.result();
    const std::vector<double> got(out.begin(), out.end());
    return rss::reference::row_relative_error(got.data(), ref.data(), cols);
  };

  for (int round = 0; round < 2; ++round) {
    INFO("round " << round);
    Strategy ran = Strategy::automatic;
    partition.enter();
    REQUIRE(op.run(partition.stream(), &ran) == Status::success);
    RSS_TEST_CUDA(cudaStreamSynchronize(partition.stream()));
    partition.leave();
    CHECK(ran == rss::fallback_strategy);
    CHECK(error() <= rss::reference::fp32_tolerance);

    rss_test::poison(p.y);
    const auto start = std::chrono::steady_clock::now();
    REQUIRE(op.run(nullptr, &ran) == Status::success);
    RSS_TEST_CUDA(cudaDeviceSynchronize());  // a corrupted barrier would trap here after 20 s
    CHECK(std::chrono::steady_clock::now() - start < std::chrono::seconds(5));
    CHECK(ran == Strategy::long_row);
    CHECK(error() <= rss::reference::fp32_tolerance);
    rss_test::poison(p.y);
  }
}
