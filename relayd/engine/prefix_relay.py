"""One prefix in the long-running relay: its poll loop, beside its lease keeper.

A ``PrefixRelay`` delivers only while its replica holds the prefix's lease (its
``engine.lease_keeper`` task takes and renews it, the share task in ``engine.loop`` steers that
keeper). A pass that hit
a bound (or left allocated seqs unexamined) is followed by the next at once. Otherwise, with
``wake`` and the keyspace subscription live (``engine.wake``), the loop waits on the
subscription: a write noticed during the pass starts the next one at once, one noticed later ends
the wait, and the poll interval is only the fallback for notifications that never come. Without
a live subscription an idle pass backs off from a sixteenth of ``poll_interval_s`` up to all of
it, with jitter. A Redis error is counted, reported to ``/readyz`` and retried with exponential
backoff from a fresh ``Sweeper``. A pass stopped by the lease's fence (``engine.fencing``: its
deadline passed, or Redis refused an ack for another replica's token) is reported, its sweeper
dropped, and the prefix goes back to standby. When ``stop`` is set no new read or delivery
starts, the pass in flight gets ``shutdown_grace_s`` to finish and ack, then the reader cursors
are checkpointed and the lease released, all by the one deadline of the shutdown
(``engine.shutdown``). With ``once`` the loop drains everything due now and returns; when
another replica holds the lease, it logs that replica and returns at once (the prefix is
relayed, not here).
"""

from __future__ import annotations

import asyncio
import contextlib
import random
from collections import Counter
from collections.abc import Callable, Mapping
from typing import Final

import structlog

from relayd.engine.backoff import retry_delay
from relayd.engine.clock import Clock, sleep_until
from relayd.engine.fencing import Fenced, report_fenced
from relayd.engine.lease_keeper import LeaseKeeper
from relayd.engine.options import SweepOptions
from relayd.engine.pass_log import PassLog
from relayd.engine.passes import PassResult
from relayd.engine.redis_errors import REDIS_ERRORS
from relayd.engine.shutdown import ShutdownDeadline
from relayd.engine.sink_guard import SinkGuard
from relayd.engine.sweeper import Sweeper
from relayd.engine.wake import WakeTarget
from relayd.envelope import Kind
from relayd.observability.health import Health
from relayd.observability.metrics import RelayMetrics
from relayd.sinks.base import Sink
from relayd.state import RedisClient
from relayd.state.lease import Lease, lease_member, read_lease
from store import AsyncRedisStore

log = structlog.get_logger(__name__)

#: Backoff while Redis fails: from this ...
_ERROR_BACKOFF_BASE_S: Final = 0.2
#: ... up to this.
_ERROR_BACKOFF_CAP_S: Final = 10.0
#: Idle polls start this fraction of ``poll_interval_s`` and double up to all of it.
_FIRST_IDLE_FRACTION: Final = 1 / 16
#: A linger shorter than this is not waited (less than the event loop's own timer slack; a pass
#: that took the whole period leaves a float's rounding of it).
_MIN_LINGER_S: Final = 0.0005
#: Idle waits are this band of their ceiling.
_IDLE_JITTER: Final = (0.85, 1.0)


class PrefixRelay:
    """The poll loop of one prefix, run while its ``keeper`` holds the lease."""

    def __init__(
        self,
        prefix: str,
        *,
        options: SweepOptions,
        redis: RedisClient,
        sinks: Mapping[Kind, Sink],
        guards: Mapping[Kind, SinkGuard],
        metrics: RelayMetrics,
        health: Health,
        stop: asyncio.Event,
        clock: Clock,
        token: str | None = None,
        shutdown: ShutdownDeadline | None = None,
    ) -> None:
        self.prefix = prefix
        #: The one deadline of the whole shutdown: the pass's grace and the steps after it.
        self.shutdown = shutdown or ShutdownDeadline(stop, options.shutdown_grace_s)
        self.options = options
        self.redis = redis
        self.store = AsyncRedisStore(redis, prefix=prefix)
        self.sinks = sinks
        self.guards = guards
        self.metrics = metrics
        self.health = health
        self.stop = stop
        self.clock = clock
        self.rng = random.Random()
        self.lease = Lease(
            redis, self.store.keyspace, ttl_s=options.lease_ttl_s, monotonic=clock.monotonic, token=token
        )
        #: What the wake-up subscription tells this loop (``engine.wake``); its event also
        #: carries a hand-back request and a lost lease.
        self.wake = WakeTarget()
        self.loop_wake = self.wake.event
        self.keeper = LeaseKeeper(
            prefix,
            self.lease,
            once=options.once,
            metrics=metrics,
            health=health,
            clock=clock,
            rng=self.rng,
            redis_failed=self._redis_failed,
            loop_wake=self.loop_wake,
        )
        #: Whether the wake-up subscription is live (set by ``engine.loop`` with ``wake``).
        self.notices_live: Callable[[], bool] = lambda: False
        self.pass_log = PassLog(prefix, clock.monotonic)
        self.delivered: Counter[Kind] = Counter()
        self.retried: Counter[Kind] = Counter()
        self.dead_lettered: Counter[Kind] = Counter()
        self.left_for_retry = 0
        self.skipped = False
        #: kind -> why, for the kinds whose key has the wrong type (``engine.key_types``)
        self.parked: dict[Kind, str] = {}
        self.sweeper: Sweeper | None = None
        self._sweeper_term: str | None = None  # the lease token of the term it was made in
        self._stop_waiter: asyncio.Task[bool] | None = None  # ``_stopped``
        self._passing: asyncio.Task[None] | None = None  # the loop's task while it runs a pass
        self._grace: asyncio.TimerHandle | None = None  # armed when ``stop`` comes mid-pass
        self._grace_ran_out = False  # the pass was cancelled by the grace's end
        metrics.add_prefix(prefix)

    async def hand_back(self) -> None:
        """Give the lease back to the group: checkpoint the readers, then release (between passes)."""
        async with self.keeper.lock:
            if self.sweeper is not None:
                await self._settle_last(self.sweeper)
                self._drop_sweeper()
            await self.keeper.give_back()

    # --- the loop -----------------------------------------------------------------------------
    async def run(self) -> None:
        keeper = asyncio.create_task(self.keeper.run())
        try:
            await self._loop()
        finally:
            # The flag as well as the cancel: on Python 3.11 a cancel can be lost inside
            # redis-py's wait_for (bpo-42130); the keeper then stops at its next turn.
            self.keeper.close()
            if self._stop_waiter is not None:
                self._stop_waiter.cancel()
                self._stop_waiter = None
            keeper.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await keeper
            async with self.shutdown.bounded("checkpoint and lease release", prefix=self.prefix):
                await self._shutdown()

    async def _loop(self) -> None:
        error_streak = idle_streak = 0
        waiting_since_s = self.clock.monotonic()
        while not self.stop.is_set():
            if self.keeper.release_wanted and self.keeper.active:
                await self.hand_back()
                continue
            if not self.lease.held():
                self._drop_sweeper()
                self.keeper.note()
                waited_s = self.clock.monotonic() - waiting_since_s
                refused = self.keeper.refused or waited_s > 2 * self.lease.ttl_s
                if self.options.once and refused and await self._held_elsewhere():
                    return
                self.health.progress(self.clock.monotonic())
                self.keeper.changed.clear()
                await self._wait(self.lease.ttl_s / 3, self.keeper.changed)
                continue
            started_s = self.clock.monotonic()
            try:
                sweeper = await self._started_sweeper()
                # Cleared before the pass, not after: a wake-up (new work, a hand-back) that
                # arrives while the pass runs must end the idle wait that follows it. The kinds
                # written since the last pass began are read without a probe; when the
                # subscription is not live, every quiet lane is probed, as without wake-up.
                written = self.wake.take()
                notified = written if self.notices_live() else None
                result = await self._pass(sweeper, notified)
                self._note_parked(sweeper)
            except Fenced as fenced:
                self._fenced(fenced)
                continue
            except REDIS_ERRORS as exc:
                self._redis_failed(exc)
                self._drop_sweeper()
                error_streak += 1
                self.health.progress(self.clock.monotonic())
                delay_s = retry_delay(
                    error_streak, base_s=_ERROR_BACKOFF_BASE_S, cap_s=_ERROR_BACKOFF_CAP_S, rng=self.rng
                )
                await self._wait(delay_s)
                continue
            if result is None:  # stopped, and the pass did not finish within the grace
                return
            error_streak = 0
            self.health.redis_ok()
            self.health.progress(self.clock.monotonic())
            self._tally(result)
            if self.options.once:
                if result.drained:
                    return
                await asyncio.sleep(0)
                continue
            idle_streak = await self._pause_after(result, idle_streak, started_s)

    async def _pause_after(self, result: PassResult, idle_streak: int, started_s: float) -> int:
        """Wait as long as the pass that ended (begun at ``started_s``) calls for; return the new
        idle streak.

        None at all when more is waiting; a linger when writes are coming one after another;
        else until a wake-up, at most the idle delay.

        The linger: after a pass that read something, a write noticed during it or after it
        makes the next pass start ``SweepOptions.linger_s`` (``--linger``) after the one that
        ended started, so that pass takes the writes of that moment too (as ``linger.ms`` does
        for a Kafka producer). A pass costs about the same whether it takes one entry or ten, so
        under a steady writer the period, not the rate nor how fast a pass runs, sets the
        relay's CPU; a pass slowed by a busy machine lingers less instead of adding its delay to
        the next commit's latency. An idle relay woken by one commit does not wait it, nor does
        a write that comes a whole period after the last pass began.
        """
        if result.full:
            await asyncio.sleep(0)  # more is waiting: poll again at once
            return 0
        noticed = self.loop_wake.is_set()  # written during the pass
        if not noticed:
            idle_streak += 1
            await self._wait(self._idle_delay(idle_streak, result, live=self.notices_live()), self.loop_wake)
            if not (result.read and self.loop_wake.is_set()):
                return idle_streak
        # The pass read something and a write came during it or since: commits are coming one
        # after another. Gather those of the rest of the period into one pass (fewer passes,
        # each costing the same round-trips).
        linger_s = started_s + self.options.linger_s - self.clock.monotonic()
        if result.read and self.notices_live() and linger_s > _MIN_LINGER_S:
            await self._wait(linger_s)
        else:
            await asyncio.sleep(0)
        return 0 if noticed else idle_streak

    async def _held_elsewhere(self) -> bool:
        """Whether another replica holds the lease (a one-shot run then leaves the prefix to it);
        logs which one. False when the lease has come free meanwhile: the keeper tries again."""
        try:
            holder = await read_lease(self.redis, self.store.keyspace)
        except REDIS_ERRORS as exc:
            self._redis_failed(exc)
            holder = None
        if holder is None or lease_member(holder.token) == self.lease.member:
            self.keeper.refused = False
            self.keeper.wake.set()
            return False
        log.info(
            "another_replica_active",
            prefix=self.prefix,
            holder=holder.holder,
            outcome="nothing to do here: the active replica relays this prefix",
        )
        self.skipped = True
        return True

    def _idle_delay(self, idle_streak: int, result: PassResult, *, live: bool) -> float:
        """How long to wait after a pass with nothing more to do at once.

        ``live``: the subscription announces new work, so the whole poll interval is only the
        fallback; otherwise the wait starts short and doubles (new work is found by polling).
        """
        interval_s = self.options.poll_interval_s
        steps = 32 if live else min(idle_streak, 32)
        ceiling_s = min(interval_s, interval_s * _FIRST_IDLE_FRACTION * 2.0 ** (steps - 1))
        # A narrow band: only one replica polls a prefix, so jitter just keeps many prefixes of
        # one process apart; a wide one would poll more often than the interval (the idle budget).
        delay_s = ceiling_s * self.rng.uniform(*_IDLE_JITTER)
        if result.next_retry_in_s is not None:
            delay_s = min(delay_s, result.next_retry_in_s)
        return delay_s

    async def _pass(self, sweeper: Sweeper, notified: frozenset[Kind] | None) -> PassResult | None:
        """Run one pass; after ``stop`` it gets ``shutdown_grace_s`` to finish, else is cancelled.

        The pass runs in the loop's own task (a task per pass would cost a task and two event
        loop turns each time): when ``stop`` comes during it, the stop watcher (``_stopped``)
        arms the grace, and when that runs out, cancels this task; that cancel ends the pass
        here, any other goes on up.
        """
        # With the subscription live, a write noticed by the end of the pass means another pass
        # at once: its read may carry this pass's last ack (``engine.lane``).
        carry = None if notified is None or self.options.once else self.loop_wake.is_set
        self._passing = task = asyncio.current_task()
        if (waiter := self._stopped()).done():  # stopped since the loop looked
            self._arm_grace(waiter)
        try:
            return await sweeper.run_pass(self.stop, notified=notified, carry_acks=carry)
        except asyncio.CancelledError:
            if not self._grace_ran_out or task is None or task.uncancel():
                raise
        except REDIS_ERRORS:  # what the cancelled pass raised instead
            if not self._grace_ran_out:
                raise
            if task is not None:
                task.uncancel()
        finally:
            self._passing = None
            if self._grace is not None:
                self._grace.cancel()
                self._grace = None
        log.warning("shutdown_grace_exceeded", prefix=self.prefix)
        return None

    def _stopped(self) -> asyncio.Task[bool]:
        """A task that ends when ``stop`` is set: one for the loop's life, not one per pass.

        When it ends during a pass, the pass gets ``shutdown_grace_s`` before it is cancelled.
        """
        if self._stop_waiter is None:
            self._stop_waiter = asyncio.create_task(self.stop.wait())
            self._stop_waiter.add_done_callback(self._arm_grace)
        return self._stop_waiter

    def _arm_grace(self, waiter: asyncio.Task[bool]) -> None:
        if waiter.cancelled() or self._passing is None:
            return  # the loop ended, or stopped between passes (it then starts none)
        self._grace = asyncio.get_running_loop().call_at(self.shutdown.at(), self._end_pass)

    def _end_pass(self) -> None:
        """The grace ran out: cancel the pass still running (``_pass`` takes the cancel)."""
        self._grace = None
        if self._passing is not None:
            self._grace_ran_out = True
            self._passing.cancel()

    def _fenced(self, fenced: Fenced) -> None:
        """The lease may be gone: report it, forget the lease and the sweeper, stand by.

        A pass of an earlier term (its replica took the lease again meanwhile) is fenced by its
        own term: only its sweeper goes, the new term stays.
        """
        report_fenced(self.metrics, self.prefix, fenced)
        if self._sweeper_term == self.lease.token:
            self.lease.forget()
        self._drop_sweeper()
        self.keeper.note()

    async def _settle_last(self, sweeper: Sweeper) -> None:
        """Before a stop or a hand-back: the ack in flight, then the readers' checkpoint."""
        try:
            await sweeper.settle_pending()  # an ack in flight when the grace ran out
            await sweeper.checkpoint()
        except Fenced as fenced:
            report_fenced(self.metrics, self.prefix, fenced)
        except REDIS_ERRORS:
            pass

    async def _started_sweeper(self) -> Sweeper:
        """The sweeper of this lease term, made and started on first use; a sweeper of an
        earlier term is dropped with everything it held (docs/internals.md#fencing-and-the-clock)."""
        if self.sweeper is not None and self._sweeper_term != self.lease.token:
            self._drop_sweeper()
        if self.sweeper is None:
            self._sweeper_term = self.lease.token
            self.sweeper = self._new_sweeper()
            await self.sweeper.start()
        return self.sweeper

    def _new_sweeper(self) -> Sweeper:
        # Bound to this term: once the lease is taken again, in a new term, this sweeper sends
        # and acks nothing more (its local check and Redis's fence both name this term's token).
        term = self.lease.token
        return Sweeper(
            self.store,
            sinks=self.sinks,
            options=self.options,
            metrics=self.metrics,
            clock=self.clock,
            rng=self.rng,
            guards=self.guards,
            may_deliver=lambda: self.lease.holds(term),
            fence=self.lease.fence,
        )

    def _drop_sweeper(self) -> None:
        # Whatever it held is read again from Redis by the next sweeper (or another replica).
        if self.sweeper is not None:
            self.sweeper.abandon()
        self.sweeper = None

    def _note_parked(self, sweeper: Sweeper | None) -> None:
        """Tell ``/readyz`` (and the run's summary) which kinds have a key of the wrong type."""
        if sweeper is not None and sweeper.parked != self.parked:
            self.parked = dict(sweeper.parked)
            self.health.lanes_parked(self.prefix, self.parked)

    def _tally(self, result: PassResult) -> None:
        self.delivered.update(result.delivered)
        self.retried.update(result.retried)
        self.dead_lettered.update(result.dead_lettered)
        self.left_for_retry = result.held
        self.pass_log.add(result)

    def _redis_failed(self, exc: BaseException) -> None:
        self.metrics.redis_errors.labels(self.prefix).inc()
        self.health.redis_failed(type(exc).__name__)
        log.warning("redis_error", prefix=self.prefix, error=f"{type(exc).__name__}: {exc}"[:300])

    async def _wait(self, timeout_s: float, wake: asyncio.Event | None = None) -> None:
        """Sleep up to ``timeout_s``; ``stop`` (or ``wake``) ends it early."""
        await sleep_until(timeout_s, self.stop, *([] if wake is None else [wake]))

    async def _shutdown(self) -> None:
        """Checkpoint the readers and give the lease back; Redis trouble here is only logged."""
        self.pass_log.flush()
        if self.sweeper is not None:
            self.left_for_retry = self.sweeper.held_count()
            await self._settle_last(self.sweeper)
        await self.keeper.release(report=False)
