"""Runs measurement sessions of the project's protocol (docs/protocol.md), then the report (for scripts/bench.sh).

Each session (on its own GPU when there are several): rss_bench, the torch peers when torch has CUDA, then the
records' context completed. quick: records and report in BUILD/quick/, never over the committed results; full:
bench/results/raw/session<N>_{rss,torch}.json and the report in bench/results/. Options override the preset."""
import argparse
import json
import os
import re
import shutil
import subprocess
import sys

import fixture
import records

HERE = os.path.dirname(os.path.abspath(__file__))
CLOCKS = ["clocks.sm", "clocks.mem", "clocks.max.sm", "temperature.gpu", "power.draw", "pstate"]
ALL_SHAPES = "1x131072,8x131072,64x131072,32x128256,4096x4096,16384x8192,4096x32768,1x1048576,1x4194304,1x16777216"
PRESETS = {"quick": {"sessions": [1], "rounds": 3, "iterations": 10, "dtypes": "fp32,bf16", "peers": "off",
                     "shapes": "1x131072,64x131072,32x128256,4096x4096,16384x8192,1x4194304"},
           "full": {"sessions": [1, 2], "rounds": 10, "iterations": 30, "dtypes": "fp32,bf16,fp16", "peers": "auto",
                    "shapes": ALL_SHAPES}}
# Seconds per (session, shape/dtype pair, round) for rss_bench's variants: set-up plus per-sample cost, fitted
# to an H200 session of 3 rounds x 10 samples over 20 pairs that took 157 s.
SECONDS_PER_ROUND, SECONDS_PER_SAMPLE = 1.3, 0.13


def nvidia_smi(fields, gpu=None, every=False):
    """GPU fields through nvidia-smi: of one GPU (UUID) or the first, or a list of every GPU's; empty without it."""
    out = subprocess.run(["nvidia-smi", "--query-gpu=" + ",".join(fields), "--format=csv,noheader,nounits"]
                         + (["-i", gpu] if gpu else []), capture_output=True, text=True) \
        if shutil.which("nvidia-smi") else None
    rows = [dict(zip(fields, (v.strip() for v in line.split(",")))) for line in out.stdout.splitlines()
            if line.strip()] if out and out.returncode == 0 else []
    return rows if every else (rows[0] if rows else {})


def session_gpus(sessions, uuids, pinned):
    """{session: GPU UUID or None}. The protocol wants each session on its own GPU: session N goes to the N-th
    GPU (cyclically) unless CUDA_VISIBLE_DEVICES already pins one (a UUID pin is kept for reading clocks)."""
    if pinned is not None:
        return {s: pinned if pinned.startswith("GPU-") and "," not in pinned else None for s in sessions}
    return {s: uuids[(s - 1) % len(uuids)] if len(uuids) > 1 else None for s in sessions}


def complete_context(path, clocks_start, clocks_end, fixture_seed, peers_note, protocol, gpu):
    """Fills the context fields the C++ bench leaves to the runner, and checks the fixture matches."""
    with open(path) as f:
        doc = json.load(f)
    ctx = doc["context"]
    cpp_first = ctx.get("fixture_first_elements")
    py_first = " ".join("0x%08x" % v for v in fixture.generate(fixture_seed, 8).view("<u4"))
    if cpp_first is not None and cpp_first != py_first:
        sys.exit("session: the C++ fixture differs from bench/rssbench/fixture.py: %s vs %s" % (cpp_first, py_first))
    fx = fixture.describe(fixture_seed)
    ctx.update(source_hash=records.source_hash(records.TREE), clocks_start=clocks_start, clocks_end=clocks_end,
               driver=nvidia_smi(["driver_version"], gpu).get("driver_version") or ctx.get("driver", ""),
               fixture_seed=str(fx["seed"]), fixture_generator=fx["generator"], fixture_hash=fx["hash"],
               peers=peers_note, protocol=protocol)
    records.write(path, doc)
    records.load(path)  # the completed file follows the schema


def estimate_seconds(sessions, pairs, rounds, iterations):
    """Rough duration of rss_bench's part of the sessions (the torch peers come on top)."""
    return sessions * pairs * rounds * (SECONDS_PER_ROUND + SECONDS_PER_SAMPLE * iterations)


def parser(passed_on=False):
    """The options; passed_on: those scripts/bench.sh hands on (it sets --build itself, from RSS_BUILD_DIR), for its
    --help and judged before its GPU check and build, a bad one in its name (exit 2)."""
    ap = argparse.ArgumentParser(prog="scripts/bench.sh", usage=argparse.SUPPRESS, add_help=False) if passed_on else \
        argparse.ArgumentParser(prog="rssbench session", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    if passed_on:
        ap.error = lambda msg: ap.exit(2, f"scripts/bench.sh: {msg} (bash scripts/bench.sh --help lists them)\n")
    add = ap.add_argument
    add("--protocol", choices=sorted(PRESETS), default="quick",
        help="preset of the options below (default quick; full is the protocol of the committed results)")
    if not passed_on:
        add("--build", default=os.path.join(records.TREE, "build-bench"),
            help="CMake build folder holding bench/rss_bench (default build-bench)")
    add("--sessions", type=int, nargs="+", help="session numbers (quick: 1; full: 1 2)")
    add("--rounds", type=int, help="rounds per shape (quick: 3; full: 10)")
    add("--iterations", type=int, help="host samples per variant and round (quick: 10; full: 30)")
    add("--seed", type=int, default=20261129, help="seed of the per-round shuffles (recorded)")
    add("--fixture-seed", type=int, default=42, help="seed of the input fixture (recorded)")
    add("--shapes", help="comma list ROWSxCOLS (quick: 6 shapes; full: the 10 project shapes)")
    add("--dtypes", help="comma list of storage types, each over every shape (quick: fp32,bf16; full: fp32,bf16,fp16)")
    add("--peers", choices=["auto", "off"], help="torch peers (quick: off; full: auto, i.e. if torch has CUDA)")
    add("--peers-timeout", type=int, default=600, help="seconds the torch peers may take per session")
    add("--raw", help="raw records folder (quick: BUILD/quick/raw; full: bench/results/raw)")
    add("--results", help="report folder (quick: BUILD/quick; full: bench/results)")
    add("--no-report", action="store_true", help="record only; build the report later")
    return ap


def parse_args(ap, argv):
    """The options, the preset's where none is given; a bad one is ap.error's (exit 2)."""
    ap.set_defaults(**PRESETS[ap.parse_args(argv).protocol])
    args = ap.parse_args(argv)
    if args.rounds < 1 or args.iterations < 1 or any(s < 1 for s in args.sessions):
        ap.error("--rounds, --iterations and session numbers must be >= 1")
    # Judged here, not by rss_bench after the build: each shape runs in every --dtypes type, so it names none.
    bad = [s for s in args.shapes.split(",") if not re.fullmatch(r"0*[1-9]\d*x0*[1-9]\d*", s)]
    if bad:
        ap.error("--shapes: bad shape '%s' (want ROWSxCOLS, e.g. 4096x4096; the types come from --dtypes)" % bad[0])
    bad = [d for d in args.dtypes.split(",") if d not in records.DTYPES]
    if bad:
        ap.error("--dtypes: unknown storage type '%s' (want a comma list of %s)" % (bad[0], ", ".join(records.DTYPES)))
    return args


def peers_unavailable(args):
    """Why the torch peers will not run ('' when they will)."""
    if args.peers != "auto":
        return "peers switched off"
    probe = subprocess.run([sys.executable, "-c", "import torch; assert torch.cuda.is_available()"],
                           capture_output=True, text=True)
    return "" if probe.returncode == 0 else (probe.stderr.strip().splitlines() or ["?"])[-1]


def announce(args, label, why):
    """What is about to run, how long it should take and where it goes (stderr)."""
    minutes = lambda seconds: "%.0f min" % (seconds / 60) if seconds >= 90 else "%.0f s" % seconds  # noqa: E731
    shapes = args.shapes.split(",")
    pairs = len(args.dtypes.split(",")) * len(shapes)
    print("== %s: session(s) %s, %d rounds x %d samples, %d shape/dtype pairs (%s x %s), torch peers: %s"
          % (label, " ".join(map(str, args.sessions)), args.rounds, args.iterations, pairs, len(shapes),
             args.dtypes, "no (%s)" % why if why else "yes"), file=sys.stderr)
    print("== estimated duration: about %s for rss_bench%s; records: %s, report: %s"
          % (minutes(estimate_seconds(len(args.sessions), pairs, args.rounds, args.iterations)),
             "" if why else ", plus up to %s for the torch peers" % minutes(args.peers_timeout * len(args.sessions)),
             args.raw, args.results), file=sys.stderr, flush=True)


def run_session(args, session, bench, gpu, why):
    """One session: rss_bench, the torch peers unless why says they cannot run, then the completed context."""
    env = dict(os.environ, CUDA_VISIBLE_DEVICES=gpu) if gpu else None  # a UUID pin stays as it was
    order = "forward" if session % 2 == 1 else "reverse"  # even sessions reverse the shape order
    print(f"== session {session} (shape order {order}{', on ' + gpu if gpu else ''})", file=sys.stderr, flush=True)
    clocks_start = nvidia_smi(CLOCKS, gpu)
    rss_out = os.path.join(args.raw, "session%d_rss.json" % session)
    common = ["--rounds=%d" % args.rounds, "--iterations=%d" % args.iterations, "--seed=%d" % args.seed,
              "--fixture-seed=%d" % args.fixture_seed, "--shape-order=" + order, "--session=%d" % session]
    bench_shapes = ",".join(f"{s}:{d}" for d in args.dtypes.split(",") for s in args.shapes.split(","))
    rc = subprocess.run([bench, *common, "--shapes=" + bench_shapes, "--out=" + rss_out], env=env).returncode
    if rc != 0:
        sys.exit("session: rss_bench exited %d%s" % (rc, " (no GPU?)" if rc == 2 else ""))
    peers_note = "torch peers not measured: " + why if why else "torch peers measured"
    if not why:
        try:
            rc = subprocess.run([sys.executable, HERE, "peers", *common, "--shapes=" + args.shapes, "--dtypes=" +
                                 args.dtypes, "--out=" + os.path.join(args.raw, "session%d_torch.json" % session)],
                                timeout=args.peers_timeout, env=env).returncode
        except subprocess.TimeoutExpired:
            rc = "timeout after %d s" % args.peers_timeout
        if rc != 0:
            peers_note = "torch peers failed: %s" % rc
            print("session: " + peers_note, file=sys.stderr)
    complete_context(rss_out, clocks_start, nvidia_smi(CLOCKS, gpu), args.fixture_seed, peers_note, args.protocol, gpu)


def main(argv):
    args = parse_args(parser(), argv)
    quick = args.protocol == "quick"
    results = os.path.join(args.build, "quick") if quick else os.path.join(records.TREE, "bench", "results")
    args.results, args.raw = args.results or results, args.raw or os.path.join(results, "raw")
    bench = os.path.join(args.build, "bench", "rss_bench")
    if not os.path.exists(bench):
        sys.exit("session: %s not found: build it first (bash scripts/bench.sh does; or cmake -S . -B build-bench "
                 "-DRSS_BUILD_BENCH=ON && cmake --build build-bench --target rss_bench)" % bench)
    os.makedirs(args.raw, exist_ok=True)
    why = peers_unavailable(args)
    label = "QUICK protocol (a first look, not the committed protocol: bash scripts/bench.sh --full)" if quick \
        else "FULL protocol (docs/protocol.md)"
    announce(args, label, why)
    pinned = os.environ.get("CUDA_VISIBLE_DEVICES")
    gpus = session_gpus(args.sessions, [] if pinned is not None else [
        d["uuid"] for d in nvidia_smi(["uuid"], every=True) if d["uuid"].startswith("GPU-")], pinned)
    if len(args.sessions) > 1 and pinned is None and len(set(gpus.values())) < len(args.sessions):
        print("== warning: one GPU for %d sessions; the protocol wants each on its own GPU (report verify fails "
              "otherwise): run the next session on another GPU with --sessions N" % len(args.sessions), file=sys.stderr)
    for session in args.sessions:
        run_session(args, session, bench, gpus[session], why)
    if args.no_report:
        return 0
    built = subprocess.run([sys.executable, HERE, "report", "build", "--records", args.raw, "--out", args.results])
    if built.returncode == 0:
        print("== %s done: %s" % (label, os.path.join(args.results, "results.md")), file=sys.stderr)
    return built.returncode
