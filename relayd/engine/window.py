"""One window of one lane, straight through: read, build, deliver, judge, settle.

``Window.run`` is the fast path of every entry: up to ``batch`` new entries are read (a hash
lane's ``AsyncBacklogReader``, the lane's carried ack deleted first in the same round-trip; or
the due timers, ``engine.timer_reads``) and built into envelopes (``engine.build``), handed to
the sink in one call under its guard (lock, rate, breaker: ``engine.sink_guard``; the lease
checked once the sink is ours, and by the sink before each request of its own,
``relayd.sinks.sending``), each outcome judged (``engine.judge``), and the window settled. A
window of fresh entries all confirmed is settled later: its ack is left in flight while the next
window is delivered, or carried to the lane's next read (``engine.lane``). An exception from the
sink retries the whole batch.

The slow paths are named steps beside it:

- **held entries** (a retry backoff, behind a failing head of their key, attempts from before a
  restart) go first, picked by ``plan.choose`` (``_held_to_send``; a held timer only while Redis
  still has it armed as read: ``_recheck_timers``);
- **the waiting line**: entries read with an attempt record or a blocked key join it instead of
  going on (``_join_waiting_line``), and so do the fresh entries the sink did not confirm;
- **late spawns**: outbox events to a child whose spawn came while the pass ran wait
  (``engine.late_spawns``);
- **the lease or a smaller batch** leaves entries out (``_fit``);
- **verdicts** other than a whole window's ack (attempt records, dead letters, malformed entries)
  go to ``settle.Settlement`` in batched round-trips;
- **a full window** is delivered while the next one is read ahead and built, in slices that yield
  to the event loop so the sink's call keeps flowing (``_deliver_reading_ahead``).
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import random
from collections.abc import Callable, Coroutine, Iterable, Sequence
from typing import Any, Final, NamedTuple

import structlog
from prometheus_client import Histogram

from relayd.engine.backoff import retry_delay
from relayd.engine.build import build_fresh
from relayd.engine.clock import Clock
from relayd.engine.commit_delay import CommitDelays
from relayd.engine.fencing import Fenced, FenceGuard, report_fenced
from relayd.engine.fresh import Fetched, FreshBatch
from relayd.engine.judge import hold_all, judge_delivery
from relayd.engine.lane import Lane
from relayd.engine.late_spawns import PendingSpawns, counter_value
from relayd.engine.options import SweepOptions
from relayd.engine.ordering import split_fresh
from relayd.engine.passes import Tally
from relayd.engine.plan import Dead, Held, Verdicts, choose, pick_probe
from relayd.engine.settle import Settlement
from relayd.engine.timer_reads import read_due_timers
from relayd.envelope import Envelope, Kind
from relayd.envelope.batch import Batch
from relayd.observability.inflight import DELIVERIES
from relayd.observability.metrics import RelayMetrics
from relayd.observability.tracing import sink_span
from relayd.sinks.base import Outcome, Retry
from relayd.sinks.sending import sending_while
from relayd.state import RedisClient
from relayd.state.attempts import AttemptRecord, forget_attempts, load_attempts
from relayd.state.keys import RelayKeys
from store import AsyncRedisStore, RawEntry, RawTimer, StoreFenced
from store.round_trip import Command

log = structlog.get_logger(__name__)

#: Envelopes built between yields to the event loop while a sink call is in flight.
BUILD_SLICE: Final = 250


class Read(NamedTuple):
    """One read of a lane: its fast entries, its malformed ones, how many entries it read, and
    for an outbox read the spawns counter as its round-trip found it after the read (None: not
    read with it)."""

    fast: FreshBatch
    malformed: list[Dead]
    read_n: int
    counter: int | None = None


class Window:
    """One sweeper's windows: each lane's reads, sink calls and settlements, for one prefix."""

    def __init__(
        self,
        store: AsyncRedisStore,
        *,
        settle: Settlement,
        spawns: PendingSpawns,
        options: SweepOptions,
        metrics: RelayMetrics,
        clock: Clock,
        rng: random.Random,
        guard: FenceGuard,
        may_deliver: Callable[[], bool],
    ) -> None:
        self.client: RedisClient = store.client
        self.keyspace = store.keyspace
        self.prefix = store.keyspace.prefix
        self.keys = RelayKeys(store.keyspace)
        self.settle = settle
        self.spawns = spawns
        self.options = options
        self.metrics = metrics
        self.clock = clock
        self.rng = rng
        # The lease's: ``may_deliver`` its local deadline, ``guard`` every send and fenced write.
        self.guard = guard
        self.may_deliver = may_deliver
        self._sink_latency: dict[Kind, Histogram] = {}  # ``relayd_sink_latency_seconds`` per kind
        self._commit_delays = CommitDelays(metrics, self.prefix)  # ``relayd_commit_to_delivery_seconds``
        # Bound once: the module's logger is a lazy proxy that builds a logger on every call.
        self._log = log.bind()
        #: Whether the pass under way may carry its last ack to the next pass's read (``Sweeper.run_pass``).
        self.may_carry = False

    async def run(self, lane: Lane, tally: Tally, blocked: set[str], batch: int, *, probing: bool) -> None:
        """One window of ``lane``: held entries that may go now, then read, build, deliver, judge,
        settle; a full window is delivered while the next one is read ahead."""
        now = self.clock.now()
        picked = await self._held_to_send(lane, now, batch, blocked, probing=probing)
        room = min(batch - len(picked), self.options.max_held - len(lane.held))
        read = Read(FreshBatch(), [], 0)
        if room > 0:
            before = len(lane.held)
            read = await self._read(lane, tally, room, blocked)
            if len(lane.held) > before:  # some joined the line (a history): they may go now too
                picked = self._pick(lane, now, batch - len(read.fast), blocked, probing=probing)
        fast = read.fast
        if (picked or fast) and lane.kind == "outbox" and self.spawns.live:
            picked, fast = await self.spawns.hold_late(lane, picked, fast, now, read.counter)
        picked, fast = self._fit(lane, picked, fast, batch, now)
        # A full window of fresh entries: more is waiting, read it while this one is delivered.
        read_ahead = (
            not probing and bool(fast) and read.read_n >= room and len(lane.held) < self.options.max_held
        )
        delivery = self.deliver_and_settle(
            lane, tally, picked, fast, malformed=read.malformed, now=now, batch=batch, defer_ack=read_ahead
        )
        if read_ahead:
            await self._deliver_reading_ahead(delivery, lane, tally, fast, batch)
        else:
            await delivery

    # --- read and build ------------------------------------------------------------------------
    async def _read(self, lane: Lane, tally: Tally, room: int, blocked: set[str]) -> Read:
        """Read and build up to ``room`` new entries.

        The window read ahead during the last delivery, if any, is this read. Else the read goes
        to Redis: a hash lane's carried ack (``Lane.carry``) is deleted first in its round-trip,
        fenced, and an outbox read reads the spawns counter after it
        (``PendingSpawns.counter_check``; a window read ahead went without it).
        """
        self.spawns.read_by(lane.kind)
        then = self.spawns.counter_check(lane)
        waiting = {k for h in lane.held.values() if (k := h.envelope.ordering_key) is not None}
        acked: list[str] = []
        fetched = lane.take_read_ahead()
        if fetched is None:
            acked = lane.take_carried()
            if not acked:
                fetched = await self._fetch(lane, room, then=then)
            else:
                with self.guard.writing(lane.kind, len(acked)):
                    fetched = await self._fetch(lane, room, acked, then)
        fresh, malformed, read_n, read_at = fetched
        fast = await self._join_waiting_line(lane, fresh, waiting | blocked, read_at)
        if acked:  # the lane's carried ack went first in the read's round-trip
            self._count(lane.kind, Verdicts(), len(acked), tally)
            self.settle.failures.flush(self.clock.now())
        tally.read += read_n
        tally.full |= more_to_read(lane, read_n, room, noticed=tally.noticed)
        # Only a read that went to Redis with the check has its reply (every read sets the
        # reader's replies; one read ahead has none, nor one whose reconcile scan or rewind
        # found entries after the check ran: then the counter is read again, after them).
        replies = lane.reader.then_replies if read_n and lane.reader is not None else []
        counter = counter_value(replies[0]) if len(replies) == len(then) == 1 else None
        return Read(fast, malformed, read_n, counter)

    async def _fetch(
        self, lane: Lane, limit: int, ack: Sequence[str] = (), then: Sequence[Command] = ()
    ) -> Fetched:
        """Read up to ``limit`` new entries (``ack`` deleted first) and build their envelopes (no
        history, no split)."""
        raws, now = await self._read_raw(lane, limit, ack=ack, then=then)
        fresh, malformed = build_fresh(lane.kind, self.prefix, raws, now)
        return fresh, malformed, len(raws), now

    async def _read_raw(
        self,
        lane: Lane,
        limit: int,
        *,
        in_flight: FreshBatch | None = None,
        ack: Sequence[str] = (),
        then: Sequence[Command] = (),
    ) -> tuple[Sequence[RawEntry | RawTimer], float]:
        """Up to ``limit`` new entries as stored, and when they were read (epoch s).

        A read-ahead (``in_flight``: the entries about to go to the sink) is sent before they go
        and runs while they are delivered, before they are acked: it reads the window only (no
        reconcile scan, see ``AsyncBacklogReader.read_new``), and a timer read skips the timers
        in flight.
        """
        now = self.clock.now()
        # Fenced: the carried ack's script checks the lease, or else the read itself does, so a
        # replica whose lease was taken over (a failover that lost the key) sends nothing more.
        try:
            if lane.reader is not None:
                reading_s, reconcile = self.clock.monotonic(), not in_flight
                return await lane.reader.read_new(
                    limit, now=reading_s, reconcile=reconcile, ack=ack, fence=self.guard.fence, then=then
                ), now
            flying = [raw for raw in in_flight.raws if isinstance(raw, RawTimer)] if in_flight else []
            return await self._read_timers(lane, now, limit, flying), now
        except StoreFenced as refused:
            if ack:
                raise  # the ack's refusal: ``FenceGuard.writing`` names it
            raise Fenced(lane.kind, refused.withheld, "read_refused") from refused

    async def _read_timers(
        self, lane: Lane, now: float, limit: int, in_flight: Sequence[RawTimer]
    ) -> list[RawTimer]:
        """Due timers neither held nor in flight, in fire_at order (``engine.timer_reads``).

        The same round-trip brings the next timer's score (``Lane.next_due_at``), so the loop
        sleeps only until that timer is due.
        """
        held = [h.raw for h in lane.held.values() if isinstance(h.raw, RawTimer)]
        raws, lane.next_due_at = await read_due_timers(
            self.client,
            self.keyspace.timers,
            now=now,
            limit=limit,
            held=held,
            in_flight=in_flight,
            fence=self.guard.fence,
        )
        return raws

    async def _join_waiting_line(
        self, lane: Lane, fresh: FreshBatch, blocked: set[str], now: float
    ) -> FreshBatch:
        """The entries read that go on; those with an attempt record (from before a restart) or
        a ``blocked`` key join the lane's waiting line instead (``ordering.split_fresh``)."""
        records: dict[str, AttemptRecord] = {}
        if lane.attempts_maybe and fresh:
            records = await load_attempts(self.client, self.keys.attempts(lane.kind), fresh.refs)
        if not records and not blocked:
            return fresh  # the common case: everything goes on
        fast, slow = split_fresh(
            fresh, key=lambda f: f[2].ordering_key, has_history=lambda f: f[0] in records, blocked=blocked
        )
        for ref, raw, envelope in slow:
            held = Held(ref, raw, envelope, now)
            record = records.get(ref)
            if record is not None:  # attempts made before a restart still count
                held.attempts = record.attempts
                held.first_attempt_at = record.first_attempt_at
                held.last_attempt_at = record.last_attempt_at
            lane.held[ref] = held
        return FreshBatch.of(fast)

    # --- deliver, judge, settle ----------------------------------------------------------------
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

    # --- a full window: the next one read ahead ------------------------------------------------
    async def _deliver_reading_ahead(
        self, delivery: Coroutine[Any, Any, None], lane: Lane, tally: Tally, fast: FreshBatch, batch: int
    ) -> None:
        """Run ``delivery`` (``deliver_and_settle`` of a full window, its ack deferred) while the
        next window is read ahead.

        The next window is read and its envelopes built while the sink works on this one, and
        this one's ack may run while the next one is delivered (``Lane``). The delivery starts
        as a task, so the read goes out first and the relay packs and sends the sink's calls
        while Redis answers it, instead of reading first and delivering after (``relayd bench
        --kinds outbox``, old and new alternating).
        """
        delivering = asyncio.create_task(delivery)
        try:
            raws, read_at = await self._read_raw(lane, batch, in_flight=fast)
            lane.read_ahead = await self._build_yielding(lane, raws, read_at)
        except Exception:
            # The read failed: the delivery in flight still finishes and acks what it can (fewer
            # redeliveries from the next sweeper); then the read's error goes to the loop.
            with contextlib.suppress(Exception):
                await delivering
                await self.settled(lane, tally)  # the ack it left in flight, too
            raise
        except BaseException:  # cancelled (the shutdown grace ran out): so is the delivery
            delivering.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await delivering
            raise
        await delivering

    async def _build_yielding(self, lane: Lane, raws: Sequence[RawEntry | RawTimer], now: float) -> Fetched:
        """``build_fresh`` in slices, yielding between them while a sink call is in flight.

        Yielding lets the event loop keep flushing the sink's request and reading its reply.
        """
        fresh = FreshBatch()
        malformed: list[Dead] = []
        for start in range(0, len(raws), BUILD_SLICE):
            await asyncio.sleep(0)
            part, bad = build_fresh(lane.kind, self.prefix, raws[start : start + BUILD_SLICE], now)
            fresh.extend(part)
            malformed += bad
        return fresh, malformed, len(raws), now

    # --- held entries and what a window leaves out ---------------------------------------------
    async def _held_to_send(
        self, lane: Lane, now: float, batch: int, blocked: set[str], *, probing: bool
    ) -> list[Held]:
        """The held entries that go in this window, first: they are older than anything new
        (``_pick``; a held timer only if Redis still has it armed as read: ``_recheck_timers``)."""
        if not lane.held:
            return []
        picked = self._pick(lane, now, batch, blocked, probing=probing)
        if picked and lane.reader is None:
            picked = await self._recheck_timers(lane, picked, now)
        return picked

    def _pick(self, lane: Lane, now: float, limit: int, blocked: set[str], *, probing: bool) -> list[Held]:
        """Held entries that may go now (``plan.choose``); for a probe, one head per key, rotating
        (``plan.pick_probe``), leaving room for a fresh entry when more wait."""
        if not probing:
            picked, _ = choose(lane.held.values(), now=now, limit=limit, blocked=blocked)
            return picked
        heads, _ = choose(lane.held.values(), now=now, limit=len(lane.held), blocked=blocked)
        return pick_probe(heads, limit - 1 if len(heads) >= limit > 1 else limit)

    async def _recheck_timers(self, lane: Lane, picked: list[Held], now: float) -> list[Held]:
        """The held timers about to be sent again that are due by Redis's clock and that the
        engine still has armed as read.

        One not due (the clock stepped back since it was read) waits for its ``fire_at`` again.
        One ``ZMSCORE`` for the others: a timer the engine cancelled since it was read is
        dropped, one it moved is dropped too and read again at its new score when due
        (docs/internals.md#delivery-semantics); their attempt records go with them.
        """
        for held in picked:
            if isinstance(held.raw, RawTimer) and held.raw.fire_at > now:
                held.not_before = max(held.not_before, held.raw.fire_at)
        picked = [h for h in picked if isinstance(h.raw, RawTimer) and h.raw.fire_at <= now]
        if not picked:
            return picked
        members: list[Any] = [h.raw.member for h in picked if isinstance(h.raw, RawTimer)]
        scores = await self.client.zmscore(self.keyspace.timers, members)
        keep: list[Held] = []
        gone: list[str] = []
        for held, score in zip(picked, scores, strict=True):
            if score is not None and isinstance(held.raw, RawTimer) and float(score) == held.raw.fire_at:
                keep.append(held)
                continue
            del lane.held[held.ref]
            gone.append(held.ref)
        if gone:
            self._log.info("held_timers_changed", prefix=self.prefix, count=len(gone))
            key = self.keys.attempts(lane.kind)
            await self.settle.bookkeeping(lane.kind, "attempts", forget_attempts(self.client, key, gone))
        return keep

    def _fit(
        self, lane: Lane, picked: list[Held], fast: FreshBatch, batch: int, now: float
    ) -> tuple[list[Held], FreshBatch]:
        """What of a window goes now: nothing once the lease may be gone, at most ``batch``; the
        fresh entries left out join the waiting line."""
        if (picked or fast) and not self.may_deliver():
            # The lease was lost while reading: another replica delivers now.
            lane.hold(fast, now)
            return [], FreshBatch()
        if len(picked) + len(fast) > batch:  # a window read ahead before the batch shrank (a probe)
            fresh = list(fast)
            keep = max(batch - len(picked), 0)
            lane.hold(FreshBatch.of(fresh[keep:]), now)
            fast = FreshBatch.of(fresh[:keep])
        return picked, fast

    # --- acks across windows and passes --------------------------------------------------------
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


def more_to_read(lane: Lane, read_n: int, room: int, *, noticed: bool) -> bool:
    """Whether a lane's read leaves more to read at once.

    A read that filled its room may have left more. A hash reader that has not examined every
    seq the counter allocated has more, and so has one whose reconcile step found entries (the
    rest of the scan may hold more; no write will announce them). A timer read short of its room
    took every due timer (the loop sleeps until the next). Without notices, anything read means
    more may wait (an entry committed just after the read is found by the next pass, not after
    an idle wait); with them, such a commit is noticed and starts the next pass itself.
    """
    if read_n >= room:
        return True
    if lane.reader is None:
        return False
    window = lane.reader.window
    return not window.caught_up or window.scan_found > 0 or (read_n > 0 and not noticed)
