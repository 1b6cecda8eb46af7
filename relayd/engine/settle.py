"""Act on one delivery's verdicts: batched acks, persisted retries, atomic dead letters, metrics.

The shell half of a sweeper pass after the sink answered: acks go in one command per batch
(HDEL, or the score-guarded timer compare-and-delete), attempt records are written only for
failures and forgotten on delivery, dead letters move in one atomic step per chunk.

Fenced (``engine.fencing``): nothing is written once the lease's local deadline has passed, and
the ack, the attempts write and the dead-letter move each check the lease token in their own
script call (one call per batch, as the plain HDEL was), so Redis refuses them from a replica
that lost the lease while paused. Either raises ``Fenced``.
"""

from __future__ import annotations

from collections.abc import Awaitable
from typing import Final

import structlog
from prometheus_client import Counter
from redis.exceptions import OutOfMemoryError

from relayd.engine.build import dead_letter_id
from relayd.engine.clock import Clock
from relayd.engine.failure_log import FailureLog
from relayd.engine.fencing import FenceGuard
from relayd.engine.fresh import FreshBatch
from relayd.engine.lane import Lane
from relayd.engine.plan import MAX_ATTEMPTS, PERMANENT, Dead, Held, Verdicts
from relayd.envelope import Kind
from relayd.envelope.stored import field_bytes
from relayd.observability import events
from relayd.observability.metrics import RelayMetrics, observe_many
from relayd.state import RedisClient
from relayd.state.attempts import AttemptRecord, forget_attempts, save_attempts
from relayd.state.deadletters import (
    DeadMove,
    ExecutionVersion,
    encode_dead_letter,
    execution_versions,
    move_to_dead_letters,
)
from relayd.state.keys import RelayKeys
from store import AsyncRedisStore, RawTimer

log = structlog.get_logger(__name__)

#: Seconds between two log lines about one kind of bookkeeping write Redis refused.
REFUSED_LOG_EVERY_S: Final = 10.0
#: Seconds before an entry whose dead letter Redis refused goes again (its target waits behind it).
UNBURIED_RETRY_S: Final = 5.0


class Settlement:
    """What one prefix's sweeper does with verdicts (one per sweeper)."""

    def __init__(
        self,
        store: AsyncRedisStore,
        *,
        metrics: RelayMetrics,
        clock: Clock,
        guard: FenceGuard | None = None,
    ) -> None:
        self.store = store
        self.client: RedisClient = store.client
        self.prefix = store.keyspace.prefix
        self.keys = RelayKeys(store.keyspace)
        self.metrics = metrics
        self.clock = clock
        self.failures = FailureLog(self.prefix)
        self._refused_logged_s: dict[str, float] = {}  # what -> when a refusal was last logged
        self.guard = guard or FenceGuard()
        self.fence = self.guard.fence
        # Per kind, the two series every delivery adds to (``count``).
        self._delivered: dict[Kind, tuple[Counter, Counter]] = {}

    async def check_attempts(self, lane: Lane) -> None:
        """Note whether ``P:relay:attempts:{kind}`` holds any record (one EXISTS)."""
        # Only the lease holder writes records; one written by a replica that lost the lease a
        # moment ago may be missed, which restarts that entry's count (dead-lettering later).
        lane.attempts_maybe = bool(await self.client.exists(self.keys.attempts(lane.kind)))

    async def apply(self, lane: Lane, verdicts: Verdicts, acked_fast: FreshBatch, stamp: float) -> None:
        """Write one delivery's verdicts; raises ``Fenced`` (and writes nothing more) when the
        lease may be gone."""
        count = len(acked_fast) + len(verdicts.ack) + len(verdicts.retry) + len(verdicts.dead)
        with self.guard.writing(lane.kind, count):
            await self._apply(lane, verdicts, acked_fast, stamp)

    async def ack_carried(self, lane: Lane, fields: list[str]) -> None:
        """Send a carried ack on its own (``Lane.carry``): its fields were returned by the
        lane's reader and delivered whole; raises ``Fenced`` when the lease may be gone."""
        with self.guard.writing(lane.kind, len(fields)):
            await self._ack(lane, fields, [], FreshBatch())
        if lane.reader is not None:
            lane.reader.resolve(fields)
        self.failures.flush(self.clock.now())

    async def _apply(self, lane: Lane, verdicts: Verdicts, acked_fast: FreshBatch, stamp: float) -> None:
        kind, now = lane.kind, self.clock.now()
        acked = [h.ref for h in verdicts.ack]
        acked += acked_fast.refs
        if acked:
            await self._ack(lane, acked, verdicts.ack, acked_fast)
            stale = [h.ref for h in verdicts.ack if h.attempts > 1]
            if stale:
                await forget_attempts(self.client, self.keys.attempts(kind), stale)
                if not any(h.attempts for h in lane.held.values()):
                    await self.check_attempts(lane)
        if verdicts.retry:
            records = {
                # The error, the next attempt and the key feed ``relayd status --retrying``.
                h.ref: AttemptRecord(
                    h.attempts,
                    h.first_attempt_at or now,
                    h.last_attempt_at or now,
                    h.last_error,
                    h.not_before,
                    h.envelope.ordering_key,
                )
                for h in verdicts.retry
            }
            lane.attempts_maybe = True
            # Refused (Redis out of memory): the counts stay in memory; a restart forgets them.
            await self.bookkeeping(
                kind,
                "attempts",
                save_attempts(self.client, self.keys.attempts(kind), records, fence=self.fence),
            )
            for h in verdicts.retry:
                self.failures.failed(
                    kind=kind,
                    target=h.envelope.ordering_key,
                    id=h.envelope.id,
                    error=h.last_error,
                    attempt=h.attempts,
                    retry_in_s=h.not_before - now,
                    now_s=now,
                )
        else:
            self.failures.flush(now)
        resolved = [*acked, *await self._settle_dead(lane, verdicts, now)] if verdicts.dead else acked
        if lane.held:
            for ref in resolved:
                lane.held.pop(ref, None)
        if lane.reader is not None:
            lane.reader.resolve(resolved)
        if kind == "timer":
            self._observe_lag(verdicts.ack, acked_fast, stamp)

    async def _settle_dead(self, lane: Lane, verdicts: Verdicts, now: float) -> list[str]:
        """Move the dead letters; the refs they resolve (a refused move keeps its held entries)."""
        if await self._bury(lane.kind, verdicts.dead, now):
            return [d.held.ref for d in verdicts.dead]
        forgotten = self._unburied(lane, verdicts.dead, now)
        verdicts.dead.clear()
        return forgotten

    def _unburied(self, lane: Lane, dead: list[Dead], now: float) -> list[str]:
        """The refs to forget of entries whose dead letter Redis refused (out of memory).

        An entry that went to the sink stays held, unresolved, so no later entry of its target
        overtakes it; it goes again after ``UNBURIED_RETRY_S`` and is dead-lettered once Redis
        takes the write. One that never went (malformed) has no order to keep: it is forgotten,
        still live in Redis, and the reconcile scan reads it again later.
        """
        forgotten: list[str] = []
        for d in dead:
            if lane.held.get(d.held.ref) is d.held:
                d.held.not_before = max(d.held.not_before, now + UNBURIED_RETRY_S)
            else:
                forgotten.append(d.held.ref)
        return forgotten

    def _observe_lag(self, acked: list[Held], acked_fast: FreshBatch, stamp: float) -> None:
        lags_s = [
            max(0.0, (h.last_attempt_at or stamp) - h.raw.fire_at)
            for h in acked
            if isinstance(h.raw, RawTimer)
        ]
        lags_s += [max(0.0, stamp - raw.fire_at) for raw in acked_fast.raws if isinstance(raw, RawTimer)]
        observe_many(self.metrics.timer_lag.labels(self.prefix), lags_s)

    async def bookkeeping(self, kind: Kind, what: str, write: Awaitable[object]) -> bool:
        """Run a bookkeeping write; False when Redis refused it for want of memory.

        Under ``maxmemory`` with ``noeviction`` Redis refuses writes that grow it (attempt
        records, dead letters, cursors) but still takes the acks (deletes): the relay goes on
        delivering and acking instead of starting over, and says what it could not keep (one
        line per kind of write every ``REFUSED_LOG_EVERY_S``; the Redis error count counts all).
        """
        try:
            await write
        except OutOfMemoryError:
            self.metrics.redis_errors.labels(self.prefix).inc()
            now_s = self.clock.monotonic()
            if now_s - self._refused_logged_s.get(what, float("-inf")) >= REFUSED_LOG_EVERY_S:
                self._refused_logged_s[what] = now_s
                log.warning(
                    "bookkeeping_refused",
                    prefix=self.prefix,
                    kind=kind,
                    error=f"{what}: Redis is out of memory",
                )
            return False
        return True

    async def _bury(self, kind: Kind, dead: list[Dead], now: float) -> bool:
        versions: list[ExecutionVersion | None] = [None] * len(dead)
        if kind == "timer":  # what a replay compares (relayd.state.deadletters)
            members = [d.held.raw.member if isinstance(d.held.raw, RawTimer) else b"" for d in dead]
            versions = await execution_versions(self.client, self.store.keyspace, members)
        moves = [self._dead_move(kind, d, now, v) for d, v in zip(dead, versions, strict=True)]
        if not await self.bookkeeping(
            kind, "dead letters", move_to_dead_letters(self.client, self.keys, kind, moves, fence=self.fence)
        ):
            return False
        for d in dead:
            log.warning(
                "dead_lettered",
                prefix=self.prefix,
                kind=kind,
                id=d.held.envelope.id,
                attempt=d.held.attempts,
                outcome=d.reason_code,
                error=d.reason,
            )
            events.emit(
                "entry.dead_lettered",
                d.held.envelope.id,
                prefix=self.prefix,
                kind=kind,
                attempts=d.held.attempts,
                reason_code=d.reason_code,
                reason=d.reason,
            )
        return True

    async def _ack(self, lane: Lane, refs: list[str], held: list[Held], fast: FreshBatch) -> None:
        """Ack ``refs`` (the refs of ``held`` then ``fast``): one HDEL, or one timer script call."""
        if lane.kind == "timer":
            # Score-guarded: a timer the engine re-armed since we read it stays
            # (docs/internals.md#delivery-semantics).
            raws = [h.raw for h in held]
            raws += fast.raws
            pairs = [(r.member, r.fire_at) for r in raws if isinstance(r, RawTimer)]
            await self.store.delete_timers_many(pairs, fence=self.fence)
        elif lane.kind == "outbox":
            await self.store.ack_outbox_many(refs, fence=self.fence)
        else:
            await self.store.ack_spawns_many(refs, fence=self.fence)

    def _dead_move(self, kind: Kind, dead: Dead, now: float, version: ExecutionVersion | None) -> DeadMove:
        held, raw = dead.held, dead.held.raw
        id_ = dead_letter_id(self.prefix, kind, held.ref)
        doc = encode_dead_letter(
            id_=id_,
            kind=kind,
            reason_code=dead.reason_code,
            reason=dead.reason,
            attempts=held.attempts,
            first_attempt_at=held.first_attempt_at,
            last_attempt_at=held.last_attempt_at,
            dead_at=now,
            envelope=held.envelope.body or None,  # None when the entry could not be decoded
            field=None if isinstance(raw, RawTimer) else raw.field,
            seq=None if isinstance(raw, RawTimer) else raw.seq,
            value=None if isinstance(raw, RawTimer) else raw.value,
            member=raw.member if isinstance(raw, RawTimer) else None,
            fire_at=raw.fire_at if isinstance(raw, RawTimer) else None,
            execution_version=version,
        )
        if isinstance(raw, RawTimer):
            return DeadMove(raw.member, raw.fire_at, id_, doc, field_bytes(held.ref))
        # The field's own bytes: one that is not UTF-8 was read with ``surrogateescape``.
        return DeadMove(field_bytes(raw.field), None, id_, doc, field_bytes(held.ref))

    def count(self, kind: Kind, verdicts: Verdicts, acked_fast: int) -> None:
        m, p = self.metrics, self.prefix
        gave_up = sum(1 for d in verdicts.dead if d.reason_code == MAX_ATTEMPTS)
        permanent = sum(1 for d in verdicts.dead if d.reason_code == PERMANENT)
        delivered = len(verdicts.ack) + acked_fast
        retried = len(verdicts.retry) + gave_up
        # Every series exists from the start (``RelayMetrics.add_prefix``): a zero adds nothing,
        # and skipping it saves the label lookups on every pass.
        if delivered:
            series = self._delivered.get(kind)
            if series is None:  # looked up once per kind (a label lookup takes a lock each time)
                series = self._delivered[kind] = (
                    m.delivered.labels(p, kind),
                    m.attempts.labels(p, kind, "delivered"),
                )
            for counter in series:
                counter.inc(delivered)
        if retried:
            m.attempts.labels(p, kind, "retry").inc(retried)
        if permanent:
            m.attempts.labels(p, kind, "permanent").inc(permanent)
        for d in verdicts.dead:
            m.dead_lettered.labels(p, kind, d.reason_code).inc()
