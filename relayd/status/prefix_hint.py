"""A hint when the chosen prefix holds nothing but another prefix does.

relayd's default prefix is the store's (``stm``); harel writes under ``harel``; a deployment may
choose any other. A user who forgets ``--prefix`` sees an empty, healthy relay. ``status``,
``dlq list``, ``sweep`` and the console's overview ask ``prefix_hints`` and show its one line:
"no keys under prefix 'stm'; found keys under 'harel': did you mean --prefix harel?".

Bounded cost, in two steps:

1. One pipelined round-trip of ``EXISTS`` on the few keys that mark a chosen prefix in use (the
   outbox and spawn hashes and counters, the timers, the dead letters). A relay whose prefixes
   are in use stops here and touches no other key.
2. Only when a chosen prefix is empty: the same ``EXISTS`` on the well-known prefixes (``stm``,
   ``harel``), and a ``SCAN`` of the key space that stops after ``SCAN_STEPS`` calls of
   ``COUNT`` ``SCAN_COUNT`` (on a cluster, that many per primary), whatever the key space holds.
   A marker key it meets names its prefix (``prefix_of``). The hint names a few, sorted.

A caller that asks again and again (the console, every poll) passes a ``ScanMemo``: one ``SCAN``
a minute serves every prefix and poll, while the ``EXISTS`` still runs each time.

A command the connection may not send (an ACL limited to the chosen prefixes, or without
``SCAN``: relayd's own rule, docs/acl.md, grants neither) counts as finding nothing: the hint is
advice, never an error.
"""

from __future__ import annotations

import math
import re
import time
from collections.abc import Callable, Collection, Iterable, Mapping, Sequence
from typing import Any, Final

from redis.asyncio.cluster import RedisCluster
from redis.exceptions import RedisClusterException, RedisError

from relayd.envelope import KINDS
from relayd.state.keys import RelayKeys
from store import Keyspace

#: Prefixes a user may have meant, asked by name: the store's default and harel's.
WELL_KNOWN_PREFIXES: Final = ("stm", "harel")
#: The most ``SCAN`` calls one hint makes (per primary on a cluster): its bound on a large key space.
SCAN_STEPS: Final = 8
#: The ``COUNT`` of each ``SCAN`` call: how many keys Redis examines per call, about.
SCAN_COUNT: Final = 1000
#: Prefixes named in one hint; the rest are counted ("and 2 more").
NAMED: Final = 3


def marker_keys(prefix: str) -> tuple[str, ...]:
    """The keys whose existence shows that an engine or a relay has used ``prefix``."""
    keyspace = Keyspace(prefix)
    relay = RelayKeys(keyspace)
    engine = (keyspace.outbox, keyspace.outbox_seq, keyspace.spawns, keyspace.spawns_seq, keyspace.timers)
    return (*engine, *(relay.dead(kind) for kind in KINDS))


#: What follows the prefix in each marker key, longest first (``P:relay:dead:outbox`` is P's
#: dead letters, not the outbox of a prefix ``P:relay:dead``).
_MARKER_SUFFIXES: Final = tuple(
    sorted((key.removeprefix("P") for key in marker_keys("P")), key=len, reverse=True)
)


#: The tail of what looks like a prefix but is relayd's own state key (``P:relay:cursor``).
_RELAY_STATE: Final = re.compile(r":relay:[^:]+$")


def prefix_of(key: bytes | str) -> str | None:
    """The prefix ``key`` marks as in use, or None when it is no marker key of any prefix."""
    try:
        text = key.decode() if isinstance(key, bytes | bytearray) else key
    except UnicodeDecodeError:
        return None
    for suffix in _MARKER_SUFFIXES:
        if text.endswith(suffix):
            prefix = text.removesuffix(suffix)
            if _RELAY_STATE.search(prefix):  # P:relay:cursor:outbox, P:relay:attempts:timer: no marker
                return None
            try:
                Keyspace(prefix)
            except ValueError:  # empty or with whitespace: no prefix relayd would accept
                return None
            return prefix
    return None


def hint_for(prefix: str, found: Collection[str]) -> str | None:
    """The hint for an empty ``prefix`` given the other prefixes found in use, or None."""
    others = sorted(set(found) - {prefix})
    if not others:
        return None
    named = ", ".join(repr(other) for other in others[:NAMED])
    more = f" and {len(others) - NAMED} more" if len(others) > NAMED else ""
    guess = f"--prefix {others[0]}" if len(others) == 1 else "one of them (--prefix)"
    return f"no keys under prefix {prefix!r}; found keys under {named}{more}: did you mean {guess}?"


class ScanMemo:
    """The prefixes the last bounded ``SCAN`` found, reused for ``every_s`` seconds: a console
    polling every second would otherwise scan every second, once per empty prefix."""

    def __init__(self, every_s: float = 60.0, monotonic: Callable[[], float] = time.monotonic) -> None:
        self.every_s = every_s
        self._monotonic = monotonic
        self._found: set[str] = set()
        self._at = -math.inf

    async def prefixes(self, client: Any, steps: int, count: int) -> set[str]:
        if self._monotonic() - self._at >= self.every_s:
            self._found = await scan_prefixes(client, steps, count)
            self._at = self._monotonic()
        return set(self._found)


async def prefix_hints(
    client: Any,
    prefixes: Sequence[str],
    *,
    scan_steps: int = SCAN_STEPS,
    scan_count: int = SCAN_COUNT,
    memo: ScanMemo | None = None,
) -> list[str]:
    """One hint line per prefix of ``prefixes`` that holds no keys while other prefixes do.

    Other prefixes are looked for only when a chosen one is empty; the chosen ones are never
    named in a hint (they are already being read). With ``memo``, its last ``SCAN`` serves.
    """
    in_use = await _in_use(client, prefixes)
    if all(in_use.values()):
        return []
    well_known = await _in_use(client, [p for p in WELL_KNOWN_PREFIXES if p not in in_use], unknown=False)
    if memo is None:
        scanned = await scan_prefixes(client, scan_steps, scan_count)
    else:
        scanned = await memo.prefixes(client, scan_steps, scan_count)
    found = ({p for p, used in well_known.items() if used} | scanned) - set(prefixes)
    return [hint for prefix in prefixes if not in_use[prefix] and (hint := hint_for(prefix, found))]


async def scan_prefixes(client: Any, steps: int = SCAN_STEPS, count: int = SCAN_COUNT) -> set[str]:
    """The prefixes whose marker keys a bounded ``SCAN`` meets; empty when ``SCAN`` is refused."""
    try:
        if isinstance(client, RedisCluster):
            found: set[str] = set()
            await client.initialize()  # learns the nodes, once per client
            for node in client.get_primaries():
                found |= await _walk(client, steps, count, target_nodes=node)
            return found
        return await _walk(client, steps, count)
    except (RedisError, RedisClusterException):  # NOPERM, a node gone: advice only, no hint
        return set()


async def _walk(client: Any, steps: int, count: int, **node: Any) -> set[str]:
    """At most ``steps`` ``SCAN`` calls from cursor 0 (one node's, on a cluster)."""
    found: set[str] = set()
    cursor = 0
    for _ in range(steps):
        cursor, keys = _one_node(await client.scan(cursor, count=count, **node))
        found |= _prefixes(keys)
        if cursor == 0:
            break
    return found


def _one_node(reply: Any) -> tuple[int, list[Any]]:
    """``(cursor, keys)``; a cluster client answers ``({node: cursor}, keys)`` for its one node."""
    cursor, keys = reply
    if isinstance(cursor, Mapping):
        cursor = next(iter(cursor.values()), 0)
    return int(cursor), list(keys)


def _prefixes(keys: Iterable[bytes | str]) -> set[str]:
    return {prefix for key in keys if (prefix := prefix_of(key)) is not None}


async def _in_use(client: Any, prefixes: Sequence[str], *, unknown: bool = True) -> dict[str, bool]:
    """Whether each prefix has any marker key, in one pipelined round-trip of ``EXISTS``.

    When the round-trip fails, every prefix is ``unknown``: in use for the chosen ones (no hint),
    not in use for the others (never suggested on no evidence).
    """
    asked = list(dict.fromkeys(prefixes))
    if not asked:
        return {}
    keys = {prefix: marker_keys(prefix) for prefix in asked}
    pipe = client.pipeline(transaction=False)
    for prefix in asked:
        for key in keys[prefix]:
            pipe.exists(key)  # one key per command: legal on a cluster whatever the slots
    try:
        replies = iter(await pipe.execute(raise_on_error=False))
    except (RedisError, RedisClusterException):  # advice only: no hint rather than an error
        return dict.fromkeys(asked, unknown)
    return {
        prefix: any(isinstance(reply, int) and reply > 0 for reply in [next(replies) for _ in keys[prefix]])
        for prefix in asked
    }
