"""Report of the sharded bench, from raw records only.

    python3 bench/sharded/report.py build|verify RECORDS.json... [--log BENCH.log] [--out bench/results/sharded]

RECORDS: sharded_bench's and the torch peer's (`python3 bench/rssbench peers --suite sharded`) JSON files
(bench/results/sharded/raw/). build writes summary.json and report.md; verify recomputes both and fails when the
committed files differ. Definitions: docs/protocol.md ("The tools in detail").
"""
import argparse
import json
import math
import re
import statistics
import sys
from pathlib import Path

TOLERANCE = {"fp32": 2e-6, "bf16": 1e-2, "fp16": 1e-2}
LATENCY_SHAPES = {(32, 128256), (64, 131072)}
BANDWIDTH_SHAPES = {(4096, 128256)}
ORDER = ("single_gpu", "nccl_host", "nccl_host_eager", "nccl_device", "nccl_device_lsa_barrier", "torch_distributed")
LOG_LINE = re.compile(r"^\s*(\d+) x (\d+)\s+(\w+) (\S+)\s+(\S+) us\s+err (\S+)")


def load(paths, log=None):
    records, contexts, from_log = [], [], {}
    for line in Path(log).read_text().splitlines() if log else []:  # max_rel_err as sharded_bench printed it
        m = LOG_LINE.match(line)
        if m and m.group(6) != "nan":
            from_log[(int(m.group(1)), int(m.group(2)), m.group(3), m.group(4))] = float(m.group(6))
    for p in paths:
        data = json.loads(Path(p).read_text())
        ctx = {"file": Path(p).name, **data["context"]}
        for r in data["records"]:
            r["uuids"] = [u if u.startswith("GPU-") else "GPU-" + u for u in r.get("uuids", [])]
            key = (r["rows"], r["cols"], r["dtype"], r["variant"])
            # sharded_bench's first records wrote max_rel_err with 6 fixed decimals (1e-7 reads 0.000000); the
            # same run's log printed it with 3 significant digits.
            if r.get("max_rel_err") == 0.0 and key in from_log:
                r["max_rel_err"] = from_log[key]
                ctx["max_rel_err_from"] = Path(log).name
            records.append(r)
        contexts.append(ctx)
    return records, contexts


def row_of(r):
    """A record's summary row: the median over rounds of each round's median, p10/p90 over the rounds; host_us None
    for a record that did not run (status other than ok) or has no samples."""
    row = {**{k: r[k] for k in ("rows", "cols", "dtype", "world", "variant")}, "host_us": None,
           "max_rel_err": r.get("max_rel_err"), "uuids": r.get("uuids", []), "status": r.get("status", "ok"),
           "detail": r.get("detail", "")}
    if row["status"] != "ok" or not r["samples_us"]:
        return row
    by_round = {}
    for sample, rnd in zip(r["samples_us"], r["round_of_sample"]):
        by_round.setdefault(rnd, []).append(sample)
    import numpy as np  # here, so that --help works without it
    medians = [statistics.median(v) for _, v in sorted(by_round.items())]
    p10, p90 = (round(float(p), 2) for p in np.percentile(medians, [10, 90]))  # linear, as the forward report's
    return dict(row, host_us=round(statistics.median(medians), 2), p10_us=p10, p90_us=p90, rounds=len(medians),
                samples=len(r["samples_us"]))


def build(paths, log=None):
    records, contexts = load(paths, log)
    rows = [row_of(r) for r in records]
    best = {}  # single_gpu: the fastest accurate candidate per shape and dtype
    for row in rows:
        err, key = row["max_rel_err"], (row["rows"], row["cols"], row["dtype"])
        if (row["variant"].startswith("single_gpu:") and row["host_us"] is not None and err is not None
                and err <= 2 * TOLERANCE[row["dtype"]] and (key not in best or row["host_us"] < best[key]["host_us"])):
            best[key] = row
    rows += [dict(row, variant="single_gpu", detail=f"fastest single-GPU rss strategy: "
                  f"{row['variant'].split(':', 1)[1]} ({row['detail']})") for row in best.values()]
    rows.sort(key=lambda r: (r["rows"] * r["cols"], r["rows"], r["dtype"],
                             ORDER.index(r["variant"]) if r["variant"] in ORDER else len(ORDER), r["variant"]))
    summary = {"contexts": contexts, "rows": rows}
    return summary, markdown(summary)


def fmt(v, digits=2):
    return "–" if v is None or (isinstance(v, float) and math.isnan(v)) else f"{v:.{digits}f}"


def markdown(summary):
    rows = summary["rows"]
    shapes = list(dict.fromkeys((r["rows"], r["cols"], r["dtype"]) for r in rows))
    get = {(r["rows"], r["cols"], r["dtype"], r["variant"]): r for r in rows}

    def field(key, variant, name="host_us"):
        r = get.get(key + (variant,))
        return r.get(name) if r and r["status"] == "ok" else None

    gpus = next((c.get("gpus") for c in summary["contexts"] if c.get("gpus")), "?")
    out = [f"## Rows sharded over {max((r['world'] for r in rows), default=0)} GPUs", "",
           f"Host completion time of warm calls (launch on every GPU used, then synchronise each), microseconds: "
           f"median over rounds of each round's median. {gpus}; each row's columns split over the GPUs (uneven "
           f"where they do not divide); NVLink multicast off. `single_gpu`: the fastest rss strategy on the whole "
           f"row on one GPU. `nccl_host`: rss's host-collective path replayed as one CUDA Graph per GPU. "
           f"`nccl_device`: rss's one-kernel path over NCCL's device API (flags exchange; `lsa_barrier`: the same "
           f"kernel with NCCL's LSA barrier). `torch_distributed`: the same operator in PyTorch (local max and sum "
           f"of squares, all-gather, local exp-sum, all-reduce, normalise; the slowest rank per sample). Made by "
           f"`bench/sharded/report.py` from `bench/results/sharded/raw/`.", "",
           "| shape | dtype | single_gpu (strategy) | nccl_host | nccl_device | lsa_barrier | torch_distributed | "
           "best 2-GPU / single | max rel err host, device |", "|---|---|---|---|---|---|---|---|---|"]
    targets = []
    for key in shapes:
        s, strat = get.get(key + ("single_gpu",)), "?"
        if s:  # "fastest single-GPU rss strategy: NAME (ran STRATEGY)"
            name = s["detail"].split(": ", 1)[1].split(" (")[0]
            ran = s["detail"].rsplit("ran ", 1)[-1].rstrip(")")
            strat = name if ran == name else f"{name}: {ran}"
        sv, hv, dv, bv, tv = (field(key, v) for v in ("single_gpu", "nccl_host", "nccl_device",
                                                      "nccl_device_lsa_barrier", "torch_distributed"))
        two_gpu = [(v, n) for v, n in ((hv, "nccl_host"), (dv, "nccl_device")) if v is not None]
        v, n = min(two_gpu) if two_gpu else (None, "–")
        ratio = v / sv if v is not None and sv else None  # the best 2-GPU time over the single-GPU time
        cells = [fmt(t) if t is not None else ("refused" if get.get(key + (variant,)) else "–")
                 for t, variant in ((dv, "nccl_device"), (bv, "nccl_device_lsa_barrier"))]
        errs = ", ".join("–" if e is None else f"{e:.2g}" for e in (field(key, v, "max_rel_err")
                                                                   for v in ("nccl_host", "nccl_device")))
        out.append(f"| {key[0]} x {key[1]} | {key[2]} | {fmt(sv)} ({strat}) | {fmt(hv)} | {cells[0]} | {cells[1]} | "
                   f"{fmt(tv)} | {fmt(ratio, 3)}x | {errs} |")
        shape = f"{key[0]} x {key[1]} {key[2]}"
        if key[:2] in LATENCY_SHAPES:
            ok = None not in (hv, dv, tv) and dv < hv < tv
            targets.append(f"- {shape}: nccl_device {fmt(dv)} < nccl_host {fmt(hv)} < torch_distributed {fmt(tv)}: "
                           f"{'met' if ok else 'missed'}")
        elif key[:2] in BANDWIDTH_SHAPES:
            targets.append(f"- {shape}: best 2-GPU ({n}) {fmt(v)} / single_gpu {fmt(sv)} = {fmt(ratio, 3)}x: "
                           f"{'met' if ratio is not None and ratio <= 0.6 else 'missed'}")
    out += ["", "Targets: on the latency-bound shapes (32 x 128256, 64 x 131072) `nccl_device` faster than `nccl_host` "
            "and both faster than `torch_distributed`; on the bandwidth-bound 4096 x 128256 the 2-GPU time at most "
            "0.6x the single-GPU time.", ""] + targets
    out += ["", "Every variant's output is checked after its timed calls against the double reference of the whole row "
            "(rows 0, rows/2, rows-1 and up to five more); `summary.json` has every variant (each single-GPU "
            "candidate too) with p10/p90 over rounds, the GPUs' UUIDs and the runs' contexts.", ""]
    return "\n".join(out)


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("mode", choices=["build", "verify"])
    p.add_argument("records", nargs="+")
    p.add_argument("--out", default="bench/results/sharded")
    p.add_argument("--log", help="sharded_bench's log of the same run: max_rel_err where a record reads 0.0")
    a = p.parse_args()
    summary, md = build(a.records, a.log)
    out, files = Path(a.out), {"summary.json": json.dumps(summary, indent=1) + "\n", "report.md": md}
    if a.mode == "build":
        out.mkdir(parents=True, exist_ok=True)
        for name, text in files.items():
            (out / name).write_text(text)
        print(md)
        return 0
    ok = all((out / name).read_text() == text for name, text in files.items())
    print("sharded report: " + ("verified" if ok else "DIFFERS from what the raw records give"))
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
