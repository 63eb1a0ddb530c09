#pragma once
// An analytic MODEL of occupancy, so that the planners can be tested on a machine without a GPU.
// Pure host C++: no CUDA headers.
#include <cstddef>

#include "rss/device_info.hpp"

namespace rss {

namespace detail {
constexpr int kModelMaxThreadsPerBlock = 1024;
constexpr int kModelMaxRegsPerThread = 255;
constexpr int kModelRegAllocPerWarp = 256;        // registers are granted per warp in units of 256
constexpr std::size_t kModelSharedAllocUnit = 128;  // shared memory is granted per block in units of 128 B
}  // namespace detail

/// A MODEL of how many blocks of one kernel fit on one SM, not the driver's answer: blocks of
/// `threads` threads using `regs_per_thread` registers and `shared_bytes` (static + dynamic) shared memory
/// per block, limited by threads, blocks, registers and shared memory. Each block also costs
/// reserved_shared_per_block, and the SM is assumed to run with its largest shared-memory carveout.
/// Returns 0 when one block cannot launch at all (too many threads or registers, shared_bytes above the
/// opt-in limit). regs_per_thread == 0 means "no register limit".
/// At run time use cudaOccupancyMaxActiveBlocksPerMultiprocessor instead.
constexpr int modeled_blocks_per_sm(const DeviceInfo& d, int threads, int regs_per_thread,
                                    std::size_t shared_bytes) noexcept {
  if (threads <= 0 || threads > detail::kModelMaxThreadsPerBlock) return 0;
  if (regs_per_thread < 0 || regs_per_thread > detail::kModelMaxRegsPerThread) return 0;
  if (shared_bytes > d.shared_per_block_optin) return 0;

  const int warps = (threads + 31) / 32;
  int blocks = d.max_blocks_per_sm;

  const int by_threads = d.max_threads_per_sm / (warps * 32);
  if (by_threads < blocks) blocks = by_threads;

  if (regs_per_thread > 0) {
    const int unit = detail::kModelRegAllocPerWarp;
    const int regs_per_warp = (regs_per_thread * 32 + unit - 1) / unit * unit;
    const int by_regs = d.regs_per_sm / (regs_per_warp * warps);
    if (by_regs < blocks) blocks = by_regs;
  }

  const std::size_t unit = detail::kModelSharedAllocUnit;
  const std::size_t per_block = (shared_bytes + d.reserved_shared_per_block + unit - 1) / unit * unit;
  const std::size_t by_shared = d.shared_per_sm / per_block;
  if (by_shared < static_cast<std::size_t>(blocks)) blocks = static_cast<int>(by_shared);

  return blocks < 0 ? 0 : blocks;
}

}  // namespace rss
