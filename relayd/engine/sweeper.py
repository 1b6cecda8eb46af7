"""One prefix's delivery passes: the lanes in order, each one window, then checkpoint and report.

A pass goes spawns → outbox → due timers (a child must exist before events reach it; events to
a child whose spawn is still pending wait: ``engine.late_spawns``). Each lane runs one window
(``engine.window``: read, build, deliver, judge, settle, straight through, with the held
entries, the waiting line and the rest as named steps beside it). While more than ``max_held``
entries of a kind wait in memory, no new ones are read. What a lane keeps from window to window
and pass to pass is its ``Lane``'s (``engine.lane``). Any Redis error propagates: the loop counts
it and starts a fresh ``Sweeper`` (everything unacked is read again; attempt counts live in
Redis).

Idle cost: a quiet lane (its last run read and held nothing) is probed before it is read, or
left alone when the wake-up subscription saw no write to it (``probe.QuietLanes``), and the
gauges are refreshed on a time budget (``engine.gauges``). Timers: the score of the next timer
not yet due comes back with each timer read or probe (``Lane.next_due_at``), and
``PassResult.next_retry_in_s`` lets the loop sleep only until it is due (at least
``TIMER_GATHER_S``). Reader cursors are checkpointed at most once a second while passes find
work, and by a pass that found none.
"""

from __future__ import annotations

import asyncio
import random
from collections.abc import Callable, Mapping
from typing import Final

import structlog

from relayd.engine.clock import Clock
from relayd.engine.fencing import FenceGuard
from relayd.engine.gauges import PrefixGauges
from relayd.engine.key_types import RECHECK_EVERY_S, describe, read_key_types, wrong_types
from relayd.engine.lane import Lane
from relayd.engine.late_spawns import PendingSpawns
from relayd.engine.options import SweepOptions
from relayd.engine.passes import PassResult, Tally
from relayd.engine.pause_watch import PauseWatch
from relayd.engine.plan import choose
from relayd.engine.probe import QuietLanes
from relayd.engine.settle import Settlement
from relayd.engine.sink_guard import SinkGuard, guards_for
from relayd.engine.sink_health import SinkHealthPublisher
from relayd.engine.window import Window
from relayd.envelope import Kind
from relayd.observability.metrics import RelayMetrics
from relayd.runtime.packing import use_hiredis_packing
from relayd.sinks.base import Sink
from relayd.state import RedisClient
from store import AsyncRedisStore, Fence

log = structlog.get_logger(__name__)

#: Least sleep before a timer coming due (seconds): timers due within it go in one pass, so a
#: steady stream of timers costs one pass per few ms instead of one per timer.
TIMER_GATHER_S: Final = 0.005
#: While passes run back to back, reader cursors are persisted at most this often (seconds).
CHECKPOINT_EVERY_S: Final = 1.0
#: Operator pauses are read again at most this often (seconds; the poll interval when shorter).
PAUSES_READ_EVERY_S: Final = 0.5


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
        # ``may_deliver`` is the lease's local deadline, ``fence`` its token checked by Redis:
        # nothing is sent or acked once either says the lease may be gone (``engine.fencing``).
        self.guard = FenceGuard(may_deliver, fence)
        self.settle = Settlement(store, metrics=metrics, clock=clock, guard=self.guard)
        # Spawns still pending in Redis, and children named by them: events to them wait.
        self.spawns = PendingSpawns(store.client, store.keyspace)
        self.quiet = QuietLanes(store.client, store.keyspace, poll_interval_s=options.poll_interval_s)
        self.window = Window(
            store,
            settle=self.settle,
            spawns=self.spawns,
            options=options,
            metrics=metrics,
            clock=clock,
            rng=self.rng,
            guard=self.guard,
            may_deliver=may_deliver,
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
        self._timer_lane = self.lanes[-1]

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
        self.spawns.live = "spawn" not in parked  # a parked spawn lane names no late spawns

    def has_eligible(self) -> bool:
        """Whether some held entry may be attempted now (not waiting, not behind a waiting head)."""
        now, blocked = self.clock.now(), set[str]()
        for lane in self.lanes:
            hold = self.pauses.hold(lane.kind)
            if lane.kind in self.parked or hold.whole or (lane.kind == "outbox" and self.spawns.events_wait):
                continue
            picked, _ = choose(lane.held.values(), now=now, limit=1, blocked=blocked | hold.keys)
            if picked and lane.guard.wait_s() is None:
                return True
            if lane.kind == "spawn":
                blocked = self.spawns.children | {
                    k for h in lane.held.values() if (k := h.envelope.ordering_key)
                }
        return False

    def _timer_due(self) -> bool:
        """Whether the first timer not yet due at the last read or probe is due now."""
        next_due_at = self._timer_lane.next_due_at
        return next_due_at is not None and next_due_at <= self.clock.now()

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
        self.window.may_carry = carry_acks is not None
        # Carried by the last pass: a lane that reads this pass takes it along; one that does not
        # (a breaker open, too many held, a window read ahead) sends it at the end of this pass.
        for lane in self.lanes:
            lane.begin_pass()
        if self.parked and self.clock.monotonic() - self._types_checked_s >= RECHECK_EVERY_S:
            await self._check_key_types()
        await self.pauses.refresh(self.lanes)
        skipped, to_probe = self.quiet.split(
            notified, started_s, self.parked.keys(), timer_due=self._timer_due
        )
        idle_kinds = skipped | (await self._probe(to_probe) if to_probe else set())
        await self._run_lanes(result, idle_kinds, stop, skipped=skipped)
        stopping = stop is not None and stop.is_set()
        if not result.full or stopping:
            # The loop waits, stops or hands back after this pass: nothing stays in flight, and a
            # carried ack only when the next pass comes at once.
            keep = carry_acks is not None and not stopping and carry_acks()
            await self.window.settle_pending(self.lanes, result, carried=not keep)
        for lane in self.lanes:
            if lane.carried_from_last_pass():  # not taken by a read this pass
                await self.window.send_carried(lane, result)
        # At most once a second while passes find work; a pass that found none (the loop may go
        # idle after it) writes the mark if it moved.
        await self.checkpoint(busy=result.full or result.read > 0)
        return await self._report(result, idle_kinds, started_s)

    async def _run_lanes(
        self, result: Tally, idle_kinds: set[Kind], stop: asyncio.Event | None, *, skipped: set[Kind]
    ) -> None:
        """Each lane not idle nor parked, in order, until ``stop`` is set or the lease may be gone."""
        blocked_children: set[str] = set()
        self.spawns.begin_pass()
        for lane in self.lanes:
            if self._stopping(stop):
                result.interrupted = True
                break
            hold = self.pauses.hold(lane.kind)
            waits = lane.kind == "outbox" and self.spawns.events_wait  # spawns too many to name are pending
            if not (lane.kind in idle_kinds or lane.kind in self.parked or hold.whole or waits):
                # a paused lane is neither read nor delivered; a paused target is blocked
                before = (result.read, result.attempted)
                await self._run_lane(lane, result, blocked_children | hold.keys)
                quiet = before == (result.read, result.attempted) and not lane.held
                self.quiet.note_run(lane.kind, quiet=quiet)
            if lane.kind == "spawn":
                # Events to a child whose spawn is still pending wait for it, wherever that spawn
                # is (docs/internals.md#where-features-meet).
                blocked_children = await self.spawns.children_pending(
                    lane, idle_kinds, skipped=skipped, parked=lane.kind in self.parked
                )

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
        next_due_at = self._timer_lane.next_due_at
        if next_due_at is not None:  # it may have come due during this pass
            # Sleep only until the next timer is due, gathering those due within a few ms.
            waits.append(max(next_due_at - now, TIMER_GATHER_S))
        return waits

    async def _probe(self, quiet: set[Kind]) -> set[Kind]:
        """Which of the ``quiet`` lanes have nothing to read (``QuietLanes.probe``)."""
        idle = await self.quiet.probe(quiet, self._timer_lane, now=self.clock.now())
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
            await self.window.run(lane, tally, blocked, batch, probing=probing)
        finally:
            if probing and lane.guard.breaker.probing:  # the probe had nothing to send
                lane.guard.cancel_probe()

    async def settle_pending(self, tally: Tally | None = None) -> None:
        """Wait for every ack still in flight and send the carried ones (stop; hand-back)."""
        await self.window.settle_pending(self.lanes, tally)

    def abandon(self) -> None:
        """Let the acks in flight of a sweeper given up (a Redis error, a lost lease) finish on
        their own (``Window.abandon``)."""
        self.window.abandon(self.lanes)
