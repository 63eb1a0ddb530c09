#!/usr/bin/env python3
"""Writes a shipped tuning table from pilot records (rss_bench --pilot).

    python3 bench/rssbench tune bench/results/pilot/h200_pilot*.json --device "NVIDIA H200" \\
        --name h200 --out include/rss/tuning/h200_table.hpp

Per measured (shape, dtype), the pilot timed each candidate (cluster_row under every configuration that fits, the
megakernels, block_row, local_fusion) and `heuristic`, what automatic picks without a table. A candidate becomes an
entry when its median host time beats the heuristic's by more than the margin (3% by default, about twice the
session-to-session spread of the medians) and it won every round (its slowest round median below the heuristic's
fastest; each file's rounds stay its own). An entry covers exactly its shape: the heuristic
(include/rss/tuning/auto_select.hpp) decides every other. Tables are generated from every committed pilot file of
the device, never edited by hand. The decisions go to stderr, the header to --out (or stdout).
"""
import argparse
import statistics
import sys
from collections import defaultdict

import records

# Candidates that can become a table entry: the concrete strategies (automatic is what the table feeds).
STRATEGIES = tuple(v for v in records.STRATEGIES + records.CONTROLS if v != "automatic")
NOT_CANDIDATES = ("heuristic",) + records.FLOORS
RESIDENCE_SUFFIXES = {"s": "shared_memory", "p": "shared_memory_pipelined"}


class TuneError(Exception):
    """A problem with the input files or the arguments, said in one line (no traceback)."""


class Timing:
    """A variant's host samples on one shape: the overall median and the median of each round."""

    def __init__(self, by_round):
        self.median = statistics.median([t for samples in by_round.values() for t in samples])
        self.round_medians = [statistics.median(samples) for samples in by_round.values()]


def load(path):
    """One pilot record file (records.load), or a TuneError that says what is wrong with it."""
    try:
        return records.load(path, complete=False)
    except records.RecordError as e:
        raise TuneError(str(e).splitlines()[0]) from e


def device_of(docs):
    """The GPU name all files were measured on; a TuneError when they disagree or do not say."""
    names = defaultdict(list)
    for path, doc in docs:
        if not doc["context"].get("gpu"):
            raise TuneError(f"{path}: the records do not name their GPU (context.gpu)")
        names[doc["context"]["gpu"].strip()].append(path)
    if len(names) > 1:
        raise TuneError("the files were measured on different GPUs: " +
                        "; ".join(f"{g} ({', '.join(p)})" for g, p in sorted(names.items())))
    return next(iter(names))


def timings(paths, docs=None):
    """{(rows, cols, dtype): {variant: Timing}} over every record of every file (each file's rounds apart)."""
    samples = defaultdict(lambda: defaultdict(lambda: defaultdict(list)))
    for path, doc in docs or [(path, load(path)) for path in paths]:
        for r in doc["records"]:
            samples[(r["rows"], r["cols"], r["dtype"])][r["variant"]][(path, doc["session"], r["round"])].extend(r["host_us"])
    return {shape: {v: Timing(rounds) for v, rounds in by_variant.items()} for shape, by_variant in samples.items()}


def parse_variant(name):
    """'cluster_row:512x32x8' -> ('cluster_row', (512, 32, 8, 'registers')); a trailing 's' (row kept in shared
    memory) gives 'shared_memory', 'p' (two tiles, pipelined) 'shared_memory_pipelined'; 'megakernel_grid' ->
    ('megakernel_grid', None)."""
    strategy, _, config = name.partition(":")
    if strategy not in STRATEGIES:
        raise TuneError(f"unknown variant {name!r} (known: {', '.join(STRATEGIES)})")
    if not config:
        return strategy, None
    residence = RESIDENCE_SUFFIXES.get(config[-1:], "registers")
    try:
        return strategy, tuple(int(v) for v in (config if residence == "registers" else config[:-1]).split("x")) \
            + (residence,)
    except ValueError:
        raise TuneError(f"bad configuration in variant {name!r} (want THREADSxELEMSxCLUSTER, optionally ending in s "
                        "or p)")


def decide(table, margin):
    """Entries [(rows, cols, dtype, variant, best_us, heuristic_us)] and a report line per shape."""
    entries, lines = [], []
    for (rows, cols, dtype), by_variant in sorted(table.items(), key=lambda kv: (kv[0][2], kv[0][0] * kv[0][1])):
        h = by_variant.get("heuristic")
        candidates = {v: t for v, t in by_variant.items() if v not in NOT_CANDIDATES}
        if h is None or not candidates:
            lines.append(f"{rows}x{cols} {dtype}: no heuristic or no candidate record, skipped")
            continue
        best = min(candidates, key=lambda v: candidates[v].median)
        b = candidates[best]
        verdict = ("the heuristic is within the margin" if b.median * (1 + margin) >= h.median else
                   "faster by the margin, but not in every round: noise"
                   if max(b.round_medians) >= min(h.round_medians) else "entry")
        lines.append(f"{rows}x{cols} {dtype}: best {best} {b.median:.2f} us, heuristic {h.median:.2f} us "
                     f"({h.median / b.median:.3f}x): {verdict}")
        if verdict == "entry":
            entries.append((rows, cols, dtype, best, b.median, h.median))
    return entries, lines


def header(entries, device, name, sources):
    out = ["#pragma once", f"// Generated by bench/rssbench tune from {', '.join(sources)}: do not edit by hand.",
           f"// Shapes where a pilot candidate beat the heuristic on the {device} by more than the margin.",
           '#include "rss/tuning/auto_select.hpp"', "", "namespace rss::tuning {", ""]
    if not entries:
        out += ["// No entries: on every measured shape the heuristic picks the winner or one within the margin.",
                f"inline constexpr const TuningEntry* {name}_entries = nullptr;",
                f"inline constexpr int {name}_entry_count = 0;"]
    else:
        out.append(f"inline constexpr TuningEntry {name}_entries_storage[] = {{")
        for rows, cols, dtype, variant, best, auto in entries:
            strategy, config = parse_variant(variant)
            cfg = "{%d, %d, %d, RowResidence::%s}" % config if config else "{}"
            out.append(f"    {{DType::{dtype}, {rows}, {rows}, {cols}, {cols}, {{Strategy::{strategy}, {cfg}}}}},"
                       f"  // {best:.2f} us vs {auto:.2f}")
        out += ["};", f"inline constexpr const TuningEntry* {name}_entries = {name}_entries_storage;",
                f"inline constexpr int {name}_entry_count = {len(entries)};"]
    return "\n".join(out + ["", "}  // namespace rss::tuning", ""])


def main(argv=None):
    ap = argparse.ArgumentParser(prog="rssbench tune", description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("pilot", nargs="+", help="pilot record files (rss-records/2, from rss_bench --pilot)")
    ap.add_argument("--device", help='GPU the records come from, e.g. "NVIDIA H200": must match their context.gpu '
                                     "(default: that name)")
    ap.add_argument("--name", required=True, help="C++ identifier prefix, e.g. h200")
    ap.add_argument("--margin", type=float, default=0.03, help="required gain over the heuristic (default 0.03)")
    ap.add_argument("--out", help="header to write (default: print it on stdout)")
    args = ap.parse_args(argv)
    try:
        if not args.name.isidentifier():
            raise TuneError(f"--name {args.name!r} is not a C++ identifier")
        docs = [(path, load(path)) for path in args.pilot]
        measured_on = device_of(docs)
        if args.device is not None and args.device.strip() != measured_on:
            raise TuneError(f"--device {args.device!r} does not match the records, measured on {measured_on!r}")
        entries, lines = decide(timings(args.pilot, docs), args.margin)
        text = header(entries, args.device or measured_on, args.name, [p.split("/")[-1] for p in args.pilot])
        print("\n".join(lines), file=sys.stderr)
        if not args.out:
            sys.stdout.write(text)
            return 0
        try:
            with open(args.out, "w") as f:
                f.write(text)
        except OSError as e:
            raise TuneError(f"{args.out}: cannot write: {e.strerror or e}") from e
        print(f"wrote {args.out}: {len(entries)} entries", file=sys.stderr)
    except (TuneError, KeyError, TypeError) as e:
        print(f"tune.py: error: {f'missing field {e}' if isinstance(e, KeyError) else e}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
