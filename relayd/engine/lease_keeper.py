"""One prefix's lease keeper: takes the lease while the share allows, renews it, notes its loss.

It runs as its own task beside the prefix's loop (``engine.prefix_relay``), which only asks
whether the lease is held and waits on ``changed`` while it is not. The share task in
``engine.loop`` steers it (``steer``: try for the lease or not, hand it back or not) and reports
a beat that saw another holder (``lost_to``). Renewals come from the membership beat while beats
succeed; the keeper renews a period (and a little slack) after the last renewal anyone sent, and
standbys retry at a jittered third of the TTL so replicas never poll in lockstep
(docs/internals.md#delivery-semantics). A one-shot run takes every lease it finds free.
"""

from __future__ import annotations

import asyncio
import random
from collections.abc import Callable
from typing import Final

import structlog

from relayd.engine.clock import Clock, sleep_until
from relayd.engine.redis_errors import REDIS_ERRORS
from relayd.observability import events
from relayd.observability.health import Health
from relayd.observability.metrics import RelayMetrics
from relayd.state.lease import Lease

log = structlog.get_logger(__name__)

#: The keeper renews this many renewal periods after the last renewal (a beat's included).
_RENEW_SLACK: Final = 1.1


class LeaseKeeper:
    """Acquires, renews and notes the lease of one prefix; ``active`` says whether it is held."""

    def __init__(
        self,
        prefix: str,
        lease: Lease,
        *,
        once: bool,
        metrics: RelayMetrics,
        health: Health,
        clock: Clock,
        rng: random.Random,
        redis_failed: Callable[[BaseException], None],
        loop_wake: asyncio.Event,
    ) -> None:
        self.prefix = prefix
        self.lease = lease
        self.once = once
        self.metrics = metrics
        self.health = health
        self.clock = clock
        self.rng = rng
        self.redis_failed = redis_failed
        #: Wakes the prefix's loop: the lease was lost, or a hand-back is wanted.
        self.loop_wake = loop_wake
        self.active = False
        #: Set whenever ``active`` changes (and when a one-shot run's acquire is refused).
        self.changed = asyncio.Event()
        # Set by the share task: whether to try for the lease, whether to hand it back.
        self.may_acquire = once
        self.release_wanted = False
        #: Wakes the keeper out of its wait (it may acquire now; it is closing).
        self.wake = asyncio.Event()
        # A turn (renew + note) and a hand-back exclude each other, so a renewal in flight
        # cannot make a lease just given back look held again.
        self.lock = asyncio.Lock()
        #: A one-shot run found the lease taken by another replica (an acquire was refused).
        self.refused = False
        self.closing = False

    def steer(self, *, may_acquire: bool, release: bool) -> None:
        """Follow the share task's decision: try for the lease or not, hand it back or not."""
        if may_acquire and not self.may_acquire:
            self.wake.set()
        if release and not self.release_wanted:
            self.loop_wake.set()
        self.may_acquire, self.release_wanted = may_acquire, release

    async def run(self) -> None:
        """Acquire (while the share allows), then renew every third of the TTL; standbys jitter."""
        renew_every_s = self.lease.ttl_s / 3
        while not self.closing:
            await self.turn(renew_every_s)
            wait_s = renew_every_s * self.rng.uniform(0.5, 1.5)
            if self.active:  # until the renewal is due, unless a beat renews it first
                renew_in_s = self._renew_in(renew_every_s)
                wait_s = renew_in_s if renew_in_s > 0 else renew_every_s
            self.wake.clear()
            await sleep_until(wait_s, self.wake)

    def close(self) -> None:
        """Stop at the next turn (the task is cancelled too; a cancel can be lost in redis-py)."""
        self.closing = True
        self.wake.set()

    async def turn(self, renew_every_s: float) -> None:
        """One turn: renew when due while active, else acquire when allowed."""
        async with self.lock:
            try:
                if self.active:
                    if self._renew_in(renew_every_s) <= 0:
                        await self.lease.renew()
                        self.health.redis_ok()
                elif self.may_acquire:
                    refused = not await self.lease.acquire()
                    if refused and not self.refused and not self.once:
                        # Another replica holds the lease: this one takes over when it goes.
                        log.info("standing_by", prefix=self.prefix)
                    self.refused = refused
                    self.health.redis_ok()
                    if self.refused and self.once:
                        self.changed.set()
            except REDIS_ERRORS as exc:
                self.redis_failed(exc)
            self.note()

    def _renew_in(self, renew_every_s: float) -> float:
        """Seconds until the keeper must renew: a period (and a little slack, so a beat in
        flight gets there first) after the last renewal anyone sent."""
        sent_s = self.lease.sent_s
        if sent_s is None:
            return 0.0
        return sent_s + renew_every_s * _RENEW_SLACK - self.clock.monotonic()

    def lost_to(self, holder: str | None, *, seen_s: float) -> None:
        """A beat sent at ``seen_s`` (monotonic) saw the lease held by another replica (or by
        none): stop delivering now, unless the lease was taken or renewed after the beat left."""
        sent_s = self.lease.sent_s
        if not self.lease.held() or (sent_s is not None and sent_s > seen_s):
            return
        log.warning("lease_held_elsewhere", prefix=self.prefix, holder=holder or "none")
        self.lease.forget()
        self.note()
        self.loop_wake.set()

    def note(self) -> None:
        """Follow the lease's state: count and log a change, tell the loop (``changed``)."""
        held = self.lease.held()
        if held == self.active:
            return
        self.active = held
        event = "acquired" if held else "lost"
        self.metrics.lease_transitions.labels(self.prefix, event).inc()
        self.metrics.active.labels(self.prefix).set(1 if held else 0)
        if held:
            log.info("lease_acquired", prefix=self.prefix)
            events.emit("lease.acquired", self.prefix, prefix=self.prefix)
        else:
            log.warning("lease_lost", prefix=self.prefix)
        self.changed.set()

    async def give_back(self) -> None:
        """Hand the lease back to the group (under ``lock``): no more tries until steered again."""
        self.may_acquire = self.release_wanted = False
        await self.release(report=True)
        self.changed.set()

    async def release(self, *, report: bool) -> None:
        """Stop delivering and delete the lease; if that fails it expires within the TTL.

        The lease counts as gone at once either way (``Lease.release``). ``report``: count a
        Redis error and tell ``/readyz`` (not on the way out).
        """
        was_active, self.active = self.active, False
        self.metrics.active.labels(self.prefix).set(0)
        try:
            released = await self.lease.release()
        except REDIS_ERRORS as exc:
            if report:
                self.redis_failed(exc)
            released = False
        if was_active and released:
            self.metrics.lease_transitions.labels(self.prefix, "released").inc()
            log.info("lease_released", prefix=self.prefix)
