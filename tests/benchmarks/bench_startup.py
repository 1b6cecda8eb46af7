"""Benchmark: how long ``relayd`` takes to start, beside ``python -c "import redis.asyncio"``.

Times, as whole processes on this interpreter: ``import redis.asyncio`` (the yardstick: every
command that talks to Redis pays it), ``relayd --version``, ``relayd --help``,
``relayd sweep --help``, and ``relayd sweep --once`` on an empty prefix of a throwaway
redis-server. With ``--old PATH`` (a checkout of another version, for example
``git archive 3a4f426 | tar -x -C /tmp/old``) the relayd commands also run from there, through
``PYTHONPATH`` and the working directory; the current code runs the same way from this checkout,
so both start alike.
Runs alternate variant by variant, so a machine that drifts slows every variant alike; a first
round is not counted; the medians are printed with their ratio to the yardstick. The goal: every
command of this checkout within ``GOAL`` times the yardstick (the last line says whether it is).

Run: ``python tests/benchmarks/bench_startup.py [--old PATH] [--runs N]``.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

from relayd.bench.server import throwaway_redis_server

HERE = Path(__file__).resolve().parents[2]
YARDSTICK = "import redis.asyncio"
#: Each command's start-up, at most this many times the yardstick's.
GOAL = 3.0


def _time_s(argv: list[str], pythonpath: Path | None) -> float:
    env = dict(os.environ)
    # No RELAYD_* leaks in; bytecode is cached as an installed program's is (site-packages ships
    # it compiled), so a checkout is not recompiled on every run.
    for name in [n for n in env if n.startswith("RELAYD_") or n == "PYTHONDONTWRITEBYTECODE"]:
        del env[name]
    if pythonpath is not None:
        env["PYTHONPATH"] = str(pythonpath)
    began = time.perf_counter()
    # ``-m`` and ``-c`` put the working directory first on the path: run in the checkout timed.
    done = subprocess.run(argv, env=env, cwd=pythonpath, capture_output=True, check=False)
    elapsed = time.perf_counter() - began
    if done.returncode != 0:
        raise SystemExit(f"{' '.join(argv)} exited {done.returncode}: {done.stderr.decode()[-500:]}")
    return elapsed


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--old", type=Path, help="another checkout to time beside this one")
    parser.add_argument("--runs", type=int, default=9, help="runs of each variant (median kept)")
    args = parser.parse_args()
    checkouts = {"new": HERE} | ({"old": args.old.resolve()} if args.old else {})
    with throwaway_redis_server() as (_, port):
        url = f"redis://127.0.0.1:{port}/0"
        relayd = [sys.executable, "-m", "relayd"]
        sweep = [*relayd, "sweep", "--once", "--redis-url", url, "--prefix", "startup-empty"]
        sweep += ["--sink", "null", "--log-level", "error"]
        variants: dict[str, tuple[list[str], Path | None]] = {
            YARDSTICK: ([sys.executable, "-c", YARDSTICK], None)
        }
        for name, root in checkouts.items():
            variants[f"relayd --version ({name})"] = ([*relayd, "--version"], root)
            variants[f"relayd --help ({name})"] = ([*relayd, "--help"], root)
            variants[f"relayd sweep --help ({name})"] = ([*relayd, "sweep", "--help"], root)
            variants[f"relayd sweep --once ({name})"] = (sweep, root)
        times: dict[str, list[float]] = {name: [] for name in variants}
        for round_ in range(args.runs + 1):
            for name, (argv, root) in variants.items():
                elapsed = _time_s(argv, root)
                if round_:  # the first round warms the page cache and writes the bytecode
                    times[name].append(elapsed)
    yardstick = statistics.median(times[YARDSTICK])
    print(f"{'command':<34} {'median s':>9} {'min s':>7} {'x import redis.asyncio':>23}")
    for name, runs in times.items():
        median = statistics.median(runs)
        print(f"{name:<34} {median:>9.3f} {min(runs):>7.3f} {median / yardstick:>23.2f}")
    worst = max(statistics.median(runs) for name, runs in times.items() if name.endswith("(new)"))
    verdict = "within" if worst <= GOAL * yardstick else "OVER"
    print(f"slowest command of this checkout: {worst / yardstick:.2f}x, {verdict} the goal of {GOAL:g}x")


if __name__ == "__main__":
    main()
