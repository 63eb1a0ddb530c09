// The boundary between the PyTorch side (ops.cpp: tensors, checks, allocation, registration, every exception)
// and rss (fp32.cu, bf16.cu, fp16.cu: one translation unit per storage type, compiled in parallel). Plain C++:
// raw pointers, shapes and a stream; every function returns an rss::Status as an int (0: success) or
// kHostFailure, and none throws: errors become exceptions in ops.cpp alone, which the host compiler builds.
#pragma once
#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>

namespace rss_torch {

/// A host-side failure of the .cu side (an allocation of its plan cache), caught there.
constexpr int kHostFailure = -2;

/// Matrices of one call, row-major with leading dimensions in elements. `out` is y (forward) or dx (backward).
/// `stats` holds `rows` rss::RowStatistics (12 bytes each, in row order): the forward writes them, the backward
/// reads them and recomputes y from x (y is not an input of the backward). `vouched`: every pointer of the call
/// (the workspace's included) is memory torch's CUDA allocator handed out on the call's device, so a planned
/// layout's rebind skips the runtime's pointer queries (rss::PointerCheck::vouched; ops.cpp decides, from each
/// storage's deleter). The first call of a layout (initialize) asks the runtime whatever this says.
struct Matrices {
  const void* x;
  const void* dy;  // backward only
  void* stats;
  void* out;
  std::int64_t rows, cols, ld_x, ld_dy, ld_out;
  bool vouched;
};

// Per storage type and direction: the workspace bytes a call of this layout needs (the planned operator's,
// remembered: no device query once the layout has run), then the call itself on `stream` (the current
// device is `device`). The workspace may be null when the query answered 0.
#define RSS_TORCH_DECLARE(NAME)                                                                               \
  int NAME##_forward_workspace(int device, const Matrices& m, std::size_t* bytes);                            \
  int NAME##_forward(int device, const Matrices& m, void* workspace, std::size_t bytes, cudaStream_t stream); \
  int NAME##_backward_workspace(int device, const Matrices& m, std::size_t* bytes);                           \
  int NAME##_backward(int device, const Matrices& m, void* workspace, std::size_t bytes, cudaStream_t stream);
RSS_TORCH_DECLARE(fp32)
RSS_TORCH_DECLARE(bf16)
RSS_TORCH_DECLARE(fp16)
#undef RSS_TORCH_DECLARE

/// rss::status_message of a status returned above (kHostFailure included).
const char* status_message(int status);
/// The CUDA error behind the last rss::Status::cuda_error returned on this thread.
cudaError_t last_cuda_error();

}  // namespace rss_torch
