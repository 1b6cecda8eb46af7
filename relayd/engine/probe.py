"""The idle probe: whether a sweeper's quiet lanes have anything to read, in one round-trip.

A quiet lane (its last run read, attempted and held nothing) is probed before it is read, so an
idle prefix costs at most two cheap commands per pass instead of a read per kind:

- one EXISTS over the outbox and spawn hashes: an absent hash has nothing a read could return
  (a gap that fills, a late commit below the frontier: each creates the key). When either
  exists, both quiet hash lanes are read;
- ZRANGE of the first timer: no timer is due while the first score lies ahead, and that score
  tells the loop when to wake.
"""

from __future__ import annotations

from collections.abc import Collection

from relayd.envelope import Kind
from relayd.state import RedisClient
from store import Keyspace


async def probe_quiet(
    client: RedisClient, keyspace: Keyspace, quiet: Collection[Kind], *, now: float
) -> tuple[set[Kind], float | None]:
    """The ``quiet`` lanes with nothing to read, and the first timer's fire_at (None: no timer).

    The fire_at is only known when the timer lane was probed; otherwise it is None.
    """
    hashes = [key for kind, key in (("outbox", keyspace.outbox), ("spawn", keyspace.spawns)) if kind in quiet]
    pipe = client.pipeline(transaction=False)
    if hashes:
        pipe.exists(*hashes)
    if "timer" in quiet:
        pipe.zrange(keyspace.timers, 0, 0, withscores=True)
    replies = await pipe.execute()
    idle: set[Kind] = set()
    if hashes and not replies[0]:
        idle.update(kind for kind in ("outbox", "spawn") if kind in quiet)
    first_timer_at = None
    if "timer" in quiet:
        first = replies[-1]
        first_timer_at = float(first[0][1]) if first else None
        if first_timer_at is None or first_timer_at > now:
            idle.add("timer")
    return idle, first_timer_at
