"""The harel sink against harel's own relay, on identical backlogs in the same run.

    flock /tmp/relayd-bench.lock python tests/benchmarks/bench_harel_sink.py [--backlog 20000]
        [--kinds outbox,timer] [--repeat 1] [--redis-url URL]

Per kind and repeat: seed ``backlog`` entries under a fresh prefix (``relayd.bench.seed``) and
drain them with the relay (``run_relay``, ``once=True``, sink ``harel:URL``), then seed the same
backlog under another prefix and drain it with harel's own relay
(``relayd.bench.baselines.harel.drain_backlog``). Prints, for each, entries/s, process CPU per
entry (the relay's or harel's), Redis commands per entry (INFO commandstats: commands run
inside a script count too, and the script calls are shown apart) and the ratio of the rates. A
redis-server is started on a free loopback port unless ``--redis-url`` is given.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import time
from collections.abc import Awaitable, Callable
from typing import Any

import redis
import redis.asyncio as aioredis
from prometheus_client import CollectorRegistry

from relayd.bench.baselines.harel import drain_backlog
from relayd.bench.harness import new_prefix
from relayd.bench.seed import live_count, seed
from relayd.bench.server import bench_redis, command_calls, delete_prefix
from relayd.bench.stats import commands_delta
from relayd.engine.loop import run_relay
from relayd.engine.options import SweepOptions
from relayd.envelope import KINDS, Kind
from relayd.observability.health import Health
from relayd.observability.metrics import RelayMetrics
from relayd.sinks import resolve_sink
from relayd.sinks.base import SinkOptions

#: Commands that run a script (their inner commands are counted under their own names).
SCRIPT_CALLS = {"evalsha", "eval"}


async def metered(sync: redis.Redis, count: int, drain: Callable[[], Awaitable[object]]) -> dict[str, Any]:
    """Run ``drain`` and measure it: wall, process CPU and Redis commands, per entry."""
    calls = command_calls(sync)
    cpu, wall = time.process_time(), time.monotonic()
    await drain()
    wall_s, cpu_s = time.monotonic() - wall, time.process_time() - cpu
    after = command_calls(sync)
    delta = commands_delta(calls, after) if calls is not None and after is not None else {}
    scripts = sum(n for cmd, n in delta.items() if cmd in SCRIPT_CALLS)
    return {
        "entries_per_s": round(count / wall_s, 1),
        "wall_s": round(wall_s, 3),
        "cpu_us_per_entry": round(cpu_s / count * 1e6, 1),
        "commands_per_entry": round(sum(delta.values()) / count, 2),
        "script_calls_per_entry": round(scripts / count, 4),
        "commands": delta,
    }


async def relay_drain(
    url: str, sync: redis.Redis, client: aioredis.Redis, kind: Kind, count: int
) -> dict[str, Any]:
    prefix = new_prefix()
    try:
        seed(sync, prefix, kind, count, clock=time.time)
        sink = resolve_sink(f"harel:{url}?handoff_delay=0&timer_grace=0&timer_hold=0", SinkOptions())
        options = SweepOptions(prefixes=(prefix,), batch=1000, once=True)

        async def drain() -> None:
            await run_relay(
                options,
                redis=client,
                sinks=dict.fromkeys(KINDS, sink),
                metrics=RelayMetrics(CollectorRegistry()),
                health=Health(),
                stop=asyncio.Event(),
            )

        figures = await metered(sync, count, drain)
        figures["left"] = live_count(sync, prefix, kind)
        figures["queued"] = queued(sync, prefix)
        return figures
    finally:
        delete_prefix(sync, prefix)


async def harel_drain(url: str, sync: redis.Redis, kind: Kind, count: int) -> dict[str, Any]:
    prefix = new_prefix()
    try:
        seed(sync, prefix, kind, count, clock=time.time)
        figures = await metered(sync, count, lambda: drain_backlog(url, prefix, kind))
        figures["left"] = live_count(sync, prefix, kind)
        figures["queued"] = queued(sync, prefix)
        return figures
    finally:
        delete_prefix(sync, prefix)


def queued(sync: redis.Redis, prefix: str) -> int:
    """Events in harel's transport queues under ``prefix`` (what the drain published)."""
    return sum(int(sync.llen(key)) for key in sync.scan_iter(match=f"{prefix}:q:*", count=1000))


async def main(args: argparse.Namespace) -> None:
    with bench_redis(args.redis_url) as target:
        sync = redis.Redis.from_url(target.url)
        client = aioredis.Redis.from_url(target.url)
        print(json.dumps({"redis": target.flavour, "backlog": args.backlog}))
        try:
            for kind in args.kinds.split(","):
                for _ in range(args.repeat):
                    relay = await relay_drain(target.url, sync, client, kind, args.backlog)
                    harel = await harel_drain(target.url, sync, kind, args.backlog)
                    ratio = relay["entries_per_s"] / harel["entries_per_s"]
                    for name, row in (("relay", relay), ("harel", harel)):
                        print(json.dumps({"kind": kind, "method": name} | row))
                    print(json.dumps({"kind": kind, "ratio": round(ratio, 1)}))
        finally:
            await client.aclose()
            sync.close()


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.partition("\n")[0])
    parser.add_argument("--backlog", type=int, default=20_000)
    parser.add_argument("--kinds", default="outbox,timer")
    parser.add_argument("--repeat", type=int, default=1)
    parser.add_argument("--redis-url", default=None)
    asyncio.run(main(parser.parse_args()))
