"""Each sink's health as one prefix's relay sees it, published for ``relayd status`` and the console.

    P:relay:sinks   string   JSON list of {sink, kinds, state, since, last_error, retrying, at}; PX

A breaker lives in the relay's memory (``engine.breaker``), where no other process can read it,
so the replica holding the lease writes what ``sink_health`` (pure) makes of its lanes: the
breaker's state and since when, the last error (the breaker's while it is not closed, else the
most recent of the entries in backoff), and how many entries the sink was handed and did not
confirm wait to go again. It looks at once
when a breaker changed state, else at most every ``CHECK_EVERY_S`` (a look walks the entries
held in memory); it writes what changed, and at least every ``REPUBLISH_S`` (the key's TTL is
``TTL_S``: a relay gone leaves no stale health behind). One SET per write.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Final

import orjson

from relayd.engine.clock import Clock
from relayd.engine.lane import Lane
from relayd.state import RedisClient
from store import Keyspace

#: Seconds between two looks at the lanes while no breaker changed state.
CHECK_EVERY_S: Final = 1.0
#: A relay rewrites its sinks' health at least this often (seconds) while it holds the lease.
REPUBLISH_S: Final = 15.0
#: The health key lives this long past its last write (seconds).
TTL_S: Final = 60.0
#: Suffix of the key under ``P:relay:``.
SINKS_SUFFIX: Final = "sinks"


@dataclass(frozen=True, slots=True)
class SinkHealth:
    """One sink's breaker and retries (times in epoch seconds)."""

    sink: str
    kinds: tuple[str, ...]
    state: str
    since: float | None
    last_error: str
    retrying: int


def sink_health(lanes: Sequence[Lane], *, closed_since: dict[str, float]) -> list[SinkHealth]:
    """What each sink's lanes say (pure); ``closed_since`` gives when a closed breaker closed."""
    by_guard: dict[str, list[Lane]] = {}
    for lane in lanes:
        by_guard.setdefault(lane.guard.name, []).append(lane)
    health = []
    for name, group in by_guard.items():
        breaker = group[0].guard.breaker
        # Handed to the sink and not confirmed, waiting to go again: after a failed attempt, or
        # held while the breaker counts the failures as an outage (no attempt charged).
        retrying = [h for lane in group for h in lane.held.values() if h.attempts or h.probed_at]
        if breaker.state != "closed":
            since, error = breaker.opened_at, breaker.reason
        else:
            failed = [h for h in retrying if h.last_error]
            latest = max(failed, key=lambda h: h.last_attempt_at or 0.0, default=None)
            since, error = closed_since.get(name), latest.last_error if latest is not None else ""
        health.append(
            SinkHealth(name, tuple(lane.kind for lane in group), breaker.state, since, error, len(retrying))
        )
    return health


class SinkHealthPublisher:
    """Writes one prefix's ``sink_health`` to ``P:relay:sinks`` when it changes, or now and then."""

    def __init__(self, client: RedisClient, keyspace: Keyspace, *, clock: Clock) -> None:
        self.client = client
        self.key = keyspace.relay(SINKS_SUFFIX)
        self.clock = clock
        self._last: list[SinkHealth] | None = None
        self._written_s = float("-inf")
        self._checked_s = float("-inf")
        self._states: dict[str, str] = {}
        self._closed_since: dict[str, float] = {}

    async def maybe_publish(self, lanes: Sequence[Lane]) -> None:
        now, now_s = self.clock.now(), self.clock.monotonic()
        changed = False
        for lane in lanes:
            guard = lane.guard
            if self._states.get(guard.name) != guard.breaker.state:
                self._states[guard.name] = guard.breaker.state
                self._closed_since[guard.name] = now
                changed = True
        if not changed and now_s - self._checked_s < CHECK_EVERY_S:
            return
        self._checked_s = now_s
        health = sink_health(lanes, closed_since=self._closed_since)
        if health == self._last and now_s - self._written_s < REPUBLISH_S:
            return
        doc = [
            {
                "sink": h.sink,
                "kinds": list(h.kinds),
                "state": h.state,
                "since": h.since,
                "last_error": h.last_error,
                "retrying": h.retrying,
                "at": now,
            }
            for h in health
        ]
        await self.client.set(self.key, orjson.dumps(doc), px=int(TTL_S * 1000))
        self._last, self._written_s = health, now_s


def decode_sink_health(raw: bytes | str | None) -> list[dict[str, object]]:
    """The published health, or nothing for a missing or unreadable value."""
    if raw is None:
        return []
    try:
        doc = orjson.loads(raw)
    except orjson.JSONDecodeError:
        return []
    return [item for item in doc if isinstance(item, dict)] if isinstance(doc, list) else []
