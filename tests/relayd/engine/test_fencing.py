"""The sweeper under its lease's fence: nothing sent past the local deadline, no settlement
written past it, and an ack Redis refuses (another replica's token) deletes nothing and stops
the pass with ``Fenced``, which the prefix loop reports."""

from __future__ import annotations

import asyncio
import random
from typing import get_args

import pytest
from prometheus_client import CollectorRegistry
from structlog.testing import capture_logs

from relayd.engine.fencing import REPORTED_AS, Fenced, FenceGuard, FenceReason, report_fenced
from relayd.engine.options import SweepOptions
from relayd.engine.sweeper import Sweeper
from relayd.observability.metrics import FENCE_REASONS, RelayMetrics
from relayd.sinks.base import DELIVERED, Outcome
from relayd.sinks.memory import MemorySink
from relayd.sinks.per_key import deliver_in_key_order
from relayd.sinks.sending import NOT_SENT, may_send, sending_while
from relayd.state.keys import RelayKeys
from store import AsyncRedisStore, Fence, Keyspace, StoreFenced

pytestmark = pytest.mark.usefixtures("backend")

TOKEN = "host-a/1/aa"


def _sweeper(client, prefix, clock, sink, *, held=lambda: True, batch=100):
    lease = RelayKeys(Keyspace(prefix)).lease
    return Sweeper(
        AsyncRedisStore(client, prefix=prefix),
        sinks={"outbox": sink, "spawn": sink, "timer": sink},
        options=SweepOptions(prefixes=(prefix,), batch=batch),
        metrics=RelayMetrics(CollectorRegistry()),
        clock=clock,
        rng=random.Random(1),
        may_deliver=held,
        fence=Fence(lease, TOKEN),
    )


class _TakenOverDuringTheCall(MemorySink):
    """A sink during whose call the standby takes the lease over."""

    def __init__(self, client, lease: str) -> None:
        super().__init__()
        self.client, self.lease = client, lease

    async def deliver(self, batch):
        await self.client.set(self.lease, "host-b/2/bb")
        return await super().deliver(batch)


async def test_an_ack_refused_by_redis_deletes_nothing_and_stops_the_pass(
    async_client, prefix, seeder, clock
):
    """Another replica took the lease during the sink call: the delivered batch stays for it."""
    for n in range(3):
        await seeder.outbox(f"T{n}", f"e{n}")
    await seeder.timer("exe", "a", clock.now() - 1)
    lease = RelayKeys(Keyspace(prefix)).lease
    await async_client.set(lease, TOKEN)
    sweeper = _sweeper(async_client, prefix, clock, _TakenOverDuringTheCall(async_client, lease))
    await sweeper.start()

    with pytest.raises(Fenced) as refused:
        await sweeper.run_pass()

    assert (refused.value.reason, refused.value.kind) == ("ack_refused", "outbox")
    assert refused.value.count == 3
    assert await async_client.hlen(Keyspace(prefix).outbox) == 3
    assert await async_client.zcard(Keyspace(prefix).timers) == 1


async def test_a_read_that_finds_another_replica_s_token_sends_nothing(async_client, prefix, seeder, clock):
    """The lease key was lost (a failover) and another replica took it while this one's deadline
    still lies ahead: the read checks the lease in its own round-trip and hands nothing over."""
    await seeder.spawn("root", "c1")
    for n in range(3):
        await seeder.outbox("T", f"e{n}")
    await async_client.set(RelayKeys(Keyspace(prefix)).lease, "host-b/2/bb")
    sink = MemorySink()
    sweeper = _sweeper(async_client, prefix, clock, sink)
    await sweeper.start()

    with pytest.raises(Fenced) as refused:
        await sweeper.run_pass()

    # the first lane's read (spawns) is refused: nothing of any lane is sent, and the pass stops
    assert (refused.value.reason, refused.value.kind, refused.value.count) == ("read_refused", "spawn", 1)
    assert sink.batches == []
    assert await async_client.hlen(Keyspace(prefix).outbox) == 3
    assert await async_client.hlen(Keyspace(prefix).spawns) == 1


async def test_the_deferred_ack_in_flight_is_refused_too(async_client, prefix, seeder, clock):
    """A full window's ack runs while the next window is delivered; the lease is taken over
    meanwhile: that ack is refused, its entries stay, and the next pass surfaces it."""
    for n in range(4):
        await seeder.outbox(f"T{n}", f"e{n}")
    lease = RelayKeys(Keyspace(prefix)).lease
    await async_client.set(lease, TOKEN)
    sink = MemorySink()
    sweeper = _sweeper(async_client, prefix, clock, sink, batch=2)
    await sweeper.start()
    store_ack = sweeper.store.ack_outbox_many
    taken = asyncio.Event()

    async def ack_after_takeover(fields, **fenced):
        await async_client.set(lease, "host-b/2/bb")  # the standby took over before this ack ran
        taken.set()
        return await store_ack(fields, **fenced)

    sweeper.store.ack_outbox_many = ack_after_takeover  # type: ignore[method-assign]

    async def run_passes() -> None:
        for _ in range(3):
            await sweeper.run_pass()

    with pytest.raises(Fenced) as refused:
        await run_passes()

    assert taken.is_set()
    # The ack was refused (nothing deleted); the read ahead beside it may say so first.
    assert refused.value.reason in {"ack_refused", "read_refused"}
    assert await async_client.hlen(Keyspace(prefix).outbox) == 4


async def test_nothing_is_sent_when_the_deadline_passed_while_waiting_for_the_sink(
    async_client, prefix, seeder, clock
):
    """The sink is shared with another prefix; while this batch waits for it, the lease's
    deadline passes: the batch is not handed over, its entries stay."""
    await seeder.outbox("T", "e0")
    await async_client.set(RelayKeys(Keyspace(prefix)).lease, TOKEN)
    sink = MemorySink()
    held = [True]
    lock = asyncio.Lock()
    sweeper = _sweeper(async_client, prefix, clock, sink, held=lambda: held[0])
    for lane in sweeper.lanes:
        lane.guard.lock = lock
    await sweeper.start()

    async with lock:  # another prefix's delivery holds the sink
        passing = asyncio.create_task(sweeper.run_pass())
        await asyncio.sleep(0.05)
        held[0] = False
    with pytest.raises(Fenced) as withheld:
        await passing

    assert (withheld.value.reason, withheld.value.count) == ("send_expired", 1)
    assert sink.batches == []
    assert await async_client.hlen(Keyspace(prefix).outbox) == 1


async def test_nothing_is_acked_once_the_local_deadline_passed_during_the_sink_call(
    async_client, prefix, seeder, clock
):
    await seeder.outbox("T", "e0")
    await async_client.set(RelayKeys(Keyspace(prefix)).lease, TOKEN)  # Redis would accept it
    held = [True]

    def deliver_then_pause(envelope):
        held[0] = False  # the process froze inside the sink call, past the deadline
        return DELIVERED

    sweeper = _sweeper(async_client, prefix, clock, MemorySink(deliver_then_pause), held=lambda: held[0])
    await sweeper.start()

    with pytest.raises(Fenced) as expired:
        await sweeper.run_pass()

    assert (expired.value.reason, expired.value.count) == ("ack_expired", 1)
    assert await async_client.hlen(Keyspace(prefix).outbox) == 1


async def test_a_per_key_loop_stops_sending_once_the_lease_may_be_gone():
    """Entries after the deadline are not sent; they come back Retry(NOT_SENT)."""
    held = [True]
    sent: list[int] = []

    async def send_one(index: int) -> Outcome:
        sent.append(index)
        if index == 1:
            held[0] = False
        return DELIVERED

    with sending_while(lambda: held[0]):
        outcomes = await deliver_in_key_order(["a", "a", "a", "b"], send_one)

    assert sent[:2] == [0, 1]
    assert 2 not in sent
    assert outcomes[2] == outcomes[2].__class__(error=NOT_SENT)  # type: ignore[call-arg]  # a Retry
    assert may_send()  # outside a delivery


def test_every_reason_has_its_line_and_its_metric_series():
    """A reason added to ``FenceReason`` needs its warning line and its pre-made metric series."""
    assert set(REPORTED_AS) == set(get_args(FenceReason)) == set(FENCE_REASONS)


@pytest.mark.parametrize(
    ("reason", "event", "outcome"),
    [
        ("ack_refused", "ack_fenced", "refused"),
        ("ack_expired", "ack_fenced", "lease_expired"),
        ("send_expired", "send_fenced", "lease_expired"),
        ("read_refused", "send_fenced", "refused"),
    ],
)
def test_a_refusal_is_logged_and_counted(reason, event, outcome):
    metrics = RelayMetrics(CollectorRegistry())
    metrics.add_prefix("p")

    with capture_logs() as logs:
        report_fenced(metrics, "p", Fenced("outbox", 7, reason))

    assert logs == [
        {
            "event": event,
            "log_level": "warning",
            "prefix": "p",
            "kind": "outbox",
            "count": 7,
            "outcome": outcome,
        }
    ]
    value = metrics.registry.get_sample_value(
        "relayd_fenced_total", {"prefix": "p", "kind": "outbox", "reason": reason}
    )
    assert value == 7


def test_one_guard_names_every_way_a_send_or_write_is_refused():
    """``FenceGuard``: the local deadline before a send (``send_expired``) and before a write
    (``ack_expired``), Redis's refusal of a write (``ack_refused``); a write of nothing is no
    write, and a term that holds lets both through."""
    expired, holding = FenceGuard(lambda: False), FenceGuard(lambda: True)

    def reason(action) -> str | None:
        try:
            action()
        except Fenced as fenced:
            return f"{fenced.reason} {fenced.count}"
        return None

    def write(guard: FenceGuard, count: int, refused: bool = False) -> None:
        with guard.writing("outbox", count):
            if refused:
                raise StoreFenced("RELAYD_FENCED")

    assert reason(lambda: expired.before_send("outbox", 3)) == "send_expired 3"
    assert reason(lambda: write(expired, 2)) == "ack_expired 2"
    assert reason(lambda: write(holding, 4, refused=True)) == "ack_refused 4"
    assert reason(lambda: write(expired, 0)) is None
    assert reason(lambda: holding.before_send("outbox", 1)) is None
    assert reason(lambda: write(holding, 1)) is None
