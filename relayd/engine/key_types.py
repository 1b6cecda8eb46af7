"""Whether each live key of a prefix has the type its kind needs: a lane whose key does not is parked.

The outbox and spawns are hashes and the timers a sorted set; another writer can leave any
type under those names (``SET P:outbox x``). Every command on such a key fails with
``WRONGTYPE``, so the sweeper checks the three types (one pipelined ``TYPE`` each) when it
starts and, while a lane is parked, again at most every ``RECHECK_EVERY_S``: the parked kind
is reported (log, ``/readyz``, ``relayd status``) while the other kinds of the prefix, and
every other prefix, keep flowing; once the key is fixed (deleted, or the right type) the lane
resumes.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Final

from relayd.envelope import KINDS, Kind
from relayd.state import RedisClient
from store import Keyspace

#: The Redis type each kind's live key must have (``none``, an absent key, is always fine).
EXPECTED_TYPES: Final[Mapping[Kind, str]] = {"outbox": "hash", "spawn": "hash", "timer": "zset"}
#: Seconds between two checks of a parked lane's key.
RECHECK_EVERY_S: Final = 1.0


def live_key(keyspace: Keyspace, kind: Kind) -> str:
    """The key a kind is read from: ``P:outbox``, ``P:spawns`` or ``P:timers``."""
    return {"outbox": keyspace.outbox, "spawn": keyspace.spawns, "timer": keyspace.timers}[kind]


def wrong_types(found: Mapping[Kind, str]) -> dict[Kind, str]:
    """The kinds whose key has a type other than the expected one (or none), with that type."""
    return {
        kind: found_type
        for kind, found_type in found.items()
        if found_type not in ("none", EXPECTED_TYPES[kind])
    }


def describe(keyspace: Keyspace, kind: Kind, found_type: str) -> str:
    """One line for logs and probes: ``P:outbox is a string, not a hash``."""
    return f"{live_key(keyspace, kind)} is a {found_type}, not a {EXPECTED_TYPES[kind]}"


async def read_key_types(client: RedisClient, keyspace: Keyspace) -> dict[Kind, str]:
    """The type of each kind's live key, in one round-trip."""
    pipe = client.pipeline(transaction=False)
    for kind in KINDS:
        pipe.type(live_key(keyspace, kind))
    replies = await pipe.execute()
    return {
        kind: reply.decode() if isinstance(reply, bytes) else str(reply)
        for kind, reply in zip(KINDS, replies, strict=True)
    }
