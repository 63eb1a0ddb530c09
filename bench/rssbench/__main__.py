"""rssbench: the bench's one Python package: sessions, peers, records, reports, verification, tuning.

    python3 bench/rssbench COMMAND [options]      (COMMAND --help for each)

Commands:
  session      run measurement sessions of the protocol (docs/protocol.md), then the report
  report       build or verify the forward report (bench/results/) from the raw records
  peers        the torch peers (forward, backward, sharded), measured with the protocol
  backward     summary and report of a backward bench run (bench/backward/run.sh)
  ab           before/after summary of bench/ab/run.sh
  tune         write a shipped tuning table from pilot records
  records      the record schema: validate files, print the source hash
  fixture      the benchmark input fixture (hash, elements)
"""
import importlib
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
COMMANDS = ("session", "report", "peers", "backward", "ab", "tune", "records", "fixture")


def main(argv):
    if not argv or argv[0] in ("-h", "--help"):
        print("usage: python3 bench/rssbench {%s} ...\n" % ",".join(COMMANDS) + __doc__)
        return 0
    if argv[0] not in COMMANDS:
        print("rssbench: unknown command %r (python3 bench/rssbench --help lists them)" % argv[0], file=sys.stderr)
        return 2
    return importlib.import_module(argv[0]).main(argv[1:])


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
