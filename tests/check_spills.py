#!/usr/bin/env python3
"""Fails when a build log (CMake with -DRSS_REPORT_SPILLS=ON, so ptxas warns about spills) shows a kernel spilling
registers that tests/spills_allowed.txt does not allow; lists the allowed spills it saw. Exit 0: none outside the list.

    python3 tests/check_spills.py BUILD_LOG [ALLOWED]     (ALLOWED: default tests/spills_allowed.txt)
    python3 tests/check_spills.py --self-test
"""
import os
import re
import sys

WARNING = re.compile(r"Registers are spilled to local memory in function '([^']+)', (\d+) bytes spill stores")
HERE = os.path.dirname(os.path.abspath(__file__))


def allowed_patterns(path):
    patterns = []
    with open(path) as f:
        for line in f:
            line = line.split(" # ", 1)[0].strip()
            if line and not line.startswith("#"):
                patterns.append(re.compile(line))
    return patterns


def spills(log_text):
    """{kernel: largest spill store bytes} over every ptxas spill warning of the log."""
    found = {}
    for name, stores in WARNING.findall(log_text):
        found[name] = max(found.get(name, 0), int(stores))
    return found


def check(log_text, patterns):
    """(spills outside the list, allowed spills)."""
    found = spills(log_text)
    bad = {k: v for k, v in found.items() if not any(p.search(k) for p in patterns)}
    return bad, {k: v for k, v in found.items() if k not in bad}


def self_test():
    patterns = allowed_patterns(os.path.join(HERE, "spills_allowed.txt"))
    allowed = "ptxas warning : Registers are spilled to local memory in function " \
              "'_ZN3rss6detail10megakernel6kernelI6__halfLNS1_4SyncE0ELb1EEEvPKT_PS5_NS1_6ParamsEii', 8 bytes spill stores"
    other = "ptxas warning : Registers are spilled to local memory in function " \
            "'_ZN3rss6detail10megakernel6kernelIfLNS1_4SyncE0ELb1EEEvPKT_PS4_NS1_6ParamsEii', 12 bytes spill stores"
    assert check(allowed, patterns) == ({}, {allowed.split("'")[1]: 8}), "an allowed spill must pass"
    bad, _ = check(allowed + "\n" + other, patterns)
    assert list(bad) == [other.split("'")[1]], "a spill outside the list must fail"
    assert check("nothing spilled\n", patterns) == ({}, {})
    print("check_spills self-test: passed")
    return 0


def main(argv):
    if argv[1:] == ["--self-test"]:
        return self_test()
    if len(argv) not in (2, 3) or argv[1] in ("-h", "--help"):
        print(__doc__.strip())
        return 0 if len(argv) == 2 else 2
    if not os.path.isfile(argv[1]):
        print(f"check_spills: no build log at {argv[1]} (build with -DRSS_REPORT_SPILLS=ON and keep its output)")
        return 2
    with open(argv[1], errors="replace") as f:
        text = f.read()
    bad, ok = check(text, allowed_patterns(argv[2] if len(argv) == 3 else os.path.join(HERE, "spills_allowed.txt")))
    for name, stores in sorted(ok.items()):
        print(f"allowed spill: {stores} bytes in {name}")
    for name, stores in sorted(bad.items()):
        print(f"SPILL: {stores} bytes in {name} (not in tests/spills_allowed.txt)")
    print(f"check_spills: {len(bad)} kernel(s) spill outside the list, {len(ok)} allowed")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
