"""One prefix's delivery passes: read, envelope, deliver, ack / retry / dead-letter, report.

A pass goes spawns → outbox → due timers (a child must exist before events reach it). Each
kind reads at most ``batch`` new entries into memory, where entries stay until they are acked
or dead-lettered; ``plan.choose`` picks what may go now (per-target order, retry backoff),
the kind's sink delivers, ``plan.judge`` classifies the outcomes, and the shell acts on them in
batched round-trips. While more than ``max_held`` entries of a kind wait in memory, no new
ones are read. Any Redis error propagates: the loop counts it and starts a fresh ``Sweeper``
(everything unacked is read and delivered again; attempt counts live in Redis).
"""

from __future__ import annotations

import asyncio
import random
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field

import structlog

from relayd.engine.backoff import retry_delay
from relayd.engine.clock import Clock
from relayd.engine.options import SweepOptions
from relayd.engine.ordering import split_fresh
from relayd.engine.plan import MAX_ATTEMPTS, PERMANENT, Dead, Held, Verdicts, choose, judge
from relayd.envelope import Envelope, Kind, outbox_envelope, restamp, spawn_envelope, timer_envelope
from relayd.metrics import RelayMetrics
from relayd.packing import use_hiredis_packing
from relayd.sinks.base import Delivered, Outcome, Retry, Sink
from relayd.state import RedisClient
from relayd.state.attempts import AttemptRecord, forget_attempts, load_attempts, save_attempts
from relayd.state.deadletters import DeadMove, encode_dead_letter, move_to_dead_letters
from relayd.state.keys import RelayKeys
from store import AsyncRedisStore
from store.backlog import RawEntry, RawTimer
from store.errors import MalformedEntry
from store.readers import AsyncBacklogReader

log = structlog.get_logger(__name__)

_BUILDERS = {"outbox": outbox_envelope, "spawn": spawn_envelope}

#: A freshly read entry on the fast path: (ref, raw entry, envelope). A tuple, not a ``Held``:
#: most entries are delivered and acked on their first attempt and need no history.
_Fresh = tuple[str, RawEntry | RawTimer, Envelope]


@dataclass(frozen=True, slots=True)
class PassResult:
    """What one pass did, per kind, and whether there is more to do at once."""

    delivered: dict[Kind, int] = field(default_factory=dict)
    retried: dict[Kind, int] = field(default_factory=dict)
    dead_lettered: dict[Kind, int] = field(default_factory=dict)
    read: int = 0
    attempted: int = 0
    full: bool = False  # a read or a delivery hit its bound: poll again at once
    drained: bool = False  # nothing new, readers exhausted, nothing eligible left
    held: int = 0  # entries waiting in memory (retry backoff, or behind a failing head)
    next_retry_in_s: float | None = None  # until the earliest held entry may go again


def timer_ref(timer: RawTimer) -> str:
    """A timer's stable id: its Timeout event id, or a readable stand-in when malformed."""
    try:
        return timer_envelope(timer, prefix="", attempt=1, relayed_at=0.0).id
    except MalformedEntry:
        member = timer.member.decode("utf-8", "backslashreplace").replace("\x00", "\\x00")
        return f"timeout:{member}:{float(timer.fire_at)}"


@dataclass(slots=True)
class _Lane:
    kind: Kind
    sink: Sink
    lock: asyncio.Lock
    reader: AsyncBacklogReader | None  # None for timers (read straight from the zset)
    held: dict[str, Held] = field(default_factory=dict)
    # P:relay:attempts:{kind} may hold records: False only after an EXISTS said it is empty
    # and this sweeper wrote none since, so a first-time read needs no HMGET of the records.
    attempts_maybe: bool = True


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
        sink_locks: Mapping[Kind, asyncio.Lock] | None = None,
        may_deliver: Callable[[], bool] = lambda: True,
    ) -> None:
        self.store = store
        # Same bytes on the wire, a fraction of redis-py's asyncio packing CPU (relayd.packing).
        use_hiredis_packing(store.client)
        self.prefix = store.keyspace.prefix
        self.keys = RelayKeys(store.keyspace)
        self.options = options
        self.metrics = metrics
        self.clock = clock
        self.rng = rng or random.Random()
        self.may_deliver = may_deliver
        locks = sink_locks or {}
        self.lanes: list[_Lane] = []
        self._checkpointed: dict[Kind, int] = {}  # low-water marks written by this sweeper
        for kind in ("spawn", "outbox", "timer"):
            reader = None
            if kind != "timer":
                reader = store.backlog(
                    "spawns" if kind == "spawn" else "outbox",
                    grace_s=options.gap_grace_s,
                    reconcile_interval_s=min(1.0, options.poll_interval_s),
                )
            self.lanes.append(_Lane(kind, sinks[kind], locks.get(kind) or asyncio.Lock(), reader))

    @property
    def client(self) -> RedisClient:
        return self.store.client  # type: ignore[no-any-return]

    async def start(self) -> None:
        """Load the readers' persisted cursors."""
        for lane in self.lanes:
            if lane.reader is not None:
                await lane.reader.start()
            await self._check_attempts(lane)

    async def _check_attempts(self, lane: _Lane) -> None:
        # Only the lease holder writes records; one written by a replica that lost the lease a
        # moment ago may be missed, which restarts that entry's count (dead-lettering later).
        lane.attempts_maybe = bool(await self.client.exists(self.keys.attempts(lane.kind)))

    def has_eligible(self) -> bool:
        """Whether some held entry may be attempted now (not waiting, not behind a waiting head)."""
        now, blocked = self.clock.now(), set[str]()
        for lane in self.lanes:
            picked, _ = choose(lane.held.values(), now=now, limit=1, blocked=blocked)
            if picked:
                return True
            if lane.kind == "spawn":
                blocked = {k for h in lane.held.values() if (k := h.envelope.ordering_key)}
        return False

    def held_count(self) -> int:
        return sum(len(lane.held) for lane in self.lanes)

    async def checkpoint(self) -> None:
        """Persist each reader's low-water mark, skipping marks this sweeper already wrote.

        An idle pass then costs no write (two SETs less per poll per prefix).
        """
        for lane in self.lanes:
            if lane.reader is not None and self._checkpointed.get(lane.kind) != lane.reader.low_water_mark:
                await lane.reader.checkpoint()
                self._checkpointed[lane.kind] = lane.reader.low_water_mark

    async def run_pass(self, stop: asyncio.Event | None = None) -> PassResult:
        """Run one pass; with ``stop`` set, start no new read or delivery."""
        started_s = self.clock.monotonic()
        result = _Tally()
        blocked_children: set[str] = set()
        for lane in self.lanes:
            if (stop is not None and stop.is_set()) or not self.may_deliver():
                result.interrupted = True
                break
            await self._run_lane(lane, result, blocked_children)
            if lane.kind == "spawn":
                # Events to a child whose spawn is still pending wait for it (DESIGN §4).
                blocked_children = {k for h in lane.held.values() if (k := h.envelope.ordering_key)}
        await self.checkpoint()
        await self._refresh_gauges()
        duration_s = self.clock.monotonic() - started_s
        self.metrics.sweep_duration.labels(self.prefix).observe(duration_s)
        self.metrics.last_sweep.labels(self.prefix).set(self.clock.now())
        done = result.freeze(self, duration_s)
        emit = log.info if done.read or done.attempted else log.debug
        emit(
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

    # --- one kind ---------------------------------------------------------------------------
    async def _run_lane(self, lane: _Lane, tally: _Tally, blocked: set[str]) -> None:
        batch = self.options.batch
        now = self.clock.now()
        # Entries already waiting in memory are older than anything new: they go first.
        picked: list[Held] = []
        if lane.held:
            picked, _ = choose(lane.held.values(), now=now, limit=batch, blocked=blocked)
        fast: list[_Fresh] = []
        malformed: list[Dead] = []
        room = min(batch - len(picked), self.options.max_held - len(lane.held))
        if room > 0:
            waiting = {k for h in lane.held.values() if (k := h.envelope.ordering_key) is not None}
            before = len(lane.held)
            fast, malformed, read_n = await self._read(lane, room, waiting | blocked)
            tally.read += read_n
            if len(lane.held) > before:  # some joined the line (a history): they may go now too
                picked, _ = choose(lane.held.values(), now=now, limit=batch - len(fast), blocked=blocked)
            # Anything read means more may wait: a window holding burned seqs (aborted commits)
            # returns fewer than asked, and must not send the loop to its idle backoff.
            tally.full |= read_n > 0
        if (picked or fast) and not self.may_deliver():
            # The lease was lost while reading: another replica delivers now.
            self._hold(lane, fast, now)
            picked, fast = [], []
        tally.full |= len(picked) + len(fast) >= batch
        verdicts, acked_fast, stamp = Verdicts(), list[_Fresh](), now
        if picked or fast:
            tally.attempted += len(picked) + len(fast)
            stamp = self.clock.now()
            envelopes = [restamp(h.envelope, attempt=h.attempts + 1, relayed_at=stamp) for h in picked]
            for _, _, envelope in fast:
                # Built at read, never serialised yet: the stamp says when it was handed over.
                envelope.body["relayed_at"] = stamp
                envelopes.append(envelope)
            outcomes = await self._deliver(lane, envelopes)
            verdicts, acked_fast = self._judge(lane, picked, fast, outcomes, stamp)
        verdicts.dead.extend(malformed)
        await self._apply(lane, verdicts, acked_fast, stamp)
        tally.count(lane.kind, verdicts, len(acked_fast))
        self._count(lane.kind, verdicts, len(acked_fast))

    def _judge(
        self, lane: _Lane, picked: list[Held], fast: list[_Fresh], outcomes: Sequence[Outcome], now: float
    ) -> tuple[Verdicts, list[_Fresh]]:
        """Judge the held entries with ``judge``; ack the fast ones the sink confirmed.

        A fast entry the sink did not confirm becomes a ``Held`` and is judged like any other
        (retry with backoff, hold-back behind its key's failed head, dead letter).
        """
        total = len(picked) + len(fast)
        if len(outcomes) != total:  # the sink broke its contract: every entry retries
            outcomes = [Retry(error=f"sink returned {len(outcomes)} outcomes for {total} entries")] * total
        verdicts = Verdicts()
        if picked:
            verdicts = self._verdicts(picked, outcomes[: len(picked)], now)
        acked: list[_Fresh] = []
        failed: list[Held] = []
        failed_outcomes: list[Outcome] = []
        for fresh, outcome in zip(fast, outcomes[len(picked) :], strict=True):
            if type(outcome) is Delivered:
                acked.append(fresh)
            else:
                failed.append(Held(fresh[0], fresh[1], fresh[2], now))
                failed_outcomes.append(outcome)
        if failed:
            for held in failed:
                lane.held[held.ref] = held
            more = self._verdicts(failed, failed_outcomes, now)
            verdicts.ack.extend(more.ack)
            verdicts.retry.extend(more.retry)
            verdicts.dead.extend(more.dead)
            verdicts.held_back.extend(more.held_back)
        return verdicts, acked

    def _verdicts(self, batch: list[Held], outcomes: Sequence[Outcome], now: float) -> Verdicts:
        return judge(batch, outcomes, now=now, max_attempts=self.options.max_attempts, delay_s=self._delay)

    def _hold(self, lane: _Lane, fresh: list[_Fresh], now: float) -> None:
        for ref, raw, envelope in fresh:
            lane.held[ref] = Held(ref, raw, envelope, now)

    def _count(self, kind: Kind, verdicts: Verdicts, acked_fast: int) -> None:
        m, p = self.metrics, self.prefix
        gave_up = sum(1 for d in verdicts.dead if d.reason_code == MAX_ATTEMPTS)
        permanent = sum(1 for d in verdicts.dead if d.reason_code == PERMANENT)
        delivered = len(verdicts.ack) + acked_fast
        m.delivered.labels(p, kind).inc(delivered)
        m.attempts.labels(p, kind, "delivered").inc(delivered)
        m.attempts.labels(p, kind, "retry").inc(len(verdicts.retry) + gave_up)
        m.attempts.labels(p, kind, "permanent").inc(permanent)
        for d in verdicts.dead:
            m.dead_lettered.labels(p, kind, d.reason_code).inc()

    def _delay(self, attempt: int) -> float:
        return retry_delay(
            attempt, base_s=self.options.backoff_base_s, cap_s=self.options.backoff_cap_s, rng=self.rng
        )

    async def _read(self, lane: _Lane, limit: int, blocked: set[str]) -> tuple[list[_Fresh], list[Dead], int]:
        """Read up to ``limit`` new entries; return the fast ones, the malformed ones, the count.

        Entries with an attempt history or a blocked key join ``lane.held`` (the waiting line).
        """
        now = self.clock.now()
        raws: Sequence[RawEntry | RawTimer]
        if lane.reader is not None:
            raws = await lane.reader.read_new(limit, now=self.clock.monotonic())
        else:
            skip = [h.raw.member for h in lane.held.values() if isinstance(h.raw, RawTimer)]
            raws = await self.store.due_timer_entries(now, limit, skip=skip)
        fresh: list[_Fresh] = []
        malformed: list[Dead] = []
        prefix = self.prefix
        build = _BUILDERS.get(lane.kind)
        for raw in raws:
            try:
                if build is not None and isinstance(raw, RawEntry):
                    fresh.append((raw.field, raw, build(raw, prefix=prefix, attempt=1, relayed_at=now)))
                elif isinstance(raw, RawTimer):
                    envelope = timer_envelope(raw, prefix=prefix, attempt=1, relayed_at=now)
                    fresh.append((envelope.id, raw, envelope))
            except MalformedEntry as exc:
                ref = timer_ref(raw) if isinstance(raw, RawTimer) else raw.field
                placeholder = Envelope(id=ref, kind=lane.kind, prefix=prefix, attempt=0, body={})
                malformed.append(Dead(Held(ref, raw, placeholder, now), exc.reason, str(exc)))
        records: dict[str, AttemptRecord] = {}
        if lane.attempts_maybe and fresh:
            records = await load_attempts(self.client, self.keys.attempts(lane.kind), [f[0] for f in fresh])
        if not records and not blocked:
            return fresh, malformed, len(raws)  # the common case: everything goes straight on
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
        return fast, malformed, len(raws)

    async def _deliver(self, lane: _Lane, batch: list[Envelope]) -> Sequence[Outcome]:
        started_s = self.clock.monotonic()
        try:
            async with lane.lock:
                outcomes = await lane.sink.deliver(batch)
        except asyncio.CancelledError:
            raise
        except Exception as exc:  # the Sink contract: an exception retries the whole batch
            log.warning("sink_failed", prefix=self.prefix, kind=lane.kind, count=len(batch), error=repr(exc))
            outcomes = [Retry(error=f"sink raised {type(exc).__name__}")] * len(batch)
        self.metrics.sink_latency.labels(self.prefix, lane.kind).observe(self.clock.monotonic() - started_s)
        return outcomes

    async def _apply(self, lane: _Lane, verdicts: Verdicts, acked_fast: list[_Fresh], stamp: float) -> None:
        kind, now = lane.kind, self.clock.now()
        acked = [(h.ref, h.raw) for h in verdicts.ack]
        acked.extend((ref, raw) for ref, raw, _ in acked_fast)
        if acked:
            await self._ack(lane, acked)
            stale = [h.ref for h in verdicts.ack if h.attempts > 1]
            if stale:
                await forget_attempts(self.client, self.keys.attempts(kind), stale)
                if not any(h.attempts for h in lane.held.values()):
                    await self._check_attempts(lane)
        if verdicts.retry:
            records = {
                h.ref: AttemptRecord(h.attempts, h.first_attempt_at or now, h.last_attempt_at or now)
                for h in verdicts.retry
            }
            lane.attempts_maybe = True
            await save_attempts(self.client, self.keys.attempts(kind), records)
            for h in verdicts.retry:
                log.debug(
                    "delivery_retry",
                    prefix=self.prefix,
                    kind=kind,
                    id=h.envelope.id,
                    attempt=h.attempts,
                    error=h.last_error,
                )
        if verdicts.dead:
            await self._bury(kind, verdicts.dead, now)
        resolved = [ref for ref, _ in acked]
        resolved.extend(d.held.ref for d in verdicts.dead)
        if lane.held:
            for ref in resolved:
                lane.held.pop(ref, None)
        if lane.reader is not None:
            lane.reader.resolve(resolved)
        if kind == "timer":
            self._observe_lag(verdicts.ack, acked_fast, stamp)

    def _observe_lag(self, acked: list[Held], acked_fast: list[_Fresh], stamp: float) -> None:
        lag = self.metrics.timer_lag.labels(self.prefix)
        for h in acked:
            if isinstance(h.raw, RawTimer):
                lag.observe(max(0.0, (h.last_attempt_at or stamp) - h.raw.fire_at))
        for _, raw, _ in acked_fast:
            if isinstance(raw, RawTimer):
                lag.observe(max(0.0, stamp - raw.fire_at))

    async def _bury(self, kind: Kind, dead: list[Dead], now: float) -> None:
        moves = [self._dead_move(kind, d, now) for d in dead]
        await move_to_dead_letters(self.client, self.keys, kind, moves)
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

    async def _ack(self, lane: _Lane, acked: list[tuple[str, RawEntry | RawTimer]]) -> None:
        if lane.kind == "timer":
            # Score-guarded: a timer the engine re-armed since we read it stays (DESIGN §4).
            await self.store.delete_timers_many(
                [(raw.member, raw.fire_at) for _, raw in acked if isinstance(raw, RawTimer)]
            )
        elif lane.kind == "outbox":
            await self.store.ack_outbox_many([ref for ref, _ in acked])
        else:
            await self.store.ack_spawns_many([ref for ref, _ in acked])

    def _dead_move(self, kind: Kind, dead: Dead, now: float) -> DeadMove:
        held, raw = dead.held, dead.held.raw
        id_ = held.ref if kind == "timer" else f"{self.prefix}:{kind}:{held.ref}"
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
        )
        if isinstance(raw, RawTimer):
            return DeadMove(raw.member, raw.fire_at, id_, doc, held.ref)
        return DeadMove(raw.field, None, id_, doc, held.ref)

    async def _refresh_gauges(self) -> None:
        """Backlog, dead letters and oldest due age in one pipelined round-trip (all O(1)/O(log n))."""
        ks, now, p = self.store.keyspace, self.clock.now(), self.prefix
        pipe = self.client.pipeline(transaction=False)
        pipe.hlen(ks.outbox)
        pipe.hlen(ks.spawns)
        pipe.zcount(ks.timers, "-inf", now)
        pipe.zrange(ks.timers, 0, 0, withscores=True)
        for kind in ("outbox", "spawn", "timer"):
            pipe.hlen(self.keys.dead(kind))
        outbox_n, spawns_n, due_n, first, *dead = await pipe.execute()
        self.metrics.backlog.labels(p, "outbox").set(outbox_n)
        self.metrics.backlog.labels(p, "spawn").set(spawns_n)
        self.metrics.backlog.labels(p, "timer").set(due_n)
        for kind, n in zip(("outbox", "spawn", "timer"), dead, strict=True):
            self.metrics.dead_letters.labels(p, kind).set(n)
        for lane in self.lanes:
            seen = [h.first_seen_at for h in lane.held.values()]
            if lane.kind == "timer":
                seen += [h.raw.fire_at for h in lane.held.values() if isinstance(h.raw, RawTimer)]
                if first and float(first[0][1]) <= now:
                    seen.append(float(first[0][1]))
            self.metrics.oldest_due_age.labels(p, lane.kind).set(max(0.0, now - min(seen)) if seen else 0.0)


@dataclass(slots=True)
class _Tally:
    delivered: dict[Kind, int] = field(default_factory=dict)
    retried: dict[Kind, int] = field(default_factory=dict)
    dead_lettered: dict[Kind, int] = field(default_factory=dict)
    read: int = 0
    attempted: int = 0
    full: bool = False
    interrupted: bool = False

    def count(self, kind: Kind, verdicts: Verdicts, acked_fast: int) -> None:
        self.delivered[kind] = self.delivered.get(kind, 0) + len(verdicts.ack) + acked_fast
        self.retried[kind] = self.retried.get(kind, 0) + len(verdicts.retry)
        self.dead_lettered[kind] = self.dead_lettered.get(kind, 0) + len(verdicts.dead)

    def freeze(self, sweeper: Sweeper, duration_s: float) -> PassResult:
        del duration_s
        now = sweeper.clock.now()
        waits = [w for lane in sweeper.lanes for h in lane.held.values() if (w := h.not_before - now) > 0]
        exhausted = all(lane.reader.exhausted for lane in sweeper.lanes if lane.reader is not None)
        idle = not self.interrupted and self.read == 0 and not self.full
        drained = idle and exhausted and not sweeper.has_eligible()
        return PassResult(
            delivered=self.delivered,
            retried=self.retried,
            dead_lettered=self.dead_lettered,
            read=self.read,
            attempted=self.attempted,
            full=self.full,
            drained=drained,
            held=sum(len(lane.held) for lane in sweeper.lanes),
            next_retry_in_s=min(waits) if waits else None,
        )
