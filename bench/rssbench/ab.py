"""Before/after summary of bench/ab/run.sh: per benchmark, each tree's median and spread, and new / old.

"Within noise": |new / old - 1| at most the larger spread, at least 1% (docs/protocol.md, "The tools in detail")."""
import argparse
import glob
import json
import os
import statistics
import sys

import records


def times(out_dir, suite, tree):
    """{benchmark name: [real_time in us, one per round and repetition]} of one suite and tree."""
    result = {}
    for path in sorted(glob.glob(os.path.join(out_dir, f"{suite}_{tree}_*.json"))):
        try:
            with open(path) as f:
                doc = json.load(f)
        except json.JSONDecodeError:
            print(f"{path}: incomplete (the run was cut short), left out", file=sys.stderr)
            continue
        for _, run, error in records.iteration_runs(doc):
            if error is None:
                us = run["real_time"] * records.UNIT_US[run.get("time_unit", "ns")]
                result.setdefault(run["name"], []).append(us)
    return result


def main(argv):
    ap = argparse.ArgumentParser(prog="rssbench ab", description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("out_dir", help="the folder bench/ab/run.sh wrote")
    args = ap.parse_args(argv)
    lines = ["| benchmark | old median us (spread) | new median us (spread) | new / old | verdict |", "|---" * 5 + "|"]
    ratios, slower = [], 0
    for suite in ("forward", "backward", "statistics"):
        old, new = times(args.out_dir, suite, "old"), times(args.out_dir, suite, "new")
        for name in sorted(set(old) & set(new)):
            (o, so), (n, sn) = ((m, (max(t) - min(t)) / m if m > 0 else 0.0)
                                for t in (old[name], new[name]) for m in [statistics.median(t)])
            ratio = n / o if o > 0 else float("nan")
            verdict = "within noise" if abs(ratio - 1) <= max(so, sn, 0.01) else ("faster" if ratio < 1 else "SLOWER")
            slower += verdict == "SLOWER"
            ratios.append(ratio)
            lines.append(f"| {name} | {o:.2f} ({so:.1%}) | {n:.2f} ({sn:.1%}) | {ratio:.3f} | {verdict} |")
        lines += [f"| {name} | {'only old' if name in old else '-'} | {'only new' if name in new else '-'} | | |"
                  for name in sorted(set(old) ^ set(new))]
    if not ratios:
        print("no benchmark measured in both trees", file=sys.stderr)
        return 1
    lines += ["", f"{len(ratios)} benchmarks in both trees; geometric mean new / old "
                  f"{statistics.geometric_mean(ratios):.3f}; slower beyond noise: {slower}"]
    print("\n".join(lines))
    return 0
