"""Attempt counts of live entries, kept in ``P:relay:attempts:{kind}`` so restarts keep them.

Only failed attempts are written (a first-time delivery costs no write); the record is removed
when the entry is acked or dead-lettered. A record is ``{"n", "f", "l"}`` (attempts, first and last
attempt) and, since the retrying view (``relayd status --retrying``), ``"e"`` (the last error, cut
to ``MAX_ERROR`` characters), ``"x"`` (the next attempt, epoch seconds) and ``"k"`` (the ordering
key); a record without them still counts its attempts.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Final

import orjson

from relayd.observability.logs import truncate
from relayd.state import RedisClient, scripts
from relayd.state.fencing import refused_as_fenced
from store import Fence
from store.fence import fenced_call

#: Most characters of the last error kept in a record (head and tail kept around a cut).
MAX_ERROR: Final = 500
#: Room left in ``MAX_ERROR`` for ``relayd.observability.logs.truncate``'s ``…[N chars cut]…`` mark.
CUT_MARK: Final = 24


@dataclass(frozen=True, slots=True)
class AttemptRecord:
    """Failed attempts so far, when the first and last happened and when the next may go (epoch
    seconds), the last error and the entry's ordering key."""

    attempts: int
    first_attempt_at: float
    last_attempt_at: float
    last_error: str = ""
    next_attempt_at: float | None = None
    key: str | None = None


def encode_record(record: AttemptRecord) -> bytes:
    doc: dict[str, object] = {"n": record.attempts, "f": record.first_attempt_at, "l": record.last_attempt_at}
    if record.last_error:
        doc["e"] = truncate(record.last_error, MAX_ERROR - CUT_MARK)
    if record.next_attempt_at is not None:
        doc["x"] = record.next_attempt_at
    if record.key is not None:
        doc["k"] = record.key
    return orjson.dumps(doc)


def decode_record(raw: bytes | str | None) -> AttemptRecord | None:
    """Decode a stored record; an unreadable one counts as none (it only delays dead-lettering)."""
    if raw is None:
        return None
    try:
        data = orjson.loads(raw)
        next_at, key = data.get("x"), data.get("k")
        return AttemptRecord(
            int(data["n"]),
            float(data["f"]),
            float(data["l"]),
            str(data.get("e") or ""),
            None if next_at is None else float(next_at),
            None if key is None else str(key),
        )
    except (orjson.JSONDecodeError, KeyError, TypeError, ValueError):
        return None


async def load_attempts(client: RedisClient, key: str, refs: Sequence[str]) -> dict[str, AttemptRecord]:
    """Return the stored records of ``refs`` (one HMGET); refs without a record are absent."""
    if not refs:
        return {}
    values = await client.hmget(key, list(refs))
    found: dict[str, AttemptRecord] = {}
    for ref, raw in zip(refs, values, strict=True):
        record = decode_record(raw)
        if record is not None:
            found[ref] = record
    return found


async def save_attempts(
    client: RedisClient, key: str, records: Mapping[str, AttemptRecord], *, fence: Fence | None = None
) -> None:
    """Write ``records`` in one HSET; with ``fence``, in one script call that writes nothing
    unless the lease still holds the fence's token (raises ``store.StoreFenced``)."""
    if not records:
        return
    if fence is None:
        await client.hset(key, mapping={ref: encode_record(r) for ref, r in records.items()})
        return
    pairs: list[bytes | str] = []
    for ref, record in records.items():
        pairs += [ref, encode_record(record)]
    keys, args = fenced_call([key], pairs, fence)
    with refused_as_fenced(fence):
        await client.eval(scripts.SAVE_ATTEMPTS, len(keys), *keys, *args)


async def forget_attempts(client: RedisClient, key: str, refs: Iterable[str]) -> None:
    """Delete the records of ``refs`` in one HDEL."""
    refs = list(refs)
    if refs:
        await client.hdel(key, *refs)
