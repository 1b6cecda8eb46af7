"""Benchmark: this checkout's drain rates beside another checkout's, alternating drain by drain.

Each round runs ``relayd bench --no-baseline --json`` once from each checkout (as separate
processes, through ``PYTHONPATH`` and the working directory), in alternating order, so a machine
whose speed drifts slows both alike. Printed per kind: each version's median rate, the geometric
mean of the round-by-round ratios (new / old) and each version's median relay CPU per entry.

Run: ``python tests/benchmarks/bench_versions.py --old PATH [--rounds N] [--backlog N]
[--kinds outbox,spawn,timer]``, with ``PATH`` a checkout of the other version, for example
``git worktree add /tmp/old 55ebfcd``.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parents[2]


def _drain(root: Path, kinds: str, backlog: int) -> dict[str, tuple[float, float]]:
    """(entries/s, relay CPU µs per entry) per kind, from one ``relayd bench`` run in ``root``."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("RELAYD_")}
    env |= {"PYTHONPATH": str(root)}
    argv = [sys.executable, "-m", "relayd", "bench", "--kinds", kinds, "--backlog", str(backlog)]
    done = subprocess.run(
        [*argv, "--no-baseline", "--json"], cwd=root, env=env, capture_output=True, text=True, check=False
    )
    if done.returncode != 0:
        raise SystemExit(f"relayd bench in {root} exited {done.returncode}: {done.stderr[-500:]}")
    report = json.loads(done.stdout[done.stdout.index("{") :])
    return {
        k["kind"]: (k["relay"]["entries_per_s"], k["relay"]["cpu_s"] / k["relay"]["entries"] * 1e6)
        for k in report["kinds"]
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--old", type=Path, required=True, help="a checkout of the other version")
    parser.add_argument("--rounds", type=int, default=9, help="drains of each version (medians kept)")
    parser.add_argument("--backlog", type=int, default=100_000, help="entries seeded per kind")
    parser.add_argument("--kinds", default="outbox,spawn,timer", help="kinds, comma-separated")
    args = parser.parse_args()
    roots = {"old": args.old.resolve(), "new": HERE}
    runs: dict[str, list[dict[str, tuple[float, float]]]] = {"old": [], "new": []}
    for round_ in range(args.rounds):
        for version in ("old", "new") if round_ % 2 == 0 else ("new", "old"):
            runs[version].append(_drain(roots[version], args.kinds, args.backlog))
    print(f"{'kind':<8} {'old /s':>10} {'new /s':>10} {'new/old':>8} {'old µs':>7} {'new µs':>7}")
    for kind in args.kinds.split(","):
        old = [run[kind] for run in runs["old"]]
        new = [run[kind] for run in runs["new"]]
        ratio = statistics.geometric_mean([n[0] / o[0] for o, n in zip(old, new, strict=True)])
        print(
            f"{kind:<8} {statistics.median(r for r, _ in old):>10,.0f} "
            f"{statistics.median(r for r, _ in new):>10,.0f} {ratio:>8.3f} "
            f"{statistics.median(c for _, c in old):>7.2f} {statistics.median(c for _, c in new):>7.2f}"
        )


if __name__ == "__main__":
    main()
