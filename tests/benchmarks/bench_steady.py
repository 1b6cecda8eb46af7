"""Benchmark: ``relayd bench --suite steady`` for two checkouts side by side.

Per rate and version, on one redis-server this script starts with ``notify-keyspace-events
Khz``: ``relayd.bench.steady.measure`` (the suite's own run: a paced writer process, ``relayd
sweep`` from the version's checkout as its own process, the figures read from the stream, its
``/proc`` CPU and its metrics). After the writer stops, the stream must hold every commit once.

Run: ``python tests/benchmarks/bench_steady.py [--old PATH] [--rates 1000,5000,20000]
[--seconds 8] [--warmup 2] [--rounds 1]``, ``PATH`` a checkout of the other version, e.g.
``git worktree add --detach /tmp/steady-base main``. With ``--old`` the versions alternate
(the order flips from rate to rate and round to round). ``--linger`` and ``--old-linger`` set
each version's ``--linger`` (``--old .`` with both compares two lingers of one checkout).
"""

from __future__ import annotations

import argparse
import math
import os
import statistics
from pathlib import Path
from typing import Any

import redis

from relayd.bench.server import throwaway_redis_server
from relayd.bench.steady import SteadyRun, measure

HERE = Path(__file__).resolve().parents[2]


def _num(value: Any) -> float:
    return math.nan if value is None else float(value)


def _print_row(version: str, run: SteadyRun) -> None:
    row = run.row()
    ok = "all" if not run.problems() else f"{run.delivered}/{run.committed}"
    figures = [_num(row[k]) for k in ("p50_ms", "p90_ms", "p99_ms", "max_ms", "relay_cpu_pct")]
    print(
        f"{run.rate:>7,} {version:<4} {ok:>5} {run.duplicates:>4} "
        + " ".join(f"{value:>6.1f}" for value in figures)
        + f" {_num(row['relay_cpu_us_per_entry']):>7.1f} {_num(row['redis_cpu_pct']):>6.1f}"
        f" {_num(row['entries_per_pass']):>7.1f}",
        flush=True,
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--old", type=Path, help="a checkout of the other version")
    parser.add_argument("--rates", default="1000,5000,20000", help="commits/s, comma-separated")
    parser.add_argument("--seconds", type=float, default=8.0, help="measured stretch per run")
    parser.add_argument("--warmup", type=float, default=2.0, help="unmeasured start of each run")
    parser.add_argument("--rounds", type=int, default=1, help="runs per rate and version")
    parser.add_argument("--linger", type=float, help="the new version's --linger (its default if not given)")
    parser.add_argument(
        "--old-linger", type=float, help="the old version's --linger (its default if not given)"
    )
    args = parser.parse_args()
    roots = {"new": HERE} | ({"old": args.old.resolve()} if args.old else {})
    lingers = {"new": args.linger, "old": args.old_linger}
    rates = [int(r) for r in args.rates.split(",")]
    loadavg = os.getloadavg()
    print(
        f"load average at start: {loadavg[0]:.2f} {loadavg[1]:.2f} {loadavg[2]:.2f} ({os.cpu_count()} cores)"
    )
    print(
        f"{'rate/s':>7} {'ver':<4} {'deliv':>5} {'dups':>4} {'p50':>6} {'p90':>6} {'p99':>6} {'max':>6} "
        f"{'cpu%':>6} {'µs/ent':>7} {'redis%':>6} {'ent/pass':>7}"
    )
    results: dict[tuple[int, str], list[SteadyRun]] = {}
    with throwaway_redis_server() as (_, port):
        client = redis.Redis(port=port)
        client.config_set("notify-keyspace-events", "Khz")
        url = f"redis://127.0.0.1:{port}/0"
        turn = 0
        for rate in rates:
            for round_ in range(args.rounds):
                versions = list(roots)
                if turn % 2:
                    versions.reverse()
                turn += 1
                for version in versions:
                    prefix = f"steady{turn}{version}{round_}"
                    linger = lingers[version]
                    run = measure(
                        url,
                        prefix,
                        rate,
                        warmup_s=args.warmup,
                        seconds=args.seconds,
                        root=roots[version],
                        relay_args=() if linger is None else ("--linger", str(linger)),
                    )
                    client.flushall()
                    results.setdefault((rate, version), []).append(run)
                    _print_row(version, run)
    if "old" in roots:
        print("\nnew/old (medians over rounds): p99 latency, max latency, relay CPU")
        for rate in rates:
            ratio = {}
            for key in ("p99_ms", "max_ms", "relay_cpu_pct"):
                old = statistics.median(_num(r.row()[key]) for r in results[(rate, "old")])
                new = statistics.median(_num(r.row()[key]) for r in results[(rate, "new")])
                ratio[key] = new / old if old else math.nan
            p99, top, cpu = ratio["p99_ms"], ratio["max_ms"], ratio["relay_cpu_pct"]
            print(f"{rate:>7,}: p99 {p99:.2f}, max {top:.2f}, cpu {cpu:.2f}")
    loadavg = os.getloadavg()
    print(f"load average at end: {loadavg[0]:.2f} {loadavg[1]:.2f} {loadavg[2]:.2f}")


if __name__ == "__main__":
    main()
