"""Reproduce every figure of docs/performance.md with one command.

Run: ``python tests/benchmarks/run_all.py [--json]``. It runs ``relayd bench --suite all``
(three relay drains of a 100k backlog per kind, the median reported, and one baseline drain;
per-pass cost at 1k and 1M; a steady stream of timers coming due; idle; wake-up) on a throwaway
redis-server, prints the tables (or the JSON document) and exits non-zero if any run left
entries behind. Then, unless ``--json`` is given, ``bench_floor.py``: the relay against the
least one Python process must do per outbox entry, three interleaved rounds. Takes minutes;
the one-round-trip-per-entry baseline drains take a good part of them.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

BENCH = ["bench", "--suite", "all", "--backlog", "100000", "--repeat", "3", "--scale-backlog", "1000000"]

if __name__ == "__main__":
    args = sys.argv[1:]
    code = subprocess.call([sys.executable, "-m", "relayd", *BENCH, *args])
    if code == 0 and "--json" not in args:
        print(flush=True)
        code = subprocess.call([sys.executable, str(Path(__file__).with_name("bench_floor.py"))])
    sys.exit(code)
