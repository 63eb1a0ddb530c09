#!/usr/bin/env python3
"""One-time conversion of committed rss-records/1 files into rss-records/2 (Google Benchmark JSON), in place.
Every sample, every context field and the source hash are carried over; the file's former sha256 is kept in
context.converted_from. Run once, then removed (git history keeps it)."""
import hashlib
import json
import sys

import records


def convert(path):
    raw = open(path, "rb").read()
    old = json.loads(raw)
    assert old["schema"] == "rss-records/1", path
    c = old["context"]
    ctx = {"producer": old["producer"], "suite": "forward", "session": str(old["session"]), "gpu": c["gpu"],
           "uuid": c["uuid"], "driver": c["driver"], "toolkit": c["toolkit"], "sm_count": str(c["sm_count"]),
           "source_hash": c["source_hash"], "clocks_start": c["clocks_start"], "clocks_end": c["clocks_end"]}
    for k, v in c["config"].items():
        assert k not in ctx, k
        ctx[k] = ",".join(v) if isinstance(v, list) else str(v)
    fx = c["fixture"]
    ctx.update(fixture_seed=str(fx["seed"]), fixture_generator=fx["generator"], fixture_hash=fx["hash"])
    if "first_elements" in fx:
        ctx["fixture_first_elements"] = fx["first_elements"]
    for k in c:
        assert k in ("gpu", "uuid", "driver", "toolkit", "sm_count", "clocks_start", "clocks_end", "source_hash",
                     "config", "fixture"), k
    ctx["converted_from"] = "rss-records/1 %s sha256 %s" % (path.split("/")[-1], hashlib.sha256(raw).hexdigest())
    runs = []
    for r in old["records"]:
        assert len(r["device_us"]) <= 1 and r["active_blocks_per_sm"] != 0 and r["max_rel_err"] is not None
        name = "%s/round%d/%s" % (records.shape_label(r["rows"], r["cols"], r["dtype"]), r["round"], r["variant"])
        runs.append(records.run_entry(
            name, r["host_us"], r["device_us"][0] if r["device_us"] else None, rows=r["rows"], cols=r["cols"],
            round=r["round"], position=r["position"], kernels=r["kernels"], launches=r["launches"],
            cooperative=int(r["cooperative"]), active_blocks_per_sm=r["active_blocks_per_sm"],
            logical_bytes=r["logical_bytes"], evicted_tiles=r["evicted_tiles"], max_rel_err=r["max_rel_err"]))
    records.write(path, ctx, runs)
    new = records.load(path, complete=False)
    keep = ("rows", "cols", "dtype", "variant", "round", "position", "host_us", "device_us", "kernels", "launches",
            "cooperative", "active_blocks_per_sm", "logical_bytes", "evicted_tiles", "max_rel_err")
    assert [{k: r[k] for k in keep} for r in new["records"]] == old["records"], path
    print("converted", path, len(runs), "runs")


if __name__ == "__main__":
    for p in sys.argv[1:]:
        convert(p)
