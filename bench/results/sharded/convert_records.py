"""One-off: the committed sharded records (sharded_bench's and torch_peer.py's own JSON, before rss-records/2) as
Google Benchmark JSON of schema rss-records/2, every value kept. Run once; removed afterwards (git history keeps it).

    python3 bench/results/sharded/convert_records.py   (reads raw/original/, writes raw/*.json)

Each record's samples become one run per round (host_us/i in sample order); detail becomes the run's label, a status
other than ok a run with its error; the per-record uuids follow from the context's list and the world counter.
sharded_bench's first records wrote max_rel_err with 6 fixed decimals (1e-7 reads 0.000000): where a record reads
0.0 the value sharded_bench printed in the same run's log (bench.log, 3 significant digits) is taken, as the old
reader did, and the context says so.
"""
import hashlib
import json
import os
import re
import sys

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", "rssbench"))
import records  # noqa: E402

RAW = os.path.join(os.path.dirname(os.path.abspath(__file__)), "raw")
LOG_LINE = re.compile(r"^\s*(\d+) x (\d+)\s+(\w+) (\S+)\s+(\S+) us\s+err (\S+)")


def convert(name, producer, log=None):
    path = os.path.join(RAW, "original", name)
    data = open(path, "rb").read()
    old = json.loads(data)
    ctx, recs = old["context"], old["records"]
    from_log = {}
    for line in open(os.path.join(RAW, log)).read().splitlines() if log else []:
        m = LOG_LINE.match(line)
        if m and m.group(6) != "nan":
            from_log[(int(m.group(1)), int(m.group(2)), m.group(3), m.group(4))] = float(m.group(6))
    uuids = ctx.get("uuids") or [u if u.startswith("GPU-") else "GPU-" + u for u in recs[0]["uuids"]]
    note = f"{name} (sha256 {hashlib.sha256(data).hexdigest()}, {ctx['tool']}'s own JSON)"
    context = {"schema": records.SCHEMA, "producer": producer, "suite": "sharded", "session": "1",
               "gpu": ctx["gpus"].split(",")[0], "uuid": ",".join(uuids),
               "driver": f"cuda {ctx['driver'] // 1000}.{ctx['driver'] % 1000 // 10}" if "driver" in ctx else "",
               "toolkit": f"{ctx['runtime'] // 1000}.{ctx['runtime'] % 1000 // 10}" if "runtime" in ctx else "",
               "rounds": str(ctx["rounds"]), "iterations": str(ctx["samples"]),
               "warmup": str(ctx["warmup"]), "seed": str(ctx["seed"]), "shape_order": "forward",
               "world": str(ctx["world"]), "gpus": ctx["gpus"], "nccl": str(ctx["nccl"]),
               "NCCL_NVLS_ENABLE": ctx["NCCL_NVLS_ENABLE"], "time": str(ctx["time"])}
    if "torch" in ctx:
        context["torch"] = ctx["torch"]
    runs, fixed = [], 0
    for r in recs:
        label = records.shape_label(r["rows"], r["cols"], r["dtype"])
        if r["status"] != "ok":
            runs.append({"name": f"{label}/{r['variant']}", "run_type": "iteration", "error_occurred": True,
                         "error_message": r["status"], "label": r["detail"], "world": r["world"]})
            continue
        err = r["max_rel_err"]
        key = (r["rows"], r["cols"], r["dtype"], r["variant"])
        if err == 0.0 and key in from_log:
            err, fixed = from_log[key], fixed + 1
        for rnd in sorted(set(r["round_of_sample"])):
            host = [s for s, k in zip(r["samples_us"], r["round_of_sample"]) if k == rnd]
            run = records.run_entry(f"{label}/round{rnd}/{r['variant']}", host, None, rows=r["rows"], cols=r["cols"],
                                    round=rnd, world=r["world"], max_rel_err=err)
            runs.append(dict(run, label=r["detail"]))
    context["converted_from"] = note + (f"; max_rel_err of {fixed} records from {log}" if fixed else "")
    records.write(os.path.join(RAW, name), {"context": context, "benchmarks": runs})


convert("sharded_records.json", "sharded_bench", log="bench.log")
convert("torch_records.json", "torch_distributed_peer")
