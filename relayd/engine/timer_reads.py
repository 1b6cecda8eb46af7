"""Read due timers from the zset in fire_at order, also while the last window is still in flight.

A plain read takes the first ``limit`` due timers that are not held in memory (a retry backoff)
and, in the same round-trip, the score of the first timer not yet due. A *prefetch* runs while
the sink delivers the last window (the in-flight timers are still in the zset, their acks come
later), so it must not return them again; it reads by score instead of by position:

- ``[last, now]``: from the in-flight window's last fire_at on (the in-flight timers sharing
  that score are read again and dropped by member), which continues where the window ended;
- ``[-inf, first)``: everything due before the in-flight window's first fire_at, which is
  where the held timers sit and where the engine puts a timer it arms late with an old
  fire_at. Reading it on every prefetch means such a timer waits at most one pass, and a long
  drain that prefetches pass after pass can never starve it (a read at an offset of "the
  in-flight count" would skip it on every prefetch).

What neither range covers is ``(first, last)``: a timer the engine adds inside the in-flight
window's span while it is read. It is skipped by this prefetch only: the next read's in-flight
window starts at or after ``last``, so its ``[-inf, first)`` range covers it. A cancel shifts
nothing (ranges are by score), and nothing leaves the zset except by an ack, so a timer may be
read late but is never lost. No timer is returned before it is due (``max`` is ``now``).

``plan_timer_read`` and ``merge_timer_rows`` are pure; ``read_due_timers`` runs the plan as one
pipeline. Replies are taken raw (no redis-py score callback): RESP3 gives ``[member, float]``
pairs (hiredis parses the double), RESP2 a flat ``member, score`` list.
"""

from __future__ import annotations

from collections.abc import Collection, Sequence
from dataclasses import dataclass
from typing import Any

from relayd.state import RedisClient
from store import Fence, RawTimer
from store.fence import check_guard, guard_read


@dataclass(frozen=True, slots=True)
class ScoreRange:
    """One ``ZRANGEBYSCORE key min max LIMIT 0 count WITHSCORES``."""

    min: str
    max: str
    count: int


@dataclass(frozen=True, slots=True)
class TimerRead:
    """The ranges to read, in fire_at order, the members to drop and how many to keep."""

    ranges: tuple[ScoreRange, ...]
    skip: frozenset[bytes]
    limit: int


def plan_timer_read(
    *, now: float, limit: int, held: Collection[RawTimer], in_flight: Sequence[RawTimer]
) -> TimerRead:
    """Plan a read of up to ``limit`` due timers, none of them ``held`` or ``in_flight``.

    Each range reads ``limit`` plus the skipped timers it may meet (by their scores when read),
    so that after dropping them ``limit`` are usually left; a skipped timer the engine re-armed
    meanwhile may leave a read short, which only means the next read comes sooner.
    """
    skip = frozenset(t.member for t in held) | frozenset(t.member for t in in_flight)
    upto = repr(float(now))
    if not in_flight:
        return TimerRead((ScoreRange("-inf", upto, limit + len(held)),), skip, limit)
    first = min(t.fire_at for t in in_flight)
    last = max(t.fire_at for t in in_flight)
    below = sum(1 for t in held if t.fire_at < first)
    from_last = sum(1 for t in in_flight if t.fire_at >= last) + sum(1 for t in held if t.fire_at >= last)
    return TimerRead(
        (
            ScoreRange("-inf", f"({float(first)!r}", limit + below),
            ScoreRange(repr(float(last)), upto, limit + from_last),
        ),
        skip,
        limit,
    )


def timer_rows(reply: Sequence[Any]) -> list[RawTimer]:
    """A raw ``ZRANGEBYSCORE … WITHSCORES`` reply as timers (RESP3 pairs or a RESP2 flat list)."""
    if not reply:
        return []
    first = reply[0]
    if type(first) is list and type(first[0]) is bytes and type(first[1]) is float:
        # RESP3 through hiredis, the common case: every pair is [bytes, float] like the first
        # (one client decodes every reply alike), so each becomes a RawTimer as it is.
        return list(map(RawTimer._make, reply))
    if isinstance(first, list | tuple):
        pairs: Any = reply
    else:
        pairs = zip(reply[0::2], reply[1::2], strict=True)
    return [
        RawTimer(
            m if type(m) is bytes else m.encode() if isinstance(m, str) else bytes(m),
            s if type(s) is float else float(s),
        )
        for m, s in pairs
    ]


def merge_timer_rows(read: TimerRead, rows: Sequence[Sequence[RawTimer]]) -> list[RawTimer]:
    """The first ``read.limit`` timers of the ranges' rows, in order, skipped and repeated ones dropped.

    A member can come back from two ranges when the engine re-armed it between the two reads
    (one pipeline, not a transaction): it is kept once, where it came first.
    """
    if len(rows) == 1 and not read.skip:
        return list(rows[0][: read.limit])
    out: list[RawTimer] = []
    seen = set(read.skip)
    for part in rows:
        for timer in part:
            if timer.member in seen:
                continue
            seen.add(timer.member)
            out.append(timer)
            if len(out) >= read.limit:
                return out
    return out


async def read_due_timers(
    client: RedisClient,
    key: str,
    *,
    now: float,
    limit: int,
    held: Collection[RawTimer] = (),
    in_flight: Sequence[RawTimer] = (),
    fence: Fence | None = None,
) -> tuple[list[RawTimer], float | None]:
    """Due timers per ``plan_timer_read``, and the fire_at of the first timer not yet due.

    One round-trip: the planned ranges and ``ZRANGEBYSCORE (now +inf LIMIT 0 1``; with
    ``fence``, a ``GET`` of its key first, and ``StoreFenced`` (the due timers found as
    ``withheld``) when it holds another token or none, as a fenced backlog read.
    """
    read = plan_timer_read(now=now, limit=limit, held=held, in_flight=in_flight)
    pipe = client.pipeline(transaction=False)
    if fence is not None:
        pipe.execute_command(*guard_read(fence))
    for part in read.ranges:
        pipe.execute_command("ZRANGEBYSCORE", key, part.min, part.max, "LIMIT", 0, part.count, "WITHSCORES")
    pipe.execute_command("ZRANGEBYSCORE", key, f"({float(now)!r}", "+inf", "LIMIT", 0, 1, "WITHSCORES")
    replies = await pipe.execute()
    holder = replies.pop(0) if fence is not None else None
    after = timer_rows(replies[-1])
    due = merge_timer_rows(read, [timer_rows(reply) for reply in replies[:-1]])
    if fence is not None:
        check_guard(fence, holder, found=due)
    return due, after[0].fire_at if after else None
