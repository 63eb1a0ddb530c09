#!/usr/bin/env python3
"""Raw benchmark records: schema validation, loading, and the source hash.

A raw record file is one JSON document per (session, producer), e.g. raw/session1_rss.json written by the
C++ bench and raw/session1_torch.json written by peers.py. Every sample is kept; aggregates are always
recomputed from these files (report.py), never edited by hand.

Schema "rss-records/1":
    {"schema": "rss-records/1", "producer": "rss_bench" | "torch_peers", "session": int >= 1,
     "context": {"gpu", "uuid", "driver", "toolkit": str, "sm_count": int,
                 "clocks_start", "clocks_end": {free-form}, "source_hash": str,
                 "config": {"rounds", "iterations", "seed": int, "shape_order": "forward" | "reverse", ...},
                 "fixture": {"seed": int, "generator": str, "hash": str}},
     "records": [{"rows", "cols": int > 0, "dtype": "fp32" | "bf16" | "fp16", "variant": str,
                  "round": int >= 0, "position": int >= 0, "host_us": [float > 0, ...] (non-empty),
                  "device_us": [float, ...] (may be empty), "kernels", "launches": int (-1 = unknown),
                  "cooperative": bool, "active_blocks_per_sm": int | null, "logical_bytes": int (-1 = unknown),
                  "evicted_tiles": int >= 0, "max_rel_err": float | null}, ...]}

Source hash (the session runner and verify both call source_hash(); it is the only definition):
    sha256 over every regular file under include/ and bench/ of the tree, excluding anything under
    bench/results/, the backward pass's and the sharded path's own code and benches (include/rss/backward/,
    include/rss/sharded/, bench/backward/, bench/sharded/: the forward bench neither runs nor measures them,
    and they have records of their own), any __pycache__/ directory, any *.pyc file and any *.md file (notes
    and prose describe the measurements; they do not produce them); files are taken in ascending order of
    their tree-relative POSIX path (Python str order), and each feeds
        path.encode("utf-8") + b"\\0" + str(len(data)).encode() + b"\\0" + data
    where data is the file's bytes. Untracked files (e.g. a build folder under bench/) count too: build
    outside include/ and bench/.

CLI:
    python3 bench/tools/records.py source-hash --tree .
    python3 bench/tools/records.py validate FILE.json [...]
"""
import argparse
import hashlib
import json
import math
import os
import sys

SCHEMA = "rss-records/1"
DTYPES = ("fp32", "bf16", "fp16")

# The variants the bench (rss_bench) and the peers (peers.py) record, in report order: the one list that
# report.py and tune.py read. A name not listed is reported as an rss strategy, after these.
STRATEGIES = ("baseline", "baseline_graph", "local_fusion", "megakernel_grid", "megakernel_row", "block_row",
              "cluster_row", "automatic")
CONTROLS = ("control_no_retention", "control_ordinary_launch")  # the megakernel with one mechanism taken away
FLOORS = ("copy_floor", "memcpy_floor")  # our copy kernel; cudaMemcpyAsync device to device: the limit is the faster
PEERS = ("torch_eager", "torch_eager_graph", "torch_compile", "torch_compile_graph")
KNOWN_VARIANTS = STRATEGIES + CONTROLS + FLOORS + PEERS
SHAPE_ORDERS = ("forward", "reverse")
HASHED_DIRS = ("include", "bench")
EXCLUDED_PREFIXES = ("bench/results/", "include/rss/backward/", "include/rss/sharded/", "bench/backward/",
                     "bench/sharded/")


class RecordError(ValueError):
    """A raw record file that does not follow the schema; the message names the file and the field."""


# ---------------------------------------------------------------------------------------------- hashing
def hashed_files(tree):
    """Tree-relative POSIX paths that enter the source hash, in hashing order."""
    paths = []
    for top in HASHED_DIRS:
        for dirpath, dirnames, filenames in os.walk(os.path.join(tree, top)):
            dirnames[:] = [d for d in dirnames if d != "__pycache__"]
            for name in filenames:
                full = os.path.join(dirpath, name)
                rel = os.path.relpath(full, tree).replace(os.sep, "/")
                if name.endswith((".pyc", ".md")) or rel.startswith(EXCLUDED_PREFIXES) or not os.path.isfile(full):
                    continue
                paths.append(rel)
    return sorted(paths)


def source_hash(tree="."):
    """The source hash of include/ and bench/ (definition in the module docstring)."""
    h = hashlib.sha256()
    for rel in hashed_files(tree):
        with open(os.path.join(tree, rel), "rb") as f:
            data = f.read()
        h.update(rel.encode("utf-8") + b"\0" + str(len(data)).encode("ascii") + b"\0" + data)
    return h.hexdigest()


def file_sha256(path):
    with open(path, "rb") as f:
        return hashlib.sha256(f.read()).hexdigest()


# ------------------------------------------------------------------------------------------- validation
def _is_int(v):
    return isinstance(v, int) and not isinstance(v, bool)  # bool is an int subclass in Python


def _is_num(v):
    return (_is_int(v) or isinstance(v, float)) and math.isfinite(v)


def _require(cond, where, msg):
    if not cond:
        raise RecordError(f"{where}: {msg}")


def _check_fields(obj, fields, where):
    _require(isinstance(obj, dict), where, "must be an object")
    for key, check, what in fields:
        _require(key in obj, where, f"missing '{key}'")
        _require(check(obj[key]), where, f"'{key}' must be {what}, got {obj[key]!r}"[:300])


_STR = (lambda v: isinstance(v, str) and v != "", "a non-empty string")
_INT = (_is_int, "an integer")
_POS = (lambda v: _is_int(v) and v > 0, "a positive integer")
_NONNEG = (lambda v: _is_int(v) and v >= 0, "a non-negative integer")
_DICT = (lambda v: isinstance(v, dict), "an object")

CONTEXT_FIELDS = [("gpu", *_STR), ("uuid", *_STR), ("driver", *_STR), ("toolkit", *_STR),
                  ("sm_count", *_POS), ("clocks_start", *_DICT), ("clocks_end", *_DICT),
                  ("source_hash", *_STR), ("config", *_DICT), ("fixture", *_DICT)]
CONFIG_FIELDS = [("rounds", *_POS), ("iterations", *_POS), ("seed", *_INT),
                 ("shape_order", lambda v: v in SHAPE_ORDERS, "'forward' or 'reverse'")]
FIXTURE_FIELDS = [("seed", *_INT), ("generator", *_STR), ("hash", *_STR)]
RECORD_FIELDS = [
    ("rows", *_POS), ("cols", *_POS), ("dtype", lambda v: v in DTYPES, f"one of {DTYPES}"),
    ("variant", *_STR), ("round", *_NONNEG), ("position", *_NONNEG),
    ("host_us", lambda v: isinstance(v, list) and v and all(_is_num(x) and x > 0 for x in v),
     "a non-empty list of positive finite numbers"),
    ("device_us", lambda v: isinstance(v, list) and all(_is_num(x) and x >= 0 for x in v),
     "a list of non-negative finite numbers"),
    ("kernels", *_INT), ("launches", *_INT), ("cooperative", lambda v: isinstance(v, bool), "a boolean"),
    ("active_blocks_per_sm", lambda v: v is None or _is_int(v), "an integer or null"),
    ("logical_bytes", *_INT), ("evicted_tiles", *_NONNEG),
    ("max_rel_err", lambda v: v is None or _is_num(v), "a finite number or null"),
]


def validate(doc, where="records"):
    """Raise RecordError unless doc follows schema rss-records/1; returns doc unchanged."""
    _check_fields(doc, [("schema", lambda v: v == SCHEMA, repr(SCHEMA)), ("producer", *_STR),
                        ("session", *_POS), ("context", *_DICT),
                        ("records", lambda v: isinstance(v, list), "a list")], where)
    _check_fields(doc["context"], CONTEXT_FIELDS, f"{where}: context")
    _check_fields(doc["context"]["config"], CONFIG_FIELDS, f"{where}: context.config")
    _check_fields(doc["context"]["fixture"], FIXTURE_FIELDS, f"{where}: context.fixture")
    seen = set()
    for i, rec in enumerate(doc["records"]):
        rw = f"{where}: records[{i}]"
        _check_fields(rec, RECORD_FIELDS, rw)
        key = (rec["rows"], rec["cols"], rec["dtype"], rec["variant"], rec["round"])
        _require(key not in seen, rw, f"duplicate record for shape/dtype/variant/round {key}")
        seen.add(key)
    return doc


def load(path):
    """Load and validate one raw record file."""
    try:
        with open(path, "r", encoding="utf-8") as f:
            doc = json.load(f)
    except (OSError, ValueError) as e:
        raise RecordError(f"{path}: cannot read JSON: {e}") from e
    return validate(doc, os.path.basename(path))


def load_dir(directory):
    """All *.json raw record files of a directory, sorted by name: [(name, sha256, doc)]."""
    if not os.path.isdir(directory):
        raise RecordError(f"{directory}: no such records directory")
    names = sorted(n for n in os.listdir(directory) if n.endswith(".json"))
    if not names:
        raise RecordError(f"{directory}: no *.json record files")
    return [(n, file_sha256(os.path.join(directory, n)), load(os.path.join(directory, n))) for n in names]


def normalize_uuid(uuid):
    """nvidia-smi writes 'GPU-<uuid>', CUDA/torch the bare uuid: compare them without the prefix."""
    u = uuid.strip().lower()
    return u[4:] if u.startswith("gpu-") else u


# ------------------------------------------------------------------------------------------------- CLI
def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    sub = ap.add_subparsers(dest="cmd", required=True)
    p = sub.add_parser("source-hash", help="print the source hash of include/ and bench/")
    p.add_argument("--tree", default=".")
    p.add_argument("--list", action="store_true", help="also list the hashed files (stderr)")
    p = sub.add_parser("validate", help="validate raw record files")
    p.add_argument("files", nargs="+")
    args = ap.parse_args(argv)
    if args.cmd == "source-hash":
        if args.list:
            print("\n".join(hashed_files(args.tree)), file=sys.stderr)
        print(source_hash(args.tree))
        return 0
    bad = 0
    for path in args.files:
        try:
            doc = load(path)
            print(f"OK {path}: session {doc['session']}, {doc['producer']}, {len(doc['records'])} records")
        except RecordError as e:
            print(f"INVALID {e}", file=sys.stderr)
            bad += 1
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
