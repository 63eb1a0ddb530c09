#pragma once
// Carving a caller's workspace into aligned sub-buffers. The same code answers the size query (no
// base pointer: it only counts) and lays the buffers out, so the two can never disagree.
#include <cstddef>
#include <cstdint>

#include "rss/status.hpp"
#include "rss/types.hpp"

namespace rss {

/// Lays out sub-buffers of a workspace, each aligned to workspace_alignment. With no base pointer it
/// only counts, which is how every strategy answers its size query.
class WorkspaceCarver {
 public:
  explicit WorkspaceCarver(void* base = nullptr) : base_(static_cast<unsigned char*>(base)) {}

  /// Reserves `count` elements of T at the next aligned offset; null while only counting.
  template <class T>
  T* take(std::int64_t count) {
    const std::size_t start = offset_;
    const auto n = static_cast<std::uint64_t>(count < 0 ? 0 : count);
    if (n > (SIZE_MAX - start) / sizeof(T) - workspace_alignment) {
      overflow_ = true;
      return nullptr;
    }
    const std::size_t end = start + n * sizeof(T);
    offset_ = (end + workspace_alignment - 1) / workspace_alignment * workspace_alignment;
    return base_ == nullptr ? nullptr : reinterpret_cast<T*>(base_ + start);
  }

  std::size_t bytes() const { return offset_; }
  bool overflowed() const { return overflow_; }

 private:
  unsigned char* base_;
  std::size_t offset_ = 0;
  bool overflow_ = false;
};

namespace detail {

/// The size query of a workspace layout W (a struct with a static carve(carver, args...)).
template <class W, class... Args>
Status carved_bytes(std::size_t* bytes, Args... args) noexcept {
  WorkspaceCarver carver;
  W::carve(carver, args...);
  if (carver.overflowed()) return Status::size_overflow;
  *bytes = carver.bytes();
  return Status::success;
}

}  // namespace detail
}  // namespace rss
