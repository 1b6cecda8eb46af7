"""Benchmark: the cost of one bounded outbox read (limit=1000) at backlogs of 1k, 100k and 1M.

Starts its own redis-server on a free loopback port, seeds each backlog with pipelined HSETs
of synthetic entries in the exact wire shape, and times a steady-state ``read_new(1000)`` of
a fresh reader (median of several reads, each on a new reader so each reads 1000 entries).
Run: ``python tests/benchmarks/bench_bounded_reads.py``.
"""

from __future__ import annotations

import shutil
import statistics
import time

import orjson
import redis

from relayd.bench.server import throwaway_redis_server
from store import Event, RedisStore

LIMIT = 1000
BACKLOGS = (1_000, 100_000, 1_000_000)
PREFIX = "bench"


def _seed(client: redis.Redis, start: int, stop: int) -> None:
    event = Event(id="e", kind="Ping", data={"n": 1}).model_dump_json()
    value = orjson.dumps({"t": "target-1", "e": event})
    pipe = client.pipeline(transaction=False)
    for seq in range(start, stop + 1):
        pipe.hset(f"{PREFIX}:outbox", str(seq), value)
        if seq % 10_000 == 0:
            pipe.execute()
    pipe.set(f"{PREFIX}:outbox:seq", stop)
    pipe.execute()


def _read_cost_s(store: RedisStore, runs: int = 7) -> float:
    costs = []
    for _ in range(runs):
        reader = store.backlog("outbox", reconcile_interval_s=3600.0)
        reader.start()
        began = time.perf_counter()
        got = reader.read_new(LIMIT, now=0.0)
        costs.append(time.perf_counter() - began)
        assert len(got) == LIMIT, len(got)
    return statistics.median(costs)


def main() -> None:
    if shutil.which("redis-server") is None:
        raise SystemExit("redis-server not on PATH")
    with throwaway_redis_server() as (_, port):
        client = redis.Redis(port=port)
        store = RedisStore(client, prefix=PREFIX)
        figures: dict[int, float] = {}
        seeded = 0
        for backlog in BACKLOGS:
            _seed(client, seeded + 1, backlog)
            seeded = backlog
            figures[backlog] = _read_cost_s(store)
            print(f"backlog {backlog:>9,}: one read_new(limit={LIMIT}) = {figures[backlog] * 1e3:7.2f} ms")
        ratio = figures[BACKLOGS[-1]] / figures[BACKLOGS[0]]
        print(f"ratio 1M/1k = {ratio:.2f} (must be <= 2)")


if __name__ == "__main__":
    main()
