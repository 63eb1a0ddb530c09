"""pytest tests of the errors wrong inputs give: each check of the operators' C++ kernels, reached directly, through
the C++ autograd kernel (an input that requires grad) and through the Python wrapper, raises its torch error as
the Python exception it maps to (TORCH_CHECK_VALUE: ValueError, TORCH_CHECK_TYPE: TypeError, an rss status:
RuntimeError), and the process goes on. With PyTorch 2.11 on the H200 machine the 1-D case once crashed the
process: the extension carried its own static libstdc++ (setup.py now links torch's shared one), whose iostream
code segfaulted formatting the number in the message; these tests are the check that it does not happen again. The CPU-tensor cases need no GPU; the others are skipped
without one. Without torch every test is skipped and says why.

    python3 -m pytest -v python/tests/test_errors.py
"""
import pytest

from rss_ops import BACKWARD, FORWARD, needs_gpu, rss_torch, torch


@pytest.mark.parametrize("device", ["cpu", pytest.param("cuda", marks=needs_gpu)])
def test_control_a_torch_error_thrown_in_cpp_reaches_python(device):
    """Not rss: torch's own C++ check failing (a matrix product of mismatched shapes). Were the process to crash
    here too, C++ exceptions themselves would be the problem on that machine (the unwinder that records their
    backtrace, say), not this extension's way of raising them."""
    with pytest.raises(RuntimeError, match="cannot be multiplied"):
        torch.mm(torch.ones(2, 3, device=device), torch.ones(4, 5, device=device))


def forward_callers():
    """The ways a user reaches the forward's checks: the operator, the operator through its autograd kernel,
    the wrapper through the autograd kernel."""
    return {
        "op": lambda x: FORWARD(x),
        "op, requires grad": lambda x: FORWARD(x.detach().requires_grad_(x.is_floating_point())),
        "wrapper, requires grad": lambda x: rss_torch.rms_scaled_softmax(x.detach().requires_grad_(x.is_floating_point())),
    }


@pytest.mark.parametrize("caller", forward_callers().keys())
def test_cpu_tensor_is_a_value_error(caller):
    with pytest.raises(ValueError, match="x must be a CUDA tensor, got a tensor on cpu"):
        forward_callers()[caller](torch.ones(2, 3))


def test_backward_of_cpu_tensors_is_a_value_error():
    with pytest.raises(ValueError, match="x must be a CUDA tensor"):
        BACKWARD(torch.ones(2, 3), torch.ones(2, 3), torch.ones(2, 3))


def test_not_a_tensor():
    with pytest.raises(TypeError, match="x must be a torch.Tensor, got list"):
        rss_torch.rms_scaled_softmax([1.0, 2.0])
    with pytest.raises(RuntimeError, match="Expected a value of type 'Tensor'"):  # the schema's own check
        FORWARD([1.0, 2.0])


@needs_gpu
@pytest.mark.parametrize("caller", forward_callers().keys())
@pytest.mark.parametrize("dtype", [torch.float64, torch.int32], ids=["fp64", "int32"])
def test_other_dtypes_are_a_type_error(caller, dtype):
    with pytest.raises(TypeError, match="x must be float32, bfloat16 or float16, got (Double|Int)"):
        forward_callers()[caller](torch.ones(2, 3, device="cuda", dtype=dtype))


@needs_gpu
@pytest.mark.parametrize("caller", forward_callers().keys())
def test_one_dimension_is_a_value_error(caller):
    with pytest.raises(ValueError, match=r"at least 2 dimensions .* got a 1-D tensor; use x.unsqueeze\(0\)"):
        forward_callers()[caller](torch.ones(5, device="cuda"))


@pytest.fixture
def forward_outputs():
    x = torch.ones(2, 5, device="cuda")
    y, stats = FORWARD(x)
    return x, y, stats


@needs_gpu
def test_backward_inputs_that_do_not_match(forward_outputs):
    x, _, stats = forward_outputs
    with pytest.raises(ValueError, match=r"x and dy must have the same shape, got \(2, 5\) and \(2, 4\)"):
        BACKWARD(x, stats, torch.ones(2, 4, device="cuda"))
    with pytest.raises(TypeError, match="x and dy must have the same dtype, got Float and Half"):
        BACKWARD(x, stats, x.half())
    with pytest.raises(ValueError, match="dy must be a CUDA tensor, got a tensor on cpu"):  # mismatched devices
        BACKWARD(x, stats, torch.ones(2, 5))
    with pytest.raises(TypeError, match="dy must be float32, bfloat16 or float16"):
        BACKWARD(x, stats, x.double())


@needs_gpu
def test_bad_statistics(forward_outputs):
    """Wrong statistics: the backward's checks name them before any CUDA kernel runs."""
    x, y, stats = forward_outputs
    with pytest.raises(TypeError, match="stats must be float32 .*, got Double"):
        BACKWARD(x, stats.double(), x)
    with pytest.raises(TypeError, match="stats must be float32 .*, got Half"):
        BACKWARD(x, stats.half(), x)
    with pytest.raises(ValueError, match=r"stats must have shape x.shape\[:-1\] \+ \(3,\) = \(2, 3\) .* got \(2, 4\)"):
        BACKWARD(x, torch.zeros(2, 4, device="cuda"), x)
    with pytest.raises(ValueError, match=r"stats must have shape .* got \(2, 5\)"):
        BACKWARD(x, y, x)  # y in place of the statistics
    with pytest.raises(ValueError, match=r"stats must have shape .* got \(6,\)"):
        BACKWARD(x, stats.reshape(6), x)
    x3 = torch.ones(2, 3, 5, device="cuda")
    with pytest.raises(ValueError, match=r"stats must have shape .* = \(2, 3, 3\)"):
        BACKWARD(x3, torch.zeros(6, 3, device="cuda"), x3)  # rows flattened
    with pytest.raises(ValueError, match="stats must be a CUDA tensor .*, got a tensor on cpu"):  # mismatched devices
        BACKWARD(x, stats.cpu(), x)
    with pytest.raises(ValueError, match="stats must be contiguous"):
        BACKWARD(x, torch.zeros(3, 2, device="cuda").t(), x)
    dx = BACKWARD(x, stats, x)  # and the right ones still work after all that
    assert dx.shape == x.shape and bool(torch.isfinite(dx).all())


@needs_gpu
def test_an_rss_status_is_a_runtime_error():
    """Host memory that torch sees as a CUDA tensor (pinned memory through __cuda_array_interface__) passes the
    operator's tensor checks; rss refuses it (not device memory) and its status becomes a RuntimeError."""
    pinned = torch.ones(2, 64, pin_memory=True)

    class HostMemory:
        __cuda_array_interface__ = {"shape": (2, 64), "typestr": "<f4", "data": (pinned.data_ptr(), False),
                                    "version": 2, "strides": None}

    x = torch.as_tensor(HostMemory(), device="cuda")
    assert x.is_cuda and x.data_ptr() == pinned.data_ptr()
    with pytest.raises(RuntimeError, match="rss.rms_scaled_softmax: rss returned '.*device"):
        FORWARD(x)
    y, stats = FORWARD(torch.ones(2, 64, device="cuda"))  # the operator still works
    assert torch.allclose(y, torch.full_like(y, 1 / 64))
