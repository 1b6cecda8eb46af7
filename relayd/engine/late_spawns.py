"""Events wait for their child's spawn: which children pending spawns name, and late spawns.

A pass relays spawns before events, so a child exists before an event reaches it. Two cases
need more than that order (docs/internals.md#where-features-meet):

- **Spawns still pending** after the spawn lane ran (its sink failing, paused, or more than a
  window): the children they name are blocked keys for the outbox lane (``children_pending``).
  While the spawn lane's memory covers them, that is what it holds; beyond it, one ``HVALS``
  names them, read again only when the spawns hash's size or counter moved, and above
  ``PENDING_SPAWNS_NAMED`` spawns every event waits (``events_wait``).
- **A spawn committed while the pass ran**, after the spawn lane read: an event the outbox read
  just returned may go to its child. The outbox read's own round-trip reads the spawns counter
  after it (``counter_check``); seqs above the one the pass saw are read (one ``HMGET``), and
  events to the children they name wait (``hold_late``).
"""

from __future__ import annotations

from typing import Any, Final

import orjson

from relayd.engine.fresh import FreshBatch
from relayd.engine.lane import Lane
from relayd.engine.plan import Held
from relayd.envelope import Kind
from relayd.state import RedisClient
from store import Keyspace
from store.codec import parse_seq
from store.round_trip import Command

#: While spawns are pending beyond the spawn lane's memory, a pass names their children from the
#: spawns hash (one HVALS) only while it holds at most this many spawns; above it every outbox
#: event waits for the spawns to drain (a read of a hash of any size each pass would grow with it).
PENDING_SPAWNS_NAMED: Final = 10_000


class PendingSpawns:
    """What one sweeper knows of the spawns still pending in Redis, from pass to pass."""

    def __init__(self, client: RedisClient, keyspace: Keyspace) -> None:
        self.client = client
        self.keyspace = keyspace
        #: The spawn lane is read this run (its key not parked): events check for late spawns.
        self.live = True
        #: The spawn lane read this pass (``read_by_spawn_lane``).
        self.read = False
        #: More spawns pending in Redis than one pass may name: every outbox event waits.
        self.events_wait = False
        #: The children named by pending spawns as the last pass saw them: events to them wait.
        self.children: set[str] = set()
        # Whether spawns may be pending beyond what the spawn lane holds in memory (its reader
        # behind the counter, a window read ahead, its breaker open, paused).
        self._behind = False
        # The spawns counter this pass has looked at (the spawn reader's, or the one read to name
        # pending children): events read after it check for spawns above it.
        self._seen = 0
        # The children the spawns hash named when last read, and its (size, counter) then.
        self._named: set[str] = set()
        self._named_at: tuple[int, Any] | None = None

    def begin_pass(self) -> None:
        self.read = False

    def read_by(self, kind: Kind) -> None:
        """A lane of ``kind`` is about to read."""
        self.read |= kind == "spawn"

    async def children_pending(
        self, lane: Lane, idle_kinds: set[Kind], *, skipped: set[Kind], parked: bool
    ) -> set[str]:
        """The children named by spawns still pending after the spawn ``lane`` ran: those it
        holds, or, while spawns may be pending beyond its memory, every child the spawns hash
        names (one HVALS when the hash's size or counter moved since the last, while it holds at
        most ``PENDING_SPAWNS_NAMED`` spawns; above that, every event waits).

        The lane is behind unless it read this pass and its reader examined every seq the
        counter allocated with no window read ahead, or the probe found no spawns hash; a lane
        skipped for lack of writes keeps what the last pass knew. ``parked``: its key has the
        wrong type.
        """
        held = {k for h in lane.held.values() if (k := h.envelope.ordering_key)}
        self._seen = lane.reader.window.counter if lane.reader is not None else 0
        if parked:
            self._behind = False  # not a hash: nothing a read could return
        elif self.read and lane.reader is not None:
            self._behind = not lane.reader.window.caught_up or lane.read_ahead is not None
        elif lane.kind in idle_kinds and lane.kind not in skipped:
            self._behind = False  # the probe found no spawns hash
        elif lane.kind not in idle_kinds:
            self._behind = True  # not read: its breaker is open, it is paused, or full
        self.events_wait = False
        if not self._behind:
            self.children = held
            return held
        pipe = self.client.pipeline(transaction=False)
        pipe.hlen(self.keyspace.spawns)
        pipe.get(self.keyspace.spawns_seq)
        size, counter = await pipe.execute()
        self._seen = max(self._seen, counter_value(counter))
        if size > PENDING_SPAWNS_NAMED:
            # Naming every child would cost a read of the whole hash each pass: events wait
            # until the spawns drain below the bound (spawns first, as the pass orders them).
            self.events_wait = True
            self.children, self._named_at = held, None
            return held
        if self._named_at != (size, counter):
            # No spawn added (the counter is where it was) and none removed (the size too):
            # the children named last time are still the pending ones, so no read is needed.
            values = await self.client.hvals(self.keyspace.spawns)
            self._named = {child for raw in values if (child := child_named(raw)) is not None}
            self._named_at = (size, counter)
        self.children = held | self._named
        return self.children

    def counter_check(self, lane: Lane) -> tuple[Command, ...]:
        """What an outbox read runs after it for ``hold_late``: the spawns counter's GET, so that
        check costs no round-trip of its own."""
        if lane.kind != "outbox" or not self.live:
            return ()
        return (("GET", self.keyspace.spawns_seq),)

    async def hold_late(
        self, lane: Lane, picked: list[Held], fast: FreshBatch, now: float, counter: int | None = None
    ) -> tuple[list[Held], FreshBatch]:
        """What of the outbox entries about to go may go: not those to a child whose spawn was
        committed after this pass looked at the spawns; they join the waiting line.

        ``counter``: the spawns counter as the outbox read's round-trip found it after the read
        (``counter_check``); None: read it now."""
        late = await self._children_of_late_spawns(counter)
        if late is not None and not late:
            return picked, fast

        def waits(key: str | None) -> bool:
            return key is not None and (late is None or key in late)

        held_back = FreshBatch.of(f for f in fast if waits(f[2].ordering_key))
        if not held_back and not any(waits(h.envelope.ordering_key) for h in picked):
            return picked, fast
        lane.hold(held_back, now)
        keep = FreshBatch.of(f for f in fast if not waits(f[2].ordering_key))
        return [h for h in picked if not waits(h.envelope.ordering_key)], keep

    async def _children_of_late_spawns(self, counter: int | None = None) -> set[str] | None:
        """Children named by spawns committed after this pass looked at the spawns (seqs above
        the counter it saw): an event the outbox read just returned may go to one of them.

        The counter is read after that read (``counter``, from the read's own round-trip, or a
        ``GET`` now): a spawn committed before any event it returned has its seq by then; one
        HMGET of the new seqs names their children. None: more new spawns than a pass may name,
        so every event to an execution waits.
        """
        if counter is None:
            counter = counter_value(await self.client.get(self.keyspace.spawns_seq))
        if counter <= self._seen:
            return set()
        if counter - self._seen > PENDING_SPAWNS_NAMED:
            self.events_wait = True
            return None
        seqs = [str(seq) for seq in range(self._seen + 1, counter + 1)]
        values = await self.client.hmget(self.keyspace.spawns, seqs)
        late = {child for raw in values if raw is not None and (child := child_named(raw))}
        self.children |= late  # ``Sweeper.has_eligible`` sees them wait too
        return late


def counter_value(reply: bytes | str | None) -> int:
    """A counter's reply as an int; 0 when absent or not a number."""
    return (parse_seq(reply) if reply is not None else None) or 0


def child_named(raw: bytes | str) -> str | None:
    """The child id a stored spawn value names (``{"c": child_id, ...}``); None for a value that
    names none (a malformed entry: the spawn lane dead-letters it)."""
    try:
        doc = orjson.loads(raw)
    except orjson.JSONDecodeError:
        return None
    child = doc.get("c") if isinstance(doc, dict) else None
    return child if isinstance(child, str) else None
