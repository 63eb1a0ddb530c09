#!/usr/bin/env python3
"""The sixteenth session's A/B tables from fewrow_configs logs (events, us per call, automatic's kernel):
    python3 bench/results/s16/ab_summary.py bench/results/s16/call3_GPU-5155345f
Each folder holds ab_PASS_VARIANT.log files; per shape and variant it prints every pass, the best run's ratio to
the median memcpy of the same bytes over all runs of the shape, and whether the checksums of y agree."""
import collections
import glob
import os
import re
import sys

LINE = re.compile(r"(\S+ \S+)\s+(\S+) grid.*: ([\d.]+) us\s+memcpy ([\d.]+) us.*checksum (\S+) (\S+)")

for folder in sys.argv[1:]:
    runs = collections.defaultdict(lambda: collections.defaultdict(list))
    sums = {}
    order = []
    for path in sorted(glob.glob(os.path.join(folder, "ab_*_*.log"))):
        variant = os.path.basename(path)[:-4].split("_", 2)[2]
        if variant not in order:
            order.append(variant)
        for line in open(path):
            m = LINE.match(line)
            if m:
                runs[m.group(1)][variant].append((float(m.group(3)), float(m.group(4))))
                sums[(m.group(1), variant)] = (m.group(5), m.group(6))
    print(folder)
    for shape, by_variant in runs.items():
        copies = sorted(c for v in by_variant.values() for _, c in v)
        memcpy = copies[len(copies) // 2]
        cells = []
        for v in order:
            times = [t for t, _ in by_variant.get(v, [])]
            if times:
                cells.append(f"{v} {' '.join('%.1f' % t for t in times)} ({min(times) / memcpy:.3f})")
        agree = len({sums[(shape, v)] for v in order if (shape, v) in sums}) == 1
        print(f"  {shape:17s} memcpy {memcpy:6.1f}  " + "  ".join(cells) + ("" if agree else "  CHECKSUMS DIFFER"))
