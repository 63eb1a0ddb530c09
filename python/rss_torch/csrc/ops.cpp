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
#include <ATen/cuda/EmptyTensor.h>
#include <c10/cuda/CUDACachingAllocator.h>
#include <c10/cuda/CUDAGuard.h>
#include <c10/util/SmallVector.h>
#include <torch/csrc/autograd/custom_function.h>
#include <torch/library.h>

#include <cstdint>
#include <sstream>
#include <string>
#include <utility>
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

/// The deleter torch's CUDA allocator attaches to every storage it hands out (c10::Allocator::raw_deleter: "allocate()
/// is guaranteed to return a unique_ptr with this deleter attached"), or null when that allocator is not one of
/// torch's own: its caching allocator ("native", also with caching turned off: cudaMalloc) or its
/// cudaMallocAsync backend, both device memory of the storage's device. An allocator plugged in from Python
/// (CUDAPluggableAllocator, "pluggable") may hand out anything: not vouched for.
c10::DeleterFnPtr device_allocator_deleter() {
  c10::cuda::CUDACachingAllocator::CUDAAllocator* allocator = c10::cuda::CUDACachingAllocator::get();
  if (allocator == nullptr) return nullptr;
  const std::string name = allocator->name();  // short: no heap allocation
  if (name != "native" && name != "cudaMallocAsync") return nullptr;
  return allocator->raw_deleter();
}

/// Whether `bytes` from `data` are vouched for (rss::PointerCheck::vouched: rss then skips cudaPointerGetAttributes,
/// about 1 us a pointer): they lie inside allocation `p`, which torch's CUDA allocator handed out (`deleter`,
/// above) on `device`, of `capacity` bytes. The bounds are checked too, not assumed: a storage may be shrunk
/// under its tensors (untyped_storage().resize_(0), as FSDP frees parameters). Everything else keeps rss's
/// check: a tensor torch made around foreign memory (torch.as_tensor of an object with __cuda_array_interface__,
/// which may be pinned host memory; from_blob; DLPack imports; CUDA IPC) carries the deleter its maker gave it,
/// never the allocator's, and copy-on-write storages carry their own.
bool allocated_by(const c10::DataPtr& p, std::size_t capacity, const void* data, std::uint64_t bytes,
                  c10::DeleterFnPtr deleter, c10::Device device) {
  if (deleter == nullptr || p.get_deleter() != deleter || p.device() != device || p.get() == nullptr) return false;
  const auto base = reinterpret_cast<std::uintptr_t>(p.get()), at = reinterpret_cast<std::uintptr_t>(data);
  return at >= base && bytes <= capacity && at - base <= capacity - bytes;
}

/// The same for `bytes` from `data` inside t's storage.
bool allocated_by(const at::Tensor& t, const void* data, std::uint64_t bytes, c10::DeleterFnPtr deleter,
                  c10::Device device) {
  if (deleter == nullptr || !t.has_storage()) return false;
  const c10::Storage& storage = t.storage();
  return allocated_by(storage.data_ptr(), storage.nbytes(), data, bytes, deleter, device);
}

/// Bytes from the first element of rows x cols with leading dimension ld to one past the last (rows, cols > 0).
std::uint64_t extent_bytes(std::int64_t rows, std::int64_t cols, std::int64_t ld, std::size_t element_bytes) {
  return (static_cast<std::uint64_t>(rows - 1) * static_cast<std::uint64_t>(ld) + static_cast<std::uint64_t>(cols)) *
         element_bytes;
}

/// rss::_vouches_for(Tensor t) -> bool, for the tests: whether the operators would skip rss's pointer queries for
/// t's memory (every element t spans, on t's device). An empty tensor spans nothing and is not vouched for.
bool vouches_for(const at::Tensor& t) {
  if (!t.has_storage() || t.numel() == 0) return false;
  std::uint64_t last = 0;  // offset of the last element, in elements (torch's strides are not negative)
  for (std::int64_t d = 0; d < t.dim(); ++d) last += static_cast<std::uint64_t>(t.size(d) - 1) * t.stride(d);
  return allocated_by(t, t.data_ptr(), (last + 1) * t.element_size(), device_allocator_deleter(), t.device());
}

/// A CUDA tensor from the allocator straight, without the dispatcher's hops of at::empty (BackendSelect, then
/// the CUDA kernel of aten::empty); the same allocation (torch's CUDA allocator on the current stream, CUDA Graph
/// pools included). at::empty would only add, under torch.use_deterministic_algorithms with
/// fill_uninitialized_memory, a fill of memory the operators overwrite entirely.
at::Tensor uninitialized(c10::IntArrayRef sizes, at::ScalarType dtype, c10::Device device) {
  return at::Tensor(at::detail::empty_cuda(sizes, dtype, device, std::nullopt));
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
/// workspace from the CUDA allocator when it is not 0 bytes (the caching allocator's blocks are 512-byte aligned;
/// rss asks for 256), then the call on the current stream. The workspace is a bare allocation, not a tensor
/// (why safe: at::empty allocates it the same way, from the same allocator on the current stream, and a tensor
/// around it adds only a TensorImpl and two dispatcher hops); freed when this returns, after the launch, it is
/// reused in stream order, as the tensor was. `m.vouched` comes in for the tensors and holds for the call when
/// the workspace is the allocator's too.
template <class Query, class Call>
void run(const at::Tensor& like, rss_torch::Matrices m, c10::DeleterFnPtr deleter, const char* op, Query query,
         Call call) {
  const int device = like.get_device();
  std::size_t bytes = 0;
  check_status(query(device, m, &bytes), op);
  c10::DataPtr workspace;
  if (bytes > 0) {
    workspace = c10::cuda::CUDACachingAllocator::get()->allocate(bytes);
    m.vouched = m.vouched && allocated_by(workspace, bytes, workspace.get(), bytes, deleter, like.device());
  }
  const cudaStream_t stream = at::cuda::getCurrentCUDAStream(static_cast<c10::DeviceIndex>(device));
  check_status(call(device, m, bytes > 0 ? workspace.get() : nullptr, bytes, stream), op);
}

std::tuple<at::Tensor, at::Tensor> forward_kernel(const at::Tensor& x_in) {
  check_input(x_in, kForward, "x");
  const c10::Device device = x_in.device();
  const c10::cuda::CUDAGuard guard(device);
  at::Tensor y = uninitialized(x_in.sizes(), x_in.scalar_type(), device);  // contiguous, like the fake kernel's
  at::Tensor stats = uninitialized(stats_shape(x_in), at::kFloat, device);
  const RowView x = as_rows(x_in);
  if (x.rows == 0 || x.cols == 0) return {y, stats};
  const c10::DeleterFnPtr deleter = device_allocator_deleter();
  const std::size_t size = x_in.element_size();
  const bool vouched = allocated_by(x.t, x.t.data_ptr(), extent_bytes(x.rows, x.cols, x.ld, size), deleter, device) &&
                       allocated_by(y, y.data_ptr(), extent_bytes(x.rows, x.cols, x.cols, size), deleter, device) &&
                       allocated_by(stats, stats.data_ptr(), extent_bytes(x.rows, 3, 3, sizeof(float)), deleter, device);
  const rss_torch::Matrices m{x.t.data_ptr(), nullptr, stats.data_ptr(), y.data_ptr(), x.rows, x.cols, x.ld, 0, x.cols,
                              vouched};
  switch (x_in.scalar_type()) {
    case at::kFloat: run(x_in, m, deleter, kForward, rss_torch::fp32_forward_workspace, rss_torch::fp32_forward); break;
    case at::kBFloat16: run(x_in, m, deleter, kForward, rss_torch::bf16_forward_workspace, rss_torch::bf16_forward); break;
    default: run(x_in, m, deleter, kForward, rss_torch::fp16_forward_workspace, rss_torch::fp16_forward); break;
  }
  return {y, stats};
}

at::Tensor backward_kernel(const at::Tensor& x_in, const at::Tensor& stats, const at::Tensor& dy_in) {
  check_backward(x_in, stats, dy_in);
  const c10::Device device = x_in.device();
  const c10::cuda::CUDAGuard guard(device);
  at::Tensor dx = uninitialized(x_in.sizes(), x_in.scalar_type(), device);
  const RowView x = as_rows(x_in), dy = as_rows(dy_in);
  if (x.rows == 0 || x.cols == 0) return dx;
  const c10::DeleterFnPtr deleter = device_allocator_deleter();
  const std::size_t size = x_in.element_size();
  const bool vouched = allocated_by(x.t, x.t.data_ptr(), extent_bytes(x.rows, x.cols, x.ld, size), deleter, device) &&
                       allocated_by(dy.t, dy.t.data_ptr(), extent_bytes(x.rows, x.cols, dy.ld, size), deleter, device) &&
                       allocated_by(stats, stats.data_ptr(), extent_bytes(x.rows, 3, 3, sizeof(float)), deleter, device) &&
                       allocated_by(dx, dx.data_ptr(), extent_bytes(x.rows, x.cols, x.cols, size), deleter, device);
  const rss_torch::Matrices m{x.t.data_ptr(), dy.t.data_ptr(), stats.data_ptr(), dx.data_ptr(), x.rows, x.cols,
                              x.ld,           dy.ld,           x.cols,          vouched};
  switch (x_in.scalar_type()) {
    case at::kFloat: run(x_in, m, deleter, kBackward, rss_torch::fp32_backward_workspace, rss_torch::fp32_backward); break;
    case at::kBFloat16: run(x_in, m, deleter, kBackward, rss_torch::bf16_backward_workspace, rss_torch::bf16_backward); break;
    default: run(x_in, m, deleter, kBackward, rss_torch::fp16_backward_workspace, rss_torch::fp16_backward); break;
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
    // dy in x's dtype; .to() of the same dtype returns dy itself, so skip its dispatcher call (why safe: the
    // same tensor either way).
    return {backward_op().call(x, saved[1], dy.scalar_type() == x.scalar_type() ? dy : dy.to(x.scalar_type()))};
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
  // For the tests: whether the operators vouch for t's memory (skip rss's pointer queries), on any device.
  m.def("_vouches_for(Tensor t) -> bool", &vouches_for);
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
