// The CUDA side of the PyTorch operators rss::rms_scaled_softmax(x) -> (y, stats) and
// rss::rms_scaled_softmax_backward(x, stats, dy) -> dx: torch.ops.rss_cuda.forward_into/backward_into over rss
// (kernels.h), returning a status code. stats holds each row's rss::RowStatistics (max, inv_rms, sum) as float32,
// x.shape[:-1] + (3,), contiguous. The public operators, their fake (meta) kernels and the autograd formula are
// defined in Python (rss_torch/__init__.py).
#include <ATen/ATen.h>
#include <ATen/cuda/CUDAContext.h>
#include <c10/cuda/CUDAGuard.h>
#include <torch/library.h>

#include <cstdint>
#include <string>
#include <vector>

#include "kernels.h"
#include "rss/types.hpp"

// A row of the float32 stats tensor is one rss::RowStatistics.
static_assert(sizeof(rss::RowStatistics) == 3 * sizeof(float) && alignof(rss::RowStatistics) == alignof(float),
              "rss::RowStatistics is three floats");

namespace {

/// A tensor seen as rows x cols with unit stride along the last dimension and one stride `ld` >= cols
/// between consecutive rows (rows = the product of all but the last dimension).
struct RowView {
  at::Tensor t;
  std::int64_t rows, cols, ld;
};

/// The tensor itself when its rows already have that layout (2-D strided slices, batched views of
/// contiguous memory); a contiguous copy otherwise (permuted or broadcast tensors, e.g. the expanded
/// gradient of a sum).
RowView as_rows(const at::Tensor& t) {
  const std::int64_t cols = t.size(-1);
  const std::int64_t rows = cols == 0 ? 0 : t.numel() / cols;
  bool direct = cols <= 1 || t.stride(-1) == 1;
  std::vector<std::int64_t> outer;  // leading dimensions of more than one element, outermost first
  for (std::int64_t d = 0; d + 1 < t.dim(); ++d)
    if (t.size(d) != 1) outer.push_back(d);
  const std::int64_t ld = outer.empty() ? cols : t.stride(outer.back());
  for (std::size_t i = 0; direct && i + 1 < outer.size(); ++i)  // each steps over whole runs of the next
    direct = t.stride(outer[i]) == t.stride(outer[i + 1]) * t.size(outer[i + 1]);
  if (direct && ld >= cols) return {t, rows, cols, ld};
  return {t.contiguous(), rows, cols, cols};
}

// Status codes of the rss_cuda operators: 0 success, an rss::Status (positive), or kInvalidTensor. The operators
// report problems by returning a code, never by throwing: a C++ exception thrown out of this extension's operator
// kernels (a failed TORCH_CHECK) ended in a segmentation fault under pytest with PyTorch 2.11 on the H200, so the
// Python side raises instead (rss_torch/__init__.py), after checking the inputs itself.
constexpr std::int64_t kInvalidTensor = -1;

bool valid_input(const at::Tensor& t) {
  return t.is_cuda() && t.dim() >= 2 &&
         (t.scalar_type() == at::kFloat || t.scalar_type() == at::kBFloat16 || t.scalar_type() == at::kHalf);
}

/// The row statistics of x: float32, x.shape[:-1] + (3,), contiguous (rss::RowStatistics in row order), on x's
/// device. sizes()[d] rather than size(d): nothing here may throw.
bool valid_stats(const at::Tensor& stats, const at::Tensor& x) {
  if (!stats.is_cuda() || stats.scalar_type() != at::kFloat || !stats.is_contiguous() || stats.device() != x.device() ||
      stats.dim() != x.dim() || stats.sizes()[x.dim() - 1] != 3) {
    return false;
  }
  for (std::int64_t d = 0; d + 1 < x.dim(); ++d)
    if (stats.sizes()[d] != x.sizes()[d]) return false;
  return true;
}

at::Tensor workspace(std::size_t bytes, const at::Tensor& like) {
  // The caching allocator's blocks are 512-byte aligned (rss asks for 256).
  return at::empty({static_cast<std::int64_t>(bytes > 0 ? bytes : 1)}, like.options().dtype(at::kByte));
}

/// Runs one of the per-type entry points: the workspace query, then the call.
template <class Query, class Call>
std::int64_t run(const at::Tensor& like, const rss_torch::Matrices& m, Query query, Call call) {
  const int device = like.get_device();
  std::size_t bytes = 0;
  const int status = query(device, m.rows, m.cols, &bytes);
  if (status != 0) return status;
  const at::Tensor ws = workspace(bytes, like);
  return call(device, m, ws.data_ptr(), bytes, at::cuda::getCurrentCUDAStream());
}

/// y = rms_scaled_softmax(x), written into y (contiguous, x's shape and dtype), and each row's statistics into
/// stats (valid_stats), both allocated by the caller.
std::int64_t forward_into(const at::Tensor& x_in, const at::Tensor& y, const at::Tensor& stats) {
  if (!valid_input(x_in) || !y.is_contiguous() || y.sizes() != x_in.sizes() || y.scalar_type() != x_in.scalar_type() ||
      y.device() != x_in.device() || !valid_stats(stats, x_in)) {
    return kInvalidTensor;
  }
  const c10::cuda::CUDAGuard guard(x_in.device());
  const RowView x = as_rows(x_in);
  if (x.rows == 0 || x.cols == 0) return 0;
  const rss_torch::Matrices m{x.t.data_ptr(), nullptr, stats.data_ptr(), y.data_ptr(), x.rows, x.cols, x.ld, 0, x.cols};
  switch (x_in.scalar_type()) {
    case at::kFloat: return run(x_in, m, rss_torch::fp32_forward_workspace, rss_torch::fp32_forward);
    case at::kBFloat16: return run(x_in, m, rss_torch::bf16_forward_workspace, rss_torch::bf16_forward);
    default: return run(x_in, m, rss_torch::fp16_forward_workspace, rss_torch::fp16_forward);
  }
}

/// dx of rms_scaled_softmax from x, the forward's row statistics of x and dy (y is recomputed from x and the
/// statistics), written into dx (contiguous, allocated by the caller).
std::int64_t backward_into(const at::Tensor& x_in, const at::Tensor& stats, const at::Tensor& dy_in,
                           const at::Tensor& dx) {
  for (const at::Tensor* t : {&x_in, &dy_in}) {
    if (!valid_input(*t) || t->sizes() != x_in.sizes() || t->scalar_type() != x_in.scalar_type() ||
        t->device() != x_in.device()) {
      return kInvalidTensor;
    }
  }
  if (!valid_stats(stats, x_in) || !dx.is_contiguous() || dx.sizes() != x_in.sizes() ||
      dx.scalar_type() != x_in.scalar_type() || dx.device() != x_in.device()) {
    return kInvalidTensor;
  }
  const c10::cuda::CUDAGuard guard(x_in.device());
  const RowView x = as_rows(x_in), dy = as_rows(dy_in);
  if (x.rows == 0 || x.cols == 0) return 0;
  const rss_torch::Matrices m{x.t.data_ptr(), dy.t.data_ptr(), stats.data_ptr(), dx.data_ptr(), x.rows, x.cols,
                              x.ld,           dy.ld,           x.cols};
  switch (x_in.scalar_type()) {
    case at::kFloat: return run(x_in, m, rss_torch::fp32_backward_workspace, rss_torch::fp32_backward);
    case at::kBFloat16: return run(x_in, m, rss_torch::bf16_backward_workspace, rss_torch::bf16_backward);
    default: return run(x_in, m, rss_torch::fp16_backward_workspace, rss_torch::fp16_backward);
  }
}

std::string status_message(std::int64_t status) {
  if (status == kInvalidTensor) {
    return "invalid tensors (CUDA float32/bfloat16/float16 of at least 2 dimensions, one shape, dtype and device; "
           "contiguous outputs; statistics float32, contiguous, of shape x.shape[:-1] + (3,))";
  }
  return rss_torch::status_message(static_cast<int>(status));
}

}  // namespace

// The CUDA side of the public operators rss::rms_scaled_softmax(_backward), which Python defines; their kernels
// check the inputs, allocate the outputs, call these and raise on a nonzero status (rss_torch/__init__.py).
TORCH_LIBRARY(rss_cuda, m) {
  m.def("forward_into(Tensor x, Tensor(a!) y, Tensor(b!) stats) -> int");
  m.def("backward_into(Tensor x, Tensor stats, Tensor dy, Tensor(a!) dx) -> int");
  m.def("status_message(int status) -> str", &status_message);  // no tensor: one kernel for every backend
}

TORCH_LIBRARY_IMPL(rss_cuda, CUDA, m) {
  m.impl("forward_into", &forward_into);
  m.impl("backward_into", &backward_into);
}
