"""Pure: what ``purge`` and ``ids_with_prefix`` read and delete, for both store twins.

A purge removes one execution and everything keyed by it: ``exe:{id}``, ``processed:{id}``,
``trace:{id}``, ``trace:seq:{id}``, its members of ``timers``, the ``outbox`` rows whose
``"t"`` is the id and the ``spawns`` rows whose ``"p"`` is the id. The shared hashes and the
timer zset can hold millions of rows of other executions, so the stores page through them
(HSCAN / ZSCAN, ``PAGE`` at a time) and keep only the rows ``Owner`` says are this
execution's; the deletion is then one MULTI/EXEC under WATCH of ``exe:{id}``. Nothing here
touches Redis.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

import orjson

from store.keys import TIMER_SEPARATOR, Keyspace
from store.plans import Command, glob_escape

#: A key, field, member or value as redis-py returns it (str under ``decode_responses=True``).
Raw = bytes | str

#: Rows asked for per HSCAN / ZSCAN / SCAN call, and fields per HDEL / ZREM. Bounds the work of
#: any single command a purge sends (``tests/benchmarks/bench_purge.py`` shows the slowlog).
PAGE = 1000

# An id made only of these characters is spelt byte for byte the same inside any JSON
# encoder's output (no escape applies to them), so a row that does not contain it verbatim
# cannot name it and need not be parsed.
_VERBATIM_IN_JSON = re.compile(r"[A-Za-z0-9_.:\-]+")


def moved_on(current: bytes | str | None, expected_version: int) -> bool:
    """True when a stored execution is not at ``expected_version`` (a purge must not touch it).

    An absent execution has not moved on: its leftovers are still purged. A stored value
    whose version cannot be read is treated as moved on.
    """
    if current is None:
        return False
    try:
        doc = orjson.loads(current)
    except orjson.JSONDecodeError:
        return True
    version = doc.get("version") if isinstance(doc, dict) else None
    return not isinstance(version, int) or version != expected_version


class Owner:
    """Recognises one execution's rows in the shared outbox, spawns and timers."""

    __slots__ = ("_needle", "execution_id", "timer_prefix")

    def __init__(self, execution_id: str) -> None:
        self.execution_id = execution_id
        self.timer_prefix = f"{execution_id}{TIMER_SEPARATOR}".encode()
        # b"" is in every row: an id JSON may escape is checked by parsing each row
        verbatim = _VERBATIM_IN_JSON.fullmatch(execution_id) is not None
        self._needle = execution_id.encode() if verbatim else b""

    def outbox_fields(self, page: Mapping[Raw, Raw]) -> list[Raw]:
        """The fields of one HSCAN page of ``outbox`` whose ``"t"`` is this execution."""
        return self._rows_naming(page, "t")

    def spawn_fields(self, page: Mapping[Raw, Raw]) -> list[Raw]:
        """The fields of one HSCAN page of ``spawns`` whose ``"p"`` is this execution."""
        return self._rows_naming(page, "p")

    def timer_members(self, page: Iterable[tuple[Raw, float]]) -> list[Raw]:
        """The members of one ZSCAN page of ``timers`` that belong to this execution.

        A member's owner is everything before its first separator (``"{id}\\x00{path}"``).
        """
        return [m for m, _score in page if _as_bytes(m).startswith(self.timer_prefix)]

    @property
    def timer_match(self) -> bytes:
        """ZSCAN MATCH pattern: the server skips other executions' timers."""
        return glob_escape(self.timer_prefix.decode()).encode() + b"*"

    def _rows_naming(self, page: Mapping[Raw, Raw], key: str) -> list[Raw]:
        needle = self._needle
        return [
            f for f, v in page.items() if needle in _as_bytes(v) and _string_at(v, key) == self.execution_id
        ]


def _as_bytes(raw: Raw) -> bytes:
    # a client built with decode_responses=True hands back str
    return raw.encode() if isinstance(raw, str) else raw


def _string_at(raw: Raw, key: str) -> str | None:
    """The string under ``key`` of a JSON object row; None for anything else (malformed rows)."""
    try:
        doc = orjson.loads(raw)
    except orjson.JSONDecodeError:
        return None
    value = doc.get(key) if isinstance(doc, dict) else None
    return value if isinstance(value, str) else None


@dataclass(slots=True)
class Doomed:
    """What one purge deletes, collected page by page before the MULTI."""

    outbox: list[Raw] = field(default_factory=list)
    spawns: list[Raw] = field(default_factory=list)
    timers: list[Raw] = field(default_factory=list)

    def commands(self, ks: Keyspace, execution_id: str) -> list[Command]:
        """The MULTI block: UNLINK the execution's own keys, then HDEL / ZREM ``PAGE`` at a time.

        UNLINK rather than DEL: a large dedupe set or trace is freed off the main thread. It
        goes as a raw command because redis-py's cluster clients turn ``unlink()`` into one
        call per slot, which an asyncio cluster pipeline never queues (the keys share a slot).
        """
        cmds: list[Command] = [
            (
                "execute_command",
                (
                    "UNLINK",
                    ks.exe(execution_id),
                    ks.processed(execution_id),
                    ks.trace(execution_id),
                    ks.trace_seq(execution_id),
                ),
            )
        ]
        cmds += [("zrem", (ks.timers, *chunk)) for chunk in _chunks(self.timers)]
        cmds += [("hdel", (ks.outbox, *chunk)) for chunk in _chunks(self.outbox)]
        cmds += [("hdel", (ks.spawns, *chunk)) for chunk in _chunks(self.spawns)]
        return cmds


def field_names(rows: Iterable[Raw]) -> list[str]:
    """Hash fields as the store's backlog readers key them."""
    return [f.decode() if isinstance(f, bytes) else f for f in rows]


def _chunks(items: list[Raw]) -> list[list[Raw]]:
    return [items[i : i + PAGE] for i in range(0, len(items), PAGE)]


def ids_match(ks: Keyspace, id_prefix: str) -> str:
    """SCAN MATCH pattern for the execution keys whose id starts with ``id_prefix``."""
    return f"{glob_escape(ks.exe(''))}{glob_escape(id_prefix)}*"


def ids_from_keys(ks: Keyspace, keys: Iterable[bytes | str]) -> list[str]:
    """Execution ids from SCAN's keys, each once (SCAN may return a key twice), in SCAN order."""
    head = len(ks.exe(""))
    names = (k.decode() if isinstance(k, bytes | bytearray) else k for k in keys)
    return list(dict.fromkeys(n[head:] for n in names))
