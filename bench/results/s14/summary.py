"""The fourteenth session's backward records (rss_backward_bench --session JSON, xz-compressed here): per shape,
host us (the median of every sample over the files), with each variant's ratio to its saved state's floor.

    python3 bench/results/s14/summary.py pilot FILE [FILE ...]        every variant, fastest first
    python3 bench/results/s14/summary.py ab 'OLD_GLOB' 'NEW_GLOB'     old -> new per variant (globs of files)
"""
import glob
import json
import lzma
import statistics
import sys
from collections import defaultdict


def medians(paths):
    samples = defaultdict(lambda: defaultdict(list))
    for path in paths:
        with (lzma.open if path.endswith(".xz") else open)(path, "rt") as f:
            for r in json.load(f)["benchmarks"]:
                shape, _, variant = r["name"].split("/")[:3]
                samples[shape][variant] += [v for k, v in r.items() if k.startswith("host_us/")]
    return {s: {v: statistics.median(t) for v, t in vs.items()} for s, vs in samples.items()}


def floor_of(times, variant):
    return times.get("floor_saved" if variant.split(":")[0].endswith("_saved") else "floor")


def pilot(paths):
    for shape, times in medians(paths).items():
        print(shape)
        for v, m in sorted(times.items(), key=lambda kv: kv[1]):
            floor = floor_of(times, v)
            print(f"  {v:36s} {m:8.2f}" + (f"  ({m / floor:.3f} x its floor)" if floor and "floor" not in v else ""))


def ab(old_glob, new_glob):
    old, new = medians(sorted(glob.glob(old_glob))), medians(sorted(glob.glob(new_glob)))
    for shape in old:
        for v in sorted(old[shape]):
            if v in new.get(shape, {}):
                print(f"{shape:18s} {v:20s} {old[shape][v]:8.2f} -> {new[shape][v]:8.2f} ({new[shape][v] / old[shape][v]:.3f})")


if __name__ == "__main__":
    if len(sys.argv) >= 3 and sys.argv[1] == "pilot":
        pilot(sys.argv[2:])
    elif len(sys.argv) == 4 and sys.argv[1] == "ab":
        ab(sys.argv[2], sys.argv[3])
    else:
        sys.exit(__doc__)
