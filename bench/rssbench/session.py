#!/usr/bin/env python3
"""Runs measurement sessions of the project's protocol (docs/protocol.md), then the report.

    python3 bench/rssbench session --build build-bench                     (quick protocol, the default)
    python3 bench/rssbench session --build build-bench --protocol full      (the full protocol)

Each session: read the clocks, run `rss_bench --session=N` (rounds, per-round shuffled variant order
from the recorded seed; session 2 reverses the shape order), run the torch peers on the same shapes
and fixture when torch is importable (its absence is recorded otherwise), read the clocks again, and
complete the raw records' context: source hash of include/ and bench/, driver, clocks, fixture hash.

Protocols (any option given explicitly overrides the preset):
  quick  1 session, 3 rounds x 10 samples, 6 shapes x fp32/bf16, no torch peers: a few minutes. Records
         and report go to BUILD/quick/ (never over the committed results); not the basis of any claim.
  full   sessions 1 and 2, 10 rounds x 30 samples, 10 shapes x fp32/bf16/fp16, the torch peers when torch
         is importable: about an hour. Records go to bench/results/raw/session<N>_{rss,torch}.json and the
         report to bench/results/, rebuilt from every record there.
"""
import argparse
import json
import os
import shutil
import subprocess
import sys

import fixture
import records

HERE = os.path.dirname(os.path.abspath(__file__))
TREE = os.path.dirname(os.path.dirname(HERE))


def nvidia_smi(fields, gpu=None):
    """Reads GPU fields through nvidia-smi, of one GPU (UUID) or the first (an empty dict where it is absent)."""
    if shutil.which("nvidia-smi") is None:
        return {}
    out = subprocess.run(["nvidia-smi", "--query-gpu=" + ",".join(fields), "--format=csv,noheader,nounits"]
                         + (["-i", gpu] if gpu else []), capture_output=True, text=True)
    if out.returncode != 0:
        return {}
    values = [v.strip() for v in out.stdout.splitlines()[0].split(",")]
    return dict(zip(fields, values))


CLOCKS = ["clocks.sm", "clocks.mem", "clocks.max.sm", "temperature.gpu", "power.draw", "pstate"]


def gpu_uuids():
    """UUIDs of the GPUs nvidia-smi sees, in its order (empty without nvidia-smi)."""
    if shutil.which("nvidia-smi") is None:
        return []
    out = subprocess.run(["nvidia-smi", "--query-gpu=uuid", "--format=csv,noheader"], capture_output=True, text=True)
    return [line.strip() for line in out.stdout.splitlines() if line.strip().startswith("GPU-")] if out.returncode == 0 else []


def session_gpus(sessions, uuids, pinned):
    """{session: GPU UUID or None}. The protocol wants each session on its own GPU: session N goes to the N-th
    GPU (cyclically) unless CUDA_VISIBLE_DEVICES already pins one (a UUID pin is kept for reading clocks)."""
    if pinned is not None:
        return {s: pinned if pinned.startswith("GPU-") and "," not in pinned else None for s in sessions}
    if len(uuids) < 2:
        return {s: None for s in sessions}
    return {s: uuids[(s - 1) % len(uuids)] for s in sessions}


def complete_context(path, clocks_start, clocks_end, fixture_seed, peers_note=None, protocol=None, gpu=None):
    """Fills the context fields the C++ bench leaves to the runner, and checks the fixture matches."""
    with open(path) as f:
        doc = json.load(f)
    ctx = doc["context"]
    ctx["source_hash"] = records.source_hash(TREE)
    ctx["clocks_start"], ctx["clocks_end"] = clocks_start, clocks_end
    driver = nvidia_smi(["driver_version"], gpu).get("driver_version")
    if driver:
        ctx["driver"] = driver
    cpp_first = ctx.get("fixture_first_elements")
    if cpp_first is not None:
        py_first = " ".join("0x%08x" % v for v in fixture.generate(fixture_seed, 8).view("<u4"))
        if cpp_first != py_first:
            sys.exit("session: the C++ fixture differs from bench/rssbench/fixture.py: %s vs %s" % (cpp_first, py_first))
    fx = fixture.describe(fixture_seed)
    ctx.update(fixture_seed=str(fx["seed"]), fixture_generator=fx["generator"], fixture_hash=fx["hash"])
    if peers_note is not None:
        ctx["peers"] = peers_note
    if protocol is not None:
        ctx["protocol"] = protocol
    with open(path, "w") as f:
        json.dump(doc, f, indent=1)
        f.write("\n")
    records.load(path)  # the completed file follows the schema


def torch_available():
    probe = subprocess.run([sys.executable, "-c", "import torch; assert torch.cuda.is_available()"],
                           capture_output=True, text=True)
    return probe.returncode == 0, (probe.stderr.strip().splitlines() or ["ok"])[-1]


ALL_SHAPES = "1x131072,8x131072,64x131072,32x128256,4096x4096,16384x8192,4096x32768,1x1048576,1x4194304,1x16777216"
PRESETS = {
    "quick": {"sessions": [1], "rounds": 3, "iterations": 10, "dtypes": "fp32,bf16", "peers": "off",
              "shapes": "1x131072,64x131072,32x128256,4096x4096,16384x8192,1x4194304"},
    "full": {"sessions": [1, 2], "rounds": 10, "iterations": 30, "dtypes": "fp32,bf16,fp16", "peers": "auto",
             "shapes": ALL_SHAPES},
}
# Seconds per (session, shape/dtype pair, round) for rss_bench's variants: set-up plus per-sample cost, fitted
# to an H200 session of 3 rounds x 10 samples over 20 pairs that took 157 s.
SECONDS_PER_ROUND, SECONDS_PER_SAMPLE = 1.3, 0.13


def estimate_seconds(sessions, pairs, rounds, iterations):
    """Rough duration of rss_bench's part of the sessions (the torch peers come on top)."""
    return sessions * pairs * rounds * (SECONDS_PER_ROUND + SECONDS_PER_SAMPLE * iterations)


def minutes(seconds):
    return "%.0f min" % (seconds / 60) if seconds >= 90 else "%.0f s" % seconds


def parser(passed_on=False):
    """The options; passed_on: those scripts/bench.sh hands on (it sets --build itself, from RSS_BUILD_DIR)."""
    if passed_on:
        ap = argparse.ArgumentParser(prog="scripts/bench.sh", usage=argparse.SUPPRESS, add_help=False)
    else:
        ap = argparse.ArgumentParser(prog="rssbench session", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--protocol", choices=sorted(PRESETS), default="quick",
                    help="preset of the options below (default quick; full is the protocol of the committed results)")
    if not passed_on:
        ap.add_argument("--build", default=os.path.join(TREE, "build-bench"),
                        help="CMake build folder holding bench/rss_bench (default build-bench)")
    ap.add_argument("--sessions", type=int, nargs="+", help="session numbers (quick: 1; full: 1 2)")
    ap.add_argument("--rounds", type=int, help="rounds per shape (quick: 3; full: 10)")
    ap.add_argument("--iterations", type=int, help="host samples per variant and round (quick: 10; full: 30)")
    ap.add_argument("--seed", type=int, default=20261129, help="seed of the per-round shuffles (recorded)")
    ap.add_argument("--fixture-seed", type=int, default=42, help="seed of the input fixture (recorded)")
    ap.add_argument("--shapes", help="comma list ROWSxCOLS (quick: 6 shapes; full: the 10 project shapes)")
    ap.add_argument("--dtypes", help="comma list of storage types, each over every shape (quick: fp32,bf16; "
                                     "full: fp32,bf16,fp16)")
    ap.add_argument("--peers", choices=["auto", "off"], help="torch peers (quick: off; full: auto, i.e. when "
                                                             "torch with CUDA is importable)")
    ap.add_argument("--peers-timeout", type=int, default=600, help="seconds the torch peers may take per session")
    ap.add_argument("--raw", help="raw records folder (quick: BUILD/quick/raw; full: bench/results/raw)")
    ap.add_argument("--results", help="report folder (quick: BUILD/quick; full: bench/results)")
    ap.add_argument("--no-report", action="store_true", help="record only; build the report later")
    return ap


def parse_args(ap, argv):
    """The options with the preset filled in; a bad one is ap.error's (exit 2)."""
    args = ap.parse_args(argv)
    for key, value in PRESETS[args.protocol].items():
        if getattr(args, key) is None:
            setattr(args, key, value)
    if args.rounds < 1 or args.iterations < 1 or any(s < 1 for s in args.sessions):
        ap.error("--rounds, --iterations and session numbers must be >= 1")
    return args


def check_passed_on(argv):
    """scripts/bench.sh, before the GPU check and the build: the options it hands on, judged here (exit 2)."""
    ap = parser(passed_on=True)

    def refuse(message):
        print("scripts/bench.sh: %s (bash scripts/bench.sh --help lists the options)" % message, file=sys.stderr)
        sys.exit(2)
    ap.error = refuse
    parse_args(ap, argv)


def passed_on_help():
    """The options scripts/bench.sh hands on, for its --help."""
    return parser(passed_on=True).format_help().rstrip()


def main(argv=None):
    ap = parser()
    args = parse_args(ap, argv)
    quick_dir = os.path.join(args.build, "quick")
    if args.raw is None:
        args.raw = os.path.join(quick_dir, "raw") if args.protocol == "quick" else os.path.join(TREE, "bench", "results", "raw")
    if args.results is None:
        args.results = quick_dir if args.protocol == "quick" else os.path.join(TREE, "bench", "results")

    bench = os.path.join(args.build, "bench", "rss_bench")
    if not os.path.exists(bench):
        sys.exit("session: %s not found: build it first (bash scripts/bench.sh does; or cmake -S . -B build-bench "
                 "-DRSS_BUILD_BENCH=ON && cmake --build build-bench --target rss_bench)" % bench)
    os.makedirs(args.raw, exist_ok=True)
    shapes = args.shapes
    dtypes = args.dtypes.split(",")
    bench_shapes = ",".join(s if d == "fp32" else s + ":" + d for d in dtypes for s in shapes.split(","))
    has_torch, why = torch_available() if args.peers == "auto" else (False, "peers switched off")
    pairs = len(dtypes) * len(shapes.split(","))
    estimate = estimate_seconds(len(args.sessions), pairs, args.rounds, args.iterations)
    label = "QUICK protocol (a first look, not the committed protocol: bash scripts/bench.sh --full)" \
        if args.protocol == "quick" else "FULL protocol (docs/protocol.md)"
    print("== %s: session(s) %s, %d rounds x %d samples, %d shape/dtype pairs (%s x %s), torch peers: %s"
          % (label, " ".join(map(str, args.sessions)), args.rounds, args.iterations, pairs,
             len(shapes.split(",")), args.dtypes, "yes" if has_torch else "no (%s)" % why), file=sys.stderr)
    print("== estimated duration: about %s for rss_bench%s; records: %s, report: %s"
          % (minutes(estimate), ", plus up to %s for the torch peers" % minutes(args.peers_timeout * len(args.sessions))
             if has_torch else "", args.raw, args.results), file=sys.stderr, flush=True)

    pinned = os.environ.get("CUDA_VISIBLE_DEVICES")
    gpus = session_gpus(args.sessions, gpu_uuids() if pinned is None else [], pinned)
    if len(args.sessions) > 1 and pinned is None and len(set(gpus.values())) < len(args.sessions):
        print("== warning: one GPU for %d sessions; the protocol wants each on its own GPU (report.py verify fails "
              "otherwise): run the next session on another GPU with --sessions N" % len(args.sessions),
              file=sys.stderr)
    for session in args.sessions:
        order = "forward" if session % 2 == 1 else "reverse"
        gpu = gpus[session]
        env = dict(os.environ, CUDA_VISIBLE_DEVICES=gpu) if gpu and pinned is None else None
        print("== session %d (shape order %s%s)" % (session, order, ", on " + gpu if gpu else ""), file=sys.stderr,
              flush=True)
        clocks_start = nvidia_smi(CLOCKS, gpu)
        rss_out = os.path.join(args.raw, "session%d_rss.json" % session)
        cmd = [bench, "--session=%d" % session, "--rounds=%d" % args.rounds, "--iterations=%d" % args.iterations,
               "--seed=%d" % args.seed, "--fixture-seed=%d" % args.fixture_seed, "--shape-order=" + order,
               "--shapes=" + bench_shapes, "--out=" + rss_out]
        rc = subprocess.run(cmd, env=env).returncode
        if rc != 0:
            sys.exit("session: rss_bench exited %d%s" % (rc, " (no GPU?)" if rc == 2 else ""))
        peers_note = "torch peers measured" if has_torch else "torch peers not measured: " + why
        if has_torch:
            torch_out = os.path.join(args.raw, "session%d_torch.json" % session)
            try:
                rc = subprocess.run([sys.executable, HERE, "peers", "--session", str(session),
                                     "--rounds", str(args.rounds), "--iterations", str(args.iterations),
                                     "--seed", str(args.seed), "--fixture-seed", str(args.fixture_seed),
                                     "--shapes", shapes, "--dtypes", args.dtypes, "--shape-order", order,
                                     "--out", torch_out,
                                     "--tree", TREE], timeout=args.peers_timeout, env=env).returncode
            except subprocess.TimeoutExpired:
                rc = "timeout after %d s" % args.peers_timeout
            if rc != 0:
                peers_note = "torch peers failed: %s" % rc
                print("session: " + peers_note, file=sys.stderr)
        complete_context(rss_out, clocks_start, nvidia_smi(CLOCKS, gpu), args.fixture_seed, peers_note, args.protocol,
                         gpu)

    if not args.no_report:
        rc = subprocess.run([sys.executable, HERE, "report", "build", "--records", args.raw,
                             "--out", args.results]).returncode
        if rc == 0:
            print("== %s done: %s" % (label, os.path.join(args.results, "results.md")), file=sys.stderr)
        return rc
    return 0


if __name__ == "__main__":
    sys.exit(main())
