#!/usr/bin/env python3
"""Writes a shipped tuning table from pilot records (rss_bench --pilot).

For every measured (shape, dtype), the pilot timed each candidate (cluster_row under every configuration
that fits, the megakernels, block_row, local_fusion) and `heuristic`, what automatic picks without a
table. A candidate becomes a table entry when its median host time beats the heuristic's by more than
the margin (3% by default, about twice the session-to-session spread of the medians) and it won every
round: its slowest round median is below the heuristic's fastest. Elsewhere the heuristic already picks
the winner, or one within the noise, and the shape gets no entry. An entry covers exactly
the measured shape: the heuristic (include/rss/tuning/auto_select.hpp) decides every other shape.

Tables are generated, never edited by hand, from every committed pilot file of the device (each file's
rounds stay rounds of their own):
    python3 bench/rssbench tune bench/results/pilot/h200_pilot*.json --device "NVIDIA H200" \
        --name h200 --out include/rss/tuning/h200_table.hpp

The per-shape decisions go to stderr; the header goes to --out, or to stdout without it. --device must
name the GPU the records were measured on (their context.gpu); without it, that name is used. The
measurement protocol is the project's own (docs/protocol.md).
"""
import argparse
import json
import os
import statistics
import sys
from collections import defaultdict

import records

# Candidates that can become a table entry: the concrete strategies (automatic is what the table feeds).
STRATEGIES = tuple(v for v in records.STRATEGIES + records.CONTROLS if v != "automatic")
NOT_CANDIDATES = ("heuristic",) + records.FLOORS


class TuneError(Exception):
    """A problem with the input files or the arguments, said in one line (no traceback)."""
DTYPE_ENUM = {"fp32": "DType::fp32", "bf16": "DType::bf16", "fp16": "DType::fp16"}


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
    names = {}
    for path, doc in docs:
        gpu = (doc.get("context") or {}).get("gpu")
        if not gpu:
            raise TuneError(f"{path}: the records do not name their GPU (context.gpu)")
        names.setdefault(gpu.strip(), []).append(path)
    if len(names) > 1:
        raise TuneError("the files were measured on different GPUs: " +
                        "; ".join(f"{g} ({', '.join(p)})" for g, p in sorted(names.items())))
    return next(iter(names))


def timings(paths, docs=None):
    """{(rows, cols, dtype): {variant: Timing}} over every record of every file (rounds of several
    files are kept apart)."""
    samples = defaultdict(lambda: defaultdict(lambda: defaultdict(list)))
    docs = docs or [(path, load(path)) for path in paths]
    for path, doc in docs:
        for r in doc["records"]:
            rounds = samples[(r["rows"], r["cols"], r["dtype"])][r["variant"]]
            rounds[(path, doc.get("session"), r["round"])].extend(r["host_us"])
    return {shape: {v: Timing(rounds) for v, rounds in by_variant.items()} for shape, by_variant in samples.items()}


RESIDENCE_SUFFIXES = {"s": "shared_memory", "p": "shared_memory_pipelined"}


def parse_variant(name):
    """'cluster_row:512x32x8' -> ('cluster_row', (512, 32, 8, 'registers')); a trailing 's' (row kept in
    shared memory) gives 'shared_memory', a trailing 'p' (two tiles, pipelined) 'shared_memory_pipelined';
    'megakernel_grid' -> ('megakernel_grid', None)."""
    strategy, _, config = name.partition(":")
    if strategy not in STRATEGIES:
        raise TuneError(f"unknown variant {name!r} (known: {', '.join(STRATEGIES)})")
    if not config:
        return strategy, None
    residence = RESIDENCE_SUFFIXES.get(config[-1:], "registers")
    if residence != "registers":
        config = config[:-1]
    try:
        return strategy, tuple(int(v) for v in config.split("x")) + (residence,)
    except ValueError:
        raise TuneError(f"bad configuration in variant {name!r} "
                        "(want THREADSxELEMSxCLUSTER, optionally ending in s or p)")


def decide(table, margin):
    """Entries [(rows, cols, dtype, variant, best_us, heuristic_us)] and a report line per shape."""
    entries, lines = [], []
    for (rows, cols, dtype), by_variant in sorted(table.items(), key=lambda kv: (kv[0][2], kv[0][0] * kv[0][1])):
        heuristic = by_variant.get("heuristic")
        candidates = {v: t for v, t in by_variant.items() if v not in NOT_CANDIDATES}
        if heuristic is None or not candidates:
            lines.append(f"{rows}x{cols} {dtype}: no heuristic or no candidate record, skipped")
            continue
        best = min(candidates, key=lambda v: candidates[v].median)
        b, h = candidates[best], heuristic
        if b.median * (1 + margin) >= h.median:
            verdict = "the heuristic is within the margin"
        elif max(b.round_medians) >= min(h.round_medians):
            verdict = "faster by the margin, but not in every round: noise"
        else:
            verdict = "entry"
        lines.append(f"{rows}x{cols} {dtype}: best {best} {b.median:.2f} us, heuristic {h.median:.2f} us "
                     f"({h.median / b.median:.3f}x): {verdict}")
        if verdict == "entry":
            entries.append((rows, cols, dtype, best, b.median, h.median))
    return entries, lines


def header(entries, device, name, sources):
    out = ["#pragma once",
           f"// Generated by bench/rssbench tune from {', '.join(sources)}: do not edit by hand.",
           f"// Shapes where a pilot candidate beat the heuristic on the {device} by more than the margin.",
           '#include "rss/tuning/auto_select.hpp"', "", "namespace rss::tuning {", ""]
    if not entries:
        out += [f"// No entries: on every measured shape the heuristic picks the winner or one within the margin.",
                f"inline constexpr const TuningEntry* {name}_entries = nullptr;",
                f"inline constexpr int {name}_entry_count = 0;"]
    else:
        out.append(f"inline constexpr TuningEntry {name}_entries_storage[] = {{")
        for rows, cols, dtype, variant, best, auto in entries:
            strategy, config = parse_variant(variant)
            cfg = "{}"
            if config:
                cfg = "{%d, %d, %d, RowResidence::%s}" % config
            out.append(f"    {{{DTYPE_ENUM[dtype]}, {rows}, {rows}, {cols}, {cols}, {{Strategy::{strategy}, {cfg}}}}},"
                       f"  // {best:.2f} us vs {auto:.2f}")
        out += ["};", f"inline constexpr const TuningEntry* {name}_entries = {name}_entries_storage;",
                f"inline constexpr int {name}_entry_count = {len(entries)};"]
    out += ["", "}  // namespace rss::tuning", ""]
    return "\n".join(out)


def main(argv=None):
    ap = argparse.ArgumentParser(prog="rssbench tune", description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
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
        if args.out:
            try:
                with open(args.out, "w") as f:
                    f.write(text)
            except OSError as e:
                raise TuneError(f"{args.out}: cannot write: {e.strerror or e}") from e
            print(f"wrote {args.out}: {len(entries)} entries", file=sys.stderr)
        else:
            sys.stdout.write(text)
    except (TuneError, KeyError, TypeError) as e:
        what = f"missing field {e}" if isinstance(e, KeyError) else str(e)
        print(f"tune.py: error: {what}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
