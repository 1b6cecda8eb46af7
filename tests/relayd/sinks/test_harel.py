"""The harel sink: what it publishes is read back with harel's own transport and store classes.

That its bytes equal harel's own relay's is ``test_harel_parity.py``; the event JSON itself is
``test_harel_wire.py``.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import pytest
import redis.asyncio as aioredis
from harel.engine.aio_store import AsyncRedisStore
from harel.engine.aio_transport import AsyncRedisTransport
from harel.engine.core import timeout_event
from harel.engine.execution import Execution
from structlog.testing import capture_logs
from support.proxy import TcpProxy
from support.redis_server import RedisServer, free_port

from relayd.sinks import DELIVERED, Permanent, Retry, SinkOptions, parse_sink_spec
from relayd.sinks.harel.sink import HarelSink
from relayd.sinks.per_key import HELD_BACK

from .conftest import outbox, spawn, timer

NOW_S = 1_750_000_000.0


@pytest.fixture
async def harel_sink(
    backend: str, async_client: aioredis.Redis, request: pytest.FixtureRequest
) -> AsyncIterator[HarelSink]:
    """A started sink: over the real server by URL (its own bounded pool), over fakeredis injected."""
    if backend == "real":
        server: RedisServer = request.getfixturevalue("redis_server")
        sink = HarelSink(
            parse_sink_spec(
                f"harel:{server.url}?max_connections=8&handoff_delay=0&timer_grace=0&timer_hold=0"
            ),
            SinkOptions(),
            clock=lambda: NOW_S,
        )
    else:
        spec = parse_sink_spec("harel:redis://127.0.0.1:6379/0?handoff_delay=0&timer_grace=0&timer_hold=0")
        sink = HarelSink(spec, SinkOptions(), clock=lambda: NOW_S, client=async_client)
    await sink.start()
    yield sink
    await sink.close()


async def save(client: aioredis.Redis, prefix: str, **fields: Any) -> Execution:
    exe = Execution(definition_id="machine", **fields)
    await AsyncRedisStore(client, prefix=prefix).save(exe)
    return exe


async def drain(client: aioredis.Redis, prefix: str, min_priority: int = 0) -> list[tuple[str, Any]]:
    """Claim and ack everything in harel's transport, the way a harel worker does."""
    transport = AsyncRedisTransport(client, prefix=prefix)
    got: list[tuple[str, Any]] = []
    while (lease := await transport.claim("test-worker", 30.0, min_priority)) is not None:
        got.append((lease.group_id, lease.event))
        await transport.ack(lease)
    return got


async def test_outbox_events_land_in_order_at_the_target_priority(
    harel_sink: HarelSink, async_client: aioredis.Redis, prefix: str
) -> None:
    """Each targeted event is in the target's group, in order, claimable at the target's priority."""
    target = await save(async_client, prefix, priority=3)
    events = [{"id": f"e{n}", "kind": "Go", "data": {"n": n}} for n in range(5)]
    batch = [outbox(prefix, n, target.id, event) for n, event in enumerate(events)]

    outcomes = await harel_sink.deliver(batch)

    assert list(outcomes) == [DELIVERED] * 5
    assert await async_client.hget(f"{prefix}:prio", target.id) == b"3"
    got = await drain(async_client, prefix, min_priority=3)
    assert [group for group, _ in got] == [target.id] * 5
    assert [event.model_dump(include={"id", "kind", "data"}) for _, event in got] == events


async def test_unknown_target_is_published_at_priority_zero(
    harel_sink: HarelSink, async_client: aioredis.Redis, prefix: str
) -> None:
    """A target with no execution record still gets the event, at priority 0 (as harel's relay does)."""
    outcomes = await harel_sink.deliver([outbox(prefix, 1, "ghost")])

    assert list(outcomes) == [DELIVERED]
    assert await async_client.hget(f"{prefix}:prio", "ghost") == b"0"
    assert [group for group, _ in await drain(async_client, prefix)] == ["ghost"]


async def test_timer_event_equals_harels_timeout_event(
    harel_sink: HarelSink, async_client: aioredis.Redis, prefix: str
) -> None:
    """A timer is published as exactly timeout_event(id, path, fire_at), at the execution's priority."""
    exe = await save(async_client, prefix, priority=2)
    fire_at = 1_700_000_123.25

    outcomes = await harel_sink.deliver([timer(prefix, exe.id, "root.wait", fire_at)])

    got = await drain(async_client, prefix, min_priority=2)
    assert list(outcomes) == [DELIVERED]
    assert got == [(exe.id, timeout_event(exe.id, "root.wait", fire_at))]
    assert got[0][1].model_dump() == timeout_event(exe.id, "root.wait", fire_at).model_dump()


async def test_untargeted_outbox_is_acked_unpublished_and_counted(
    harel_sink: HarelSink, async_client: aioredis.Redis, prefix: str
) -> None:
    """No target: Delivered, nothing in the transport, the counter and a debug line say so."""
    with capture_logs() as logs:
        outcomes = await harel_sink.deliver([outbox(prefix, 1, None), outbox(prefix, 2, None)])

    assert list(outcomes) == [DELIVERED, DELIVERED]
    assert harel_sink.untargeted_total == 2
    assert await drain(async_client, prefix) == []
    assert [entry["event"] for entry in logs] == ["untargeted_outbox"] * 2
    assert logs[0]["log_level"] == "debug"


async def test_a_spawn_without_definitions_creates_nothing(
    harel_sink: HarelSink, async_client: aioredis.Redis, prefix: str
) -> None:
    """No machine definitions: no child made wrongly (a sweep refuses this sink for spawns at
    start-up; children with definitions: test_harel_handoff.py)."""
    parent = await save(async_client, prefix, priority=4)
    envelope = spawn(prefix, 1, parent.id, f"{parent.id}.r1", root_path="root.r1", context={"k": 1})

    outcomes = await harel_sink.deliver([envelope])

    assert list(outcomes) == [Permanent("harel spawn: the sink has no machine definitions (definitions=DIR)")]
    assert await AsyncRedisStore(async_client, prefix=prefix).load(f"{parent.id}.r1") is None


async def test_malformed_event_is_permanent(harel_sink: HarelSink, prefix: str) -> None:
    """An event harel cannot validate is Permanent; other targets still flow."""
    bad = outbox(prefix, 1, "a", {"id": "x", "kind": 7, "data": "not a dict"})

    outcomes = await harel_sink.deliver([bad, outbox(prefix, 2, "b")])

    assert isinstance(outcomes[0], Permanent)
    assert outcomes[0].reason.startswith("harel rejected the entry")
    assert outcomes[1] == DELIVERED


async def test_a_batch_of_many_targets_is_one_script_call(
    harel_sink: HarelSink, async_client: aioredis.Redis, prefix: str
) -> None:
    """100 targets, 3 events each, interleaved: all land in per-target order, in one round-trip."""
    batch = [outbox(prefix, 100 * r + n, f"t{n}") for r in range(3) for n in range(100)]
    calls = []
    publish = harel_sink._publish

    async def counted(**kwargs: Any) -> Any:
        calls.append(kwargs)
        return await publish(**kwargs)

    harel_sink._publish = counted

    outcomes = await harel_sink.deliver(batch)

    got = await drain(async_client, prefix)
    assert list(outcomes) == [DELIVERED] * 300
    assert len(calls) == 1
    by_target: dict[str, list[int]] = {}
    for group, event in got:
        by_target.setdefault(group, []).append(event.data["n"])
    assert by_target == {f"t{n}": [n, 100 + n, 200 + n] for n in range(100)}


async def test_a_group_redis_refuses_is_retry_for_its_own_entries_only(
    harel_sink: HarelSink, async_client: aioredis.Redis, prefix: str
) -> None:
    """A target whose queue key is not a list: its entries Retry (the first says why), the rest land."""
    await async_client.set(f"{prefix}:q:broken", "not a list")
    batch = [
        outbox(prefix, 1, "a"),
        outbox(prefix, 2, "broken"),
        outbox(prefix, 3, "broken"),
        outbox(prefix, 4, "b"),
    ]

    outcomes = await harel_sink.deliver(batch)

    assert [outcomes[0], outcomes[3]] == [DELIVERED, DELIVERED]
    assert isinstance(outcomes[1], Retry)
    assert "WRONGTYPE" in outcomes[1].error
    assert outcomes[2] == Retry(error=HELD_BACK)
    assert sorted(group for group, _ in await drain(async_client, prefix)) == ["a", "b"]
    assert await async_client.hget(f"{prefix}:prio", "broken") is None
    assert harel_sink.ready()


async def test_an_unreadable_execution_record_is_retry_for_its_group(
    harel_sink: HarelSink, async_client: aioredis.Redis, prefix: str
) -> None:
    """The priority cannot be read from a record that is not JSON: Retry, nothing queued for it."""
    await async_client.set(f"{prefix}:exe:garbled", "{not json")

    outcomes = await harel_sink.deliver([outbox(prefix, 1, "garbled"), outbox(prefix, 2, "fine")])

    assert isinstance(outcomes[0], Retry)
    assert "not a JSON object" in outcomes[0].error
    assert outcomes[1] == DELIVERED
    assert [group for group, _ in await drain(async_client, prefix)] == ["fine"]


async def test_a_refused_event_holds_back_only_the_later_entries_of_its_target(
    harel_sink: HarelSink, async_client: aioredis.Redis, prefix: str
) -> None:
    """Before it: published; after it, same target: held back; other targets: published."""
    bad = outbox(prefix, 2, "a", {"id": "x", "kind": 7})
    batch = [outbox(prefix, 1, "a"), bad, outbox(prefix, 3, "a"), outbox(prefix, 4, "b")]

    outcomes = await harel_sink.deliver(batch)

    assert outcomes[0] == DELIVERED
    assert isinstance(outcomes[1], Permanent)
    assert outcomes[2] == Retry(error=HELD_BACK)
    assert outcomes[3] == DELIVERED
    got = await drain(async_client, prefix)
    assert sorted((group, event.id) for group, event in got) == [("a", "ev-1"), ("b", "ev-4")]


async def test_a_store_on_another_redis_gives_the_priorities(redis_server: RedisServer, prefix: str) -> None:
    """With ``store=``, priorities come from the store's records, the events go to the transport."""
    transport = aioredis.Redis(port=redis_server.port, db=2)
    store = aioredis.Redis(port=redis_server.port, db=3)
    await save(store, prefix, id="hi", priority=3)
    await store.set(f"{prefix}:exe:garbled", "[]")
    spec = f"harel:redis://127.0.0.1:{redis_server.port}/2?store=redis://127.0.0.1:{redis_server.port}/3&handoff_delay=0&timer_grace=0&timer_hold=0"
    sink = HarelSink(parse_sink_spec(spec), SinkOptions())
    await sink.start()

    outcomes = await sink.deliver(
        [outbox(prefix, 1, "hi"), outbox(prefix, 2, "garbled"), outbox(prefix, 3, "new")]
    )
    await sink.close()

    assert outcomes[0] == outcomes[2] == DELIVERED
    assert isinstance(outcomes[1], Retry)
    assert await transport.hgetall(f"{prefix}:prio") == {b"hi": b"3", b"new": b"0"}
    assert [group for group, _ in await drain(transport, prefix, min_priority=3)] == ["hi"]
    assert await store.keys(f"{prefix}:q:*") == []
    await transport.aclose()
    await store.aclose()


async def test_a_cut_connection_is_retry_and_not_ready_until_redis_answers_again(
    redis_server: RedisServer, prefix: str
) -> None:
    """Redis gone: every entry Retry, not ready; back: the same batch lands and ready again."""
    with TcpProxy(redis_server.port) as proxy:
        sink = HarelSink(
            parse_sink_spec(f"harel:{proxy.url}?handoff_delay=0&timer_grace=0&timer_hold=0"), SinkOptions()
        )
        await sink.start()
        batch = [outbox(prefix, 1, "a"), outbox(prefix, 2, None), timer(prefix, "a", "p", 1.5)]
        proxy.set_mode("cut")
        during = await sink.deliver(batch)
        ready_during = sink.ready()
        proxy.set_mode("pass")
        after = await sink.deliver(batch)
        await sink.close()

    client = aioredis.Redis(port=redis_server.port)
    assert [type(o) for o in during] == [Retry, type(DELIVERED), Retry]
    assert not ready_during
    assert list(after) == [DELIVERED] * 3
    assert sink.ready()
    assert len(await drain(client, prefix)) == 2
    await client.aclose()


async def test_unreachable_redis_is_retry_and_not_ready(prefix: str) -> None:
    """Connection refused: Retry per entry, ready() false, no URL in the error."""
    port = free_port()
    sink = HarelSink(
        parse_sink_spec(f"harel:redis://127.0.0.1:{port}/0?handoff_delay=0&timer_grace=0&timer_hold=0"),
        SinkOptions(),
    )
    await sink.start()

    outcomes = await sink.deliver([outbox(prefix, 1, "a")])
    await sink.close()

    assert not sink.ready()
    assert isinstance(outcomes[0], Retry)
    assert str(port) not in outcomes[0].error
