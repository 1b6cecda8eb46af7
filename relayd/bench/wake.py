"""The ``wake`` suite of ``relayd bench``: commit-to-delivery of single commits to an idle relay.

A long-running relay at the configured poll interval (default 1 s) sits idle; single outbox
commits arrive at spaced random moments (so each finds the relay somewhere in its idle wait);
p50/p99 of commit-to-delivery, once with ``--wake`` and once without. Wake-up needs the server to
publish keyspace events: on the redis-server the bench started itself it is switched on with
``CONFIG SET notify-keyspace-events Khz`` (and the old value put back); on a ``--redis-url`` the
bench never changes configuration, and says when the wake figures therefore show polling only.
"""

from __future__ import annotations

import asyncio
import random
import time
from typing import Any

import redis

from relayd.bench.harness import Bench
from relayd.bench.stats import COMMITTED_AT, latency_figures
from store import Event, Execution, RedisStore

#: Seconds between two commits: drawn uniformly from this band (never in step with the poll).
_GAP_S = (0.4, 1.6)


async def wake_suite(bench: Bench) -> dict[str, Any]:
    """Measure with wake-up on and off (``bench.owned``: the bench may configure this Redis)."""
    config = bench.config
    async with bench.keyspace_events() as notifications:
        out: dict[str, Any] = {
            "poll_interval_s": config.poll_interval_s,
            "commits": config.wake_commits,
            "notifications": notifications.ready,
            "configured_by_bench": notifications.configured_by_bench,
        }
        for wake in (True, False):
            bench.log(f"wake: {config.wake_commits} single commits, wake {'on' if wake else 'off'}")
            latencies_s = await _run(bench, wake=wake)
            out["on" if wake else "off"] = {"delivered": len(latencies_s), **latency_figures(latencies_s)}
        return out


async def _run(bench: Bench, *, wake: bool) -> list[float]:
    config, rng = bench.config, random.Random()
    async with bench.prefix() as prefix:
        sink = bench.sink_for(prefix, sample_every=1)  # a latency per commit: few, and each counts
        async with bench.running_relay(prefix, sink, wake=wake):
            await asyncio.sleep(2.0 * config.poll_interval_s + 1.0)  # lease, then the idle backoff
            for n in range(config.wake_commits):
                await asyncio.sleep(rng.uniform(*_GAP_S) * config.poll_interval_s)
                await asyncio.to_thread(_commit_one, bench.sync, prefix, n)
            for _ in range(int((2 * config.poll_interval_s + 1.0) / 0.05)):  # the last one's poll
                if sink.delivered >= config.wake_commits:
                    break
                await asyncio.sleep(0.05)
        return list(sink.latencies_s)


def _commit_one(client: redis.Redis, prefix: str, n: int) -> None:
    """One engine commit with one outbox event, stamped with its commit time."""
    exe = Execution(id=f"wake-{n}", definition_id="relayd.bench")
    event = Event(kind="bench", data={COMMITTED_AT: time.time(), "n": n})
    RedisStore(client, prefix=prefix).commit(exe, [("target-0", event)])
