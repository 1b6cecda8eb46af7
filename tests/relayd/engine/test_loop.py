"""run_relay: the drain of --once, exit codes, graceful stop, and the per-prefix lease."""

from __future__ import annotations

import asyncio
import time

import pytest
from prometheus_client import CollectorRegistry
from support.relays import start_relay
from support.waiting import until

from relayd.engine.loop import RunSummary
from relayd.engine.options import SweepOptions
from relayd.observability.health import Health
from relayd.observability.metrics import RelayMetrics
from relayd.sinks.base import DELIVERED, Permanent, Retry
from relayd.sinks.memory import MemorySink
from relayd.state import scripts
from relayd.state.lease import Lease, read_lease
from store import Keyspace

pytestmark = pytest.mark.usefixtures("backend")


class Relay:
    """One in-process replica: its own sink, metrics, health and stop event."""

    def __init__(self, client, prefix, sink=None, **options):
        self.sink = sink or MemorySink()
        self.registry = CollectorRegistry()
        self.metrics = RelayMetrics(self.registry)
        self.health = Health()
        self.stop = asyncio.Event()
        defaults = {
            "poll_interval_s": 0.05,
            "lease_ttl_s": 0.6,
            "backoff_base_s": 0.05,
            "shutdown_grace_s": 2.0,
        }
        self.options = SweepOptions(prefixes=(prefix,), **{**defaults, **options})
        self.client = client
        self.prefix = prefix
        self.task: asyncio.Task[RunSummary] | None = None

    def run(self) -> asyncio.Task[RunSummary]:
        self.task = start_relay(
            self.options, self.client, self.sink, metrics=self.metrics, health=self.health, stop=self.stop
        )
        return self.task

    @property
    def active(self) -> float | None:
        return self.registry.get_sample_value("relayd_active", {"prefix": self.prefix})

    async def finish(self) -> RunSummary:
        self.stop.set()
        assert self.task is not None
        return await asyncio.wait_for(self.task, 10)


async def test_once_drains_everything_due_and_exits_0(async_client, prefix, seeder):
    for i in range(250):
        await seeder.outbox(f"t{i % 7}", f"e{i}")
    for i in range(30):
        await seeder.spawn("p", f"c{i}")
        await seeder.timer(f"x{i}", "p", time.time() - i)
    await seeder.timer("x", "future", time.time() + 3600)
    relay = Relay(async_client, prefix, once=True, batch=64)

    summary = await asyncio.wait_for(relay.run(), 20)

    assert summary.delivered == {"spawn": 30, "outbox": 250, "timer": 30}
    assert (summary.left_for_retry, summary.exit_code) == (0, 0)
    assert relay.sink.started
    assert relay.sink.closed
    assert len(set(relay.sink.delivered_ids())) == 310
    assert await async_client.zcard(Keyspace(prefix).timers) == 1
    assert await read_lease(async_client, Keyspace(prefix)) is None  # released on the way out


async def test_once_exits_1_when_entries_are_left_for_retry_or_dead_lettered(async_client, prefix, seeder):
    await seeder.outbox("A", "retry-me")
    await seeder.outbox("B", "reject-me")
    await seeder.outbox("C", "fine")

    def script(env):
        return {"retry-me": Retry("later"), "reject-me": Permanent("no")}.get(
            env.body["event"]["id"], DELIVERED
        )

    relay = Relay(async_client, prefix, MemorySink(script), once=True, backoff_base_s=60.0)

    summary = await asyncio.wait_for(relay.run(), 10)

    assert (summary.delivered["outbox"], summary.left_for_retry, summary.dead_lettered["outbox"]) == (1, 1, 1)
    assert summary.exit_code == 1


async def test_stop_finishes_the_delivery_in_flight_acks_it_and_releases_the_lease(
    async_client, prefix, seeder
):
    """SIGTERM mid-delivery: the slow batch completes within the grace and is acked."""
    for i in range(5):
        await seeder.outbox("A", f"e{i}")
    relay = Relay(async_client, prefix)
    in_flight = asyncio.Event()

    async def slow_deliver(batch):
        in_flight.set()
        await asyncio.sleep(0.3)
        return [DELIVERED] * len(batch)

    relay.sink.deliver = slow_deliver
    relay.run()
    await asyncio.wait_for(in_flight.wait(), 5)

    summary = await relay.finish()

    assert summary.delivered["outbox"] == 5
    assert summary.exit_code == 0
    assert await async_client.hlen(Keyspace(prefix).outbox) == 0
    assert await read_lease(async_client, Keyspace(prefix)) is None
    assert (
        relay.registry.get_sample_value(
            "relayd_lease_transitions_total", {"prefix": prefix, "event": "released"}
        )
        == 1
    )


async def test_a_delivery_past_the_grace_is_cancelled_and_left_unacked(async_client, prefix, seeder):
    await seeder.outbox("A", "e0")
    relay = Relay(async_client, prefix, shutdown_grace_s=0.1)
    in_flight = asyncio.Event()

    async def hang(batch):
        in_flight.set()
        await asyncio.sleep(30)
        return [DELIVERED] * len(batch)

    relay.sink.deliver = hang
    relay.run()
    await asyncio.wait_for(in_flight.wait(), 5)
    started = time.monotonic()

    await relay.finish()

    assert time.monotonic() - started < 2
    assert await async_client.hlen(Keyspace(prefix).outbox) == 1  # redelivered by the next run


async def test_passes_run_in_the_prefix_task_and_an_outside_cancel_still_ends_it(
    async_client, prefix, seeder
):
    """No task per pass: every delivery runs in the one task of the prefix loop; a cancel that
    is not the grace's (the relay's task group cancelled) is not taken for the end of a pass."""
    relay = Relay(async_client, prefix)
    tasks: list[asyncio.Task[object] | None] = []
    in_flight = asyncio.Event()
    deliver = relay.sink.deliver

    async def noting(batch):
        tasks.append(asyncio.current_task())
        if len(tasks) == 3:
            in_flight.set()
            await asyncio.sleep(30)
        return await deliver(batch)

    relay.sink.deliver = noting
    run = relay.run()
    for i in range(3):
        await seeder.outbox("A", f"e{i}")
        await until(lambda i=i: len(tasks) > i)
    await asyncio.wait_for(in_flight.wait(), 5)

    assert len(set(tasks)) == 1
    assert tasks[0] is not None
    assert tasks[0] is not run
    run.cancel()
    with pytest.raises(asyncio.CancelledError):
        await asyncio.wait_for(run, 5)


async def test_two_replicas_one_active_and_the_standby_takes_over_on_release(async_client, prefix, seeder):
    first, second = Relay(async_client, prefix), Relay(async_client, prefix)
    first.run()
    await until(lambda: first.active == 1)
    second.run()
    await asyncio.sleep(0.5)
    for i in range(20):
        await seeder.outbox(f"t{i}", f"e{i}")
    await until(lambda: len(first.sink.delivered) == 20)

    assert second.active == 0
    assert second.sink.attempted == []
    holder = await read_lease(async_client, Keyspace(prefix))
    assert holder is not None

    await first.finish()
    await until(lambda: second.active == 1, timeout_s=3)
    await seeder.outbox("t", "after-handover")
    await until(lambda: len(second.sink.delivered) == 1)
    await second.finish()


async def test_standby_takes_over_within_the_ttl_when_the_holder_dies(async_client, prefix, seeder):
    """A holder that died without releasing (its key still set) is replaced once the TTL runs out."""
    ks = Keyspace(prefix)
    await async_client.set(ks.relay("lease"), "ghost/1/dead", px=600)
    await seeder.outbox("t", "e")
    relay = Relay(async_client, prefix)
    started = time.monotonic()
    relay.run()

    await until(lambda: len(relay.sink.delivered) == 1, timeout_s=3)

    assert 0.4 < time.monotonic() - started < 1.6
    await relay.finish()


async def test_active_replica_stops_delivering_when_it_loses_the_lease(async_client, prefix, seeder):
    ks = Keyspace(prefix)
    relay = Relay(async_client, prefix)
    relay.run()
    await until(lambda: relay.active == 1)

    await async_client.set(ks.relay("lease"), "other/2/thief", px=10_000)
    await until(lambda: relay.active == 0, timeout_s=2)
    await seeder.outbox("t", "not-mine")
    await asyncio.sleep(0.4)

    assert relay.sink.attempted == []
    assert (
        relay.registry.get_sample_value("relayd_lease_transitions_total", {"prefix": prefix, "event": "lost"})
        == 1
    )
    await relay.finish()
    assert (await read_lease(async_client, ks)).token == "other/2/thief"  # not ours to release


async def test_once_leaves_a_prefix_another_replica_holds_to_it(async_client, prefix):
    """Another replica is active: nothing to do here, which is no failure (exit code 0)."""
    await async_client.set(Keyspace(prefix).relay("lease"), "other/2/x", px=60_000)
    relay = Relay(async_client, prefix, once=True, lease_ttl_s=60)

    summary = await asyncio.wait_for(relay.run(), 10)

    assert summary.skipped_prefixes == (prefix,)
    assert summary.exit_code == 0


async def test_the_membership_beat_keeps_the_lease_so_the_keeper_sends_no_renewal(
    async_client, prefix, monkeypatch
):
    """Idle cost: beats renew the lease, and the keeper renews only after a period with no beat.

    Causal, not counted against the clock: on a busy machine a beat may come late, and then the
    keeper's renewal is the fallback doing its job; what must never happen is a keeper renewal
    within a renewal period of a beat that renewed the lease.
    """
    ttl_s = 0.6
    period_s = ttl_s / 3
    # (when a beat that renewed the lease was sent, when its reply told the relay so), monotonic
    beats: list[tuple[float, float]] = []
    keeper: list[float] = []  # when the keeper sent a renewal (monotonic)
    real_extended = Lease.extended

    def recording_extended(self, sent_s):
        beats.append((sent_s, time.monotonic()))
        real_extended(self, sent_s)

    monkeypatch.setattr(Lease, "extended", recording_extended)
    relay = Relay(async_client, prefix, lease_ttl_s=ttl_s)
    relay.run()
    await until(lambda: relay.active == 1)
    real_eval = async_client.eval

    async def counting_eval(script, numkeys, *args):
        if script == scripts.LEASE_RENEW:
            keeper.append(time.monotonic())
        return await real_eval(script, numkeys, *args)

    async_client.eval = counting_eval
    try:
        await until(lambda: len(beats) >= 5, timeout_s=60)  # several beats renewed the lease
        assert relay.active == 1
        assert await read_lease(async_client, Keyspace(prefix)) is not None  # renewed in Redis too
        by_relay = list(keeper)
        # the recorder sees a renewal sent through this client (a stranger's: it renews nothing)
        stranger = Lease(async_client, Keyspace(prefix), ttl_s=ttl_s, monotonic=time.monotonic)
        assert not await stranger.renew()
        assert len(keeper) == len(by_relay) + 1
    finally:
        async_client.eval = real_eval
        summary = await relay.finish()

    # The keeper can only know of a beat whose reply came back before it decided: on a loaded
    # machine a beat sent earlier may still be waiting for its reply, and renewing then is right.
    for renewed_s in by_relay:
        last_beat_s = max((sent for sent, known in beats if known <= renewed_s), default=None)
        assert last_beat_s is None or renewed_s - last_beat_s >= period_s, (renewed_s, beats)
    assert summary.exit_code == 0


def test_a_once_run_that_left_a_kind_parked_exits_1():
    """A key of the wrong type is work not done: ``--once`` says so with its exit code."""
    assert RunSummary(delivered={"timer": 3}).exit_code == 0
    assert RunSummary(delivered={"timer": 3}, parked_lanes=("p:outbox",)).exit_code == 1
