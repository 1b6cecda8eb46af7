"""Decide what keyspace notifications relayd can use: the server's flags, the channels, the events.

Pure: strings in, strings and booleans out. ``relayd.engine.wake`` is the I/O shell around it.

Redis publishes a keyspace notification on ``__keyspace@<db>__:<key>`` with the event name
(``hset``, ``zadd``, ...) as the message, but only for the classes listed in the server's
``notify-keyspace-events``: ``K`` (keyspace channel) and ``h`` (hash commands) and ``z``
(sorted-set commands), or ``A`` (every class but key-miss and new-key).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any, Final

from relayd.envelope import Kind
from store import Keyspace

#: The flags relayd needs: keyspace channel, hash events, sorted-set events.
NEEDED_FLAGS: Final = "Khz"
#: Events that only take something away: an idle relay has nothing new to look at after them
#: (and the relay's own acks, HDEL and ZREM, would otherwise wake it after every batch).
_REMOVALS: Final = frozenset(
    {
        b"hdel",
        b"zrem",
        b"zremrangebyscore",
        b"zremrangebyrank",
        b"zremrangebylex",
        b"zpopmin",
        b"zpopmax",
        b"del",
        b"expired",
        b"evicted",
        b"expire",
    }
)


def configured_flags(reply: Mapping[Any, Any] | None) -> str:
    """The flags a ``CONFIG GET notify-keyspace-events`` reply holds ('' for an empty reply)."""
    value = next(iter(reply.values()), "") if reply else ""
    return value.decode("utf-8", "replace") if isinstance(value, bytes) else str(value)


def notifications_ready(flags: str) -> bool:
    """Whether ``notify-keyspace-events`` = ``flags`` publishes what relayd subscribes to."""
    if "K" not in flags:
        return False
    return "A" in flags or ("h" in flags and "z" in flags)


def suggested_flags(flags: str) -> str:
    """The value an operator would set: the current flags plus whichever of ``Khz`` is missing."""
    needed = "K" if "A" in flags else NEEDED_FLAGS
    return flags + "".join(flag for flag in needed if flag not in flags)


def watched_keys(keyspace: Keyspace) -> tuple[str, str, str]:
    """The keys whose changes mean new work for a prefix: outbox hash, spawns hash, timers zset."""
    return keyspace.outbox, keyspace.spawns, keyspace.timers


def channel(db: int, key: str) -> str:
    """The keyspace channel Redis publishes ``key``'s events on."""
    return f"__keyspace@{db}__:{key}"


def watched_channels(prefixes: Iterable[str], db: int) -> dict[bytes, tuple[str, Kind]]:
    """Map every channel to subscribe to (as the bytes Redis sends) onto its prefix and kind."""
    kinds: tuple[Kind, Kind, Kind] = ("outbox", "spawn", "timer")  # the order of ``watched_keys``
    mapping: dict[bytes, tuple[str, Kind]] = {}
    for prefix in prefixes:
        for kind, key in zip(kinds, watched_keys(Keyspace(prefix)), strict=True):
            mapping[channel(db, key).encode()] = (prefix, kind)
    return mapping


def new_work(replies: Iterable[Any], channels: Mapping[bytes, tuple[str, Kind]]) -> set[tuple[str, Kind]]:
    """The (prefix, kind) pairs that pub/sub ``replies`` (``[b"message", channel, event]``, ...)
    announce new work for, all of a read's replies folded into one set."""
    return {
        target
        for reply in replies
        if reply[0] == b"message"
        and reply[2] not in _REMOVALS
        and (target := channels.get(reply[1])) is not None
    }
