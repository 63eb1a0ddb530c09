#!/usr/bin/env python3
"""Tests of the bench's Python tools, on synthetic records in a temporary directory and on the committed results.

    python3 bench/rssbench/test_report.py        (unittest; no GPU, no torch needed)
"""
import hashlib
import importlib
import json
import os
import random
import shutil
import statistics
import subprocess
import sys
import tempfile
import unittest

# numpy is imported by the tests that use it, so that --help works without it.
TOOLS = os.path.dirname(os.path.abspath(__file__))
RESULTS = os.path.join(os.path.dirname(TOOLS), "results")
sys.path.insert(0, TOOLS)
import fixture  # noqa: E402
import records  # noqa: E402
import report  # noqa: E402
import tune  # noqa: E402

SHAPE = (1, 131072, "fp32")
# Hand-checked tiny case: {variant: {session: [host_us samples of round 0, round 1, ...]}}.
TINY = {
    "local_fusion": {1: [[1, 2, 3], [4, 6], [10]], 2: [[3], [9]]},           # rounds 2,5,10 | 3,9
    "megakernel_grid": {1: [[1], [2], [3]], 2: [[1], [1]]},
    "control_no_retention": {1: [[2], [5], [4]], 2: [[3], [4]]},
    "copy_floor": {1: [[2], [2], [2]], 2: [[3], [3]]},
    "memcpy_floor": {1: [[1.5], [1.5], [1.5]], 2: [[2.5], [2.5]]},  # faster: the limit
    "torch_compile_graph": {1: [[4], [4], [4]], 2: [[6], [6]]},
    "torch_eager": {1: [[10], [10], [10]], 2: [[10], [10]]},
}


def record(shape, variant, rnd, host, device=None, kernels=1):
    """One run (round) of a variant, as the bench writes it: every host sample, one device figure."""
    return records.run_entry(
        f"{records.shape_label(*shape)}/round{rnd}/{variant}", [float(h) for h in host],
        statistics.median(host) / 2 if device is None else device, rows=shape[0], cols=shape[1], round=rnd,
        position=0, kernels=kernels, launches=1, cooperative=int(variant.startswith("megakernel")),
        active_blocks_per_sm=1, logical_bytes=2 * shape[0] * shape[1] * 4, evicted_tiles=0, max_rel_err=1e-7)


def document(session, producer, runs, source_hash, rounds=3, uuid=None):
    context = {"schema": records.SCHEMA, "producer": producer, "session": str(session), "gpu": "NVIDIA H200",
               "uuid": uuid or f"GPU-0000000{session}-aaaa", "driver": "570.1", "toolkit": "12.8", "sm_count": "132",
               "clocks_start": {"sm": 1980}, "clocks_end": {}, "source_hash": source_hash, "rounds": str(rounds),
               "iterations": "5", "seed": "7", "shape_order": "forward" if session == 1 else "reverse",
               "fixture_seed": "42", "fixture_generator": fixture.GENERATOR, "fixture_hash": "f" * 64}
    return {"context": context, "benchmarks": runs}


def read(path, mode="r"):
    with open(path, mode) as f:
        return f.read()


def write(path, text):
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "w") as f:
        f.write(text if isinstance(text, str) else json.dumps(text))


def run(command, *args, python=(sys.executable,)):
    p = subprocess.run([*python, TOOLS, command, *args], capture_output=True, text=True)
    return p.returncode, p.stdout + p.stderr


class Workspace(unittest.TestCase):
    """A fake tree with include/ and bench/, and raw records written under bench/results/raw."""

    def setUp(self):
        self.tree = tempfile.mkdtemp(prefix="rss_report_test_")
        write(os.path.join(self.tree, "include/rss/a.hpp"), "#pragma once\n")
        write(os.path.join(self.tree, "bench/b.cpp"), "int main(){}\n")
        self.raw, self.out = os.path.join(self.tree, "bench/results/raw"), os.path.join(self.tree, "bench/results")
        os.makedirs(self.raw)
        self.hash = records.source_hash(self.tree)

    def tearDown(self):
        shutil.rmtree(self.tree)

    def write_sessions(self, runs_of, sessions=(1, 2), **kw):
        """Each session's rss and torch files from runs_of(session) (the torch_ runs go to the torch file)."""
        for s in sessions:
            runs = runs_of(s)
            for producer, torch in (("rss_bench", False), ("torch_peers", True)):
                write(os.path.join(self.raw, f"session{s}_{producer.split('_')[0]}.json"), document(
                    s, producer, [r for r in runs if r["name"].split("/")[-1].startswith("torch_") == torch],
                    self.hash, **kw))

    def write_tiny(self, sessions=(1, 2), uuid=None):
        self.write_sessions(lambda s: [record(SHAPE, v, rnd, host) for v, by_session in TINY.items()
                                       for rnd, host in enumerate(by_session[s])], sessions, uuid=uuid)

    def write_larger(self):
        """Two sessions, two shapes, every known variant plus an unknown one, random samples."""
        rng = random.Random(3)
        variants = report.KNOWN_VARIANTS + ["a_new_strategy"]

        def runs(s):
            out = [record(shape, v, rnd, [10 + variants.index(v) * 3 + rng.random() for _ in range(5)])
                   for shape in ((1, 131072, "fp32"), (8, 131072, "bf16")) for rnd in range(4) for v in variants]
            for r in out:
                if r["name"].endswith("/baseline"):
                    del r["device_us"]
            return out
        self.write_sessions(runs, rounds=4)

    def build(self):
        rc, out = run("report", "build", "--records", self.raw, "--out", self.out)
        self.assertEqual(rc, 0, out)
        return out

    def verify(self):
        return run("report", "verify", "--records", self.raw, "--out", self.out, "--tree", self.tree)

    def load_out(self, name):
        text = read(os.path.join(self.out, name))
        return json.loads(text) if name.endswith(".json") else text

    def save_out(self, name, obj):
        write(os.path.join(self.out, name), report.dump_json(obj) if name.endswith(".json") else obj)

    def edit_raw(self, name, edit):
        doc = json.loads(read(os.path.join(self.raw, name)))
        edit(doc)
        write(os.path.join(self.raw, name), doc)


class AggregateTest(Workspace):
    def test_the_limit_is_the_fastest_floor_and_copy_floor_us_our_fastest_copy_kernel(self):
        self.write_sessions(lambda s: [record(SHAPE, v, rnd, host) for v, by_session in {
            **TINY, "bulk_copy_floor": {1: [[1.0]] * 3, 2: [[1.0]] * 2},
            "blocked_copy_floor": {1: [[1.8]] * 3, 2: [[1.8]] * 2}}.items() for rnd, host in enumerate(by_session[s])])
        (best,) = report.compute(self.raw)[0]["best_per_shape"]
        self.assertEqual((best["limit_variant"], best["limit_us"]), ("bulk_copy_floor", 1.0))
        self.assertEqual((best["copy_floor_variant"], best["copy_floor_us"], best["memcpy_floor_us"]),
                         ("bulk_copy_floor", 1.0, 2.0))

    def test_hand_computed_aggregates(self):
        import numpy as np
        self.write_tiny()
        summary, markdown, prov = report.compute(self.raw)
        res = {r["variant"]: r for r in summary["results"]}
        lf = res["local_fusion"]
        self.assertEqual(lf["host_us_sessions"], [5.0, 6.0])
        self.assertAlmostEqual(lf["host_us"], 5.5)
        for got, want in zip(lf["p10_p90_sessions"], [[2.6, 9.0], [3.6, 8.4]]):  # linear percentiles
            np.testing.assert_allclose(got, want)
        for value, want in ((lf["device_us"], 2.75), (res["copy_floor"]["host_us"], 2.5),
                            (res["memcpy_floor"]["host_us"], 2.0), (lf["ratio_to_limit"], 5.5 / 2.0),  # faster floor
                            (lf["ratio_to_fastest_peer"], 5.5 / 5.0)):
            self.assertAlmostEqual(value, want)
        self.assertEqual(lf["fastest_peer"], "torch_compile_graph")
        (delta,) = summary["retention_deltas"]  # deltas S1: 1,3,1 -> 1; S2: 2,3 -> 2.5
        self.assertEqual((delta["delta_us_sessions"], delta["pairs_sessions"]), ([1.0, 2.5], [3, 2]))
        self.assertAlmostEqual(delta["delta_us"], 1.75)
        (best,) = summary["best_per_shape"]
        self.assertEqual(best["best_rss_variant"], "megakernel_grid")
        self.assertEqual((best["limit_variant"], best["limit_us"], best["copy_floor_us"]), ("memcpy_floor", 2.0, 2.5))
        for key, want in (("host_us", 1.5), ("ratio_to_limit", 0.75), ("limit_target_us", 5.0)):  # < 20 us: + 3 us
            self.assertAlmostEqual(best[key], want)
        self.assertTrue(best["within_limit_target"] and best["beats_torch_compile_graph"])
        self.assertIsNone(best["automatic_within_3pct"])  # no automatic records: not checked, so not met
        self.assertFalse(best["targets_met"])
        self.assertIn("- 1 x 131072 fp32: automatic (no records)", markdown)
        (panel,) = prov["figures"]["bars.png"]["panels"]
        self.assertAlmostEqual(panel["annotation"]["speedup"], 5.5 / 1.5)
        self.assertEqual(next(b for b in panel["bars"] if b["variant"] == "local_fusion")["whisker"], [5.0, 6.0])
        self.assertGreaterEqual(panel["fill"], 0.75)
        self.assertEqual([b["variant"] for b in panel["bars"]],  # controls go to controls.png only
                         ["local_fusion", "megakernel_grid", "copy_floor", "memcpy_floor", "torch_eager",
                          "torch_compile_graph"])
        self.assertEqual(prov["figures"]["controls.png"]["panels"][0]["points"][0]["range"], [1.0, 2.5])
        # 2 x 131072 x 4 bytes in 1.5 us: 0.70 TB/s, 15% of the H200's 4.8.
        self.assertIn("| 1 x 131072 | fp32 | megakernel_grid | 1.50 | 0.70 (15%) | 2.50 | 2.00 | 2.00 | 0.750x | 5.00 |",
                      markdown)
        for keys, obj in ((("sessions", "results", "retention_deltas", "best_per_shape"), summary),
                          (("rows", "cols", "dtype", "variant", "host_us", "host_us_sessions", "device_us", "kernels",
                            "launches", "ratio_to_limit"), lf),
                          (("gpu", "uuid", "source_hash"), summary["sessions"][0])):
            self.assertTrue(set(keys) <= set(obj), keys)

    def test_single_session_is_reported(self):
        self.write_tiny(sessions=(1,))
        self.build()
        rc, out = self.verify()
        self.assertEqual(rc, 0, out)
        self.assertIn("Only 1 session", self.load_out("results.md"))

    def test_limit_targets_and_automatic(self):
        """Per pair: 1.15x of the limit from 20 us on, limit + 3 us below; automatic within 3% of the best."""
        for limit, target in ((100.0, 115.0), (20.0, 23.0), (19.0, 22.0)):
            self.assertAlmostEqual(report.limit_target(limit), target)
        cases = {  # shape: {variant: host us}
            (4096, 4096, "fp32"): {"copy_floor": 40, "memcpy_floor": 44, "cluster_row": 45, "automatic": 46,
                                   "torch_compile_graph": 50},  # 45 <= 46: met; automatic 1.022x: met
            (1, 131072, "bf16"): {"copy_floor": 10, "memcpy_floor": 12, "cluster_row": 13.5, "automatic": 14,
                                  "torch_compile_graph": 13},  # 13.5 <= 13: no; slower than compile; auto 1.037x
            (16384, 8192, "fp16"): {"copy_floor": 150, "memcpy_floor": 140, "block_row": 170, "automatic": 170,
                                    "torch_compile_graph": 200}}  # limit memcpy 140, target 161: missed
        self.write_sessions(lambda s: [record(shape, v, 0, [t]) for shape, by_v in cases.items()
                                       for v, t in by_v.items()], rounds=1)
        summary, markdown, _ = report.compute(self.raw)
        best = {(b["rows"], b["cols"], b["dtype"]): b for b in summary["best_per_shape"]}
        b = best[(4096, 4096, "fp32")]
        self.assertEqual((b["best_rss_variant"], b["limit_variant"], b["limit_target_us"]),
                         ("cluster_row", "copy_floor", 46.0))
        self.assertTrue(b["within_limit_target"] and b["beats_torch_compile_graph"] and b["automatic_within_3pct"])
        self.assertTrue(b["targets_met"])
        b = best[(1, 131072, "bf16")]
        self.assertEqual((b["within_limit_target"], b["beats_torch_compile_graph"], b["automatic_within_3pct"]),
                         (False, False, False))
        self.assertIn("1 x 131072 bf16: automatic is 1.037x the best strategy", markdown)
        self.assertIn("1 x 131072 bf16: not faster than torch.compile with CUDA Graph replay (13.50 vs 13.00 us)",
                      markdown)
        b = best[(16384, 8192, "fp16")]
        self.assertEqual((b["limit_variant"], b["limit_us"]), ("memcpy_floor", 140.0))
        self.assertAlmostEqual(b["limit_target_us"], 161.0)
        self.assertFalse(b["within_limit_target"])
        self.assertEqual(b["best_rss_variant"], "automatic")  # a tie goes to the first name; automatic counts
        self.assertIn("16384 x 8192 fp16: best strategy automatic takes 170.00 us, 1.214x the limit "
                      "(memcpy_floor 140.00 us); target 161.00 us", markdown)
        # Floors, controls and peers are never the best strategy; block_row and cluster_row are strategies.
        self.assertEqual([v for v in report.KNOWN_VARIANTS if report.kind(v) == "strategy"], list(records.STRATEGIES))

    def test_sessions_on_one_gpu_fail_verify(self):
        self.write_tiny(uuid="GPU-d2c7b736-0000")
        self.build()
        rc, out = self.verify()
        self.assertEqual(rc, 1, out)
        self.assertIn("sessions on one GPU", out)
        self.assertIn("distinct uuids: no", self.load_out("results.md"))
        self.write_tiny()  # distinct GPUs: the same records pass
        self.build()
        self.assertEqual(self.verify()[0], 0)

    def test_quick_protocol_and_inconsistent_metadata_are_labelled(self):
        self.write_tiny()
        self.edit_raw("session1_rss.json", lambda doc: doc["context"].update(protocol="quick"))
        self.edit_raw("session2_rss.json", lambda doc: doc["benchmarks"][0].update(kernels=0))
        summary, markdown, _ = report.compute(self.raw)
        self.assertIn("**Quick protocol** (session(s) 1)", markdown)
        self.assertTrue(any("'kernels' differs" in w for w in summary["warnings"]))
        self.assertIn("## Warnings", markdown)


class VerifyTest(Workspace):
    def setUp(self):
        super().setUp()
        self.write_larger()
        self.build()

    def assertFails(self, *needles):
        rc, out = self.verify()
        self.assertEqual(rc, 1, out)
        for n in ("FAIL",) + needles:
            self.assertIn(n, out)

    def test_build_then_verify_passes(self):
        rc, out = self.verify()
        self.assertEqual(rc, 0, out)
        self.assertTrue(out.startswith("PASS"), out)
        for name in report.OUTPUTS:
            self.assertTrue(os.path.isfile(os.path.join(self.out, name)), name)
        panels = self.load_out("provenance.json")["figures"]["bars.png"]["panels"]
        self.assertEqual(len(panels), 2)
        self.assertTrue(all(p["annotation"] for p in panels))

    def test_every_summary_number_is_checked(self):
        """Perturb numbers of summary.json in turn: verify must catch every one."""
        original = self.load_out("summary.json")
        summary = json.loads(json.dumps(original))
        summary["results"][3]["host_us"] *= 1.0001
        self.save_out("summary.json", summary)
        self.assertFails("summary.json.results[3]", "host_us")
        paths = []

        def walk(obj, path):
            for k, v in obj.items() if isinstance(obj, dict) else enumerate(obj) if isinstance(obj, list) else []:
                if isinstance(v, float):
                    paths.append(path + [k])
                walk(v, path + [k])
        walk(original, [])
        self.assertGreater(len(paths), 100)
        for path in random.Random(5).sample(paths, 12):
            edited = json.loads(json.dumps(original))
            obj = edited
            for k in path[:-1]:
                obj = obj[k]
            obj[path[-1]] = obj[path[-1]] * (1 + 1e-6) + 1e-9
            self.save_out("summary.json", edited)
            self.assertEqual(self.verify()[0], 1, path)
        self.save_out("summary.json", original)
        self.assertEqual(self.verify()[0], 0)

    def test_edited_outputs_and_inputs_fail(self):
        md = self.load_out("results.md")
        line = next(line for line in md.splitlines() if line.startswith("| 1 x 131072 | fp32 | local_fusion"))
        self.save_out("results.md", md.replace(line, line.replace(line.split(" | ")[3], "99.99", 1)))
        self.assertFails("results.md differs", "99.99")
        self.save_out("results.md", md)
        prov = self.load_out("provenance.json")
        prov["figures"]["controls.png"]["panels"][0]["points"][0]["value"] += 0.5
        self.save_out("provenance.json", prov)
        self.assertFails("provenance.json.figures.controls.png.panels[0]")
        prov["figures"]["controls.png"]["panels"][0]["points"][0]["value"] -= 0.5
        self.save_out("provenance.json", prov)
        with open(os.path.join(self.tree, "include/rss/a.hpp"), "a") as f:
            f.write("// changed after measuring\n")
        self.assertFails("source hash", "session1_rss.json")
        with open(os.path.join(self.raw, "session2_torch.json"), "a") as f:
            f.write("\n")  # same numbers, different bytes: provenance must notice
        self.assertFails("raw_files[3] (session2_torch.json).sha256")
        os.remove(os.path.join(self.out, "controls.png"))
        self.assertFails("controls.png: missing")

    def test_invalid_record_is_named(self):
        def edit(doc):
            entry = doc["benchmarks"][2]
            for key in [k for k in entry if k.startswith("host_us/")]:
                del entry[key]
            entry["real_time"] = 0
        self.edit_raw("session1_rss.json", edit)
        rc, out = run("report", "build", "--records", self.raw, "--out", self.out)
        self.assertEqual(rc, 2)
        self.assertIn("session1_rss.json: benchmarks[2]: 'host_us'", out)


class CommandLineTest(unittest.TestCase):
    def test_help_describes_and_defaults_follow_the_script(self):
        rc, out = run("report", "--help")
        self.assertEqual(rc, 0, out)
        self.assertIn("docs/protocol.md", out)
        self.assertIn("verify", out)
        rc, out = run("report", "verify", "--help")
        self.assertEqual(rc, 0, out)
        self.assertIn("distinct", out)
        self.assertTrue(os.path.isfile(os.path.join(report.TREE, "bench", "rssbench", "report.py")))
        # From another directory the defaults still name this repository's records.
        p = subprocess.run([sys.executable, TOOLS, "report", "verify", "--records",
                            os.path.join(tempfile.gettempdir(), "no-such-records-dir")],
                           capture_output=True, text=True, cwd=tempfile.gettempdir())
        self.assertEqual(p.returncode, 1)
        self.assertIn("no-such-records-dir", p.stdout + p.stderr)

    def test_every_tool_helps_without_third_party_packages(self):
        # python -S leaves site-packages off the path: no numpy, matplotlib or torch, as on a fresh machine.
        rc, out = run("--help", python=(sys.executable, "-S"))
        self.assertEqual(rc, 0, out)
        commands = out.split("{", 1)[1].split("}", 1)[0].split(",")
        self.assertIn("report", commands)
        for command in commands:
            for args in [["--help"]] + ([["--suite", s, "--help"] for s in ("backward", "sharded")]
                                        if command == "peers" else []):
                rc, out = run(command, *args, python=(sys.executable, "-S"))
                self.assertEqual(rc, 0, f"{command}: {out}")
                self.assertIn("usage:", out, command)
        rc, out = run("report", "build", "--help", python=(sys.executable, "-S"))
        self.assertIn("--suite {forward,backward,sharded}", out)


class SourceHashTest(Workspace):
    def test_definition_and_exclusions(self):
        h = hashlib.sha256()
        for rel in ("bench/b.cpp", "include/rss/a.hpp"):  # sorted by path
            data = read(os.path.join(self.tree, rel), "rb")
            h.update(rel.encode() + b"\0" + str(len(data)).encode() + b"\0" + data)
        self.assertEqual(self.hash, h.hexdigest())
        for rel in ("bench/results/x.json", "bench/rssbench/__pycache__/m.cpython-311.pyc", "bench/rssbench/n.pyc",
                    "bench/NOTES.md", "src/other.cpp", "bench/backward/x.py", "bench/sharded/y.py"):
            write(os.path.join(self.tree, rel), "ignored")
        self.assertEqual(records.source_hash(self.tree), self.hash)
        write(os.path.join(self.tree, "bench/new.py"), "")  # an empty file still counts
        self.assertNotEqual(records.source_hash(self.tree), self.hash)


class FixtureTest(unittest.TestCase):
    def test_splitmix64_outputs_and_the_scalar_reference(self):
        import numpy as np
        # First outputs of the standard splitmix64 generator for states 0 and 1234567.
        self.assertEqual(int(fixture.splitmix64(np.uint64(0))), 0xE220A8397B1DCDAF)
        self.assertEqual(int(fixture.splitmix64(np.uint64(1234567))), 6457827717110365317)
        seed, m = (1 << 64) - 3, (1 << 64) - 1  # seed + k wraps around 2^64
        for i, v in enumerate(fixture.generate(seed, 64, start=1000)):  # the spec written out once more
            z = (seed + 1000 + i + 0x9E3779B97F4A7C15) & m
            z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & m
            z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & m
            self.assertEqual(v, np.float32(8.0 * (((z ^ (z >> 31)) >> 40) / 2.0**24) - 4.0))
        self.assertEqual(fixture.generate(42, 8, 4).tolist(), fixture.generate(42, 12)[4:].tolist())
        x = fixture.matrix(42, 3, 5)
        self.assertEqual(x[2, 1], fixture.generate(42, 1, 11)[0])
        self.assertTrue(((x >= -4) & (x < 4)).all())

    def test_hash_and_the_committed_sessions_fixture(self):
        want = hashlib.sha256(fixture.generate(42, 1 << 20).astype("<f4").tobytes()).hexdigest()
        self.assertEqual(fixture.describe(42)["hash"], want)
        # The committed session's context: the C++ generator's first elements (bits) and the hash it was given.
        ctx = json.loads(read(os.path.join(RESULTS, "raw", "session1_rss.json")))["context"]
        self.assertEqual((ctx["fixture_seed"], ctx["fixture_hash"]), ("42", want))
        first = " ".join("0x%08x" % v for v in fixture.generate(42, 8).view("<u4"))
        self.assertEqual(ctx["fixture_first_elements"], first)


class PeersTest(unittest.TestCase):
    def test_imports_without_torch_exits_3_and_checks_its_options(self):
        peers = importlib.import_module("peers")  # must not need torch at import time
        self.assertEqual(len(peers.SUITES["backward"][1]), 11)
        out_file = os.path.join(tempfile.gettempdir(), "x.json")
        for suite in ("forward", "backward", "sharded"):
            rc, out = run("peers", "--suite", suite, "--variants", "bogus", "--out", out_file)
            self.assertEqual(rc, 2, out)
            self.assertIn("--variants within", out)
        try:
            import torch  # noqa: F401
            if torch.cuda.is_available():
                self.skipTest("torch with CUDA is present")
        except ImportError:
            pass
        for suite in ("forward", "backward", "sharded"):
            rc, out = run("peers", "--suite", suite, "--out", out_file)
            self.assertEqual(rc, 3, out)
            self.assertIn("torch", out)


def suite_document(suite, producer, runs, **context):
    """A one-session suite's record file (backward, sharded), as its C++ bench or peer writes it."""
    ctx = {"schema": records.SCHEMA, "producer": producer, "suite": suite, "session": "1", "gpu": "NVIDIA H200",
           "uuid": "GPU-a,GPU-b", "driver": "cuda 13.0", "toolkit": "13.0", "sm_count": "132", "rounds": "3",
           "iterations": "4", "warmup": "2", "seed": "1", "shape_order": "forward", **context}
    return {"context": ctx, "benchmarks": runs}


def suite_run(shape, variant, rnd, host, label="", **counters):
    return dict(records.run_entry(f"{records.shape_label(*shape)}/round{rnd}/{variant}", [float(h) for h in host],
                                  None, rows=shape[0], cols=shape[1], round=rnd, **counters), label=label)


def error_run(shape, variant, message, **fields):
    return {"name": f"{records.shape_label(*shape)}/{variant}", "run_type": "iteration", "error_occurred": True,
            "error_message": message, **fields}


class SuiteReportTest(unittest.TestCase):
    """report --suite backward|sharded: every number from the records, verify re-renders and compares."""

    def setUp(self):
        self.tmp = tempfile.mkdtemp(prefix="rss_suite_test_")
        self.raw = os.path.join(self.tmp, "raw")

    def tearDown(self):
        shutil.rmtree(self.tmp)

    def report(self, command, suite):
        return run("report", command, "--suite", suite, "--records", self.raw, "--out", self.tmp)

    def test_backward_targets_from_round_medians(self):
        shape = (32, 128256, "fp32")
        host = {"cluster_row": [[30, 31, 90], [32], [29]], "floor": [[25], [26], [24]], "automatic": [[33], [33], [33]],
                "cluster_row_saved": [[28], [27], [29]], "floor_saved": [[20], [20], [21]],
                "cluster_row_saved:256x16x8": [[30], [30], [30]]}
        write(os.path.join(self.raw, "rss_backward.json"), suite_document("backward", "rss_backward_bench", [
            suite_run(shape, v, rnd, h, label=v, max_rel_err=1e-7) for v, rounds in host.items()
            for rnd, h in enumerate(rounds)] + [error_run(shape, "cluster_row:512x8x8", "not used for this row")]))
        write(os.path.join(self.raw, "peers.json"), suite_document("backward", "backward_torch_peers", [
            suite_run(shape, "torch_compile_bwd_graph", rnd, [40]) for rnd in range(3)], torch="2.11"))
        rc, out = self.report("build", "backward")
        self.assertEqual(rc, 0, out)
        summary = json.loads(read(os.path.join(self.tmp, "summary.json")))
        best = summary["best_per_shape"][0]
        # cluster_row's round medians 31, 32, 29 -> 31 (the 90 us outlier moves nothing); saved: 28 against 20.
        self.assertEqual((best["y_host_us"], best["floor_y_us"], best["saved_host_us"]), (31.0, 25.0, 28.0))
        self.assertEqual((best["best_rss_variant"], best["ratio_to_floor"]), ("cluster_row_saved", 28.0 / 20.0))
        self.assertTrue(best["beats_torch_compile_bwd_graph"])
        self.assertFalse(best["within_1_25x_of_floor"])  # 1.4x of a floor of 20 us
        rows = {r["variant"]: r for r in summary["results"]}
        self.assertEqual(rows["cluster_row:512x8x8"]["error"], "not used for this row")
        self.assertEqual((rows["cluster_row"]["samples"], rows["cluster_row"]["rounds"]), (5, 3))
        self.assertEqual(rows["cluster_row_saved:256x16x8"]["ratio_to_floor"], 30.0 / 20.0)  # a pilot candidate
        self.assertIn("| 32 x 128256 | fp32 | cluster_row:512x8x8 | error: not used for this row |",
                      read(os.path.join(self.tmp, "results.md")))
        self.assertEqual(self.report("verify", "backward")[0], 0)
        with open(os.path.join(self.tmp, "results.md"), "a") as f:
            f.write("edited\n")
        rc, out = self.report("verify", "backward")
        self.assertEqual(rc, 1, out)
        self.assertIn("results.md differs", out)

    def test_sharded_single_gpu_is_the_fastest_accurate_candidate(self):
        shape = (64, 131072, "fp32")
        runs = [suite_run(shape, v, rnd, [us], label="ran " + v.split(":")[-1], max_rel_err=err, world=w)
                for v, us, err, w in (("single_gpu:cluster_row", 30, 1e-7, 1), ("single_gpu:megakernel_grid", 20, 1e-3, 1),
                                      ("single_gpu:local_fusion", 40, 1e-7, 1), ("nccl_host", 25, 1e-7, 2))
                for rnd in range(3)]
        runs.append(error_run(shape, "nccl_device", "refused", world=2))
        write(os.path.join(self.raw, "sharded_records.json"),
              suite_document("sharded", "rss_sharded_bench", runs, world="2", gpus="NVIDIA H200,NVIDIA H200"))
        rc, out = self.report("build", "sharded")
        self.assertEqual(rc, 0, out)
        rows = {r["variant"]: r for r in json.loads(read(os.path.join(self.tmp, "summary.json")))["rows"]}
        self.assertEqual(rows["single_gpu"]["host_us"], 30.0)  # megakernel_grid is faster but out of tolerance
        self.assertEqual((rows["nccl_host"]["uuids"], rows["single_gpu"]["uuids"]), (["GPU-a", "GPU-b"], ["GPU-a"]))
        self.assertEqual((rows["nccl_device"]["status"], rows["nccl_device"]["world"]), ("refused", 2))
        md = read(os.path.join(self.tmp, "report.md"))
        self.assertIn("| 64 x 131072 | fp32 | 30.00 (cluster_row) | 25.00 | refused | – |", md)
        self.assertIn("nccl_device – < nccl_host 25.00 < torch_distributed –: missed", md)
        self.assertEqual(self.report("verify", "sharded")[0], 0)

    def test_committed_sharded_records_read_and_verify(self):
        d = os.path.join(RESULTS, "sharded", "raw")
        if not os.path.isfile(os.path.join(d, "sharded_records.json")):
            self.skipTest("no committed sharded run")
        doc = records.load(os.path.join(d, "sharded_records.json"), complete=False)
        self.assertEqual((doc["suite"], doc["context"]["config"]["world"]), ("sharded", "2"))
        self.assertTrue(all(e["world"] in (1, 2) and e["rows"] for e in doc["errors"]))
        self.assertEqual({r["world"] for r in doc["records"]}, {1, 2})
        rc, out = run("report", "verify", "--suite", "sharded")
        self.assertEqual(rc, 0, out)


class SummaryTest(unittest.TestCase):
    def test_ab_summary(self):
        with tempfile.TemporaryDirectory() as tmp:
            for tree, us in (("old", 10.0), ("new", 9.0)):
                write(os.path.join(tmp, f"forward_{tree}_1.json"), {"benchmarks": [
                    {"name": "1x8/a", "run_type": "iteration", "real_time": us * 1000, "time_unit": "ns"},
                    {"name": "1x8/a_mean", "run_type": "aggregate", "real_time": 1}]})
            rc, out = run("ab", tmp)
            self.assertEqual(rc, 0, out)
            self.assertIn("| 1x8/a | 10.00 (0.0%) | 9.00 (0.0%) | 0.900 | faster |", out)


class SessionTest(unittest.TestCase):
    def test_presets_estimates_and_gpus(self):
        import session
        self.assertEqual((session.PRESETS["quick"]["sessions"], session.PRESETS["full"]["sessions"]), ([1], [1, 2]))
        # Fitted so that one session of 3 x 10 over 20 pairs takes the measured 157 s.
        self.assertAlmostEqual(session.estimate_seconds(1, 20, 3, 10), 156.0)
        # The preset gives the defaults; an option given wins wherever it stands.
        args = session.parse_args(session.parser(), ["--rounds", "4", "--protocol", "full"])
        self.assertEqual((args.rounds, args.iterations, args.sessions, args.peers), (4, 30, [1, 2], "auto"))
        # Each session on its own GPU when there are several; a CUDA_VISIBLE_DEVICES pin wins.
        self.assertEqual(session.session_gpus([1, 2], ["GPU-a", "GPU-b"], None), {1: "GPU-a", 2: "GPU-b"})
        self.assertEqual(session.session_gpus([1, 2], ["GPU-a"], None), {1: None, 2: None})
        self.assertEqual(session.session_gpus([2], ["GPU-a", "GPU-b"], "GPU-z"), {2: "GPU-z"})
        self.assertEqual(session.session_gpus([1], [], "0"), {1: None})
        rc, out = run("session", "--help")
        self.assertEqual(rc, 0, out)
        for needle in ("quick", "full", "docs/protocol.md"):
            self.assertIn(needle, out)

    def test_bench_sh_options_are_judged_before_the_build(self):
        sh = os.path.join(os.path.dirname(os.path.dirname(TOOLS)), "scripts", "bench.sh")
        p = subprocess.run(["bash", sh, "--help"], capture_output=True, text=True)
        self.assertEqual(p.returncode, 0, p.stderr)
        for needle in ("--full", "--quick", "RSS_BUILD_DIR", "--shapes", "--rounds"):
            self.assertIn(needle, p.stdout)
        self.assertNotIn("--build", p.stdout)  # bench.sh builds; RSS_BUILD_DIR names the folder
        for args, needle in ((["--bogus"], "unrecognized arguments: --bogus"), (["--full", "--rounds", "0"], ">= 1"),
                             (["--build", "x"], "RSS_BUILD_DIR"), (["--shapes", "4096x4096:bf16"], "bad shape"),
                             (["--shapes", "0x8"], "bad shape"), (["--dtypes", "fp64"], "unknown storage type")):
            p = subprocess.run(["bash", sh, *args], capture_output=True, text=True)
            self.assertEqual(p.returncode, 2, p.stderr)
            self.assertIn(needle, p.stderr)
            self.assertNotIn("GPU", p.stderr)

    def test_every_shell_script_answers_help(self):
        # -h/--help prints the script's header, exit 0, and does nothing else: no argument taken as a folder.
        root = os.path.dirname(os.path.dirname(TOOLS))
        scripts = sorted(os.path.relpath(os.path.join(d, f), root) for top in ("scripts", "tests", "bench", "python")
                         for d, _, files in os.walk(os.path.join(root, top)) for f in files if f.endswith(".sh"))
        self.assertIn(os.path.join("scripts", "setup.sh"), scripts)
        for sh in scripts:
            with tempfile.TemporaryDirectory() as cwd:
                p = subprocess.run(["bash", os.path.join(root, sh), "--help"], capture_output=True, text=True,
                                   cwd=cwd, timeout=60)
                self.assertEqual((p.returncode, p.stderr), (0, ""), sh)
                self.assertGreater(len(p.stdout.splitlines()), 1, sh)
                self.assertEqual(os.listdir(cwd), [], sh)


class TuneTest(unittest.TestCase):
    """tune: an entry only for a clear, consistent win over the heuristic; a header that compiles."""

    def pilot(self, path, by_variant):
        runs = [record((4, 8192, "fp32"), v, rnd, samples)
                for v, rounds in by_variant.items() for rnd, samples in enumerate(rounds)]
        write(path, document(1, "rss_bench", runs, ""))

    def decide(self, by_variant):
        with tempfile.TemporaryDirectory() as d:
            self.pilot(os.path.join(d, "pilot.json"), by_variant)
            return tune.decide(tune.timings([os.path.join(d, "pilot.json")]), 0.03)

    def test_a_consistent_win_becomes_an_entry_with_its_residence(self):
        heuristic = [[100, 101], [100, 102]]
        for candidates, want, parts in (
                ({"cluster_row:256x32x1": [[90, 91], [92, 90]], "copy_floor": [[50], [50]]}, "cluster_row:256x32x1",
                 ("DType::fp32, 4, 4, 8192, 8192", "{Strategy::cluster_row, {256, 32, 1, RowResidence::registers}}")),
                ({"cluster_row:256x64x4s": [[80, 81], [80, 82]]}, "cluster_row:256x64x4s",
                 ("{Strategy::cluster_row, {256, 64, 4, RowResidence::shared_memory}}",)),
                ({"cluster_row:512x64x1p": [[80, 81], [80, 82]], "cluster_row:512x64x1s": [[85, 86], [85, 86]]},
                 "cluster_row:512x64x1p",
                 ("{Strategy::cluster_row, {512, 64, 1, RowResidence::shared_memory_pipelined}}",))):
            entries, lines = self.decide({"heuristic": heuristic, **candidates})
            self.assertEqual([e[3] for e in entries], [want])
            self.assertIn("entry", lines[0])
            text = tune.header(entries, "NVIDIA H200", "h200", ["pilot.json"])
            entry = next(line for line in text.splitlines() if "Strategy::" in line)
            for part in parts:
                self.assertIn(part, entry)
            self.assertIn("h200_entry_count = 1;", text)
        entries, _ = self.decide({"heuristic": heuristic, "cluster_row:256x32x1": [[90, 91], [92, 90]]})
        self.assertEqual(entries[0][4], 90.5)
        self.assertEqual(tune.parse_variant("cluster_row:512x32x8"), ("cluster_row", (512, 32, 8, "registers")))
        for bad in ("cluster_row:512x32xs8", "cluster_row:512x32x1q", "cluster_row:512x32x1ps"):
            with self.assertRaises(tune.TuneError):
                tune.parse_variant(bad)

    def test_a_newer_pilot_supersedes_an_older_one_on_the_shapes_it_measured(self):
        with tempfile.TemporaryDirectory() as d:
            old, new = os.path.join(d, "h200_pilot7a.json"), os.path.join(d, "h200_pilot8a.json")
            self.pilot(old, {"heuristic": [[100], [100]], "cluster_row:256x32x1": [[80], [80]]})
            self.pilot(new, {"heuristic": [[100], [100]], "long_row": [[70], [70]]})
            entries, _ = tune.decide(tune.timings([old, new]), 0.03)
            self.assertEqual([e[3] for e in entries], ["long_row"])  # pilot 7's candidate no longer counts
            self.assertEqual(tune.pilot_number(old), 7)

    def test_no_entry_within_the_margin_in_some_rounds_or_for_a_floor(self):
        for by_variant, line in (({"megakernel_grid": [[98], [98]]}, "within the margin"),
                                 ({"megakernel_grid": [[90], [101]]}, "noise"),
                                 ({"copy_floor": [[50], [50]], "memcpy_floor": [[40], [40]]}, "no candidate")):
            entries, lines = self.decide({"heuristic": [[100], [100 if line != "noise" else 120]], **by_variant})
            self.assertEqual(entries, [])
            self.assertIn(line, lines[0])
        self.assertIn("h200_entry_count = 0;", tune.header([], "NVIDIA H200", "h200", ["pilot.json"]))

    def test_command_line_errors_are_one_line_and_diagnostics_go_to_stderr(self):
        with tempfile.TemporaryDirectory() as d:
            path = os.path.join(d, "pilot.json")
            self.pilot(path, {"heuristic": [[100, 101], [100, 102]], "cluster_row:256x32x1": [[90, 91], [92, 90]]})
            p = subprocess.run([sys.executable, TOOLS, "tune", path, "--name", "h200"],
                               capture_output=True, text=True)
            self.assertEqual(p.returncode, 0, p.stderr)
            self.assertTrue(p.stdout.startswith("#pragma once"), p.stdout)  # stdout: the header only
            self.assertIn("on the NVIDIA H200", p.stdout)  # the records' GPU when --device is not given
            self.assertIn("4x8192 fp32: best cluster_row:256x32x1", p.stderr)
            for args, needle in (([path, "--device", "NVIDIA H100"], "does not match the records"),
                                 ([os.path.join(d, "missing.json")], "cannot read"),
                                 ([path, "--name", "not an identifier"], "not a C++ identifier")):
                rc, out = run("tune", *args, *(["--name", "h200"] if "--name" not in args else []))
                self.assertEqual(rc, 2, out)
                self.assertIn(needle, out)
                self.assertNotIn("Traceback", out)
                self.assertEqual(len(out.strip().splitlines()), 1, out)


if __name__ == "__main__":
    result = unittest.main(verbosity=2, exit=False).result
    failed = len(result.failures) + len(result.errors) + len(result.unexpectedSuccesses)
    skipped = len(result.skipped)
    # The plain closing line that CI reads, whatever the runner.
    print(f"{result.testsRun - failed - skipped} passed, {failed} failed" + (f", {skipped} skipped" if skipped else ""))
    sys.exit(1 if failed else 0)
