"""The long-running relay: per-prefix lease, fair shares, adaptive polling, Redis retries, graceful stop.

``run_relay`` starts the sinks, runs one task per prefix and closes the sinks. A prefix task
delivers only while its replica holds the prefix's lease (a keeper task takes and renews it);
a full batch polls again at once, an idle pass backs off up to ``poll_interval_s`` with jitter
(with ``wake``, a keyspace notification of new work ends that wait at once: ``engine.wake``).
Replicas share the prefixes: a share task beats into each prefix's member registry every third
of the lease TTL and lets a prefix task try for its lease only while this replica is below its
fair share (``engine.shares``); a prefix above the share is handed back between passes
(checkpoint, release), so shares rebalance within about one TTL of a join, leave or death.
A Redis error is counted, reported to ``/readyz`` and retried with exponential backoff from a
fresh ``Sweeper``. When ``stop`` is set no new read or delivery starts, the pass in flight
gets ``shutdown_grace_s`` to finish and ack, then the reader cursors are checkpointed and the
lease released. With ``once`` the task drains everything due now and returns.
"""

from __future__ import annotations

import asyncio
import contextlib
import random
from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Final

import structlog
from redis.exceptions import RedisError

from relayd.engine.backoff import retry_delay
from relayd.engine.clock import SYSTEM_CLOCK, Clock
from relayd.engine.gc_tuning import relay_gc
from relayd.engine.options import SweepOptions
from relayd.engine.shares import PrefixView, ShareDecision, decide_shares
from relayd.engine.sweeper import PassResult, Sweeper
from relayd.engine.wake import WakeSubscriber
from relayd.envelope import Kind
from relayd.errors import RelaydError, SinkError
from relayd.health import Health
from relayd.metrics import RelayMetrics
from relayd.sinks.base import Sink
from relayd.state import RedisClient
from relayd.state.lease import Lease, make_token
from relayd.state.members import Membership
from store import AsyncRedisStore
from store.errors import StoreUnavailable

log = structlog.get_logger(__name__)

#: What counts as "Redis is unwell": retried with backoff, never fatal for the daemon.
REDIS_ERRORS: Final = (RedisError, StoreUnavailable, OSError, TimeoutError)
#: Backoff while Redis fails: from this ...
_ERROR_BACKOFF_BASE_S: Final = 0.2
#: ... up to this.
_ERROR_BACKOFF_CAP_S: Final = 10.0
#: Idle polls start this fraction of ``poll_interval_s`` and double up to all of it.
_FIRST_IDLE_FRACTION: Final = 1 / 16
#: The keeper renews this many renewal periods after the last renewal (a beat's included).
_RENEW_SLACK: Final = 1.1
#: Idle waits are this band of their ceiling.
_IDLE_JITTER: Final = (0.85, 1.0)
#: Registry beats come every third of the TTL times this jitter band (never later: a late beat
#: lets the member expire and the group rebalance for nothing).
_BEAT_JITTER: Final = (0.75, 1.0)


@dataclass(frozen=True, slots=True)
class RunSummary:
    """What a run did, summed over prefixes; ``exit_code`` as DESIGN §5 has it for ``--once``."""

    delivered: Mapping[Kind, int] = field(default_factory=dict)
    retried: Mapping[Kind, int] = field(default_factory=dict)
    dead_lettered: Mapping[Kind, int] = field(default_factory=dict)
    left_for_retry: int = 0
    #: Prefixes another replica held for the whole run (``once``): their work was not done here.
    skipped_prefixes: tuple[str, ...] = ()

    @property
    def exit_code(self) -> int:
        """0 when all due work was delivered; 1 when entries were left or dead-lettered."""
        troubled = self.left_for_retry or sum(self.dead_lettered.values()) or self.skipped_prefixes
        return 1 if troubled else 0


async def run_relay(
    options: SweepOptions,
    *,
    redis: RedisClient,
    sinks: Mapping[Kind, Sink],
    metrics: RelayMetrics,
    health: Health,
    stop: asyncio.Event,
    clock: Clock = SYSTEM_CLOCK,
) -> RunSummary:
    """Relay every prefix of ``options`` until ``stop`` is set (or, with ``once``, drained).

    Starts every sink first and closes them all at the end. Raises ``SinkError`` (or the
    sink's own ``RelaydError``) when a sink cannot start.
    """
    unique = list({id(sink): sink for sink in sinks.values()}.values())
    started: list[Sink] = []
    try:
        for sink in unique:
            await sink.start()
            started.append(sink)
    except RelaydError:
        await _close_sinks(started)
        raise
    except Exception as exc:
        await _close_sinks(started)
        raise SinkError(f"sink {getattr(sink, 'name', '?')!r} failed to start: {type(exc).__name__}") from exc
    health.watch_sinks({f"{kind}:{sink.name}": sink.ready for kind, sink in sinks.items()})
    locks = {id(sink): asyncio.Lock() for sink in unique}
    # One token per process, on every lease and registry: the shares count leases by holder.
    token = make_token()
    relays = [
        _PrefixRelay(
            prefix,
            options=options,
            redis=redis,
            sinks=sinks,
            sink_locks={kind: locks[id(sink)] for kind, sink in sinks.items()},
            metrics=metrics,
            health=health,
            stop=stop,
            clock=clock,
            token=token,
        )
        for prefix in options.prefixes
    ]
    try:
        with relay_gc():
            async with asyncio.TaskGroup() as group:
                if not options.once:  # a one-shot job takes what is free and is no group member
                    membership = Membership(
                        redis, [r.store.keyspace for r in relays], token=token, ttl_s=options.lease_ttl_s
                    )
                    group.create_task(_keep_shares(membership, relays, stop=stop, health=health))
                if options.wake and not options.once:  # a latency shortcut; polling goes on regardless
                    events = {r.prefix: r.loop_wake for r in relays}
                    group.create_task(WakeSubscriber(redis, events, metrics=metrics).run(stop))
                for relay in relays:
                    group.create_task(relay.run())
    finally:
        health.stopping()
        await _close_sinks(started)
    return _summarise(relays)


async def _close_sinks(sinks: list[Sink]) -> None:
    for sink in sinks:
        try:
            await sink.close()
        except Exception as exc:  # one failing close must not keep the others open
            log.warning("sink_close_failed", error=f"{sink.name}: {type(exc).__name__}")


def _summarise(relays: list[_PrefixRelay]) -> RunSummary:
    delivered: Counter[Kind] = Counter()
    retried: Counter[Kind] = Counter()
    dead: Counter[Kind] = Counter()
    for relay in relays:
        delivered.update(relay.delivered)
        retried.update(relay.retried)
        dead.update(relay.dead_lettered)
    return RunSummary(
        delivered=dict(delivered),
        retried=dict(retried),
        dead_lettered=dict(dead),
        left_for_retry=sum(r.left_for_retry for r in relays),
        skipped_prefixes=tuple(r.prefix for r in relays if r.skipped),
    )


async def _sleep(timeout_s: float, *events: asyncio.Event) -> None:
    """Sleep up to ``timeout_s``; any of ``events`` ends it early.

    Not ``wait_for`` + ``suppress(TimeoutError)``: on Python 3.11 a cancel that races the
    timeout comes out as ``TimeoutError`` and would be swallowed, leaving the task running.
    """
    waiters = [asyncio.create_task(event.wait()) for event in events]
    try:
        await asyncio.wait(waiters, timeout=max(0.0, timeout_s), return_when=asyncio.FIRST_COMPLETED)
    finally:
        for waiter in waiters:
            waiter.cancel()


async def _keep_shares(
    membership: Membership, relays: list[_PrefixRelay], *, stop: asyncio.Event, health: Health
) -> None:
    """Beat into the registries, decide the fair share, steer the prefix tasks; leave on stop."""
    rng = random.Random()
    beat_every_s = relays[0].lease.ttl_s / 3
    last: ShareDecision | None = None
    while not stop.is_set():
        sent_s = relays[0].clock.monotonic()
        try:
            # Held leases are renewed by the beat itself; the keepers renew only if beats fail.
            seen = await membership.beat(frozenset(r.prefix for r in relays if r.active and r.lease.held()))
        except REDIS_ERRORS as exc:
            # Keep the last decision: without the registry, the leases still keep everyone safe.
            for relay in relays:  # the beat is one command per prefix, all of them failed
                relay.metrics.redis_errors.labels(relay.prefix).inc()
            health.redis_failed(type(exc).__name__)
            log.warning("redis_error", error=f"{type(exc).__name__}: {exc}"[:300])
        else:
            health.redis_ok()
            for relay, seen_one in zip(relays, seen, strict=True):
                if seen_one.renewed:
                    relay.lease.extended(sent_s)
            views = [PrefixView(r.prefix, r.members, r.holder) for r in seen]
            decision = decide_shares(views, membership.token)
            for relay in relays:
                relay.steer(
                    may_acquire=relay.prefix in decision.acquire,
                    release=relay.prefix in decision.release,
                )
            if last is None or (decision.quota, decision.members) != (last.quota, last.members):
                log.info("share_changed", count=decision.quota)
            last = decision
        await _sleep(beat_every_s * rng.uniform(*_BEAT_JITTER), stop)
    # Leave before the prefix tasks release their leases: the others then count one member
    # fewer by the time the leases come free, and take them at once.
    try:
        await membership.leave()
    except REDIS_ERRORS as exc:
        log.warning("redis_error", error=f"{type(exc).__name__}: {exc}"[:300])


class _PrefixRelay:
    """Lease keeping and the poll loop of one prefix."""

    def __init__(
        self,
        prefix: str,
        *,
        options: SweepOptions,
        redis: RedisClient,
        sinks: Mapping[Kind, Sink],
        sink_locks: Mapping[Kind, asyncio.Lock],
        metrics: RelayMetrics,
        health: Health,
        stop: asyncio.Event,
        clock: Clock,
        token: str | None = None,
    ) -> None:
        self.prefix = prefix
        self.options = options
        self.store = AsyncRedisStore(redis, prefix=prefix)
        self.sinks = sinks
        self.sink_locks = sink_locks
        self.metrics = metrics
        self.health = health
        self.stop = stop
        self.clock = clock
        self.rng = random.Random()
        self.lease = Lease(
            redis, self.store.keyspace, ttl_s=options.lease_ttl_s, monotonic=clock.monotonic, token=token
        )
        self.active = False
        self.lease_changed = asyncio.Event()
        # Set by the share task: whether to try for the lease, whether to hand it back. A
        # one-shot run has no share task and takes every lease it finds free.
        self.may_acquire = options.once
        self.release_wanted = False
        # Wakes the keeper (may acquire now) and the loop (hand back now) out of their waits.
        self.keeper_wake = asyncio.Event()
        self.loop_wake = asyncio.Event()
        # Keeper (renew + note) and hand-back exclude each other, so a renewal in flight
        # cannot make a lease just given back look held again.
        self.lease_lock = asyncio.Lock()
        self.closing = False
        self.delivered: Counter[Kind] = Counter()
        self.retried: Counter[Kind] = Counter()
        self.dead_lettered: Counter[Kind] = Counter()
        self.left_for_retry = 0
        self.skipped = False
        self.sweeper: Sweeper | None = None
        metrics.add_prefix(prefix)

    # --- the lease ----------------------------------------------------------------------------
    def steer(self, *, may_acquire: bool, release: bool) -> None:
        """Follow the share task's decision: try for the lease or not, hand it back or not."""
        if may_acquire and not self.may_acquire:
            self.keeper_wake.set()
        if release and not self.release_wanted:
            self.loop_wake.set()
        self.may_acquire, self.release_wanted = may_acquire, release

    async def keep_lease(self) -> None:
        """Acquire (while the share allows), then renew every third of the TTL; standbys jitter."""
        renew_every_s = self.lease.ttl_s / 3
        while not self.closing:
            async with self.lease_lock:
                try:
                    if self.active:
                        if self._renew_in(renew_every_s) <= 0:
                            await self.lease.renew()
                            self.health.redis_ok()
                    elif self.may_acquire:
                        await self.lease.acquire()
                        self.health.redis_ok()
                except REDIS_ERRORS as exc:
                    self._redis_failed(exc)
                self._note_lease()
            # Jitter for standbys so replicas never poll in lockstep (DESIGN §4).
            wait_s = renew_every_s * self.rng.uniform(0.5, 1.5)
            if self.active:  # until the renewal is due, unless a beat renews it first
                renew_in_s = self._renew_in(renew_every_s)
                wait_s = renew_in_s if renew_in_s > 0 else renew_every_s
            self.keeper_wake.clear()
            await _sleep(wait_s, self.keeper_wake)

    def _renew_in(self, renew_every_s: float) -> float:
        """Seconds until the keeper must renew: a period (and a little slack, so a beat in
        flight gets there first) after the last renewal anyone sent."""
        sent_s = self.lease.sent_s
        if sent_s is None:
            return 0.0
        return sent_s + renew_every_s * _RENEW_SLACK - self.clock.monotonic()

    async def hand_back(self) -> None:
        """Give the lease back to the group: checkpoint the readers, then release (between passes)."""
        async with self.lease_lock:
            if self.sweeper is not None:
                with contextlib.suppress(*REDIS_ERRORS):
                    await self.sweeper.checkpoint()
                self._drop_sweeper()
            self.may_acquire = self.release_wanted = False
            self.active = False
            self.metrics.active.labels(self.prefix).set(0)
            try:
                released = await self.lease.release()
            except REDIS_ERRORS as exc:
                self._redis_failed(exc)
                self.lease.forget()  # it expires on its own within the TTL; we deliver no more
                released = False
            if released:
                self.metrics.lease_transitions.labels(self.prefix, "released").inc()
                log.info("lease_released", prefix=self.prefix)
            self.lease_changed.set()

    def _note_lease(self) -> None:
        held = self.lease.held()
        if held == self.active:
            return
        self.active = held
        event = "acquired" if held else "lost"
        self.metrics.lease_transitions.labels(self.prefix, event).inc()
        self.metrics.active.labels(self.prefix).set(1 if held else 0)
        if held:
            log.info("lease_acquired", prefix=self.prefix)
        else:
            log.warning("lease_lost", prefix=self.prefix)
        self.lease_changed.set()

    # --- the loop -----------------------------------------------------------------------------
    async def run(self) -> None:
        keeper = asyncio.create_task(self.keep_lease())
        try:
            await self._loop()
        finally:
            # The flag as well as the cancel: on Python 3.11 a cancel can be lost inside
            # redis-py's wait_for (bpo-42130); the keeper then stops at its next turn.
            self.closing = True
            self.keeper_wake.set()
            keeper.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await keeper
            await self._shutdown()

    async def _loop(self) -> None:
        error_streak = idle_streak = 0
        waiting_since_s = self.clock.monotonic()
        while not self.stop.is_set():
            if self.release_wanted and self.active:
                await self.hand_back()
                continue
            if not self.lease.held():
                self._drop_sweeper()
                self._note_lease()
                if self.options.once and self.clock.monotonic() - waiting_since_s > 2 * self.lease.ttl_s:
                    log.warning("lease_held_elsewhere", prefix=self.prefix)
                    self.skipped = True
                    return
                self.health.progress(self.clock.monotonic())
                self.lease_changed.clear()
                await self._wait(self.lease.ttl_s / 3, self.lease_changed)
                continue
            try:
                if self.sweeper is None:
                    self.sweeper = self._new_sweeper()
                    await self.sweeper.start()
                # Cleared before the pass, not after: a wake-up (new work, a hand-back) that
                # arrives while the pass runs must end the idle wait that follows it.
                self.loop_wake.clear()
                result = await self._pass(self.sweeper)
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
            if result.full:
                idle_streak = 0
                await asyncio.sleep(0)  # more is waiting: poll again at once
                continue
            idle_streak += 1
            await self._wait(self._idle_delay(idle_streak, result), self.loop_wake)

    def _idle_delay(self, idle_streak: int, result: PassResult) -> float:
        interval_s = self.options.poll_interval_s
        ceiling_s = min(interval_s, interval_s * _FIRST_IDLE_FRACTION * 2.0 ** (min(idle_streak, 32) - 1))
        # A narrow band: only one replica polls a prefix, so jitter just keeps many prefixes of
        # one process apart; a wide one would poll more often than the interval (issue 6 budget).
        delay_s = ceiling_s * self.rng.uniform(*_IDLE_JITTER)
        if result.next_retry_in_s is not None:
            delay_s = min(delay_s, result.next_retry_in_s)
        return delay_s

    async def _pass(self, sweeper: Sweeper) -> PassResult | None:
        """Run one pass; after ``stop`` it gets ``shutdown_grace_s`` to finish, else is cancelled."""
        work = asyncio.create_task(sweeper.run_pass(self.stop))
        stopped = asyncio.create_task(self.stop.wait())
        try:
            done, _ = await asyncio.wait({work, stopped}, return_when=asyncio.FIRST_COMPLETED)
            if work not in done:
                done, _ = await asyncio.wait({work}, timeout=self.options.shutdown_grace_s)
                if work not in done:
                    work.cancel()
                    with contextlib.suppress(asyncio.CancelledError, *REDIS_ERRORS):
                        await work
                    log.warning("shutdown_grace_exceeded", prefix=self.prefix)
                    return None
            return work.result()
        finally:
            stopped.cancel()

    def _new_sweeper(self) -> Sweeper:
        return Sweeper(
            self.store,
            sinks=self.sinks,
            options=self.options,
            metrics=self.metrics,
            clock=self.clock,
            rng=self.rng,
            sink_locks=self.sink_locks,
            may_deliver=self.lease.held,
        )

    def _drop_sweeper(self) -> None:
        # Whatever it held is read again from Redis by the next sweeper (or another replica).
        self.sweeper = None

    def _tally(self, result: PassResult) -> None:
        self.delivered.update(result.delivered)
        self.retried.update(result.retried)
        self.dead_lettered.update(result.dead_lettered)
        self.left_for_retry = result.held

    def _redis_failed(self, exc: BaseException) -> None:
        self.metrics.redis_errors.labels(self.prefix).inc()
        self.health.redis_failed(type(exc).__name__)
        log.warning("redis_error", prefix=self.prefix, error=f"{type(exc).__name__}: {exc}"[:300])

    async def _wait(self, timeout_s: float, wake: asyncio.Event | None = None) -> None:
        """Sleep up to ``timeout_s``; ``stop`` (or ``wake``) ends it early."""
        await _sleep(timeout_s, self.stop, *([] if wake is None else [wake]))

    async def _shutdown(self) -> None:
        """Checkpoint the readers and give the lease back; Redis trouble here is only logged."""
        if self.sweeper is not None:
            self.left_for_retry = self.sweeper.held_count()
            with contextlib.suppress(*REDIS_ERRORS):
                await self.sweeper.checkpoint()
        was_active = self.active
        self.active = False
        self.metrics.active.labels(self.prefix).set(0)
        try:
            released = await self.lease.release()
        except REDIS_ERRORS:
            released = False
        if was_active and released:
            self.metrics.lease_transitions.labels(self.prefix, "released").inc()
            log.info("lease_released", prefix=self.prefix)
