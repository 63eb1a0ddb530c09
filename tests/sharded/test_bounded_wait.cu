// The device path's bounded wait on one GPU: a flag word that a peer never writes (its process died, or it
// skipped the call) must fail the launch after max_wait_ns instead of holding the GPU forever; a word that
// carries the row's number is read at once. A trap ends the CUDA context, so this is the only test of its
// process (the two-rank fault tests need two GPUs).
#include <catch2/catch.hpp>
#include <cuda_runtime.h>

#include <chrono>
#include <cstdint>

#include "rss/sharded/device_path.cuh"

namespace {

__global__ void wait_for(const std::uint64_t* word, std::uint32_t seq, std::uint32_t* out) {
  *out = rss::detail::sharded::wait_word(word, seq);
}

#define CHECK_CUDA(call) REQUIRE((call) == cudaSuccess)

}  // namespace

TEST_CASE("a flag word that carries the row's number is read at once; one never written fails the launch after "
          "the bound",
          "[gpu][sharded][bounded_wait]") {
  std::uint64_t* word = nullptr;
  std::uint32_t* out = nullptr;
  CHECK_CUDA(cudaMalloc(&word, sizeof *word));
  CHECK_CUDA(cudaMalloc(&out, sizeof *out));
  const std::uint64_t pushed = rss::detail::sharded::tagged(7u, 0xC0FFEEu);  // row 7's word, as a peer writes it
  CHECK_CUDA(cudaMemcpy(word, &pushed, sizeof pushed, cudaMemcpyHostToDevice));
  wait_for<<<1, 1>>>(word, 7u, out);
  CHECK_CUDA(cudaDeviceSynchronize());
  std::uint32_t got = 0;
  CHECK_CUDA(cudaMemcpy(&got, out, sizeof got, cudaMemcpyDeviceToHost));
  CHECK(got == 0xC0FFEEu);

  // Row 8's word never comes (the window still holds row 7's): the wait gives up.
  const auto start = std::chrono::steady_clock::now();
  wait_for<<<1, 1>>>(word, 8u, out);
  CHECK_CUDA(cudaGetLastError());  // the launch itself is accepted
  const cudaError_t err = cudaDeviceSynchronize();
  const auto waited = std::chrono::duration_cast<std::chrono::seconds>(std::chrono::steady_clock::now() - start);
  INFO("synchronize: " << cudaGetErrorString(err) << " after " << waited.count() << " s (bound "
                       << rss::max_wait_ns / 1000000000ull << " s)");
  CHECK(err != cudaSuccess);
  CHECK(waited.count() >= 19);  // not before the bound: a slow peer is never cut short
  CHECK(waited.count() <= 60);
}
