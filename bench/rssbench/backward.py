"""Summary and report of a backward bench run (bench/backward/run.sh); docs/protocol.md ("The tools in detail").

--rss: rss_backward_bench's Google Benchmark JSON; --peers: `rssbench peers --suite backward`'s records (or the older
peers JSON of bench/results/backward/).
"""
import argparse
import json
import statistics
import sys

import records

# The rss strategies of each saved state and its floor: reading y (a), 4 N; from row statistics (b), the `_saved`
# variants, 3 N. cluster_row's pilot candidates (cluster_row:CONFIG, cluster_row_saved:CONFIG) count too.
SAVED_STATES = (("y", ("two_pass", "cluster_row", "automatic"), "cluster_row:", "floor"),
                ("saved", ("two_pass_saved", "cluster_row_saved", "automatic_saved"), "cluster_row_saved:",
                 "floor_saved"))
FLOOR_AT_LEAST_US, FLOOR_RATIO = 20.0, 1.25  # the target: within 1.25x of the floor where it is at least 20 us


def rounds_of(path):
    """Every round of a file as {rows, cols, dtype, variant, host_us (its median), host_p10_us, host_p90_us,
    device_us, ...} or {..., error}; its context; the older peers JSON's failures."""
    with open(path) as f:
        doc = json.load(f)
    if "benchmarks" not in doc:  # the peers' JSON before they wrote Google Benchmark's
        return doc["records"], doc.get("context", {}), doc.get("failures", [])
    out = []
    for i, run, error in records.iteration_runs(doc):
        r = {**run, **records.parse_name(run.get("run_name") or run["name"], f"{path}: benchmarks[{i}]")}
        if error:
            r["error"] = error
        elif "host_us/0" in run:  # every sample (the peers)
            host = sorted(records.record_of(run, f"{path}: benchmarks[{i}]")["host_us"])
            r.update(host_us=statistics.median(host), host_p10_us=host[int(0.1 * (len(host) - 1))],
                     host_p90_us=host[int(0.9 * (len(host) - 1))])
        out.append(r)
    return out, doc.get("context", {}), []


def rows_of(rounds, source):
    """A row per (shape, dtype, variant): medians over its rounds; an error row where none ran."""
    groups, out = {}, []
    for r in rounds:
        groups.setdefault((r["rows"], r["cols"], r["dtype"], r["variant"]), []).append(r)
    for key, rs in sorted(groups.items()):
        row = dict(zip(("rows", "cols", "dtype", "variant"), key), source=source)
        ok = [r for r in rs if "error" not in r]
        if not ok:
            out.append(dict(row, error=rs[0]["error"]))
            continue
        medians = [r["host_us"] for r in ok]
        row.update(host_us=statistics.median(medians), host_us_rounds=medians,
                   p10_p90=[min(r["host_p10_us"] for r in ok), max(r["host_p90_us"] for r in ok)],
                   device_us=statistics.median(r["device_us"] for r in ok),
                   max_rel_err=max(r.get("max_rel_err", 0.0) for r in ok))
        if source == "rss_backward_bench":
            row.update({k: ok[0].get(k) for k in ("kernels", "cluster_size", "blocks_per_sm", "logical_bytes")},
                       label=ok[0].get("label", ""))
        out.append(row)
    return out


def best_per_shape(rows):
    """Per shape: the best rss strategy of each saved state and of both, against its floor and the peers."""
    by = {(r["rows"], r["cols"], r["dtype"], r["variant"]): r for r in rows if "host_us" in r}
    us = lambda shape, variant: by[shape + (variant,)]["host_us"] if shape + (variant,) in by else None  # noqa: E731
    for key, r in by.items():
        floor = us(key[:3], "floor_saved" if r["variant"].endswith("_saved") else "floor")
        if floor:
            r["ratio_to_floor"] = r["host_us"] / floor
    best = []
    for shape in sorted({(r["rows"], r["cols"], r["dtype"]) for r in rows}):
        entry = dict(zip(("rows", "cols", "dtype"), shape))
        picks = {}
        for state, names, candidates, floor in SAVED_STATES:
            picks[state] = [r for k, r in by.items()
                            if k[:3] == shape and (k[3] in names or k[3].startswith(candidates))]
            if picks[state]:
                b = min(picks[state], key=lambda r: r["host_us"])
                entry.update({f"best_{state}_variant": b["variant"], f"{state}_host_us": b["host_us"],
                              f"floor_{state}_us": us(shape, floor),
                              f"{state}_ratio_to_floor": b.get("ratio_to_floor")})
        if picks["y"] + picks["saved"]:
            b = min(picks["y"] + picks["saved"], key=lambda r: r["host_us"])
            floor = us(shape, "floor_saved" if b in picks["saved"] else "floor")
            peer = us(shape, "torch_compile_bwd_graph")
            entry.update(best_rss_variant=b["variant"], best_label=b.get("label", ""), host_us=b["host_us"],
                         automatic_us=us(shape, "automatic"), automatic_saved_us=us(shape, "automatic_saved"),
                         floor_us=floor, torch_compile_bwd_graph_us=peer,
                         beats_torch_compile_bwd_graph=b["host_us"] < peer if peer else None,
                         torch_eager_bwd_us=us(shape, "torch_eager_bwd"))
            if floor:
                entry.update(ratio_to_floor=b["ratio_to_floor"], floor_at_least_20us=floor >= FLOOR_AT_LEAST_US,
                             within_1_25x_of_floor=b["host_us"] <= FLOOR_RATIO * floor
                             if floor >= FLOOR_AT_LEAST_US else None)
        for mode in ("_graph", ""):
            ours, theirs = us(shape, "rss_op_fwdbwd" + mode), us(shape, "torch_compile_fwdbwd" + mode)
            entry.update({f"rss_op_fwdbwd{mode}_us": ours, f"torch_compile_fwdbwd{mode}_us": theirs,
                          f"fwdbwd{mode}_beats_torch_compile": ours < theirs if ours and theirs else None})
        best.append(entry)
    return best


def fmt(v, spec=".1f"):
    return "-" if v is None else format(v, spec)


def verdict(v):
    return "-" if v is None else ("yes" if v else "**no**")


def markdown(doc):
    """The report's backward section: the targets per shape, then every variant's row."""
    rc, pc = doc["rss_context"], doc["peers_context"]
    lines = ["# Backward pass: measured results", "",
             "Generated by `python3 bench/rssbench backward` from `rss_backward.json` (rss_backward_bench: Google "
             "Benchmark, host completion time of a warm call, median per repetition, median over repetitions) and "
             "`peers.json` (`python3 bench/rssbench peers --suite backward`: torch autograd, same statistic). Do not "
             "edit by hand.", "",
             f"- rss records: {rc.get('date', '?')}, {rc.get('executable', '?')}",
             f"- peers: {pc.get('gpu', '?')}, torch {pc.get('torch', '?')}, "
             f"CUDA {pc.get('cuda', pc.get('toolkit', '?'))}, {pc.get('rounds', '?')} rounds x "
             f"{pc.get('iterations', '?')} samples", "",
             "Targets: the best rss backward strategy faster than torch.compile's backward with CUDA Graph replay, "
             "and within 1.25x of its floor where that floor is at least 20 us (reading y, saved state (a): x, y, dy "
             "read, dx written, 4 N; from saved row statistics, saved state (b), the `_saved` variants: x, dy read, "
             "dx written, 3 N); forward + backward through the PyTorch operator (saved state (b)) faster than "
             "torch.compile of the composed expression. Times in us.", "",
             "| shape | dtype | best rss | us | its floor | ratio | within 1.25x | torch.compile bwd + graph | faster "
             "| best reading y (a) | us | floor 4 N | best from statistics (b) | us | floor 3 N "
             "| rss op fwd+bwd + graph | torch.compile fwd+bwd + graph | faster "
             "| rss op fwd+bwd | torch.compile fwd+bwd | faster |", "|---" * 21 + "|"]
    for e in doc["best_per_shape"]:
        g = e.get
        lines.append(
            f"| {e['rows']} x {e['cols']} | {e['dtype']} | {g('best_rss_variant', '-')} | {fmt(g('host_us'))} "
            f"| {fmt(g('floor_us'))} | {fmt(g('ratio_to_floor'), '.2f')}x "
            f"| {verdict(g('within_1_25x_of_floor')) if g('floor_at_least_20us') else 'floor < 20 us'} "
            f"| {fmt(g('torch_compile_bwd_graph_us'))} | {verdict(g('beats_torch_compile_bwd_graph'))} "
            f"| {g('best_y_variant', '-')} | {fmt(g('y_host_us'))} | {fmt(g('floor_y_us'))} "
            f"| {g('best_saved_variant', '-')} | {fmt(g('saved_host_us'))} | {fmt(g('floor_saved_us'))} "
            f"| {fmt(g('rss_op_fwdbwd_graph_us'))} | {fmt(g('torch_compile_fwdbwd_graph_us'))} "
            f"| {verdict(g('fwdbwd_graph_beats_torch_compile'))} | {fmt(g('rss_op_fwdbwd_us'))} "
            f"| {fmt(g('torch_compile_fwdbwd_us'))} | {verdict(g('fwdbwd_beats_torch_compile'))} |")
    lines += ["", "## Every variant", "", "| shape | dtype | variant | us | sample p10-p90 | ratio to its floor "
              "| max rel err |", "|---|---|---|---|---|---|---|"]
    for r in sorted(doc["results"], key=lambda r: (r["rows"], r["cols"], r["dtype"], r["variant"])):
        head = f"| {r['rows']} x {r['cols']} | {r['dtype']} | {r['variant']} |"
        if "host_us" not in r:
            lines.append(f"{head} error: {r.get('error', '?')} | | | |")
            continue
        lines.append(f"{head} {r['host_us']:.1f} | {r['p10_p90'][0]:.1f}-{r['p10_p90'][1]:.1f} "
                     f"| {fmt(r.get('ratio_to_floor'), '.2f')} | {fmt(r.get('max_rel_err'), '.2e')} |")
    if doc["peer_failures"]:
        lines += ["", "## Peer failures", ""] + [
            f"- {f['rows']} x {f['cols']} {f['dtype']} {f['variant']}: {f['error']}" for f in doc["peer_failures"]]
    return "\n".join(lines) + "\n"


def main(argv):
    ap = argparse.ArgumentParser(prog="rssbench backward", description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rss", required=True, help="rss_backward_bench's Google Benchmark JSON")
    ap.add_argument("--peers", help="the backward peers' records")
    ap.add_argument("--out", required=True, help="summary JSON to write")
    ap.add_argument("--report", help="also write the report's markdown section (bench/results/backward/results.md)")
    args = ap.parse_args(argv)
    rounds, rss_context, _ = rounds_of(args.rss)
    rows = rows_of(rounds, "rss_backward_bench")
    peers_context, failures = {}, []
    if args.peers:
        try:
            rounds, peers_context, failures = rounds_of(args.peers)
            rows += rows_of(rounds, "peers.py" if "producer" not in peers_context else "rssbench peers")
        except (OSError, ValueError) as e:
            print(f"rssbench backward: no peers ({e})", file=sys.stderr)
    best = best_per_shape(rows)
    doc = {"producer": "rssbench backward", "rss_context": rss_context, "peers_context": peers_context,
           "results": rows, "best_per_shape": best, "peer_failures": failures}
    records.write(args.out, doc)
    if args.report:
        with open(args.report, "w") as f:
            f.write(markdown(doc))
    for e in best:
        print(" ".join(f"{k}={v:.4g}" if isinstance(v, float) else f"{k}={v}" for k, v in e.items()))
    return 0
