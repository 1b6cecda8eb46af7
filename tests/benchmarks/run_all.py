"""Reproduce every figure of the README's Performance section with one command.

Run: ``python tests/benchmarks/run_all.py [--json]``. It runs ``relayd bench --suite all``
(three relay drains of a 100k backlog per kind, the median reported, and one baseline drain;
per-pass cost at 1k and 1M; 10k timers/s for 30 s; 10 s idle; wake-up) on a throwaway
redis-server, prints the tables (or the JSON document) and exits non-zero if any run left
entries behind. Takes about five minutes on a 2-core machine; the one-round-trip-per-entry
baseline drains take a minute and a half of it.
"""

from __future__ import annotations

import sys

from relayd.cli.app import main

if __name__ == "__main__":
    main(
        [
            "bench",
            "--suite",
            "all",
            "--backlog",
            "100000",
            "--repeat",
            "3",
            "--scale-backlog",
            "1000000",
            *sys.argv[1:],
        ]
    )
