#!/usr/bin/env python3
"""torch peers of rms_scaled_softmax, measured with the same protocol as the C++ bench (docs/protocol.md).

    python3 bench/rssbench peers --session N --rounds R --iterations K --seed S \
        --shapes "1x131072,8x131072,..." --shape-order forward|reverse --out FILE.json [--dtypes fp32,bf16]

Variants: torch_eager (a plain torch implementation), torch_compile (torch.compile of the same function,
static shapes), and each replayed from a CUDA Graph captured after warm-up (torch_eager_graph,
torch_compile_graph). Each is checked against a float64 torch reference first; max_rel_err is, over rows,
max_j |y_ij - ref_ij| / max_j |ref_ij|, flagged on stderr above 1e-5 (fp32) or 1e-2 (bf16/fp16).

Per (shape, dtype), in every round the variants run in an order shuffled by
random.Random(f"peers/{seed}/{session}/{rows}x{cols}/{dtype}/{round}"), each: 3 unrecorded warm calls, then
`iterations` host samples (time.perf_counter around the call and torch.cuda.synchronize), then one batched
event interval (events around `iterations` back-to-back calls, divided by `iterations`) as device_us.
Counting kernels with the profiler would be too slow, so kernels = -1 (unknown) and launches = 1 for graph
replay, -1 (unknown) otherwise; logical_bytes = -1 (unknown). The input is the shared fixture
(fixture.py, --fixture-seed, default 42) cast to the dtype. The file is written to FILE.json.partial after
each shape and renamed to FILE.json at the end, so an interrupted run never looks complete.

Needs torch with CUDA: without them it says so and exits with code 3.
"""
import argparse
import json
import os
import random
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import fixture  # noqa: E402
import records  # noqa: E402
import peer_support  # noqa: E402

EXIT_NO_TORCH = peer_support.EXIT_NO_TORCH
EPS = 1e-5
WARM_CALLS = 3
VARIANTS = records.PEERS
TOLERANCE = {"fp32": 1e-5, "bf16": 1e-2, "fp16": 1e-2}
TREE = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
torch = None  # imported in main(), so that this module imports without torch


def rms_scaled_softmax(x):
    """The operator in plain torch; bf16/fp16 I/O with fp32 arithmetic."""
    xf = x.float()
    r = torch.rsqrt(xf.square().mean(-1, keepdim=True) + EPS)
    m = xf.amax(-1, keepdim=True)
    e = torch.exp(r * (xf - m))  # r > 0, so subtracting max(x) before scaling is valid
    return (e / e.sum(-1, keepdim=True)).to(x.dtype)


def max_rel_err(y, x):
    x64 = x.double()
    r = torch.rsqrt(x64.square().mean(-1, keepdim=True) + EPS)
    e = torch.exp(r * (x64 - x64.amax(-1, keepdim=True)))
    ref = e / e.sum(-1, keepdim=True)
    return ((y.double() - ref).abs().amax(-1) / ref.abs().amax(-1)).max().item()


def capture(fn, x):
    """A CUDA Graph of fn(x), captured after warm-up on a side stream (as torch's docs require)."""
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        for _ in range(WARM_CALLS):
            fn(x)
    torch.cuda.current_stream().wait_stream(side)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        out = fn(x)
    return graph, out


def nvidia_smi(uuid, fields):
    try:
        line = subprocess.run(["nvidia-smi", f"--query-gpu={','.join(fields)}", "--format=csv,noheader",
                               "-i", uuid], capture_output=True, text=True, timeout=30).stdout.strip()
        values = [v.strip() for v in line.split(",")]
        return dict(zip(fields, values)) if len(values) == len(fields) else {"error": line or "no output"}
    except (OSError, subprocess.SubprocessError) as e:
        return {"error": str(e)}


CLOCK_FIELDS = ["clocks.sm", "clocks.mem", "clocks.max.sm", "clocks.max.mem", "temperature.gpu", "power.draw",
                "pstate"]


def parse_shapes(text):
    shapes = []
    for item in text.split(","):
        rows, cols = item.strip().lower().split("x")
        shapes.append((int(rows), int(cols)))
    return shapes


def main(argv=None):
    global torch
    ap = argparse.ArgumentParser(prog="rssbench peers", description="torch peers of rms_scaled_softmax, measured with the protocol of docs/protocol.md")
    ap.add_argument("--session", type=int, required=True)
    ap.add_argument("--rounds", type=int, default=10)
    ap.add_argument("--iterations", type=int, default=50)
    ap.add_argument("--seed", type=int, default=1, help="seed of the per-round shuffles")
    ap.add_argument("--fixture-seed", type=int, default=42)
    ap.add_argument("--shapes", default="1x131072,8x131072,64x131072")
    ap.add_argument("--dtypes", default="fp32", help="comma list of fp32, bf16, fp16")
    ap.add_argument("--variants", default=",".join(VARIANTS), help="comma list, a subset of " + ",".join(VARIANTS))
    ap.add_argument("--shape-order", choices=records.SHAPE_ORDERS, default="forward")
    ap.add_argument("--out", required=True)
    ap.add_argument("--tree", default=TREE, help="tree whose include/ and bench/ are hashed")
    args = ap.parse_args(argv)

    dtypes = args.dtypes.split(",")
    variants = args.variants.split(",")
    if not set(dtypes) <= set(TOLERANCE) or not set(variants) <= set(VARIANTS):
        ap.error(f"--dtypes must be within {sorted(TOLERANCE)} and --variants within {VARIANTS}")
    work = [(r, c, d) for r, c in parse_shapes(args.shapes) for d in dtypes]
    if args.shape_order == "reverse":
        work.reverse()

    torch = peer_support.torch_with_cuda("peers.py")  # the module-level name used by rms_scaled_softmax
    if torch is None:
        return EXIT_NO_TORCH
    import torch._dynamo  # noqa: F401  (its config is set below)

    # Enough compile cache for every static shape; the attribute was renamed across torch versions.
    for name in ("cache_size_limit", "recompile_limit"):
        if hasattr(torch._dynamo.config, name):
            setattr(torch._dynamo.config, name, max(64, 4 * len(work)))
    compiled = torch.compile(rms_scaled_softmax, dynamic=False)

    props = torch.cuda.get_device_properties(0)
    uuid = f"GPU-{props.uuid}" if hasattr(props, "uuid") else "unknown"
    smi = nvidia_smi(uuid, ["driver_version"])
    context = {
        "producer": "torch_peers", "suite": "forward", "session": str(args.session), "gpu": props.name, "uuid": uuid,
        "driver": smi.get("driver_version", "unknown"), "toolkit": str(torch.version.cuda),
        "sm_count": str(props.multi_processor_count), "clocks_start": nvidia_smi(uuid, CLOCK_FIELDS), "clocks_end": {},
        "source_hash": records.source_hash(args.tree), "rounds": str(args.rounds), "iterations": str(args.iterations),
        "seed": str(args.seed), "shape_order": args.shape_order, "shapes": args.shapes, "dtypes": ",".join(dtypes),
        "variants": ",".join(variants), "warm_calls": str(WARM_CALLS), "torch": torch.__version__}
    fx = fixture.describe(args.fixture_seed)
    context.update(fixture_seed=str(fx["seed"]), fixture_generator=fx["generator"], fixture_hash=fx["hash"])
    runs = []
    partial = args.out + ".partial"
    start, units_done, units = time.time(), 0, len(work) * args.rounds

    for index, (rows, cols, dtype) in enumerate(work):
        name = f"{rows}x{cols} {dtype}"
        print(f"[{index + 1}/{len(work)}] {name}: preparing (fixture, compile, capture)", file=sys.stderr)
        tdtype = {"fp32": torch.float32, "bf16": torch.bfloat16, "fp16": torch.float16}[dtype]
        x = torch.from_numpy(fixture.matrix(args.fixture_seed, rows, cols)).cuda().to(tdtype)
        calls, outputs, graphs = {}, {}, []
        for variant, fn in (("torch_eager", rms_scaled_softmax), ("torch_compile", compiled)):
            if variant not in variants and variant + "_graph" not in variants:
                continue  # skip a compile nobody asked for: compiling costs seconds per shape
            for _ in range(WARM_CALLS):
                fn(x)  # torch.compile compiles on its first call: keep that out of everything measured
            calls[variant] = outputs[variant] = lambda fn=fn: fn(x)
            if variant + "_graph" in variants:
                graph, out = capture(fn, x)
                graphs.append(graph)  # keep the graph alive as long as its replay closure
                calls[variant + "_graph"] = graph.replay
                outputs[variant + "_graph"] = lambda graph=graph, out=out: (graph.replay(), out)[1]
        errors = {}
        for variant in variants:
            errors[variant] = max_rel_err(outputs[variant](), x)
            if errors[variant] > TOLERANCE[dtype]:
                print(f"  FLAG {variant}: max relative error {errors[variant]:.3e} > {TOLERANCE[dtype]:g}",
                      file=sys.stderr)
        torch.cuda.synchronize()

        begin, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        for rnd in range(args.rounds):
            order = list(variants)
            random.Random(f"peers/{args.seed}/{args.session}/{rows}x{cols}/{dtype}/{rnd}").shuffle(order)
            for position, variant in enumerate(order):
                call = calls[variant]
                for _ in range(WARM_CALLS):
                    call()
                torch.cuda.synchronize()
                host, interval = peer_support.time_call(call, args.iterations, torch.cuda.synchronize, begin, end)
                runs.append(records.run_entry(
                    f"{records.shape_label(rows, cols, dtype)}/round{rnd}/{variant}", host,
                    interval, rows=rows, cols=cols, round=rnd,
                    position=position, kernels=-1, launches=1 if variant.endswith("_graph") else -1, cooperative=0,
                    logical_bytes=-1, evicted_tiles=0, max_rel_err=errors[variant]))
            units_done += 1
            left = (time.time() - start) / units_done * (units - units_done)
            print(f"  {name} round {rnd + 1}/{args.rounds} ({', '.join(order)}): about {left:.0f} s left",
                  file=sys.stderr)
        del x, calls, outputs, graphs
        torch.cuda.empty_cache()
        records.write(partial, context, runs)

    context["clocks_end"] = nvidia_smi(uuid, CLOCK_FIELDS)
    records.write(partial, context, runs)
    records.load(partial)
    os.replace(partial, args.out)
    print(f"wrote {len(runs)} records to {args.out} in {time.time() - start:.0f} s", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
