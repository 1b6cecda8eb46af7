"""Key names of everything relayd keeps under ``P:relay:`` (and nothing else writes there).

    P:relay:lease             string  token of the replica delivering for P; PX = lease TTL
    P:relay:members           zset    {replica token -> expiry ms}: who shares the prefixes (state/members.py)
    P:relay:attempts:{kind}   hash    {ref -> {"n", "f", "l"}}: failed attempts of a live entry
    P:relay:dead:{kind}       hash    {id -> dead-letter JSON}: entries parked for an operator
    P:relay:cursor:outbox     string  low-water seq of the outbox reader (written by ``store``)
    P:relay:cursor:spawns     string  the same for spawn intents
    P:relay:audit             list    operator actions, newest first, JSON {at, action, filter, count, ...}
    P:relay:harel             hash    {"KIND:relayd"|"KIND:harel" -> n}: the harel sink's handoffs (status)
    P:relay:pauses            hash    {scope -> pause JSON}: what operators paused (state/pauses.py)
    P:relay:sinks             string  each sink's breaker and retries, as the lease holder last saw them (PX;
                                      engine/sink_health.py)

``kind`` is the envelope kind: ``outbox``, ``spawn`` or ``timer``. The cursors are the
store's and use its own kind names (``outbox``, ``spawns``).
"""

from __future__ import annotations

from store import Keyspace


class RelayKeys:
    """relayd's own key names for one prefix. Pure: builds strings."""

    __slots__ = ("keyspace", "lease")

    def __init__(self, keyspace: Keyspace) -> None:
        self.keyspace = keyspace
        # One string per prefix: whoever holds it delivers; the TTL frees it when they die.
        self.lease = keyspace.relay("lease")

    def attempts(self, kind: str) -> str:
        """Failed-attempt counts, so a restart does not reset them (deleted on ack/dead-letter)."""
        return self.keyspace.relay(f"attempts:{kind}")

    def dead(self, kind: str) -> str:
        """Dead letters: removed from the live structure in the same script that writes here."""
        return self.keyspace.relay(f"dead:{kind}")

    def cursor(self, store_kind: str) -> str:
        """The store reader's persisted low-water mark (``outbox`` or ``spawns``); read-only here."""
        return self.keyspace.relay(f"cursor:{store_kind}")

    def harel(self) -> str:
        """The harel sink's handoff counts (``relayd.sinks.harel.handoff``), shown by ``relayd status``."""
        return self.keyspace.relay("harel")

    @property
    def audit(self) -> str:
        """What operators did (replay, purge, pause, resume), newest first, trimmed."""
        return self.keyspace.relay("audit")

    @property
    def pauses(self) -> str:
        """What operators paused: read by every replica, written by ``relayd pause`` and the console."""
        return self.keyspace.relay("pauses")

    def live(self, kind: str) -> str:
        """The engine-owned structure an entry of ``kind`` lives in."""
        return {"outbox": self.keyspace.outbox, "spawn": self.keyspace.spawns, "timer": self.keyspace.timers}[
            kind
        ]
