// long_row's bounded wait: with its exchange state corrupted (the arrival count far behind the base the launch
// reads), no round can complete; every block must give up after LeaderExchange::max_wait_ns and fail the launch
// with an error instead of hanging. A trap ends the CUDA context, so this is the only test of its process.
#include <catch2/catch.hpp>

#include <chrono>
#include <cstdint>

#include "rss/rss.cuh"
#include "support/device.cuh"
#include "support/random_input.hpp"

TEST_CASE("a corrupted long_row exchange state fails the launch after the bounded wait, never hangs",
          "[gpu][long_row][bounded_wait]") {
  const rss::Layout layout = rss::Layout::contiguous(1, 1 << 20);
  std::size_t bytes = 0;
  REQUIRE(rss::workspace_bytes<float>(rss::Strategy::long_row, 1, 1, &bytes) == rss::Status::success);
  rss_test::DeviceBuffer x(static_cast<std::size_t>(layout.cols) * sizeof(float)),
      y(static_cast<std::size_t>(layout.cols) * sizeof(float)), workspace(bytes);
  const std::vector<float> host = rss_test::random_rows(1, layout.cols, rss_test::fresh_seed());
  RSS_TEST_CUDA(cudaMemcpy(x.get(), host.data(), x.bytes(), cudaMemcpyHostToDevice));
  rss::Operator<float> op;
  REQUIRE(op.initialize(rss::Strategy::long_row, x.get<const float>(), y.get<float>(), layout, workspace.get(), bytes) ==
          rss::Status::success);
  REQUIRE(op.run() == rss::Status::success);  // a sound run first: the state works
  RSS_TEST_CUDA(cudaDeviceSynchronize());

  rss::LeaderExchangeState* state = nullptr;
  REQUIRE(rss::long_row_exchange_state(workspace.get(), &state) == rss::Status::success);
  const rss::LeaderExchangeState corrupted{0u, 1000000u};  // arrivals far behind the base: no target is reached
  RSS_TEST_CUDA(cudaMemcpy(state, &corrupted, sizeof corrupted, cudaMemcpyHostToDevice));

  const auto start = std::chrono::steady_clock::now();
  REQUIRE(op.run() == rss::Status::success);  // the launch itself is accepted; its blocks wait
  const cudaError_t err = cudaDeviceSynchronize();
  const auto waited = std::chrono::duration_cast<std::chrono::seconds>(std::chrono::steady_clock::now() - start);
  INFO("synchronize: " << cudaGetErrorString(err) << " after " << waited.count() << " s (bound "
                       << rss::LeaderExchange::max_wait_ns / 1000000000ull << " s)");
  CHECK(err != cudaSuccess);
  CHECK(waited.count() >= 19);  // not before the bound: a legitimate slow round is never cut short
  CHECK(waited.count() <= 60);
}
