"""Refresh one prefix's backlog, dead-letter and oldest-due-age gauges on a time budget.

A refresh is nine O(1)/O(log n) commands in one pipelined round-trip (HLEN of the outbox and
the spawns, ZCOUNT of the due timers, the first timer with its score, HLEN of each dead-letter
hash, and an HGET of the outbox and spawn entry at each reader's low-water mark).

The oldest due age of the outbox and the spawns is the oldest of the entries held in memory
(when each was first seen) and of the entry at the reader's low-water mark (its commit time,
``engine.commit_delay``). The second is what keeps the age rising while a lane is not read at
all (its sink's breaker open, so nothing is held): the entry there is the oldest the reader has
not passed. An entry without a commit time (written by harel) counts only once it is held.

Paying a refresh on every pass made an idle prefix cost seven commands per poll, so
``refresh_due`` (pure; time is a parameter) allows one at most every ``BUSY_REFRESH_S`` while
passes do work, one right after the first quiet pass that follows work (the gauges then show
the drained state at once), and otherwise one every ``IDLE_REFRESH_S``. While the sweeper's idle
probe finds the prefix empty (nothing to read, no timer due, nothing held) the backlog and age
gauges are known to be 0 for free, and a refresh reads only the three dead-letter counts.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any, Final

from relayd.engine.commit_delay import commit_time
from relayd.engine.plan import Held
from relayd.envelope import Kind
from relayd.observability.metrics import RelayMetrics
from relayd.state import RedisClient
from relayd.state.keys import RelayKeys
from store import Keyspace, RawTimer

#: Seconds between refreshes while passes deliver (a scrape every few seconds sees fresh values).
BUSY_REFRESH_S: Final = 1.0
#: Seconds between refreshes while nothing happens (the idle budget: docs/internals.md#delivery-semantics). An
#: idle prefix's only moving gauges are the dead-letter counts, which change only through
#: ``relayd dlq`` then; 15 s is one common Prometheus scrape interval.
IDLE_REFRESH_S: Final = 15.0


def refresh_due(*, last_s: float | None, now_s: float, worked: bool, dirty: bool) -> bool:
    """Whether to refresh now (monotonic seconds).

    Args:
        last_s: when the gauges were last refreshed (None: never).
        now_s: now.
        worked: this pass read or attempted something.
        dirty: some pass did work during or since the last refresh.
    """
    if last_s is None:
        return True
    age_s = now_s - last_s
    if worked:
        return age_s >= BUSY_REFRESH_S
    return dirty or age_s >= IDLE_REFRESH_S


def _or_zero(reply: object) -> Any:
    """A pipelined reply, or 0 in place of an error (``raise_on_error=False`` returns them)."""
    return 0 if isinstance(reply, Exception) else reply


class PrefixGauges:
    """The refresh state and the pipelined refresh of one prefix's gauges."""

    def __init__(self, client: RedisClient, keyspace: Keyspace, metrics: RelayMetrics) -> None:
        self.client = client
        self.keyspace = keyspace
        self.keys = RelayKeys(keyspace)
        self.metrics = metrics
        self.prefix = keyspace.prefix
        self.last_s: float | None = None
        self.dirty = False

    def note_empty(self) -> None:
        """The idle probe found nothing to read, nothing due and nothing held: all backlog is 0."""
        for kind in ("outbox", "spawn", "timer"):
            self.metrics.backlog.labels(self.prefix, kind).set(0)
            self.metrics.oldest_due_age.labels(self.prefix, kind).set(0.0)

    async def maybe_refresh(
        self,
        *,
        now: float,
        now_s: float,
        worked: bool,
        held: Mapping[Kind, Iterable[Held]],
        empty: bool,
        marks: Mapping[Kind, int],
    ) -> bool:
        """Refresh when ``refresh_due`` says so; ``now`` is epoch seconds, ``now_s`` monotonic.

        ``empty``: this pass's probe found nothing (``note_empty``): only the dead letters are read.
        ``marks``: each hash lane's low-water mark (the seq of the oldest entry not passed).
        """
        self.dirty |= worked
        if not refresh_due(last_s=self.last_s, now_s=now_s, worked=worked, dirty=self.dirty):
            return False
        if empty:
            await self.refresh_dead_letters()
        else:
            await self.refresh(now, held, marks)
        # A refresh during work leaves the state dirty: the first quiet pass shows the end state.
        self.last_s, self.dirty = now_s, worked
        return True

    async def refresh_dead_letters(self) -> None:
        """Read the three dead-letter counts in one round-trip."""
        pipe = self.client.pipeline(transaction=False)
        for kind in ("outbox", "spawn", "timer"):
            pipe.hlen(self.keys.dead(kind))
        for kind, n in zip(("outbox", "spawn", "timer"), await pipe.execute(), strict=True):
            self.metrics.dead_letters.labels(self.prefix, kind).set(n)

    async def refresh(
        self, now: float, held: Mapping[Kind, Iterable[Held]], marks: Mapping[Kind, int]
    ) -> None:
        """Read every gauge in one round-trip; the oldest due age also counts entries held in memory."""
        ks, p, m = self.keyspace, self.prefix, self.metrics
        pipe = self.client.pipeline(transaction=False)
        pipe.hlen(ks.outbox)
        pipe.hlen(ks.spawns)
        pipe.zcount(ks.timers, "-inf", now)
        pipe.zrange(ks.timers, 0, 0, withscores=True)
        for kind in ("outbox", "spawn", "timer"):
            pipe.hlen(self.keys.dead(kind))
        pipe.hget(ks.outbox, str(marks.get("outbox", 0)))
        pipe.hget(ks.spawns, str(marks.get("spawn", 0)))
        # A key of the wrong type answers WRONGTYPE (its lane is parked: ``engine.key_types``);
        # its gauge reads 0 rather than failing the refresh of the others.
        replies = [_or_zero(reply) for reply in await pipe.execute(raise_on_error=False)]
        outbox_n, spawns_n, due_n, first, *dead, outbox_at_mark, spawn_at_mark = replies
        m.backlog.labels(p, "outbox").set(outbox_n)
        m.backlog.labels(p, "spawn").set(spawns_n)
        m.backlog.labels(p, "timer").set(due_n)
        for kind, n in zip(("outbox", "spawn", "timer"), dead, strict=True):
            m.dead_letters.labels(p, kind).set(n)
        at_mark = {"outbox": outbox_at_mark, "spawn": spawn_at_mark}
        for kind, entries in held.items():
            waiting = list(entries)
            seen = [h.first_seen_at for h in waiting]
            value = at_mark.get(kind)
            if isinstance(value, bytes) and (committed := commit_time(value)) is not None:
                seen.append(committed)
            if kind == "timer":
                seen += [h.raw.fire_at for h in waiting if isinstance(h.raw, RawTimer)]
                if first and float(first[0][1]) <= now:
                    seen.append(float(first[0][1]))
            m.oldest_due_age.labels(p, kind).set(max(0.0, now - min(seen)) if seen else 0.0)
