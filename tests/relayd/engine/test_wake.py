"""Wake-up on keyspace notifications: the pure mapping, and the relay woken at once (or polling on)."""

from __future__ import annotations

import asyncio
import dataclasses
import time

import fakeredis
import pytest
import redis
import redis.asyncio as aioredis
import structlog
from prometheus_client import CollectorRegistry
from support.relays import start_relay
from support.seeding import outbox_value
from support.waiting import until

from relayd.engine.clock import SYSTEM_CLOCK
from relayd.engine.loop import RunSummary
from relayd.engine.notify import (
    channel,
    new_work,
    notifications_ready,
    suggested_flags,
    watched_channels,
)
from relayd.engine.options import SweepOptions
from relayd.engine.passes import PassResult
from relayd.engine.prefix_relay import PrefixRelay
from relayd.engine.wake import WakeSubscriber, WakeTarget
from relayd.observability.health import Health
from relayd.observability.metrics import RelayMetrics
from relayd.sinks.memory import MemorySink

# --- pure -------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("flags", "ready", "suggested"),
    [
        ("", False, "Khz"),
        ("Ex", False, "ExKhz"),
        ("Kh", False, "Khz"),
        ("Khz", True, "Khz"),
        ("KA", True, "KA"),
        ("AE", False, "AEK"),
        ("Ez", False, "EzKh"),
        ("hzK", True, "hzK"),
    ],
)
def test_which_server_flags_publish_what_relayd_needs(flags, ready, suggested):
    assert notifications_ready(flags) is ready
    assert suggested_flags(flags) == suggested
    assert notifications_ready(suggested_flags(flags))


def test_each_prefix_watches_its_outbox_spawns_and_timers_channels():
    mapping = {name: prefix for name, (prefix, _) in watched_channels(["a", "{b}"], db=3).items()}

    assert mapping == {
        b"__keyspace@3__:a:outbox": "a",
        b"__keyspace@3__:a:spawns": "a",
        b"__keyspace@3__:a:timers": "a",
        b"__keyspace@3__:{b}:outbox": "{b}",
        b"__keyspace@3__:{b}:spawns": "{b}",
        b"__keyspace@3__:{b}:timers": "{b}",
    }
    assert channel(0, "x:outbox") == "__keyspace@0__:x:outbox"


@pytest.mark.parametrize(
    ("event", "expected"),
    [(b"hset", True), ("zadd", True), (b"hsetnx", True), (b"hdel", False), (b"zrem", False), (b"del", False)],
)
def test_only_events_that_may_add_work_wake(event, expected):
    name = event.encode() if isinstance(event, str) else event
    reply = [b"message", b"__keyspace@0__:p:outbox", name]

    assert bool(new_work([reply], watched_channels(["p"], db=0))) is expected


# --- the relay, woken -------------------------------------------------------------------------


@pytest.fixture
async def notifying_client(backend, request):
    """A client on a server that publishes hash and zset keyspace events (its own server)."""
    if backend == "real":
        server = request.getfixturevalue("own_redis_server")
        client = aioredis.Redis(port=server.port)
    else:
        client = fakeredis.FakeAsyncRedis(server=fakeredis.FakeServer())
    await client.config_set("notify-keyspace-events", "Khz")
    yield client
    await client.aclose()


class Relay:
    """One long-running relay at a 5 s poll interval; records when each entry was delivered."""

    def __init__(self, client, prefix, *, wake: bool) -> None:
        self.client, self.prefix = client, prefix
        self.delivered_at: dict[str, float] = {}
        self.sink = MemorySink()
        inner = self.sink.deliver

        async def deliver(batch):
            outcomes = await inner(batch)
            for envelope in batch:
                self.delivered_at[envelope.body["event"]["id"]] = time.monotonic()
            return outcomes

        self.sink.deliver = deliver  # type: ignore[method-assign]
        self.registry = CollectorRegistry()
        self.stop = asyncio.Event()
        self.options = SweepOptions(prefixes=(prefix,), poll_interval_s=5.0, lease_ttl_s=5.0, wake=wake)
        self.task: asyncio.Task[RunSummary] | None = None

    def run(self) -> None:
        self.task = start_relay(
            self.options,
            self.client,
            self.sink,
            metrics=RelayMetrics(self.registry),
            health=Health(),
            stop=self.stop,
        )

    def sample(self, name: str) -> float:
        return self.registry.get_sample_value(name, {"prefix": self.prefix}) or 0.0

    async def after_a_pass(self) -> None:
        """Return just after an idle pass finished (the next poll is at least 1.25 s away then)."""
        before = self.sample("relayd_last_sweep_timestamp_seconds")
        await until(lambda: self.sample("relayd_last_sweep_timestamp_seconds") != before, 8.0)

    async def finish(self) -> None:
        self.stop.set()
        assert self.task is not None
        await asyncio.wait_for(self.task, 10)


async def commit(client, prefix: str, event_id: str) -> None:
    """Write one outbox entry the way the engine's commit does (docs/internals.md#key-space)."""
    seq = int(await client.incr(f"{prefix}:outbox:seq"))
    await client.hset(f"{prefix}:outbox", str(seq), outbox_value("A", event_id))


async def _idle(relay: Relay) -> None:
    """Let the idle backoff grow (its first three waits total at most 2.2 s at a 5 s interval)."""
    relay.run()
    await until(lambda: relay.sample("relayd_active") == 1, 5.0)
    await asyncio.sleep(2.5)
    await relay.after_a_pass()


@pytest.mark.slow
@pytest.mark.usefixtures("backend")
async def test_an_entry_committed_to_an_idle_relay_is_delivered_at_once_with_wake(notifying_client, prefix):
    relay = Relay(notifying_client, prefix, wake=True)
    try:
        await _idle(relay)
        committed_s = time.monotonic()
        await commit(notifying_client, prefix, "e1")
        await until(lambda: "e1" in relay.delivered_at, 2.0)
        # A timer earlier than the next poll: the woken pass plans to sleep only until it is due.
        await notifying_client.zadd(f"{prefix}:timers", {"x\x00soon": time.time() + 0.3})
        await until(lambda: len(relay.sink.delivered) == 2, 2.0)
    finally:
        await relay.finish()

    assert relay.delivered_at["e1"] - committed_s < 2.0
    assert relay.sample("relayd_wakeups_total") >= 2


@pytest.mark.slow
@pytest.mark.usefixtures("backend")
async def test_without_wake_the_entry_waits_for_the_idle_poll(notifying_client, prefix):
    relay = Relay(notifying_client, prefix, wake=False)
    try:
        await _idle(relay)
        committed_s = time.monotonic()
        await commit(notifying_client, prefix, "e1")
        await asyncio.sleep(1.0)
        assert "e1" not in relay.delivered_at  # the next poll is 1.25 s or more after the last
        await until(lambda: "e1" in relay.delivered_at, 6.0)
    finally:
        await relay.finish()

    assert relay.delivered_at["e1"] - committed_s >= 1.0
    assert relay.sample("relayd_wakeups_total") == 0


async def test_without_notifications_on_the_server_it_logs_why_and_still_polls(own_redis_server, prefix):
    client = aioredis.Redis(port=own_redis_server.port)
    seeder_client = aioredis.Redis(port=own_redis_server.port)
    try:
        await client.config_set("notify-keyspace-events", "Ex")
        relay = Relay(client, prefix, wake=True)
        relay.options = SweepOptions(prefixes=(prefix,), poll_interval_s=0.5, lease_ttl_s=5.0, wake=True)
        with structlog.testing.capture_logs() as logs:
            relay.run()
            await until(lambda: relay.sample("relayd_active") == 1, 5.0)
            await commit(seeder_client, prefix, "e1")
            await until(lambda: "e1" in relay.delivered_at, 5.0)
            await relay.finish()
    finally:
        await client.aclose()
        await seeder_client.aclose()

    [line] = [entry for entry in logs if entry["event"] == "wake_unavailable"]
    assert line["fix"] == "CONFIG SET notify-keyspace-events xEKhz"  # Redis reorders the flags
    assert not [entry for entry in logs if entry["event"] == "wake_subscribed"]


@pytest.fixture
async def relay_and_admin_clients(own_redis_server):
    """The relay's client and a second one, on a server of the test's own that publishes Khz."""
    client = aioredis.Redis(port=own_redis_server.port)
    admin = aioredis.Redis(port=own_redis_server.port)
    await admin.config_set("notify-keyspace-events", "Khz")
    yield client, admin
    await client.aclose()
    await admin.aclose()


async def _delivery_after_a_pass_s(relay: Relay, admin, prefix: str) -> float:
    """Commit just after an idle pass (the next poll is over a second away): seconds to delivery."""
    await relay.after_a_pass()
    committed_s = time.monotonic()
    await commit(admin, prefix, "after")
    await until(lambda: "after" in relay.delivered_at, 2.0)
    return relay.delivered_at["after"] - committed_s


@pytest.mark.slow
async def test_a_killed_subscription_comes_back_and_delivery_never_stops(relay_and_admin_clients, prefix):
    client, admin = relay_and_admin_clients
    relay = Relay(client, prefix, wake=True)
    try:
        with structlog.testing.capture_logs() as logs:
            await _idle(relay)
            killed = await admin.execute_command("CLIENT", "KILL", "TYPE", "pubsub")
            await commit(admin, prefix, "while-down")
            await until(lambda: "while-down" in relay.delivered_at, 6.0)  # by poll or by the comeback
            await until(lambda: _count(logs, "wake_subscribed") == 2, 5.0)
            after_s = await _delivery_after_a_pass_s(relay, admin, prefix)
    finally:
        await relay.finish()

    assert killed == 1
    assert after_s < 2.0


def _count(logs, event: str) -> int:
    return sum(1 for entry in logs if entry["event"] == event)


@pytest.mark.slow
async def test_a_busy_prefix_keeps_its_subscription_and_every_entry_is_delivered(
    relay_and_admin_clients, prefix
):
    """Passes running back to back leave the subscription as it is (no UNSUBSCRIBE, no
    SUBSCRIBE again): the channel has its one listener at every sample while the backlog drains,
    and one subscription was made in all."""
    client, admin = relay_and_admin_clients
    outbox_channel = f"__keyspace@0__:{prefix}:outbox"
    relay = Relay(client, prefix, wake=True)
    relay.options = dataclasses.replace(relay.options, batch=10)
    inner = relay.sink.deliver

    async def slow(batch):
        await asyncio.sleep(0.01)  # 300 batches: a few seconds of back-to-back passes
        return await inner(batch)

    relay.sink.deliver = slow  # type: ignore[method-assign]

    async def listeners() -> int:
        [(_, count)] = await admin.pubsub_numsub(outbox_channel)
        return int(count)

    busy: list[int] = []  # listeners, sampled while entries were still waiting
    try:
        with structlog.testing.capture_logs() as logs:
            await _idle(relay)
            async with admin.pipeline(transaction=False) as pipe:  # a backlog in one go
                for n in range(1, 3001):
                    pipe.incr(f"{prefix}:outbox:seq")
                    pipe.hset(f"{prefix}:outbox", str(n), outbox_value("A", f"bulk-{n}"))
                await pipe.execute()
            while len(relay.delivered_at) < 3000 and len(busy) < 3000:
                busy.append(await listeners())
                await asyncio.sleep(0.01)
            await until(lambda: len(relay.delivered_at) == 3000, 30.0)
            after_s = await _delivery_after_a_pass_s(relay, admin, prefix)
    finally:
        await relay.finish()

    assert len(busy) >= 10
    assert set(busy) == {1}
    assert _count(logs, "wake_subscribed") == 1
    assert after_s < 2.0


async def test_when_the_server_stops_publishing_the_poll_interval_still_finds_new_work(
    relay_and_admin_clients, prefix
):
    """A live subscription that falls silent: the loop's fallback wait and the sweeper's full
    probe once per poll interval deliver the entry anyway."""
    client, admin = relay_and_admin_clients
    relay = Relay(client, prefix, wake=True)
    relay.options = SweepOptions(prefixes=(prefix,), poll_interval_s=0.5, lease_ttl_s=5.0, wake=True)
    try:
        with structlog.testing.capture_logs() as logs:
            relay.run()
            await until(lambda: _count(logs, "wake_subscribed") == 1, 5.0)
            await commit(admin, prefix, "noticed")
            await until(lambda: "noticed" in relay.delivered_at, 5.0)
            await admin.config_set("notify-keyspace-events", "")
            await commit(admin, prefix, "silent")
            await until(lambda: "silent" in relay.delivered_at, 10.0)
    finally:
        await relay.finish()


# --- the loop's decision after a pass ---------------------------------------------------------


class _StubSweeper:
    """Stands in for the sweeper: runs the passes a test scripts, records what each was told."""

    def __init__(self, passes) -> None:
        self.passes = list(passes)
        self.notified: list[frozenset | None] = []
        self.carry_acks: list = []
        self.parked: dict = {}  # no lane parked (wrong key type)

    async def start(self) -> None:
        pass

    async def run_pass(self, stop, *, notified=None, carry_acks=None):
        self.notified.append(notified)
        self.carry_acks.append(carry_acks)
        return self.passes.pop(0)()

    def abandon(self) -> None:
        pass

    def held_count(self) -> int:
        return 0

    async def settle_pending(self, tally=None) -> None:
        pass

    async def checkpoint(self, *, busy=False) -> None:
        pass


#: The engine's default linger (``--linger``).
DEFAULT_LINGER_S = SweepOptions().linger_s


def _stub_relay(async_client, prefix, *, live: bool, linger_s: float = DEFAULT_LINGER_S):
    """A ``PrefixRelay`` holding its lease, its passes scripted, its waits recorded, not slept."""
    stop = asyncio.Event()
    options = SweepOptions(
        prefixes=(prefix,), poll_interval_s=5.0, lease_ttl_s=5.0, wake=True, linger_s=linger_s
    )
    relay = PrefixRelay(
        prefix,
        options=options,
        redis=async_client,
        sinks={},
        guards={},
        metrics=RelayMetrics(CollectorRegistry()),
        health=Health(),
        stop=stop,
        clock=SYSTEM_CLOCK,
    )
    relay.lease.held = lambda: True  # type: ignore[method-assign]
    relay.keeper.active = True
    relay.notices_live = lambda: live
    waits: list[float] = []

    async def wait(timeout_s, wake=None):
        waits.append(timeout_s)
        if len(waits) > 5:
            stop.set()

    relay._wait = wait  # type: ignore[method-assign]
    return relay, stop, waits


async def test_a_notice_during_a_pass_starts_the_next_pass_without_an_idle_wait(async_client, prefix):
    """The pass reads nothing, but a write is noticed while it runs (the subscriber's wake): the
    loop goes straight to the next pass, which is told the kind written; only after that quiet
    pass does it wait, a whole poll interval (the subscription is live)."""
    relay, stop, waits = _stub_relay(async_client, prefix, live=True)
    subscriber = WakeSubscriber(async_client, {prefix: relay.wake})
    waits_before_second_pass: list[int] = []

    def quiet_pass_noticing_a_write():
        subscriber._wake(prefix, "outbox")  # as a message folded during the pass does
        return PassResult()

    def quiet_pass():
        waits_before_second_pass.append(len(waits))
        return PassResult()

    def last_pass():
        stop.set()
        return PassResult()

    sweeper = _StubSweeper([quiet_pass_noticing_a_write, quiet_pass, last_pass])
    relay._new_sweeper = lambda: sweeper  # type: ignore[method-assign]

    await relay._loop()

    assert waits_before_second_pass == [0]
    assert sweeper.notified[:2] == [frozenset(), frozenset({"outbox"})]
    assert len(waits) == 2  # after the second pass, and after the last
    assert min(waits) >= 0.85 * relay.options.poll_interval_s


@pytest.mark.parametrize(
    ("linger_s", "between_busy_passes"),
    [
        pytest.param(DEFAULT_LINGER_S, [pytest.approx(DEFAULT_LINGER_S - 0.001)] * 2, id="default-linger"),
        pytest.param(0.0, [], id="no-linger"),
    ],
)
async def test_after_a_pass_that_read_something_a_noticed_write_waits_only_the_linger(
    async_client, prefix, linger_s, between_busy_passes
):
    """Commits one after another: the next pass is put off by the linger (so it takes several),
    never by an idle wait; passes start a period apart, the linger being what a pass left of it.
    ``--linger 0`` starts each pass as soon as the last one ends: no wait between them at all."""
    relay, stop, waits = _stub_relay(async_client, prefix, live=True, linger_s=linger_s)
    clock = _SteppingClock(step_s=0.001)
    relay.clock = clock
    subscriber = WakeSubscriber(async_client, {prefix: relay.wake})

    def working_pass_noticing_a_write():
        clock.advance()  # the pass took a millisecond
        subscriber._wake(prefix, "outbox")
        return PassResult(read=3, attempted=3, delivered={"outbox": 3})

    def last_pass():
        stop.set()
        return PassResult()

    sweeper = _StubSweeper([working_pass_noticing_a_write, working_pass_noticing_a_write, last_pass])
    relay._new_sweeper = lambda: sweeper  # type: ignore[method-assign]

    await relay._loop()

    assert waits[:-1] == between_busy_passes  # the last wait is the idle one after the last pass
    assert sweeper.notified[1:3] == [frozenset({"outbox"})] * 2


async def test_a_write_after_a_pass_that_read_something_waits_the_rest_of_the_period(async_client, prefix):
    """A pass faster than the commits: it read something, nothing was written while it ran, and
    the next commit comes a millisecond later. The next pass still starts a period after this
    one began (the linger): how often passes start does not grow as a pass gets faster."""
    relay, stop, waits = _stub_relay(async_client, prefix, live=True)
    clock = _SteppingClock(step_s=0.001)
    relay.clock = clock
    subscriber = WakeSubscriber(async_client, {prefix: relay.wake})
    woken_by_a_write: list[float] = []

    async def wait(timeout_s, wake=None):
        waits.append(timeout_s)
        if wake is not None and not stop.is_set():  # the idle wait: a commit ends it
            clock.advance()
            subscriber._wake(prefix, "outbox")
            woken_by_a_write.append(timeout_s)

    relay._wait = wait  # type: ignore[method-assign]

    def working_pass():
        clock.advance()  # the pass took a millisecond
        return PassResult(read=1, attempted=1, delivered={"outbox": 1})

    def last_pass():
        stop.set()
        return PassResult()

    sweeper = _StubSweeper([working_pass, working_pass, last_pass])
    relay._new_sweeper = lambda: sweeper  # type: ignore[method-assign]

    await relay._loop()

    # After each working pass: the idle wait (a write ends it), then the rest of the period.
    lingers = [wait_s for wait_s in waits if wait_s not in woken_by_a_write]
    assert len(woken_by_a_write) == 2
    assert lingers[:2] == [pytest.approx(DEFAULT_LINGER_S - 0.002)] * 2
    assert sweeper.notified[1:3] == [frozenset({"outbox"})] * 2


async def test_a_pass_that_took_the_whole_period_is_followed_by_the_next_at_once(async_client, prefix):
    """A slow pass (a busy machine) adds no linger: its commits have waited long enough."""
    relay, stop, waits = _stub_relay(async_client, prefix, live=True)
    subscriber = WakeSubscriber(async_client, {prefix: relay.wake})
    clock = _SteppingClock(step_s=DEFAULT_LINGER_S)  # each pass takes a whole period
    relay.clock = clock

    def slow_working_pass():
        clock.advance()
        subscriber._wake(prefix, "outbox")
        return PassResult(read=3, attempted=3, delivered={"outbox": 3})

    def last_pass():
        stop.set()
        return PassResult()

    sweeper = _StubSweeper([slow_working_pass, slow_working_pass, last_pass])
    relay._new_sweeper = lambda: sweeper  # type: ignore[method-assign]

    await relay._loop()

    assert sweeper.notified[1:3] == [frozenset({"outbox"})] * 2
    assert len(waits) == 1  # no linger nor idle wait between the busy passes: only after the last


class _SteppingClock:
    """The system clock's epoch reading; a monotonic one that stands still but for ``advance``."""

    def __init__(self, step_s: float) -> None:
        self.step_s = step_s
        self.offset_s = 0.0
        self.start_s = SYSTEM_CLOCK.monotonic()

    def advance(self) -> None:
        self.offset_s += self.step_s

    def now(self) -> float:
        return SYSTEM_CLOCK.now() + self.offset_s

    def monotonic(self) -> float:
        return self.start_s + self.offset_s


async def test_every_pass_of_a_loop_watches_stop_with_the_same_task(async_client, prefix):
    """A pass runs beside a watch on ``stop`` (so a stop can cut it short after the grace): one
    task for the loop's life, not one created and cancelled per pass."""
    relay, stop, _ = _stub_relay(async_client, prefix, live=True)
    watchers: list[asyncio.Task] = []

    def working_pass():
        assert relay._stop_waiter is not None  # made by the loop, not by this test
        watchers.append(relay._stop_waiter)
        return PassResult(read=1, attempted=1, delivered={"outbox": 1})

    def last_pass():
        stop.set()
        return PassResult()

    relay._new_sweeper = lambda: _StubSweeper([working_pass] * 3 + [last_pass])  # type: ignore[method-assign]

    await relay.run()

    assert len(watchers) == 3
    assert len(set(map(id, watchers))) == 1
    assert watchers[0].done()  # ended with the loop


@pytest.mark.parametrize("live", [True, False])
async def test_a_pass_may_carry_its_ack_only_when_the_loop_hears_of_writes(async_client, prefix, live):
    """With a live subscription the loop lets a pass carry its last ack to the next pass's read
    when a write was noticed by the pass's end (the next pass then comes at once)."""
    relay, stop, _ = _stub_relay(async_client, prefix, live=live)
    sweeper = _StubSweeper([PassResult, lambda: (stop.set(), PassResult())[1]])
    relay._new_sweeper = lambda: sweeper  # type: ignore[method-assign]

    await relay._loop()

    if not live:
        assert sweeper.carry_acks == [None, None]
        return
    ask = sweeper.carry_acks[0]
    relay.loop_wake.clear()
    assert ask() is False
    relay.loop_wake.set()
    assert ask() is True


async def test_without_a_live_subscription_the_idle_wait_starts_short_and_no_kinds_are_given(
    async_client, prefix
):
    relay, stop, waits = _stub_relay(async_client, prefix, live=False)
    sweeper = _StubSweeper([PassResult] * 3 + [lambda: (stop.set(), PassResult())[1]])
    relay._new_sweeper = lambda: sweeper  # type: ignore[method-assign]

    await relay._loop()

    assert sweeper.notified == [None] * 4
    assert waits[0] <= relay.options.poll_interval_s / 16
    assert waits[1] > waits[0]


# --- the subscriber's reads -------------------------------------------------------------------


def test_a_read_of_many_messages_is_folded_into_one_wake_per_prefix_and_kind():
    channels = watched_channels(["a", "b"], db=0)
    replies = [
        [b"message", b"__keyspace@0__:a:outbox", b"hset"],
        [b"message", b"__keyspace@0__:a:outbox", b"hset"],
        [b"message", b"__keyspace@0__:a:outbox", b"hdel"],
        [b"message", b"__keyspace@0__:b:timers", b"zadd"],
        [b"message", b"__keyspace@0__:b:spawns", b"hdel"],
        [b"message", b"__keyspace@0__:elsewhere", b"hset"],
        [b"subscribe", b"__keyspace@0__:a:spawns", 3],
    ]

    assert new_work(replies, channels) == {("a", "outbox"), ("b", "timer")}


async def test_messages_published_while_the_loop_is_busy_are_read_in_a_few_reads(relay_and_admin_clients):
    """Hundreds of writes while the event loop is held elsewhere: the subscriber takes them all
    in far fewer socket reads than messages, and wakes the prefix once."""
    client, admin = relay_and_admin_clients
    target = WakeTarget()
    subscriber = WakeSubscriber(client, {"busy": target}, metrics=None)
    stop = asyncio.Event()
    task = asyncio.create_task(subscriber.run(stop))
    try:
        await until(lambda: subscriber.live, 5.0)
        target.take()
        target.event.clear()
        writer = redis.Redis(port=admin.connection_pool.connection_kwargs["port"])
        before = subscriber.replies
        for n in range(500):  # synchronous: the event loop (and the subscriber) cannot run
            writer.hset("busy:outbox", str(n), b"v")
        writer.close()
        await until(lambda: subscriber.replies - before >= 500, 10.0)
    finally:
        stop.set()
        await task

    assert subscriber.reads < 100
    assert target.take() == {"outbox"}
    assert subscriber.subscriptions == 1


async def test_while_every_target_is_woken_the_socket_is_left_unread_until_a_loop_takes_its_wake(
    relay_and_admin_clients,
):
    """Writes while the prefix is already woken stay in the kernel's buffer (the event loop does
    not wake per message); taking the wake-up resumes reading and they come in one read."""
    client, admin = relay_and_admin_clients
    target = WakeTarget()
    subscriber = WakeSubscriber(client, {"busy": target}, metrics=None)
    stop = asyncio.Event()
    task = asyncio.create_task(subscriber.run(stop))
    try:
        await until(lambda: subscriber.live, 5.0)
        await until(lambda: subscriber.socket_paused, 5.0)  # the subscription woke every target
        replies_before, reads_before = subscriber.replies, subscriber.reads
        for n in range(50):
            await admin.hset("busy:outbox", str(n), b"v")
        await admin.ping()  # every message is published before this reply
        assert subscriber.socket_paused
        assert subscriber.replies == replies_before

        target.take()
        await until(lambda: subscriber.replies - replies_before >= 50, 5.0)
        assert subscriber.reads - reads_before <= 2
        await until(lambda: subscriber.socket_paused, 5.0)  # woken again by those writes
    finally:
        stop.set()
        await task

    assert target.take() == {"outbox"}
