"""Benchmark: ``relayd sweep --once`` against harel's own relay, whole processes, start-up included.

Per round, on one throwaway redis-server: seed ``--backlog`` outbox entries under a fresh prefix
(``relayd.bench.seed``) and drain them with ``relayd sweep --once`` into a Redis Stream, as a
process of its own; then seed the same backlog under another prefix and drain it with harel's own
relay (``relayd.bench.baselines.harel.drain_backlog``), also a process of its own. Each side's wall
time runs from the process's start to its exit, so both pay their interpreter and imports. Every
entry must be gone from the outbox after each drain, and the stream must hold all of them.
Prints each round, the medians, the ratio (harel's wall time over relayd's) and whether it meets
``GOAL``. With ``--old PATH`` (another checkout, for example ``git archive REV | tar -x -C
/tmp/old``) that checkout's ``relayd`` drains its own identical backlog in every round too.

Run: ``flock /tmp/relayd-bench.lock python tests/benchmarks/bench_once_vs_harel.py
[--backlog 100000] [--rounds 3] [--old PATH]``.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

import redis

from relayd.bench.harness import new_prefix
from relayd.bench.seed import live_count, seed
from relayd.bench.server import delete_prefix, throwaway_redis_server

HERE = Path(__file__).resolve().parents[2]
#: relayd's whole run at least this many times faster than harel's.
GOAL = 50.0
HAREL_RELAY = (
    "import asyncio, sys\n"
    "from relayd.bench.baselines.harel import drain_backlog\n"
    "print(asyncio.run(drain_backlog(sys.argv[1], sys.argv[2], 'outbox')))\n"
)


def _run_s(argv: list[str], root: Path = HERE) -> float:
    """Wall time of ``argv`` as a process, from checkout ``root``, with no ``RELAYD_*`` leaking in."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("RELAYD_")}
    env["PYTHONPATH"] = str(root)
    began = time.perf_counter()
    done = subprocess.run(argv, env=env, cwd=root, capture_output=True, check=False)
    elapsed = time.perf_counter() - began
    if done.returncode != 0:
        raise SystemExit(f"{' '.join(argv[:4])} exited {done.returncode}: {done.stderr.decode()[-800:]}")
    return elapsed


def _drained(client: redis.Redis, prefix: str, backlog: int, who: str) -> None:
    left = live_count(client, prefix, "outbox")
    if left:
        raise SystemExit(f"{who} left {left} of {backlog} outbox entries")


def _relayd_drain_s(client: redis.Redis, url: str, backlog: int, root: Path) -> float:
    """Seed ``backlog`` outbox entries and time ``relayd sweep --once`` (from ``root``) on them."""
    prefix = new_prefix()
    stream = f"{prefix}:once:stream"
    seed(client, prefix, "outbox", backlog, clock=time.time)
    argv = [sys.executable, "-m", "relayd", "sweep", "--once", "--redis-url", url]
    argv += ["--prefix", prefix, "--sink", f"redis-stream:{url}?stream={stream}", "--log-level", "error"]
    elapsed = _run_s(argv, root)
    _drained(client, prefix, backlog, f"relayd ({root})")
    if int(client.xlen(stream)) != backlog:
        raise SystemExit(f"the stream holds {client.xlen(stream)} of {backlog} entries")
    delete_prefix(client, prefix)
    return elapsed


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--backlog", type=int, default=100_000, help="outbox entries per drain")
    parser.add_argument("--rounds", type=int, default=3, help="drains per side (median kept)")
    parser.add_argument("--old", type=Path, help="another checkout whose relayd drains beside this one")
    args = parser.parse_args()
    relayd_s: list[float] = []
    old_s: list[float] = []
    harel_s: list[float] = []
    with throwaway_redis_server() as (_, port):
        url = f"redis://127.0.0.1:{port}/0"
        client = redis.Redis.from_url(url)
        for round_ in range(1, args.rounds + 1):
            relayd_s.append(_relayd_drain_s(client, url, args.backlog, HERE))
            if args.old is not None:
                old_s.append(_relayd_drain_s(client, url, args.backlog, args.old.resolve()))
            prefix = new_prefix()
            seed(client, prefix, "outbox", args.backlog, clock=time.time)
            harel_s.append(_run_s([sys.executable, "-c", HAREL_RELAY, url, prefix]))
            _drained(client, prefix, args.backlog, "harel's relay")
            delete_prefix(client, prefix)
            old = f", old relayd {old_s[-1]:.2f} s" if old_s else ""
            print(
                f"round {round_}: relayd {relayd_s[-1]:.2f} s{old}, harel's relay {harel_s[-1]:.2f} s, "
                f"{harel_s[-1] / relayd_s[-1]:.1f}x",
                flush=True,
            )
        client.close()
    relayd_median, harel_median = statistics.median(relayd_s), statistics.median(harel_s)
    ratio = harel_median / relayd_median
    print(
        f"{args.backlog} outbox entries, whole processes, medians of {args.rounds}: relayd sweep --once "
        f"{relayd_median:.2f} s ({args.backlog / relayd_median:,.0f} entries/s), harel's relay "
        f"{harel_median:.2f} s ({args.backlog / harel_median:,.0f} entries/s)"
    )
    if old_s:
        old_median = statistics.median(old_s)
        print(f"old relayd {old_median:.2f} s: {harel_median / old_median:.1f}x harel's relay")
    verdict = "meets" if ratio >= GOAL else "SHORT OF"
    print(f"relayd / harel: {ratio:.1f}x, {verdict} the goal of {GOAL:g}x")


if __name__ == "__main__":
    main()
