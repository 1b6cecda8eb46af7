"""The audit trail of operator actions under ``P:relay:audit``: who changed what, when, how many.

Every action, from the console or the command line, is recorded here. Each record is one JSON
object, newest first: ``at`` (epoch seconds), ``action`` (``replay``, ``purge``, ``pause`` or
``resume``), ``filter`` (the fields that chose the dead letters or the paused scope), ``count``
(how many it changed), ``command`` (the equivalent ``relayd`` command) and ``source`` (the
console client's address, or ``cli:user@host`` for the command line).
The list is trimmed, so the trail never grows without bound.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Final

import orjson

from relayd.state import RedisClient
from relayd.state.keys import RelayKeys
from store import Keyspace

#: Most audit records kept per prefix (the oldest are trimmed).
MAX_RECORDS: Final = 1000


@dataclass(frozen=True, slots=True)
class AuditRecord:
    """One action taken through the console or the command line."""

    at: float
    action: str
    filter: dict[str, str]
    count: int
    command: str
    source: str = ""
    ids: list[str] = field(default_factory=list)

    def to_json(self) -> bytes:
        return orjson.dumps(asdict(self))


async def record_action(client: RedisClient, keyspace: Keyspace, record: AuditRecord) -> None:
    """Append ``record`` (newest first) and trim the trail, in one transaction."""
    key = RelayKeys(keyspace).audit
    pipe = client.pipeline(transaction=True)
    pipe.lpush(key, record.to_json())
    pipe.ltrim(key, 0, MAX_RECORDS - 1)
    await pipe.execute()


async def read_actions(client: RedisClient, keyspace: Keyspace, limit: int = 200) -> list[AuditRecord]:
    """The newest ``limit`` records."""
    raw = await client.lrange(RelayKeys(keyspace).audit, 0, limit - 1)
    records = []
    for item in raw:
        doc = orjson.loads(item)
        records.append(
            AuditRecord(
                at=float(doc["at"]),
                action=str(doc["action"]),
                filter={str(k): str(v) for k, v in dict(doc.get("filter") or {}).items()},
                count=int(doc["count"]),
                command=str(doc.get("command", "")),
                source=str(doc.get("source", "")),
                ids=[str(i) for i in doc.get("ids") or []],
            )
        )
    return records
