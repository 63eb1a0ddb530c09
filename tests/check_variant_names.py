#!/usr/bin/env python3
"""The variant names the C++ side uses and the ones the Python tools know must agree: the strategy names of
include/rss/strategy.hpp (in order) are records.STRATEGIES, and every name bench/variants.cuh registers
outside the pilot's cluster_row:* candidates is a known variant or automatic_one_call (reported as an rss
variant after the known ones). Usage: check_variant_names.py SOURCE_DIR"""
import os
import re
import sys

if sys.argv[1:2] in (["-h"], ["--help"]):
    sys.exit(print(__doc__))
src = sys.argv[1] if len(sys.argv) > 1 else os.path.join(os.path.dirname(__file__), "..")
sys.path.insert(0, os.path.join(src, "bench", "rssbench"))
import records  # noqa: E402

header = open(os.path.join(src, "include", "rss", "strategy.hpp")).read()
table = re.search(r"strategy_names\[\]\s*=\s*\{(.*?)\};", header, re.S)
cpp_strategies = tuple(re.findall(r'"([a-z_]+)"', table.group(1)))
failures = []
if cpp_strategies != records.STRATEGIES:
    failures.append("strategy.hpp names %s differ from records.STRATEGIES %s" % (cpp_strategies, records.STRATEGIES))

variants = open(os.path.join(src, "bench", "variants.cuh")).read()
registered = set(re.findall(r'config_variant\("([a-z_]+)"', variants)) | set(re.findall(r'\{"([a-z_]+)", \[', variants))
registered |= set(re.findall(r'return \{"([a-z_]+)", \[', variants))
registered |= set(re.findall(r'floor_variant\("([a-z_]+)"', variants))
unknown = sorted(registered - set(records.KNOWN_VARIANTS) - {"automatic_one_call", "heuristic"})
if unknown:
    failures.append("bench/variants.cuh registers names the Python tools do not know: %s" % unknown)
for name in records.CONTROLS + records.FLOORS:
    if name not in registered:
        failures.append("records.py knows %s, which bench/variants.cuh does not register" % name)
if failures:
    print("\n".join(failures), file=sys.stderr)
    sys.exit(1)
print("variant names agree: %d strategies, %d more bench variants" % (len(cpp_strategies), len(registered)))
