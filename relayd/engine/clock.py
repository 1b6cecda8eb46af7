"""The clock the engine's shells read (epoch seconds for data, monotonic for intervals), and sleeping.

A running relay's epoch clock is the Redis server's (``engine.redis_time.RedisClock``);
``SystemClock`` is the host's, for tools and tests that need no Redis.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from typing import Final, Protocol


class Clock(Protocol):
    """Where the shells get time; tests pass a fake one they move by hand."""

    def now(self) -> float:
        """Epoch seconds (``relayed_at``, ``fire_at`` comparisons, dead-letter times, ages)."""

    def monotonic(self) -> float:
        """Seconds on a clock that never jumps (timeouts, lease validity, durations)."""


class SystemClock:
    """The host's clocks."""

    def now(self) -> float:
        return time.time()

    def monotonic(self) -> float:
        return time.monotonic()


SYSTEM_CLOCK: Final = SystemClock()


async def sleep_until(timeout_s: float, *events: asyncio.Event) -> None:
    """Sleep up to ``timeout_s``; any of ``events`` ends it early.

    Not ``wait_for`` + ``suppress(TimeoutError)``: on Python 3.11 a cancel that races the
    timeout comes out as ``TimeoutError`` and would be swallowed, leaving the task running.
    ``asyncio.timeout`` tells the two apart (its own expiry is the only cancel it turns into
    ``TimeoutError``): with one event it waits without a task of its own, which a loop that
    sleeps after every pass would otherwise create and cancel each time.
    """
    if not events:
        await asyncio.sleep(max(0.0, timeout_s))
        return
    if len(events) == 1:
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(max(0.0, timeout_s)):
                await events[0].wait()
        return
    waiters = [asyncio.create_task(event.wait()) for event in events]
    try:
        await asyncio.wait(waiters, timeout=max(0.0, timeout_s), return_when=asyncio.FIRST_COMPLETED)
    finally:
        for waiter in waiters:
            waiter.cancel()
