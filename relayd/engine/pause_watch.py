"""The operators' pauses of one prefix as a sweeper sees them: read from Redis, held per lane.

Each pass asks ``refresh``; the pauses are read again (an ``HSCAN`` of ``P:relay:pauses``: one
call unless hundreds are paused) when ``every_s`` has passed since the last read, so every
replica obeys a pause or a resume within that time plus the pass in flight, and an idle relay
costs one command per period at most. What each lane holds is worked out by ``engine.pause``
once per read. The ``relayd_paused_since_timestamp_seconds`` gauge follows each read.
"""

from __future__ import annotations

from collections.abc import Sequence

from relayd.engine.clock import Clock
from relayd.engine.lane import Lane
from relayd.engine.pause import FREE, LaneHold, lane_hold
from relayd.envelope import Kind
from relayd.observability import events
from relayd.observability.metrics import RelayMetrics
from relayd.state import RedisClient
from relayd.state.pauses import Pause, read_pauses
from store import Keyspace


class PauseWatch:
    """The pauses in force for one prefix and what they hold in each lane."""

    def __init__(
        self, client: RedisClient, keyspace: Keyspace, *, metrics: RelayMetrics, clock: Clock, every_s: float
    ) -> None:
        self.client = client
        self.keyspace = keyspace
        self.metrics = metrics
        self.clock = clock
        self.every_s = every_s
        self.pauses: list[Pause] = []
        self._holds: dict[Kind, LaneHold] = {}
        self._read_s = float("-inf")  # when the pauses were last read (monotonic s)
        self._gauged: set[str] = set()  # the scope labels with a series
        self._read = False

    def hold(self, kind: Kind) -> LaneHold:
        """What the lane of ``kind`` holds back now."""
        return self._holds.get(kind, FREE)

    async def refresh(self, lanes: Sequence[Lane]) -> None:
        """Read the pauses again once ``every_s`` has passed since the last read."""
        now_s = self.clock.monotonic()
        if now_s - self._read_s < self.every_s:
            return
        self._read_s = now_s
        before, self.pauses = self.pauses, await read_pauses(self.client, self.keyspace)
        if self._read:  # the first read finds pauses made before: not news
            self._announce(before, self.pauses)
        self._read = True
        self._holds = {
            lane.kind: lane_hold(self.pauses, kind=lane.kind, sink_names=(lane.sink.name, lane.guard.name))
            for lane in lanes
        }
        self._gauge()

    def _announce(self, before: list[Pause], after: list[Pause]) -> None:
        """An operational event for each pause that took effect or was lifted since the last read."""
        was, now = {p.scope: p for p in before}, {p.scope: p for p in after}
        prefix = self.keyspace.prefix
        for scope in now.keys() - was.keys():
            p = now[scope]
            events.emit(
                "paused", prefix, prefix=prefix, scope=p.describe(), by=p.by, reason=p.reason, since=p.at
            )
        for scope in was.keys() - now.keys():
            events.emit("resumed", prefix, prefix=prefix, scope=was[scope].describe())

    def _gauge(self) -> None:
        """Since when each type of scope has been paused (its oldest pause); no series when none."""
        since: dict[str, float] = {}
        for pause in self.pauses:
            scope = pause.scope_type
            since[scope] = min(since.get(scope, pause.at), pause.at)
        gauge, prefix = self.metrics.paused_since, self.keyspace.prefix
        for scope in self._gauged - since.keys():
            gauge.remove(prefix, scope)
        for scope, at in since.items():
            gauge.labels(prefix, scope).set(at)
        self._gauged = set(since)
