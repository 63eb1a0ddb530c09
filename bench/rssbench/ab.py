#!/usr/bin/env python3
"""Before/after summary of bench/ab/run.sh: per benchmark, the median over every sample of each tree (one per
round and repetition), the spread (max - min, as a share of the median), and new / old. Standard library only.

Usage: python3 bench/rssbench ab OUT_DIR [--markdown FILE]
A benchmark is "within noise" when |new / old - 1| is at most the larger of the two spreads.
"""
import argparse
import glob
import json
import os
import statistics
import sys


def times(out_dir, suite, tree):
    """{benchmark name: [real_time in us, one per round and repetition]} of one suite and tree."""
    result = {}
    for path in sorted(glob.glob(os.path.join(out_dir, f"{suite}_{tree}_*.json"))):
        try:
            with open(path) as f:
                data = json.load(f)
        except json.JSONDecodeError:
            print(f"{path}: incomplete (the run was cut short), left out", file=sys.stderr)
            continue
        for b in data.get("benchmarks", []):
            if b.get("run_type") == "aggregate" or b.get("error_occurred") or b.get("skipped"):
                continue
            unit = {"ns": 1e-3, "us": 1.0, "ms": 1e3, "s": 1e6}[b.get("time_unit", "ns")]
            result.setdefault(b["name"], []).append(b["real_time"] * unit)
    return result


def main(argv=None):
    parser = argparse.ArgumentParser(prog="rssbench ab", description=__doc__.splitlines()[0])
    parser.add_argument("out_dir")
    parser.add_argument("--markdown", help="also write the table here")
    args = parser.parse_args(argv)
    lines = ["| benchmark | old median us (spread) | new median us (spread) | new / old | verdict |",
             "|---|---|---|---|---|"]
    slower = 0
    compared = 0
    ratios = []
    for suite in ("forward", "backward", "statistics"):
        old, new = times(args.out_dir, suite, "old"), times(args.out_dir, suite, "new")
        for name in sorted(set(old) & set(new)):
            o, n = statistics.median(old[name]), statistics.median(new[name])
            so = (max(old[name]) - min(old[name])) / o if o > 0 else 0.0
            sn = (max(new[name]) - min(new[name])) / n if n > 0 else 0.0
            ratio = n / o if o > 0 else float("nan")
            noise = max(so, sn, 0.01)
            verdict = "within noise" if abs(ratio - 1) <= noise else ("faster" if ratio < 1 else "SLOWER")
            slower += verdict == "SLOWER"
            compared += 1
            ratios.append(ratio)
            lines.append(f"| {name} | {o:.2f} ({100 * so:.1f}%) | {n:.2f} ({100 * sn:.1f}%) | {ratio:.3f} | {verdict} |")
        for name in sorted(set(old) ^ set(new)):
            lines.append(f"| {name} | {'-' if name not in old else 'only old'} | {'-' if name not in new else 'only new'} | | |")
    if compared == 0:
        print("no benchmark measured in both trees", file=sys.stderr)
        return 1
    lines.append("")
    lines.append(f"{compared} benchmarks in both trees; geometric mean new / old "
                 f"{statistics.geometric_mean(ratios):.3f}; slower beyond noise: {slower}")
    text = "\n".join(lines)
    print(text)
    if args.markdown:
        with open(args.markdown, "w") as f:
            f.write(text + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
