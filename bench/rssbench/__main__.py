"""rssbench: the bench's one Python package: sessions, peers, records, report, verification, tuning.

    python3 bench/rssbench COMMAND [options]      (COMMAND --help for each)

Commands:
  session      run measurement sessions of the protocol (docs/protocol.md), then the report
  report       build or verify the forward report (bench/results/) from the raw records
  peers        the torch peers of the forward operator, measured with the protocol
  tune         write a shipped tuning table from pilot records
  records      the record schema: validate files, print the source hash
  fixture      the benchmark input fixture (hash, elements)
  ab           before/after summary of bench/ab/run.sh
"""
import importlib
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
COMMANDS = ("session", "report", "peers", "tune", "records", "fixture", "ab")


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
