"""pytest tests of the PyTorch operator (rss_torch): forward, the row statistics it saves and the backward
(from x, the statistics and dy) against the composed torch expression in float64, strided and batched tensors,
torch.compile(fullgraph=True), CUDA Graph capture and replay, torch.library.opcheck on both operators, and how
the calls are made (autograd in C++, the inference path, the bounded plan cache). The errors wrong inputs give are
in test_errors.py. Without torch or without a CUDA device every test is skipped and says why.

    pip install --no-build-isolation "./python[test]"      # once: builds the extension
    python3 -m pytest -v python/tests
"""
import pytest

from rss_ops import rss_torch, torch

if not torch.cuda.is_available():
    pytest.skip("no CUDA device: the PyTorch operator's tests need one", allow_module_level=True)

DTYPES = {"fp32": torch.float32, "bf16": torch.bfloat16, "fp16": torch.float16}
# Per-row relative error against float64, on top of the error the storage type makes rounding the exact answer.
FORWARD_TOL = {torch.float32: 1e-5, torch.bfloat16: 1e-2, torch.float16: 1e-2}
# On top of the rounding of dx. The backward recomputes y in float32 from x and the saved statistics.
BACKWARD_TOL = {torch.float32: 2e-5, torch.bfloat16: 3e-2, torch.float16: 1e-2}
# Relative error of the saved inv_rms and sum against float64 (the max is exact). The arithmetic is float32
# whatever the storage type; 16-bit inputs get some room for their kernels' other reduction orders.
STATS_TOL = {torch.float32: 1e-5, torch.bfloat16: 1e-4, torch.float16: 1e-4}


def make_input(shape, dtype, seed=0):
    g = torch.Generator(device="cuda").manual_seed(seed)
    rows_shape = shape[:-1] + (1,)
    scale = torch.empty(rows_shape, device="cuda").uniform_(0.25, 4.0, generator=g)
    offset = torch.empty(rows_shape, device="cuda").uniform_(-2.0, 2.0, generator=g)
    u = torch.empty(shape, device="cuda").uniform_(-4.0, 4.0, generator=g)
    x = scale * (u + offset)
    x = torch.where(x == 0, torch.full_like(x, 1e-3), x)
    return x.to(dtype)


def make_grad(shape, dtype, seed=1):
    g = torch.Generator(device="cuda").manual_seed(seed)
    return torch.empty(shape, device="cuda").uniform_(-1.0, 1.0, generator=g).to(dtype)


def row_errors(got, ref, denom=None):
    """Per-row relative error ||got - ref|| / denom (denom: ||ref|| per row unless given), and the error of
    ref rounded to got's dtype (what storing the exact answer costs)."""
    got64 = got.double().reshape(-1, got.shape[-1])
    ref64 = ref.double().reshape(-1, ref.shape[-1])
    if denom is None:
        denom = ref64.norm(dim=-1)
    stored = ref64.to(got.dtype).double()
    return (got64 - ref64).norm(dim=-1) / denom, (stored - ref64).norm(dim=-1) / denom


def check_forward(y, x):
    ref = rss_torch.composed(x.double())
    err, rounding = row_errors(y, ref)
    bound = FORWARD_TOL[y.dtype] + rounding
    assert bool((err <= bound).all()), f"forward error {err.max().item():.3e} above {bound.max().item():.3e}"


def reference_grad(x, dy):
    x64 = x.detach().double().requires_grad_(True)
    y64 = rss_torch.composed(x64)
    (dx64,) = torch.autograd.grad(y64, x64, dy.double())
    # The scale fp32 arithmetic errs against: max(||dx||, r ||y * dy||) per row.
    r = torch.rsqrt(x64.detach().square().mean(-1, keepdim=True) + rss_torch.EPS)
    yg = (r * y64.detach() * dy.double()).reshape(-1, x.shape[-1]).norm(dim=-1)
    return dx64, torch.maximum(dx64.reshape(-1, x.shape[-1]).norm(dim=-1), yg)


def reference_statistics(x):
    """Each row's (max, inv_rms, sum) in float64, as rss::RowStatistics defines them."""
    x64 = x.detach().double()
    m = x64.amax(-1)
    r = torch.rsqrt(x64.square().mean(-1) + rss_torch.EPS)
    s = torch.exp(r.unsqueeze(-1) * (x64 - m.unsqueeze(-1))).sum(-1)
    return m, r, s


def y_from_statistics(x, stats):
    """y = exp(inv_rms (x - max)) / sum in float64 from the saved statistics (what the backward recomputes)."""
    st = stats.double()
    m, r, s = st[..., 0:1], st[..., 1:2], st[..., 2:3]
    return torch.exp(r * (x.detach().double() - m)) / s


def formula_grad(x, y, dy, r=None):
    """dx = r y (g - c) - (r^3/N) x (p - c q) in float64 from y (and r, default from x) as given."""
    x64, y64, g64 = x.detach().double(), y.detach().double(), dy.double()
    n = x.shape[-1]
    if r is None:
        r = torch.rsqrt(x64.square().mean(-1, keepdim=True) + rss_torch.EPS)
    c = (g64 * y64).sum(-1, keepdim=True)
    p = (y64 * g64 * x64).sum(-1, keepdim=True)
    q = (y64 * x64).sum(-1, keepdim=True)
    return r * y64 * (g64 - c) - r ** 3 / n * x64 * (p - c * q)


def check_backward(dx, x, dy, stats=None):
    """dx against float64 autograd of the composed expression (the backward recomputes y from x and the
    statistics, so no stored y's rounding enters). Given the statistics the backward read, also the kernel's
    own error: against the formula on y and r from those same statistics."""
    ref, denom = reference_grad(x, dy)
    assert dx.shape == x.shape and dx.dtype == x.dtype
    err, rounding = row_errors(dx, ref, denom)
    bound = BACKWARD_TOL[dx.dtype] + rounding
    assert bool((err <= bound).all()), f"backward error {err.max().item():.3e} above {bound.max().item():.3e}"
    if stats is not None:
        formula = formula_grad(x, y_from_statistics(x, stats), dy, stats[..., 1:2].double())
        own, _ = row_errors(dx, formula, denom)
        assert bool((own <= bound).all()), f"backward error {own.max().item():.3e} against the saved statistics"


def check_statistics(stats, x):
    assert stats.dtype == torch.float32 and stats.is_contiguous() and stats.device == x.device
    assert stats.shape == x.shape[:-1] + (3,), f"statistics of shape {tuple(stats.shape)} for x {tuple(x.shape)}"
    m, r, s = reference_statistics(x)
    got = stats.double()
    assert torch.equal(got[..., 0], m), "the saved max is not the row's max"
    tol = STATS_TOL[x.dtype]
    for k, name, ref in ((1, "inv_rms", r), (2, "sum", s)):
        rel = ((got[..., k] - ref).abs() / ref).max().item() if ref.numel() else 0.0
        assert rel <= tol, f"saved {name}: relative error {rel:.3e} above {tol:.0e}"


SHAPES = [(1, 1), (3, 7), (8, 1000), (5, 4099), (64, 4096), (2, 65536), (4, 131072), (2, 200003), (32, 128256)]


@pytest.mark.parametrize("dtype", DTYPES.values(), ids=DTYPES.keys())
@pytest.mark.parametrize("shape", SHAPES, ids=[f"{r}x{c}" for r, c in SHAPES])
def test_forward_and_backward_match_float64(shape, dtype):
    x = make_input(shape, dtype).requires_grad_(True)
    dy = make_grad(shape, dtype)
    y = rss_torch.rms_scaled_softmax(x)
    check_forward(y, x.detach())
    (dx,) = torch.autograd.grad(y, x, dy)
    check_backward(dx, x, dy)


def strided_and_batched_cases(dtype):
    return {
        "2-D strided rows": make_input((6, 1005), dtype)[:, 2:1002],
        "3-D contiguous": make_input((2, 3, 777), dtype),
        "3-D slice of the last dimension": make_input((2, 3, 800), dtype)[..., :777],
        "4-D with unit dimensions": make_input((1, 4, 1, 513), dtype),
        "transposed batch (copied)": make_input((3, 2, 300), dtype).transpose(0, 1),
        "strided last dimension (copied)": make_input((4, 1000), dtype)[:, ::2],
    }


@pytest.mark.parametrize("dtype", DTYPES.values(), ids=DTYPES.keys())
def test_strided_and_batched_tensors(dtype):
    for name, base in strided_and_batched_cases(dtype).items():
        x = base.detach().requires_grad_(True)
        y = rss_torch.rms_scaled_softmax(x)
        assert y.shape == x.shape and y.is_contiguous(), name
        check_forward(y, x.detach())
        dy = make_grad(tuple(x.shape), dtype)
        (dx,) = torch.autograd.grad(y, x, dy)
        check_backward(dx, x, dy)


@pytest.mark.parametrize("dtype", DTYPES.values(), ids=DTYPES.keys())
def test_row_statistics_match_float64(dtype):
    cases = {f"{r}x{c}": make_input((r, c), dtype) for r, c in SHAPES}
    cases.update(strided_and_batched_cases(dtype))
    for name, x in cases.items():
        y, stats = torch.ops.rss.rms_scaled_softmax(x)
        check_forward(y, x)
        try:
            check_statistics(stats, x)
        except AssertionError as e:
            raise AssertionError(f"{name}: {e}") from None


def make_spiky(rows, cols, dtype, seed=0):
    """Rows that a few entries dominate, of seven kinds in turn (the C++ tests' family): one spike of 30 in zeros;
    one of 50 in unit noise; two of 100 in noise of 0.5; noise of 1e-3 around an offset of up to 1e-2 with a
    spike of 12 times the scale (eps dominates the mean square); noise at a scale from 1e-30 (fp16: 1e-3) to
    3e38 / 8 (fp16: 6e4 / 8) with a spike of 8 times it; unit noise with one entry of 3e38 / 4 (fp16: 6e4 / 4);
    noise of 2e18 with every 32nd entry +-2e19 (fp16: 6e4 / 8 and / 2), whose squares pass FLT_MAX in those
    entries' runs only."""
    g = torch.Generator().manual_seed(seed)
    lo, hi = (1e-3, 6e4) if dtype == torch.float16 else (1e-30, 3e38)
    x = torch.empty(rows, cols, dtype=torch.float64)
    for i in range(rows):
        u = torch.rand(cols, generator=g, dtype=torch.float64) * 2 - 1
        at = torch.randint(cols, (2,), generator=g)
        kind = i % 7
        if kind == 0:
            x[i] = 0.0
            x[i, at[0]] = 30.0
        elif kind == 1:
            x[i] = u
            x[i, at[0]] = 50.0
        elif kind == 2:
            x[i] = 0.5 * u
            x[i, at] = 100.0
        elif kind == 3:
            offset = 1e-2 * (torch.rand(1, generator=g, dtype=torch.float64).item() * 2 - 1)
            x[i] = offset + 1e-3 * u
            x[i, at[0]] = offset + 12e-3
        elif kind == 4:
            low, high = torch.tensor([lo, hi / 8], dtype=torch.float64).log()
            scale = torch.exp(low + (high - low) * torch.rand(1, generator=g, dtype=torch.float64)).item()
            x[i] = scale * u
            x[i, at[0]] = 8 * scale
        elif kind == 5:
            x[i] = u
            x[i, at[0]] = hi / 4
        else:
            x[i] = min(2e18, hi / 8) * u
            sign = torch.where(torch.rand(cols, generator=g) < 0.5, -1.0, 1.0).to(torch.float64)
            first = int(at[0]) % 32
            x[i, first::32] = min(2e19, hi / 2) * sign[first::32]
    return x.to(dtype).cuda()


@pytest.mark.parametrize("dtype", DTYPES.values(), ids=DTYPES.keys())
@pytest.mark.parametrize("shape", [(14, 1000), (7, 4096), (14, 32768), (7, 131072)], ids=lambda s: f"{s[0]}x{s[1]}")
def test_rows_that_a_few_entries_dominate(shape, dtype):
    """The statistics are the numbers the forward normalised with (their sum within fp32's 2e-6 of the exact sum
    and of the sum the saved max and r give), and the backward from them meets its bound on such rows."""
    x = make_spiky(*shape, dtype).requires_grad_(True)
    y, stats = torch.ops.rss.rms_scaled_softmax(x.detach())
    check_forward(y, x.detach())
    check_statistics(stats, x.detach())
    m, r, s = reference_statistics(x)
    own = torch.exp(stats[:, 1:2].double() * (x.detach().double() - stats[:, 0:1].double())).sum(-1)
    for name, want in (("exact sum", s), ("sum from the saved max and r", own)):
        rel = ((stats[:, 2].double() - want).abs() / want).max().item()
        assert rel <= 2e-6, f"saved sum: relative error {rel:.3e} against the {name}"
    dy = make_grad(shape, dtype)
    y = rss_torch.rms_scaled_softmax(x)
    (dx,) = torch.autograd.grad(y, x, dy)
    check_backward(dx, x, dy, stats)


def test_autograd_saves_x_and_the_statistics_not_y():
    x = make_input((3, 2, 500), torch.bfloat16).requires_grad_(True)
    saved = []

    def pack(t):
        saved.append((tuple(t.shape), t.dtype))
        return t

    with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
        y = rss_torch.rms_scaled_softmax(x)
    assert sorted(saved, key=str) == sorted([((3, 2, 500), torch.bfloat16), ((3, 2, 3), torch.float32)], key=str)
    with torch.no_grad():
        y.zero_()  # were y saved, autograd would refuse the backward now
    dy = make_grad((3, 2, 500), torch.bfloat16)
    (dx,) = torch.autograd.grad(y, x, dy)
    check_backward(dx, x, dy)


def test_gradient_of_a_sum_uses_a_broadcast_dy():
    x = make_input((4, 300), torch.float32).requires_grad_(True)
    w = make_grad((300,), torch.float32)
    y = rss_torch.rms_scaled_softmax(x)
    (y * w).sum().backward()  # dy = w broadcast over rows (stride 0)
    check_backward(x.grad, x, w.expand(4, 300))


def test_backward_operator_directly_and_in_place_layouts():
    cases = {
        "contiguous": make_input((5, 999), torch.bfloat16),
        "strided rows": make_input((5, 1100), torch.bfloat16)[:, 50:1049],
        "3-D": make_input((2, 3, 999), torch.float32),
    }
    for name, x in cases.items():
        y, stats = torch.ops.rss.rms_scaled_softmax(x)
        check_statistics(stats, x)
        dy = make_grad(tuple(x.shape), x.dtype)
        dx = torch.ops.rss.rms_scaled_softmax_backward(x, stats, dy)
        assert dx.is_contiguous(), name
        check_backward(dx, x, dy, stats)


def test_empty_tensors():
    for shape in ((0, 5), (2, 0, 5), (3, 0)):
        x = torch.empty(shape, device="cuda", requires_grad=True)
        y = rss_torch.rms_scaled_softmax(x)
        assert y.shape == shape
        assert torch.ops.rss.rms_scaled_softmax(x.detach())[1].shape == shape[:-1] + (3,)
        y.sum().backward()
        assert x.grad.shape == shape


def test_torch_compile_fullgraph_has_no_graph_break():
    class Block(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.proj = torch.nn.Linear(256, 256, device="cuda")
            self.softmax = rss_torch.RmsScaledSoftmax()

        def forward(self, x):
            return (self.softmax(self.proj(x)) * x).sum(-1)

    torch.manual_seed(0)
    model = Block()
    compiled = torch.compile(model, fullgraph=True)
    x = make_input((2, 16, 256), torch.float32).requires_grad_(True)
    out = compiled(x)
    out.sum().backward()
    grad_compiled = x.grad.clone()
    # The same model in eager mode with the composed expression.
    x2 = x.detach().clone().requires_grad_(True)
    ref = (rss_torch.composed(model.proj(x2)) * x2).sum(-1)
    ref.sum().backward()
    torch.testing.assert_close(out, ref, rtol=1e-4, atol=1e-5)
    torch.testing.assert_close(grad_compiled, x2.grad, rtol=1e-4, atol=1e-5)


def test_cuda_graph_capture_and_replay():
    shape, dtype = (32, 4096), torch.bfloat16
    x = make_input(shape, dtype).requires_grad_(True)
    dy = make_grad(shape, dtype)
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        for _ in range(3):  # warm-up outside the capture: builds rss's per-shape state
            y = rss_torch.rms_scaled_softmax(x)
            torch.autograd.grad(y, x, dy)
    torch.cuda.current_stream().wait_stream(side)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        y_static = rss_torch.rms_scaled_softmax(x)
        (dx_static,) = torch.autograd.grad(y_static, x, dy)
    for seed in (7, 8):  # new data in the captured buffers, then replay
        with torch.no_grad():
            x.copy_(make_input(shape, dtype, seed=seed))
            dy.copy_(make_grad(shape, dtype, seed=seed + 100))
        graph.replay()
        torch.cuda.synchronize()
        check_forward(y_static, x.detach())
        check_backward(dx_static, x, dy)


OPCHECK_CASES = {
    "fp32 2-D": ((4, 1000), torch.float32, None),
    "bf16 3-D": ((2, 3, 777), torch.bfloat16, None),
    "fp16 strided rows": ((5, 1100), torch.float16, (slice(None), slice(50, 1049))),
    "fp32 long rows": ((2, 65536), torch.float32, None),
}


@pytest.mark.parametrize("case", OPCHECK_CASES.keys())
def test_opcheck_forward(case):
    """Schema, fake kernel against the CUDA kernel, autograd registration and AOT dispatch (static and dynamic
    shapes) of rss::rms_scaled_softmax, with and without a gradient wanted."""
    shape, dtype, view = OPCHECK_CASES[case]
    x = make_input(shape, dtype)
    if view is not None:
        x = x[view]
    torch.library.opcheck(torch.ops.rss.rms_scaled_softmax.default, (x,))
    torch.library.opcheck(torch.ops.rss.rms_scaled_softmax.default, (x.detach().clone().requires_grad_(True),))


@pytest.mark.parametrize("case", OPCHECK_CASES.keys())
def test_opcheck_backward(case):
    shape, dtype, view = OPCHECK_CASES[case]
    x = make_input(shape, dtype)
    if view is not None:
        x = x[view]
    _, stats = torch.ops.rss.rms_scaled_softmax(x)
    dy = make_grad(tuple(x.shape), dtype)
    torch.library.opcheck(torch.ops.rss.rms_scaled_softmax_backward.default, (x, stats, dy))
    dy_columns = dy.transpose(-1, -2).contiguous().transpose(-1, -2)  # a layout the kernel copies first
    torch.library.opcheck(torch.ops.rss.rms_scaled_softmax_backward.default, (x, stats, dy_columns))


def test_torch_compile_fullgraph_of_the_operators_with_dynamic_shapes():
    """The operators themselves in a compiled function (their fake kernels with symbolic shapes), forward and
    backward, against eager calls of the same operators."""
    def f(x):
        y, stats = torch.ops.rss.rms_scaled_softmax(x)
        return y * 2, stats

    compiled = torch.compile(f, fullgraph=True, dynamic=True)
    for rows, cols in ((4, 300), (7, 513), (3, 4096)):
        x = make_input((rows, cols), torch.bfloat16).requires_grad_(True)
        y, stats = compiled(x)
        y_eager, stats_eager = torch.ops.rss.rms_scaled_softmax(x.detach())
        torch.testing.assert_close(y, y_eager * 2)
        torch.testing.assert_close(stats, stats_eager)
        dy = make_grad((rows, cols), torch.bfloat16)
        (dx,) = torch.autograd.grad(y, x, dy)
        check_backward(dx, x, 2 * dy)


def test_autograd_is_a_cpp_node_and_stats_are_not_differentiable():
    """One eager forward + backward runs without Python: the autograd node is the extension's C++ Function."""
    x = make_input((3, 500), torch.float32).requires_grad_(True)
    y, stats = torch.ops.rss.rms_scaled_softmax(x)
    name = y.grad_fn.name()  # torch::autograd::CppNode<(anonymous namespace)::RmsScaledSoftmax>
    assert "CppNode" in name and "RmsScaledSoftmax" in name, name
    assert not stats.requires_grad and stats.grad_fn is None
    y2 = rss_torch.rms_scaled_softmax(x)
    assert y2.grad_fn.name() == y.grad_fn.name()


def test_inference_calls_record_no_graph():
    x = make_input((3, 500), torch.float32)
    y, stats = torch.ops.rss.rms_scaled_softmax(x)
    assert y.grad_fn is None and not y.requires_grad
    with torch.no_grad():
        y = rss_torch.rms_scaled_softmax(x.requires_grad_(True))
    assert y.grad_fn is None and not y.requires_grad
    check_forward(y, x.detach())
    with torch.inference_mode():
        y = rss_torch.rms_scaled_softmax(make_input((3, 500), torch.bfloat16))
    check_forward(y, make_input((3, 500), torch.bfloat16))


def test_forward_mode_ad_is_refused_not_dropped():
    """The C++ Function has no JVP: a dual tensor must raise, never return y without its tangent."""
    import torch.autograd.forward_ad as fwAD

    x = make_input((2, 100), torch.float32)
    with fwAD.dual_level():
        dual = fwAD.make_dual(x, torch.ones_like(x))
        with pytest.raises(RuntimeError, match="jvp"):
            rss_torch.rms_scaled_softmax(dual)


def test_plan_cache_is_bounded_and_plans_again_after_eviction():
    """More layouts than the extension keeps (512 per type and direction), twice: the second pass finds the
    earliest layouts evicted and plans them again, with correct results throughout."""
    for _ in range(2):
        for cols in range(1, 530):
            x = make_input((2, cols), torch.float32).requires_grad_(True)
            y = rss_torch.rms_scaled_softmax(x)
            dy = make_grad((2, cols), torch.float32)
            (dx,) = torch.autograd.grad(y, x, dy)
            if cols < 5 or cols % 64 == 0:
                check_forward(y, x.detach())
                check_backward(dx, x, dy)
