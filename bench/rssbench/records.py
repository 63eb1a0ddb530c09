"""Raw records: the one reader of Google Benchmark's JSON, the schema rss adds to it (rss-records/2), the source hash;
their definitions and load()'s normalised form: docs/protocol.md ("The tools in detail")."""
import hashlib
import json
import math
import os
import re
import statistics

SCHEMA = "rss-records/2"
TREE = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))  # the repository
DTYPES = ("fp32", "bf16", "fp16")
# The forward's variants in report order (report.py, tune.py); a name not listed is reported as an rss strategy.
STRATEGIES = ("baseline", "baseline_graph", "local_fusion", "megakernel_grid", "megakernel_row", "block_row",
              "cluster_row", "long_row", "automatic")
CONTROLS = ("control_no_retention", "control_ordinary_launch")  # the megakernel with one mechanism taken away
# Copies of the same bytes: our copy kernels (bench/copy_floor.cuh), then cudaMemcpyAsync device to device; the limit
# is the fastest (older records have copy_floor and memcpy_floor only).
FLOORS = ("copy_floor", "blocked_copy_floor", "bulk_copy_floor", "memcpy_floor")
PEERS = ("torch_eager", "torch_eager_graph", "torch_compile", "torch_compile_graph")
KNOWN_VARIANTS = STRATEGIES + CONTROLS + FLOORS + PEERS
SHAPE_ORDERS = ("forward", "reverse")
EXCLUDED_PREFIXES = ("bench/results/", "include/rss/backward/", "include/rss/sharded/", "bench/backward/",
                     "bench/sharded/")
GB_CONTEXT = {"date", "host_name", "executable", "num_cpus", "mhz_per_cpu", "cpu_scaling_enabled", "caches",
              "load_avg", "library_build_type", "library_version", "json_schema_version"}
IDENTITY = {"schema", "producer", "suite", "session", "gpu", "uuid", "driver", "toolkit", "sm_count", "source_hash",
            "clocks_start", "clocks_end", "fixture_seed", "fixture_generator", "fixture_hash",
            "fixture_first_elements", "converted_from"}
INTEGERS = {"session", "sm_count", "rounds", "iterations", "warmup", "seed", "fixture_seed"}
RUNNER_KEYS = ("source_hash", "fixture_hash", "clocks_start", "clocks_end")  # what the session runner completes
GB_SUFFIX = re.compile(r"^(?:(?:iterations|repeats|min_time|min_warmup_time|threads):.*|manual_time|real_time|"
                       r"process_time)$")
SHAPE_PART = re.compile(r"^(\d+)x(\d+)(?::(fp32|bf16|fp16))?$")
ROUND_PART = re.compile(r"^round(\d+)$")
UNIT_US = {"ns": 1e-3, "us": 1.0, "ms": 1e3, "s": 1e6}


class RecordError(ValueError):
    """A raw record file that does not follow the schema; the message names the file and the field."""


def source_hash(tree="."):
    """sha256 over the files of include/ and bench/ that produce measurements (docs/protocol.md)."""
    paths = []
    for top in ("include", "bench"):
        for dirpath, dirnames, filenames in os.walk(os.path.join(tree, top)):
            dirnames[:] = [d for d in dirnames if d != "__pycache__"]
            full = [os.path.join(dirpath, name) for name in filenames if not name.endswith((".pyc", ".md"))]
            paths += [(os.path.relpath(f, tree).replace(os.sep, "/"), f) for f in full if os.path.isfile(f)]
    h = hashlib.sha256()
    for rel, full in sorted(p for p in paths if not p[0].startswith(EXCLUDED_PREFIXES)):
        with open(full, "rb") as f:
            data = f.read()
        h.update(rel.encode("utf-8") + b"\0" + str(len(data)).encode("ascii") + b"\0" + data)
    return h.hexdigest()


def _require(cond, where, msg):
    if not cond:
        raise RecordError(f"{where}: {msg}")


def parse_name(name, where="name"):
    """'8x131072:bf16/round3/cluster_row/iterations:30/manual_time' -> {rows, cols, dtype, round, variant};
    suite-mode names ('8x131072:bf16/cluster_row') have round None."""
    out, rest = {"rows": None, "cols": None, "dtype": "fp32", "round": None}, []
    for p in (p for p in name.split("/") if p and not GB_SUFFIX.match(p)):
        shape, rnd = SHAPE_PART.match(p), ROUND_PART.match(p)
        if shape and out["rows"] is None:
            out.update(rows=int(shape.group(1)), cols=int(shape.group(2)), dtype=shape.group(3) or out["dtype"])
        elif rnd and out["round"] is None:
            out["round"] = int(rnd.group(1))
        else:
            rest.append(p)
    _require(out["rows"] is not None and len(rest) == 1, where,
             f"benchmark name {name!r} is not SHAPE/[roundR/]VARIANT")
    out["variant"] = rest[0]
    return out


def iteration_runs(doc):
    """(index, run, error) of a Google Benchmark document's iteration runs (not its aggregates); error is the
    message of a run that did not run (1.7: error_occurred; 1.8+: skipped), else None."""
    for i, run in enumerate(doc.get("benchmarks", [])):
        if isinstance(run, dict) and run.get("run_type", "iteration") == "iteration":
            failed = run.get("error_occurred") or run.get("skipped")
            yield i, run, (run.get("error_message") or run.get("skip_message") or "error") if failed else None


def _integer(v, where, key):
    f = _number(v)
    _require(f is not None and f == int(f), where, f"'{key}' must be an integer, got {v!r}")
    return int(f)


def _number(v):
    try:
        f = float(v)
    except (TypeError, ValueError):
        return None
    return f if math.isfinite(f) else None


def record_of(run, where):
    """One Google Benchmark run as a record (the normalised form above)."""
    r = parse_name(run["name"], where)
    _require(r["round"] is not None, where, f"benchmark name {run['name']!r} has no round (SHAPE/roundR/VARIANT)")
    for key in ("rows", "cols"):
        if key in run:
            _require(_integer(run[key], where, key) == r[key], where, f"counter '{key}' disagrees with the name")
    samples = sorted((int(k.split("/", 1)[1]), v) for k, v in run.items() if k.startswith("host_us/"))
    _require([i for i, _ in samples] == list(range(len(samples))), where, "host_us/i counters are not 0..N-1")
    host = [_number(v) for _, v in samples]
    _require(host and all(h is not None and h > 0 for h in host), where, "'host_us' must be a non-empty list of "
             "positive finite numbers")
    device, blocks = _number(run.get("device_us")), _number(run.get("active_blocks_per_sm"))
    count = lambda key, default: _integer(run.get(key, default), where, key)  # noqa: E731  (-1: unknown)
    r.update({"position": count("position", 0), "host_us": host, "device_us": [] if device is None else [device],
              "kernels": count("kernels", -1), "launches": count("launches", -1),
              "cooperative": bool(_number(run.get("cooperative", 0))),
              "active_blocks_per_sm": int(blocks) if blocks else None, "logical_bytes": count("logical_bytes", -1),
              "evicted_tiles": count("evicted_tiles", 0), "max_rel_err": _number(run.get("max_rel_err")),
              "world": count("world", 1), "label": run.get("label", "")})
    return r


def normalize(doc, where="records", complete=True):
    """A document of schema rss-records/2 in the normalised form; complete: the session runner's fields must be
    there (source hash, fixture hash, clocks)."""
    _require(isinstance(doc, dict) and isinstance(doc.get("context"), dict) and isinstance(doc.get("benchmarks"), list),
             where, "not Google Benchmark JSON (an object with 'context' and 'benchmarks')")
    ctx = doc["context"]
    _require(ctx.get("schema") == SCHEMA, where, f"context.schema must be {SCHEMA!r}, got {ctx.get('schema')!r}")
    for key in ("producer", "gpu", "uuid", "driver", "toolkit") + (RUNNER_KEYS if complete else ()):
        _require(key in ctx and (isinstance(ctx[key], dict) or str(ctx[key]) != "" or not complete), where,
                 f"context lacks '{key}'")
    ints = {k: _integer(ctx[k], f"{where}: context", k) for k in INTEGERS if k in ctx}
    needs = ("session", "rounds", "iterations") + (("sm_count",) if complete else ())
    _require(min(ints.get(k, 0) for k in needs) >= 1 and "seed" in ints, where,
             f"context needs {', '.join(needs)} >= 1 and seed")
    _require(ctx.get("shape_order") in SHAPE_ORDERS, where, "context.shape_order must be 'forward' or 'reverse'")
    context = {k: ctx.get(k, "") for k in ("gpu", "uuid", "driver", "toolkit", "source_hash")}
    context.update(sm_count=ints.get("sm_count"), clocks_start=ctx.get("clocks_start", {}),
                   clocks_end=ctx.get("clocks_end", {}),
                   config={k: ints.get(k, v) for k, v in ctx.items() if k not in IDENTITY | GB_CONTEXT},
                   fixture={"seed": ints.get("fixture_seed"), "generator": ctx.get("fixture_generator", ""),
                            "hash": ctx.get("fixture_hash", "")})
    out = {"schema": SCHEMA, "producer": ctx["producer"], "suite": ctx.get("suite", "forward"),
           "session": ints["session"], "context": context, "records": [], "errors": []}
    seen = set()
    for i, run, error in iteration_runs(doc):
        rw = f"{where}: benchmarks[{i}]"
        _require("name" in run, rw, "a run needs a name")
        if error:
            out["errors"].append(dict(parse_name(run["name"], rw), name=run["name"], error=error,
                                      label=run.get("label", ""), world=_integer(run.get("world", 1), rw, "world")))
            continue
        rec = record_of(run, rw)
        key = (rec["rows"], rec["cols"], rec["dtype"], rec["variant"], rec["round"])
        _require(key not in seen, rw, f"duplicate record for shape/dtype/variant/round {key}")
        seen.add(key)
        out["records"].append(rec)
    return out


def load(path, complete=True):
    """Load and normalise one raw record file; its sha256 comes along."""
    try:
        with open(path, "rb") as f:
            data = f.read()
        doc = json.loads(data)
    except (OSError, ValueError) as e:
        raise RecordError(f"{path}: cannot read JSON: {e}") from e
    name = os.path.basename(path)
    return dict(normalize(doc, name, complete), file=name, sha256=hashlib.sha256(data).hexdigest())


def load_dir(directory, complete=True):
    """All *.json raw record files of a directory, sorted by name, loaded (each with its file name and sha256)."""
    names = sorted(n for n in os.listdir(directory) if n.endswith(".json")) if os.path.isdir(directory) else None
    _require(names is not None, directory, "no such records directory")
    _require(names, directory, "no *.json record files")
    return [load(os.path.join(directory, n), complete) for n in names]


def run_entry(name, host_us, device_us=None, **counters):
    """A Google Benchmark run (JSON reporter's fields) carrying every sample as counters host_us/i."""
    mean = statistics.fmean(host_us)
    entry = {"name": name, "run_name": name, "run_type": "iteration", "repetitions": 1, "repetition_index": 0,
             "threads": 1, "iterations": len(host_us), "real_time": mean, "cpu_time": mean, "time_unit": "us"}
    entry.update({k: v for k, v in counters.items() if v is not None})
    if device_us is not None:
        entry["device_us"] = device_us
    return dict(entry, **{f"host_us/{i}": v for i, v in enumerate(host_us)})


def shape_label(rows, cols, dtype):
    """The shape part of a run's name, as rss_bench writes it."""
    return f"{rows}x{cols}" + ("" if dtype == "fp32" else f":{dtype}")


def write(path, doc):
    """A record file as every producer writes it (json, indent 1, a final newline)."""
    with open(path, "w", encoding="utf-8") as f:
        f.write(json.dumps(doc, indent=1) + "\n")


def normalize_uuid(uuid):
    """nvidia-smi writes 'GPU-<uuid>', CUDA/torch the bare uuid: compare them without the prefix."""
    u = uuid.strip().lower()
    return u[4:] if u.startswith("gpu-") else u
