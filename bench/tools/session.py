#!/usr/bin/env python3
"""Runs measurement sessions as SPEC §4 describes them, then the report.

    python3 bench/tools/session.py --build build --sessions 1 2

Each session: read the clocks, run `rss_bench --session=N` (rounds, per-round shuffled variant order
from the recorded seed; session 2 reverses the shape order), run the torch peers on the same shapes
and fixture when torch is importable (its absence is recorded otherwise), read the clocks again, and
complete the raw records' context: source hash of include/ and bench/, driver, clocks, fixture hash.
Raw records go to bench/results/raw/session<N>_{rss,torch}.json; the report is rebuilt from all of them.
"""
import argparse
import json
import os
import shutil
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
TREE = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, HERE)

import fixture  # noqa: E402
import records  # noqa: E402


def nvidia_smi(fields):
    """Reads GPU fields through nvidia-smi (an empty dict where it is absent)."""
    if shutil.which("nvidia-smi") is None:
        return {}
    out = subprocess.run(["nvidia-smi", "--query-gpu=" + ",".join(fields), "--format=csv,noheader,nounits"],
                         capture_output=True, text=True)
    if out.returncode != 0:
        return {}
    values = [v.strip() for v in out.stdout.splitlines()[0].split(",")]
    return dict(zip(fields, values))


CLOCKS = ["clocks.sm", "clocks.mem", "clocks.max.sm", "temperature.gpu", "power.draw", "pstate"]


def complete_context(path, clocks_start, clocks_end, fixture_seed, peers_note=None):
    """Fills the context fields the C++ bench leaves to the runner, and checks the fixture matches."""
    with open(path) as f:
        doc = json.load(f)
    ctx = doc["context"]
    ctx["source_hash"] = records.source_hash(TREE)
    ctx["clocks_start"], ctx["clocks_end"] = clocks_start, clocks_end
    driver = nvidia_smi(["driver_version"]).get("driver_version")
    if driver:
        ctx["driver"] = driver
    fx = fixture.describe(fixture_seed)
    cpp_first = ctx["fixture"].get("first_elements")
    if cpp_first is not None:
        py_first = " ".join("0x%08x" % v for v in fixture.generate(fixture_seed, 8).view("<u4"))
        if cpp_first != py_first:
            sys.exit("session: the C++ fixture differs from bench/tools/fixture.py: %s vs %s" % (cpp_first, py_first))
    ctx["fixture"].update(fx)
    if peers_note is not None:
        ctx["config"]["peers"] = peers_note
    with open(path, "w") as f:
        json.dump(doc, f, indent=1)
        f.write("\n")


def torch_available():
    probe = subprocess.run([sys.executable, "-c", "import torch; assert torch.cuda.is_available()"],
                           capture_output=True, text=True)
    return probe.returncode == 0, (probe.stderr.strip().splitlines() or ["ok"])[-1]


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--build", default=os.path.join(TREE, "build"), help="CMake build folder holding bench/rss_bench")
    ap.add_argument("--sessions", type=int, nargs="+", default=[1, 2])
    ap.add_argument("--rounds", type=int, default=10)
    ap.add_argument("--iterations", type=int, default=30)
    ap.add_argument("--seed", type=int, default=20261129, help="seed of the per-round shuffles (recorded)")
    ap.add_argument("--fixture-seed", type=int, default=42)
    ap.add_argument("--shapes", default="", help="comma list ROWSxCOLS (default: every SPEC §3 shape)")
    ap.add_argument("--raw", default=os.path.join(TREE, "bench", "results", "raw"))
    ap.add_argument("--results", default=os.path.join(TREE, "bench", "results"))
    ap.add_argument("--dtypes", default="fp32,bf16,fp16", help="comma list of storage types, each over every shape")
    ap.add_argument("--peers", choices=["auto", "off"], default="auto")
    ap.add_argument("--peers-timeout", type=int, default=600, help="seconds the torch peers may take per session")
    ap.add_argument("--no-report", action="store_true", help="record only; build the report later")
    args = ap.parse_args(argv)

    bench = os.path.join(args.build, "bench", "rss_bench")
    if not os.path.exists(bench):
        sys.exit("session: %s not found: build first (cmake -S . -B build && cmake --build build -j)" % bench)
    os.makedirs(args.raw, exist_ok=True)
    shapes = args.shapes or "1x131072,8x131072,64x131072,32x128256,4096x4096,16384x8192,4096x32768," \
                            "1x1048576,1x4194304,1x16777216"
    dtypes = args.dtypes.split(",")
    bench_shapes = ",".join(s if d == "fp32" else s + ":" + d for d in dtypes for s in shapes.split(","))
    has_torch, why = torch_available() if args.peers == "auto" else (False, "peers switched off")

    for session in args.sessions:
        order = "forward" if session % 2 == 1 else "reverse"
        print("== session %d (shape order %s)" % (session, order), file=sys.stderr, flush=True)
        clocks_start = nvidia_smi(CLOCKS)
        rss_out = os.path.join(args.raw, "session%d_rss.json" % session)
        cmd = [bench, "--session=%d" % session, "--rounds=%d" % args.rounds, "--iterations=%d" % args.iterations,
               "--seed=%d" % args.seed, "--fixture-seed=%d" % args.fixture_seed, "--shape-order=" + order,
               "--shapes=" + bench_shapes, "--out=" + rss_out]
        rc = subprocess.run(cmd).returncode
        if rc != 0:
            sys.exit("session: rss_bench exited %d%s" % (rc, " (no GPU?)" if rc == 2 else ""))
        peers_note = "torch peers measured" if has_torch else "torch peers not measured: " + why
        if has_torch:
            torch_out = os.path.join(args.raw, "session%d_torch.json" % session)
            try:
                rc = subprocess.run([sys.executable, os.path.join(HERE, "peers.py"), "--session", str(session),
                                     "--rounds", str(args.rounds), "--iterations", str(args.iterations),
                                     "--seed", str(args.seed), "--fixture-seed", str(args.fixture_seed),
                                     "--shapes", shapes, "--dtypes", args.dtypes, "--shape-order", order,
                                     "--out", torch_out,
                                     "--tree", TREE], timeout=args.peers_timeout).returncode
            except subprocess.TimeoutExpired:
                rc = "timeout after %d s" % args.peers_timeout
            if rc != 0:
                peers_note = "torch peers failed: %s" % rc
                print("session: " + peers_note, file=sys.stderr)
        complete_context(rss_out, clocks_start, nvidia_smi(CLOCKS), args.fixture_seed, peers_note)

    if not args.no_report:
        rc = subprocess.run([sys.executable, os.path.join(HERE, "report.py"), "build", "--records", args.raw,
                             "--out", args.results]).returncode
        sys.exit(rc)


if __name__ == "__main__":
    main()
