"""Operator pauses under ``P:relay:pauses``: what is paused, since when, by whom and why.

    P:relay:pauses   hash   {scope -> pause JSON}

A scope is the JSON array ``[kind, sink, target]`` of the selectors an operator gave (``null``
for each left out; all three ``null``: the whole prefix), so pausing the same scope twice keeps
one pause and ``resume`` with the same selectors finds it. The value is ``{"kind", "sink",
"target", "at", "by", "reason"}`` (``at`` in epoch seconds on the Redis server's clock).
The state lives in Redis, so it survives restarts and takeovers; every replica reads it
(``engine.pause`` decides what it holds back). Each change is recorded in the audit trail.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Final

import orjson

from relayd.state import RedisClient
from relayd.state.audit import AuditRecord, record_action
from relayd.state.keys import RelayKeys
from store import Keyspace

#: Longest reason kept (characters): a reason is a note for people, not a payload.
MAX_REASON: Final = 500
#: The selectors of a scope, in the order of its JSON array.
SELECTORS: Final = ("kind", "sink", "target")


@dataclass(frozen=True, slots=True)
class Pause:
    """One scope held back by an operator (``None`` selectors match everything)."""

    kind: str | None = None
    sink: str | None = None
    target: str | None = None
    at: float = 0.0
    by: str = ""
    reason: str = ""

    @property
    def scope(self) -> str:
        """The hash field: the selectors as a JSON array."""
        return orjson.dumps([self.kind, self.sink, self.target]).decode()

    @property
    def scope_type(self) -> str:
        """The narrowest selector given (``target``, ``sink``, ``kind``) or ``prefix``: a bounded label."""
        for name in ("target", "sink", "kind"):
            if getattr(self, name) is not None:
                return name
        return "prefix"

    def describe(self) -> str:
        """``kind=outbox target=x``, or ``whole prefix``."""
        parts = [f"{name}={value}" for name in SELECTORS if (value := getattr(self, name)) is not None]
        return " ".join(parts) or "whole prefix"

    def selectors(self) -> dict[str, str]:
        return {name: value for name in SELECTORS if (value := getattr(self, name)) is not None}

    def to_json(self) -> bytes:
        return orjson.dumps(asdict(self))


def decode_pause(raw: bytes | str) -> Pause | None:
    """A stored pause, or None when the value is not one (written by hand, say): ignored."""
    try:
        doc = orjson.loads(raw)
        return Pause(
            kind=_optional(doc.get("kind")),
            sink=_optional(doc.get("sink")),
            target=_optional(doc.get("target")),
            at=float(doc.get("at") or 0.0),
            by=str(doc.get("by") or ""),
            reason=str(doc.get("reason") or ""),
        )
    except (orjson.JSONDecodeError, AttributeError, TypeError, ValueError):
        return None


def _optional(value: object) -> str | None:
    return None if value is None else str(value)


#: Fields asked per ``HSCAN`` call while reading the pauses.
SCAN_COUNT = 200


async def read_pauses(client: RedisClient, keyspace: Keyspace) -> list[Pause]:
    """Every pause of the prefix, oldest first (``HSCAN``: bounded calls, however many there are)."""
    key = RelayKeys(keyspace).pauses
    raw = [value async for _, value in client.hscan_iter(key, count=SCAN_COUNT)]
    pauses = [p for value in raw if (p := decode_pause(value)) is not None]
    return sorted(pauses, key=lambda p: (p.at, p.scope))


async def redis_now(client: RedisClient) -> float:
    """The Redis server's clock (epoch seconds): the one every replica and status read."""
    seconds, micros = await client.time()
    return int(seconds) + int(micros) / 1_000_000


async def pause(
    client: RedisClient, keyspace: Keyspace, wanted: Pause, *, command: str, source: str
) -> Pause:
    """Store ``wanted`` (its ``at`` from the Redis clock, replacing a pause of the same scope)
    and record it in the audit trail."""
    stored = Pause(wanted.kind, wanted.sink, wanted.target, await redis_now(client), wanted.by, wanted.reason)
    await client.hset(RelayKeys(keyspace).pauses, stored.scope, stored.to_json())
    record = AuditRecord(
        at=stored.at,
        action="pause",
        filter={**stored.selectors(), "reason": stored.reason},
        count=1,
        command=command,
        source=source,
    )
    await record_action(client, keyspace, record)
    return stored


async def resume(
    client: RedisClient, keyspace: Keyspace, wanted: Pause, *, command: str, source: str
) -> bool:
    """Remove the pause of exactly ``wanted``'s scope; whether there was one (recorded if so)."""
    removed = int(await client.hdel(RelayKeys(keyspace).pauses, wanted.scope))
    if removed:
        record = AuditRecord(
            at=await redis_now(client),
            action="resume",
            filter=wanted.selectors(),
            count=removed,
            command=command,
            source=source,
        )
        await record_action(client, keyspace, record)
    return bool(removed)
