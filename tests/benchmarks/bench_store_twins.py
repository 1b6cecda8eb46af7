"""Benchmark: the generated sync store and the asyncio store against the hand-written ones they replace.

``store/redis_store.py`` is generated from ``store/async_redis_store.py`` (``store._generate``).
This times both stores as they are now ("new") and as a git revision has them ("old", default:
where this branch left main; each file loaded as a module of its own) on one redis-server on a
free loopback port, in the same run. A run of one store, on an emptied server: ``--commits``
commits of a new execution with one outbox entry (``commit``), a ``load`` of each, one
``ids_with_prefix`` over them all (``scan``), one ``pending_outbox()`` of them all (``pending``),
then a drain (``pending_outbox(limit=READ)`` and ``ack_outbox_many`` until empty). Each round
runs the old and the new store of each kind, their order flipping every round, after one
warm-up run of each; the figures are medians over the rounds, in µs per execution. The default,
8 rounds of 2,500, is 20,000 commits and loads through each store.
Run: ``python tests/benchmarks/bench_store_twins.py [--rounds 8] [--commits 2500] [--old REV]``.
"""

from __future__ import annotations

import argparse
import asyncio
import shutil
import statistics
import subprocess
import time
import types
from collections import defaultdict
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import redis
import redis.asyncio

from relayd.bench.server import throwaway_redis_server
from store import Event, Execution
from store.async_redis_store import AsyncRedisStore
from store.redis_store import RedisStore

ROOT = Path(__file__).resolve().parents[2]
READ = 500
CHUNK = 250
REPEAT = 4  # even: each store goes first as often as the other
PHASES = ("commit", "load", "scan", "pending", "drain")
VERSIONS = ("old", "new")

#: One step of a round: (phase, version, operation, its argument).
Step = tuple[str, str, str, Any]


def _old_revision() -> str:
    done = subprocess.run(
        ["git", "merge-base", "HEAD", "main"], cwd=ROOT, capture_output=True, text=True, check=True
    )
    return done.stdout.strip()


def _old_class(revision: str, path: str, name: str) -> Any:
    """``name`` from ``path`` as ``revision`` has it, loaded as a module of its own."""
    source = subprocess.run(
        ["git", "show", f"{revision}:{path}"], cwd=ROOT, capture_output=True, text=True, check=True
    ).stdout
    module = types.ModuleType(f"old_{Path(path).stem}")
    exec(compile(source, f"{revision[:12]}:{path}", "exec"), module.__dict__)  # noqa: S102 - our own file
    return getattr(module, name)


def _steps(commits: int) -> Iterator[Step]:
    """A round's steps: the old and the new store take turns, chunk by chunk, the first of each
    pair flipping every time, so both see the same load on the machine."""
    ids = [f"exe-{i}" for i in range(commits)]
    chunks = [ids[i : i + CHUNK] for i in range(0, commits, CHUNK)]
    turn = 0

    def pair() -> tuple[str, ...]:
        nonlocal turn
        turn += 1
        return VERSIONS if turn % 2 else VERSIONS[::-1]

    for phase, operation, times in (
        ("commit", "commit", chunks),
        ("load", "load", chunks),
        ("scan", "scan", [None] * REPEAT),
        ("pending", "pending", [None] * REPEAT),
        ("drain", "drain_page", [None] * (commits // READ + 1)),
    ):
        for argument in times:
            for version in pair():
                yield phase, version, operation, argument


class _Sync:
    def __init__(self, store: Any, commits: int) -> None:
        self.store, self.commits = store, commits

    def commit(self, ids: list[str]) -> None:
        for execution_id in ids:
            self.store.commit(Execution(id=execution_id, definition_id="d"), [("target", Event(kind="Ping"))])

    def load(self, ids: list[str]) -> None:
        for execution_id in ids:
            assert self.store.load(execution_id) is not None

    def scan(self, _: None) -> None:
        assert len(self.store.ids_with_prefix("exe-")) == self.commits

    def pending(self, _: None) -> None:
        assert len(self.store.pending_outbox()) == self.commits

    def drain_page(self, _: None) -> None:
        entries = self.store.pending_outbox(limit=READ)
        self.store.ack_outbox_many([e.seq for e in entries])


class _Async:
    def __init__(self, store: Any, commits: int) -> None:
        self.store, self.commits = store, commits

    async def commit(self, ids: list[str]) -> None:
        for execution_id in ids:
            await self.store.commit(
                Execution(id=execution_id, definition_id="d"), [("target", Event(kind="Ping"))]
            )

    async def load(self, ids: list[str]) -> None:
        for execution_id in ids:
            assert await self.store.load(execution_id) is not None

    async def scan(self, _: None) -> None:
        assert len(await self.store.ids_with_prefix("exe-")) == self.commits

    async def pending(self, _: None) -> None:
        assert len(await self.store.pending_outbox()) == self.commits

    async def drain_page(self, _: None) -> None:
        entries = await self.store.pending_outbox(limit=READ)
        await self.store.ack_outbox_many([e.seq for e in entries])


def _sync_round(classes: dict[str, Any], port: int, commits: int) -> dict[tuple[str, str, str], float]:
    client = redis.Redis(port=port)
    client.flushall()
    drivers = {v: _Sync(cls(client, prefix=f"bench-{v}"), commits) for v, cls in classes.items()}
    timed: dict[tuple[str, str, str], float] = defaultdict(float)
    for phase, version, operation, argument in _steps(commits):
        wall, cpu = time.perf_counter(), time.process_time()
        getattr(drivers[version], operation)(argument)
        timed[version, phase, "wall"] += time.perf_counter() - wall
        timed[version, phase, "cpu"] += time.process_time() - cpu
    assert all(not d.store.pending_outbox() for d in drivers.values())
    client.close()
    return timed


async def _async_round(classes: dict[str, Any], port: int, commits: int) -> dict[tuple[str, str, str], float]:
    client = redis.asyncio.Redis(port=port)
    await client.flushall()
    drivers = {v: _Async(cls(client, prefix=f"bench-{v}"), commits) for v, cls in classes.items()}
    timed: dict[tuple[str, str, str], float] = defaultdict(float)
    for phase, version, operation, argument in _steps(commits):
        wall, cpu = time.perf_counter(), time.process_time()
        await getattr(drivers[version], operation)(argument)
        timed[version, phase, "wall"] += time.perf_counter() - wall
        timed[version, phase, "cpu"] += time.process_time() - cpu
    for driver in drivers.values():
        assert not await driver.store.pending_outbox()
    await client.aclose()
    return timed


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.partition("\n")[0])
    parser.add_argument("--rounds", type=int, default=8)
    parser.add_argument("--commits", type=int, default=2_500)
    parser.add_argument(
        "--old", default=None, help="git revision of the old stores (default: merge-base with main)"
    )
    options = parser.parse_args()
    if shutil.which("redis-server") is None:
        raise SystemExit("redis-server not on PATH")
    revision = options.old or _old_revision()
    sync_classes = {"old": _old_class(revision, "store/redis_store.py", "RedisStore"), "new": RedisStore}
    async_classes = {
        "old": _old_class(revision, "store/async_redis_store.py", "AsyncRedisStore"),
        "new": AsyncRedisStore,
    }
    figures: dict[tuple[str, ...], list[float]] = {}
    print(f"old = {revision[:12]}; {options.rounds} rounds of {options.commits:,} commits per store")
    with throwaway_redis_server() as (_, port):
        _sync_round(sync_classes, port, CHUNK)  # warm-up: scripts loaded, caches warm
        asyncio.run(_async_round(async_classes, port, CHUNK))
        for _ in range(options.rounds):
            for stack, timed in (
                ("sync", _sync_round(sync_classes, port, options.commits)),
                ("async", asyncio.run(_async_round(async_classes, port, options.commits))),
            ):
                for (version, phase, clock), seconds in timed.items():
                    figures.setdefault((stack, version, phase, clock), []).append(seconds)
    print("µs per execution, median over the rounds; wall clock, then this process's CPU time")
    print(f"{'store':<6} {'phase':<8}" + f"{'old':>9}{'new':>9}{'new/old':>9}" * 2)
    for stack in ("sync", "async"):
        for phase in PHASES:
            per_op = 1e6 / options.commits / (REPEAT if phase in ("scan", "pending") else 1)
            row = f"{stack:<6} {phase:<8}"
            for clock in ("wall", "cpu"):
                old, new = (statistics.median(figures[stack, v, phase, clock]) for v in VERSIONS)
                row += f"{old * per_op:>9.1f}{new * per_op:>9.1f}{new / old:>9.3f}"
            print(row)


if __name__ == "__main__":
    main()
