"""The bench's one Python package: sessions, peers, records, reports, verification, tuning (docs/protocol.md).

    python3 bench/rssbench COMMAND [options]      (COMMAND --help for each)"""
import importlib
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
COMMANDS = ("session", "report", "peers", "ab", "tune")


def main(argv):
    if not argv or argv[0] in ("-h", "--help"):  # each command's summary: the first line of its module's docstring
        summaries = [f"  {c:<10} {importlib.import_module(c).__doc__.splitlines()[0]}" for c in COMMANDS]
        print(f"usage: python3 bench/rssbench {{{','.join(COMMANDS)}}} ...\n\n{__doc__}\n\nCommands:", *summaries,
              sep="\n")
        return 0
    if argv[0] not in COMMANDS:
        print("rssbench: unknown command %r (python3 bench/rssbench --help lists them)" % argv[0], file=sys.stderr)
        return 2
    return importlib.import_module(argv[0]).main(argv[1:])


sys.exit(main(sys.argv[1:]))
