"""One prefix's delivery passes: read, build, deliver, judge, settle, report.

A pass goes spawns → outbox → due timers (a child must exist before events reach it). Per kind,
a window (``_run_window``): entries waiting in memory (``Held``: a retry backoff, behind a failing
head of their target, or with attempts from before a restart) go first, picked by ``plan.choose``;
then up to ``batch`` new entries are read and built (``engine.intake``, the lane's carried ack
deleted in the same round-trip); both go to the sink in one call, are judged and settled
(``engine.delivery``). While more than ``max_held`` entries of a kind wait in memory, no new ones
are read. A full window's delivery starts as a task while the next window is read ahead. What a
lane keeps from window to window and pass to pass is its ``Lane``'s (``engine.lane``). Any Redis
error propagates: the loop counts it and starts a fresh ``Sweeper`` (everything unacked is read
again; attempt counts live in Redis).

Idle cost: a quiet lane (its last run read and held nothing) is probed before it is read, or
left alone when the wake-up subscription saw no write to it (``Intake.quiet_lanes``), and the
gauges are refreshed on a time budget (``engine.gauges``). Timers: the score of the next timer
not yet due comes back with each timer read or probe, and ``PassResult.next_retry_in_s`` lets
the loop sleep only until it is due (at least ``TIMER_GATHER_S``). Reader cursors are
checkpointed at most once a second while passes find work, and by a pass that found none.
"""

from __future__ import annotations

import asyncio
import contextlib
import random
from collections.abc import Callable, Mapping
from typing import Any, Final

import orjson
import structlog

from relayd.engine.clock import Clock
from relayd.engine.delivery import Delivery
from relayd.engine.fencing import FenceGuard
from relayd.engine.fresh import FreshBatch
from relayd.engine.gauges import PrefixGauges
from relayd.engine.intake import Intake, more_to_read
from relayd.engine.key_types import RECHECK_EVERY_S, describe, read_key_types, wrong_types
from relayd.engine.lane import Lane
from relayd.engine.options import SweepOptions
from relayd.engine.passes import PassResult, Tally
from relayd.engine.pause_watch import PauseWatch
from relayd.engine.plan import Dead, Held, choose, pick_probe
from relayd.engine.settle import Settlement
from relayd.engine.sink_guard import SinkGuard, guards_for
from relayd.engine.sink_health import SinkHealthPublisher
from relayd.envelope import Kind
from relayd.observability.metrics import RelayMetrics
from relayd.runtime.packing import use_hiredis_packing
from relayd.sinks.base import Sink
from relayd.state import RedisClient
from relayd.state.attempts import forget_attempts
from relayd.state.keys import RelayKeys
from store import AsyncRedisStore, Fence, RawTimer
from store.codec import parse_seq
from store.round_trip import Command

log = structlog.get_logger(__name__)

#: Least sleep before a timer coming due (seconds): timers due within it go in one pass, so a
#: steady stream of timers costs one pass per few ms instead of one per timer.
TIMER_GATHER_S: Final = 0.005
#: While passes run back to back, reader cursors are persisted at most this often (seconds).
CHECKPOINT_EVERY_S: Final = 1.0
#: Operator pauses are read again at most this often (seconds; the poll interval when shorter).
PAUSES_READ_EVERY_S: Final = 0.5
#: While spawns are pending beyond the spawn lane's memory, a pass names their children from the
#: spawns hash (one HVALS) only while it holds at most this many spawns; above it every outbox
#: event waits for the spawns to drain (a read of a hash of any size each pass would grow with it).
PENDING_SPAWNS_NAMED: Final = 10_000


class Sweeper:
    """Delivery passes over one prefix. Create a fresh one after any Redis error."""

    def __init__(
        self,
        store: AsyncRedisStore,
        *,
        sinks: Mapping[Kind, Sink],
        options: SweepOptions,
        metrics: RelayMetrics,
        clock: Clock,
        rng: random.Random | None = None,
        guards: Mapping[Kind, SinkGuard] | None = None,
        may_deliver: Callable[[], bool] = lambda: True,
        fence: Fence | None = None,
    ) -> None:
        self.store = store
        # Same bytes on the wire, a fraction of redis-py's asyncio packing CPU (relayd.runtime.packing).
        use_hiredis_packing(store.client)
        self.prefix = store.keyspace.prefix
        self.options = options
        self.metrics = metrics
        # The series every pass touches, looked up once (a label lookup takes a lock each time).
        self._sweep_duration = metrics.sweep_duration.labels(self.prefix)
        self._last_sweep = metrics.last_sweep.labels(self.prefix)
        # Bound once: the module's logger is a lazy proxy that builds a logger on every call
        # (the configuration may change), a cost each pass would pay for a line filtered out.
        self._log = log.bind()
        self.clock = clock
        self.rng = rng or random.Random()
        self.may_deliver = may_deliver
        # One guard (lock, breaker, rate limit) per sink, shared with the other prefixes' sweepers.
        guards = guards or guards_for(sinks, clock=clock)
        self.lanes: list[Lane] = []
        self._checkpointed: dict[Kind, int] = {}  # low-water marks written by this sweeper
        self._checkpointed_s = float("-inf")  # when they were last written (monotonic s)
        # Whether spawns may be pending in Redis beyond what the spawn lane holds in memory (its
        # reader behind the counter, a window read ahead, its breaker open, paused), and the
        # children named by pending spawns as the last pass saw them: events to them wait.
        self._spawns_behind = False
        self._spawns_read = False
        self._pending_children: set[str] = set()
        # More spawns pending in Redis than one pass may name: every outbox event waits.
        self._events_wait = False
        # The spawns counter this pass has looked at (the spawn reader's, or the one read to
        # name pending children): events read after it check for spawns above it.
        self._spawns_seen = 0
        # The children the spawns hash named when last read, and its (size, counter) then.
        self._named: set[str] = set()
        self._named_at: tuple[int, Any] | None = None
        # ``may_deliver`` is the lease's local deadline, ``fence`` its token checked by Redis:
        # nothing is sent or acked once either says the lease may be gone (``engine.fencing``).
        self.guard = FenceGuard(may_deliver, fence)
        self.settle = Settlement(store, metrics=metrics, clock=clock, guard=self.guard)
        self.intake = Intake(store, clock=clock, poll_interval_s=options.poll_interval_s, guard=self.guard)
        self.delivery = Delivery(
            prefix=self.prefix,
            settle=self.settle,
            options=options,
            metrics=metrics,
            clock=clock,
            rng=self.rng,
            guard=self.guard,
        )
        self.gauges = PrefixGauges(store.client, store.keyspace, metrics)
        # Each sink's breaker and retries, written for ``relayd status`` (``engine.sink_health``).
        self.sink_health = SinkHealthPublisher(store.client, store.keyspace, clock=clock)
        # What operators paused (``engine.pause``): read at the start of a pass, now and then.
        self.pauses = PauseWatch(
            store.client,
            store.keyspace,
            metrics=metrics,
            clock=clock,
            every_s=min(PAUSES_READ_EVERY_S, options.poll_interval_s),
        )
        # Lanes whose live key has the wrong type (``engine.key_types``): kind -> what was found.
        self.parked: dict[Kind, str] = {}
        self._types_checked_s = float("-inf")
        for kind in ("spawn", "outbox", "timer"):
            reader = None
            if kind != "timer":
                reader = store.backlog(
                    "spawns" if kind == "spawn" else "outbox",
                    grace_s=options.gap_grace_s,
                    reconcile_interval_s=min(1.0, options.poll_interval_s),
                )
            self.lanes.append(Lane(kind, sinks[kind], guards[kind], reader))

    @property
    def client(self) -> RedisClient:
        return self.store.client  # type: ignore[no-any-return]

    async def start(self) -> None:
        """Check the live keys' types and load the readers' persisted cursors."""
        await self._check_key_types()
        for lane in self.lanes:
            if lane.reader is not None:
                await lane.reader.start()
            await self.settle.check_attempts(lane)

    async def _check_key_types(self) -> None:
        """Park the lanes whose key has the wrong type, resume those fixed; log each change."""
        self._types_checked_s = self.clock.monotonic()
        keyspace = self.store.keyspace
        parked = {
            kind: describe(keyspace, kind, found)
            for kind, found in wrong_types(await read_key_types(self.client, keyspace)).items()
        }
        for kind, why in parked.items():
            if self.parked.get(kind) != why:
                log.error("key_wrong_type", prefix=self.prefix, kind=kind, error=why)
        for kind in self.parked.keys() - parked.keys():
            log.info("key_type_fixed", prefix=self.prefix, kind=kind)
        self.parked = parked

    def has_eligible(self) -> bool:
        """Whether some held entry may be attempted now (not waiting, not behind a waiting head)."""
        now, blocked = self.clock.now(), set[str]()
        for lane in self.lanes:
            hold = self.pauses.hold(lane.kind)
            if lane.kind in self.parked or hold.whole or (lane.kind == "outbox" and self._events_wait):
                continue
            picked, _ = choose(lane.held.values(), now=now, limit=1, blocked=blocked | hold.keys)
            if picked and lane.guard.wait_s() is None:
                return True
            if lane.kind == "spawn":
                blocked = self._pending_children | {
                    k for h in lane.held.values() if (k := h.envelope.ordering_key)
                }
        return False

    def held_count(self) -> int:
        return sum(len(lane.held) for lane in self.lanes)

    async def checkpoint(self, *, busy: bool = False) -> None:
        """Persist each reader's low-water mark, skipping marks this sweeper already wrote.

        An idle pass then costs no write (two SETs less per poll per prefix). While passes run
        back to back (``busy``) the marks are written at most every ``CHECKPOINT_EVERY_S``: an
        older mark is always a safe restart point, it only makes a restart skip more acked seqs.
        """
        now_s = self.clock.monotonic()
        if busy and now_s - self._checkpointed_s < CHECKPOINT_EVERY_S:
            return
        self._checkpointed_s = now_s
        for lane in self.lanes:
            if lane.reader is None:
                continue
            mark = lane.reader.low_water_mark
            if self._checkpointed.get(lane.kind) != mark:
                # Refused (Redis out of memory): an older mark is a safe restart point.
                if not await self.settle.bookkeeping(lane.kind, "cursor", lane.reader.checkpoint()):
                    continue
                self._checkpointed[lane.kind] = mark

    async def run_pass(
        self,
        stop: asyncio.Event | None = None,
        *,
        notified: frozenset[Kind] | None = None,
        carry_acks: Callable[[], bool] | None = None,
    ) -> PassResult:
        """Run one pass; with ``stop`` set, start no new read or delivery.

        ``notified``: the kinds written since the last pass began, from a live wake-up
        subscription (None: no such subscription, every quiet lane is probed).
        ``carry_acks``: asked at the end of the pass whether another pass follows at once (a
        write was noticed): then the ack of a hash lane's last window is carried to that pass's
        read (``engine.lane``) instead of sent on its own. None: never carried.
        """
        started_s = self.clock.monotonic()
        result = Tally(noticed=notified is not None)
        self.delivery.may_carry = carry_acks is not None
        # Carried by the last pass: a lane that reads this pass takes it along; one that does not
        # (a breaker open, too many held, a window read ahead) sends it at the end of this pass.
        for lane in self.lanes:
            lane.begin_pass()
        if self.parked and self.clock.monotonic() - self._types_checked_s >= RECHECK_EVERY_S:
            await self._check_key_types()
        await self.pauses.refresh(self.lanes)
        skipped, to_probe = self.intake.quiet_lanes(notified, started_s, self.parked.keys())
        idle_kinds = skipped | (await self._probe(to_probe) if to_probe else set())
        await self._run_lanes(result, idle_kinds, stop, skipped=skipped)
        stopping = stop is not None and stop.is_set()
        if not result.full or stopping:
            # The loop waits, stops or hands back after this pass: nothing stays in flight, and a
            # carried ack only when the next pass comes at once.
            keep = carry_acks is not None and not stopping and carry_acks()
            await self.delivery.settle_pending(self.lanes, result, carried=not keep)
        for lane in self.lanes:
            if lane.carried_from_last_pass():  # not taken by a read this pass
                await self.delivery.send_carried(lane, result)
        # At most once a second while passes find work; a pass that found none (the loop may go
        # idle after it) writes the mark if it moved.
        await self.checkpoint(busy=result.full or result.read > 0)
        return await self._report(result, idle_kinds, started_s)

    async def _run_lanes(
        self, result: Tally, idle_kinds: set[Kind], stop: asyncio.Event | None, *, skipped: set[Kind]
    ) -> None:
        """Each lane not idle nor parked, in order, until ``stop`` is set or the lease may be gone."""
        blocked_children: set[str] = set()
        self._spawns_read = False
        for lane in self.lanes:
            if self._stopping(stop):
                result.interrupted = True
                break
            hold = self.pauses.hold(lane.kind)
            waits = lane.kind == "outbox" and self._events_wait  # spawns too many to name are pending
            if not (lane.kind in idle_kinds or lane.kind in self.parked or hold.whole or waits):
                # a paused lane is neither read nor delivered; a paused target is blocked
                before = (result.read, result.attempted)
                await self._run_lane(lane, result, blocked_children | hold.keys)
                quiet = before == (result.read, result.attempted) and not lane.held
                self.intake.note_run(lane.kind, quiet=quiet)
            if lane.kind == "spawn":
                # Events to a child whose spawn is still pending wait for it, wherever that spawn
                # is (docs/internals.md#where-features-meet).
                blocked_children = await self._children_pending(lane, idle_kinds, skipped=skipped)

    async def _children_pending(self, lane: Lane, idle_kinds: set[Kind], *, skipped: set[Kind]) -> set[str]:
        """The children named by spawns still pending: those the spawn lane holds, or, while
        spawns may be pending beyond its memory, every child the spawns hash names (one HVALS
        when the hash's size or counter moved since the last, while it holds at most
        ``PENDING_SPAWNS_NAMED`` spawns; above that, every event waits).

        The lane is behind unless it read this pass and its reader examined every seq the
        counter allocated with no window read ahead, or the probe found no spawns hash; a lane
        skipped for lack of writes keeps what the last pass knew.
        """
        held = {k for h in lane.held.values() if (k := h.envelope.ordering_key)}
        self._spawns_seen = lane.reader.window.counter if lane.reader is not None else 0
        if lane.kind in self.parked:
            self._spawns_behind = False  # not a hash: nothing a read could return
        elif self._spawns_read and lane.reader is not None:
            self._spawns_behind = not lane.reader.window.caught_up or lane.read_ahead is not None
        elif lane.kind in idle_kinds and lane.kind not in skipped:
            self._spawns_behind = False  # the probe found no spawns hash
        elif lane.kind not in idle_kinds:
            self._spawns_behind = True  # not read: its breaker is open, it is paused, or full
        self._events_wait = False
        if not self._spawns_behind:
            self._pending_children = held
            return held
        ks = self.store.keyspace
        pipe = self.client.pipeline(transaction=False)
        pipe.hlen(ks.spawns)
        pipe.get(ks.spawns_seq)
        size, counter = await pipe.execute()
        self._spawns_seen = max(self._spawns_seen, _counter(counter))
        if size > PENDING_SPAWNS_NAMED:
            # Naming every child would cost a read of the whole hash each pass: events wait
            # until the spawns drain below the bound (spawns first, as the pass orders them).
            self._events_wait = True
            self._pending_children, self._named_at = held, None
            return held
        if self._named_at != (size, counter):
            # No spawn added (the counter is where it was) and none removed (the size too):
            # the children named last time are still the pending ones, so no read is needed.
            values = await self.client.hvals(ks.spawns)
            self._named = {child for raw in values if (child := child_named(raw)) is not None}
            self._named_at = (size, counter)
        self._pending_children = held | self._named
        return self._pending_children

    def _late_spawn_check(self, lane: Lane) -> tuple[Command, ...]:
        """What an outbox read runs after it for ``_hold_for_late_spawns``: the spawns counter's
        GET, so that check costs no round-trip of its own."""
        if lane.kind != "outbox" or not self._spawn_lane_live():
            return ()
        return (("GET", self.store.keyspace.spawns_seq),)

    async def _hold_for_late_spawns(
        self, lane: Lane, picked: list[Held], fast: FreshBatch, now: float, counter: int | None = None
    ) -> tuple[list[Held], FreshBatch]:
        """What of the outbox entries about to go may go: not those to a child whose spawn was
        committed after this pass looked at the spawns; they join the waiting line.

        ``counter``: the spawns counter as the outbox read's round-trip found it after the read
        (``_late_spawn_check``); None: read it now."""
        late = await self._children_of_late_spawns(counter)
        if late is not None and not late:
            return picked, fast

        def waits(key: str | None) -> bool:
            return key is not None and (late is None or key in late)

        held_back = FreshBatch.of(f for f in fast if waits(f[2].ordering_key))
        if not held_back and not any(waits(h.envelope.ordering_key) for h in picked):
            return picked, fast
        lane.hold(held_back, now)
        keep = FreshBatch.of(f for f in fast if not waits(f[2].ordering_key))
        return [h for h in picked if not waits(h.envelope.ordering_key)], keep

    def _spawn_lane_live(self) -> bool:
        """Whether this sweeper relays spawns from a hash it can read (not parked)."""
        return any(lane.kind == "spawn" and lane.reader is not None for lane in self.lanes) and (
            "spawn" not in self.parked
        )

    async def _children_of_late_spawns(self, counter: int | None = None) -> set[str] | None:
        """Children named by spawns committed after this pass looked at the spawns (seqs above
        the counter it saw): an event the outbox read just returned may go to one of them.

        The counter is read after that read (``counter``, from the read's own round-trip, or a
        ``GET`` now): a spawn committed before any event it returned has its seq by then; one
        HMGET of the new seqs names their children. None: more new spawns than a pass may name,
        so every event to an execution waits.
        """
        ks = self.store.keyspace
        if counter is None:
            counter = _counter(await self.client.get(ks.spawns_seq))
        if counter <= self._spawns_seen:
            return set()
        if counter - self._spawns_seen > PENDING_SPAWNS_NAMED:
            self._events_wait = True
            return None
        seqs = [str(seq) for seq in range(self._spawns_seen + 1, counter + 1)]
        values = await self.client.hmget(ks.spawns, seqs)
        late = {child for raw in values if raw is not None and (child := child_named(raw))}
        self._pending_children |= late  # ``has_eligible`` sees them wait too
        return late

    def _stopping(self, stop: asyncio.Event | None) -> bool:
        """Whether to start no more work: ``stop`` is set, or the lease may be gone."""
        return (stop is not None and stop.is_set()) or not self.may_deliver()

    async def _report(self, result: Tally, idle_kinds: set[Kind], started_s: float) -> PassResult:
        """The pass's gauges, metrics and debug line, and its result."""
        empty = len(idle_kinds) == len(self.lanes)
        worked = bool(result.read or result.attempted)
        await self.gauges.maybe_refresh(
            now=self.clock.now(),
            now_s=self.clock.monotonic(),
            worked=worked,
            held={lane.kind: lane.held.values() for lane in self.lanes},
            empty=empty,
            marks={lane.kind: lane.reader.low_water_mark for lane in self.lanes if lane.reader is not None},
        )
        await self.sink_health.maybe_publish(self.lanes)
        duration_s = self.clock.monotonic() - started_s
        self._sweep_duration.observe(duration_s)
        self._last_sweep.set(self.clock.now())
        done = self._freeze(result, idle_kinds)
        self._log.debug(
            "pass_finished",
            prefix=self.prefix,
            delivered=sum(done.delivered.values()),
            retried=sum(done.retried.values()),
            dead_lettered=sum(done.dead_lettered.values()),
            count=done.read,
            held=done.held,
            duration_s=round(duration_s, 6),
        )
        return done

    def _freeze(self, tally: Tally, probed_empty: set[Kind]) -> PassResult:
        waits = self._waits(self.clock.now())
        # A hash the probe found absent has nothing left to read: as good as an exhausted reader.
        # So is a lane whose sink's breaker is open: a one-shot run leaves its backlog and ends.
        exhausted = all(
            lane.reader.exhausted
            or lane.kind in probed_empty
            or lane.kind in self.parked
            or self.pauses.hold(lane.kind).whole
            or lane.guard.wait_s() is not None
            for lane in self.lanes
            if lane.reader is not None
        )
        return tally.freeze(
            waits=waits, exhausted=exhausted, eligible=self.has_eligible, held=self.held_count()
        )

    def _waits(self, now: float) -> list[float]:
        """How long until each thing the loop may sleep for comes due (seconds)."""
        waits = [w for lane in self.lanes for h in lane.held.values() if (w := h.not_before - now) > 0]
        # A sink whose breaker is open: sleep until its probe may go.
        waits += [wait_s for lane in self.lanes if (wait_s := lane.guard.wait_s()) is not None]
        if self.intake.next_timer_at is not None:  # it may have come due during this pass
            # Sleep only until the next timer is due, gathering those due within a few ms.
            waits.append(max(self.intake.next_timer_at - now, TIMER_GATHER_S))
        return waits

    async def _probe(self, quiet: set[Kind]) -> set[Kind]:
        """Which of the ``quiet`` lanes have nothing to read (``Intake.probe``)."""
        idle = await self.intake.probe(quiet)
        if len(idle) == len(self.lanes):
            self.gauges.note_empty()
        return idle

    # --- one kind ---------------------------------------------------------------------------
    async def _run_lane(self, lane: Lane, tally: Tally, blocked: set[str]) -> None:
        allowed = lane.guard.admit()
        if allowed == 0:
            return  # the sink's breaker is open: nothing is read or delivered until its probe
        batch, probing = self.options.batch, allowed is not None
        for most in (allowed, lane.guard.max_batch):
            if most is not None:
                batch = min(batch, most)
        try:
            await self._run_window(lane, tally, blocked, batch, probing=probing)
        finally:
            if probing and lane.guard.breaker.probing:  # the probe had nothing to send
                lane.guard.cancel_probe()

    async def _run_window(
        self, lane: Lane, tally: Tally, blocked: set[str], batch: int, *, probing: bool
    ) -> None:
        """One window of a lane: read and build (``_read``), deliver, judge and settle
        (``Delivery.deliver_and_settle``); a full window is delivered while the next one is read
        ahead (``_deliver_reading_ahead``).

        The slow paths are steps beside it: the held entries that may go now go first
        (``_held_to_send``); entries with attempts or a blocked key join the waiting line at the
        read (``Intake.read``), malformed ones go to dead letters with the settlement; outbox
        events to a child whose spawn came late wait (``_hold_for_late_spawns``); what the lease
        or the batch leaves out waits too (``_fit``).
        """
        now = self.clock.now()
        picked = await self._held_to_send(lane, now, batch, blocked, probing=probing)
        room = min(batch - len(picked), self.options.max_held - len(lane.held))
        fast, malformed, read_n, counter = FreshBatch(), list[Dead](), 0, None
        if room > 0:
            before = len(lane.held)
            fast, malformed, read_n, counter = await self._read(lane, tally, room, blocked)
            if len(lane.held) > before:  # some joined the line (a history): they may go now too
                picked = self._pick(lane, now, batch - len(fast), blocked, probing=probing)
        if (picked or fast) and lane.kind == "outbox" and self._spawn_lane_live():
            picked, fast = await self._hold_for_late_spawns(lane, picked, fast, now, counter)
        picked, fast = self._fit(lane, picked, fast, batch, now)
        if probing or not (fast and read_n >= room and len(lane.held) < self.options.max_held):
            await self.delivery.deliver_and_settle(
                lane, tally, picked, fast, malformed=malformed, now=now, batch=batch
            )
            return
        await self._deliver_reading_ahead(
            lane, tally, picked, fast, malformed=malformed, now=now, batch=batch
        )

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

    async def _read(
        self, lane: Lane, tally: Tally, room: int, blocked: set[str]
    ) -> tuple[FreshBatch, list[Dead], int, int | None]:
        """Read and build up to ``room`` new entries (``Intake.read``): the fast ones, the
        malformed ones, how many were read, and for an outbox read the spawns counter as its
        round-trip found it after the read (``_late_spawn_check``; None: not read with it)."""
        self._spawns_read |= lane.kind == "spawn"
        then = self._late_spawn_check(lane)
        waiting = {k for h in lane.held.values() if (k := h.envelope.ordering_key) is not None}
        read = await self.intake.read(lane, room, waiting | blocked, then=then)
        if read.acked:  # the lane's carried ack went first in the read's round-trip
            self.delivery.count_carried(lane, read.acked, tally)
        tally.read += read.read_n
        tally.full |= more_to_read(lane, read.read_n, room, noticed=tally.noticed)
        # Only a read that went to Redis with the check has its reply (every read sets the
        # reader's replies; one read ahead has none).
        replies = lane.reader.then_replies if read.read_n and lane.reader is not None else []
        counter = _counter(replies[0]) if len(replies) == len(then) == 1 else None
        return read.fast, read.malformed, read.read_n, counter

    async def _deliver_reading_ahead(
        self,
        lane: Lane,
        tally: Tally,
        picked: list[Held],
        fast: FreshBatch,
        *,
        malformed: list[Dead],
        now: float,
        batch: int,
    ) -> None:
        """Deliver a full window while the next one is read ahead."""
        # A full window: the next one is read ahead and its envelopes built while the sink works
        # on this one, and this one's ack may run while the next one is delivered (``Lane``).
        # The delivery starts as a task, so the read goes out first and the relay packs
        # and sends the sink's calls while Redis answers it, instead of reading first and
        # delivering after (``relayd bench --kinds outbox``, old and new alternating).
        delivering = asyncio.create_task(
            self.delivery.deliver_and_settle(
                lane, tally, picked, fast, malformed=malformed, now=now, batch=batch, defer_ack=True
            )
        )
        try:
            await self.intake.read_ahead(lane, batch, in_flight=fast)
        except Exception:
            # The read failed: the delivery in flight still finishes and acks what it can (fewer
            # redeliveries from the next sweeper); then the read's error goes to the loop.
            with contextlib.suppress(Exception):
                await delivering
                await self.delivery.settled(lane, tally)  # the ack it left in flight, too
            raise
        except BaseException:  # cancelled (the shutdown grace ran out): so is the delivery
            delivering.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await delivering
            raise
        await delivering

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
        scores = await self.client.zmscore(self.store.keyspace.timers, members)
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
            key = RelayKeys(self.store.keyspace).attempts(lane.kind)
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

    def _pick(self, lane: Lane, now: float, limit: int, blocked: set[str], *, probing: bool) -> list[Held]:
        """Held entries that may go now (``plan.choose``); for a probe, one head per key, rotating
        (``plan.pick_probe``), leaving room for a fresh entry when more wait."""
        if not probing:
            picked, _ = choose(lane.held.values(), now=now, limit=limit, blocked=blocked)
            return picked
        heads, _ = choose(lane.held.values(), now=now, limit=len(lane.held), blocked=blocked)
        return pick_probe(heads, limit - 1 if len(heads) >= limit > 1 else limit)

    async def settle_pending(self, tally: Tally | None = None) -> None:
        """Wait for every ack still in flight and send the carried ones (stop; hand-back)."""
        await self.delivery.settle_pending(self.lanes, tally)

    def abandon(self) -> None:
        """Let the acks in flight of a sweeper given up (a Redis error, a lost lease) finish on
        their own (``Delivery.abandon``)."""
        self.delivery.abandon(self.lanes)


def _counter(reply: bytes | str | None) -> int:
    """A counter's reply as an int; 0 when absent or not a number."""
    return (parse_seq(reply) if reply is not None else None) or 0


def child_named(raw: bytes | str) -> str | None:
    """The child id a stored spawn value names (``{"c": child_id, ...}``); None for a value that
    names none (a malformed entry: the spawn lane dead-letters it)."""
    try:
        doc = orjson.loads(raw)
    except orjson.JSONDecodeError:
        return None
    child = doc.get("c") if isinstance(doc, dict) else None
    return child if isinstance(child, str) else None
