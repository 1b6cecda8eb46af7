"""The deliver, judge and settle steps of a pass: one sink call, its verdicts, their settlement.

The fresh entries (stamped as handed over) and the held ones picked to go again (restamped for
their next attempt) go to the sink in one call, under the sink's guard (its lock, rate limit
and breaker: ``engine.sink_guard``); the lease is checked once the sink is ours and by the sink
before each request of its own (``relayd.sinks.sending``). An exception from the sink retries
the whole batch. Only an entry the sink did not confirm becomes a ``Held`` and is judged
(``engine.judge``); ``settle.Settlement`` acts on the verdicts in batched round-trips.

The ack of a hash lane's window that went through whole on the fast path is left for later
(``_settle_later``): in flight while the next window is delivered (``Lane.defer_ack``); one ack
per lane is in flight at most, awaited and counted before the next settlement of the lane, and by
``settle_pending``. When the pass may carry (``may_carry``: the loop says another pass follows at
once), the ack of a pass's last such window is instead carried to the lane's next read
(``Lane.carry``, ``Intake.read``) and counted there (``count_carried``), or sent on its own
(``send_carried``).
"""

from __future__ import annotations

import asyncio
import functools
import random
from collections.abc import Iterable, Sequence

import structlog
from prometheus_client import Histogram

from relayd.engine.backoff import retry_delay
from relayd.engine.clock import Clock
from relayd.engine.commit_delay import CommitDelays
from relayd.engine.fencing import Fenced, FenceGuard, report_fenced
from relayd.engine.fresh import FreshBatch
from relayd.engine.judge import hold_all, judge_delivery
from relayd.engine.lane import Lane
from relayd.engine.options import SweepOptions
from relayd.engine.passes import Tally
from relayd.engine.plan import Dead, Held, Verdicts
from relayd.engine.settle import Settlement
from relayd.envelope import Envelope, Kind
from relayd.envelope.batch import Batch
from relayd.observability.inflight import DELIVERIES
from relayd.observability.metrics import RelayMetrics
from relayd.observability.tracing import sink_span
from relayd.sinks.base import Outcome, Retry
from relayd.sinks.sending import sending_while

log = structlog.get_logger(__name__)


class Delivery:
    """One sweeper's sink calls and settlements for one prefix."""

    def __init__(
        self,
        *,
        prefix: str,
        settle: Settlement,
        options: SweepOptions,
        metrics: RelayMetrics,
        clock: Clock,
        rng: random.Random,
        guard: FenceGuard,
    ) -> None:
        self.prefix = prefix
        self.settle = settle
        self.options = options
        self.metrics = metrics
        self.clock = clock
        self.rng = rng
        self.guard = guard
        self._sink_latency: dict[Kind, Histogram] = {}  # ``relayd_sink_latency_seconds`` per kind
        self._commit_delays = CommitDelays(metrics, prefix)  # ``relayd_commit_to_delivery_seconds``
        #: Whether the pass under way may carry its last ack to the next pass's read (``Sweeper.run_pass``).
        self.may_carry = False

    async def deliver_and_settle(
        self,
        lane: Lane,
        tally: Tally,
        picked: list[Held],
        fast: FreshBatch,
        *,
        malformed: list[Dead],
        now: float,
        batch: int,
        defer_ack: bool = False,
    ) -> None:
        """Deliver a window (``_deliver``), judge the sink's outcomes (``_judge``), settle the
        verdicts; the ack of fresh entries all confirmed may be left for later (``_settle_later``)."""
        tally.full |= len(picked) + len(fast) >= batch
        verdicts, acked_fast, stamp = Verdicts(), FreshBatch(), now
        if picked or fast:
            tally.attempted += len(picked) + len(fast)
            stamp = self.clock.now()
            outcomes, charged = await self._deliver(lane, handed_over(picked, fast, stamp))
            verdicts, acked_fast, failed = self._judge(
                lane, picked, fast, outcomes, charged=charged, stamp=stamp
            )
            whole = not (picked or failed or malformed)  # the fast path: fresh entries, all confirmed
            if whole and await self._settle_later(lane, tally, acked_fast, stamp, defer_ack=defer_ack):
                return
        verdicts.dead.extend(malformed)
        await self.settled(lane, tally)  # one settlement of a lane at a time
        await self.settle.apply(lane, verdicts, acked_fast, stamp)
        self._count(lane.kind, verdicts, len(acked_fast), tally)

    def _judge(
        self,
        lane: Lane,
        picked: list[Held],
        fast: FreshBatch,
        outcomes: Sequence[Outcome],
        *,
        charged: bool,
        stamp: float,
    ) -> tuple[Verdicts, FreshBatch, list[Held]]:
        """The verdicts on the held entries, the fresh entries confirmed, and the fresh ones the
        sink did not confirm, which join the lane's waiting line (``engine.judge``)."""
        if charged:
            verdicts, acked_fast, failed = judge_delivery(
                picked,
                fast,
                outcomes,
                now=stamp,
                max_attempts=self.options.max_attempts,
                delay_s=self._delay,
            )
        else:  # the breaker counts it as an outage: the entries wait, no attempt charged
            verdicts, acked_fast, failed = hold_all(picked, fast, stamp)
        if verdicts.ack or acked_fast:
            self._commit_delays.observe(lane.kind, verdicts.ack, acked_fast, self.clock.now())
        for held in failed:
            lane.held[held.ref] = held
        return verdicts, acked_fast, failed

    async def _settle_later(
        self, lane: Lane, tally: Tally, acked: FreshBatch, stamp: float, *, defer_ack: bool
    ) -> bool:
        """Leave the ack of a window of fresh entries all confirmed for later: in flight while the
        next window is delivered (``defer_ack``), or carried to the lane's next read
        (``may_carry``). False: it is settled now. Only a hash lane's (``engine.lane`` says why)."""
        if lane.reader is None:
            return False
        if defer_ack:
            await self.settled(lane, tally)
            acking = asyncio.create_task(self.settle.apply(lane, Verdicts(), acked, stamp))
            lane.defer_ack(acking, len(acked))
            return True
        if self.may_carry and acked:
            await self.settled(lane, tally)
            lane.carry(list(acked.refs))
            return True
        return False

    async def settled(self, lane: Lane, tally: Tally | None) -> None:
        """Wait for the lane's ack in flight, if any, and count what it acked."""
        count = await lane.settled()
        if count is not None:
            self._count(lane.kind, Verdicts(), count, tally)

    def _count(self, kind: Kind, verdicts: Verdicts, acked_fast: int, tally: Tally | None) -> None:
        """Count a settlement in the metrics and, unless it outlived its pass, in the pass's tally."""
        if tally is not None:
            tally.count(kind, verdicts, acked_fast)
        self.settle.count(kind, verdicts, acked_fast)

    async def settle_pending(
        self, lanes: Iterable[Lane], tally: Tally | None = None, *, carried: bool = True
    ) -> None:
        """Wait for every ack still in flight and send the carried ones (a pass that is not full;
        stop; hand-back). ``carried=False``: leave the carried acks to the next pass's reads."""
        for lane in lanes:
            await self.settled(lane, tally)
            if carried and lane.carried:
                await self.send_carried(lane, tally)

    async def send_carried(self, lane: Lane, tally: Tally | None) -> None:
        """Send a lane's carried ack on its own round-trip, and count it."""
        fields = lane.take_carried()
        await self.settle.ack_carried(lane, fields)
        self._count(lane.kind, Verdicts(), len(fields), tally)

    def count_carried(self, lane: Lane, count: int, tally: Tally) -> None:
        """Count a carried ack the lane's read took along (``Intake.read``)."""
        self._count(lane.kind, Verdicts(), count, tally)
        self.settle.failures.flush(self.clock.now())

    def abandon(self, lanes: Iterable[Lane]) -> None:
        """Let the acks in flight of a sweeper given up (a Redis error, a lost lease) finish on
        their own, a carried one sent now alike: each deletes only entries the sink confirmed,
        fenced, so a new lease holder delivers them again only if it read them first. One that
        fails (or finds the lease gone) is dropped: the next sweeper reads its entries again, as
        anything else unacked."""
        for lane in lanes:
            send = functools.partial(self.settle.ack_carried, lane)
            on_acked = functools.partial(self._count_abandoned, lane.kind)
            lane.abandon(send, on_acked, self._abandoned_failed)

    def _count_abandoned(self, kind: Kind, count: int) -> None:
        self._count(kind, Verdicts(), count, None)

    def _abandoned_failed(self, exc: BaseException) -> None:
        if isinstance(exc, Fenced):  # refused by Redis: the lease was lost while it was in flight
            report_fenced(self.metrics, self.prefix, exc)

    def _delay(self, attempt: int) -> float:
        return retry_delay(
            attempt, base_s=self.options.backoff_base_s, cap_s=self.options.backoff_cap_s, rng=self.rng
        )

    async def _deliver(self, lane: Lane, envelopes: Sequence[Envelope]) -> tuple[Sequence[Outcome], bool]:
        """The sink's outcomes, and whether its failures count as attempts (``SinkGuard.record``)."""
        batch = Batch.of(envelopes, lane.kind)  # an outbox window as it is; a list wrapped, not copied
        started_s = self.clock.monotonic()
        try:
            async with lane.guard.lock:
                # Checked once the sink is ours (the lock may have waited on another prefix), and
                # by the sink before each request of its own (``relayd.sinks.sending``).
                await lane.guard.throttle(len(batch))
                self.guard.before_send(lane.kind, len(batch))
                with sending_while(self.guard.holds), DELIVERIES.track(lane.sink, self.prefix, lane.kind):
                    outcomes = await sink_span.deliver(lane.sink, batch, self.prefix)  # a span if tracing
        except (asyncio.CancelledError, Fenced):
            raise
        except Exception as exc:  # the Sink contract: an exception retries the whole batch
            log.warning("sink_failed", prefix=self.prefix, kind=lane.kind, count=len(batch), error=repr(exc))
            outcomes = [Retry(error=f"sink raised {type(exc).__name__}")] * len(batch)
        latency = self._sink_latency.get(lane.kind)
        if latency is None:  # looked up once per kind (a label lookup takes a lock each time)
            latency = self._sink_latency[lane.kind] = self.metrics.sink_latency.labels(self.prefix, lane.kind)
        latency.observe(self.clock.monotonic() - started_s)
        return outcomes, lane.guard.record(batch, outcomes)


def handed_over(picked: list[Held], fast: FreshBatch, stamp: float) -> Sequence[Envelope]:
    """The sink's batch: the held entries restamped for their next attempt, then the fresh ones.

    The fresh envelopes were built at read and never serialised yet: the stamp says when they
    were handed over.
    """
    envelopes = fast.stamped(stamp)
    if picked:
        retried = [h.envelope.restamped(attempt=h.attempts + 1, relayed_at=stamp) for h in picked]
        envelopes = [*retried, *envelopes]
    return envelopes
