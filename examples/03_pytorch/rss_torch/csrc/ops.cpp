// The CUDA side of the PyTorch operators rss::rms_scaled_softmax(x) and rss::rms_scaled_softmax_backward(x, y,
// dy): torch.ops.rss_cuda.forward/backward over rss (kernels.h). The public operators, their fake (meta) kernels
// and the autograd formula are defined in Python (rss_torch/__init__.py).
#include <ATen/ATen.h>
#include <ATen/cuda/CUDAContext.h>
#include <c10/cuda/CUDAGuard.h>
#include <torch/library.h>

#include <cstdint>
#include <string>
#include <vector>

#include "kernels.h"

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

void check_input(const at::Tensor& t, const char* op, const char* name) {
  TORCH_CHECK(t.is_cuda(), op, ": ", name, " must be a CUDA tensor, got a tensor on ", t.device());
  TORCH_CHECK(t.scalar_type() == at::kFloat || t.scalar_type() == at::kBFloat16 || t.scalar_type() == at::kHalf, op,
              ": ", name, " must be float32, bfloat16 or float16, got ", t.scalar_type());
  TORCH_CHECK(t.dim() >= 2, op, ": ", name, " must have at least 2 dimensions (rows = all but the last), got ", t.dim(),
              "-D");
}

void check_status(int status, const char* op) {
  TORCH_CHECK(status == 0, op, ": rss returned '", rss_torch::status_message(status), "'");
}

at::Tensor workspace(std::size_t bytes, const at::Tensor& like) {
  // The caching allocator's blocks are 512-byte aligned (rss asks for 256).
  return at::empty({static_cast<std::int64_t>(bytes > 0 ? bytes : 1)}, like.options().dtype(at::kByte));
}

at::Tensor forward_cuda(const at::Tensor& x_in) {
  constexpr const char* op = "rss::rms_scaled_softmax";
  check_input(x_in, op, "x");
  const c10::cuda::CUDAGuard guard(x_in.device());
  const RowView x = as_rows(x_in);
  at::Tensor y = at::empty(x_in.sizes(), x_in.options());  // contiguous, like the fake kernel's
  if (x.rows == 0 || x.cols == 0) return y;
  const int device = x_in.get_device();
  const rss_torch::Matrices m{x.t.data_ptr(), nullptr, nullptr, y.data_ptr(), x.rows, x.cols, x.ld, 0, 0, x.cols};
  const cudaStream_t stream = at::cuda::getCurrentCUDAStream();
  std::size_t bytes = 0;
  int status = 0;
  at::Tensor ws;
  switch (x_in.scalar_type()) {
    case at::kFloat:
      check_status(rss_torch::fp32_forward_workspace(device, x.rows, x.cols, &bytes), op);
      ws = workspace(bytes, x_in);
      status = rss_torch::fp32_forward(device, m, ws.data_ptr(), bytes, stream);
      break;
    case at::kBFloat16:
      check_status(rss_torch::bf16_forward_workspace(device, x.rows, x.cols, &bytes), op);
      ws = workspace(bytes, x_in);
      status = rss_torch::bf16_forward(device, m, ws.data_ptr(), bytes, stream);
      break;
    default:
      check_status(rss_torch::fp16_forward_workspace(device, x.rows, x.cols, &bytes), op);
      ws = workspace(bytes, x_in);
      status = rss_torch::fp16_forward(device, m, ws.data_ptr(), bytes, stream);
      break;
  }
  check_status(status, op);
  return y;
}

at::Tensor backward_cuda(const at::Tensor& x_in, const at::Tensor& y_in, const at::Tensor& dy_in) {
  constexpr const char* op = "rss::rms_scaled_softmax_backward";
  check_input(x_in, op, "x");
  check_input(y_in, op, "y");
  check_input(dy_in, op, "dy");
  TORCH_CHECK(x_in.sizes() == y_in.sizes() && x_in.sizes() == dy_in.sizes(), op,
              ": x, y and dy must have the same shape, got ", x_in.sizes(), ", ", y_in.sizes(), " and ", dy_in.sizes());
  TORCH_CHECK(x_in.scalar_type() == y_in.scalar_type() && x_in.scalar_type() == dy_in.scalar_type(), op,
              ": x, y and dy must have the same dtype, got ", x_in.scalar_type(), ", ", y_in.scalar_type(), " and ",
              dy_in.scalar_type());
  TORCH_CHECK(x_in.device() == y_in.device() && x_in.device() == dy_in.device(), op,
              ": x, y and dy must be on the same device");
  const c10::cuda::CUDAGuard guard(x_in.device());
  const RowView x = as_rows(x_in), y = as_rows(y_in), dy = as_rows(dy_in);
  at::Tensor dx = at::empty(x_in.sizes(), x_in.options());
  if (x.rows == 0 || x.cols == 0) return dx;
  const int device = x_in.get_device();
  const rss_torch::Matrices m{x.t.data_ptr(), y.t.data_ptr(), dy.t.data_ptr(), dx.data_ptr(), x.rows, x.cols,
                              x.ld,           y.ld,           dy.ld,           x.cols};
  const cudaStream_t stream = at::cuda::getCurrentCUDAStream();
  std::size_t bytes = 0;
  int status = 0;
  at::Tensor ws;
  switch (x_in.scalar_type()) {
    case at::kFloat:
      check_status(rss_torch::fp32_backward_workspace(device, x.rows, x.cols, &bytes), op);
      ws = workspace(bytes, x_in);
      status = rss_torch::fp32_backward(device, m, ws.data_ptr(), bytes, stream);
      break;
    case at::kBFloat16:
      check_status(rss_torch::bf16_backward_workspace(device, x.rows, x.cols, &bytes), op);
      ws = workspace(bytes, x_in);
      status = rss_torch::bf16_backward(device, m, ws.data_ptr(), bytes, stream);
      break;
    default:
      check_status(rss_torch::fp16_backward_workspace(device, x.rows, x.cols, &bytes), op);
      ws = workspace(bytes, x_in);
      status = rss_torch::fp16_backward(device, m, ws.data_ptr(), bytes, stream);
      break;
  }
  check_status(status, op);
  return dx;
}

}  // namespace

// The CUDA kernels of the public operators rss::rms_scaled_softmax(_backward), which Python defines and whose
// kernels validate first (rss_torch/__init__.py); the checks above repeat that validation for direct callers.
TORCH_LIBRARY(rss_cuda, m) {
  m.def("forward(Tensor x) -> Tensor");
  m.def("backward(Tensor x, Tensor y, Tensor dy) -> Tensor");
}

TORCH_LIBRARY_IMPL(rss_cuda, CUDA, m) {
  m.impl("forward", &forward_cuda);
  m.impl("backward", &backward_cuda);
}
