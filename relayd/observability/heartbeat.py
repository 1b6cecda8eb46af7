"""The event loop's heartbeat: a task that tells ``Health`` every second that the loop still runs.

Liveness is this heartbeat, not "a pass finished recently": a pass waiting on a slow sink leaves
the loop free to beat, so ``/healthz`` stays 200 and no probe restarts a healthy process for a
sink's fault (readiness, ``relayd_last_sweep_timestamp_seconds`` and the alerts report the
sink). A loop blocked by synchronous work cannot beat, and ``/healthz`` turns 503. The other half
of liveness is each sink call in flight: one past its sink's own timeout plus a grace counts as
hung (``relayd.observability.inflight``), read by the probe itself, so it is seen even while the
loop beats.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import AsyncIterator, Callable
from typing import Final

from relayd.observability.health import Health

#: Seconds between beats; far below any useful staleness threshold.
BEAT_EVERY_S: Final = 1.0


@contextlib.asynccontextmanager
async def heartbeat(
    health: Health, *, every_s: float = BEAT_EVERY_S, clock: Callable[[], float] = time.monotonic
) -> AsyncIterator[None]:
    """Beat into ``health`` from a task of the running loop for as long as the block runs."""

    async def beat() -> None:
        while True:
            health.progress(clock())
            await asyncio.sleep(every_s)

    task = asyncio.create_task(beat(), name="relayd-heartbeat")
    try:
        yield
    finally:
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task
