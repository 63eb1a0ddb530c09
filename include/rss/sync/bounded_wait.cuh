#pragma once
// The one way rss waits for another block, SM or GPU: spin until a condition holds, and give up after
// max_wait_ns of %globaltimer with a trap. A trap fails the launch with an error the host sees
// (cudaErrorLaunchFailure, and the context is unusable afterwards) instead of a kernel that never ends; no
// legitimate wait comes near the bound (phases take microseconds to milliseconds). What it catches: a
// corrupted barrier state, blocks that are not co-resident, a peer GPU that never launched its kernel.
namespace rss {

/// 20 s of %globaltimer.
inline constexpr unsigned long long max_wait_ns = 20ull * 1000 * 1000 * 1000;

namespace detail {

__device__ __forceinline__ unsigned long long global_time_ns() {
  unsigned long long t;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
  return t;
}

/// Returns once done() is true; traps after max_wait_ns. The clock is read only once the first poll failed.
template <class Done>
__device__ __forceinline__ void spin_until(Done&& done) {
  if (done()) return;
  const unsigned long long start = global_time_ns();
  while (!done()) {
    if (global_time_ns() - start > max_wait_ns) __trap();
  }
}

}  // namespace detail
}  // namespace rss
