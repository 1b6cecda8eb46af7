"""Every key name of the engine's key space under one prefix (docs/internals.md#key-space).

Under a prefix P (default ``stm``), every key is ``P:<suffix>``:

    exe:{id}          string  the Execution as JSON; "version" inside
    outbox            hash    {seq -> {"t": target_id or null, "e": event_json_string}}
    outbox:seq        string  INCR counter for outbox seqs (allocated before the commit)
    spawns            hash    {seq -> {"p": parent_id, "c": child_id, "r": root_path, "x": context}}
    spawns:seq        string  INCR counter for spawn seqs
    processed:{id}    set     event ids already handled (dedupe)
    timers            zset    member "{id}\\x00{path}", score = fire_at (epoch seconds)
    trace:{id}        list    trace step JSON, ring-trimmed to trace_max
    trace:seq:{id}    string  per-execution INCR for the trace index
    relay:*           (any)   relayd's own state; the engine never reads it

On Redis Cluster the prefix carries a hash tag (``{stm}``) so every key of one prefix shares
a slot and the multi-key scripts are legal.
"""

from __future__ import annotations

from store.errors import MalformedEntry

#: Separates the execution id from the state path inside a timer member.
TIMER_SEPARATOR = "\x00"


class Keyspace:
    """Key names for one prefix. Pure: builds strings, touches no Redis."""

    __slots__ = ("outbox", "outbox_seq", "prefix", "spawns", "spawns_seq", "timers")

    def __init__(self, prefix: str = "stm") -> None:
        if not prefix or any(c in prefix for c in " \n\r\t"):
            raise ValueError(f"invalid key prefix {prefix!r}")
        self.prefix = prefix
        self.outbox = f"{prefix}:outbox"
        self.outbox_seq = f"{prefix}:outbox:seq"
        self.spawns = f"{prefix}:spawns"
        self.spawns_seq = f"{prefix}:spawns:seq"
        self.timers = f"{prefix}:timers"

    def key(self, suffix: str) -> str:
        return f"{self.prefix}:{suffix}"

    def exe(self, execution_id: str) -> str:
        return f"{self.prefix}:exe:{execution_id}"

    def processed(self, execution_id: str) -> str:
        return f"{self.prefix}:processed:{execution_id}"

    def trace(self, execution_id: str) -> str:
        return f"{self.prefix}:trace:{execution_id}"

    def trace_seq(self, execution_id: str) -> str:
        return f"{self.prefix}:trace:seq:{execution_id}"

    def relay(self, suffix: str) -> str:
        """A key of relayd's own state (lease, cursors, attempts, dead letters)."""
        return f"{self.prefix}:relay:{suffix}"

    @property
    def has_hash_tag(self) -> bool:
        """True when the prefix pins every key to one Redis Cluster slot."""
        start = self.prefix.find("{")
        return start != -1 and self.prefix.find("}", start + 2) != -1


def timer_member(execution_id: str, path: str) -> str:
    """Encode a timer's identity as its zset member ``"{id}\\x00{path}"``."""
    return f"{execution_id}{TIMER_SEPARATOR}{path}"


def parse_timer_member(member: bytes | str) -> tuple[str, str]:
    """Decode a zset member into ``(execution_id, path)``.

    Raises:
        MalformedEntry: ``not_utf8`` when it is not UTF-8, ``bad_member`` when it has no ``\\x00``.
    """
    try:
        text = member.decode() if isinstance(member, bytes | bytearray) else member
    except UnicodeDecodeError as exc:
        raise MalformedEntry("not_utf8", "timer member is not UTF-8 (its bytes are kept as base64)") from exc
    execution_id, sep, path = text.partition(TIMER_SEPARATOR)
    if not sep:
        raise MalformedEntry("bad_member", "timer member has no \\x00 separator")
    return execution_id, path
