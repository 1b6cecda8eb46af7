"""The sweeper's fast path keeps the semantics of the waiting line (over fakeredis and real Redis).

Fresh entries of a target with nothing held and no attempt record go straight to the sink;
everything else queues behind its target's head. These tests pin what must not change.
"""

from __future__ import annotations

import asyncio
import random

import pytest
from prometheus_client import CollectorRegistry
from redis.exceptions import ConnectionError as RedisConnectionError

from relayd.engine.options import SweepOptions
from relayd.engine.sweeper import CHECKPOINT_EVERY_S, Sweeper
from relayd.observability.metrics import RelayMetrics
from relayd.sinks.base import DELIVERED, Retry
from relayd.sinks.memory import MemorySink
from relayd.state.keys import RelayKeys
from store import AsyncRedisStore

pytestmark = pytest.mark.usefixtures("backend")


def _sweeper(client, prefix, clock, sink, **options):
    opts = SweepOptions(prefixes=(prefix,), **{"batch": 100, "backoff_base_s": 1.0, **options})
    return Sweeper(
        AsyncRedisStore(client, prefix=prefix),
        sinks={"outbox": sink, "spawn": sink, "timer": sink},
        options=opts,
        metrics=RelayMetrics(CollectorRegistry()),
        clock=clock,
        rng=random.Random(1),
    )


def _failing_first(failures: dict[str, int]) -> MemorySink:
    """A sink that answers Retry to each named event id as many times as given, then delivers."""

    def script(env):
        event_id = env.body["event"]["id"]
        if failures.get(event_id, 0) > 0:
            failures[event_id] -= 1
            return Retry("down")
        return DELIVERED

    return MemorySink(script)


def _ids(envelopes):
    return [e.body["event"]["id"] for e in envelopes]


async def test_first_time_deliveries_write_no_attempt_record_and_carry_the_delivery_stamp(
    async_client, prefix, seeder, clock
):
    for n in range(5):
        await seeder.outbox(f"T{n % 2}", f"e{n}")
    sink = MemorySink()
    sweeper = _sweeper(async_client, prefix, clock, sink)
    await sweeper.start()

    result = await sweeper.run_pass()

    keys = RelayKeys(sweeper.store.keyspace)
    assert result.delivered["outbox"] == 5
    assert _ids(sink.delivered) == ["e0", "e1", "e2", "e3", "e4"]
    assert {(e.attempt, e.body["attempt"], e.body["relayed_at"]) for e in sink.delivered} == {
        (1, 1, clock.now())
    }
    assert await async_client.exists(keys.attempts("outbox")) == 0
    assert await async_client.hlen(sweeper.store.keyspace.outbox) == 0


async def test_a_target_failing_on_the_fast_path_queues_its_later_entries_in_order(
    async_client, prefix, seeder, clock
):
    """A's head fails in pass one; A's entries read later wait behind it, B keeps flowing."""
    await seeder.outbox("A", "a1")
    await seeder.outbox("B", "b1")
    await seeder.outbox("A", "a2")
    sink = _failing_first({"a1": 1})
    sweeper = _sweeper(async_client, prefix, clock, sink)
    await sweeper.start()

    first = await sweeper.run_pass()
    await seeder.outbox("A", "a3")
    await seeder.outbox("B", "b2")
    second = await sweeper.run_pass()  # a1 still waits for its backoff: a3 must not overtake it
    clock.advance(10)
    third = await sweeper.run_pass()

    keys = RelayKeys(sweeper.store.keyspace)
    assert (first.retried["outbox"], first.held) == (1, 2)  # a1 retried, a2 held back (no attempt)
    assert _ids(sink.delivered) == ["b1", "b2", "a1", "a2", "a3"]
    assert [e.attempt for e in sink.delivered if e.body["event"]["id"] == "a1"] == [2]
    assert [e.attempt for e in sink.delivered if e.body["event"]["id"] == "a2"] == [1]
    assert (second.held, third.held) == (3, 0)
    assert await async_client.hlen(keys.attempts("outbox")) == 0  # forgotten once delivered


async def test_entries_with_an_attempt_record_go_through_the_line_after_a_restart(
    async_client, prefix, seeder, clock
):
    await seeder.outbox("A", "a1")
    await seeder.outbox("A", "a2")
    down = MemorySink(lambda env: Retry("down"))
    crashed = _sweeper(async_client, prefix, clock, down)
    await crashed.start()
    await crashed.run_pass()
    clock.advance(1000)

    sink = MemorySink()
    fresh = _sweeper(async_client, prefix, clock, sink)
    await fresh.start()
    result = await fresh.run_pass()

    assert _ids(sink.delivered) == ["a1", "a2"]
    assert [e.attempt for e in sink.delivered] == [2, 1]
    assert result.delivered["outbox"] == 2


async def test_a_window_prefetched_during_delivery_keeps_per_target_order(
    async_client, prefix, seeder, clock
):
    """The next window is read and built while the sink call goes out; a target that failed in
    that call still holds its later entries back."""
    for event_id, target in (("a1", "A"), ("b1", "B"), ("a2", "A"), ("b2", "B")):
        await seeder.outbox(target, event_id)
    sink = _failing_first({"a1": 1})
    sweeper = _sweeper(async_client, prefix, clock, sink, batch=2)
    await sweeper.start()

    await sweeper.run_pass()
    [outbox] = [lane for lane in sweeper.lanes if lane.kind == "outbox"]
    prefetched = [fresh[0] for fresh in outbox.read_ahead[0]]
    await sweeper.run_pass()  # a2 waits behind a1's backoff, b2 goes
    after_second = _ids(sink.delivered)
    clock.advance(10)
    for _ in range(3):
        await sweeper.run_pass()

    assert prefetched == ["3", "4"]
    assert after_second == ["b1", "b2"]
    assert _ids(sink.delivered) == ["b1", "b2", "a1", "a2"]
    assert await async_client.hlen(sweeper.store.keyspace.outbox) == 0


async def test_a_prefetched_window_is_delivered_after_a_restart(
    async_client, prefix, seeder, clock, monkeypatch
):
    """Prefetched entries are only in memory: a new sweeper reads and delivers them (never lost).

    The first sweeper stops as a relay stops (``PrefixRelay``): the ack left in flight by its
    full pass is finished, then the cursor written. Its ack is slowed down, so a stop that
    skipped ``settle_pending`` would let the new sweeper read e0 and e1 again (it did, once in
    a while, under a loaded CI run, before the stop here waited for it).
    """
    for n in range(5):
        await seeder.outbox(f"T{n}", f"e{n}")
    first_sink, second_sink = MemorySink(), MemorySink()
    first = _sweeper(async_client, prefix, clock, first_sink, batch=2)
    ack_outbox_many = first.store.ack_outbox_many

    async def slow_ack(fields, **fenced):
        await asyncio.sleep(0.05)
        return await ack_outbox_many(fields, **fenced)

    monkeypatch.setattr(first.store, "ack_outbox_many", slow_ack)
    await first.start()
    await first.run_pass()
    await first.settle_pending()
    await first.checkpoint()

    second = _sweeper(async_client, prefix, clock, second_sink, batch=2)
    await second.start()
    for _ in range(4):
        await second.run_pass()

    assert _ids(first_sink.delivered) == ["e0", "e1"]
    assert _ids(second_sink.delivered) == ["e2", "e3", "e4"]
    assert await async_client.hlen(second.store.keyspace.outbox) == 0


async def test_back_to_back_full_passes_persist_the_cursor_at_most_once_a_second(
    async_client, prefix, seeder, clock
):
    """Full passes skip the cursor SET until CHECKPOINT_EVERY_S passed; the idle pass writes it."""
    for n in range(6):
        await seeder.outbox("T", f"e{n}")
    sweeper = _sweeper(async_client, prefix, clock, MemorySink(), batch=2)
    await sweeper.start()
    cursor = sweeper.store.keyspace.relay("cursor:outbox")

    async def persisted() -> int | None:
        raw = await async_client.get(cursor)
        return None if raw is None else int(raw)

    assert (await sweeper.run_pass()).full
    first = await persisted()  # the first pass writes (nothing written yet)
    assert (await sweeper.run_pass()).full
    assert await persisted() == first  # one second has not passed: no write
    clock.advance(CHECKPOINT_EVERY_S)
    assert (await sweeper.run_pass()).full
    third = await persisted()
    assert first is not None
    assert third is not None
    assert third > first
    while not (await sweeper.run_pass()).drained:
        pass
    assert await persisted() == sweeper.lanes[1].reader.low_water_mark  # type: ignore[union-attr]


async def _batches_of_two(async_client, prefix, seeder, clock, entries):
    """A started sweeper (batch 2) over ``entries`` outbox entries e0, e1, ... to targets T0, T1, ...;
    its sink and its outbox lane."""
    for n in range(entries):
        await seeder.outbox(f"T{n}", f"e{n}")
    sink = MemorySink()
    sweeper = _sweeper(async_client, prefix, clock, sink, batch=2)
    await sweeper.start()
    [outbox] = [lane for lane in sweeper.lanes if lane.kind == "outbox"]
    return sweeper, sink, outbox


async def test_a_read_that_fails_during_a_delivery_lets_the_delivery_finish_and_ack(
    async_client, prefix, seeder, clock, monkeypatch
):
    """The next window is read while the sink delivers this one; when that read fails, the
    window in flight is still delivered and acked before the error reaches the loop."""
    sweeper, sink, outbox = await _batches_of_two(async_client, prefix, seeder, clock, 4)
    read_new = outbox.reader.read_new
    reads = 0

    async def failing_second_read(limit, *, now, reconcile=True, **more):
        nonlocal reads
        reads += 1
        if reads == 2:  # the prefetch, sent while e0 and e1 are with the sink
            raise RedisConnectionError("read lost")
        return await read_new(limit, now=now, reconcile=reconcile, **more)

    monkeypatch.setattr(outbox.reader, "read_new", failing_second_read)

    with pytest.raises(RedisConnectionError):
        await sweeper.run_pass()

    assert outbox.acking is None  # the delivery's ack was not left in flight
    assert _ids(sink.delivered) == ["e0", "e1"]
    assert sorted(await async_client.hkeys(sweeper.store.keyspace.outbox)) == [b"3", b"4"]


async def test_a_full_windows_ack_runs_into_the_next_pass_and_a_pass_that_is_not_full_waits_for_it(
    async_client, prefix, seeder, clock
):
    """The ack of a window delivered whole is left in flight while the next one is delivered;
    it is counted by the pass that sees it done, and none is in flight after the last pass."""
    sweeper, sink, outbox = await _batches_of_two(async_client, prefix, seeder, clock, 5)

    first = await sweeper.run_pass()
    assert first.full
    assert outbox.acking is not None
    assert outbox.acking[1] == 2

    delivered = first.delivered.get("outbox", 0)
    while not (result := await sweeper.run_pass()).drained:
        delivered += result.delivered.get("outbox", 0)
    delivered += result.delivered.get("outbox", 0)

    assert outbox.acking is None
    assert delivered == 5
    assert _ids(sink.delivered) == ["e0", "e1", "e2", "e3", "e4"]
    assert await async_client.hlen(sweeper.store.keyspace.outbox) == 0


async def _one_full_pass_of_three(async_client, prefix, seeder, clock):
    """A sweeper (batch 2) after one pass over three entries: the first window's ack in flight."""
    sweeper, _, outbox = await _batches_of_two(async_client, prefix, seeder, clock, 3)
    await sweeper.run_pass()
    assert outbox.acking is not None
    return sweeper, outbox


async def test_settle_pending_finishes_the_ack_in_flight(async_client, prefix, seeder, clock):
    """What a stop or a hand-back runs before the last checkpoint: the window's entries are gone."""
    sweeper, outbox = await _one_full_pass_of_three(async_client, prefix, seeder, clock)
    task = outbox.acking[0]

    await sweeper.settle_pending()

    assert task.done()  # waited for, not only forgotten
    assert outbox.acking is None
    assert sorted(await async_client.hkeys(sweeper.store.keyspace.outbox)) == [b"3"]


async def test_an_abandoned_sweepers_ack_in_flight_still_deletes_and_counts_what_was_delivered(
    async_client, prefix, seeder, clock
):
    """A sweeper given up (a Redis error, a lost lease) does not cancel its ack in flight: it
    deletes only entries the sink confirmed, and a new lease holder then need not redeliver them."""
    sweeper, outbox = await _one_full_pass_of_three(async_client, prefix, seeder, clock)
    task = outbox.acking[0]

    sweeper.abandon()
    await task
    await asyncio.sleep(0)  # the count runs in the task's done callback

    assert outbox.acking is None
    assert sorted(await async_client.hkeys(sweeper.store.keyspace.outbox)) == [b"3"]
    delivered = sweeper.metrics.registry.get_sample_value(
        "relayd_delivered_total", {"prefix": prefix, "kind": "outbox"}
    )
    assert delivered == 2


async def test_an_ack_failing_in_flight_fails_the_next_pass_and_its_entries_are_delivered_again(
    async_client, prefix, seeder, clock, monkeypatch
):
    sweeper, sink, _ = await _batches_of_two(async_client, prefix, seeder, clock, 4)
    ack_outbox_many = sweeper.store.ack_outbox_many
    acks = 0

    async def failing_first_ack(fields, **fenced):
        nonlocal acks
        acks += 1
        if acks == 1:
            raise RedisConnectionError("ack lost")
        return await ack_outbox_many(fields, **fenced)

    monkeypatch.setattr(sweeper.store, "ack_outbox_many", failing_first_ack)

    await sweeper.run_pass()  # e0, e1 delivered; their ack fails in flight
    with pytest.raises(RedisConnectionError):
        await sweeper.run_pass()  # e2, e3 delivered; the failed ack surfaces here
    sweeper.abandon()

    fresh = _sweeper(async_client, prefix, clock, sink, batch=2)  # what the loop does next
    await fresh.start()
    while not (await fresh.run_pass()).drained:
        pass

    assert _ids(sink.delivered)[:4] == ["e0", "e1", "e2", "e3"]
    assert {"e0", "e1"} <= set(_ids(sink.delivered)[4:])  # at-least-once: the unacked go again
    assert await async_client.hlen(sweeper.store.keyspace.outbox) == 0
