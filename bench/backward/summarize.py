#!/usr/bin/env python3
"""Summary of a backward bench run: one row per (shape, dtype, variant) and the targets per shape.

    python3 bench/backward/summarize.py --rss rss_backward.json [--peers peers.json] --out summary.json

--rss is rss_backward_bench's Google Benchmark JSON (--benchmark_out), --peers peers.py's records. Rows:
{rows, cols, dtype, variant, host_us, host_us_rounds, p10_p90, device_us, kernels, cluster_size,
blocks_per_sm, logical_bytes, max_rel_err, label, ratio_to_floor}: host_us is the median over rounds
(repetitions) of each round's median host completion time. best_per_shape compares the best rss backward
strategy with the floor (target: within 1.25x where the floor is at least 20 us) and with torch.compile's
backward under graph replay, and forward+backward through the PyTorch operator with torch.compile of the
composed expression (both replayed from graphs, and both without graphs). Saved state (b) (the *_saved
variants: y recomputed from per-row statistics) is compared with its own floor, floor_saved (3 N).
"""
import argparse
import json
import statistics
import sys

RSS_BACKWARD = ("two_pass", "cluster_row", "automatic")
RSS_SAVED = ("two_pass_saved", "cluster_row_saved", "automatic_saved")  # saved state (b): 3 N, own floor


def rss_rows(path):
    with open(path) as f:
        doc = json.load(f)
    groups = {}
    for b in doc.get("benchmarks", []):
        if b.get("run_type", "iteration") != "iteration":
            continue
        parts = b.get("run_name", b["name"]).split("/")
        dtype, shape, variant = parts[1], parts[2], parts[3]
        rows, cols = (int(v) for v in shape.split("x"))
        key = (rows, cols, dtype, variant)
        if b.get("error_occurred"):
            groups.setdefault(key, {"error": b.get("error_message", "error")})
            continue
        g = groups.setdefault(key, {"rounds": []})
        g.setdefault("rounds", []).append(b)
    out = []
    for (rows, cols, dtype, variant), g in sorted(groups.items()):
        row = {"rows": rows, "cols": cols, "dtype": dtype, "variant": variant, "source": "rss_backward_bench"}
        if not g.get("rounds"):
            row["error"] = g.get("error")
            out.append(row)
            continue
        rs = g["rounds"]
        medians = [r["host_us"] for r in rs]
        row.update({
            "host_us": statistics.median(medians), "host_us_rounds": medians,
            "p10_p90": [min(r["host_p10_us"] for r in rs), max(r["host_p90_us"] for r in rs)],
            "device_us": statistics.median(r["device_us"] for r in rs),
            "kernels": rs[0].get("kernels"), "cluster_size": rs[0].get("cluster_size"),
            "blocks_per_sm": rs[0].get("blocks_per_sm"), "logical_bytes": rs[0].get("logical_bytes"),
            "max_rel_err": max(r.get("max_rel_err", 0.0) for r in rs), "label": rs[0].get("label", "")})
        out.append(row)
    return out, doc.get("context", {})


def peer_rows(path):
    with open(path) as f:
        doc = json.load(f)
    groups = {}
    for r in doc.get("records", []):
        groups.setdefault((r["rows"], r["cols"], r["dtype"], r["variant"]), []).append(r)
    out = []
    for (rows, cols, dtype, variant), rs in sorted(groups.items()):
        medians = [r["host_us"] for r in rs]
        out.append({"rows": rows, "cols": cols, "dtype": dtype, "variant": variant, "source": "peers.py",
                    "host_us": statistics.median(medians), "host_us_rounds": medians,
                    "p10_p90": [min(r["host_p10_us"] for r in rs), max(r["host_p90_us"] for r in rs)],
                    "device_us": statistics.median(r["device_us"] for r in rs),
                    "max_rel_err": max(r["max_rel_err"] for r in rs)})
    return out, doc.get("context", {}), doc.get("failures", [])


def main(argv=None):
    ap = argparse.ArgumentParser(description="backward bench summary")
    ap.add_argument("--rss", required=True)
    ap.add_argument("--peers")
    ap.add_argument("--out", required=True)
    args = ap.parse_args(argv)
    rows, rss_context = rss_rows(args.rss)
    peers_context, failures = {}, []
    if args.peers:
        try:
            more, peers_context, failures = peer_rows(args.peers)
            rows += more
        except (OSError, ValueError) as e:
            print(f"summarize.py: no peers ({e})", file=sys.stderr)
    by = {(r["rows"], r["cols"], r["dtype"], r["variant"]): r for r in rows if "host_us" in r}
    shapes = sorted({(r["rows"], r["cols"], r["dtype"]) for r in rows})
    for r in rows:
        floor = by.get((r["rows"], r["cols"], r["dtype"], "floor_saved" if r["variant"].endswith("_saved") else "floor"))
        if floor and "host_us" in r:
            r["ratio_to_floor"] = r["host_us"] / floor["host_us"]

    def us(shape, variant):
        r = by.get(shape + (variant,))
        return r["host_us"] if r else None

    best = []
    for shape in shapes:
        candidates = [r for k, r in by.items() if k[:3] == shape and
                      (k[3] in RSS_BACKWARD or k[3].startswith("cluster_row:"))]
        entry = {"rows": shape[0], "cols": shape[1], "dtype": shape[2]}
        floor = us(shape, "floor")
        if candidates:
            b = min(candidates, key=lambda r: r["host_us"])
            entry.update({"best_rss_variant": b["variant"], "best_label": b.get("label", ""), "host_us": b["host_us"],
                          "automatic_us": us(shape, "automatic"), "floor_us": floor})
            if floor:
                entry["ratio_to_floor"] = b["host_us"] / floor
                entry["floor_at_least_20us"] = floor >= 20.0
                entry["within_1_25x_of_floor"] = b["host_us"] <= 1.25 * floor if floor >= 20.0 else None
            peer = us(shape, "torch_compile_bwd_graph")
            entry["torch_compile_bwd_graph_us"] = peer
            entry["beats_torch_compile_bwd_graph"] = b["host_us"] < peer if peer else None
            entry["torch_eager_bwd_us"] = us(shape, "torch_eager_bwd")
        saved = [r for k, r in by.items() if k[:3] == shape and k[3] in RSS_SAVED]
        floor_saved = us(shape, "floor_saved")
        if saved:
            b = min(saved, key=lambda r: r["host_us"])
            entry.update({"best_saved_variant": b["variant"], "saved_host_us": b["host_us"], "floor_saved_us": floor_saved,
                          "saved_ratio_to_floor": b["host_us"] / floor_saved if floor_saved else None})
        for mode in ("_graph", ""):
            ours, theirs = us(shape, "rss_op_fwdbwd" + mode), us(shape, "torch_compile_fwdbwd" + mode)
            entry["rss_op_fwdbwd" + mode + "_us"] = ours
            entry["torch_compile_fwdbwd" + mode + "_us"] = theirs
            entry["fwdbwd" + mode + "_beats_torch_compile"] = ours < theirs if ours and theirs else None
        best.append(entry)
    doc = {"producer": "bench/backward/summarize.py", "rss_context": rss_context, "peers_context": peers_context,
           "results": rows, "best_per_shape": best, "peer_failures": failures}
    with open(args.out, "w") as f:
        json.dump(doc, f, indent=1)
    for e in best:
        print(" ".join(f"{k}={v:.4g}" if isinstance(v, float) else f"{k}={v}" for k, v in e.items()))
    return 0


if __name__ == "__main__":
    sys.exit(main())
