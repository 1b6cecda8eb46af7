"""The read step of a pass: which lanes to read, new entries, their attempt records, the read-ahead.

Idle cost: a lane whose last run read and held nothing is quiet, and probed before it is read
(``engine.probe``: at most two commands per pass). With a live wake-up subscription the loop says
which kinds were written since the last pass (``notified``): those quiet lanes are read without a
probe, and the other quiet lanes are left alone (nothing was written to them) except for a timer
coming due, and for one full probe per ``poll_interval_s``, the same safety net as polling.

Each kind reads at most ``batch`` new entries per window. A hash lane reads through its
``AsyncBacklogReader``; a timer lane reads the due timers from the zset (``engine.timer_reads``),
and the score of the next timer not yet due comes back with the same round-trip
(``next_timer_at``), so the loop sleeps only until it is due. Entries with an attempt record
from before a restart, or whose key is blocked (behind a held entry, or a child whose spawn is
pending), join the lane's waiting line; the rest go on the fast path (``ordering.split_fresh``).

A full window's delivery runs while the next window is read and its envelopes built, in slices
that yield to the event loop so the sink's call keeps flowing (``read_ahead``); the next read
takes that window instead of going to Redis (``Lane.take_read_ahead``). A read that goes to
Redis takes the lane's carried ack along (``Lane.carry``): its fenced HDEL goes first in the
read's round-trip, and ``Read.acked`` says how many entries it deleted.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from collections.abc import Set as AbstractSet
from typing import Final, NamedTuple

from relayd.engine.build import build_fresh
from relayd.engine.clock import Clock
from relayd.engine.fencing import FenceGuard
from relayd.engine.fresh import Fetched, FreshBatch
from relayd.engine.lane import Lane
from relayd.engine.ordering import split_fresh
from relayd.engine.plan import Dead, Held
from relayd.engine.probe import probe_quiet
from relayd.engine.timer_reads import read_due_timers
from relayd.envelope import Kind
from relayd.state import RedisClient
from relayd.state.attempts import AttemptRecord, load_attempts
from relayd.state.keys import RelayKeys
from store import AsyncRedisStore, RawEntry, RawTimer
from store.round_trip import Command

#: Envelopes built between yields to the event loop while a sink call is in flight.
BUILD_SLICE: Final = 250


class Read(NamedTuple):
    """One read of a lane: its fast entries, its malformed ones, how many entries it read, and how
    many the lane's carried ack it took along deleted."""

    fast: FreshBatch
    malformed: list[Dead]
    read_n: int
    acked: int = 0


class Intake:
    """One sweeper's reads of one prefix: its quiet lanes, and ``next_timer_at``, the earliest
    timer not yet due."""

    def __init__(
        self, store: AsyncRedisStore, *, clock: Clock, poll_interval_s: float, guard: FenceGuard | None = None
    ) -> None:
        self.client: RedisClient = store.client
        self.keyspace = store.keyspace
        self.prefix = store.keyspace.prefix
        self.timers_key = store.keyspace.timers
        self.keys = RelayKeys(store.keyspace)
        self.clock = clock
        self.poll_interval_s = poll_interval_s
        self.guard = guard or FenceGuard()  # the lease's, for the carried ack a read takes along
        self.next_timer_at: float | None = None  # epoch s: from the last timer read or probe
        # Lanes whose last run read, attempted and held nothing: the next pass probes them first.
        self.quiet: set[Kind] = set()
        self._probed_all_s = float("-inf")  # when every quiet lane was last probed (monotonic s)

    def quiet_lanes(
        self, notified: frozenset[Kind] | None, now_s: float, parked: AbstractSet[Kind]
    ) -> tuple[set[Kind], set[Kind]]:
        """The quiet lanes (not parked) to leave alone this pass, and those to probe.

        Without ``notified`` every quiet lane is probed. With it, a quiet lane nobody wrote to
        has nothing new (its hash or zset only changes by a write, and every write is noticed),
        unless its next timer is due; once per ``poll_interval_s`` they are probed all the same.
        """
        quiet = self.quiet - parked  # a parked lane is neither probed nor read
        if notified is None or now_s - self._probed_all_s >= self.poll_interval_s:
            self._probed_all_s = now_s
            return set(), quiet - (notified or frozenset())
        timer_due = self.next_timer_at is not None and self.next_timer_at <= self.clock.now()
        return quiet - notified - ({"timer"} if timer_due else set()), set()

    def note_run(self, kind: Kind, *, quiet: bool) -> None:
        """Whether a lane's run read, attempted and held nothing: the next pass probes it first."""
        if quiet:
            self.quiet.add(kind)
        else:
            self.quiet.discard(kind)

    async def probe(self, quiet: set[Kind]) -> set[Kind]:
        """Which of the ``quiet`` lanes have nothing to read (``engine.probe``)."""
        now = self.clock.now()
        idle, first_timer_at = await probe_quiet(self.client, self.keyspace, quiet, now=now)
        if "timer" in quiet:
            self.next_timer_at = first_timer_at
        return idle

    async def read(self, lane: Lane, limit: int, blocked: set[str], *, then: Sequence[Command] = ()) -> Read:
        """Read and build up to ``limit`` new entries: the fast ones, the malformed ones, the count.

        The window read ahead during the last delivery, if any, is this read. Else the read goes
        to Redis, and a hash lane's carried ack (``Lane.carry``) is deleted first in its
        round-trip, fenced. Entries with an attempt history or a blocked key join ``lane.held``
        (the waiting line). ``then``: commands a hash lane's read runs after it in the same
        round-trip (their replies: the reader's ``then_replies``; a window read ahead went
        without them).
        """
        acked: list[str] = []
        fetched = lane.take_read_ahead()
        if fetched is None:
            acked = lane.take_carried()
            if not acked:
                fetched = await self._fetch(lane, limit, then=then)
            else:
                with self.guard.writing(lane.kind, len(acked)):
                    fetched = await self._fetch(lane, limit, acked, then)
        fresh, malformed, count, now = fetched
        records: dict[str, AttemptRecord] = {}
        if lane.attempts_maybe and fresh:
            records = await load_attempts(self.client, self.keys.attempts(lane.kind), fresh.refs)
        if not records and not blocked:
            return Read(fresh, malformed, count, len(acked))  # the common case: everything goes on
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
        return Read(FreshBatch.of(fast), malformed, count, len(acked))

    async def read_ahead(self, lane: Lane, limit: int, *, in_flight: FreshBatch) -> None:
        """Read and build the next window while ``in_flight`` is delivered; the next ``read`` takes it."""
        raws, read_at = await self._read_raw(lane, limit, in_flight=in_flight)
        lane.read_ahead = await self._build_yielding(lane, raws, read_at)

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
        if lane.reader is not None:
            reading_s, reconcile = self.clock.monotonic(), not in_flight
            fence = self.guard.fence if ack else None
            return await lane.reader.read_new(
                limit, now=reading_s, reconcile=reconcile, ack=ack, fence=fence, then=then
            ), now
        flying = [raw for raw in in_flight.raws if isinstance(raw, RawTimer)] if in_flight else []
        return await self._read_timers(lane, now, limit, flying), now

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

    async def _read_timers(
        self, lane: Lane, now: float, limit: int, in_flight: Sequence[RawTimer]
    ) -> list[RawTimer]:
        """Due timers neither held nor in flight, in fire_at order (``engine.timer_reads``).

        The same round-trip brings the next timer's score, so the loop sleeps only until that
        timer is due (``next_retry_in_s``).
        """
        held = [h.raw for h in lane.held.values() if isinstance(h.raw, RawTimer)]
        raws, self.next_timer_at = await read_due_timers(
            self.client, self.timers_key, now=now, limit=limit, held=held, in_flight=in_flight
        )
        return raws


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
