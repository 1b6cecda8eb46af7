"""The idle probe: whether a sweeper's quiet lanes have anything to read, in one round-trip.

A quiet lane (its last run read, attempted and held nothing) is probed before it is read, so an
idle prefix costs at most two cheap commands per pass instead of a read per kind:

- one EXISTS over the outbox and spawn hashes: an absent hash has nothing a read could return
  (a gap that fills, a late commit below the frontier: each creates the key). When either
  exists, both quiet hash lanes are read;
- ZRANGE of the first timer: no timer is due while the first score lies ahead, and that score
  tells the loop when to wake.

With a live wake-up subscription the loop says which kinds were written since the last pass
(``notified``): those quiet lanes are read without a probe, and the other quiet lanes are left
alone (nothing was written to them) except for a timer coming due, and for one full probe per
``poll_interval_s``, the same safety net as polling (``QuietLanes``).
"""

from __future__ import annotations

from collections.abc import Callable, Collection
from collections.abc import Set as AbstractSet

from relayd.engine.lane import Lane
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


class QuietLanes:
    """One sweeper's quiet lanes: which to probe or leave alone each pass, and the probe."""

    def __init__(self, client: RedisClient, keyspace: Keyspace, *, poll_interval_s: float) -> None:
        self.client = client
        self.keyspace = keyspace
        self.poll_interval_s = poll_interval_s
        # Lanes whose last run read, attempted and held nothing: the next pass probes them first.
        self.quiet: set[Kind] = set()
        self._probed_all_s = float("-inf")  # when every quiet lane was last probed (monotonic s)

    def split(
        self,
        notified: frozenset[Kind] | None,
        now_s: float,
        parked: AbstractSet[Kind],
        *,
        timer_due: Callable[[], bool],
    ) -> tuple[set[Kind], set[Kind]]:
        """The quiet lanes (not parked) to leave alone this pass, and those to probe.

        Without ``notified`` every quiet lane is probed. With it, a quiet lane nobody wrote to
        has nothing new (its hash or zset only changes by a write, and every write is noticed),
        unless its next timer is due (``timer_due``, asked only then); once per
        ``poll_interval_s`` they are probed all the same.
        """
        quiet = self.quiet - parked  # a parked lane is neither probed nor read
        if notified is None or now_s - self._probed_all_s >= self.poll_interval_s:
            self._probed_all_s = now_s
            return set(), quiet - (notified or frozenset())
        left = quiet - notified
        if "timer" in left and timer_due():
            left.discard("timer")
        return left, set()

    def note_run(self, kind: Kind, *, quiet: bool) -> None:
        """Whether a lane's run read, attempted and held nothing: the next pass probes it first."""
        if quiet:
            self.quiet.add(kind)
        else:
            self.quiet.discard(kind)

    async def probe(self, quiet: set[Kind], timer_lane: Lane, *, now: float) -> set[Kind]:
        """Which of the ``quiet`` lanes have nothing to read; a probed timer lane learns when its
        next timer is due (``Lane.next_due_at``)."""
        idle, first_timer_at = await probe_quiet(self.client, self.keyspace, quiet, now=now)
        if "timer" in quiet:
            timer_lane.next_due_at = first_timer_at
        return idle
