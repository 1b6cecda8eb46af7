"""The long-running relay: per-prefix lease, fair shares, adaptive polling, Redis retries, graceful stop.

``run_relay`` starts the sinks, runs one task per prefix (``engine.prefix_relay``: lease keeper
and poll loop) and closes the sinks. Replicas share the prefixes: a share task beats into each
prefix's member registry every third of the lease TTL and lets a prefix task try for its lease
only while this replica is below its fair share (``engine.shares``); a prefix above the share
is handed back between passes (checkpoint, release), so shares rebalance within about one TTL
of a join, leave or death. With ``wake``, one subscription per process ends idle waits on new
work (``engine.wake``). With ``once`` every prefix task drains what is due now and returns.
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

from relayd.engine.clock import Clock, sleep_until
from relayd.engine.options import SweepOptions
from relayd.engine.prefix_relay import PrefixRelay
from relayd.engine.redis_errors import REDIS_ERRORS
from relayd.engine.redis_time import RedisClock, keep_synced
from relayd.engine.shared_rate import shared_buckets
from relayd.engine.shares import PrefixView, ShareDecision, decide_shares
from relayd.engine.shutdown import ShutdownDeadline
from relayd.engine.sink_guard import guards_for
from relayd.engine.wake import WakeSubscriber
from relayd.envelope import Kind
from relayd.errors import RelaydError, SinkError
from relayd.observability.health import Health
from relayd.observability.metrics import RelayMetrics
from relayd.runtime.gc_tuning import relay_gc
from relayd.sinks.base import Sink, not_ready_reason
from relayd.state import RedisClient
from relayd.state.lease import make_token
from relayd.state.members import Membership

log = structlog.get_logger(__name__)

#: Registry beats come every third of the TTL times this jitter band (never later: a late beat
#: lets the member expire and the group rebalance for nothing).
_BEAT_JITTER: Final = (0.75, 1.0)


@dataclass(frozen=True, slots=True)
class RunSummary:
    """What a run did, summed over prefixes; ``exit_code`` as README.md#commands has it for ``--once``."""

    delivered: Mapping[Kind, int] = field(default_factory=dict)
    retried: Mapping[Kind, int] = field(default_factory=dict)
    dead_lettered: Mapping[Kind, int] = field(default_factory=dict)
    left_for_retry: int = 0
    #: Prefixes another replica held (``once``): that replica relays them, so they are no failure.
    skipped_prefixes: tuple[str, ...] = ()
    #: ``prefix:kind`` of every lane left parked because its key has the wrong type.
    parked_lanes: tuple[str, ...] = ()

    @property
    def exit_code(self) -> int:
        """0 when all due work was delivered (here, or by the replica active on a prefix); 1 when
        entries were left or dead-lettered, or a kind could not be read (its key has the wrong type)."""
        troubled = self.left_for_retry or sum(self.dead_lettered.values()) or self.parked_lanes
        return 1 if troubled else 0


async def run_relay(
    options: SweepOptions,
    *,
    redis: RedisClient,
    sinks: Mapping[Kind, Sink],
    metrics: RelayMetrics,
    health: Health,
    stop: asyncio.Event,
    clock: Clock | None = None,
    shutdown: ShutdownDeadline | None = None,
) -> RunSummary:
    """Relay every prefix of ``options`` until ``stop`` is set (or, with ``once``, drained).

    Starts every sink first and closes them all at the end. Raises ``SinkError`` (or the
    sink's own ``RelaydError``) when a sink cannot start. Without ``clock``, or with a
    ``RedisClock`` (one the sinks stamp with too), the engine's epoch time is the Redis
    server's (``engine.redis_time``), measured again every lease beat period.
    """
    shutdown = shutdown or ShutdownDeadline(stop, options.shutdown_grace_s)
    synced: RedisClock | None = None
    if clock is None or isinstance(clock, RedisClock):
        clock = synced = clock or RedisClock()
        await synced.try_sync(redis)
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
    health.watch_sinks(
        {f"{kind}:{sink.name}": sink.ready for kind, sink in sinks.items()},
        {f"{kind}:{sink.name}": reason for kind, sink in sinks.items() if (reason := not_ready_reason(sink))},
    )
    guards = guards_for(
        sinks,
        policy=options.breaker,
        rate_per_s=options.sink_rate_per_s,
        metrics=metrics,
        clock=clock,
        shared=shared_buckets(redis, options, clock) if options.sink_rate_scope == "cluster" else None,
    )
    health.watch_breakers({guard.name: guard.open_reason for guard in guards.values()})
    # One token per process, on every lease and registry: the shares count leases by holder.
    token = make_token()
    relays = [
        PrefixRelay(
            prefix,
            options=options,
            redis=redis,
            sinks=sinks,
            guards=guards,
            metrics=metrics,
            health=health,
            stop=stop,
            clock=clock,
            token=token,
            shutdown=shutdown,
        )
        for prefix in options.prefixes
    ]
    resync = None
    if synced is not None:
        resync = asyncio.create_task(
            keep_synced(synced, redis, every_s=options.lease_ttl_s / 3, stop=stop), name="redis-time"
        )
    try:
        with relay_gc():
            async with asyncio.TaskGroup() as group:
                if not options.once:  # a one-shot job takes what is free and is no group member
                    membership = Membership(
                        redis, [r.store.keyspace for r in relays], token=token, ttl_s=options.lease_ttl_s
                    )
                    group.create_task(
                        _keep_shares(membership, relays, stop=stop, health=health, shutdown=shutdown)
                    )
                if options.wake and not options.once:  # a latency shortcut; polling goes on regardless
                    subscriber = WakeSubscriber(redis, {r.prefix: r.wake for r in relays}, metrics=metrics)
                    for relay in relays:
                        relay.notices_live = lambda: subscriber.live
                    group.create_task(subscriber.run(stop))
                for relay in relays:
                    group.create_task(relay.run())
    finally:
        if resync is not None:
            resync.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await resync
        health.stopping()
        async with shutdown.bounded("closing the sinks"):
            await _close_sinks(started)
    return _summarise(relays)


async def _close_sinks(sinks: list[Sink]) -> None:
    for sink in sinks:
        try:
            await sink.close()
        except Exception as exc:  # one failing close must not keep the others open
            log.warning("sink_close_failed", error=f"{sink.name}: {type(exc).__name__}")


def _summarise(relays: list[PrefixRelay]) -> RunSummary:
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
        parked_lanes=tuple(f"{r.prefix}:{kind}" for r in relays for kind in sorted(r.parked)),
    )


async def _keep_shares(
    membership: Membership,
    relays: list[PrefixRelay],
    *,
    stop: asyncio.Event,
    health: Health,
    shutdown: ShutdownDeadline,
) -> None:
    """Beat into the registries, decide the fair share, steer the prefix tasks; leave on stop."""
    rng = random.Random()
    beat_every_s = relays[0].lease.ttl_s / 3
    last: ShareDecision | None = None
    while not stop.is_set():
        sent_s = relays[0].clock.monotonic()
        try:
            # Held leases are renewed by the beat itself; the keepers renew only if beats fail.
            seen = await membership.beat(
                {r.prefix: r.lease.token for r in relays if r.keeper.active and r.lease.held()}
            )
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
                elif relay.keeper.active and seen_one.holder != membership.token:
                    relay.keeper.lost_to(seen_one.holder, seen_s=sent_s)
            views = [PrefixView(r.prefix, r.members, r.holder) for r in seen]
            decision = decide_shares(views, membership.token)
            for relay in relays:
                relay.keeper.steer(
                    may_acquire=relay.prefix in decision.acquire,
                    release=relay.prefix in decision.release,
                )
            if last is None or (decision.quota, decision.members) != (last.quota, last.members):
                # count: the prefixes this replica should hold, of ``prefixes``, with ``replicas``
                # live replicas (this one included) sharing them.
                log.info(
                    "share_changed", count=decision.quota, prefixes=len(relays), replicas=decision.members
                )
                if decision.quota == 0:
                    # More replicas than prefixes: this one holds none and takes over when needed.
                    log.info("standing_by", prefixes=len(relays), replicas=decision.members)
            last = decision
        await sleep_until(beat_every_s * rng.uniform(*_BEAT_JITTER), stop)
    # Leave before the prefix tasks release their leases: the others then count one member
    # fewer by the time the leases come free, and take them at once.
    try:
        async with shutdown.bounded("leaving the member registry"):
            await membership.leave()
    except REDIS_ERRORS as exc:
        log.warning("redis_error", error=f"{type(exc).__name__}: {exc}"[:300])
