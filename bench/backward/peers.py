#!/usr/bin/env python3
"""torch peers of the backward pass, and forward+backward through the PyTorch operator.

    python3 bench/backward/peers.py --shapes 32x128256,4096x4096 --dtypes fp32,bf16 --rounds 3 \
        --iterations 50 --out peers.json

Backward only (dx from x, y and dy; the forward ran before timing, its graph retained):
  torch_eager_bwd, torch_eager_bwd_graph      autograd backward of the composed torch expression, eager
  torch_compile_bwd, torch_compile_bwd_graph  the same through torch.compile (AOTAutograd's compiled backward)
  rss_op_bwd, rss_op_bwd_graph                torch.ops.rss.rms_scaled_softmax_backward (the rss_torch package, python/) on x,
                                              dy and the row statistics its forward op returned for x (y not read)
Forward + backward (a training step's share of the operator: y = f(x), then dx from dy):
  torch_eager_fwdbwd, torch_compile_fwdbwd(_graph), rss_op_fwdbwd(_graph)
`_graph`: captured once in a CUDA Graph after warm-up, timed as graph.replay().

Per (shape, dtype), in every round the variants run in an order shuffled by random.Random(seed/shape/round),
each built afresh (its forward, its graph capture) and released after its turn: warm calls, then `iterations` host samples (time.perf_counter around the call and
torch.cuda.synchronize); the round's record keeps their median, p10, p90 and one batched event interval
(device_us). max_rel_err: per row ||dx - ref|| / ||ref|| against float64 autograd, the worst row.
Without torch or CUDA it says so and exits with code 3. A variant that fails is reported and skipped.
"""
import argparse
import json
import os
import random
import statistics
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "rssbench"))
import peer_support  # noqa: E402  (what the peers share)

EXIT_NO_TORCH = peer_support.EXIT_NO_TORCH
EPS = 1e-5
WARM_CALLS = 3
VARIANTS = ("torch_eager_bwd", "torch_eager_bwd_graph", "torch_compile_bwd", "torch_compile_bwd_graph", "rss_op_bwd",
            "rss_op_bwd_graph", "torch_eager_fwdbwd", "torch_compile_fwdbwd", "torch_compile_fwdbwd_graph",
            "rss_op_fwdbwd", "rss_op_fwdbwd_graph")


def composed(x):
    """The operator in plain torch; bf16/fp16 I/O with fp32 arithmetic."""
    xf = x.float()
    r = torch.rsqrt(xf.square().mean(-1, keepdim=True) + EPS)
    e = torch.exp(r * (xf - xf.amax(-1, keepdim=True).detach()))  # softmax ignores the shift
    return (e / e.sum(-1, keepdim=True)).to(x.dtype)


def reference_dx(x, dy):
    x64 = x.detach().double().requires_grad_(True)
    r = torch.rsqrt(x64.square().mean(-1, keepdim=True) + EPS)
    e = torch.exp(r * (x64 - x64.amax(-1, keepdim=True).detach()))
    (dx,) = torch.autograd.grad(e / e.sum(-1, keepdim=True), x64, dy.double())
    return dx


def max_rel_err(dx, ref):
    return ((dx.double() - ref).norm(dim=-1) / ref.norm(dim=-1)).max().item()


def capture(fn, stream):
    """A CUDA Graph of fn() captured on `stream` after warm-up there (the forward of a backward-only variant
    ran on the same stream, so its backward kernels are captured too)."""
    with torch.cuda.stream(stream):
        for _ in range(WARM_CALLS):
            fn()
    stream.synchronize()
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph, stream=stream):
        out = fn()
    return graph, out


def parse_shapes(text):
    return [tuple(int(v) for v in item.strip().lower().split("x")) for item in text.split(",") if item.strip()]


def make_variants(name, x, dy, compiled, rss_torch, stream):
    """The callables of one variant family: (call, result) where result() returns the latest dx."""
    def bwd_only(forward):
        with torch.cuda.stream(stream):
            y = forward(x)
        stream.synchronize()
        return lambda: torch.autograd.grad(y, x, dy, retain_graph=True)[0]

    def fwdbwd(forward):
        return lambda: torch.autograd.grad(forward(x), x, dy)[0]

    def rss_bwd_only():
        _, stats = torch.ops.rss.rms_scaled_softmax(x.detach())  # what its autograd formula saves, with x
        return lambda: torch.ops.rss.rms_scaled_softmax_backward(x.detach(), stats, dy)

    fns = {
        "torch_eager_bwd": lambda: bwd_only(composed),
        "torch_compile_bwd": lambda: bwd_only(compiled),
        "rss_op_bwd": rss_bwd_only,
        "torch_eager_fwdbwd": lambda: fwdbwd(composed),
        "torch_compile_fwdbwd": lambda: fwdbwd(compiled),
        "rss_op_fwdbwd": lambda: fwdbwd(rss_torch.rms_scaled_softmax),
    }
    base = name[:-len("_graph")] if name.endswith("_graph") else name
    fn = fns[base]()
    if name.endswith("_graph"):
        graph, out = capture(fn, stream)
        return graph.replay, (lambda: out), graph
    return fn, fn, None


def main(argv=None):
    global torch
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--shapes", default="32x128256,4096x4096,16384x8192,4096x32768,1x131072,64x131072")
    ap.add_argument("--dtypes", default="fp32,bf16")
    ap.add_argument("--variants", default=",".join(VARIANTS))
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--iterations", type=int, default=50)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--out", required=True)
    ap.add_argument("--trace", action="store_true", help="print each variant as it starts (to find a failing one)")
    args = ap.parse_args(argv)
    variants = [v for v in args.variants.split(",") if v]
    if not set(variants) <= set(VARIANTS):
        ap.error(f"--variants must be within {VARIANTS}")
    torch = peer_support.torch_with_cuda("peers.py")
    if torch is None:
        return EXIT_NO_TORCH
    import torch._dynamo
    import torch._functorch.config
    rss_torch = None
    if any(v.startswith("rss_op") for v in variants):
        import rss_torch  # the installed package: pip install --no-build-isolation ./python
    work = [(r, c, d) for r, c in parse_shapes(args.shapes) for d in args.dtypes.split(",")]
    for name in ("cache_size_limit", "recompile_limit"):
        if hasattr(torch._dynamo.config, name):
            setattr(torch._dynamo.config, name, max(64, 4 * len(work)))
    # The backward-only variants call a compiled backward many times on one retained graph, which donated
    # buffers forbid (torch.compile refuses retain_graph=True then); they only save memory.
    torch._functorch.config.donated_buffer = False
    compiled = torch.compile(composed, dynamic=False)
    props = torch.cuda.get_device_properties(0)
    doc = {"producer": "backward_torch_peers",
           "context": {"gpu": props.name, "sm_count": props.multi_processor_count, "torch": torch.__version__,
                       "cuda": str(torch.version.cuda), "rounds": args.rounds, "iterations": args.iterations,
                       "seed": args.seed, "shapes": args.shapes, "dtypes": args.dtypes, "variants": variants},
           "records": [], "failures": []}
    stream = torch.cuda.Stream()
    for index, (rows, cols, dtype) in enumerate(work):
        print(f"[{index + 1}/{len(work)}] {rows}x{cols} {dtype}", file=sys.stderr)
        tdtype = {"fp32": torch.float32, "bf16": torch.bfloat16, "fp16": torch.float16}[dtype]
        gen = torch.Generator(device="cuda").manual_seed(42 + rows * 1000003 + cols)
        scale = torch.empty(rows, 1, device="cuda").uniform_(0.25, 4.0, generator=gen)
        x = (scale * torch.empty(rows, cols, device="cuda").uniform_(-4, 4, generator=gen) + 1e-3).to(tdtype)
        x.requires_grad_(True)
        dy = torch.empty(rows, cols, device="cuda").uniform_(-1, 1, generator=gen).to(tdtype)
        ref = reference_dx(x, dy)
        # Each variant is built (warm-up, graph capture) just before it is timed and released right after, so
        # no variant's graphs or retained autograd state outlive its turn: with every variant kept alive
        # at once, torch's own eager-backward graph replay hit an illegal address at 32 x 128256 bf16
        # (bench/NOTES.md). The accuracy check runs on each variant's first build.
        errors, failed = {}, set()
        begin, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        for rnd in range(args.rounds):
            order = [v for v in variants if v not in failed]
            random.Random(f"backward-peers/{args.seed}/{rows}x{cols}/{dtype}/{rnd}").shuffle(order)
            for variant in order:
                if args.trace:
                    print(f"  round {rnd}: {variant}", file=sys.stderr)
                try:
                    call, result, graph = make_variants(variant, x, dy, compiled, rss_torch, stream)
                    for _ in range(WARM_CALLS):
                        call()
                    torch.cuda.synchronize()
                    if variant not in errors:
                        errors[variant] = max_rel_err(result(), ref)
                except Exception as e:  # noqa: BLE001 (a failing peer is reported, the others still run)
                    msg = f"{type(e).__name__}: {str(e).splitlines()[0] if str(e) else ''}"
                    print(f"  {variant} failed: {msg}", file=sys.stderr)
                    doc["failures"].append({"rows": rows, "cols": cols, "dtype": dtype, "variant": variant,
                                            "error": msg})
                    failed.add(variant)
                    continue
                host, interval = peer_support.time_call(call, args.iterations, torch.cuda.synchronize, begin, end)
                host.sort()
                doc["records"].append({
                    "rows": rows, "cols": cols, "dtype": dtype, "variant": variant, "round": rnd,
                    "host_us": statistics.median(host), "host_p10_us": host[int(0.1 * (len(host) - 1))],
                    "host_p90_us": host[int(0.9 * (len(host) - 1))],
                    "device_us": interval,
                    "max_rel_err": errors[variant]})
                del call, result, graph
                torch.cuda.synchronize()
        with open(args.out + ".partial", "w") as f:
            json.dump(doc, f, indent=1)
    os.replace(args.out + ".partial", args.out)
    print(f"peers.py: {len(doc['records'])} records written to {args.out}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
