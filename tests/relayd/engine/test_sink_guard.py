"""A sink's guard in the sweeper: the breaker keeps an outage's backlog, per-key order is the
engine's, whatever the sink returns."""

from __future__ import annotations

import random
from collections.abc import Sequence

import pytest
from prometheus_client import CollectorRegistry
from structlog.testing import capture_logs

from relayd.engine.options import SweepOptions
from relayd.engine.sink_guard import guards_for
from relayd.engine.sweeper import Sweeper
from relayd.observability.health import Health
from relayd.observability.metrics import RelayMetrics
from relayd.sinks.base import DELIVERED, Outcome, Retry
from relayd.sinks.memory import MemorySink
from relayd.state.deadletters import list_dead_letters
from store import AsyncRedisStore

pytestmark = pytest.mark.usefixtures("backend")

DOWN = Retry("webhook connection error (ClientConnectorError)")


def _sweeper(client, prefix, clock, sink, registry, **options):
    sinks = {"outbox": sink, "spawn": sink, "timer": sink}
    metrics = RelayMetrics(registry)
    opts = SweepOptions(
        prefixes=(prefix,),
        **{"batch": 100, "backoff_base_s": 0.1, "backoff_cap_s": 0.2, "max_attempts": 2, **options},
    )
    guards = guards_for(sinks, policy=opts.breaker, metrics=metrics, clock=clock)
    sweeper = Sweeper(
        AsyncRedisStore(client, prefix=prefix),
        sinks=sinks,
        options=opts,
        metrics=metrics,
        clock=clock,
        rng=random.Random(1),
        guards=guards,
    )
    return sweeper, guards["outbox"]


async def test_an_outage_across_targets_opens_the_breaker_and_charges_and_buries_nothing(
    async_client, prefix, seeder, clock
):
    """Every target fails for a long while (--max-attempts 2): nothing dead-lettered, a probe of
    a few entries per cool-down, everything delivered once the sink is back."""
    for i in range(20):
        await seeder.outbox(f"t{i % 5}", f"e{i}")
    up = {"now": False}
    sink = MemorySink(lambda env: DELIVERED if up["now"] else DOWN)
    registry = CollectorRegistry()
    sweeper, guard = _sweeper(async_client, prefix, clock, sink, registry)
    health = Health()
    health.watch_breakers({guard.name: guard.open_reason})
    health.redis_ok()
    await sweeper.start()

    with capture_logs() as logs:
        for _ in range(60):  # a minute of passes, one a second, while the sink is down
            await sweeper.run_pass()
            clock.advance(1.0)
        attempted_while_down = len(sink.attempted)
        readiness = health.ready()
        up["now"] = True
        for _ in range(40):
            await sweeper.run_pass()
            clock.advance(1.0)

    dead = await list_dead_letters(async_client, sweeper.store.keyspace, "outbox")
    assert dead == []
    assert sorted(e.body["event"]["id"] for e in sink.delivered) == sorted(f"e{i}" for i in range(20))
    assert await async_client.hlen(sweeper.store.keyspace.outbox) == 0
    # one batch of 20 before it opened, then probes of at most 3 entries, ever rarer
    assert attempted_while_down <= 20 + 3 * 8
    assert not readiness.ok
    assert readiness.reason.startswith(("sink memory open since ", "sink memory half-open"))
    assert DOWN.error in readiness.reason
    assert health.ready().ok
    events = [entry["event"] for entry in logs if entry["event"].startswith("sink_breaker_")]
    assert events[0] == "sink_breaker_open"
    assert events[-1] == "sink_breaker_closed"
    (closed,) = [entry for entry in logs if entry["event"] == "sink_breaker_closed"]
    assert "error" not in closed  # the error that opened it is over
    assert closed["duration_s"] >= 60  # held from the first opening to the close, not 0.0
    assert "sink_breaker_half_open" in events
    transitions = registry.get_sample_value(
        "relayd_sink_breaker_transitions_total", {"sink": "memory", "state": "open"}
    )
    assert transitions is not None
    assert transitions >= 2
    assert registry.get_sample_value("relayd_sink_breaker_state", {"sink": "memory", "state": "closed"}) == 1


async def test_a_poison_target_among_healthy_ones_is_dead_lettered_and_the_breaker_stays_closed(
    async_client, prefix, seeder, clock
):
    """One target always fails, the others are delivered: that target's entries are dead-lettered."""
    for i in range(12):
        await seeder.outbox(f"t{i % 4}", f"e{i}")
    sink = MemorySink(lambda env: DOWN if env.ordering_key == "t0" else DELIVERED)
    sweeper, guard = _sweeper(async_client, prefix, clock, sink, CollectorRegistry())
    await sweeper.start()

    for _ in range(30):
        await sweeper.run_pass()
        clock.advance(1.0)

    dead = await list_dead_letters(async_client, sweeper.store.keyspace, "outbox")
    assert sorted(d.envelope["event"]["id"] for d in dead) == ["e0", "e4", "e8"]
    assert len(sink.delivered) == 9
    assert guard.breaker.state == "closed"


class ConfirmsBehindAFailure:
    """A sink that sends everything at once (as a broker does): ``[Retry, Delivered]`` for one key."""

    name = "eager"

    def __init__(self) -> None:
        self.failed_once = False
        self.received: list[str] = []

    async def start(self) -> None: ...

    async def deliver(self, batch) -> Sequence[Outcome]:
        outcomes: list[Outcome] = []
        for envelope in batch:
            event_id = envelope.body["event"]["id"]
            if event_id == "first" and not self.failed_once:
                self.failed_once = True
                outcomes.append(Retry("broker nacked it"))
                continue
            self.received.append(event_id)
            outcomes.append(DELIVERED)
        return outcomes

    def ready(self) -> bool:
        return True

    async def close(self) -> None: ...


async def test_an_entry_confirmed_behind_a_failed_one_of_its_key_is_redelivered_after_it(
    async_client, prefix, seeder, clock
):
    """[Retry, Delivered] for one key: the second is not acked, and comes again after the first."""
    await seeder.outbox("k", "first")
    await seeder.outbox("k", "second")
    await seeder.outbox("other", "free")
    sink = ConfirmsBehindAFailure()
    sweeper, _ = _sweeper(async_client, prefix, clock, sink, CollectorRegistry(), max_attempts=5)
    await sweeper.start()

    for _ in range(5):
        await sweeper.run_pass()
        clock.advance(1.0)

    assert sink.received == ["second", "free", "first", "second"]
    assert await async_client.hlen(sweeper.store.keyspace.outbox) == 0


async def test_probes_rotate_so_targets_that_always_fail_do_not_keep_others_waiting(
    async_client, prefix, seeder, clock
):
    """Eight targets fail for good and open the breaker; a healthy target's entries that arrive
    later still go in a probe and are delivered."""
    for i in range(8):
        await seeder.outbox(f"bad{i}", f"b{i}")
    sink = MemorySink(lambda env: DOWN if env.ordering_key.startswith("bad") else DELIVERED)
    sweeper, guard = _sweeper(async_client, prefix, clock, sink, CollectorRegistry(), max_attempts=100)
    await sweeper.start()
    for _ in range(5):
        await sweeper.run_pass()
        clock.advance(1.0)
    assert guard.breaker.state != "closed"
    await seeder.outbox("good", "g0")
    await seeder.outbox("good", "g1")

    for _ in range(120):
        await sweeper.run_pass()
        clock.advance(1.0)

    assert [e.body["event"]["id"] for e in sink.delivered] == ["g0", "g1"]


async def test_a_one_shot_run_ends_when_the_breaker_opens_leaving_the_backlog(
    async_client, prefix, seeder, clock
):
    """``sweep --once`` against a sink that is down: drained (nothing more it may do), nothing
    dead-lettered, the entries still in Redis."""
    for i in range(30):
        await seeder.outbox(f"t{i % 3}", f"e{i}")
    sink = MemorySink(lambda env: DOWN)
    sweeper, guard = _sweeper(async_client, prefix, clock, sink, CollectorRegistry(), batch=10, once=True)
    await sweeper.start()

    results = []
    for _ in range(3):
        results.append(await sweeper.run_pass())
        clock.advance(0.5)  # past the first retry's backoff, short of the breaker's cool-down

    assert guard.breaker.state == "open"
    assert results[-1].drained
    assert await list_dead_letters(async_client, sweeper.store.keyspace, "outbox") == []
    assert await async_client.hlen(sweeper.store.keyspace.outbox) == 30
