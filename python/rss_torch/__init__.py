"""rss as a PyTorch operator: rms_scaled_softmax with autograd, torch.compile and CUDA Graphs.

    import rss_torch
    y = rss_torch.rms_scaled_softmax(x)          # x: CUDA, float32/bfloat16/float16, at least 2-D
    y.backward(dy)                               # calls rss's backward pass

The C++/CUDA extension is built ahead of time (`pip install --no-build-isolation ./python`, setup.py), for the
architectures of TORCH_CUDA_ARCH_LIST (default 8.0, 9.0, 10.0 and PTX). It defines and implements two
operators in C++, their CUDA kernels (input checks, output allocation, rss) and their autograd formula:

    torch.ops.rss.rms_scaled_softmax(Tensor x) -> (Tensor, Tensor)                          (y, stats)
    torch.ops.rss.rms_scaled_softmax_backward(Tensor x, Tensor stats, Tensor dy) -> Tensor   (dx)

y and dx are contiguous, of x's shape and dtype; stats holds each row's statistics (max of x, inv_rms = r and
the sum of exp(r (x - max))): float32, contiguous, of shape x.shape[:-1] + (3,), 12 bytes a row. The forward
saves x and stats (not y, which need not be kept), the backward reads x, stats and dy and recomputes y (rows =
all but the last dimension; strided rows are read in place, other layouts copied). This module loads the
extension and registers the fake (meta) kernels that tracing (torch.compile) needs; rms_scaled_softmax(x)
returns y only.
"""
import glob
import importlib.metadata
import os

import torch

__all__ = ["rms_scaled_softmax", "RmsScaledSoftmax", "composed", "DTYPES"]
__version__ = importlib.metadata.version("rss-torch")

DTYPES = (torch.float32, torch.bfloat16, torch.float16)
EPS = 1e-5


def _load_extension():
    here = os.path.dirname(os.path.abspath(__file__))
    built = sorted(glob.glob(os.path.join(here, "_C*.so")))
    if not built:
        raise ImportError("rss_torch: its C++/CUDA extension is not built: install the package with "
                          "`pip install --no-build-isolation ./python` (or -e for development) from an rss checkout")
    torch.ops.load_library(built[0])


_load_extension()


def _check(x, name="x", op="rss.rms_scaled_softmax"):
    if not isinstance(x, torch.Tensor):
        raise TypeError(f"{op}: {name} must be a torch.Tensor, got {type(x).__name__}")
    if x.device.type != "cuda":
        raise ValueError(f"{op}: {name} must be a CUDA tensor, got a tensor on {x.device}")
    if x.dtype not in DTYPES:
        raise TypeError(f"{op}: {name} must be float32, bfloat16 or float16, got {x.dtype}")
    if x.dim() < 2:
        raise ValueError(f"{op}: {name} must have at least 2 dimensions (rows = all but the last), got a "
                         f"{x.dim()}-D tensor; use x.unsqueeze(0) for a single row")


def _stats_shape(x):
    return x.shape[:-1] + (3,)


def _check_backward(x, stats, dy):
    op = "rss.rms_scaled_softmax_backward"
    for name, t in (("x", x), ("dy", dy)):
        _check(t, name, op)
    if x.shape != dy.shape:
        raise ValueError(f"{op}: x and dy must have the same shape, got {tuple(x.shape)} and {tuple(dy.shape)}")
    if x.dtype != dy.dtype:
        raise TypeError(f"{op}: x and dy must have the same dtype, got {x.dtype} and {dy.dtype}")
    if x.device != dy.device:
        raise ValueError(f"{op}: x and dy must be on the same device, got {x.device} and {dy.device}")
    what = "the row statistics rss.rms_scaled_softmax returned with y"
    if not isinstance(stats, torch.Tensor):
        raise TypeError(f"{op}: stats must be a torch.Tensor ({what}), got {type(stats).__name__}")
    if stats.device.type != "cuda":
        raise ValueError(f"{op}: stats must be a CUDA tensor ({what}), got a tensor on {stats.device}")
    if stats.dtype != torch.float32:
        raise TypeError(f"{op}: stats must be float32 ({what}), got {stats.dtype}")
    if stats.shape != _stats_shape(x):
        raise ValueError(f"{op}: stats must have shape x.shape[:-1] + (3,) = {tuple(_stats_shape(x))} ({what}), "
                         f"got {tuple(stats.shape)}")
    if not stats.is_contiguous():
        raise ValueError(f"{op}: stats must be contiguous ({what})")
    if stats.device != x.device:
        raise ValueError(f"{op}: x and stats must be on the same device, got {x.device} and {stats.device}")


# The fake kernels: shapes and dtypes for tracing, with the CUDA kernels' checks (the same exception types).
@torch.library.register_fake("rss::rms_scaled_softmax")
def _forward_fake(x):
    _check(x)
    return x.new_empty(x.shape), x.new_empty(_stats_shape(x), dtype=torch.float32)


@torch.library.register_fake("rss::rms_scaled_softmax_backward")
def _backward_fake(x, stats, dy):
    _check_backward(x, stats, dy)
    return x.new_empty(x.shape)


_forward = torch.ops.rss.rms_scaled_softmax.default  # the overload itself: one lookup less per call


def rms_scaled_softmax(x):
    """y = rms_scaled_softmax(x) over the last dimension (rows = all others), differentiable."""
    if not isinstance(x, torch.Tensor):  # the schema would say it with a RuntimeError
        raise TypeError(f"rss.rms_scaled_softmax: x must be a torch.Tensor, got {type(x).__name__}")
    return _forward(x)[0]


class RmsScaledSoftmax(torch.nn.Module):
    """The operator as a module (for torch.compile and models)."""

    def forward(self, x):
        return rms_scaled_softmax(x)


def composed(x):
    """The same operator composed of torch operations (the peer and the tests' reference): arithmetic in
    float32 for 16-bit inputs, in the input's type otherwise."""
    xf = x if x.dtype == torch.float64 else x.float()
    r = torch.rsqrt(xf.square().mean(-1, keepdim=True) + EPS)
    e = torch.exp(r * (xf - xf.amax(-1, keepdim=True).detach()))  # softmax ignores the shift
    return (e / e.sum(-1, keepdim=True)).to(x.dtype)
