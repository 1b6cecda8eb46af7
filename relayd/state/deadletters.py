"""Dead letters under ``P:relay:dead:{kind}``: the atomic move in, and list / replay / purge.

A dead letter is a JSON object: ``id``, ``kind``, ``reason_code`` (a small fixed set, so it can
label a metric), ``reason`` (free text), ``attempts``, ``first_attempt_at``, ``last_attempt_at``,
``dead_at``, the envelope when the entry could be decoded, and what it takes to put the entry
back exactly: ``field``/``seq`` and the raw ``value`` for outbox and spawns, ``member`` and
``fire_at`` (the original score) for timers. Bytes that are not UTF-8 are kept as base64 in
``field_b64`` / ``value_b64`` / ``member_b64``.

A timer's letter also records ``execution_version``: the ``version`` of its execution
(``P:exe:{id}``) read before the timer left the zset, ``"none"`` when there was no execution,
``"unreadable"`` when its JSON had no version. The engine commits an execution and its timers in
one step, so a replay puts a timer back only while that version is unchanged: a timer the engine
re-armed or cancelled since is stale and stays parked. Read before the move, the version is never
newer than the one the timer left with; a commit in between only keeps a timer parked.
"""

from __future__ import annotations

import base64
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Final, Literal

import orjson

from relayd.envelope import KINDS, Kind
from relayd.state import RedisClient, scripts
from relayd.state.fencing import refused_as_fenced
from relayd.state.keys import RelayKeys
from store import MALFORMED_REASONS, Fence, Keyspace, MalformedEntry, parse_timer_member
from store.fence import fenced_call

#: Every dead-letter reason code (bounded metric label values).
REASON_CODES: Final = frozenset({"permanent", "max_attempts"} | MALFORMED_REASONS)

#: Most entries per script call, so one call never blocks Redis for long.
_CHUNK: Final = 500


#: A timer's execution version as its dead letter records it (see the module docstring).
ExecutionVersion = int | Literal["none", "unreadable"]


@dataclass(frozen=True, slots=True)
class DeadMove:
    """One live entry to dead-letter: where it lives and the document to park."""

    live_ref: bytes | str  # hash field, or zset member as stored
    score: float | None  # the delivered fire_at (timers), None for hashes
    id: str
    document: bytes
    attempts_field: bytes | str


@dataclass(frozen=True, slots=True)
class DeadLetter:
    """A parked entry as ``relayd dlq list`` shows it."""

    id: str
    kind: Kind
    reason_code: str
    reason: str
    attempts: int
    first_attempt_at: float | None
    last_attempt_at: float | None
    dead_at: float
    field: str | None
    seq: int | None
    member: str | None
    fire_at: float | None
    envelope: dict[str, object] | None
    document: dict[str, object]


def _bytes_fields(name: str, data: bytes | str) -> dict[str, object]:
    """``{name: text}``, or ``{name_b64: base64}`` when ``data`` is not UTF-8 (a str decoded with
    ``surrogateescape`` holds its original bytes)."""
    raw = data.encode("utf-8", "surrogateescape") if isinstance(data, str) else data
    try:
        return {name: raw.decode("utf-8")}
    except UnicodeDecodeError:
        return {f"{name}_b64": base64.b64encode(raw).decode("ascii")}


def _bytes_from(document: dict[str, object], name: str) -> bytes:
    text = document.get(name)
    if isinstance(text, str):
        return text.encode("utf-8")
    return base64.b64decode(str(document[f"{name}_b64"]))


def encode_dead_letter(
    *,
    id_: str,
    kind: Kind,
    reason_code: str,
    reason: str,
    attempts: int,
    first_attempt_at: float | None,
    last_attempt_at: float | None,
    dead_at: float,
    envelope: dict[str, object] | None,
    field: str | None = None,
    seq: int | None = None,
    value: bytes | None = None,
    member: bytes | None = None,
    fire_at: float | None = None,
    execution_version: ExecutionVersion | None = None,
) -> bytes:
    """Build the stored dead-letter JSON (pure); ``execution_version`` None records none."""
    if reason_code not in REASON_CODES:
        raise ValueError(f"unknown dead-letter reason code {reason_code!r}")
    doc: dict[str, object] = {
        "id": id_,
        "kind": kind,
        "reason_code": reason_code,
        "reason": reason,
        "attempts": attempts,
        "first_attempt_at": first_attempt_at,
        "last_attempt_at": last_attempt_at,
        "dead_at": dead_at,
        "envelope": envelope,
    }
    if kind == "timer":
        if member is None or fire_at is None:
            raise ValueError("a timer dead letter needs member and fire_at")
        doc.update(_bytes_fields("member", member), fire_at=fire_at)
        if execution_version is not None:
            doc["execution_version"] = execution_version
    else:
        if field is None or value is None:
            raise ValueError("an outbox or spawn dead letter needs field and value")
        doc.update(_bytes_fields("value", value), **_bytes_fields("field", field), seq=seq)
    return orjson.dumps(doc)


def decode_dead_letter(raw: bytes | str, dead_id: bytes | str | None = None) -> DeadLetter:
    """Parse a stored dead letter; ``dead_id``, its field in the dead-letter hash, is its id (the
    entry's delivery id, with ``#2``, ``#3``, ... when an earlier dead letter had that id)."""
    doc = orjson.loads(raw)
    member = doc.get("member")
    if member is None and "member_b64" in doc:
        member = _bytes_from(doc, "member").decode("utf-8", "backslashreplace")
    field = doc.get("field")
    if field is None and "field_b64" in doc:
        field = _bytes_from(doc, "field").decode("utf-8", "backslashreplace")
    return DeadLetter(
        id=doc["id"] if dead_id is None else _as_bytes(dead_id).decode("utf-8", "backslashreplace"),
        kind=doc["kind"],
        reason_code=doc["reason_code"],
        reason=doc["reason"],
        attempts=int(doc["attempts"]),
        first_attempt_at=doc.get("first_attempt_at"),
        last_attempt_at=doc.get("last_attempt_at"),
        dead_at=float(doc["dead_at"]),
        field=field,
        seq=doc.get("seq"),
        member=member,
        fire_at=doc.get("fire_at"),
        envelope=doc.get("envelope"),
        document=doc,
    )


async def move_to_dead_letters(
    client: RedisClient, keys: RelayKeys, kind: Kind, moves: Sequence[DeadMove], *, fence: Fence | None = None
) -> int:
    """Atomically remove each entry from its live structure and park it; returns how many moved.

    An entry already gone (acked elsewhere) or a timer re-armed since delivery is not parked.
    With ``fence``, each call moves nothing unless the lease still holds the fence's token
    (raises ``store.StoreFenced``).
    """
    mode = "zset" if kind == "timer" else "hash"
    moved = 0
    for start in range(0, len(moves), _CHUNK):
        groups: list[bytes | str] = [mode]
        for move in moves[start : start + _CHUNK]:
            score = "" if move.score is None else repr(float(move.score))
            groups += [move.live_ref, score, move.id, move.document, move.attempts_field]
        keys_, args = fenced_call([keys.live(kind), keys.dead(kind), keys.attempts(kind)], groups, fence)
        with refused_as_fenced(fence):
            moved += int(await client.eval(scripts.DEAD_LETTER, len(keys_), *keys_, *args))
    return moved


async def execution_versions(
    client: RedisClient, keyspace: Keyspace, members: Sequence[bytes | str]
) -> list[ExecutionVersion | None]:
    """The version of each timer's execution, to record in its dead letter: one MGET.

    None for a member that names no execution (malformed: nothing to compare at replay).
    """
    ids: list[str | None] = []
    for member in members:
        try:
            ids.append(parse_timer_member(member)[0])
        except MalformedEntry:
            ids.append(None)
    keys = [keyspace.exe(i) for i in ids if i is not None]
    found = iter(await client.mget(keys) if keys else ())
    return [None if i is None else _version_of(next(found)) for i in ids]


def _version_of(raw: bytes | str | None) -> ExecutionVersion:
    if raw is None:
        return "none"
    try:
        version = orjson.loads(raw).get("version")
    except (orjson.JSONDecodeError, AttributeError):
        return "unreadable"
    return version if type(version) is int else "unreadable"


def _kinds(kind: Kind | None) -> tuple[Kind, ...]:
    return KINDS if kind is None else (kind,)


def _as_bytes(data: bytes | str) -> bytes:
    # A client built with decode_responses=True hands back str; the scripts compare bytes.
    return data if isinstance(data, bytes) else data.encode("utf-8")


async def _read_all(client: RedisClient, key: str) -> dict[bytes, bytes]:
    found: dict[bytes, bytes] = {}
    # HSCAN, not HGETALL: a large dead-letter hash must not block Redis in one command.
    async for field, value in client.hscan_iter(key, count=500):
        found[_as_bytes(field)] = _as_bytes(value)
    return found


async def list_dead_letters(
    client: RedisClient, keyspace: Keyspace, kind: Kind | None = None
) -> list[DeadLetter]:
    """Return the parked entries of ``kind`` (all kinds when None), oldest first."""
    keys = RelayKeys(keyspace)
    letters: list[DeadLetter] = []
    for k in _kinds(kind):
        letters += [decode_dead_letter(raw, f) for f, raw in (await _read_all(client, keys.dead(k))).items()]
    return sorted(letters, key=lambda d: (d.dead_at, d.id))


async def scan_dead_letters(
    client: RedisClient, keyspace: Keyspace, kind: Kind, cursor: int, count: int
) -> tuple[int, list[DeadLetter]]:
    """One HSCAN step over ``kind``'s dead letters: (next cursor, the letters it returned).

    Costs about ``count`` entries however many are parked; cursor 0 starts, 0 back means done.
    """
    next_cursor, found = await client.hscan(RelayKeys(keyspace).dead(kind), cursor=cursor, count=count)
    pairs = found.items() if isinstance(found, dict) else zip(found[::2], found[1::2], strict=True)
    return int(next_cursor), [decode_dead_letter(raw, f) for f, raw in pairs]


async def get_dead_letters(
    client: RedisClient, keyspace: Keyspace, ids: Sequence[str], kind: Kind | None = None
) -> list[DeadLetter]:
    """The parked entries with these ``ids`` (HMGET per kind; ids not parked are left out)."""
    if not ids:
        return []
    keys = RelayKeys(keyspace)
    found: list[DeadLetter] = []
    for k in _kinds(kind):
        values = await client.hmget(keys.dead(k), list(ids))
        found += [decode_dead_letter(raw, id_) for id_, raw in zip(ids, values, strict=True) if raw]
    return found


async def _read_some(client: RedisClient, key: str, ids: set[bytes]) -> dict[bytes, bytes]:
    wanted = sorted(ids)
    values = await client.hmget(key, wanted)
    return {field: _as_bytes(raw) for field, raw in zip(wanted, values, strict=True) if raw is not None}


@dataclass(frozen=True, slots=True)
class Replayed:
    """What a replay did: how many went back, which named ids were parked here, and which
    dead letters stayed parked because their place was taken (named, never deleted)."""

    count: int
    parked: frozenset[str]
    kept: tuple[str, ...]


async def replay_dead_letters(
    client: RedisClient,
    keyspace: Keyspace,
    ids: Iterable[str] | None = None,
    kind: Kind | None = None,
) -> int:
    """Put dead letters (all, or those with ``ids``; of ``kind`` when given) back; how many.

    ``replay`` says which stayed parked too.
    """
    return (await replay(client, keyspace, ids, kind)).count


async def replay(
    client: RedisClient, keyspace: Keyspace, ids: Iterable[str] | None = None, kind: Kind | None = None
) -> Replayed:
    """Put dead letters (all, or those with ``ids``; of ``kind`` when given) back.

    Outbox and spawn entries go back under a new seq from the engine's counter (a new commit:
    read in order after what their target already got, and never in the place of an entry
    committed meanwhile at their old seq); timers with their original score; attempts reset.
    A live entry is never overwritten, and a dead letter is deleted only once its entry is
    back: one whose place is taken (a timer the engine re-armed, a new seq someone wrote above
    the counter) or a timer whose execution committed since it was parked (it may have been
    re-armed or cancelled) stays parked and is named in ``kept``. Named ids are read with HMGET, so
    replaying a few costs the same however many are parked.
    """
    keys = RelayKeys(keyspace)
    wanted = None if ids is None else {i.encode() for i in ids}
    replayed = 0
    seen: set[bytes] = set()
    kept: list[str] = []
    for k in _kinds(kind):
        if wanted is None:
            parked = await _read_all(client, keys.dead(k))
        elif wanted:
            parked = await _read_some(client, keys.dead(k), wanted)
        else:
            parked = {}
        seen.update(parked)
        groups: list[tuple[list[bytes | str], str | None]] = []
        for dead_id, raw in parked.items():
            doc = orjson.loads(raw)
            payload: bytes | str
            exe_key = None
            if k == "timer":
                ref, payload = _bytes_from(doc, "member"), repr(float(doc["fire_at"]))
                expected = "" if "execution_version" not in doc else str(doc["execution_version"])
                if expected:
                    exe_key = keyspace.exe(parse_timer_member(ref)[0])
            else:
                ref, payload, expected = _bytes_from(doc, "field"), _bytes_from(doc, "value"), ""
            attempts_field = doc["id"] if k == "timer" else ref
            groups.append(([dead_id, raw, ref, payload, attempts_field, expected], exe_key))
        counter = keyspace.outbox_seq if k == "outbox" else keyspace.spawns_seq
        for start in range(0, len(groups), _CHUNK):
            args: list[bytes | str] = ["zset" if k == "timer" else "hash"]
            keys_ = [keys.dead(k), keys.live(k), keys.attempts(k), counter]
            for group, exe_key in groups[start : start + _CHUNK]:
                args += group
                keys_ += [exe_key] if exe_key else []
            answer = await client.eval(scripts.REPLAY, len(keys_), *keys_, *args)
            replayed += int(answer[0])
            kept += [_as_bytes(i).decode("utf-8", "backslashreplace") for i in answer[1:]]
    named = frozenset(i.decode("utf-8", "backslashreplace") for i in seen)
    return Replayed(replayed, named, tuple(kept))


async def purge_dead_letters(client: RedisClient, keyspace: Keyspace, kind: Kind | None = None) -> int:
    """Delete the dead letters of ``kind`` (all kinds when None); returns how many were deleted."""
    keys = RelayKeys(keyspace)
    purged = 0
    for k in _kinds(kind):
        purged += int(await client.eval(scripts.PURGE, 1, keys.dead(k)))
    return purged
