"""The harel sink beside a live harel: children made with harel's own code, and the handoff.

Over a real redis-server. A spawn becomes the child harel's relay would make (an invoked
machine with its context defaults, started at once); without definitions the sink refuses to be
the spawns' sink. Outbox entries and timers harel has handled meanwhile are not published again;
a timer waits while its workflow has events queued in harel's transport.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest
import redis.asyncio as aioredis
from harel.engine.aio_store import AsyncRedisStore
from harel.engine.execution import Execution, Status
from harel.engine.store import TimerOp
from prometheus_client import CollectorRegistry
from rich.console import Console
from support.harel_app import write_definitions
from support.redis_server import RedisServer

from relayd.cli.sweep import resolve_sinks
from relayd.config.settings import load_settings
from relayd.errors import ConfigError
from relayd.sinks import DELIVERED, Permanent, Retry, SinkOptions, parse_sink_spec
from relayd.sinks.harel.sink import HarelSink
from relayd.status.report import collect_status, render_table

from .conftest import RELAYED_AT, outbox, spawn, timer

LATER_S = RELAYED_AT + 100.0  # the sinks' clock: every entry is past its handoff delay and grace


@pytest.fixture
async def client(redis_server: RedisServer) -> AsyncIterator[aioredis.Redis]:
    client = aioredis.Redis(port=redis_server.port)
    yield client
    await client.aclose()


async def _sink(url: str, params: str, clock: float = LATER_S) -> HarelSink:
    sink = HarelSink(parse_sink_spec(f"harel:{url}?{params}"), SinkOptions(), clock=lambda: clock)
    await sink.start()
    return sink


async def _order(client: aioredis.Redis, prefix: str, priority: int = 3) -> Execution:
    """An ``order`` in its ``Work`` fork, saved through harel's own store."""
    parent = Execution(id="o1", definition_id="order", status=Status.RUNNING, priority=priority)
    parent.active_path = "Work"
    await AsyncRedisStore(client, prefix=prefix).save(parent)
    return parent


async def test_spawns_create_children_as_harel_does(
    redis_server: RedisServer, client: aioredis.Redis, prefix: str, tmp_path: Path
) -> None:
    """An invoked courier gets its context defaults and runs to its end at once; a region
    starts in its initial state with its timeout armed; both at the parent's priority. A
    second delivery leaves them alone."""
    definitions = write_definitions(tmp_path / "defs")
    sink = await _sink(redis_server.url, f"definitions={definitions}&handoff_delay=0")
    await _order(client, prefix)
    courier = "o1:Work.Shipping:0:Work.Shipping.Booking:0"
    batch = [
        spawn(prefix, 1, "o1", courier, root_path="", context={"__invoke_fqn__": "courier"}),
        spawn(prefix, 2, "o1", "o1:Work.Payment:0", root_path="Work.Payment", context={}),
    ]

    first = await sink.deliver(batch)
    second = await sink.deliver(batch)
    await sink.close()

    store = AsyncRedisStore(client, prefix=prefix)
    child = await store.load(courier)
    region = await store.load("o1:Work.Payment:0")
    assert list(first) == list(second) == [DELIVERED, DELIVERED]
    assert child is not None
    assert region is not None
    assert (child.definition_id, child.definition_fqn, child.status) == ("courier", "courier", Status.DONE)
    assert child.context == {"tries": 2, "note": "by-courier"}
    assert (child.version, child.priority, child.parent_id) == (1, 3, "o1")
    assert (region.active_path, region.status, region.priority) == (
        "Work.Payment.AwaitPay",
        Status.RUNNING,
        3,
    )
    finished = [entry.event for entry in await store.pending_outbox()]
    assert [(event.kind, event.data.get("tries")) for event in finished] == [("Finished", 2)]
    armed = await client.zrange(f"{prefix}:timers", 0, -1)
    assert armed == [b"o1:Work.Payment:0\x00Work.Payment.AwaitPay"]


async def test_a_spawn_whose_parent_is_gone_or_machine_unknown_is_permanent(
    redis_server: RedisServer, client: aioredis.Redis, prefix: str, tmp_path: Path
) -> None:
    sink = await _sink(
        redis_server.url, f"definitions={write_definitions(tmp_path / 'defs')}&handoff_delay=0"
    )
    await _order(client, prefix)

    outcomes = await sink.deliver(
        [
            spawn(prefix, 1, "gone", "kid", root_path="", context={}),
            spawn(prefix, 2, "o1", "o1:x", root_path="", context={"__invoke_fqn__": "nosuch"}),
        ]
    )
    await sink.close()

    assert outcomes[0] == Permanent("harel spawn: parent execution not found")
    assert isinstance(outcomes[1], Permanent)
    assert await client.exists(f"{prefix}:exe:kid", f"{prefix}:exe:o1:x") == 0


def test_without_definitions_the_sink_refuses_spawns_unless_they_go_elsewhere(tmp_path: Path) -> None:
    """One ConfigError line naming the option; with --spawn-sink elsewhere it is fine."""
    url = "harel:redis://127.0.0.1:6379/0"

    with pytest.raises(ConfigError) as info:
        resolve_sinks(load_settings(sink=url))
    sinks = resolve_sinks(load_settings(sink=url, spawn_sink="null"))

    assert "definitions=DIR" in str(info.value)
    assert "\n" not in str(info.value)
    assert sinks["spawn"] is not sinks["outbox"]
    with pytest.raises(ConfigError, match="not a directory"):
        parse_and_build(f"{url}?definitions={tmp_path / 'missing'}")


def parse_and_build(spec: str) -> HarelSink:
    return HarelSink(parse_sink_spec(spec), SinkOptions())


async def test_entries_harel_relayed_meanwhile_are_not_published_again(
    redis_server: RedisServer, client: aioredis.Redis, prefix: str
) -> None:
    """After the handoff delay, an entry still in harel's outbox is published (picked up); one
    harel's relay acked is Delivered without a publish; both are counted, in the metric and in
    the status hash."""
    await client.hset(f"{prefix}:outbox", "2", "{}")  # seq 2 is still pending; seq 1 harel relayed
    sink = await _sink(redis_server.url, "handoff_delay=1")
    registry = CollectorRegistry()
    sink.register_metrics(registry)

    outcomes = await sink.deliver([outbox(prefix, 1, "a"), outbox(prefix, 2, "b")])
    await sink.close()

    def entries(by: str) -> float | None:
        labels = {"prefix": prefix, "kind": "outbox", "by": by}
        return registry.get_sample_value("relayd_harel_entries_total", labels)

    assert list(outcomes) == [DELIVERED, DELIVERED]
    assert await client.llen(f"{prefix}:q:a") == 0
    assert await client.llen(f"{prefix}:q:b") == 1
    assert (entries("harel"), entries("relayd")) == (1.0, 1.0)
    report = await collect_status(client, prefix, now=LATER_S)
    assert report.harel == {"outbox:harel": 1, "outbox:relayd": 1}
    shown = Console(width=200, record=True)
    shown.print(render_table([report]))
    assert "outbox: relayd=1 harel=1" in shown.export_text()


async def test_the_handoff_waits_until_entries_are_old_enough(
    redis_server: RedisServer, client: aioredis.Redis, prefix: str
) -> None:
    """Read at RELAYED_AT, a 0.3 s handoff: the sink looks only once they are that old."""
    await client.hset(f"{prefix}:outbox", "1", "{}")
    sink = HarelSink(
        parse_sink_spec(f"harel:{redis_server.url}?handoff_delay=0.3"),
        SinkOptions(),
        clock=_clock_from(RELAYED_AT),
    )
    await sink.start()

    outcomes = await sink.deliver([outbox(prefix, 1, "a")])
    await sink.close()

    assert list(outcomes) == [DELIVERED]
    assert await client.llen(f"{prefix}:q:a") == 1


def _clock_from(start: float):  # type: ignore[no-untyped-def]
    import time

    began = time.monotonic()
    return lambda: start + (time.monotonic() - began)


async def test_a_timer_waits_while_its_workflow_has_events_queued(
    redis_server: RedisServer, client: aioredis.Redis, prefix: str
) -> None:
    """A region's timer while its parent has an event queued: held, then Retry after the hold;
    once the parent's queue is empty it goes out; a timer harel fired or cancelled meanwhile is
    Delivered without a publish."""
    store = AsyncRedisStore(client, prefix=prefix)
    await _order(client, prefix)
    region = Execution(id="o1:r", definition_id="order", status=Status.RUNNING, parent_id="o1", priority=3)
    await store.commit(region, [], timers=(TimerOp("schedule", "Work.Payment.AwaitPay", 1.5),))
    await client.rpush(f"{prefix}:q:o1", b"{}")  # a Paid still queued at the parent
    sink = await _sink(redis_server.url, "timer_grace=0.01&timer_hold=0.3")
    due = timer(prefix, "o1:r", "Work.Payment.AwaitPay", 1.5)

    busy = await sink.deliver([due])
    await client.delete(f"{prefix}:q:o1")
    idle = await sink.deliver([due])
    cancelled = await sink.deliver([timer(prefix, "o1:r", "Work.Other", 2.0)])
    await sink.close()

    assert isinstance(busy[0], Retry)
    assert busy[0].error == "harel workflow busy (events queued)"
    assert list(idle) == list(cancelled) == [DELIVERED]
    assert await client.llen(f"{prefix}:q:o1:r") == 1  # the armed one, once
    assert sink.handoffs.of("relayd", "timer") == 1
    assert sink.handoffs.of("harel", "timer") == 1
