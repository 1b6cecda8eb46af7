"""The console's Redis reads, each bounded: a page of dead letters, one letter, a group sample, timers.

Nothing here writes. Every read costs about one page (``page_size`` entries, or a fixed scan
budget) however many entries are parked or armed: HSCAN and ZSCAN cursors, HMGET for named ids,
ZRANGE with a limit; never HGETALL or a full ZRANGE.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Final

from relayd.console.filters import DeadLetterFilter
from relayd.console.groups import Group, group_dead_letters
from relayd.console.paging import advance, read_token
from relayd.envelope import Kind
from relayd.state import RedisClient
from relayd.state.deadletters import DeadLetter, get_dead_letters, scan_dead_letters
from relayd.state.keys import RelayKeys
from store import Keyspace, glob_escape, parse_timer_member

#: Most HSCAN / ZSCAN steps one page may take while a filter skips entries (bounds a page's cost).
SCAN_STEPS_PER_PAGE: Final = 20
#: Dead letters of each kind read to build the groups view (exact below it, a sample above).
GROUP_SAMPLE: Final = 5000


@dataclass(frozen=True, slots=True)
class DeadLetterPage:
    """One page: its letters, the token of the next page (None at the end), what it scanned."""

    letters: list[DeadLetter]
    next_token: str | None
    scanned: int
    totals: dict[Kind, int]


async def dead_letter_totals(client: RedisClient, keyspace: Keyspace) -> dict[Kind, int]:
    keys = RelayKeys(keyspace)
    pipe = client.pipeline(transaction=False)
    kinds: tuple[Kind, ...] = ("outbox", "spawn", "timer")
    for kind in kinds:
        pipe.hlen(keys.dead(kind))
    return dict(zip(kinds, (int(n) for n in await pipe.execute()), strict=True))


async def read_dead_letter_page(
    client: RedisClient,
    keyspace: Keyspace,
    wanted: DeadLetterFilter,
    token: str | None,
    *,
    page_size: int,
) -> DeadLetterPage:
    """Read one page of the dead letters ``wanted`` names, resuming at ``token``.

    A page stops once it holds ``page_size`` letters or after ``SCAN_STEPS_PER_PAGE`` scan steps
    (a narrow filter over many letters then gives a short page and a next token).
    """
    totals = await dead_letter_totals(client, keyspace)
    if wanted.id is not None and wanted.exact_id:
        found = await get_dead_letters(client, keyspace, [wanted.id], kind=wanted.kind)
        return DeadLetterPage([d for d in found if wanted.matches(d)], None, len(found), totals)
    kinds = wanted.kinds()
    position = read_token(token, kinds)
    letters: list[DeadLetter] = []
    scanned = 0
    for _ in range(SCAN_STEPS_PER_PAGE):
        kind = kinds[position.kind_index]
        next_cursor, batch = await scan_dead_letters(client, keyspace, kind, position.cursor, page_size)
        scanned += len(batch)
        letters += [letter for letter in batch if wanted.matches(letter)]
        following = advance(position, next_cursor, kinds)
        if following is None:
            return DeadLetterPage(letters, None, scanned, totals)
        position = following
        if len(letters) >= page_size:
            break
    return DeadLetterPage(letters, position.token(kinds), scanned, totals)


async def read_dead_letter(
    client: RedisClient, keyspace: Keyspace, id_: str, kind: Kind | None
) -> DeadLetter | None:
    found = await get_dead_letters(client, keyspace, [id_], kind=kind)
    return found[0] if found else None


@dataclass(frozen=True, slots=True)
class GroupSample:
    """Groups over the first ``scanned`` of ``total`` dead letters (exact when they are equal)."""

    groups: list[Group]
    scanned: int
    total: int

    @property
    def exact(self) -> bool:
        return self.scanned >= self.total


async def sample_groups(
    client: RedisClient, keyspace: Keyspace, wanted: DeadLetterFilter, *, limit: int = GROUP_SAMPLE
) -> GroupSample:
    """Group the dead letters ``wanted`` names, reading at most ``limit`` of each kind."""
    totals = await dead_letter_totals(client, keyspace)
    letters: list[DeadLetter] = []
    scanned = 0
    for kind in wanted.kinds():
        cursor, read = 0, 0
        while read < limit:
            cursor, batch = await scan_dead_letters(client, keyspace, kind, cursor, min(500, limit))
            read += len(batch)
            letters += [letter for letter in batch if wanted.matches(letter)]
            if cursor == 0:
                break
        scanned += read
    total = sum(totals[k] for k in wanted.kinds())
    return GroupSample(group_dead_letters(letters), min(scanned, total), total)


@dataclass(frozen=True, slots=True)
class TimerRow:
    """One armed timer; ``lag_s`` is how long it is overdue (None while not yet due)."""

    execution_id: str
    path: str
    fire_at: float
    lag_s: float | None


@dataclass(frozen=True, slots=True)
class TimerView:
    rows: list[TimerRow]
    total: int
    due: int
    next_cursor: int | None  # for a search: where the next ZSCAN step resumes (None: done)


def _timer_row(member: bytes | str, score: float, now: float) -> TimerRow:
    try:
        execution_id, path = parse_timer_member(member)
    except Exception:  # a malformed member is shown as it is; the relay dead-letters it
        text = member.decode("utf-8", "backslashreplace") if isinstance(member, bytes) else member
        execution_id, path = text, "(malformed member)"
    return TimerRow(execution_id, path, float(score), now - score if score <= now else None)


def _pairs(found: Any) -> list[tuple[bytes | str, float]]:
    """(member, score) pairs from a WITHSCORES reply (redis-py types it loosely)."""
    return [(member, float(score)) for member, score in found]


async def read_timers(
    client: RedisClient,
    keyspace: Keyspace,
    *,
    now: float,
    limit: int,
    execution: str | None = None,
    cursor: int = 0,
) -> TimerView:
    """The next ``limit`` timers by fire_at, or (``execution`` given) that execution's timers.

    A search walks ZSCAN with a MATCH on ``{execution}\\x00*`` for at most
    ``SCAN_STEPS_PER_PAGE`` steps and hands back the cursor to continue from.
    """
    pipe = client.pipeline(transaction=False)
    pipe.zcard(keyspace.timers)
    pipe.zcount(keyspace.timers, "-inf", now)
    total, due = (int(n) for n in await pipe.execute())
    if execution is None:
        first = await client.zrange(keyspace.timers, 0, limit - 1, withscores=True)
        return TimerView([_timer_row(m, s, now) for m, s in _pairs(first)], total, due, None)
    rows: list[TimerRow] = []
    pattern = glob_escape(execution) + "\x00*"
    next_cursor: int | None = cursor
    for _ in range(SCAN_STEPS_PER_PAGE):
        raw_cursor, found = await client.zscan(
            keyspace.timers, cursor=next_cursor or 0, match=pattern, count=500
        )
        rows += [_timer_row(m, s, now) for m, s in _pairs(found)]
        next_cursor = int(raw_cursor) or None
        if next_cursor is None or len(rows) >= limit:
            break
    return TimerView(sorted(rows, key=lambda r: r.fire_at), total, due, next_cursor)
