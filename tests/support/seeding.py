"""One way for tests to write entries in the stored format, bypassing the store's commit.

The format is docs/internals.md#key-space.

A test that exercises one read, ack or relay path writes exactly the entries it needs: an outbox
event ``{"t": target, "e": "<event JSON text>"}`` at a seq, a spawn intent ``{"p", "c", "r",
"x"}``, a timer member ``"{execution_id}\\x00{path}"`` scored by its ``fire_at``, a malformed
value, and the seq counters an engine leaves. ``Entries`` queues the writes on any redis-py
pipeline (sync, asyncio or cluster) and the caller executes it, so one round-trip writes them all;
``commit_outbox`` writes a run of outbox entries in one transaction, as an engine's commit leaves
them. Tests of the engine's own commit write through ``store.RedisStore`` instead.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import orjson
import redis

from store import Keyspace, timer_member


def event_text(event_id: str, kind: str = "Ping", data: Mapping[str, Any] | None = None) -> str:
    """An event as the engine stores it inside an outbox value: JSON text."""
    return orjson.dumps({"id": event_id, "kind": kind, "data": dict(data or {})}).decode()


def outbox_value(
    target: str | None, event_id: str, kind: str = "Ping", data: Mapping[str, Any] | None = None
) -> bytes:
    """One outbox hash value: the target execution (None: untargeted) and the event's text."""
    return orjson.dumps({"t": target, "e": event_text(event_id, kind, data)})


def spawn_value(
    parent: str, child: str, root_path: str = "r.a", context: Mapping[str, Any] | None = None
) -> bytes:
    """One spawns hash value: parent, child, the child's root path and its context."""
    return orjson.dumps({"p": parent, "c": child, "r": root_path, "x": dict(context or {})})


class Entries:
    """Queues writes of stored entries under one prefix on ``pipe``; the caller executes it."""

    def __init__(self, pipe: Any, prefix: str) -> None:
        self.pipe = pipe
        self.keys = Keyspace(prefix)

    def outbox(
        self,
        seq: int,
        target: str | None,
        event_id: str,
        kind: str = "Ping",
        data: Mapping[str, Any] | None = None,
    ) -> Entries:
        self.pipe.hset(self.keys.outbox, str(seq), outbox_value(target, event_id, kind, data))
        return self

    def raw_outbox(self, field: str, value: bytes | str) -> Entries:
        """Any outbox field and value at all (a malformed entry, a seq that is not a number)."""
        self.pipe.hset(self.keys.outbox, field, value)
        return self

    def spawn(
        self,
        seq: int,
        parent: str,
        child: str,
        root_path: str = "r.a",
        context: Mapping[str, Any] | None = None,
    ) -> Entries:
        self.pipe.hset(self.keys.spawns, str(seq), spawn_value(parent, child, root_path, context))
        return self

    def raw_spawn(self, field: str, value: bytes | str) -> Entries:
        self.pipe.hset(self.keys.spawns, field, value)
        return self

    def timer(self, execution_id: str, path: str, fire_at: float) -> Entries:
        self.pipe.zadd(self.keys.timers, {timer_member(execution_id, path): fire_at})
        return self

    def raw_timer(self, member: bytes | str, score: float) -> Entries:
        """Any member at all (one without the ``\\x00`` separator is malformed)."""
        self.pipe.zadd(self.keys.timers, {member: score})
        return self

    def counters(self, outbox: int | None = None, spawns: int | None = None) -> Entries:
        """The seq counters an engine leaves: the last seq it allocated of each kind."""
        if outbox is not None:
            self.pipe.set(self.keys.outbox_seq, outbox)
        if spawns is not None:
            self.pipe.set(self.keys.spawns_seq, spawns)
        return self


def commit_outbox(client: redis.Redis, prefix: str, seqs: range, targets: int = 5) -> set[str]:
    """Outbox entries at ``seqs`` (``ev-{seq}`` to ``exe-{seq % targets}``) and the counter at the
    last, in one transaction; their delivery ids."""
    pipe = client.pipeline(transaction=True)
    entries = Entries(pipe, prefix)
    for seq in seqs:
        entries.outbox(seq, f"exe-{seq % targets}", f"ev-{seq}")
    entries.counters(outbox=seqs[-1])
    pipe.execute()
    return {f"{prefix}:outbox:{seq}" for seq in seqs}
