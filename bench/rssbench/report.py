"""The benchmark reports: built from the raw records alone, or the committed ones verified (docs/protocol.md)."""
import argparse
import difflib
import importlib
import json
import math
import os
import sys
from collections import Counter, defaultdict
from itertools import groupby

import records  # a sibling: the package's folder is on sys.path

# numpy and matplotlib are imported where they are used: --help works before the Python dependencies are installed.

TREE = records.TREE
KNOWN_VARIANTS = list(records.KNOWN_VARIANTS)
FLOORS = records.FLOORS
MEMCPY_FLOOR = "memcpy_floor"
HBM_PEAK_TB_S = {"NVIDIA H200": 4.8, "NVIDIA H100 80GB HBM3": 3.35}  # the vendors' figures, for the headline
DTYPE_BYTES = {"fp32": 4, "bf16": 2, "fp16": 2}
REFERENCE, LOCAL_FUSION, AUTOMATIC = "megakernel_grid", "local_fusion", "automatic"
COMPILE_GRAPH = "torch_compile_graph"
TARGET_RATIO = 1.15       # best strategy within 1.15x of the limit ...
LATENCY_BOUND_US = 20.0   # ... where the limit is at least this; below it (launch-latency bound) ...
LATENCY_SLACK_US = 3.0    # ... within the limit plus this
AUTOMATIC_SLACK = 0.03    # automatic within 3% of the best strategy
REL_TOL = 1e-9
NOTICE = "Each panel has its own axis: do not compare bar lengths across shapes"
CONTROLS_NOTICE = "Each panel has its own axis: compare controls within a shape only"
WHISKER_NOTE = "Bars: mean of the session medians. Whiskers: span of the session medians (not confidence intervals)."
AXIS_FILL = 0.8  # the largest plotted value fills 80% of its panel's axis (the protocol asks for at least 75%)
# best_per_shape's targets: what results.md says of a miss (formatted with the row), and of a target not checked.
TARGETS = {
    "within_limit_target": ("best strategy {best_rss_variant} takes {host_us:.2f} us, {ratio_to_limit:.3f}x the limit "
                            "({limit_variant} {limit_us:.2f} us); target {limit_target_us:.2f} us",
                            "limit (no floor records)"),
    "beats_torch_compile_graph": ("not faster than torch.compile with CUDA Graph replay "
                                  "({host_us:.2f} vs {torch_compile_graph_us:.2f} us)",
                                  "torch.compile with CUDA Graph replay (no records)"),
    "automatic_within_3pct": ("automatic is {automatic_to_best:.3f}x the best strategy", "automatic (no records)")}
SUITES = {"forward": (), "backward": ("backward",), "sharded": ("sharded",)}  # their folders under bench/results
OUTPUTS = ("summary.json", "results.md", "provenance.json", "bars.png", "controls.png")
# The project's shapes, article shapes first; other shapes follow by size.
KNOWN_SHAPES = [(1, 131072), (8, 131072), (64, 131072), (32, 128256), (1, 1048576), (1, 4194304),
                (4096, 4096), (4096, 32768), (16384, 8192), (1, 16777216)]


def kind(v):
    """'peer', 'control', 'floor' or 'strategy' (an rss launch strategy; an unknown name counts as one)."""
    return ("peer" if v.startswith("torch_") else "control" if v.startswith("control_") else
            "floor" if v in FLOORS else "strategy")


def limit_target(limit_us):
    """The time the best strategy must reach on a shape whose limit is limit_us."""
    return limit_us * TARGET_RATIO if limit_us >= LATENCY_BOUND_US else limit_us + LATENCY_SLACK_US


def sort_key(shape, variant=""):
    """Report order: dtype, then the project's shapes as listed, other shapes by size; variants as records.py lists."""
    rows, cols, dtype = shape
    known = KNOWN_SHAPES.index((rows, cols)) if (rows, cols) in KNOWN_SHAPES else len(KNOWN_SHAPES)
    rank = KNOWN_VARIANTS.index(variant) if variant in KNOWN_VARIANTS else len(KNOWN_VARIANTS)
    return records.DTYPES.index(dtype), known, rows * cols, rows, rank, variant


def shape_name(shape):
    return f"{shape[0]} x {shape[1]} {shape[2]}"


def shape_of(d):
    return d["rows"], d["cols"], d["dtype"]


def shape_fields(shape):
    return dict(zip(("rows", "cols", "dtype"), shape))


def by_shape(rows):
    """{shape: {variant: row}} of the three reports' rows, in their order."""
    shapes = defaultdict(dict)
    for r in rows:
        shapes[shape_of(r)][r["variant"]] = r
    return shapes


def fastest(variants, pick):
    """Of a shape's {variant: row}, the least host_us whose variant pick() accepts (a tie: the first name), or None."""
    rows = [r for v, r in variants.items() if pick(v) and r.get("host_us") is not None]
    return min(rows, key=lambda r: (r["host_us"], r["variant"]), default=None)


def collect(files):
    """Merge validated raw files: session descriptions, per-round records, and which file fed which key."""
    sessions, rounds, sources = {}, defaultdict(dict), defaultdict(set)
    for doc in files:
        name, s, ctx = doc["file"], doc["session"], doc["context"]
        info = sessions.setdefault(s, {"session": s, **{k: ctx[k] for k in (
            "gpu", "uuid", "source_hash", "driver", "toolkit", "sm_count")}, "fixture_hash": ctx["fixture"]["hash"],
            "fixture_seed": ctx["fixture"]["seed"], "producers": []})
        # The producers of one session must have run on one GPU, one tree and one input.
        for key, a, b in (("uuid", records.normalize_uuid(info["uuid"]), records.normalize_uuid(ctx["uuid"])),
                          ("source_hash", info["source_hash"], ctx["source_hash"]),
                          ("fixture.hash", info["fixture_hash"], ctx["fixture"]["hash"])):
            if a != b:
                raise records.RecordError(f"{name}: session {s} {key} {b!r} differs from its other files ({a!r})")
        cfg = ctx["config"]
        info["producers"].append({"producer": doc["producer"], "file": name, **{k: cfg[k] for k in (
            "shape_order", "rounds", "iterations", "seed")}, "protocol": cfg.get("protocol")})
        for rec in doc["records"]:
            key = (s, shape_of(rec), rec["variant"])
            if rec["round"] in rounds[key]:
                raise records.RecordError(f"{name}: session {s} {shape_name(key[1])} {key[2]} round "
                                          f"{rec['round']} also appears in another file")
            rounds[key][rec["round"]] = rec
            sources[key[1:]].add(name)
    return [sessions[s] for s in sorted(sessions)], rounds, sources


def protocol_checks(files, sessions):
    """Facts about the session design (docs/protocol.md); verify fails when the sessions share a GPU."""
    keys = ("distinct_uuids", "same_source_hash", "same_fixture", "same_config", "shape_order_reversed")
    if len(sessions) < 2:
        return {"sessions": len(sessions), **dict.fromkeys(keys)}
    by_producer = defaultdict(list)
    for doc in files:
        by_producer[doc["producer"]].append(doc["context"]["config"])
    strip = lambda c: {k: v for k, v in c.items() if k != "shape_order"}  # noqa: E731
    return dict(zip(("sessions",) + keys, (
        len(sessions), len({records.normalize_uuid(s["uuid"]) for s in sessions}) == len(sessions),
        len({s["source_hash"] for s in sessions}) == 1, len({s["fixture_hash"] for s in sessions}) == 1,
        all(all(strip(c) == strip(cs[0]) for c in cs) for cs in by_producer.values()),
        all(len({c["shape_order"] for c in cs}) == 2 for cs in by_producer.values()))))


def session_stats(recs, field):
    """Median, p10, p90 over rounds of each round's median of field, of a {round: record} map (None: no samples)."""
    import numpy as np
    v = np.array([np.median(recs[r][field]) for r in sorted(recs) if recs[r][field]], dtype=np.float64)
    return None if not len(v) else {"median": float(np.median(v)), "p10": float(np.percentile(v, 10)),
                                    "p90": float(np.percentile(v, 90)), "rounds": len(v)}


def suite_rows(docs):
    """A row per (shape, dtype, variant) of a one-session suite (backward, sharded) over its files: host_us, p10_us,
    p90_us as a forward session's median, p10, p90 over rounds, device_us the median over rounds, the samples, the
    worst max_rel_err and the first round's facts; a variant that never ran: its error."""
    groups = defaultdict(list)
    for doc in docs:
        for r in doc["records"] + doc["errors"]:
            groups[(r["rows"], r["cols"], r["dtype"], r["variant"])].append(dict(r, file=doc["file"]))
    rows = []
    for key, rs in sorted(groups.items()):
        ran = {r["round"]: r for r in rs if "error" not in r}
        row = {**dict(zip(("rows", "cols", "dtype", "variant"), key)), "file": rs[0]["file"], "label": rs[0]["label"]}
        if not ran:
            rows.append(dict(row, error=rs[0]["error"], world=rs[0]["world"]))
            continue
        host, dev = (session_stats(ran, field) for field in ("host_us", "device_us"))
        first = ran[min(ran)]
        errs = [r["max_rel_err"] for r in ran.values() if r["max_rel_err"] is not None]
        rows.append(dict(row, label=first["label"], host_us=host["median"], p10_us=host["p10"], p90_us=host["p90"],
                         rounds=host["rounds"], samples=sum(len(r["host_us"]) for r in ran.values()),
                         device_us=dev and dev["median"], max_rel_err=max(errs) if errs else None,
                         **{k: first[k] for k in ("world", "kernels", "launches", "logical_bytes")}))
    return rows


def files_of(files):
    """The record files of a one-session suite, for its summary: name, sha256, producer, GPU and configuration."""
    return [{**{k: doc[k] for k in ("file", "sha256", "producer")}, **{k: doc["context"][k] for k in (
        "gpu", "uuid", "driver", "toolkit")}, "config": doc["context"]["config"]} for doc in files]


def metadata(all_recs, warnings, label):
    """Per-variant facts that should not change between rounds; a disagreement is reported, not hidden."""
    out = {}
    for key in ("kernels", "launches", "cooperative", "active_blocks_per_sm", "logical_bytes", "evicted_tiles"):
        counts = Counter(rec[key] for rec in all_recs)
        if len(counts) > 1:
            warnings.append(f"{label}: '{key}' differs between records {dict(counts)}; the most common is shown")
        out[key] = counts.most_common(1)[0][0]
    errs = [rec["max_rel_err"] for rec in all_recs if rec["max_rel_err"] is not None]
    return dict(out, max_rel_err=float(max(errs)) if errs else None)


def aggregate(sessions, rounds):
    """The summary's results list, retention deltas and best-per-shape rows, and warnings."""
    import numpy as np

    def mean(values):  # of the values there are, None without any
        values = [v for v in values if v is not None]
        return float(np.mean(values)) if values else None
    ratio = lambda a, b: a / b if a is not None and b else None  # noqa: E731
    host = lambda r: r and r["host_us"]  # noqa: E731  (of a row that may be None)
    sids = [s["session"] for s in sessions]
    warnings, results = [], []
    host_rv = lambda s, shape, v: {r: float(np.median(rec["host_us"]))  # noqa: E731  (a round's median)
                                   for r, rec in rounds.get((s, shape, v), {}).items()}
    for shape, variant in sorted({k[1:] for k in rounds}, key=lambda k: sort_key(*k)):
        recs = [rounds.get((s, shape, variant), {}) for s in sids]
        stats, dev = ([session_stats(r, field) for r in recs] for field in ("host_us", "device_us"))
        label = f"{shape_name(shape)} {variant}"
        missing = [s for s, st in zip(sids, stats) if st is None]
        if missing:
            warnings.append(f"{label}: no records in session(s) {missing}")
        medians, dev_medians = ([st and st["median"] for st in sts] for sts in (stats, dev))
        results.append({
            **shape_fields(shape), "variant": variant, "host_us": mean(medians), "host_us_sessions": medians,
            "p10_p90_sessions": [st and [st["p10"], st["p90"]] for st in stats],
            "rounds_sessions": [st["rounds"] if st else 0 for st in stats], "device_us": mean(dev_medians),
            "device_us_sessions": dev_medians, **metadata([rec for r in recs for rec in r.values()], warnings, label)})
    shapes = by_shape(results)  # in report order, as results are
    limits = {shape: fastest(variants, lambda v: v in FLOORS) for shape, variants in shapes.items()}
    for r in results:
        peer = fastest(shapes[shape_of(r)], lambda v: kind(v) == "peer")
        r.update(ratio_to_limit=ratio(r["host_us"], host(limits[shape_of(r)])),
                 ratio_to_fastest_peer=ratio(r["host_us"], host(peer)), fastest_peer=peer and peer["variant"])
    deltas, best = [], []
    for shape, variants in shapes.items():
        ref = variants.get(REFERENCE)
        for control in [v for v in variants if kind(v) == "control"] if ref else []:
            paired = [[c[r] - m[r] for r in sorted(set(c) & set(m))] for s in sids  # by round, per session
                      for c, m in [(host_rv(s, shape, control), host_rv(s, shape, REFERENCE))]]
            per_session = [float(np.median(p)) if p else None for p in paired]
            delta = mean(per_session)
            deltas.append({**shape_fields(shape), "control": control, "reference": REFERENCE, "delta_us": delta,
                           "delta_us_sessions": per_session, "pairs_sessions": [len(p) for p in paired],
                           "reference_host_us": ref["host_us"], "relative_to_reference": ratio(delta, ref["host_us"])})
        b = fastest(variants, lambda v: kind(v) == "strategy")
        if not b:
            continue
        mk = fastest(variants, lambda v: v.startswith("megakernel"))
        copy = fastest(variants, lambda v: v in FLOORS and v != MEMCPY_FLOOR)  # our fastest copy kernel
        memcpy, cg, lf, auto = (variants.get(v) for v in (MEMCPY_FLOOR, COMPILE_GRAPH, LOCAL_FUSION, AUTOMATIC))
        peak = HBM_PEAK_TB_S.get(sessions[0]["gpu"].strip()) if sessions else None
        tb_s = shape[0] * shape[1] * DTYPE_BYTES[shape[2]] * 2 / b["host_us"] / 1e6  # x read once, y written once
        limit = limits[shape]
        target_us = None if limit is None else limit_target(limit["host_us"])
        auto_ratio = ratio(host(auto), b["host_us"])
        row = {**shape_fields(shape), "best_rss_variant": b["variant"], "host_us": b["host_us"],
               "copy_floor_us": host(copy), "copy_floor_variant": copy and copy["variant"],
               "memcpy_floor_us": host(memcpy), "achieved_tb_s": tb_s, "of_hbm_peak": ratio(tb_s, peak),
               "limit_variant": limit and limit["variant"], "limit_us": host(limit),
               "ratio_to_limit": b["ratio_to_limit"], "limit_target_us": target_us,
               "within_limit_target": None if target_us is None else b["host_us"] <= target_us,
               "torch_compile_graph_us": host(cg),
               "beats_torch_compile_graph": None if host(cg) is None else b["host_us"] < cg["host_us"],
               "automatic_us": host(auto), "automatic_to_best": auto_ratio,
               "automatic_within_3pct": None if auto_ratio is None else auto_ratio <= 1.0 + AUTOMATIC_SLACK}
        best.append({
            # True only when every target could be checked and holds (a missing peer or floor is not a pass).
            **row, "targets_met": all(row[k] is True for k in TARGETS), "local_fusion_us": host(lf),
            "best_megakernel_variant": mk and mk["variant"], "best_megakernel_us": host(mk),
            "megakernel_speedup_over_local_fusion": ratio(host(lf), host(mk))})
    return results, deltas, best, warnings


def bar_panels(results):
    """One panel per shape: every variant but the controls, the local fusion -> megakernel annotation."""
    panels = []
    for shape, rs in groupby((r for r in results if kind(r["variant"]) != "control" and r["host_us"] is not None),
                             shape_of):  # results come in report order
        rs = list(rs)
        bars = [{"variant": r["variant"], "value": r["host_us"], "whisker": [min(m), max(m)],
                 "label": f"{r['host_us']:.1f}"}
                for r in rs for m in [[m for m in r["host_us_sessions"] if m is not None]]]
        largest = max(max(b["value"], b["whisker"][1]) for b in bars)
        axis_max = largest / AXIS_FILL
        lf = next((r for r in rs if r["variant"] == LOCAL_FUSION), None)
        mk = min((r for r in rs if r["variant"].startswith("megakernel")), key=lambda r: r["host_us"], default=None)
        ann = None
        if lf and mk:
            change, speedup = mk["host_us"] / lf["host_us"] - 1.0, lf["host_us"] / mk["host_us"]
            ann = {"from": lf["variant"], "to": mk["variant"], "from_us": lf["host_us"], "to_us": mk["host_us"],
                   "speedup": speedup, "latency_change": change,
                   "text": f"{lf['variant']} -> {mk['variant']}: {change * 100:+.1f}% latency ({speedup:.2f}x)"
                           + ("" if change < 0 else ", megakernel not faster")}
        panels.append({**shape_fields(shape), "title": shape_name(shape), "axis": [0.0, axis_max], "fill": largest /
                       axis_max, "range_label": f"axis 0 to {axis_max:.1f} us", "bars": bars, "annotation": ann})
    return panels


def control_panels(deltas):
    """One panel per shape: each control's delta and the span of its session medians."""
    panels = []
    for shape, ds in groupby((d for d in deltas if d["delta_us"] is not None), shape_of):
        ds = list(ds)
        points = [{"control": d["control"], "value": d["delta_us"], "range": [min(meds), max(meds)],
                   "percent_of_reference": pct, "label": f"{d['delta_us']:+.1f} us ({pct:+.1f}%)"}
                  for d in ds for meds, pct in [([m for m in d["delta_us_sessions"] if m is not None],
                                                 d["relative_to_reference"] * 100)]]
        lo, hi = min([0.0] + [p["range"][0] for p in points]), max([0.0] + [p["range"][1] for p in points])
        span = (hi - lo) or 1.0
        panels.append({**shape_fields(shape), "title": shape_name(shape), "reference": REFERENCE,
                       "reference_host_us": ds[0]["reference_host_us"],  # room on the right for the value labels:
                       "axis": [lo - 0.1 * span, hi + 0.6 * span], "points": points})
    return panels


def fmt(v, spec=".2f", suffix="", none="n/a"):
    """A number as the reports print it (backward.py and sharded.py too, with their own mark for a missing one)."""
    return none if v is None else format(v, spec) + suffix


def yes_no(v, none="n/a", no="no"):
    return none if v is None else ("yes" if v else no)


def table(header, rows):
    return ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)] + [
        "| " + " | ".join(str(c) for c in row) + " |" for row in rows]


def render_markdown(summary):
    sessions, deltas, best = summary["sessions"], summary["retention_deltas"], summary["best_per_shape"]
    fmt_count = lambda v: "?" if v is None or v < 0 else str(v)  # noqa: E731  (-1 marks "unknown" in the records)
    out = ["# rms_scaled_softmax benchmark results", "",
           "Generated by `python3 bench/rssbench report build` from the raw records alone (`report verify` re-renders "
           "and compares it: do not edit by hand). Host completion time of warm calls, microseconds: the mean of the "
           "session medians over rounds; p10-p90: variability across rounds, not confidence intervals. Device: a "
           "batched CUDA event interval per call (it can include host supply gaps); ?: unknown; logical bytes are not "
           "HBM traffic; blocks/SM is an occupancy-query capacity. Definitions and targets: docs/protocol.md.", ""]
    quick = sorted({s["session"] for s in sessions for p in s["producers"] if p.get("protocol") == "quick"})
    if quick:
        out += [f"**Quick protocol** (session(s) {', '.join(map(str, quick))}): a first look with few rounds and "
                "shapes, not the protocol of docs/protocol.md; no claim rests on it.", ""]
    if len(sessions) < 2:
        out += [f"**Only {len(sessions)} session recorded.** The protocol calls for two sessions (distinct GPUs, "
                "reversed shape order); values below are that single session's medians and whiskers collapse.", ""]
    out += ["## Sessions", ""] + table(
        ["session", "GPU", "UUID", "driver", "toolkit", "SMs", "producers (shape order, rounds x iterations)",
         "source hash", "fixture hash"],
        [[s["session"], s["gpu"], s["uuid"], s["driver"], s["toolkit"], s["sm_count"],
          "; ".join(f"{p['producer']} ({p['shape_order']}, {p['rounds']} x {p['iterations']})" for p in s["producers"]),
          s["source_hash"][:16], s["fixture_hash"][:16]] for s in sessions])
    pc = summary["protocol"]
    out += ["", "Protocol: " + ", ".join(f"{k.replace('_', ' ')}: {yes_no(pc[k])}" for k in list(pc)[1:]), ""]
    out += ["## Headline", "",
            "Best rss strategy per shape (automatic included) against the targets of docs/protocol.md: faster than "
            f"torch.compile with CUDA Graph replay; within {TARGET_RATIO:.2f}x of the limit (the fastest floor: our "
            "copy kernels, `copy floor us` the fastest of them, and cudaMemcpyAsync) where the limit is at least "
            f"{LATENCY_BOUND_US:.0f} us, else within the limit + {LATENCY_SLACK_US:.0f} us; automatic within "
            f"{AUTOMATIC_SLACK:.0%} of the best.", ""]
    out += table(["shape", "dtype", "best rss strategy", "host us", "TB/s (of HBM peak)", "copy floor us",
                  "memcpy floor us", "limit us", "ratio to limit", "target us", "within target",
                  "torch.compile+graph us", "beats compile+graph", "automatic us", "automatic within 3%", "all targets",
                  "local_fusion us", "best megakernel", "megakernel us", "megakernel speedup vs local_fusion"],
                 [[f"{b['rows']} x {b['cols']}", b["dtype"], b["best_rss_variant"], fmt(b["host_us"]),
                   fmt(b["achieved_tb_s"]) + ("" if b["of_hbm_peak"] is None else f" ({b['of_hbm_peak']:.0%})"),
                   fmt(b["copy_floor_us"]), fmt(b["memcpy_floor_us"]), fmt(b["limit_us"]),
                   fmt(b["ratio_to_limit"], ".3f", "x"), fmt(b["limit_target_us"]), yes_no(b["within_limit_target"]),
                   fmt(b["torch_compile_graph_us"]), yes_no(b["beats_torch_compile_graph"]),
                   fmt(b["automatic_us"]), yes_no(b["automatic_within_3pct"]), yes_no(b["targets_met"]),
                   fmt(b["local_fusion_us"]), b["best_megakernel_variant"] or "n/a", fmt(b["best_megakernel_us"]),
                   fmt(b["megakernel_speedup_over_local_fusion"], ".3f", "x")] for b in best])
    missed, unchecked = [], []
    for b in best:
        name = shape_name(shape_of(b))
        missed += [f"{name}: " + miss.format(**b) for key, (miss, _) in TARGETS.items() if b[key] is False]
        unchecked += [f"{name}: {what}" for key, (_, what) in TARGETS.items() if b[key] is None]
        sp = b["megakernel_speedup_over_local_fusion"]
        if sp is not None and sp <= 1.0:
            missed.append(f"{name}: the megakernel is not faster than local fusion ({sp:.3f}x)")
    if pc["distinct_uuids"] is False:
        missed.append("the sessions ran on one GPU: the protocol needs distinct GPUs (report verify fails)")
    if unchecked:
        out += ["", "Targets not checked:", ""] + [f"- {u}" for u in unchecked]
    out += ["", "Targets missed:" if missed else "Targets missed: none.", ""] + [f"- {m}" for m in missed]
    out += ([""] if missed else []) + ["## Retention controls", "",
                                       f"Control minus {REFERENCE}, paired by round within a session, median per "
                                       "session, mean across sessions. Penalties are not additive components.", ""]
    out += table(["shape", "dtype", "control", "delta us", "per session us (pairs)", f"% of {REFERENCE}"],
                 [[f"{d['rows']} x {d['cols']}", d["dtype"], d["control"], fmt(d["delta_us"]),
                   "; ".join(f"{fmt(v)} ({p})" for v, p in zip(d["delta_us_sessions"], d["pairs_sessions"])),
                   fmt(d["relative_to_reference"] and d["relative_to_reference"] * 100, ".1f", "%")]
                  for d in deltas]) if deltas else ["No control records."]
    out += ["", "## All variants", ""] + table(
        ["shape", "dtype", "variant", "host us"]
        + [f"S{s['session']} {c}" for s in sessions for c in ("median", "p10-p90", "rounds")]
        + ["device us", "kernels", "launches", "coop", "blocks/SM", "logical MB", "evicted tiles", "max rel err",
           "x limit", "x fastest peer"],
        [[f"{r['rows']} x {r['cols']}", r["dtype"], r["variant"], fmt(r["host_us"])]
         + [c for m, q, k in zip(r["host_us_sessions"], r["p10_p90_sessions"], r["rounds_sessions"])
            for c in (fmt(m), f"{fmt(q[0])}-{fmt(q[1])}" if q else "n/a", k)]
         + [fmt(r["device_us"]), fmt_count(r["kernels"]), fmt_count(r["launches"]), yes_no(r["cooperative"]),
            fmt_count(r["active_blocks_per_sm"]),
            "?" if r["logical_bytes"] < 0 else f"{r['logical_bytes'] / 2**20:.2f}",
            r["evicted_tiles"], fmt(r["max_rel_err"], ".2e"), fmt(r["ratio_to_limit"], ".3f", "x"),
            fmt(r["ratio_to_fastest_peer"], ".3f", "x")] for r in summary["results"]])
    if summary["warnings"]:
        out += ["", "## Warnings", ""] + [f"- {w}" for w in summary["warnings"]]
    return "\n".join(out) + "\n"


def compute(records_dir):
    """Everything build writes, recomputed from the raw records: (summary, markdown, provenance)."""
    files = records.load_dir(records_dir)
    sessions, rounds, sources = collect(files)
    results, deltas, best, warnings = aggregate(sessions, rounds)
    summary = {"sessions": sessions, "protocol": protocol_checks(files, sessions),
               "results": results, "retention_deltas": deltas, "best_per_shape": best, "warnings": warnings}

    def used(keys):
        """The raw files behind a set of (shape, variant) aggregates, and the aggregates themselves."""
        keys = sorted(set(keys), key=lambda k: sort_key(*k))
        return {"raw_files": sorted(set().union(*(sources[k] for k in keys))),
                "aggregates": [[*k[0], k[1]] for k in keys]}

    all_keys = [(shape_of(r), r["variant"]) for r in results]
    delta_keys = [k for d in deltas for k in ((shape_of(d), d["control"]), (shape_of(d), REFERENCE))]
    head_keys = [(shape_of(b), v) for b in best for v in
                 (b["best_rss_variant"], *FLOORS, COMPILE_GRAPH, AUTOMATIC, LOCAL_FUSION, b["best_megakernel_variant"])
                 if (shape_of(b), v) in sources]
    bars = bar_panels(results)
    provenance = {
        "generator": "bench/rssbench report",
        "raw_files": [{k: doc[k] for k in ("file", "sha256", "session", "producer")} for doc in files],
        "tables": {"summary.json": used(all_keys), "results.md#headline": used(head_keys),
                   "results.md#retention-controls": used(delta_keys), "results.md#all-variants": used(all_keys)},
        "figures": {
            "bars.png": {**used([(shape_of(p), b["variant"]) for p in bars for b in p["bars"]]),
                         "notice": NOTICE, "whisker_note": WHISKER_NOTE, "sessions": len(sessions), "panels": bars},
            "controls.png": {**used(delta_keys), "notice": CONTROLS_NOTICE, "reference": REFERENCE,
                             "panels": control_panels(deltas)}}}
    return summary, render_markdown(summary), provenance


def draw(provenance, out):
    """Draw both figures from the numbers recorded in provenance (nothing else)."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    def figure(name, panels, ncols, size, plot, empty, title, fontsize):
        """A grid of one panel per shape, plot(ax, panel, ys) drawing each; unused grid cells are blank."""
        nrows = max(1, math.ceil(len(panels) / ncols))
        fig, axes = plt.subplots(nrows, ncols, figsize=size(nrows), squeeze=False, layout="constrained")
        for ax, p in zip(axes.flat, panels):
            items = p.get("bars") or p["points"]
            ys = list(range(len(items)))[::-1]
            plot(ax, p, ys)
            ax.set_yticks(ys, [item.get("variant") or item.get("control") for item in items], fontsize=8)
            ax.set_xlim(*p["axis"])
            ax.tick_params(axis="x", labelsize=7)
        for ax in list(axes.flat)[len(panels):]:
            ax.axis("off")
        if not panels:
            axes.flat[0].text(0.5, 0.5, empty, ha="center")
        fig.suptitle(title, fontsize=fontsize, color="#a00000")
        fig.savefig(os.path.join(out, name), dpi=110)
        plt.close(fig)

    colors = lambda v: ("#7f7f7f" if v in FLOORS else "#ff7f0e" if kind(v) == "peer"  # noqa: E731
                        else "#08306b" if v.startswith("megakernel") else "#4a90d9")

    def bars(ax, p, ys):
        for y, b in zip(ys, p["bars"]):
            ax.barh(y, b["value"], color=colors(b["variant"]), height=0.7)
            lo, hi = b["whisker"]
            ax.errorbar([b["value"]], [y], xerr=[[b["value"] - lo], [hi - b["value"]]], fmt="none",
                        ecolor="black", capsize=3, lw=1)
            ax.text(max(b["value"], hi) + 0.01 * p["axis"][1], y, b["label"], va="center", fontsize=8)
        ax.set_xlabel(f"host completion time, us ({p['range_label']})", fontsize=8)
        ax.set_title(p["title"] + ("\n" + p["annotation"]["text"] if p["annotation"] else ""), fontsize=9)

    def controls(ax, p, ys):
        ax.axvline(0.0, color="#999999", lw=1)
        for y, pt in zip(ys, p["points"]):
            ax.hlines(y, *pt["range"], color="#08306b", lw=2)
            ax.plot([pt["value"]], [y], "o", color="#08306b")
            ax.text(pt["range"][1] + 0.02 * (p["axis"][1] - p["axis"][0]), y, pt["label"], va="center", fontsize=8)
        ax.set_ylim(-0.7, len(ys) - 0.3)
        ax.set_title(f"{p['title']}: control minus {p['reference']} ({p['reference_host_us']:.1f} us), us", fontsize=9)

    fig_b, fig_c = (provenance["figures"][name] for name in ("bars.png", "controls.png"))
    ncols = max(1, min(3, len(fig_b["panels"])))
    tallest = max([len(p["bars"]) for p in fig_b["panels"]] + [1])
    figure("bars.png", fig_b["panels"], ncols, lambda nrows: (5.6 * ncols, (0.33 * tallest + 1.5) * nrows + 0.9),
           bars, "no records", f"{NOTICE}\n{WHISKER_NOTE} Sessions: {fig_b['sessions']}.", 11)
    figure("controls.png", fig_c["panels"], 1, lambda nrows: (8, 1.3 * nrows + 0.9), controls, "no control records",
           f"{fig_c['notice']}\nDots: mean of the session medians of round-paired deltas. Ranges: the session "
           "medians (not confidence intervals).", 9)


def dump_json(obj):
    return json.dumps(obj, indent=1, allow_nan=False) + "\n"


def outputs(suite, records_dir):
    """{file name: JSON object or text}: what build writes under --out, the figures aside, from the raw records."""
    if suite == "forward":
        return dict(zip(("summary.json", "results.md", "provenance.json"), compute(records_dir)))
    module = importlib.import_module(suite)
    summary = module.summarize(records.load_dir(records_dir, complete=False))
    return {"summary.json": summary, module.REPORT: module.markdown(summary)}


def build(suite, records_dir, out):
    files = outputs(suite, records_dir)
    os.makedirs(out, exist_ok=True)
    for name, fresh in files.items():
        with open(os.path.join(out, name), "w", encoding="utf-8") as f:
            f.write(fresh if isinstance(fresh, str) else dump_json(fresh))
    if suite != "forward":
        print(f"built {', '.join(files)} in {out}")
        return 0
    summary, provenance = files["summary.json"], files["provenance.json"]
    draw(provenance, out)
    for w in summary["warnings"]:
        print(f"warning: {w}", file=sys.stderr)
    print(f"built {', '.join(OUTPUTS)} in {out} from {len(provenance['raw_files'])} raw files, "
          f"{len(summary['sessions'])} session(s), {len(summary['results'])} aggregates")
    return 0


def _label(obj):
    """A readable name for a list element, e.g. ' (1x131072 fp32 local_fusion)'."""
    if isinstance(obj, dict) and "rows" in obj:
        tail = obj.get("variant") or obj.get("control") or obj.get("best_rss_variant")
        return f" ({obj['rows']}x{obj['cols']} {obj['dtype']}{' ' + tail if tail else ''})"
    if isinstance(obj, dict) and ("file" in obj or "session" in obj):
        return f" ({obj.get('file', 'session ' + str(obj.get('session')))})"
    return ""


def compare(committed, fresh, path, problems):
    """Append a message for every difference; numbers compare with relative tolerance REL_TOL."""
    num = lambda v: isinstance(v, (int, float)) and not isinstance(v, bool)  # noqa: E731
    if isinstance(committed, dict) and isinstance(fresh, dict):
        for k in list(fresh) + [k for k in committed if k not in fresh]:
            if k not in committed or k not in fresh:
                problems.append(f"{path}.{k}: " + ("missing from the committed file" if k not in committed
                                                    else "in the committed file but not recomputed"))
            else:
                compare(committed[k], fresh[k], f"{path}.{k}", problems)
    elif isinstance(committed, list) and isinstance(fresh, list):
        if len(committed) != len(fresh):
            problems.append(f"{path}: committed has {len(committed)} entries, recomputed {len(fresh)}")
        for i, (a, b) in enumerate(zip(committed, fresh)):
            compare(a, b, f"{path}[{i}]{_label(b)}", problems)
    elif (not math.isclose(committed, fresh, rel_tol=REL_TOL, abs_tol=0.0) if num(committed) and num(fresh)
          else committed != fresh):
        problems.append(f"{path}: committed {committed!r}, recomputed {fresh!r}"[:400])


def verify(suite, records_dir, out, tree):
    files = outputs(suite, records_dir)
    problems = []
    for name, fresh in files.items():
        try:
            with open(os.path.join(out, name), encoding="utf-8") as f:
                old = f.read() if isinstance(fresh, str) else json.load(f)
        except (OSError, ValueError) as e:
            problems.append(f"{name}: cannot read the committed file: {e}")
            continue
        if not isinstance(fresh, str):  # provenance.json's raw_files: each raw file on disk and its sha256
            compare(old, fresh, name, problems)
        elif old != fresh:
            diff = list(difflib.unified_diff(old.splitlines(), fresh.splitlines(), f"{name} (committed)",
                                             f"{name} (re-rendered)", lineterm="", n=0))
            problems.append(f"{name} differs from the re-rendered text:\n    " + "\n    ".join(diff[:40]))
    passed = f"PASS: {suite}: {', '.join(files)} recomputed from {records_dir}"
    if suite == "forward":  # the figures, the tree the records were measured on, the sessions' GPUs
        summary, provenance = files["summary.json"], files["provenance.json"]
        problems += [f"{n}: missing" for n in ("bars.png", "controls.png") if not os.path.isfile(os.path.join(out, n))]
        tree_hash = records.source_hash(tree)
        measured_on = {s["session"]: s["source_hash"] for s in summary["sessions"]}  # one per session (collect)
        problems += [f"source hash: {f['file']} (session {f['session']}) was measured on {measured_on[f['session']]}, "
                     f"the tree {tree} hashes to {tree_hash}" for f in provenance["raw_files"]
                     if measured_on[f["session"]] != tree_hash]
        if summary["protocol"]["distinct_uuids"] is False:
            uuids = ", ".join(f"session {s['session']}: {s['uuid']}" for s in summary["sessions"])
            problems.append(f"sessions on one GPU ({uuids}): the protocol needs each session on a distinct GPU")
        bar_panels_, control_panels_ = (provenance["figures"][f]["panels"] for f in ("bars.png", "controls.png"))
        plotted = sum(len(p["bars"]) for p in bar_panels_) + sum(len(p["points"]) for p in control_panels_)
        passed = (f"PASS: {len(provenance['raw_files'])} raw files, {len(summary['sessions'])} session(s), "
                  f"{len(summary['results'])} aggregates, {plotted} plotted values, "
                  f"{sum(1 for p in bar_panels_ if p['annotation'])} annotations, source hash {tree_hash[:16]} matches")
    print("\n".join(f"MISMATCH: {p}" for p in problems) + f"\nFAIL: {len(problems)} problem(s)" if problems else passed)
    return 1 if problems else 0


def main(argv):
    ap = argparse.ArgumentParser(prog="rssbench report", description=__doc__, epilog="Defaults are relative to the "
                                 "repository holding this script, not to the current directory.")
    sub = ap.add_subparsers(dest="cmd", required=True, metavar="{build,verify}")
    for cmd, what in (("build", "aggregate the raw records into the report files under --out (forward: summary.json, "
                                "results.md, provenance.json, bars.png, controls.png; backward: summary.json, "
                                "results.md; sharded: summary.json, report.md)"),
                      ("verify", "recompute everything from the raw records and compare it with the files under "
                                 "--out; forward: also check the raw files' sha256, the source hash against --tree and "
                                 "that the sessions ran on distinct GPUs; exit 1 on any mismatch")):
        p = sub.add_parser(cmd, help=what, description=what)
        p.add_argument("--suite", choices=SUITES, default="forward", help="the suite (default forward)")
        p.add_argument("--records", help="folder of raw record files (*.json; default: raw/ under --out)")
        p.add_argument("--out", help="folder of the report files (default: bench/results/, its backward/ or sharded/)")
    p.add_argument("--tree", default=TREE, help="repository whose include/ and bench/ the forward records' source "
                   "hash must match (default: this repository)")  # p: verify's
    args = ap.parse_args(argv)
    out = args.out or os.path.join(TREE, "bench", "results", *SUITES[args.suite])
    records_dir = args.records or os.path.join(out, "raw")
    try:
        return (build(args.suite, records_dir, out) if args.cmd == "build" else
                verify(args.suite, records_dir, out, args.tree))
    except records.RecordError as e:  # build: exit 2 (stderr); verify: a failed verification, exit 1 (stdout)
        print(f"FAIL: raw records: {e}", file=sys.stderr if args.cmd == "build" else sys.stdout)
        return 2 if args.cmd == "build" else 1
