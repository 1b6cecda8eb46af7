"""Timer reads and the timer prefetch: fire_at order, nothing twice, nothing starved.

The pure planner and merger first, then reads over fakeredis and real Redis, then the
sweeper's prefetch of the next due window while the sink delivers the last one, racing an
engine that arms early timers and cancels others between reads.
"""

from __future__ import annotations

import asyncio
import random
from collections.abc import Awaitable, Callable, Sequence

import pytest
from prometheus_client import CollectorRegistry

from relayd.engine.options import SweepOptions
from relayd.engine.sweeper import Sweeper
from relayd.engine.timer_reads import (
    ScoreRange,
    TimerRead,
    merge_timer_rows,
    plan_timer_read,
    read_due_timers,
    timer_rows,
)
from relayd.envelope import Envelope
from relayd.envelope.batch import Batch
from relayd.observability.metrics import RelayMetrics
from relayd.sinks.base import Outcome
from relayd.sinks.memory import MemorySink
from store import AsyncRedisStore, Fence, StoreFenced
from store.backlog import RawTimer
from store.keys import Keyspace, timer_member

NOW = 1_700_000_000.0


def _t(name: str, fire_at: float) -> RawTimer:
    return RawTimer(timer_member(name, "p").encode(), fire_at)


# --- pure ------------------------------------------------------------------------------------
def test_a_plain_read_takes_the_due_range_with_room_for_the_held_ones():
    held = [_t("h", NOW - 50)]

    read = plan_timer_read(now=NOW, limit=10, held=held, in_flight=())

    assert read == TimerRead((ScoreRange("-inf", repr(NOW), 11),), frozenset({held[0].member}), 10)


def test_a_prefetch_reads_before_the_in_flight_window_and_from_its_last_score_on():
    in_flight = [_t("a", NOW - 30), _t("b", NOW - 20), _t("c", NOW - 20)]
    held = [_t("h1", NOW - 90), _t("h2", NOW - 10)]

    read = plan_timer_read(now=NOW, limit=5, held=held, in_flight=in_flight)

    assert read.ranges == (
        ScoreRange("-inf", f"({NOW - 30!r}", 5 + 1),  # h1 may come back
        ScoreRange(repr(NOW - 20), repr(NOW), 5 + 2 + 1),  # b and c (the last score) and h2
    )
    assert read.skip == {t.member for t in [*in_flight, *held]}


def test_merge_keeps_range_order_drops_skipped_and_repeated_members_and_stops_at_the_limit():
    a, b, c, d = _t("a", 1.0), _t("b", 2.0), _t("c", 3.0), _t("d", 4.0)
    read = TimerRead((), frozenset({b.member}), 3)

    merged = merge_timer_rows(read, [[a, b], [RawTimer(a.member, 3.5), c, d]])

    assert merged == [a, c, d]


@pytest.mark.parametrize(
    ("reply", "expected"),
    [
        ([[b"x\x00p", 1.5], [b"y\x00p", 2.0]], [RawTimer(b"x\x00p", 1.5), RawTimer(b"y\x00p", 2.0)]),
        ([b"x\x00p", b"1.5", b"y\x00p", b"2"], [RawTimer(b"x\x00p", 1.5), RawTimer(b"y\x00p", 2.0)]),
        (["x\x00p", "1.5"], [RawTimer(b"x\x00p", 1.5)]),
        ([], []),
    ],
    ids=["resp3-pairs", "resp2-flat", "decoded-strings", "empty"],
)
def test_raw_replies_of_either_protocol_become_timers(reply, expected):
    assert timer_rows(reply) == expected


# --- reads over Redis ------------------------------------------------------------------------
@pytest.mark.usefixtures("backend")
async def test_a_read_returns_due_timers_in_fire_at_order_and_the_next_fire_at(async_client, prefix):
    key = Keyspace(prefix).timers
    timers = [_t(f"e{n}", NOW - 10 + n) for n in range(5)] + [_t("later", NOW + 7.25)]
    await async_client.zadd(key, {t.member: t.fire_at for t in timers})

    due, next_at = await read_due_timers(async_client, key, now=NOW - 7, limit=10, held=[timers[1]])

    assert [t.member for t in due] == [timers[0].member, timers[2].member, timers[3].member]
    assert [t.fire_at for t in due] == [NOW - 10, NOW - 8, NOW - 7]
    assert next_at == NOW - 6


@pytest.mark.usefixtures("backend")
async def test_a_prefetch_skips_the_timers_in_flight_and_finds_an_earlier_one_armed_meanwhile(
    async_client, prefix
):
    key = Keyspace(prefix).timers
    timers = [_t(f"e{n}", NOW - 100 + n) for n in range(6)]
    await async_client.zadd(key, {t.member: t.fire_at for t in timers})
    early = _t("early", NOW - 500)
    await async_client.zadd(key, {early.member: early.fire_at})  # armed after e0, e1 were read

    due, _ = await read_due_timers(async_client, key, now=NOW, limit=3, in_flight=timers[:2])

    assert due == [early, timers[2], timers[3]]


@pytest.mark.usefixtures("backend")
@pytest.mark.parametrize(("holder", "refused"), [("me", False), ("another", True), (None, True)])
async def test_a_fenced_read_hands_over_no_timer_unless_the_fence_holds(
    async_client, prefix, holder, refused
):
    key, guard = Keyspace(prefix).timers, f"{prefix}:relay:lease"
    timers = [_t(f"e{n}", NOW - 10 + n) for n in range(3)]
    await async_client.zadd(key, {t.member: t.fire_at for t in timers})
    if holder is not None:
        await async_client.set(guard, holder)
    fence = Fence(guard, "me")

    if refused:
        with pytest.raises(StoreFenced) as withheld:
            await read_due_timers(async_client, key, now=NOW, limit=10, fence=fence)
        assert withheld.value.withheld == 3
    else:
        due, _ = await read_due_timers(async_client, key, now=NOW, limit=10, fence=fence)
        assert due == timers
    assert await async_client.zcard(key) == 3


# --- the sweeper's timer prefetch ------------------------------------------------------------
class HookedSink(MemorySink):
    """A memory sink that runs ``during(n)`` while it holds its n-th batch (0-based)."""

    def __init__(self, during: Callable[[int], Awaitable[None]]) -> None:
        super().__init__()
        self.during = during

    async def deliver(self, batch: Batch) -> Sequence[Outcome]:
        await self.during(len(self.batches))
        return await super().deliver(batch)


def _sweeper(client, prefix, clock, sink, batch):
    return Sweeper(
        AsyncRedisStore(client, prefix=prefix),
        sinks={"outbox": sink, "spawn": sink, "timer": sink},
        options=SweepOptions(prefixes=(prefix,), batch=batch),
        metrics=RelayMetrics(CollectorRegistry()),
        clock=clock,
        rng=random.Random(1),
    )


async def _drain(sweeper: Sweeper, passes: int = 200) -> None:
    for _ in range(passes):
        result = await sweeper.run_pass()
        if not result.read and not result.attempted and not result.held:
            return
    raise AssertionError("the timers did not drain")


def _event_ids(envelopes: Sequence[Envelope]) -> list[str]:
    return [e.id for e in envelopes]


@pytest.mark.usefixtures("backend")
async def test_a_drain_with_prefetch_delivers_each_timer_once_in_fire_at_order(
    async_client, prefix, seeder, clock
):
    for n in range(11):
        await seeder.timer(f"e{n:02}", "p", clock.now() - 100 + n)
    sink = MemorySink()
    sweeper = _sweeper(async_client, prefix, clock, sink, batch=3)
    await sweeper.start()

    await sweeper.run_pass()
    [lane] = [lane for lane in sweeper.lanes if lane.kind == "timer"]
    prefetched = [raw.member for _, raw, _ in lane.read_ahead[0]] if lane.read_ahead else []
    await _drain(sweeper)

    fire_ats = [e.body["fire_at"] for e in sink.attempted]
    assert prefetched == [timer_member(f"e{n:02}", "p").encode() for n in (3, 4, 5)]
    assert len(sink.attempted) == 11  # nothing twice
    assert fire_ats == sorted(fire_ats)
    assert [len(b) for b in sink.batches] == [3, 3, 3, 2]
    assert await async_client.zcard(Keyspace(prefix).timers) == 0


@pytest.mark.usefixtures("backend")
async def test_a_timer_armed_early_during_a_long_drain_goes_within_two_batches(
    async_client, prefix, seeder, clock
):
    """Prefetch follows prefetch here: reading at an offset of the in-flight count would
    skip the early timer on every one of them, until the whole backlog had drained."""
    for n in range(30):
        await seeder.timer(f"e{n:02}", "p", clock.now() - 100 + n)

    async def arm_early(n: int) -> None:
        if n == 1:
            await seeder.timer("early", "p", clock.now() - 1000)

    sink = HookedSink(arm_early)
    sweeper = _sweeper(async_client, prefix, clock, sink, batch=3)
    await sweeper.start()

    await _drain(sweeper)

    batch_of = {e.body["execution_id"]: i for i, b in enumerate(sink.batches) for e in b}
    assert batch_of["early"] in (2, 3)
    assert sorted(batch_of) == sorted(["early", *(f"e{n:02}" for n in range(30))])
    assert len(sink.attempted) == 31


@pytest.mark.usefixtures("backend")
async def test_cancels_and_inserts_inside_the_window_between_reads_skip_nothing_for_good(
    async_client, prefix, seeder, clock
):
    for n in range(20):
        await seeder.timer(f"e{n:02}", "p", clock.now() - 100 + n * 2)
    key = Keyspace(prefix).timers
    cancelled = {"e04", "e05", "e09"}

    async def engine(n: int) -> None:
        if n == 1:  # e03..e05 are in flight, the prefetch of e06.. went out
            await async_client.zrem(key, *(timer_member(c, "p") for c in sorted(cancelled)))
            await seeder.timer("inside", "p", clock.now() - 100 + 7)  # between e03 and e04
            await seeder.timer("late", "p", clock.now() - 1)

    sink = HookedSink(engine)
    sweeper = _sweeper(async_client, prefix, clock, sink, batch=3)
    await sweeper.start()

    await _drain(sweeper)

    delivered = _event_ids(sink.attempted)
    names = [e.body["execution_id"] for e in sink.attempted]
    assert len(delivered) == len(set(delivered))
    expected = {f"e{n:02}" for n in range(20)} - cancelled | {"inside", "late"}
    assert set(names) - {"e04", "e05"} == expected  # e04, e05 were in flight when cancelled
    assert await async_client.zcard(key) == 0


async def test_a_racing_engine_loses_no_timer_and_gets_none_twice(redis_server, prefix, clock):
    """Real Redis only: the engine arms (early, inside and late fire_ats) and cancels while the relay
    drains with prefetch; every armed timer not cancelled is delivered exactly once."""
    import redis.asyncio as aioredis

    client = aioredis.Redis(port=redis_server.port)
    writer = aioredis.Redis(port=redis_server.port)
    key = Keyspace(prefix).timers
    now = clock.now()
    rng = random.Random(7)
    armed = {f"b{n:04}": now - 1000 + n * 0.01 for n in range(3000)}
    await writer.zadd(key, {timer_member(name, "p"): at for name, at in armed.items()})
    cancelled: set[str] = set()
    done = asyncio.Event()

    async def engine() -> None:
        for n in range(600):
            name = f"w{n:04}"
            at = now - rng.choice([2000.0, 990.0 + rng.random() * 20, 1.0])
            armed[name] = at
            await writer.zadd(key, {timer_member(name, "p"): at})
            if n % 3 == 0:
                victim = rng.choice(sorted(armed))
                if await writer.zrem(key, timer_member(victim, "p")):
                    cancelled.add(victim)
            await asyncio.sleep(0)
        done.set()

    sink = MemorySink()
    sweeper = _sweeper(client, prefix, clock, sink, batch=50)
    await sweeper.start()
    task = asyncio.create_task(engine())
    while not done.is_set():
        await sweeper.run_pass()
    await task
    await _drain(sweeper)
    await client.aclose()
    await writer.aclose()

    names = [e.body["execution_id"] for e in sink.attempted]
    assert len(names) == len(set(names))  # none twice
    assert set(armed) - cancelled <= set(names)  # none lost
    assert all(e.body["fire_at"] <= now for e in sink.attempted)  # none early
