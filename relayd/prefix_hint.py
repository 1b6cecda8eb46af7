"""A hint when the chosen prefix holds nothing but a well-known other prefix does.

relayd's default prefix is the store's (``stm``); harel writes under ``harel``. A user who
forgets ``--prefix harel`` sees an empty, healthy relay. ``status``, ``dlq list``, ``sweep`` and
the console's overview ask ``prefix_hints`` and show its one line: "no keys under prefix 'stm';
found keys under 'harel': did you mean --prefix harel?".

Bounded cost: one pipelined round-trip of ``EXISTS`` on the few keys that mark a prefix in use
(the outbox and spawn hashes and counters, the timers, the dead letters), never a ``SCAN`` of the
key space; the well-known prefixes only when a chosen one is empty. A key the connection may not
read (an ACL limited to the chosen prefixes) counts as absent: the hint is advice, never an error.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, Final

from redis.exceptions import RedisClusterException, RedisError

from relayd.envelope import KINDS
from relayd.state.keys import RelayKeys
from store import Keyspace

#: Prefixes a user may have meant: the store's default and harel's.
WELL_KNOWN_PREFIXES: Final = ("stm", "harel")


def marker_keys(prefix: str) -> tuple[str, ...]:
    """The keys whose existence shows that an engine or a relay has used ``prefix``."""
    keyspace = Keyspace(prefix)
    relay = RelayKeys(keyspace)
    engine = (keyspace.outbox, keyspace.outbox_seq, keyspace.spawns, keyspace.spawns_seq, keyspace.timers)
    return (*engine, *(relay.dead(kind) for kind in KINDS))


def hint_for(prefix: str, in_use: Mapping[str, bool]) -> str | None:
    """The hint for ``prefix`` given which prefixes hold keys, or None when none is due."""
    if in_use.get(prefix, True):
        return None
    found = [other for other in WELL_KNOWN_PREFIXES if other != prefix and in_use.get(other)]
    if not found:
        return None
    other = found[0]
    return f"no keys under prefix {prefix!r}; found keys under {other!r}: did you mean --prefix {other}?"


async def prefix_hints(client: Any, prefixes: Sequence[str]) -> list[str]:
    """One hint line per prefix of ``prefixes`` that holds no keys while a well-known one does.

    The well-known prefixes are asked only when a chosen one is empty: a relay whose ACL covers
    just its own prefixes, and that finds them in use, touches no other key.
    """
    in_use = await _in_use(client, prefixes)
    if all(in_use.values()):
        return []
    in_use |= await _in_use(client, [p for p in WELL_KNOWN_PREFIXES if p not in in_use])
    return [hint for prefix in prefixes if (hint := hint_for(prefix, in_use))]


async def _in_use(client: Any, prefixes: Sequence[str]) -> dict[str, bool]:
    """Whether each prefix has any marker key, in one pipelined round-trip of ``EXISTS``."""
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
        return dict.fromkeys(asked, True)
    return {
        prefix: any(isinstance(reply, int) and reply > 0 for reply in [next(replies) for _ in keys[prefix]])
        for prefix in asked
    }
