#!/usr/bin/env python3
"""Eager-mode cost of the rss_torch operator against its targets, per shape and dtype.

    python3 python/benchmarks/eager.py --out eager.json [--cpp-json summary.json] [--shapes 32x128256,...]

Variants, each timed as the median of --iterations samples after --warmup calls; a sample is one call between
two CUDA events (start event, the call, end event, synchronize), so it is the call's host cost or its GPU
time, whichever is longer (the host completion time of the same samples, perf_counter around call and
synchronize, is recorded too):
  rss_fwd              rss_torch.rms_scaled_softmax(x), x without grad (inference)
  rss_fwdbwd           y = rss_torch.rms_scaled_softmax(x); torch.autograd.grad(y, x, dy)
  rss_fwdbwd_graph     the same captured once in a CUDA Graph after warm-up, timed as graph.replay()
  compile_fwdbwd       torch.compile(rss_torch.composed) forward + backward, called eagerly (no CUDA Graph)
  compile_fwd          torch.compile(rss_torch.composed) forward alone, x without grad
  torch_softmax_fwdbwd torch.softmax(x, -1) forward + backward through autograd, eager: not a peer (another
                       operator) but the floor of any eager forward + backward through autograd on this machine
Every shape's rss and torch_softmax variants are timed first, the torch.compile variants after all of them:
compiling leaves worker threads and processes behind, which made later shapes' host times noisy.
Targets, PASS/FAIL per shape and dtype:
  fwd_vs_cpp           rss_fwd within 8 us of the C++ bench's one-call host time of the same shape and dtype
                       (--cpp-json: the bench's summary.json or a raw records file; its --cpp-variant records,
                       host_us; without it the target is reported as not checked)
  fwdbwd_vs_graph      rss_fwdbwd within 30 us of rss_fwdbwd_graph
  fwd_vs_compile       rss_fwd faster than compile_fwd
  fwdbwd_vs_compile    rss_fwdbwd faster than compile_fwdbwd
max_rel_err: the worst row's ||y - ref|| / ||ref|| and ||dx - ref|| / ||ref|| against float64 autograd of the
composed expression. Exit status: 0 when every checked target passed, 1 when one failed, 3 without torch or CUDA.
"""
import argparse
import json
import statistics
import sys
import time

EXIT_NO_TORCH = 3
SHAPES = "32x128256,4096x4096,16384x8192,4096x32768,1x131072,8x131072,64x131072,1x1048576"
VARIANTS = ("rss_fwd", "rss_fwdbwd", "rss_fwdbwd_graph", "compile_fwdbwd", "compile_fwd", "torch_softmax_fwdbwd")
COMPILED = ("compile_fwdbwd", "compile_fwd")
FWD_MARGIN_US = 8.0
FWDBWD_MARGIN_US = 30.0


def parse_shapes(text):
    shapes = []
    for item in text.split(","):
        if item.strip():
            rows, cols = (int(v) for v in item.strip().lower().split("x"))
            shapes.append((rows, cols))
    return shapes


def cpp_host_times(path, variant):
    """{(rows, cols, dtype): host_us} from a C++ bench JSON: summary.json ("results", host_us a number) or a raw
    session file ("records", host_us a list of samples); the median over every record of the variant."""
    with open(path) as f:
        doc = json.load(f)
    records = doc if isinstance(doc, list) else doc.get("results") or doc.get("records") or []
    samples = {}
    for r in records:
        if r.get("variant") != variant or "host_us" not in r:
            continue
        values = r["host_us"] if isinstance(r["host_us"], list) else [r["host_us"]]
        samples.setdefault((int(r["rows"]), int(r["cols"]), r["dtype"]), []).extend(values)
    return {k: statistics.median(v) for k, v in samples.items() if v}


def time_calls(torch, call, warmup, iterations):
    """Median event interval and host completion time (us) of single calls, after warm-up."""
    for _ in range(warmup):
        call()
    torch.cuda.synchronize()
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    events, hosts = [], []
    for _ in range(iterations):
        t0 = time.perf_counter()
        start.record()
        call()
        end.record()
        end.synchronize()
        hosts.append((time.perf_counter() - t0) * 1e6)
        events.append(start.elapsed_time(end) * 1e3)
    return statistics.median(events), statistics.median(hosts)


def max_rel_err(torch, got, ref):
    got = got.double().reshape(-1, got.shape[-1])
    ref = ref.reshape(-1, ref.shape[-1])
    return ((got - ref).norm(dim=-1) / ref.norm(dim=-1)).max().item()


def measure(torch, rss_torch, rows, cols, dtype, variants, args, compiled):
    """{variant: {"us": event median, "host_us": host median}} of one shape and dtype, and (unless every variant
    is a compiled one) the errors of what is timed."""
    g = torch.Generator(device="cuda").manual_seed(rows * 1000003 + cols)
    x = torch.randn(rows, cols, device="cuda", generator=g).to(dtype)
    dy = torch.randn(rows, cols, device="cuda", generator=g).to(dtype)
    xg = x.clone().requires_grad_(True)
    op = rss_torch.rms_scaled_softmax

    errors = None
    if not set(variants) <= set(COMPILED):
        # Correctness of what is timed, once: y and dx against float64 autograd of the composed expression.
        x64 = x.double().requires_grad_(True)
        ref_y = rss_torch.composed(x64)
        (ref_dx,) = torch.autograd.grad(ref_y, x64, dy.double())
        y = op(xg)
        (dx,) = torch.autograd.grad(y, xg, dy)
        errors = {"y": max_rel_err(torch, y.detach(), ref_y.detach()), "dx": max_rel_err(torch, dx, ref_dx)}
        del x64, ref_y, ref_dx, y, dx

    def fwdbwd(forward):
        return lambda: torch.autograd.grad(forward(xg), xg, dy)[0]

    calls = {
        "rss_fwd": lambda: op(x),
        "rss_fwdbwd": fwdbwd(op),
        "compile_fwdbwd": fwdbwd(compiled),
        "compile_fwd": lambda: compiled(x),
        "torch_softmax_fwdbwd": fwdbwd(lambda t: torch.softmax(t, -1)),
    }
    out = {}
    for variant in variants:
        if variant == "rss_fwdbwd_graph":
            side = torch.cuda.Stream()
            side.wait_stream(torch.cuda.current_stream())
            with torch.cuda.stream(side):
                for _ in range(args.warmup):
                    calls["rss_fwdbwd"]()
            torch.cuda.current_stream().wait_stream(side)
            graph = torch.cuda.CUDAGraph()
            with torch.cuda.graph(graph):
                calls["rss_fwdbwd"]()
            call = graph.replay
        else:
            call = calls[variant]
        us, host_us = time_calls(torch, call, args.warmup, args.iterations)
        out[variant] = {"us": us, "host_us": host_us}
        call = graph = None  # a graph's memory pool goes with it
    return out, errors


def judge(record, cpp):
    """The targets of one record: {name: (passed or None when not checked, text)}."""
    t = {v: record["variants"].get(v, {}).get("us") for v in VARIANTS}
    key = (record["rows"], record["cols"], record["dtype"])
    targets = {}
    if t["rss_fwd"] is not None:
        if key in cpp:
            bound = cpp[key] + FWD_MARGIN_US
            targets["fwd_vs_cpp"] = (t["rss_fwd"] <= bound, f"{t['rss_fwd']:.1f} <= {cpp[key]:.1f} + {FWD_MARGIN_US:g}")
        else:
            targets["fwd_vs_cpp"] = (None, "no C++ host time for this shape")
    if t["rss_fwdbwd"] is not None and t["rss_fwdbwd_graph"] is not None:
        bound = t["rss_fwdbwd_graph"] + FWDBWD_MARGIN_US
        targets["fwdbwd_vs_graph"] = (t["rss_fwdbwd"] <= bound,
                                      f"{t['rss_fwdbwd']:.1f} <= {t['rss_fwdbwd_graph']:.1f} + {FWDBWD_MARGIN_US:g}")
    for name, ours, theirs in (("fwd_vs_compile", "rss_fwd", "compile_fwd"),
                               ("fwdbwd_vs_compile", "rss_fwdbwd", "compile_fwdbwd")):
        if t[ours] is not None and t[theirs] is not None:
            targets[name] = (t[ours] < t[theirs], f"{t[ours]:.1f} < {t[theirs]:.1f}")
    return targets


def report(doc, variants):
    """The table of medians and the verdicts, on stdout."""
    header = f"{'shape':>13} {'dtype':>5} " + " ".join(f"{v:>16}" for v in variants) + f" {'C++ host':>9}  err y / dx"
    print("\nmedian us, CUDA events (host completion in parentheses)")
    print(header)
    for r in doc["records"]:
        cells = [f"{r['variants'][v]['us']:7.1f} ({r['variants'][v]['host_us']:6.1f})" for v in variants]
        cpp_us = f"{r['cpp_host_us']:9.1f}" if r["cpp_host_us"] is not None else f"{'-':>9}"
        print(f"{r['rows']:>5}x{r['cols']:<7} {r['dtype']:>5} " + " ".join(f"{c:>16}" for c in cells) +
              f" {cpp_us}  " + (f"{r['max_rel_err']['y']:.1e} / {r['max_rel_err']['dx']:.1e}" if r["max_rel_err"] else "-"))
    print("\ntargets")
    for r in doc["records"]:
        for name, v in r["targets"].items():
            verdict = {True: "PASS", False: "FAIL", None: "not checked"}[v["passed"]]
            print(f"{verdict:>11}  {name:<18} {r['rows']}x{r['cols']} {r['dtype']}: {v['check']}")


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0], epilog=__doc__.split("\n\n", 1)[1],
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--shapes", default=SHAPES, help="rows x cols, comma-separated (default: %(default)s)")
    ap.add_argument("--dtypes", default="bf16,fp32", help="of fp32, bf16, fp16 (default: %(default)s)")
    ap.add_argument("--variants", default=",".join(VARIANTS), help="default: all")
    ap.add_argument("--iterations", type=int, default=50, help="timed calls per variant (default: %(default)s)")
    ap.add_argument("--warmup", type=int, default=10, help="calls before timing (default: %(default)s)")
    ap.add_argument("--cpp-json", help="the C++ bench's JSON (summary.json or a raw session file)")
    ap.add_argument("--cpp-variant", default="automatic", help="its variant to compare with (default: %(default)s)")
    ap.add_argument("--out", help="write the records and verdicts here (JSON)")
    args = ap.parse_args(argv)
    variants = [v for v in args.variants.split(",") if v]
    if not set(variants) <= set(VARIANTS):
        ap.error(f"--variants must be within {','.join(VARIANTS)}")
    shapes = parse_shapes(args.shapes)
    cpp = cpp_host_times(args.cpp_json, args.cpp_variant) if args.cpp_json else {}
    try:
        import torch
    except ImportError as e:
        print(f"eager.py: torch is not installed ({e}); run this where torch with CUDA is", file=sys.stderr)
        return EXIT_NO_TORCH
    if not torch.cuda.is_available():
        print("eager.py: torch has no usable CUDA device", file=sys.stderr)
        return EXIT_NO_TORCH
    import torch._dynamo
    import rss_torch

    dtypes = {"fp32": torch.float32, "bf16": torch.bfloat16, "fp16": torch.float16}
    work = [(r, c, d) for d in args.dtypes.split(",") for r, c in shapes]
    for name in ("cache_size_limit", "recompile_limit"):  # one graph per shape, dtype and grad mode
        if hasattr(torch._dynamo.config, name):
            setattr(torch._dynamo.config, name, max(64, 4 * len(work)))
    compiled = torch.compile(rss_torch.composed, dynamic=False)
    props = torch.cuda.get_device_properties(0)
    doc = {"producer": "rss_torch_eager",
           "context": {"gpu": props.name, "torch": torch.__version__, "cuda": str(torch.version.cuda),
                       "rss_torch": rss_torch.__version__, "iterations": args.iterations, "warmup": args.warmup,
                       "cpp_json": args.cpp_json, "cpp_variant": args.cpp_variant},
           "records": []}
    records = {}
    for phase in ([v for v in variants if v not in COMPILED], [v for v in variants if v in COMPILED]):
        for rows, cols, dname in work if phase else []:
            print(f"{rows}x{cols} {dname} {','.join(phase)} ...", file=sys.stderr, flush=True)
            started = time.perf_counter()
            timings, errors = measure(torch, rss_torch, rows, cols, dtypes[dname], phase, args, compiled)
            record = records.setdefault((rows, cols, dname), {
                "rows": rows, "cols": cols, "dtype": dname, "variants": {}, "max_rel_err": errors,
                "cpp_host_us": cpp.get((rows, cols, dname)), "seconds": 0.0})
            record["variants"].update(timings)
            record["max_rel_err"] = record["max_rel_err"] or errors
            record["seconds"] += time.perf_counter() - started
            torch.cuda.empty_cache()
    failed = False
    for rows, cols, dname in work:
        record = records[(rows, cols, dname)]
        record["variants"] = {v: record["variants"][v] for v in variants}  # the table's order
        record["targets"] = {k: {"passed": p, "check": text} for k, (p, text) in judge(record, cpp).items()}
        failed |= any(v["passed"] is False for v in record["targets"].values())
        doc["records"].append(record)

    report(doc, variants)
    doc["all_checked_targets_passed"] = not failed
    if args.out:
        with open(args.out, "w") as f:
            json.dump(doc, f, indent=1)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
