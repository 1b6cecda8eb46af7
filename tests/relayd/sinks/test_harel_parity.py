"""What the harel sink writes is what harel's own relay writes, key for key, on the same backlog.

One backlog is written twice, under two prefixes, with harel's own store (plus raw outbox
values harel's relay has to normalise): the relay drains one prefix through the sink, harel's
own relay (``relayd.bench.baselines.harel``) the other. Every transport key under each prefix
(queues, the priority hash, the ready sets) must then hold the same values and scores.
"""

from __future__ import annotations

import asyncio
import time
from typing import Any

import orjson
import redis.asyncio as aioredis
from harel.engine.aio_store import AsyncRedisStore as HarelStore
from harel.engine.execution import Execution as HarelExecution
from harel.engine.store import TimerOp as HarelTimerOp
from harel.spec.states import Event as HarelEvent
from prometheus_client import CollectorRegistry

from relayd.bench.baselines import baseline_for
from relayd.bench.baselines.harel import drain_backlog, drain_with
from relayd.engine.loop import run_relay
from relayd.engine.options import SweepOptions
from relayd.envelope import KINDS
from relayd.observability.health import Health
from relayd.observability.metrics import RelayMetrics
from relayd.sinks import SinkOptions, parse_sink_spec
from relayd.sinks.harel.sink import HarelSink

#: Due timers: whole seconds plus fractions that print differently as str(float) and as JSON.
FIRE_ATS = (1_700_000_000.25, 1_700_000_123.1, 1_699_999_999.0)
#: Raw outbox event texts harel's relay loads and dumps again: extras, times, spacing, no data.
RAW_EVENTS = (
    '{"kind": "Raw", "id": "raw-1", "extra": [1, 2], '
    '"data": {"a": [1, 2.5, "\\u00e9"], "big": 12345678901234567890}}',
    '{"id":"raw-2","kind":"Stamped","created_time":"2024-05-01T12:00:00+00:00","data":{}}',
    '{\n  "id": "raw-3",\n  "kind": "Spaced"\n}',
)


async def seed(client: aioredis.Redis, prefix: str) -> set[str]:
    """Write the backlog under ``prefix`` with harel's store; the groups it targets."""
    store = HarelStore(client, prefix=prefix)
    targets = {
        "t-high": HarelExecution(id="t-high", definition_id="m", priority=3),
        "t-top": HarelExecution(id="t-top", definition_id="m", priority=4),
        "t-low": HarelExecution(id="t-low", definition_id="m"),
        "t-tiered": HarelExecution(id="t-tiered", definition_id="m", priority=4),
    }
    for exe in targets.values():
        await store.save(exe)
    # a group that already has a tier keeps it, whatever its execution's priority now is
    await client.hset(f"{prefix}:prio", "t-tiered", 1)
    emitter = HarelExecution(id="emitter", definition_id="m", priority=2)
    order = ["t-high", "t-low", None, "ghost", "t-top", "t-high", "t-tiered", "ghost", "t-high", None]
    emits = [
        (target, HarelEvent(id=f"ev-{n}", kind="Go", data={"n": n, "x": n / 3, "s": "é"}))
        for n, target in enumerate(order)
    ]
    await store.commit(emitter, emits)
    # One timer per execution: harel's worker publishes due timers concurrently, so the order
    # of two in one queue is not defined.
    for n, fire_at in enumerate(FIRE_ATS):
        sleeper = HarelExecution(id=f"sleeper-{n}", definition_id="m", priority=2 * n)
        await store.commit(sleeper, [], timers=(HarelTimerOp("schedule", f"root.wait{n}", fire_at),))
    await client.zadd(f"{prefix}:timers", {"gone\x00root.wait": FIRE_ATS[0]})
    for n, text in enumerate(RAW_EVENTS):
        seq = await client.incr(f"{prefix}:outbox:seq")
        target = "t-low" if n % 2 else "raw-target"
        await client.hset(f"{prefix}:outbox", str(seq), orjson.dumps({"t": target, "e": text}))
    sleepers = {f"sleeper-{n}" for n in range(len(FIRE_ATS))}
    return {t for t in order if t is not None} | sleepers | {"gone", "raw-target"}


async def transport_state(client: aioredis.Redis, prefix: str) -> dict[str, Any]:
    """Every transport key under ``prefix``, named without it, with its contents."""
    state: dict[str, Any] = {}
    for pattern in (f"{prefix}:q:*", f"{prefix}:ready:*", f"{prefix}:prio"):
        async for raw_key in client.scan_iter(match=pattern, count=1000):
            key = raw_key.decode()
            name = key[len(prefix) :]
            kind = (await client.type(key)).decode()
            if kind == "list":
                state[name] = await client.lrange(key, 0, -1)
            elif kind == "hash":
                state[name] = await client.hgetall(key)
            else:
                state[name] = await client.zrange(key, 0, -1, withscores=True)
    return state


async def relay_through_the_sink(client: aioredis.Redis, prefix: str) -> HarelSink:
    sink = HarelSink(
        parse_sink_spec("harel:redis://127.0.0.1:6379/0?handoff_delay=0&timer_grace=0&timer_hold=0"),
        SinkOptions(),
        client=client,
    )
    await run_relay(
        SweepOptions(prefixes=(prefix,), once=True),
        redis=client,
        sinks=dict.fromkeys(KINDS, sink),
        metrics=RelayMetrics(CollectorRegistry()),
        health=Health(),
        stop=asyncio.Event(),
    )
    return sink


async def test_the_sink_writes_exactly_what_harels_relay_writes(
    async_client: aioredis.Redis, prefix: str
) -> None:
    """Queues, priorities and ready sets are equal under both prefixes, and hold every event."""
    ours, theirs = f"{prefix}_relayd", f"{prefix}_harel"
    groups = await seed(async_client, ours)
    await seed(async_client, theirs)

    sink = await relay_through_the_sink(async_client, ours)
    await drain_with(async_client, theirs, "outbox")
    await drain_with(async_client, theirs, "timer")

    expected = await transport_state(async_client, theirs)
    actual = await transport_state(async_client, ours)
    assert actual == expected
    assert {name.removeprefix(":q:") for name in expected if name.startswith(":q:")} == groups
    assert sum(len(v) for k, v in expected.items() if k.startswith(":q:")) == 8 + 3 + 4
    assert sink.untargeted_total == 2
    assert await async_client.hlen(f"{ours}:outbox") == 0
    assert await async_client.zcard(f"{ours}:timers") == 0


async def test_every_due_timer_is_published_before_harel_would_fire_it(
    async_client: aioredis.Redis, prefix: str
) -> None:
    """The timers harel's worker would fire now are all queued by the relay, as Timeout events."""
    await seed(async_client, prefix)
    due = await HarelStore(async_client, prefix=prefix).due_timers(time.time())

    await relay_through_the_sink(async_client, prefix)

    queued = {
        (group, orjson.loads(payload)["id"])
        for group in {eid for eid, _, _ in due}
        for payload in await async_client.lrange(f"{prefix}:q:{group}", 0, -1)
    }
    assert len(due) == len(FIRE_ATS) + 1  # every seeded timer (and "gone"'s): the check below is not empty
    assert {(eid, f"timeout:{eid}:{path}:{fire_at}") for eid, path, fire_at in due} <= queued


def test_relayd_bench_measures_the_sink_against_harels_relay() -> None:
    """``relayd bench --sink harel:...`` finds this baseline: a relay draining, not a client."""
    found = baseline_for("harel:redis://127.0.0.1:6379/0")

    assert found is not None
    assert (found.publish, found.drain_backlog) == (None, drain_backlog)
