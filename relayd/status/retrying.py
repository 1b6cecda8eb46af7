"""What is being retried now, read from the attempt records (``P:relay:attempts:{kind}``).

Each entry held in backoff has a record, written by the relay after each failed attempt and
removed when the entry is acked or dead-lettered (``relayd.state.attempts``): its attempts,
first and last attempt, last error, next attempt and ordering key. ``read_retrying`` reads one
bounded page of them with ``HSCAN`` steps, never the whole hash, and hands back a token that
resumes where it stopped; ``relayd status --retrying`` and the console's Retrying page show it.
Records written before the error and next attempt were kept show ``-`` for them.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any, Final

from relayd.engine.build import dead_letter_id
from relayd.envelope import KINDS, Kind
from relayd.state import RedisClient
from relayd.state.attempts import decode_record
from relayd.state.keys import RelayKeys
from store import Keyspace

#: Entries of one page unless asked otherwise.
PAGE_SIZE: Final = 50
#: Most HSCAN steps one page takes (a step returns about ``count`` records).
MAX_STEPS: Final = 20


class PageTokenInvalid(ValueError):
    """A page token that this module did not hand out."""


@dataclass(frozen=True, slots=True)
class RetryingEntry:
    """One entry held in backoff (times are epoch seconds)."""

    prefix: str
    kind: Kind
    id: str
    key: str | None
    attempts: int
    first_attempt_at: float
    last_attempt_at: float
    next_attempt_at: float | None
    last_error: str

    def to_json(self) -> dict[str, Any]:
        return asdict(self)


@dataclass(frozen=True, slots=True)
class RetryingPage:
    entries: list[RetryingEntry]
    #: Resumes the read after this page; None when every record was read.
    next_token: str | None


def _parse_token(token: str | None) -> tuple[int, int]:
    """(index of the kind in ``KINDS``, HSCAN cursor) from ``"kind:cursor"``."""
    if not token:
        return 0, 0
    kind, _, cursor = token.partition(":")
    if kind not in KINDS or not cursor.isdigit():
        raise PageTokenInvalid(f"invalid page token {token!r}")
    return KINDS.index(kind), int(cursor)


async def read_retrying(
    client: RedisClient, keyspace: Keyspace, token: str | None = None, *, limit: int = PAGE_SIZE
) -> RetryingPage:
    """About ``limit`` entries in backoff, from ``token`` on. A step may give more: Redis returns a
    hash stored compact (few, short records) whole, at most ``hash-max-listpack-entries``."""
    keys = RelayKeys(keyspace)
    index, cursor = _parse_token(token)
    entries: list[RetryingEntry] = []
    steps = 0
    while index < len(KINDS) and len(entries) < limit and steps < MAX_STEPS:
        kind: Kind = KINDS[index]
        cursor, found = await client.hscan(keys.attempts(kind), cursor, count=limit)
        steps += 1
        assert isinstance(found, dict)  # HSCAN without NOVALUES: a mapping of field -> record
        for field, raw in found.items():
            record = decode_record(raw)
            if record is None:
                continue
            ref = field.decode("utf-8", "surrogateescape") if isinstance(field, bytes) else str(field)
            entries.append(
                RetryingEntry(
                    prefix=keyspace.prefix,
                    kind=kind,
                    id=dead_letter_id(keyspace.prefix, kind, ref),
                    key=record.key,
                    attempts=record.attempts,
                    first_attempt_at=record.first_attempt_at,
                    last_attempt_at=record.last_attempt_at,
                    next_attempt_at=record.next_attempt_at,
                    last_error=record.last_error,
                )
            )
        if cursor == 0:
            index += 1
    more = index < len(KINDS)
    return RetryingPage(entries, f"{KINDS[index]}:{cursor}" if more else None)
