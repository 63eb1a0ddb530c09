"""torch peers of rms_scaled_softmax (forward, backward, sharded), timed like the C++ benches.

Run by `rssbench session` (forward), bench/backward/run.sh (--suite backward), bench/sharded/device_run.sh (--suite
sharded). One timing core, the operator a parameter (docs/protocol.md, "The tools in detail"). No torch/CUDA: exit 3."""
import argparse
import os
import random
import socket
import sys
import time

import fixture
import records
import session  # nvidia_smi

EXIT_NO_TORCH = 3
EPS = 1e-5
TOLERANCE = {"fp32": 1e-5, "bf16": 1e-2, "fp16": 1e-2}
BACKWARD = tuple(f"{impl}_{op}{graph}" for op in ("bwd", "fwdbwd") for impl in ("torch_eager", "torch_compile",
                 "rss_op") for graph in ("", "_graph") if (impl, op, graph) != ("torch_eager", "fwdbwd", "_graph"))
SUITES = {  # producer, variants, defaults of --shapes --dtypes --rounds --iterations --warmup
    "forward": ("torch_peers", records.PEERS, "1x131072,8x131072,64x131072", "fp32", 10, 50, 3),
    "backward": ("backward_torch_peers", BACKWARD, "32x128256,4096x4096,16384x8192,4096x32768,1x131072,64x131072",
                 "fp32,bf16", 3, 50, 3),
    "sharded": ("torch_distributed_peer", ("torch_distributed",), "32x128256,4096x128256,64x131072,1x16777216",
                "fp32,bf16", 5, 20, 5)}
torch = dist = None  # bound by import_torch() once the options are read: --help needs neither torch nor numpy


def import_torch():
    """Binds torch and torch.distributed; False, after saying why on stderr, without torch or a CUDA device."""
    global torch, dist
    try:
        import torch
        import torch._dynamo  # noqa: F401  (its config and _functorch's are set in run())
        import torch._functorch.config  # noqa: F401
        import torch.distributed as dist
        why = None if torch.cuda.is_available() else "torch has no usable CUDA device"
    except ImportError as e:
        why = f"torch is not installed ({e})"
    if why:
        print(f"rssbench peers: {why}; these peers need torch with CUDA and an NVIDIA GPU", file=sys.stderr)
    return not why


def composed(x):
    """The operator in plain torch: fp32 arithmetic for every storage type, float64 for the reference."""
    xf = x if x.dtype == torch.float64 else x.float()
    r = torch.rsqrt(xf.square().mean(-1, keepdim=True) + EPS)
    e = torch.exp(r * (xf - xf.amax(-1, keepdim=True).detach()))  # r > 0: shifting by max(x) is valid
    return (e / e.sum(-1, keepdim=True)).to(x.dtype)


def sharded_composed(x, cols, world):
    """Over a tensor-parallel group: local max and sum of squares, all-gather, local exp-sum, all-reduce, normalise."""
    xf = x.float()
    stats = torch.stack([xf.amax(dim=1), xf.square().sum(dim=1)])
    gathered = torch.empty((world,) + tuple(stats.shape), dtype=stats.dtype, device=x.device)
    dist.all_gather_into_tensor(gathered, stats)
    r = torch.rsqrt(gathered[:, 1].sum(dim=0) / cols + EPS)
    e = torch.exp((xf - gathered[:, 0].amax(dim=0)[:, None]) * r[:, None])
    z = e.sum(dim=1)
    dist.all_reduce(z)
    return (e / z[:, None]).to(x.dtype)


def capture(fn, stream, warmup):
    """A CUDA Graph of fn() captured on `stream` after warm-up there (a backward on its forward's stream, where
    autograd runs it)."""
    with torch.cuda.stream(stream):
        for _ in range(warmup):
            fn()
    stream.synchronize()
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph, stream=stream):
        out = fn()
    return graph, out


def time_call(call, iterations, events, before_sample=None):
    """(host samples in us, launch to torch.cuda.synchronize(); the batched event interval per call)."""
    host = []
    for _ in range(iterations):
        if before_sample:
            before_sample()
        t0 = time.perf_counter()
        call()
        torch.cuda.synchronize()
        host.append((time.perf_counter() - t0) * 1e6)
    begin, end = events
    begin.record()
    for _ in range(iterations):
        call()
    end.record()
    end.synchronize()
    return host, begin.elapsed_time(end) * 1e3 / iterations


class Forward:
    """An operator's inputs, reference, variants, accuracy and records (the forward's); measure() times any."""
    order, before_sample = float("inf"), None  # order: the norm of max_rel_err (the max norm here)

    def __init__(self, args, compiled, rss_torch, rank, world):
        self.args, self.compiled, self.rss_torch, self.rank, self.world = args, compiled, rss_torch, rank, world

    def prepare(self, rows, cols, dtype):
        self.x = torch.from_numpy(fixture.matrix(self.args.fixture_seed, rows, cols)).cuda().to(dtype)
        self.ref = composed(self.x.double())

    def build(self, base):
        """The call to time of the variant `base` (no _graph), built afresh."""
        fn = {"torch_eager": composed, "torch_compile": self.compiled}[base]
        return lambda: fn(self.x)

    def error(self, out):
        norm = lambda t: torch.linalg.vector_norm(t, self.order, dim=-1)  # noqa: E731
        return (norm(out.double() - self.ref) / norm(self.ref)).max().item()

    def reduce(self, host):
        return host

    def document(self, context, turns, failures):
        runs = [records.run_entry(f"{records.shape_label(*t['shape'])}/round{t['round']}/{t['variant']}", t["host"],
                                  t["device_us"], rows=t["shape"][0], cols=t["shape"][1], round=t["round"],
                                  position=t["position"], world=self.world if self.world > 1 else None,
                                  kernels=-1, launches=1 if t["variant"].endswith("_graph") else -1, cooperative=0,
                                  logical_bytes=-1, evicted_tiles=0, max_rel_err=t["max_rel_err"]) for t in turns]
        runs += [{"name": f"{records.shape_label(*f['shape'])}/{f['variant']}", "run_type": "iteration",
                  "error_occurred": True, "error_message": f["error"]} for f in failures]
        return {"context": {"schema": records.SCHEMA, **{k: v if isinstance(v, dict) else str(v)
                                                         for k, v in context.items()}}, "benchmarks": runs}


class Backward(Forward):
    order = 2

    def prepare(self, rows, cols, dtype):  # rss_backward_bench's input: x the fixture, dy the next seed's over 4
        x = torch.from_numpy(fixture.matrix(self.args.fixture_seed, rows, cols)).cuda().to(dtype)
        self.dy = (torch.from_numpy(fixture.matrix(self.args.fixture_seed + 1, rows, cols)).cuda() / 4).to(dtype)
        self.x, x64 = x.requires_grad_(True), x.detach().double().requires_grad_(True)
        self.ref = torch.autograd.grad(composed(x64), x64, self.dy.double())[0]

    def build(self, base):
        x, dy = self.x, self.dy
        impl, _, op = base.rpartition("_")
        forward = {"torch_eager": composed, "torch_compile": self.compiled,
                   "rss_op": self.rss_torch and self.rss_torch.rms_scaled_softmax}[impl]
        if op == "fwdbwd":
            return lambda: torch.autograd.grad(forward(x), x, dy)[0]
        if impl == "rss_op":  # from x and the row statistics, what its autograd formula saves (y not read)
            _, stats = torch.ops.rss.rms_scaled_softmax(x.detach())
            return lambda: torch.ops.rss.rms_scaled_softmax_backward(x.detach(), stats, dy)
        with torch.cuda.stream(self.stream):  # bwd: the forward ran before timing, its graph retained
            y = forward(x)
        self.stream.synchronize()
        return lambda: torch.autograd.grad(y, x, dy, retain_graph=True)[0]


class Sharded(Forward):
    order = 2

    def before_sample(self):  # every rank starts the sample together
        torch.cuda.synchronize()
        dist.barrier()
        torch.cuda.synchronize()

    def prepare(self, rows, cols, dtype):  # x: from a CUDA generator seeded by (seed, shape), the same on every rank;
        # as in rss_sharded_bench, row i is s_i (u + o_i), s_i in [0.25, 4), o_i in [-2, 2), u in [-4, 4), never zero
        gen = torch.Generator(device="cuda").manual_seed(self.args.fixture_seed + rows * 1000003 + cols)
        u = lambda *shape: torch.rand(shape, generator=gen, device="cuda")  # noqa: E731
        s, o = 0.25 + 3.75 * u(rows, 1), 4 * u(rows, 1) - 2
        x = (s * (8 * u(rows, cols) - 4 + o)).to(dtype)
        x[x == 0] = 1e-3
        self.widths = [cols // self.world + (r < cols % self.world) for r in range(self.world)]
        c0 = sum(self.widths[:self.rank])
        self.x, self.cols = x[:, c0:c0 + self.widths[self.rank]].contiguous(), cols
        rng = random.Random(self.args.seed + rows + cols)
        self.check = sorted({0, rows // 2, rows - 1} | {rng.randrange(rows) for _ in range(5)})
        self.ref = composed(x[self.check].double())

    def build(self, base):
        return lambda: sharded_composed(self.x, self.cols, self.world)

    def error(self, out):
        parts = [torch.empty((len(self.check), w), dtype=torch.float32, device="cuda") for w in self.widths]
        dist.all_gather(parts, out[self.check].float().contiguous())
        return super().error(torch.cat(parts, dim=1))

    def reduce(self, host):  # the slowest rank's time per sample
        every = [torch.empty(len(host), dtype=torch.float64, device="cuda") for _ in range(self.world)]
        dist.all_gather(every, torch.tensor(host, dtype=torch.float64, device="cuda"))
        return torch.stack(every).amax(dim=0).tolist()


def measure(suite, args, variants, work, context):
    """The core: rounds of shuffled variants per (shape, dtype), each built, warmed up, checked once and timed;
    the records so far written to --out.partial after each shape."""
    suite.stream = torch.cuda.Stream()
    events = [torch.cuda.Event(enable_timing=True) for _ in range(2)]
    turns, failures, start = [], [], time.time()
    say = (lambda *a: print(*a, file=sys.stderr, flush=True)) if suite.rank == 0 else (lambda *a: None)
    for index, shape in enumerate(work):
        rows, cols, dtype = shape
        say(f"[{index + 1}/{len(work)}] {rows}x{cols} {dtype}")
        suite.prepare(rows, cols, getattr(torch, {"fp32": "float32", "bf16": "bfloat16", "fp16": "float16"}[dtype]))
        torch.cuda.synchronize()  # the inputs are ready before any stream reads them
        errors, failed = {}, set()
        for rnd in range(args.rounds):
            order = [v for v in variants if v not in failed]
            random.Random(f"{args.suite}/{args.seed}/{args.session}/{rows}x{cols}/{dtype}/{rnd}").shuffle(order)
            for position, variant in enumerate(order):
                try:
                    call = result = suite.build(variant.removesuffix("_graph"))
                    graph = None
                    if variant.endswith("_graph"):
                        graph, out = capture(call, suite.stream, args.warmup)
                        call, result = graph.replay, lambda: out
                    for _ in range(args.warmup):
                        call()
                    torch.cuda.synchronize()
                    if variant not in errors:
                        errors[variant] = suite.error(result())
                        if errors[variant] > TOLERANCE[dtype]:
                            say(f"  FLAG {variant}: max relative error {errors[variant]:.3e} > {TOLERANCE[dtype]:g}")
                except Exception as e:  # noqa: BLE001 (a failing peer is recorded; the others still run)
                    if suite.world > 1:
                        raise  # the other ranks wait in a collective: stop them all
                    msg = f"{type(e).__name__}: {(str(e).splitlines() or [''])[0]}"
                    say(f"  {variant} failed: {msg}")
                    failures.append({"shape": shape, "variant": variant, "error": msg})
                    failed.add(variant)
                    continue
                host, interval = time_call(call, args.iterations, events, suite.before_sample)
                turns.append({"shape": shape, "variant": variant, "round": rnd, "position": position,
                              "host": suite.reduce(host), "device_us": interval, "max_rel_err": errors[variant]})
                del call, result, graph
                torch.cuda.synchronize()
            done = index * args.rounds + rnd + 1
            say(f"  round {rnd + 1}/{args.rounds} ({', '.join(order)}): about "
                f"{(time.time() - start) / done * (len(work) * args.rounds - done):.0f} s left")
        for variant in (v for v in variants if v in errors):  # one line per variant: its median sample and error
            host = sorted(h for t in turns if (t["shape"], t["variant"]) == (shape, variant) for h in t["host"])
            say(f"{rows:6d} x {cols:<9d} {dtype} {variant} {host[len(host) // 2]:10.2f} us  err {errors[variant]:.3g}")
        for name in ("x", "dy", "ref"):
            vars(suite).pop(name, None)
        torch.cuda.empty_cache()
        if suite.rank == 0:
            records.write(args.out + ".partial", suite.document(context, turns, failures))
    return turns, failures


def run(rank, args, world=1, port=None):
    """One process's share: all of the forward or backward suite, one rank of the sharded one."""
    if port is not None:  # a spawned rank
        import_torch()
        torch.cuda.set_device(rank)
        dist.init_process_group("nccl", init_method=f"tcp://127.0.0.1:{port}", rank=rank, world_size=world,
                                device_id=torch.device("cuda", rank))
    variants = args.variants.split(",")
    work = [(int(r), int(c), d) for r, c in (s.strip().lower().split("x") for s in args.shapes.split(",") if s.strip())
            for d in args.dtypes.split(",")][::-1 if args.shape_order == "reverse" else 1]
    for name in ("cache_size_limit", "recompile_limit"):  # a compile cache for every static shape (renamed in 2.x)
        if hasattr(torch._dynamo.config, name):
            setattr(torch._dynamo.config, name, max(64, 4 * len(work)))
    # Backward-only variants call a compiled backward many times on one retained graph, which donated buffers forbid
    # (torch.compile refuses retain_graph=True then); they only save memory.
    torch._functorch.config.donated_buffer = False
    rss_torch = None
    if any(v.startswith("rss_op") for v in variants):
        try:
            import rss_torch  # the installed package: pip install --no-build-isolation ./python
        except ImportError as e:
            print(f"rssbench peers: rss_torch is not importable ({e}): no rss_op variants", file=sys.stderr)
            variants = [v for v in variants if not v.startswith("rss_op")]
    suite = {"forward": Forward, "backward": Backward, "sharded": Sharded}[args.suite](
        args, torch.compile(composed, dynamic=False), rss_torch, rank, world)
    props = torch.cuda.get_device_properties(rank)
    uuids = [f"GPU-{torch.cuda.get_device_properties(i).uuid}" for i in range(world)]
    context = {"producer": SUITES[args.suite][0], "suite": args.suite, "session": args.session, "gpu": props.name,
               "uuid": ",".join(uuids), "toolkit": torch.version.cuda, "sm_count": props.multi_processor_count,
               "torch": torch.__version__, "rounds": args.rounds, "iterations": args.iterations,
               "warmup": args.warmup, "seed": args.seed, "shape_order": args.shape_order, "shapes": args.shapes,
               "dtypes": args.dtypes, "variants": ",".join(variants), "fixture_seed": args.fixture_seed,
               "driver": session.nvidia_smi(["driver_version"], uuids[0]).get("driver_version", "unknown"),
               "clocks_start": session.nvidia_smi(session.CLOCKS, uuids[0]), "clocks_end": {},
               "source_hash": records.source_hash(records.TREE)}
    if args.suite == "sharded":
        context.update(gpus=",".join(torch.cuda.get_device_name(i) for i in range(world)), world=world,
                       nccl=".".join(map(str, torch.cuda.nccl.version())), time=int(time.time()),
                       NCCL_NVLS_ENABLE=os.environ.get("NCCL_NVLS_ENABLE", ""))
    elif args.suite == "forward":
        fx = fixture.describe(args.fixture_seed)
        context.update(fixture_generator=fx["generator"], fixture_hash=fx["hash"])
    start = time.time()
    turns, failures = measure(suite, args, variants, work, context)
    if rank == 0:
        context["clocks_end"] = session.nvidia_smi(session.CLOCKS, uuids[0])
        records.write(args.out + ".partial", suite.document(context, turns, failures))
        records.load(args.out + ".partial", complete=False)  # what it wrote follows the schema
        os.replace(args.out + ".partial", args.out)
        print(f"rssbench peers: {len(turns)} records, {len(failures)} failures, written to {args.out} in "
              f"{time.time() - start:.0f} s", file=sys.stderr)
    if port is not None:
        dist.destroy_process_group()
    return 0


def main(argv):
    ap = argparse.ArgumentParser(prog="rssbench peers", description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    add = ap.add_argument
    add("--suite", choices=sorted(SUITES), default="forward", help="the operator (default forward)")
    add("--out", required=True, help="record file to write")
    add("--shapes", help="comma list ROWSxCOLS (default: the suite's)")
    add("--dtypes", help="comma list of fp32, bf16, fp16 (forward: fp32; others: fp32,bf16)")
    add("--variants", help="comma list, a subset of the suite's (default: all of them)")
    add("--rounds", type=int, help="rounds per shape and dtype (forward 10, backward 3, sharded 5)")
    add("--iterations", "--samples", type=int, help="host samples per variant and round (sharded 20, others 50)")
    add("--warmup", type=int, help="calls before each variant's samples (sharded 5, others 3)")
    add("--seed", type=int, default=1, help="seed of the shuffles (default 1)")
    add("--session", type=int, default=1, help="session number (recorded and part of the shuffles' seed)")
    add("--fixture-seed", type=int, default=42, help="seed of the input (forward, backward: the fixture's)")
    add("--shape-order", choices=records.SHAPE_ORDERS, default="forward")
    add("--world", type=int, default=0, help="sharded: processes, one per GPU (default every GPU, at most 8)")
    _, known, *defaults = SUITES[ap.parse_args(argv).suite]  # the suite's defaults, then the options again
    ap.set_defaults(**dict(zip(("shapes", "dtypes", "rounds", "iterations", "warmup"), defaults)))
    args = ap.parse_args(argv)
    args.variants = args.variants or ",".join(known)
    if not set(args.dtypes.split(",")) <= set(TOLERANCE) or not set(args.variants.split(",")) <= set(known):
        ap.error(f"--dtypes must be within {sorted(TOLERANCE)} and --variants within {', '.join(known)}")
    if min(args.rounds, args.iterations, args.session) < 1 or args.warmup < 0:
        ap.error("--rounds, --iterations and --session must be >= 1, --warmup >= 0")
    if not import_torch():
        return EXIT_NO_TORCH
    if args.suite != "sharded":
        return run(0, args)
    # NVLink multicast stays off in every rank, whatever the caller set
    os.environ.update(NCCL_NVLS_ENABLE="0", TORCH_SYMM_MEM_DISABLE_MULTICAST="1", NVSHMEM_DISABLE_NVLS="1")
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    world = args.world or min(torch.cuda.device_count(), 8)
    torch.multiprocessing.spawn(run, args=(args, world, port), nprocs=world, join=True)
    return 0
