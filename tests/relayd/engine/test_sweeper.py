"""The sweeper over fakeredis and a real redis-server: delivery, order, retries, dead letters."""

from __future__ import annotations

import asyncio
import json
import random
from collections.abc import Iterator

import pytest
from prometheus_client import CollectorRegistry

from relayd.engine import late_spawns as late_spawns_module
from relayd.engine.options import SweepOptions
from relayd.engine.sweeper import Sweeper
from relayd.observability.metrics import RelayMetrics
from relayd.sinks.base import DELIVERED, Outcome, Permanent, Retry
from relayd.sinks.memory import MemorySink
from relayd.state.deadletters import list_dead_letters, purge_dead_letters, replay_dead_letters
from relayd.state.keys import RelayKeys
from store import AsyncRedisStore
from store.keys import timer_member

pytestmark = pytest.mark.usefixtures("backend")


def _sweeper(client, prefix, clock, sinks=None, registry=None, **options):
    sink = MemorySink()
    sinks = sinks or {"outbox": sink, "spawn": sink, "timer": sink}
    opts = SweepOptions(prefixes=(prefix,), **{"batch": 100, "backoff_base_s": 1.0, **options})
    metrics = RelayMetrics(registry or CollectorRegistry())
    return Sweeper(
        AsyncRedisStore(client, prefix=prefix),
        sinks=sinks,
        options=opts,
        metrics=metrics,
        clock=clock,
        rng=random.Random(1),
    )


def _open_spawn_breaker(sweeper, clock):
    """Open the spawn sink's breaker, its probe far away; return the spawn lane."""
    spawn_lane = next(lane for lane in sweeper.lanes if lane.kind == "spawn")
    spawn_lane.guard.breaker.state = "open"
    spawn_lane.guard.breaker.probe_at_s = clock.monotonic() + 1_000
    return spawn_lane


async def _drain(sweeper, passes=10):
    await sweeper.start()
    for _ in range(passes):
        result = await sweeper.run_pass()
        if result.drained:
            return
    raise AssertionError("did not drain")


async def test_pass_delivers_spawns_then_outbox_then_due_timers_and_acks_them(
    async_client, prefix, seeder, clock
):
    """Everything due is delivered once, acked, and future timers stay untouched."""
    await seeder.outbox("child", "e1")
    await seeder.spawn("parent", "child")
    await seeder.timer("exe", "a.b", clock.now() - 5)
    await seeder.timer("exe", "later", clock.now() + 60)
    sink = MemorySink()
    sweeper = _sweeper(async_client, prefix, clock, {"outbox": sink, "spawn": sink, "timer": sink})

    await _drain(sweeper)

    assert [e.kind for e in sink.delivered] == ["spawn", "outbox", "timer"]
    assert [e.id for e in sink.delivered][:2] == [f"{prefix}:spawn:1", f"{prefix}:outbox:1"]
    ks = sweeper.store.keyspace
    assert await async_client.hlen(ks.outbox) == 0
    assert await async_client.hlen(ks.spawns) == 0
    assert await async_client.zrange(ks.timers, 0, -1) == [timer_member("exe", "later").encode()]


async def test_failing_head_holds_back_its_target_while_others_flow(async_client, prefix, seeder, clock):
    """Target A's head fails again and again: A's later entries wait, B and C are all delivered."""
    for i in range(3):
        await seeder.outbox("A", f"a{i}")
        await seeder.outbox("B", f"b{i}")
        await seeder.outbox("C", f"c{i}")
    failures = {"n": 0}

    def script(env):
        if env.body["event"]["id"] == "a0" and failures["n"] < 4:
            failures["n"] += 1
            return Retry("down")
        return DELIVERED

    sink = MemorySink(script)
    sweeper = _sweeper(
        async_client, prefix, clock, {"outbox": sink, "spawn": sink, "timer": sink}, max_attempts=10
    )
    await sweeper.start()

    for _ in range(4):
        await sweeper.run_pass()
        clock.advance(1000)
        delivered = [e.body["event"]["id"] for e in sink.delivered]
        assert not any(d.startswith("a") for d in delivered)
    await sweeper.run_pass()

    delivered = [e.body["event"]["id"] for e in sink.delivered]
    assert [d for d in delivered if d.startswith("a")] == ["a0", "a1", "a2"]
    assert [d for d in delivered if d.startswith("b")] == ["b0", "b1", "b2"]
    assert delivered.index("b2") < delivered.index("a0")
    assert [e.attempt for e in sink.attempted if e.body["event"]["id"] == "a0"] == [1, 2, 3, 4, 5]


async def test_retry_waits_for_its_backoff_on_the_clock(async_client, prefix, seeder, clock):
    await seeder.outbox("A", "e")
    outcomes: Iterator[Outcome] = iter([Retry("nope"), DELIVERED])
    sink = MemorySink(lambda env: next(outcomes))
    sweeper = _sweeper(async_client, prefix, clock, {"outbox": sink, "spawn": sink, "timer": sink})
    await sweeper.start()

    first = await sweeper.run_pass()
    clock.advance(0.49)  # equal jitter on base 1 s: the first retry waits at least 0.5 s
    second = await sweeper.run_pass()
    clock.advance(0.52)
    third = await sweeper.run_pass()

    assert (first.retried, second.attempted, third.delivered) == (
        {"spawn": 0, "outbox": 1, "timer": 0},
        0,
        third.delivered,
    )
    assert third.delivered["outbox"] == 1
    assert 0.0 < first.next_retry_in_s <= 1.0


async def test_attempt_counts_survive_a_new_engine_instance(async_client, prefix, seeder, clock):
    """A restart (a new Sweeper) continues the attempt count and dead-letters at max_attempts."""
    await seeder.outbox("A", "e")
    sink = MemorySink(lambda env: Retry("always"))
    sinks = {"outbox": sink, "spawn": sink, "timer": sink}

    for _ in range(2):
        sweeper = _sweeper(async_client, prefix, clock, sinks, max_attempts=3)
        await sweeper.start()
        await sweeper.run_pass()
        clock.advance(1000)
    last = _sweeper(async_client, prefix, clock, sinks, max_attempts=3)
    await last.start()
    result = await last.run_pass()

    assert [e.attempt for e in sink.attempted] == [1, 2, 3]
    assert result.dead_lettered["outbox"] == 1
    [dead] = await list_dead_letters(async_client, last.store.keyspace)
    assert (dead.reason_code, dead.attempts, dead.seq, dead.id) == (
        "max_attempts",
        3,
        1,
        f"{prefix}:outbox:1",
    )
    assert dead.first_attempt_at < dead.last_attempt_at
    assert await async_client.hlen(RelayKeys(last.store.keyspace).attempts("outbox")) == 0


MALFORMED = [
    ("outbox", "2", b"{not json", "bad_json"),
    ("outbox", "3", json.dumps({"t": "x"}).encode(), "missing_field"),
    ("outbox", "seven", json.dumps({"t": "x", "e": "{}"}).encode(), "bad_seq"),
    ("outbox", "4", json.dumps({"t": ["x"], "e": "{}"}).encode(), "wrong_type"),
    ("spawn", "2", json.dumps({"p": "a", "c": "b", "r": "c"}).encode(), "missing_field"),
]


async def test_malformed_entries_are_dead_lettered_with_reason_and_the_rest_delivered(
    async_client, prefix, seeder, clock
):
    ks = AsyncRedisStore(async_client, prefix=prefix).keyspace
    await seeder.outbox("t", "good-1")
    await seeder.spawn("p", "c")
    for kind, field, value, _ in MALFORMED:
        key = ks.outbox if kind == "outbox" else ks.spawns
        await async_client.incr(ks.outbox_seq if kind == "outbox" else ks.spawns_seq)
        await async_client.hset(key, field, value)
    await seeder.outbox("t", "good-2")
    await seeder.timer("exe", "ok", clock.now() - 1)
    await async_client.zadd(ks.timers, {b"no-separator": clock.now() - 2})
    sink = MemorySink()
    registry = CollectorRegistry()
    sweeper = _sweeper(async_client, prefix, clock, {"outbox": sink, "spawn": sink, "timer": sink}, registry)

    await _drain(sweeper)

    assert sorted(e.id for e in sink.delivered) == sorted(
        [f"{prefix}:outbox:1", f"{prefix}:outbox:6", f"{prefix}:spawn:1", f"timeout:exe:ok:{clock.now() - 1}"]
    )
    dead = {(d.kind, d.field or d.member): d for d in await list_dead_letters(async_client, ks)}
    expected = {(kind, field): reason for kind, field, _, reason in MALFORMED}
    expected["timer", "no-separator"] = "bad_member"
    assert {k: d.reason_code for k, d in dead.items()} == expected
    assert dead["outbox", "2"].document["value"] == "{not json"
    assert await async_client.hlen(ks.outbox) == 0
    assert await async_client.hlen(ks.spawns) == 0
    assert await async_client.zcard(ks.timers) == 0
    assert (
        registry.get_sample_value(
            "relayd_dead_lettered_total", {"prefix": prefix, "kind": "outbox", "reason": "bad_json"}
        )
        == 1
    )
    assert registry.get_sample_value("relayd_dead_letters", {"prefix": prefix, "kind": "outbox"}) == 4

    replayed = await replay_dead_letters(async_client, ks)

    assert replayed == 6
    assert await async_client.hget(ks.outbox, "seven") == MALFORMED[2][2]
    # A seq field goes back under a new seq (a new commit), any other field as it was.
    assert await async_client.hget(ks.outbox, "2") is None
    assert b"{not json" in (await async_client.hgetall(ks.outbox)).values()
    assert await async_client.zscore(ks.timers, b"no-separator") == clock.now() - 2
    assert await list_dead_letters(async_client, ks) == []


async def test_permanent_failure_is_dead_lettered_then_replayed_under_a_new_seq_and_its_score(
    async_client, prefix, seeder, clock
):
    await seeder.outbox("A", "e1")
    fire_at = clock.now() - 3.25
    await seeder.timer("exe", "p", fire_at)
    sink = MemorySink(lambda env: Permanent("http 400"))
    sweeper = _sweeper(async_client, prefix, clock, {"outbox": sink, "spawn": sink, "timer": sink})
    ks = sweeper.store.keyspace
    await _drain(sweeper)
    before = {d.id: d for d in await list_dead_letters(async_client, ks)}

    replayed = await replay_dead_letters(async_client, ks, ids=[f"{prefix}:outbox:1"])

    assert set(before) == {f"{prefix}:outbox:1", f"timeout:exe:p:{fire_at}"}
    assert before[f"{prefix}:outbox:1"].reason == "http 400"
    assert before[f"{prefix}:outbox:1"].envelope["event"]["id"] == "e1"
    assert replayed == 1
    assert await async_client.hget(ks.outbox, "1") is None
    assert json.loads(json.loads(await async_client.hget(ks.outbox, "2"))["e"])["id"] == "e1"
    assert [d.id for d in await list_dead_letters(async_client, ks)] == [f"timeout:exe:p:{fire_at}"]

    assert await replay_dead_letters(async_client, ks) == 1
    assert await async_client.zscore(ks.timers, timer_member("exe", "p")) == fire_at

    # A fresh relay delivers the replayed entries again (the window reads the new seq).
    sink.script = lambda env: DELIVERED
    await _drain(_sweeper(async_client, prefix, clock, {"outbox": sink, "spawn": sink, "timer": sink}))
    assert {e.id for e in sink.delivered} == {f"{prefix}:outbox:2", f"timeout:exe:p:{fire_at}"}


async def test_purge_deletes_dead_letters_by_kind(async_client, prefix, seeder, clock):
    await seeder.outbox("A", "e1")
    await seeder.spawn("p", "c")
    sink = MemorySink(lambda env: Permanent("no"))
    sweeper = _sweeper(async_client, prefix, clock, {"outbox": sink, "spawn": sink, "timer": sink})
    await _drain(sweeper)
    ks = sweeper.store.keyspace

    purged_spawns = await purge_dead_letters(async_client, ks, "spawn")
    purged_rest = await purge_dead_letters(async_client, ks)

    assert (purged_spawns, purged_rest) == (1, 1)
    assert await list_dead_letters(async_client, ks) == []


async def test_rearmed_timer_is_not_deleted_by_the_ack(async_client, prefix, seeder, clock):
    """The engine re-arms a timer while it is being delivered: the score-guarded ack keeps it."""
    await seeder.timer("exe", "p", clock.now() - 1)
    new_fire_at = clock.now() + 30

    async def rearm_during_delivery(batch):
        await seeder.timer("exe", "p", new_fire_at)
        return [DELIVERED] * len(batch)

    sink = MemorySink()
    sink.deliver = rearm_during_delivery
    sweeper = _sweeper(async_client, prefix, clock, {"outbox": sink, "spawn": sink, "timer": sink})
    await sweeper.start()

    result = await sweeper.run_pass()

    assert result.delivered["timer"] == 1
    assert await async_client.zscore(sweeper.store.keyspace.timers, timer_member("exe", "p")) == new_fire_at


async def test_outbox_to_a_child_waits_for_its_pending_spawn(async_client, prefix, seeder, clock):
    await seeder.spawn("parent", "kid")
    await seeder.outbox("kid", "to-kid")
    await seeder.outbox("other", "to-other")
    spawn_sink = MemorySink(lambda env: Retry("not yet"))
    outbox_sink = MemorySink()
    sweeper = _sweeper(
        async_client, prefix, clock, {"outbox": outbox_sink, "spawn": spawn_sink, "timer": outbox_sink}
    )
    await sweeper.start()

    await sweeper.run_pass()
    waiting = [e.body["event"]["id"] for e in outbox_sink.delivered]
    spawn_sink.script = lambda env: DELIVERED
    clock.advance(100)
    await sweeper.run_pass()

    assert waiting == ["to-other"]
    assert [e.body["event"]["id"] for e in outbox_sink.delivered] == ["to-other", "to-kid"]


async def test_an_event_to_a_child_whose_spawn_lies_beyond_the_window_waits_for_it(
    async_client, prefix, seeder, clock
):
    """Five spawns, a window of two: the event to the fifth child goes after that child's spawn."""
    for n in range(5):
        await seeder.spawn("parent", f"kid{n}")
    await seeder.outbox("kid4", "to-kid4")
    sink = MemorySink()
    sweeper = _sweeper(async_client, prefix, clock, {"outbox": sink, "spawn": sink, "timer": sink}, batch=2)

    await _drain(sweeper)

    order = [e.ordering_key if e.kind == "spawn" else e.body["event"]["id"] for e in sink.delivered]
    assert order.index("kid4") < order.index("to-kid4")


async def test_an_event_to_a_child_waits_while_the_spawn_sink_breaker_is_open(
    async_client, prefix, seeder, clock
):
    """Spawns are not even read while their sink's breaker is open: an event to a child named by
    a pending spawn still waits, uncharged, and others flow."""
    await seeder.spawn("parent", "kid")
    await seeder.outbox("kid", "to-kid")
    await seeder.outbox("other", "to-other")
    sink, spawn_sink = MemorySink(), MemorySink()
    sweeper = _sweeper(async_client, prefix, clock, {"outbox": sink, "spawn": spawn_sink, "timer": sink})
    await sweeper.start()
    spawn_lane = _open_spawn_breaker(sweeper, clock)

    await sweeper.run_pass()
    during = [e.body["event"]["id"] for e in sink.delivered]
    charged = await async_client.hlen(RelayKeys(sweeper.store.keyspace).attempts("outbox"))
    spawn_lane.guard.breaker.state = "closed"
    await _drain(sweeper)

    assert (during, charged) == (["to-other"], 0)
    assert [e.ordering_key for e in spawn_sink.delivered] == ["kid"]
    assert [e.body["event"]["id"] for e in sink.delivered] == ["to-other", "to-kid"]


async def test_pending_children_are_read_again_only_when_a_spawn_came_or_went(
    async_client, prefix, seeder, clock, monkeypatch
):
    """Spawn breaker open: passes with no spawn committed or removed read the spawns hash once;
    a spawn committed during the outage is named at the next pass, and its child's event waits."""
    await seeder.spawn("parent", "kid")
    sink, spawn_sink = MemorySink(), MemorySink()
    sweeper = _sweeper(async_client, prefix, clock, {"outbox": sink, "spawn": spawn_sink, "timer": sink})
    await sweeper.start()
    _open_spawn_breaker(sweeper, clock)
    reads = 0
    hvals = async_client.hvals

    async def counted(key):
        nonlocal reads
        reads += 1
        return await hvals(key)

    monkeypatch.setattr(async_client, "hvals", counted)

    for _ in range(3):
        await sweeper.run_pass()
    reads_unchanged = reads
    await seeder.spawn("parent", "late-kid")
    await seeder.outbox("late-kid", "to-late-kid")
    await seeder.outbox("other", "to-other")
    for _ in range(3):
        await sweeper.run_pass()

    assert (reads_unchanged, reads) == (1, 2)
    assert [e.body["event"]["id"] for e in sink.delivered] == ["to-other"]


class _CommitsWhileDelivering(MemorySink):
    """A spawn sink during whose first request the engine commits a spawn and an event to its
    child: after the spawn lane looked at the spawns, before the outbox lane reads."""

    def __init__(self, seeder) -> None:
        super().__init__()
        self.seeder = seeder
        self.committed = False

    async def deliver(self, batch):
        if not self.committed:
            self.committed = True
            await self.seeder.spawn("parent", "late-kid")
            await self.seeder.outbox("late-kid", "to-late-kid")
        return await super().deliver(batch)


async def test_an_event_to_a_child_spawned_during_the_pass_waits_for_that_spawn(
    async_client, prefix, seeder, clock
):
    """The spawn lane read before the spawn was committed, the outbox lane reads its child's
    event: the spawns counter read after the outbox read names the child, the event waits."""
    await seeder.spawn("parent", "kid")
    sink, spawn_sink = MemorySink(), _CommitsWhileDelivering(seeder)
    sweeper = _sweeper(async_client, prefix, clock, {"outbox": sink, "spawn": spawn_sink, "timer": sink})
    await sweeper.start()

    await sweeper.run_pass()
    during = [e.body["event"]["id"] for e in sink.delivered]
    await _drain(sweeper)

    assert during == []
    assert [e.ordering_key for e in spawn_sink.delivered] == ["kid", "late-kid"]
    assert [e.body["event"]["id"] for e in sink.delivered] == ["to-late-kid"]


def _record_gets(client, monkeypatch) -> list[str]:
    """The keys of every ``GET`` the client sends from now on outside the backlog reader's own
    round-trip: alone (any command goes through ``execute_command``) or in a pipeline."""
    keys: list[str] = []
    execute, pipeline = client.execute_command, client.pipeline

    async def recorded(*args, **options):
        if str(args[0]).upper() == "GET":
            keys.append(args[1])
        return await execute(*args, **options)

    def recorded_pipeline(*args, **options):
        pipe = pipeline(*args, **options)
        queue = pipe.execute_command

        def queued(*command, **more):
            if str(command[0]).upper() == "GET":
                keys.append(command[1])
            return queue(*command, **more)

        pipe.execute_command = queued
        return pipe

    monkeypatch.setattr(client, "execute_command", recorded)
    monkeypatch.setattr(client, "pipeline", recorded_pipeline)
    return keys


async def test_the_late_spawn_check_rides_the_outbox_read(async_client, prefix, seeder, clock, monkeypatch):
    """Events going out with the spawn lane live: the spawns counter is read in the outbox
    read's own round-trip, never by a GET of its own; a spawn committed in the pass still holds
    its child's event back."""
    await seeder.spawn("parent", "kid")
    sink, spawn_sink = MemorySink(), _CommitsWhileDelivering(seeder)
    sweeper = _sweeper(async_client, prefix, clock, {"outbox": sink, "spawn": spawn_sink, "timer": sink})
    await sweeper.start()
    own_gets = _record_gets(async_client, monkeypatch)
    await seeder.outbox("other", "to-other")

    await sweeper.run_pass()
    during = [e.body["event"]["id"] for e in sink.delivered]
    await _drain(sweeper)

    assert sweeper.store.keyspace.spawns_seq not in own_gets
    assert during == ["to-other"]
    assert [e.body["event"]["id"] for e in sink.delivered] == ["to-other", "to-late-kid"]


async def test_the_late_spawn_check_costs_no_get_when_nothing_was_ever_spawned(
    async_client, prefix, seeder, clock, monkeypatch
):
    """No spawns counter at all (its GET answers nil): the read's reply is still the answer."""
    sink = MemorySink()
    sweeper = _sweeper(async_client, prefix, clock, {"outbox": sink, "spawn": sink, "timer": sink})
    await sweeper.start()
    own_gets = _record_gets(async_client, monkeypatch)
    await seeder.outbox("other", "to-other")

    await sweeper.run_pass()

    assert sweeper.store.keyspace.spawns_seq not in own_gets
    assert [e.body["event"]["id"] for e in sink.delivered] == ["to-other"]


async def test_every_event_waits_while_more_spawns_are_pending_than_a_pass_may_name(
    async_client, prefix, seeder, clock, monkeypatch
):
    """Spawn sink down, more spawns pending than ``PENDING_SPAWNS_NAMED``: no event goes (none is
    charged), since naming every child would read the whole hash each pass; once the spawns
    flow, they go first and the events follow."""
    monkeypatch.setattr(late_spawns_module, "PENDING_SPAWNS_NAMED", 8)
    for n in range(9):
        await seeder.spawn("parent", f"kid{n}")
    await seeder.outbox("other", "to-other")
    sink, spawn_sink = MemorySink(), MemorySink()
    sinks = {"outbox": sink, "spawn": spawn_sink, "timer": sink}
    sweeper = _sweeper(async_client, prefix, clock, sinks, batch=2)
    await sweeper.start()
    spawn_lane = _open_spawn_breaker(sweeper, clock)

    await sweeper.run_pass()
    await sweeper.run_pass()
    during = [e.body["event"]["id"] for e in sink.delivered]
    charged = await async_client.hlen(RelayKeys(sweeper.store.keyspace).attempts("outbox"))
    spawn_lane.guard.breaker.state = "closed"
    await _drain(sweeper)

    assert (during, charged) == ([], 0)
    assert len(spawn_sink.delivered) == 9
    assert [e.body["event"]["id"] for e in sink.delivered] == ["to-other"]


async def test_metrics_match_deliveries(async_client, prefix, seeder, clock):
    for i in range(5):
        await seeder.outbox(f"t{i}", f"e{i}")
    await seeder.timer("exe", "p", clock.now() - 2)
    await seeder.timer("exe", "q", clock.now() + 100)
    registry = CollectorRegistry()
    outcomes = {"e0": [Retry("x"), DELIVERED]}

    def script(env):
        queue = outcomes.get(env.body.get("event", {}).get("id"))
        return queue.pop(0) if queue else DELIVERED

    sink = MemorySink(script)
    sweeper = _sweeper(async_client, prefix, clock, {"outbox": sink, "spawn": sink, "timer": sink}, registry)
    await sweeper.start()

    await sweeper.run_pass()
    assert (
        registry.get_sample_value("relayd_oldest_due_age_seconds", {"prefix": prefix, "kind": "outbox"}) == 0
    )
    clock.advance(5)
    await sweeper.run_pass()

    def value(name, **labels):
        return registry.get_sample_value(name, {"prefix": prefix, **labels})

    assert value("relayd_delivered_total", kind="outbox") == 5
    assert value("relayd_delivered_total", kind="timer") == 1
    assert value("relayd_delivery_attempts_total", kind="outbox", outcome="retry") == 1
    assert value("relayd_delivery_attempts_total", kind="outbox", outcome="delivered") == 5
    assert value("relayd_backlog_entries", kind="outbox") == 0
    assert value("relayd_backlog_entries", kind="timer") == 0
    assert value("relayd_timer_lag_seconds_count") == 1
    assert value("relayd_timer_lag_seconds_sum") == pytest.approx(2.0)
    assert value("relayd_sweep_duration_seconds_count") == 2
    assert value("relayd_sink_latency_seconds_count", kind="outbox") == 2
    assert value("relayd_last_sweep_timestamp_seconds") == clock.now()


async def test_a_key_of_the_wrong_type_parks_its_kind_while_the_others_flow(
    async_client, prefix, seeder, clock
):
    """``P:outbox`` is a string: spawns and timers are delivered, the pass drains (so ``--once``
    ends), the outbox is parked with why; once the key is fixed it flows again."""
    ks_outbox = f"{prefix}:outbox"
    await async_client.set(ks_outbox, "not a hash")
    await seeder.spawn("parent", "child")
    await seeder.timer("exe", "a", clock.now() - 5)
    sink = MemorySink()
    sweeper = _sweeper(async_client, prefix, clock, {"outbox": sink, "spawn": sink, "timer": sink})

    await _drain(sweeper)
    parked = dict(sweeper.parked)
    await async_client.delete(ks_outbox)
    await seeder.outbox("child", "e1")
    clock.advance(2.0)
    await _drain(sweeper)

    assert parked == {"outbox": f"{prefix}:outbox is a string, not a hash"}
    assert [e.kind for e in sink.delivered] == ["spawn", "timer", "outbox"]
    assert sweeper.parked == {}


# --- an ack carried to the next pass's read -------------------------------------------------------


async def test_when_another_pass_follows_the_ack_goes_with_its_read(async_client, prefix, seeder, clock):
    """Under a steady writer (the loop says a pass follows at once), a pass leaves its entries
    for the next pass's read to delete: delivered once, acked, counted, one round-trip less."""
    registry = CollectorRegistry()
    sink = MemorySink()
    sweeper = _sweeper(async_client, prefix, clock, {"outbox": sink, "spawn": sink, "timer": sink}, registry)
    await sweeper.start()
    outbox = sweeper.store.keyspace.outbox
    await seeder.outbox("t", "e1")
    await seeder.outbox("t", "e2")

    first = await sweeper.run_pass(notified=frozenset({"outbox"}), carry_acks=lambda: True)
    left_after_first = await async_client.hlen(outbox)
    await seeder.outbox("t", "e3")
    second = await sweeper.run_pass(notified=frozenset({"outbox"}), carry_acks=lambda: True)
    left_after_second = sorted(await async_client.hkeys(outbox))
    last = await sweeper.run_pass(notified=frozenset({"outbox"}), carry_acks=lambda: False)

    assert [e.body["event"]["id"] for e in sink.delivered] == ["e1", "e2", "e3"]
    assert (first.delivered.get("outbox", 0), left_after_first) == (0, 2)  # carried, not yet sent
    assert second.delivered["outbox"] == 2  # the first pass's, acked by this pass's read
    assert left_after_second == [b"3"]
    assert last.delivered["outbox"] == 1  # no pass follows: sent on its own
    assert await async_client.hlen(outbox) == 0
    total = registry.get_sample_value("relayd_delivered_total", {"prefix": prefix, "kind": "outbox"})
    assert total == 3


async def test_a_carried_ack_is_sent_by_settle_pending_and_by_abandon(async_client, prefix, seeder, clock):
    """A stop or hand-back settles the carried ack; a sweeper given up sends it on its own, fenced,
    as it lets an ack in flight finish (fewer redeliveries for the next lease holder)."""
    sink = MemorySink()
    sweeper = _sweeper(async_client, prefix, clock, sinks={"outbox": sink, "spawn": sink, "timer": sink})
    await sweeper.start()
    await seeder.outbox("t", "e1")
    await sweeper.run_pass(notified=frozenset({"outbox"}), carry_acks=lambda: True)
    await seeder.outbox("t", "e2")
    await sweeper.run_pass(notified=frozenset({"outbox"}), carry_acks=lambda: True)
    outbox = sweeper.store.keyspace.outbox
    assert await async_client.hkeys(outbox) == [b"2"]

    await sweeper.settle_pending()
    assert await async_client.hlen(outbox) == 0

    await seeder.outbox("t", "e3")
    await sweeper.run_pass(notified=frozenset({"outbox"}), carry_acks=lambda: True)
    assert sum(lane.carried is not None for lane in sweeper.lanes) == 1  # e3's ack, carried
    assert await async_client.hkeys(outbox) == [b"3"]  # delivered, its ack carried
    sweeper.abandon()
    assert all(lane.carried is None for lane in sweeper.lanes)
    assert [e.body["event"]["id"] for e in sink.delivered] == ["e1", "e2", "e3"]
    for _ in range(500):  # the ack runs as a task of its own
        if await async_client.hlen(outbox) == 0:
            break
        await asyncio.sleep(0.01)
    assert await async_client.hlen(outbox) == 0


async def test_without_the_loops_say_so_nothing_is_carried(async_client, prefix, seeder, clock):
    sweeper = _sweeper(async_client, prefix, clock)
    await sweeper.start()
    await seeder.outbox("t", "e1")

    result = await sweeper.run_pass(notified=frozenset({"outbox"}))

    assert result.delivered["outbox"] == 1
    assert await async_client.hlen(sweeper.store.keyspace.outbox) == 0
