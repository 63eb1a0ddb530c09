// The PyTorch operators, defined and implemented here:
//
//   rss::rms_scaled_softmax(Tensor x) -> (Tensor y, Tensor stats)
//   rss::rms_scaled_softmax_backward(Tensor x, Tensor stats, Tensor dy) -> Tensor dx
//
// stats holds each row's rss::RowStatistics (max, inv_rms, sum) as float32, x.shape[:-1] + (3,), contiguous.
// CUDA kernels check the inputs, allocate the outputs and call rss (kernels.h); the autograd kernel is a C++
// torch::autograd::Function that saves x and stats (not y) and calls the backward operator, so an eager
// forward + backward is a few dispatcher hops with no Python in them. The fake kernels (for torch.compile)
// are registered from Python (rss_torch/__init__.py, the module named by set_python_module).
//
// Every exception is thrown here, in code the host compiler builds, as a torch error that reaches Python
// with its type (TORCH_CHECK_TYPE: TypeError, TORCH_CHECK_VALUE: ValueError, TORCH_CHECK: RuntimeError); the
// .cu side only returns codes. A CPU kernel exists only to refuse CPU tensors with the same ValueError.
#include <ATen/ATen.h>
#include <ATen/core/dispatch/Dispatcher.h>
#include <ATen/cuda/CUDAContext.h>
#include <c10/cuda/CUDAGuard.h>
#include <c10/util/SmallVector.h>
#include <torch/csrc/autograd/custom_function.h>
#include <torch/library.h>

#include <cstdint>
#include <sstream>
#include <string>
#include <tuple>

#include "kernels.h"
#include "rss/status.hpp"
#include "rss/types.hpp"

// A row of the float32 stats tensor is one rss::RowStatistics.
static_assert(sizeof(rss::RowStatistics) == 3 * sizeof(float) && alignof(rss::RowStatistics) == alignof(float),
              "rss::RowStatistics is three floats");

namespace {

constexpr const char* kForward = "rss.rms_scaled_softmax";
constexpr const char* kBackward = "rss.rms_scaled_softmax_backward";
constexpr const char* kStatsAre = "the row statistics rss.rms_scaled_softmax returned with y";

/// A shape as Python writes a tuple: (2, 3), (5,).
std::string tuple_of(c10::IntArrayRef sizes) {
  std::ostringstream out;
  out << '(';
  for (std::size_t i = 0; i < sizes.size(); ++i) out << (i ? ", " : "") << sizes[i];
  out << (sizes.size() == 1 ? ",)" : ")");
  return out.str();
}

void check_input(const at::Tensor& t, const char* op, const char* name) {
  TORCH_CHECK_VALUE(t.is_cuda(), op, ": ", name, " must be a CUDA tensor, got a tensor on ", t.device());
  const auto type = t.scalar_type();
  TORCH_CHECK_TYPE(type == at::kFloat || type == at::kBFloat16 || type == at::kHalf, op, ": ", name,
                   " must be float32, bfloat16 or float16, got ", type);
  TORCH_CHECK_VALUE(t.dim() >= 2, op, ": ", name, " must have at least 2 dimensions (rows = all but the last), got a ",
                    t.dim(), "-D tensor; use x.unsqueeze(0) for a single row");
}

c10::SmallVector<std::int64_t, 8> stats_shape(const at::Tensor& x) {
  c10::SmallVector<std::int64_t, 8> shape(x.sizes().begin(), x.sizes().end());
  shape.back() = 3;
  return shape;
}

void check_backward(const at::Tensor& x, const at::Tensor& stats, const at::Tensor& dy) {
  check_input(x, kBackward, "x");
  check_input(dy, kBackward, "dy");
  TORCH_CHECK_VALUE(x.sizes() == dy.sizes(), kBackward, ": x and dy must have the same shape, got ",
                    tuple_of(x.sizes()), " and ", tuple_of(dy.sizes()));
  TORCH_CHECK_TYPE(x.scalar_type() == dy.scalar_type(), kBackward, ": x and dy must have the same dtype, got ",
                   x.scalar_type(), " and ", dy.scalar_type());
  TORCH_CHECK_VALUE(x.device() == dy.device(), kBackward, ": x and dy must be on the same device, got ", x.device(),
                    " and ", dy.device());
  TORCH_CHECK_VALUE(stats.is_cuda(), kBackward, ": stats must be a CUDA tensor (", kStatsAre, "), got a tensor on ",
                    stats.device());
  TORCH_CHECK_TYPE(stats.scalar_type() == at::kFloat, kBackward, ": stats must be float32 (", kStatsAre, "), got ",
                   stats.scalar_type());
  const auto want = stats_shape(x);
  TORCH_CHECK_VALUE(stats.sizes() == c10::IntArrayRef(want), kBackward,
                    ": stats must have shape x.shape[:-1] + (3,) = ", tuple_of(want), " (", kStatsAre, "), got ",
                    tuple_of(stats.sizes()));
  TORCH_CHECK_VALUE(stats.is_contiguous(), kBackward, ": stats must be contiguous (", kStatsAre, ")");
  TORCH_CHECK_VALUE(stats.device() == x.device(), kBackward, ": x and stats must be on the same device, got ",
                    x.device(), " and ", stats.device());
}

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
  std::int64_t inner = -1;  // the innermost leading dimension of more than one element
  std::int64_t ld = cols;
  for (std::int64_t d = t.dim() - 2; d >= 0 && direct; --d) {
    if (t.size(d) == 1) continue;
    if (inner < 0) {
      ld = t.stride(d);
    } else {
      direct = t.stride(d) == t.stride(inner) * t.size(inner);  // steps over whole runs of the next
    }
    inner = d;
  }
  if (direct && ld >= cols) return {t, rows, cols, ld};
  return {t.contiguous(), rows, cols, cols};
}

void check_status(int status, const char* op) {
  if (status == 0) return;
  const char* message = rss_torch::status_message(status);
  if (status == static_cast<int>(rss::Status::cuda_error) || status == static_cast<int>(rss::Status::partial_output)) {
    const cudaError_t err = rss_torch::last_cuda_error();
    TORCH_CHECK(false, op, ": rss returned '", message, "' (", cudaGetErrorName(err), ": ", cudaGetErrorString(err),
                ")");
  }
  TORCH_CHECK(false, op, ": rss returned '", message, "'");
}

/// Runs one of the per-type entry points: the workspace query (the planned layout's size, remembered), a
/// workspace from the caching allocator when it is not 0 bytes (its blocks are 512-byte aligned; rss asks for
/// 256), then the call on the current stream.
template <class Query, class Call>
void run(const at::Tensor& like, const rss_torch::Matrices& m, const char* op, Query query, Call call) {
  const int device = like.get_device();
  std::size_t bytes = 0;
  check_status(query(device, m, &bytes), op);
  at::Tensor workspace;
  if (bytes > 0) workspace = at::empty({static_cast<std::int64_t>(bytes)}, like.options().dtype(at::kByte));
  const cudaStream_t stream = at::cuda::getCurrentCUDAStream(static_cast<c10::DeviceIndex>(device));
  check_status(call(device, m, bytes > 0 ? workspace.data_ptr() : nullptr, bytes, stream), op);
}

std::tuple<at::Tensor, at::Tensor> forward_kernel(const at::Tensor& x_in) {
  check_input(x_in, kForward, "x");
  const c10::cuda::CUDAGuard guard(x_in.device());
  at::Tensor y = at::empty(x_in.sizes(), x_in.options());  // contiguous, like the fake kernel's
  at::Tensor stats = at::empty(stats_shape(x_in), x_in.options().dtype(at::kFloat));
  const RowView x = as_rows(x_in);
  if (x.rows == 0 || x.cols == 0) return {y, stats};
  const rss_torch::Matrices m{x.t.data_ptr(), nullptr, stats.data_ptr(), y.data_ptr(), x.rows, x.cols, x.ld, 0, x.cols};
  switch (x_in.scalar_type()) {
    case at::kFloat: run(x_in, m, kForward, rss_torch::fp32_forward_workspace, rss_torch::fp32_forward); break;
    case at::kBFloat16: run(x_in, m, kForward, rss_torch::bf16_forward_workspace, rss_torch::bf16_forward); break;
    default: run(x_in, m, kForward, rss_torch::fp16_forward_workspace, rss_torch::fp16_forward); break;
  }
  return {y, stats};
}

at::Tensor backward_kernel(const at::Tensor& x_in, const at::Tensor& stats, const at::Tensor& dy_in) {
  check_backward(x_in, stats, dy_in);
  const c10::cuda::CUDAGuard guard(x_in.device());
  at::Tensor dx = at::empty(x_in.sizes(), x_in.options());
  const RowView x = as_rows(x_in), dy = as_rows(dy_in);
  if (x.rows == 0 || x.cols == 0) return dx;
  const rss_torch::Matrices m{x.t.data_ptr(), dy.t.data_ptr(), stats.data_ptr(), dx.data_ptr(), x.rows, x.cols,
                              x.ld,           dy.ld,           x.cols};
  switch (x_in.scalar_type()) {
    case at::kFloat: run(x_in, m, kBackward, rss_torch::fp32_backward_workspace, rss_torch::fp32_backward); break;
    case at::kBFloat16: run(x_in, m, kBackward, rss_torch::bf16_backward_workspace, rss_torch::bf16_backward); break;
    default: run(x_in, m, kBackward, rss_torch::fp16_backward_workspace, rss_torch::fp16_backward); break;
  }
  return dx;
}

// Handles of the operators for the autograd kernel's calls below autograd (looked up once).
const c10::TypedOperatorHandle<std::tuple<at::Tensor, at::Tensor>(const at::Tensor&)>& forward_op() {
  static const auto op = c10::Dispatcher::singleton()
                              .findSchemaOrThrow("rss::rms_scaled_softmax", "")
                              .typed<std::tuple<at::Tensor, at::Tensor>(const at::Tensor&)>();
  return op;
}

const c10::TypedOperatorHandle<at::Tensor(const at::Tensor&, const at::Tensor&, const at::Tensor&)>& backward_op() {
  static const auto op = c10::Dispatcher::singleton()
                              .findSchemaOrThrow("rss::rms_scaled_softmax_backward", "")
                              .typed<at::Tensor(const at::Tensor&, const at::Tensor&, const at::Tensor&)>();
  return op;
}

// Saved for the backward: x and the statistics (12 bytes a row), not y. The backward recomputes y from them,
// reading x and dy (3 N of traffic with dx) instead of x, y and dy (4 N). stats is not differentiable.
class RmsScaledSoftmax : public torch::autograd::Function<RmsScaledSoftmax> {
 public:
  static torch::autograd::variable_list forward(torch::autograd::AutogradContext* ctx, const at::Tensor& x) {
    at::AutoDispatchBelowADInplaceOrView below_autograd;
    auto [y, stats] = forward_op().call(x);
    ctx->save_for_backward({x, stats});
    ctx->mark_non_differentiable({stats});
    ctx->set_materialize_grads(false);  // no zero gradient of stats is made (an allocation and a kernel)
    return {y, stats};
  }

  static torch::autograd::variable_list backward(torch::autograd::AutogradContext* ctx,
                                                 torch::autograd::variable_list grads) {
    const at::Tensor& dy = grads[0];
    if (!dy.defined()) return {at::Tensor()};  // only stats was used: no gradient reaches x
    const auto saved = ctx->get_saved_variables();
    const at::Tensor& x = saved[0];
    return {backward_op().call(x, saved[1], dy.to(x.scalar_type()))};
  }
};

std::tuple<at::Tensor, at::Tensor> forward_autograd(const at::Tensor& x) {
  // Inference (no gradient wanted): straight below autograd, without the Function's node. A forward-mode
  // tangent still goes through the Function, which refuses it (no JVP) rather than dropping it.
  if (!(at::GradMode::is_enabled() && x.requires_grad()) && !x._fw_grad(/*level=*/0).defined()) {
    at::AutoDispatchBelowADInplaceOrView below_autograd;
    return forward_op().call(x);
  }
  auto out = RmsScaledSoftmax::apply(x);
  return {std::move(out[0]), std::move(out[1])};
}

}  // namespace

TORCH_LIBRARY(rss, m) {
  m.set_python_module("rss_torch");  // where the fake kernels live: torch imports it when tracing needs them
  m.def("rms_scaled_softmax(Tensor x) -> (Tensor, Tensor)");
  m.def("rms_scaled_softmax_backward(Tensor x, Tensor stats, Tensor dy) -> Tensor");
}

TORCH_LIBRARY_IMPL(rss, CUDA, m) {
  m.impl("rms_scaled_softmax", &forward_kernel);
  m.impl("rms_scaled_softmax_backward", &backward_kernel);
}

// CPU tensors: the same kernels, whose first check refuses them (a ValueError rather than the dispatcher's
// "could not run with arguments from the 'CPU' backend").
TORCH_LIBRARY_IMPL(rss, CPU, m) {
  m.impl("rms_scaled_softmax", &forward_kernel);
  m.impl("rms_scaled_softmax_backward", &backward_kernel);
}

TORCH_LIBRARY_IMPL(rss, Autograd, m) {
  m.impl("rms_scaled_softmax", &forward_autograd);
}
