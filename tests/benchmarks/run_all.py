"""Reproduce every figure of docs/performance.md and docs/benchmarks.md with one command.

Run: ``python tests/benchmarks/run_all.py [--json]``. It runs ``relayd bench --suite all``
(three relay drains of a 100k backlog per kind, the median reported, and one baseline drain;
per-pass cost at a small and a large backlog; a steady stream of timers coming due; idle;
wake-up) on a throwaway redis-server, then each built-in sink against its own client baseline in
the same run (``SINK_RUNS``: the webhook against a local HTTP server, with and without a signing
secret; JSONL; the harel sink against harel's own relay), prints the tables (or the JSON
documents) and exits non-zero if any run left entries behind. Then, unless ``--json`` is given,
``bench_floor.py``: the relay against the least one Python process must do per outbox entry,
three interleaved rounds. Takes minutes.
"""

from __future__ import annotations

import subprocess
import sys
import tempfile
from pathlib import Path

BENCH = ["bench", "--suite", "all", "--backlog", "100000", "--repeat", "3", "--scale-backlog", "1000000"]
#: Each built-in sink against its own baseline (``relayd.bench.baselines``); the stream is above.
WEBHOOK = ["--sink", "webhook:local", "--kinds", "outbox", "--backlog", "20000"]
SINK_RUNS = [
    WEBHOOK,
    [*WEBHOOK, "--webhook-secret-file", "{secret}"],
    ["--sink", "jsonl:{tmpdir}/bench.jsonl", "--kinds", "outbox,spawn,timer", "--backlog", "100000"],
    [
        "--sink",
        "harel:{redis_url}?handoff_delay=0&timer_grace=0&timer_hold=0",
        "--kinds",
        "outbox,timer",
        "--backlog",
        "20000",
    ],
]


def main(args: list[str]) -> int:
    code = subprocess.call([sys.executable, "-m", "relayd", *BENCH, *args])
    with tempfile.TemporaryDirectory(prefix="relayd-run-all-") as workdir:
        secret = Path(workdir, "webhook-secret")
        secret.write_text("bench-signing-secret\n")
        for run in SINK_RUNS:
            print(flush=True)
            argv = [arg.replace("{secret}", str(secret)) for arg in run]
            code = subprocess.call([sys.executable, "-m", "relayd", "bench", *argv, *args]) or code
    if code == 0 and "--json" not in args:
        print(flush=True)
        code = subprocess.call([sys.executable, str(Path(__file__).with_name("bench_floor.py"))])
    return code


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
