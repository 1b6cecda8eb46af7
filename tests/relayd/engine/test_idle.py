"""Idle passes stay cheap: the probe, the gauge budget, the next-timer wake-up (fake and real Redis)."""

from __future__ import annotations

import random

import pytest
from prometheus_client import CollectorRegistry

from relayd.engine import probe as probe_module
from relayd.engine.gauges import BUSY_REFRESH_S, IDLE_REFRESH_S, refresh_due
from relayd.engine.options import SweepOptions
from relayd.engine.sweeper import Sweeper
from relayd.observability.metrics import RelayMetrics
from relayd.sinks.memory import MemorySink
from relayd.state.keys import RelayKeys
from store import AsyncRedisStore


@pytest.mark.parametrize(
    ("last_s", "now_s", "worked", "dirty", "expected"),
    [
        (None, 0.0, False, False, True),
        (10.0, 10.0 + BUSY_REFRESH_S / 2, True, True, False),
        (10.0, 10.0 + BUSY_REFRESH_S, True, True, True),
        (10.0, 10.1, False, True, True),
        (10.0, 10.0 + IDLE_REFRESH_S / 2, False, False, False),
        (10.0, 10.0 + IDLE_REFRESH_S, False, False, True),
    ],
    ids=["never", "busy-recent", "busy-stale", "first-quiet-after-work", "idle-recent", "idle-stale"],
)
def test_refresh_due(last_s, now_s, worked, dirty, expected):
    assert expected == refresh_due(last_s=last_s, now_s=now_s, worked=worked, dirty=dirty)


def _sweeper(client, prefix, clock, sink, registry=None, **options):
    opts = SweepOptions(prefixes=(prefix,), **{"batch": 100, **options})
    return Sweeper(
        AsyncRedisStore(client, prefix=prefix),
        sinks={"outbox": sink, "spawn": sink, "timer": sink},
        options=opts,
        metrics=RelayMetrics(registry or CollectorRegistry()),
        clock=clock,
        rng=random.Random(1),
    )


class _Counting:
    """Counts the reads a lane's reader makes."""

    def __init__(self, reader):
        self.reader, self.calls = reader, 0

    def __getattr__(self, name):
        return getattr(self.reader, name)

    async def read_new(self, limit, *, now, reconcile=True, **more):
        self.calls += 1
        return await self.reader.read_new(limit, now=now, reconcile=reconcile, **more)


def _count_reads(sweeper):
    """Wrap the reader of every lane that has one in a ``_Counting``; those counters."""
    counters = []
    for lane in sweeper.lanes:
        if lane.reader is not None:
            lane.reader = counting = _Counting(lane.reader)
            counters.append(counting)
    return counters


@pytest.mark.usefixtures("backend")
async def test_a_quiet_prefix_is_probed_not_read_and_new_work_is_still_found(
    async_client, prefix, seeder, clock
):
    sink = MemorySink()
    sweeper = _sweeper(async_client, prefix, clock, sink)
    await sweeper.start()
    counters = _count_reads(sweeper)

    await sweeper.run_pass()  # quiet: reads once
    reads_after_first = [c.calls for c in counters]
    for _ in range(3):
        await sweeper.run_pass()  # probed: nothing to read
    reads_while_idle = [c.calls for c in counters]
    await seeder.outbox("A", "late")
    found = await sweeper.run_pass()

    assert (reads_after_first, reads_while_idle) == ([1, 1], [1, 1])
    assert found.delivered["outbox"] == 1
    assert [e.body["event"]["id"] for e in sink.delivered] == ["late"]
    assert [c.calls for c in counters] == [2, 2]  # one EXISTS covers both hashes: both are read


@pytest.mark.usefixtures("backend")
async def test_with_notices_a_quiet_lane_is_read_only_when_written_to_and_probed_once_per_interval(
    async_client, prefix, seeder, clock, monkeypatch
):
    """With a live subscription (``notified`` given) a quiet lane nobody wrote to costs nothing:
    no probe, no read; the kind a notice names is read without a probe; and once per poll
    interval every quiet lane is probed all the same (a notice that never came)."""
    probes: list[set] = []
    real_probe = probe_module.probe_quiet

    async def counting_probe(client, keyspace, quiet, *, now):
        probes.append(set(quiet))
        return await real_probe(client, keyspace, quiet, now=now)

    monkeypatch.setattr(probe_module, "probe_quiet", counting_probe)
    sink = MemorySink()
    sweeper = _sweeper(async_client, prefix, clock, sink, poll_interval_s=1.0)
    await sweeper.start()
    counters = _count_reads(sweeper)

    await sweeper.run_pass(notified=frozenset())  # first pass: every lane read, all quiet after
    await sweeper.run_pass(notified=frozenset())  # a full probe: the first with quiet lanes
    probes_before = len(probes)
    reads_before = [c.calls for c in counters]
    for _ in range(3):
        await sweeper.run_pass(notified=frozenset())  # nothing written: nothing sent
    idle = ([c.calls for c in counters], len(probes))
    await seeder.outbox("A", "noticed")
    noticed = await sweeper.run_pass(notified=frozenset({"outbox"}))
    after_notice = ([c.calls for c in counters], len(probes))
    await sweeper.run_pass(notified=frozenset())  # the outbox lane read something: read again
    await seeder.outbox("A", "unnoticed")  # as if its notice were lost: the lanes are quiet now
    await sweeper.run_pass(notified=frozenset())
    unseen = [e.body["event"]["id"] for e in sink.delivered]
    clock.advance(1.0)
    found = await sweeper.run_pass(notified=frozenset())  # the interval is over: all probed

    assert idle == (reads_before, probes_before)
    assert noticed.delivered["outbox"] == 1
    assert after_notice == ([reads_before[0], reads_before[1] + 1], probes_before)  # spawns untouched
    assert unseen == ["noticed"]
    assert found.delivered["outbox"] == 1
    assert probes[-1] == {"outbox", "spawn", "timer"}


@pytest.mark.usefixtures("backend")
async def test_with_notices_entries_found_by_the_reconcile_scan_call_for_the_next_pass_at_once(
    async_client, prefix, seeder, clock
):
    """Entries no window read returns (here fields that are not seqs) come from the reconcile
    scan, one step per read; no write will announce the rest, so the pass says more is waiting."""
    sweeper = _sweeper(async_client, prefix, clock, MemorySink())
    await sweeper.start()
    for n in range(3):
        await seeder.raw_outbox(f"x{n}", b"{}", bump=False)

    scanned = await sweeper.run_pass(notified=frozenset({"outbox"}))
    after = await sweeper.run_pass(notified=frozenset())

    assert scanned.read == 3
    assert scanned.full
    assert not after.full


@pytest.mark.usefixtures("backend")
async def test_a_burned_gap_filled_late_is_delivered_while_idle(async_client, prefix, seeder, clock):
    """A seq allocated before a quiet spell and committed during it is still found."""
    sink = MemorySink()
    sweeper = _sweeper(async_client, prefix, clock, sink)
    await sweeper.start()
    ks = sweeper.store.keyspace
    await async_client.incr(ks.outbox_seq)  # seq 1 allocated, commit in flight
    await seeder.outbox("A", "two")
    await sweeper.run_pass()
    await sweeper.run_pass()
    await sweeper.run_pass()  # quiet now

    await async_client.hset(ks.outbox, "1", '{"t": "A", "e": "{\\"id\\": \\"one\\", \\"kind\\": \\"K\\"}"}')
    await sweeper.run_pass()

    assert [e.body["event"]["id"] for e in sink.delivered] == ["two", "one"]


@pytest.mark.usefixtures("backend")
async def test_the_next_timer_bounds_the_idle_sleep(async_client, prefix, seeder, clock):
    sweeper = _sweeper(async_client, prefix, clock, MemorySink())
    await sweeper.start()
    await seeder.timer("exe", "soon", clock.now() + 0.25)

    working = await sweeper.run_pass()
    quiet = await sweeper.run_pass()  # probed
    clock.advance(0.3)
    due = await sweeper.run_pass()

    assert working.next_retry_in_s == pytest.approx(0.25)
    assert quiet.next_retry_in_s == pytest.approx(0.25)
    assert due.delivered["timer"] == 1
    assert due.next_retry_in_s is None


@pytest.mark.usefixtures("backend")
async def test_gauges_refresh_after_work_then_only_every_few_seconds_when_idle(
    async_client, prefix, seeder, clock
):
    registry = CollectorRegistry()
    sweeper = _sweeper(async_client, prefix, clock, MemorySink(), registry)
    await sweeper.start()
    dead_key = RelayKeys(sweeper.store.keyspace).dead("outbox")

    def dead_letters():
        return registry.get_sample_value("relayd_dead_letters", {"prefix": prefix, "kind": "outbox"})

    await seeder.outbox("A", "e")
    await sweeper.run_pass()  # first pass: refreshed
    await async_client.hset(dead_key, "x", "{}")
    await sweeper.run_pass()  # the first quiet pass after work: refreshed
    seen_after_work = dead_letters()
    await async_client.hset(dead_key, "y", "{}")
    clock.advance(IDLE_REFRESH_S / 2)
    await sweeper.run_pass()
    seen_while_idle = dead_letters()
    clock.advance(IDLE_REFRESH_S / 2)
    await sweeper.run_pass()

    assert (seen_after_work, seen_while_idle, dead_letters()) == (1, 1, 2)
