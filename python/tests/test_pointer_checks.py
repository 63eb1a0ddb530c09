"""pytest tests of when the operators skip rss's pointer queries (rss::PointerCheck::vouched, one
cudaPointerGetAttributes less per matrix): only for memory torch's CUDA allocator handed out, never merely because
torch calls a tensor CUDA. The predicate the C++ kernels use is exposed as torch.ops.rss._vouches_for and tested on
every kind of tensor; then, where the profiler records CUDA runtime calls, a planned layout's call is counted:
none for the allocator's tensors, one a pointer for a tensor around foreign memory. That pinned host memory seen as
a CUDA tensor is still refused, with its error, is test_errors.py's test_an_rss_status_is_a_runtime_error. The
CPU case runs without a GPU; without torch every test is skipped and says why.

    python3 -m pytest -v python/tests/test_pointer_checks.py
"""
import pytest

from rss_ops import BACKWARD, FORWARD, needs_gpu, torch

VOUCHES = torch.ops.rss._vouches_for


def foreign(ptr, shape, typestr="<f4"):
    """A CUDA tensor torch makes around memory it did not allocate (torch.as_tensor of an object with
    __cuda_array_interface__, as CuPy's or Numba's arrays are seen)."""

    class Foreign:
        __cuda_array_interface__ = {"shape": tuple(shape), "typestr": typestr, "data": (ptr, False), "version": 2,
                                    "strides": None}

    t = torch.as_tensor(Foreign(), device="cuda")
    assert t.is_cuda and t.data_ptr() == ptr
    return t


def test_cpu_tensors_are_not_vouched_for():
    assert not VOUCHES(torch.ones(2, 3))


@needs_gpu
def test_the_allocators_tensors_and_their_views_are_vouched_for():
    x = torch.ones(8, 64, device="cuda")
    cases = {"tensor": x, "slice": x[2:, 5:], "transpose": x.t(), "view": x.view(4, 128), "clone": x.clone(),
             "bf16": torch.empty(3, 5, device="cuda", dtype=torch.bfloat16), "randn": torch.randn(2, 7, device="cuda")}
    assert {name: bool(VOUCHES(t)) for name, t in cases.items()} == {name: True for name in cases}


@needs_gpu
def test_host_memory_is_not_vouched_for():
    pinned = torch.ones(2, 64, pin_memory=True)
    assert not VOUCHES(pinned)
    assert not VOUCHES(foreign(pinned.data_ptr(), (2, 64)))  # a CUDA tensor to torch: test_errors.py's case


@needs_gpu
def test_tensors_around_foreign_device_memory_are_not_vouched_for():
    """Device memory, but not a storage the allocator handed out: rss asks the runtime (it would answer yes)."""
    x = torch.ones(8, 64, device="cuda")
    assert VOUCHES(x)
    assert not VOUCHES(foreign(x.data_ptr(), (8, 64)))
    assert not VOUCHES(torch.from_dlpack(x))  # a DLPack import: the storage's deleter is the DLPack capsule's


def pointer_queries(call):
    """cudaPointerGetAttributes calls the profiler records during call(), and call()'s result."""
    from torch.profiler import ProfilerActivity, profile

    torch.cuda.synchronize()
    with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as prof:
        out = call()
        torch.cuda.synchronize()
    return sum(e.count for e in prof.key_averages() if e.key == "cudaPointerGetAttributes"), out


@needs_gpu
def test_a_planned_layout_asks_the_runtime_only_for_foreign_memory():
    """Same layout, same memory, two tensors: the allocator's (no query) and a foreign view of it (x, y and the
    statistics queried in the forward; x, the statistics, dy and dx in the backward). The foreign case comes first
    and must be counted, so that a profiler blind to runtime calls skips the test instead of passing it."""
    rows, cols = 8, 4096
    x = torch.randn(rows, cols, device="cuda")
    dy = torch.randn(rows, cols, device="cuda")
    x_foreign = foreign(x.data_ptr(), (rows, cols))
    dy_foreign = foreign(dy.data_ptr(), (rows, cols))
    y, stats = FORWARD(x)  # plans the layouts (initialize asks the runtime whatever the vouch)
    BACKWARD(x, stats, dy)

    n_foreign, (y_foreign, stats_foreign) = pointer_queries(lambda: FORWARD(x_foreign))
    if n_foreign == 0:
        pytest.skip("the profiler records no CUDA runtime calls on this machine: nothing to count")
    assert n_foreign >= 3
    n_own, (y_own, stats_own) = pointer_queries(lambda: FORWARD(x))
    assert n_own == 0
    assert torch.equal(y_own, y_foreign) and torch.equal(stats_own, stats_foreign)

    n_foreign, dx_foreign = pointer_queries(lambda: BACKWARD(x, stats, dy_foreign))
    assert n_foreign >= 4
    n_own, dx_own = pointer_queries(lambda: BACKWARD(x, stats, dy))
    assert n_own == 0
    assert torch.equal(dx_own, dx_foreign)
