#pragma once
// Grid-wide barrier of a cooperative launch: every block of the grid waits for every other.
#include <cooperative_groups.h>

namespace rss {

/// Valid only in a kernel launched cooperatively (co-residency is what makes the wait finite).
struct GridBarrier {
  __device__ void wait() const { cooperative_groups::this_grid().sync(); }
};

}  // namespace rss
