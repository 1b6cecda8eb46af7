"""``relayd demo --console``: the demo's relay and workload, with the console open on the same Redis.

The embedded Redis gets something for the dead-letter pages to show: a few malformed entries
(an outbox value that is not JSON, a spawn intent missing its child, a timer member without its
``\\x00``) and a failing target (``order-13``: the sink refuses every event sent to it). The relay
dead-letters them as it would in production; the console runs with ``--allow-actions`` and a
token made for this run (printed once), until Ctrl-C.
"""

from __future__ import annotations

import asyncio
import dataclasses
import random
import time
from collections.abc import Callable, Sequence
from typing import Final

import orjson
import redis
import redis.asyncio as aioredis
from prometheus_client import CollectorRegistry

from relayd.console.server import ConsoleOptions, serve_console
from relayd.demo.embedded import EmbeddedRedis
from relayd.demo.run import DEMO_PREFIX, Committed, CountingSink, start_relay, start_workload
from relayd.envelope.batch import Batch
from relayd.observability.health import Health
from relayd.observability.metrics import RelayMetrics
from relayd.sinks.base import DELIVERED, Outcome, Permanent
from store import Keyspace

#: The target the demo's sink refuses, so its events end up as dead letters.
FAILING_TARGET: Final = "order-13"


class FailingTargetSink(CountingSink):
    """The demo's counting sink, refusing every event addressed to ``FAILING_TARGET``."""

    name = "demo-failing-target"

    async def deliver(self, batch: Batch) -> Sequence[Outcome]:
        outcomes: list[Outcome] = []
        for envelope, key in zip(batch, batch.keys(), strict=True):
            # An outbox envelope's ordering key is its target_id.
            if envelope.kind == "outbox" and key == FAILING_TARGET:
                latency_ms = random.randint(2000, 30000)  # demo text only
                outcomes.append(
                    Permanent(f"webhook answered 410 Gone for {FAILING_TARGET} after {latency_ms} ms")
                )
            else:
                self.ids[envelope.kind].add(envelope.id)
                outcomes.append(DELIVERED)
        self.deliveries += len(batch)
        return outcomes


def seed_malformed(client: redis.Redis, prefix: str) -> None:
    """Write entries the relay cannot decode: it dead-letters each with its reason."""
    keyspace = Keyspace(prefix)
    seq = client.incr(keyspace.outbox_seq)
    client.hset(keyspace.outbox, str(seq), b'{"t": "order-1", "e": {not json')
    spawn_seq = client.incr(keyspace.spawns_seq)
    client.hset(keyspace.spawns, str(spawn_seq), orjson.dumps({"p": "order-2", "r": "ship", "x": {}}))
    client.zadd(keyspace.timers, {b"order-3-reminder-without-separator": time.time() - 5})


def run_demo_console(
    options: ConsoleOptions, *, duration_s: float, announce: Callable[[str], None] = print
) -> int:
    """Run relay, workload and console until the console is stopped (Ctrl-C or SIGTERM)."""
    with EmbeddedRedis() as server:
        return asyncio.run(_run(options, duration_s=duration_s, redis_port=server.port, announce=announce))


async def _run(
    options: ConsoleOptions, *, duration_s: float, redis_port: int, announce: Callable[[str], None]
) -> int:
    sync_client = redis.Redis(host="127.0.0.1", port=redis_port)
    client = aioredis.Redis(host="127.0.0.1", port=redis_port)
    seed_malformed(sync_client, DEMO_PREFIX)
    stop = asyncio.Event()
    announce(f"relayd demo: embedded Redis on 127.0.0.1:{redis_port}, prefix {DEMO_PREFIX!r}; "
             f"events to {FAILING_TARGET!r} fail; Ctrl-C stops")  # fmt: skip
    workload = start_workload(sync_client, Committed(), until=time.time() + duration_s)
    relay = start_relay(
        client, FailingTargetSink(), metrics=RelayMetrics(CollectorRegistry()), health=Health(), stop=stop
    )
    try:
        await serve_console(
            client,
            dataclasses.replace(options, prefixes=(DEMO_PREFIX,), allow_actions=True),
            redis_display=f"redis://127.0.0.1:{redis_port}/0 (embedded)",
            announce=announce,
        )
    finally:
        stop.set()
        await relay
        workload.join(5)
        await client.aclose()
        sync_client.close()
    return 0
