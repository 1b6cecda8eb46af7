"""The engine's epoch clock is the Redis server's: ``TIME``, tracked against the host's monotonic clock.

Timers are due when Redis's clock passes their ``fire_at``, not the relay host's: every writer
and every relay share one Redis, not one host clock, and a relay host whose clock runs ahead
would fire timers early (behind: late). ``RedisClock.now()`` is the host's monotonic clock plus
an offset measured with ``TIME`` (half the round-trip counted on each side), so reading it
costs no command; ``keep_synced`` measures the offset again every lease beat period and keeps
the measure with the shortest round-trip, aged by how far the two clocks' rates may drift apart
(parts per million). A measure that cannot agree with the current one (their bounds do not
overlap) means Redis's clock was stepped: it is taken at once and logged (``redis_clock_stepped``).
Every epoch time the engine reads (due timers, ``relayed_at``, retry waits, the ages it
reports, dead-letter and attempt times) comes from it.

Until the first measure succeeds the offset is the host clock's (``time.time``), and a failed
measure keeps the last one; both are logged (``clock_sync_failed``).
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable, Mapping
from typing import Final

import structlog

from relayd.engine.clock import sleep_until
from relayd.engine.redis_errors import REDIS_ERRORS
from relayd.state import RedisClient

log = structlog.get_logger(__name__)


def parse_time_reply(reply: tuple[int, int] | Mapping[object, tuple[int, int]]) -> float:
    """Epoch seconds from a ``TIME`` reply: ``(seconds, microseconds)``; a cluster client may
    answer per node (a mapping), and any node's clock will do."""
    pair = next(iter(reply.values())) if isinstance(reply, Mapping) else reply
    seconds, micros = pair
    return int(seconds) + int(micros) / 1_000_000


#: The most the two clocks' rates are taken to differ (seconds per second): how fast an offset
#: measured earlier loses precision.
DRIFT_RATE: Final = 50e-6
#: A new measure this far (s) outside what the current one allows is a step of Redis's clock.
STEP_MARGIN_S: Final = 0.05


class RedisClock:
    """Epoch seconds on the Redis server's clock; monotonic seconds on the host's.

    A measure is off by at most half its round-trip (the reply may have waited anywhere in it,
    on a busy event loop for a long time), so a new measure replaces the offset only when its
    bound is tighter than the current one's, which widens by ``DRIFT_RATE`` as it ages (the
    minimum-delay filter of NTP-style clock sync).
    """

    def __init__(
        self, *, monotonic: Callable[[], float] = time.monotonic, wall: Callable[[], float] = time.time
    ) -> None:
        self._monotonic = monotonic
        #: Redis epoch seconds minus host monotonic seconds (the host's wall clock until synced).
        self.offset_s = wall() - monotonic()
        self.synced = False
        #: How far the offset may be off when measured (s), and when that was (monotonic s).
        self._error_s = float("inf")
        self._measured_s = 0.0

    def now(self) -> float:
        return self._monotonic() + self.offset_s

    def monotonic(self) -> float:
        return self._monotonic()

    async def sync(self, client: RedisClient) -> None:
        """Measure the offset with one ``TIME`` and keep the better of it and the current one;
        raises the Redis error when it fails."""
        sent_s = self._monotonic()
        reply = await client.time()
        received_s = self._monotonic()
        error_s = (received_s - sent_s) / 2
        aged_error_s = self._error_s + (sent_s - self._measured_s) * DRIFT_RATE
        offset_s = parse_time_reply(reply) - (sent_s + received_s) / 2
        # Each measure bounds the true offset to within its error: when the two bounds do not
        # overlap, Redis's clock was stepped (an NTP step, a failover to another host) and the
        # old measure says nothing any more: the new one is taken, however loose.
        stepped_s = offset_s - self.offset_s
        stepped = self.synced and abs(stepped_s) > error_s + aged_error_s + STEP_MARGIN_S
        if error_s <= aged_error_s or stepped:
            self.offset_s = offset_s
            self._error_s, self._measured_s = error_s, sent_s
        if stepped:
            log.warning("redis_clock_stepped", step_s=round(stepped_s, 3), error_s=round(error_s, 3))
        self.synced = True

    async def try_sync(self, client: RedisClient) -> bool:
        """``sync``, logging a failure instead of raising it; returns whether it worked."""
        try:
            await self.sync(client)
        except REDIS_ERRORS as exc:
            log.warning("clock_sync_failed", error=f"{type(exc).__name__}: {exc}"[:300])
            return False
        return True


async def keep_synced(clock: RedisClock, client: RedisClient, *, every_s: float, stop: asyncio.Event) -> None:
    """Measure the offset again every ``every_s`` until ``stop`` is set (or cancelled)."""
    while not stop.is_set():
        await sleep_until(every_s, stop)
        if not stop.is_set():
            await clock.try_sync(client)
