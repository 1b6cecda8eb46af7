"""Redis goes away mid-run: errors are counted, /readyz says why, the relay resumes by itself."""

from __future__ import annotations

import asyncio
import time

import pytest
import redis.asyncio as aioredis
from prometheus_client import CollectorRegistry
from support.relays import start_relay
from support.waiting import until

from relayd.engine.options import SweepOptions
from relayd.observability.health import Health
from relayd.observability.metrics import RelayMetrics
from relayd.sinks.memory import MemorySink
from store.keys import Keyspace

pytestmark = pytest.mark.crash


@pytest.mark.slow
async def test_relay_survives_a_redis_restart(own_redis_server, prefix):
    client = aioredis.Redis(port=own_redis_server.port, socket_timeout=1, socket_connect_timeout=1)
    ks = Keyspace(prefix)
    registry, health, stop, sink = CollectorRegistry(), Health(), asyncio.Event(), MemorySink()
    options = SweepOptions(prefixes=(prefix,), poll_interval_s=0.05, lease_ttl_s=0.6)
    task = start_relay(options, client, sink, metrics=RelayMetrics(registry), health=health, stop=stop)
    await until(lambda: health.ready().ok, timeout_s=10.0)

    own_redis_server.stop()
    await until(lambda: not health.ready().ok, timeout_s=10.0)
    errors = registry.get_sample_value("relayd_redis_errors_total", {"prefix": prefix})
    reason = health.ready().reason
    own_redis_server.start()
    await client.incr(ks.outbox_seq)
    await client.hset(ks.outbox, "1", '{"t": "a", "e": "{\\"id\\": \\"after\\", \\"kind\\": \\"K\\"}"}')
    await until(lambda: len(sink.delivered) == 1, timeout_s=10.0)
    await until(lambda: health.ready().ok, timeout_s=10.0)

    assert errors >= 1
    assert reason.startswith("redis: ")
    assert sink.delivered[0].body["event"] == {"id": "after", "kind": "K"}
    assert health.live(time.monotonic()).ok
    stop.set()
    summary = await asyncio.wait_for(task, 10)
    assert summary.delivered["outbox"] == 1
    await client.aclose()
