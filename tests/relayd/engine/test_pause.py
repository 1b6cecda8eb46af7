"""Operator pauses in the pass: what a pause holds back, and that it charges nothing."""

from __future__ import annotations

import asyncio
import random

import pytest
from prometheus_client import CollectorRegistry
from support.seeding import outbox_value

from relayd.engine.options import SweepOptions
from relayd.engine.pause import FREE, LaneHold, lane_hold
from relayd.engine.sweeper import Sweeper
from relayd.observability.metrics import RelayMetrics
from relayd.sinks.base import DELIVERED, Retry
from relayd.sinks.memory import MemorySink
from relayd.state.keys import RelayKeys
from relayd.state.pauses import Pause, pause, read_pauses, resume
from store import AsyncRedisStore, Keyspace
from store.codec import stamp_commit_time


@pytest.mark.parametrize(
    ("pauses", "kind", "sink_names", "expected"),
    [
        ([], "outbox", ("webhook",), FREE),
        ([Pause()], "timer", ("webhook",), LaneHold(whole=True)),
        ([Pause(kind="outbox")], "outbox", ("webhook",), LaneHold(whole=True)),
        ([Pause(kind="outbox")], "spawn", ("webhook",), FREE),
        ([Pause(sink="webhook")], "spawn", ("webhook",), LaneHold(whole=True)),
        ([Pause(sink="kafka")], "spawn", ("webhook",), FREE),
        (
            [Pause(sink="outbox+timer:webhook")],
            "timer",
            ("webhook", "outbox+timer:webhook"),
            LaneHold(whole=True),
        ),
        ([Pause(target="a"), Pause(target="b")], "outbox", ("log",), LaneHold(keys=frozenset({"a", "b"}))),
        ([Pause(kind="timer", target="a")], "outbox", ("log",), FREE),
        ([Pause(target="a"), Pause(kind="outbox")], "outbox", ("log",), LaneHold(whole=True)),
    ],
    ids=[
        "nothing",
        "whole-prefix",
        "its-kind",
        "another-kind",
        "its-sink",
        "another-sink",
        "guard-name",
        "targets",
        "target-of-another-kind",
        "kind-beats-target",
    ],
)
def test_lane_hold_matches_every_selector_a_pause_names(pauses, kind, sink_names, expected):
    """A pause holds a lane when each selector it names matches; a target pause holds its key only."""
    actual = lane_hold(pauses, kind=kind, sink_names=sink_names)

    assert expected == actual


pytestmark_backend = pytest.mark.usefixtures("backend")


def _sweeper(client, prefix, clock, sink, registry=None):
    return Sweeper(
        AsyncRedisStore(client, prefix=prefix),
        sinks={"outbox": sink, "spawn": sink, "timer": sink},
        options=SweepOptions(prefixes=(prefix,), batch=100, backoff_base_s=1.0),
        metrics=RelayMetrics(registry or CollectorRegistry()),
        clock=clock,
        rng=random.Random(1),
    )


async def _passes(sweeper, clock, n=4):
    for _ in range(n):
        await sweeper.run_pass()
        clock.advance(1.0)  # past the pauses' read period and any retry wait


@pytestmark_backend
async def test_a_paused_kind_is_not_delivered_while_the_others_flow_and_resumes_in_order(
    async_client, prefix, seeder, clock
):
    """Outbox paused: spawns and timers go, outbox waits untouched; resumed, it goes in order,
    each entry at its first attempt, with no attempt recorded."""
    keyspace = Keyspace(prefix)
    await pause(async_client, keyspace, Pause(kind="outbox", by="test", reason="r"), command="c", source="s")
    for i in range(5):
        await seeder.outbox("A", f"a{i}")
    await seeder.spawn("parent", "child")
    await seeder.timer("exe", "t", clock.now() - 1)
    sink = MemorySink()
    sweeper = _sweeper(async_client, prefix, clock, sink)
    await sweeper.start()

    await _passes(sweeper, clock)

    assert sorted(e.kind for e in sink.delivered) == ["spawn", "timer"]
    assert await async_client.hlen(keyspace.outbox) == 5
    assert not sweeper.has_eligible()

    await resume(async_client, keyspace, Pause(kind="outbox"), command="c", source="s")
    await _passes(sweeper, clock)

    outbox = [e for e in sink.delivered if e.kind == "outbox"]
    assert [e.body["event"]["id"] for e in outbox] == [f"a{i}" for i in range(5)]
    assert {e.attempt for e in outbox} == {1}
    assert await async_client.hlen(keyspace.outbox) == 0
    assert await async_client.exists(RelayKeys(keyspace).attempts("outbox")) == 0


@pytestmark_backend
async def test_a_paused_target_holds_only_its_own_key_and_charges_no_attempt(
    async_client, prefix, seeder, clock
):
    """Target A paused while its head was in backoff: B flows, A waits (no attempt, no dead
    letter, no busy loop); resumed, A's entries go in order."""
    keyspace = Keyspace(prefix)
    fail_once = {"a0"}

    def script(envelope):
        event_id = envelope.body["event"]["id"]
        if event_id in fail_once:
            fail_once.discard(event_id)
            return Retry(error="503")
        return DELIVERED

    sink = MemorySink(script)
    for i in range(3):
        await seeder.outbox("A", f"a{i}")
        await seeder.outbox("B", f"b{i}")
    sweeper = _sweeper(async_client, prefix, clock, sink)
    await sweeper.start()
    await sweeper.run_pass()  # a0 fails once: A waits for its retry
    await pause(async_client, keyspace, Pause(target="A", by="test", reason="r"), command="c", source="s")
    clock.advance(1.0)

    await _passes(sweeper, clock, n=6)

    delivered = [e.body["event"]["id"] for e in sink.delivered]
    assert delivered == ["b0", "b1", "b2"]
    assert not sweeper.has_eligible()
    attempts_before = [e.attempt for e in sink.batches[0] if e.body["event"]["id"] == "a0"]
    assert attempts_before == [1]
    assert [b for b in sink.batches[1:] if any(e.ordering_key == "A" for e in b)] == []

    await resume(async_client, keyspace, Pause(target="A"), command="c", source="s")
    await _passes(sweeper, clock)

    assert [e.body["event"]["id"] for e in sink.delivered if e.ordering_key == "A"] == ["a0", "a1", "a2"]
    a0 = next(e for e in sink.delivered if e.body["event"]["id"] == "a0")
    assert a0.attempt == 2  # its one failed attempt before the pause; none while paused
    assert await async_client.hlen(keyspace.outbox) == 0


@pytestmark_backend
async def test_the_paused_since_gauge_follows_the_pauses(async_client, prefix, clock):
    """One series per type of scope, the oldest pause's time; gone once resumed."""
    keyspace = Keyspace(prefix)
    registry = CollectorRegistry()
    sweeper = _sweeper(async_client, prefix, clock, MemorySink(), registry)
    await sweeper.start()
    first = await pause(
        async_client, keyspace, Pause(target="A", by="t", reason="r"), command="c", source="s"
    )
    await pause(async_client, keyspace, Pause(target="B", by="t", reason="r"), command="c", source="s")

    await _passes(sweeper, clock, n=1)

    labels = {"prefix": prefix, "scope": "target"}
    assert first.at == registry.get_sample_value("relayd_paused_since_timestamp_seconds", labels)

    await resume(async_client, keyspace, Pause(target="A"), command="c", source="s")
    await resume(async_client, keyspace, Pause(target="B"), command="c", source="s")
    await _passes(sweeper, clock, n=1)

    assert registry.get_sample_value("relayd_paused_since_timestamp_seconds", labels) is None


@pytestmark_backend
async def test_pause_and_resume_are_audited_and_a_value_not_a_pause_is_ignored(async_client, prefix):
    """Each change lands in the audit trail with its command and source; garbage in the hash is skipped."""
    from relayd.state.audit import read_actions

    keyspace = Keyspace(prefix)
    await async_client.hset(RelayKeys(keyspace).pauses, "junk", b"not json")
    stored = await pause(
        async_client, keyspace, Pause(kind="timer", by="me", reason="why"), command="cmd", source="cli:me@h"
    )

    assert await read_pauses(async_client, keyspace) == [stored]
    assert await resume(async_client, keyspace, Pause(kind="timer"), command="cmd2", source="cli:me@h")
    assert not await resume(async_client, keyspace, Pause(kind="timer"), command="cmd2", source="cli:me@h")

    records = await read_actions(async_client, keyspace)
    assert [(r.action, r.filter, r.command, r.source) for r in records] == [
        ("resume", {"kind": "timer"}, "cmd2", "cli:me@h"),
        ("pause", {"kind": "timer", "reason": "why"}, "cmd", "cli:me@h"),
    ]


@pytestmark_backend
async def test_a_pause_and_its_resume_are_announced_once_by_the_relay_that_reads_them(
    async_client, prefix, clock
) -> None:
    """A pause found at the first read is old news; one made later, and its resume, are events."""
    from relayd.observability import events
    from relayd.sinks.memory import MemorySink as EventsSink

    keyspace = Keyspace(prefix)
    registry = CollectorRegistry()
    sent = EventsSink()
    emitter = events.OperationalEvents(sent, RelayMetrics(registry).events)
    events.install(emitter)
    try:
        await pause(
            async_client, keyspace, Pause(kind="timer", by="a", reason="old"), command="c", source="s"
        )
        sweeper = _sweeper(async_client, prefix, clock, MemorySink())
        await sweeper.start()
        await _passes(sweeper, clock, n=1)
        await pause(async_client, keyspace, Pause(target="A", by="b", reason="new"), command="c", source="s")
        await _passes(sweeper, clock, n=1)
        await resume(async_client, keyspace, Pause(target="A"), command="c", source="s")
        await _passes(sweeper, clock, n=1)
        for _ in range(100):  # the sender task runs on this loop
            if len(sent.delivered) >= 2:
                break
            await asyncio.sleep(0.01)
    finally:
        events.install(None)
        await emitter.close()

    bodies = [e.body for e in sent.delivered]
    assert [(b["type"], b["subject"]) for b in bodies] == [
        ("dev.relayd.paused", prefix),
        ("dev.relayd.resumed", prefix),
    ]
    assert bodies[0]["data"] == {
        "prefix": prefix,
        "scope": "target=A",
        "by": "b",
        "reason": "new",
        "since": bodies[0]["data"]["since"],
    }


@pytestmark_backend
async def test_a_paused_lane_shows_its_oldest_entry_aging_though_nothing_of_it_is_held(
    async_client, prefix, seeder, clock
):
    """Nothing of a paused lane is read, so nothing is held: the age comes from the commit time
    of the entry at the reader's low-water mark, and an entry without one (harel's) counts 0."""
    keyspace = Keyspace(prefix)
    registry = CollectorRegistry()
    await seeder.outbox("A", "a0")  # delivered before the pause: the mark moves past it
    sweeper = _sweeper(async_client, prefix, clock, MemorySink(), registry)
    await sweeper.start()
    await _passes(sweeper, clock, n=2)
    await pause(async_client, keyspace, Pause(kind="outbox", by="test", reason="r"), command="c", source="s")
    committed = clock.now()
    await seeder.raw_outbox("2", stamp_commit_time(outbox_value("A", "a1"), committed))
    await seeder.raw_outbox("3", outbox_value("A", "a2"))

    def age():
        labels = {"prefix": prefix, "kind": "outbox"}
        return registry.get_sample_value("relayd_oldest_due_age_seconds", labels)

    await _passes(sweeper, clock, n=20)
    aged = age()
    await async_client.hdel(keyspace.outbox, "2")  # only the unstamped entry is left
    await _passes(sweeper, clock, n=20)

    assert 10 < aged <= clock.now() - 20 - committed  # refreshed at least every 15 s while idle
    assert age() == 0
