"""The sharded report (bench/results/sharded/: summary.json, report.md; docs/protocol.md, "Sharded report")."""
import functools

import report

TOLERANCE = {"fp32": 2e-6, "bf16": 1e-2, "fp16": 1e-2}
LATENCY_SHAPES = {(32, 128256), (64, 131072)}
BANDWIDTH_SHAPES = {(4096, 128256)}
REPORT = "report.md"  # beside summary.json
fmt = functools.partial(report.fmt, none="–")  # the report's format, with this report's mark for a missing value
ORDER = ("single_gpu", "nccl_host", "nccl_host_eager", "nccl_device", "nccl_device_lsa_barrier", "torch_distributed")


def summarize(files):
    """summary.json of the loaded record files."""
    uuids = {doc["file"]: doc["context"]["uuid"].split(",") for doc in files}
    rows = []
    for r in report.suite_rows(files):
        row = {**{k: r[k] for k in ("rows", "cols", "dtype", "world", "variant")},
               "host_us": r.get("host_us") and round(r["host_us"], 2), "max_rel_err": r.get("max_rel_err"),
               "uuids": uuids[r["file"]][:r["world"]], "status": r.get("error", "ok"), "detail": r["label"]}
        if "host_us" in r:  # rounded as the report prints them: the ratios below are of the printed values
            row.update(p10_us=round(r["p10_us"], 2), p90_us=round(r["p90_us"], 2), rounds=r["rounds"],
                       samples=r["samples"])
        rows.append(row)
    accurate = [r for r in rows if r["max_rel_err"] is not None and r["max_rel_err"] <= 2 * TOLERANCE[r["dtype"]]]
    for variants in report.by_shape(accurate).values():  # single_gpu: the fastest accurate candidate
        b = report.fastest(variants, lambda v: v.startswith("single_gpu:"))
        if b:
            rows.append(dict(b, variant="single_gpu", detail=f"fastest single-GPU rss strategy: "
                             f"{b['variant'].split(':', 1)[1]} ({b['detail']})"))
    rows.sort(key=lambda r: (r["rows"] * r["cols"], r["rows"], r["dtype"],
                             ORDER.index(r["variant"]) if r["variant"] in ORDER else len(ORDER), r["variant"]))
    return {"files": report.files_of(files), "rows": rows}


def markdown(summary):
    rows = summary["rows"]
    gpus = next((f["config"].get("gpus") for f in summary["files"] if f["config"].get("gpus")), "?")
    out = [f"## Rows sharded over {max((r['world'] for r in rows), default=0)} GPUs", "",
           f"Host completion time of warm calls (launch on every GPU used, then synchronise each), microseconds: "
           f"median over rounds of each round's median. {gpus}; each row's columns split over the GPUs (uneven "
           f"where they do not divide); NVLink multicast off. `single_gpu`: the fastest rss strategy on the whole "
           f"row on one GPU. `nccl_host`: rss's host-collective path replayed as one CUDA Graph per GPU. "
           f"`nccl_device`: rss's one-kernel path over NCCL's device API (flags exchange; `lsa_barrier`: the same "
           f"kernel with NCCL's LSA barrier). `torch_distributed`: the same operator in PyTorch (local max and sum "
           f"of squares, all-gather, local exp-sum, all-reduce, normalise; the slowest rank per sample). Made by "
           f"`bench/rssbench report build --suite sharded` from `bench/results/sharded/raw/`.", ""]
    lines, targets = [], []
    for key, variants in report.by_shape(rows).items():
        s, strat = variants.get("single_gpu"), "?"
        if s:  # "fastest single-GPU rss strategy: NAME (ran STRATEGY)"
            name = s["detail"].split(": ", 1)[1].split(" (")[0]
            ran = s["detail"].rsplit("ran ", 1)[-1].rstrip(")")
            strat = name if ran == name else f"{name}: {ran}"
        sv, hv, dv, bv, tv = (variants.get(v, {}).get("host_us") for v in (
            "single_gpu", "nccl_host", "nccl_device", "nccl_device_lsa_barrier", "torch_distributed"))
        two_gpu = [(v, n) for v, n in ((hv, "nccl_host"), (dv, "nccl_device")) if v is not None]
        v, n = min(two_gpu) if two_gpu else (None, "–")
        ratio = v / sv if v is not None and sv else None  # the best 2-GPU time over the single-GPU time
        cells = [fmt(t, none="refused" if variant in variants else "–")
                 for t, variant in ((dv, "nccl_device"), (bv, "nccl_device_lsa_barrier"))]
        errs = ", ".join(fmt(variants.get(v, {}).get("max_rel_err"), ".2g") for v in ("nccl_host", "nccl_device"))
        lines.append([f"{key[0]} x {key[1]}", key[2], f"{fmt(sv)} ({strat})", fmt(hv), *cells, fmt(tv),
                      f"{fmt(ratio, '.3f')}x", errs])
        shape = report.shape_name(key)
        if key[:2] in LATENCY_SHAPES:
            met = None not in (hv, dv, tv) and dv < hv < tv
            targets.append(f"- {shape}: nccl_device {fmt(dv)} < nccl_host {fmt(hv)} < torch_distributed {fmt(tv)}: "
                           f"{'met' if met else 'missed'}")
        elif key[:2] in BANDWIDTH_SHAPES:
            targets.append(f"- {shape}: best 2-GPU ({n}) {fmt(v)} / single_gpu {fmt(sv)} = {fmt(ratio, '.3f')}x: "
                           f"{'met' if ratio is not None and ratio <= 0.6 else 'missed'}")
    out += report.table(["shape", "dtype", "single_gpu (strategy)", "nccl_host", "nccl_device", "lsa_barrier",
                         "torch_distributed", "best 2-GPU / single", "max rel err host, device"], lines)
    out += ["", "Targets: on the latency-bound shapes (32 x 128256, 64 x 131072) `nccl_device` faster than `nccl_host` "
            "and both faster than `torch_distributed`; on the bandwidth-bound 4096 x 128256 the 2-GPU time at most "
            "0.6x the single-GPU time.", ""] + targets
    out += ["", "Every variant's output is checked against the double reference of the whole row (rows 0, rows/2, "
            "rows-1 and up to five more); `summary.json` has every variant (each single-GPU candidate too) with "
            "p10/p90 over rounds, the GPUs' UUIDs and the record files' contexts.", ""]
    return "\n".join(out)
