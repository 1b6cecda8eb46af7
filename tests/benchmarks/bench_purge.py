"""Benchmark: ``purge`` of one execution in a 1M-entry outbox, ours against harel 0.9's own.

Starts its own redis-server on a free loopback port and seeds, in the wire shape of
docs/internals.md#key-space, an outbox of 1,000,000 rows (10,000 executions, 100 rows each),
100,000 spawns and 100,000 timers. Then it purges one execution with harel's ``RedisStore``
(the baseline: HGETALL and ZRANGE walk the whole structures in one command each) and another,
shaped the same, with ours (HSCAN / ZSCAN pages), printing for each: the total time, the
longest single command in the server's SLOWLOG (threshold 0, reset before each purge), how
many commands the server ran, and the slowest PING another client saw meanwhile. Also times
the client-side row filter with and without its verbatim-id byte check. Figures are printed, not asserted.

Run: ``flock /tmp/relayd-bench.lock python tests/benchmarks/bench_purge.py``.
"""

from __future__ import annotations

import shutil
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass

import orjson
import redis
from harel.engine.store import RedisStore as HarelRedisStore

from relayd.bench.server import throwaway_redis_server
from store import Event, RedisStore
from store.purging import Owner

PREFIX = "bench"
OUTBOX = 1_000_000
SPAWNS = 100_000
TIMERS = 100_000
EXECUTIONS = 10_000
CHUNK = 1000


def _execution(n: int) -> str:
    return f"exe-{n:05d}-7f3a9c2e-4b1d-4e8f-9a6b-1c2d3e4f5a6b"


def _seed(client: redis.Redis) -> None:
    event = Event(id="e", kind="Ping", data={"n": 1}).model_dump_json()
    pipe = client.pipeline(transaction=False)
    for n in range(EXECUTIONS):
        pipe.set(f"{PREFIX}:exe:{_execution(n)}", orjson.dumps({"id": _execution(n), "version": 7}))
        pipe.sadd(f"{PREFIX}:processed:{_execution(n)}", "ev-1", "ev-2")
    pipe.execute()
    for start in range(1, OUTBOX + 1, CHUNK):
        rows = {
            str(seq): orjson.dumps({"t": _execution(seq % EXECUTIONS), "e": event})
            for seq in range(start, start + CHUNK)
        }
        pipe.hset(f"{PREFIX}:outbox", mapping=rows)  # type: ignore[arg-type]  # redis-py's mapping type
        if start <= SPAWNS:
            spawns = {
                str(seq): orjson.dumps({"p": _execution(seq % EXECUTIONS), "c": f"c{seq}", "r": "r", "x": {}})
                for seq in range(start, start + CHUNK)
            }
            timers = {
                f"{_execution(seq % EXECUTIONS)}\x00p{seq}": float(seq) for seq in range(start, start + CHUNK)
            }
            pipe.hset(f"{PREFIX}:spawns", mapping=spawns)  # type: ignore[arg-type]  # as above
            pipe.zadd(f"{PREFIX}:timers", timers)
        if start % (50 * CHUNK) == 1:
            pipe.execute()
    pipe.set(f"{PREFIX}:outbox:seq", OUTBOX)
    pipe.set(f"{PREFIX}:spawns:seq", SPAWNS)
    pipe.execute()


@dataclass
class Measured:
    total_s: float
    longest_us: int
    longest_command: str
    commands: int
    worst_ping_ms: float
    top: str


class PingProbe:
    """Another client PINGing in a loop: the longest wait it saw is what a purge cost others."""

    def __init__(self, port: int) -> None:
        self._client = redis.Redis(port=port)
        self._stop = threading.Event()
        self.worst_s = 0.0
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        while not self._stop.is_set():
            began = time.perf_counter()
            self._client.ping()
            self.worst_s = max(self.worst_s, time.perf_counter() - began)
            time.sleep(0.001)

    def __enter__(self) -> PingProbe:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()
        self._client.close()


def _measure(client: redis.Redis, port: int, purge: Callable[[], bool]) -> Measured:
    client.slowlog_reset()
    with PingProbe(port) as probe:
        began = time.perf_counter()
        purged = purge()
        total = time.perf_counter() - began
    assert purged, "the purge must delete the execution"
    log = [e for e in client.slowlog_get(100_000) if not e["command"].startswith(b"SLOWLOG")]
    log = [e for e in log if not e["command"].startswith(b"PING")]
    log.sort(key=lambda e: -e["duration"])
    names = [e["command"].split(b" ", 1)[0].decode() for e in log]
    top = ", ".join(f"{n} {e['duration'] / 1e3:.2f} ms" for n, e in zip(names[:4], log[:4], strict=True))
    return Measured(total, int(log[0]["duration"]), names[0], len(log), probe.worst_s * 1e3, top)


def _filter_cost(client: redis.Redis, execution_id: str) -> tuple[float, float]:
    """Seconds to filter 100 HSCAN pages with the verbatim-id check and with a parse of every row."""
    pages = []
    cursor = 0
    for _ in range(100):
        cursor, page = client.hscan(f"{PREFIX}:outbox", cursor, count=CHUNK)
        pages.append(page)
    checked, parsed = Owner(execution_id), Owner(execution_id)
    parsed._needle = b""  # the same filter without the byte check
    costs = []
    for owner in (checked, parsed):
        began = time.perf_counter()
        for page in pages:
            owner.outbox_fields(page)
        costs.append(time.perf_counter() - began)
    return costs[0], costs[1]


def _print(label: str, m: Measured) -> None:
    print(
        f"{label:<22} total {m.total_s:7.2f} s   longest command {m.longest_command}"
        f" {m.longest_us / 1e3:8.2f} ms   commands {m.commands:>5}"
        f"   worst PING seen by another client {m.worst_ping_ms:8.2f} ms   slowest: {m.top}"
    )


def main() -> None:
    if shutil.which("redis-server") is None:
        raise SystemExit("redis-server not on PATH")
    with throwaway_redis_server() as (_, port):
        client = redis.Redis(port=port)
        client.config_set("slowlog-log-slower-than", 0)
        client.config_set("slowlog-max-len", 100_000)
        began = time.perf_counter()
        _seed(client)
        print(
            f"seeded {OUTBOX:,} outbox rows, {SPAWNS:,} spawns, {TIMERS:,} timers, {EXECUTIONS:,} executions"
            f" in {time.perf_counter() - began:.1f} s; each execution owns {OUTBOX // EXECUTIONS} outbox"
            f" rows, {SPAWNS // EXECUTIONS} spawns, {TIMERS // EXECUTIONS} timers"
        )
        harel = HarelRedisStore(client, prefix=PREFIX)
        ours = RedisStore(client, prefix=PREFIX)
        baseline = _measure(client, port, lambda: harel.purge(_execution(1), 7))
        ours_m = _measure(client, port, lambda: ours.purge(_execution(2), 7))
        _print("harel 0.9 RedisStore", baseline)
        _print("relayd store", ours_m)
        print(
            f"ratio ours/harel: total {ours_m.total_s / baseline.total_s:.2f}, longest command"
            f" {ours_m.longest_us / baseline.longest_us:.4f},"
            f" worst PING {ours_m.worst_ping_ms / baseline.worst_ping_ms:.3f}"
        )
        checked, parsed = _filter_cost(client, _execution(3))
        print(
            f"row filter over 100k rows: byte check first {checked * 1e3:.1f} ms, parse every row"
            f" {parsed * 1e3:.1f} ms (ratio {parsed / checked:.1f}x)"
        )


if __name__ == "__main__":
    main()
