"""Wake-up on keyspace notifications: the pure mapping, and the relay woken at once (or polling on)."""

from __future__ import annotations

import asyncio
import dataclasses
import time

import fakeredis
import pytest
import redis.asyncio as aioredis
import structlog
from prometheus_client import CollectorRegistry
from support.relays import start_relay
from support.seeding import outbox_value
from support.waiting import until

from relayd.engine.loop import RunSummary
from relayd.engine.notify import channel, channels_by_prefix, notifications_ready, suggested_flags, wakes
from relayd.engine.options import SweepOptions
from relayd.health import Health
from relayd.metrics import RelayMetrics
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
    mapping = channels_by_prefix(["a", "{b}"], db=3)

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
    assert wakes(event) is expected


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
    """Write one outbox entry the way the engine's commit does (DESIGN §2)."""
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
async def test_a_busy_prefix_leaves_its_channels_and_rejoins_when_idle(relay_and_admin_clients, prefix):
    """While passes run back to back the subscription drops the prefix (each message costs relay
    CPU); once the loop waits idle again it subscribes again and wakes at once as before."""
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

    seen: list[int] = []
    try:
        await _idle(relay)
        seen.append(await listeners())  # idle: subscribed
        for n in range(3000):
            await commit(admin, prefix, f"bulk-{n}")
        for _ in range(300):  # sample while the backlog drains
            seen.append(await listeners())
            if 0 in seen[1:]:
                break
            await asyncio.sleep(0.01)
        await until(lambda: len(relay.delivered_at) == 3000, 30.0)
        deadline = time.monotonic() + 5.0
        while await listeners() != 1 and time.monotonic() < deadline:
            await asyncio.sleep(0.05)
        seen.append(await listeners())  # idle again: subscribed again
        after_s = await _delivery_after_a_pass_s(relay, admin, prefix)
    finally:
        await relay.finish()

    assert seen[0] == 1
    assert 0 in seen[1:-1]
    assert seen[-1] == 1
    assert after_s < 2.0
