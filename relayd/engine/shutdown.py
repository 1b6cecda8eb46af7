"""One deadline for the whole shutdown: ``--shutdown-grace`` from the moment ``stop`` is set.

The pass in flight, the last ack and checkpoint, the lease release, leaving the member registry,
closing the sinks and the Redis connection all end by it: each step after the pass runs in
``bounded``, which gives up (one ``shutdown_grace_exceeded`` line naming the step) when the
deadline has passed, so a Redis that answers nothing (black-holed, paused) cannot hold the
process past the grace its orchestrator allows. What a step gave up on is safe to leave: the
lease expires within its TTL, an unacked entry is delivered again, a cursor is a hint.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator

import structlog

log = structlog.get_logger(__name__)


class ShutdownDeadline:
    """When the shutdown must be over (event-loop time), fixed when ``stop`` is first seen set."""

    def __init__(self, stop: asyncio.Event, grace_s: float) -> None:
        self.stop = stop
        self.grace_s = grace_s
        self._at: float | None = None

    def at(self) -> float:
        """The deadline, fixed by the first step of the shutdown that asks (the pass's grace
        armed the moment ``stop`` is set, or the first step after it)."""
        if self._at is None:
            self._at = asyncio.get_running_loop().time() + self.grace_s
        return self._at

    @contextlib.asynccontextmanager
    async def bounded(self, step: str, **fields: str) -> AsyncIterator[None]:
        """Run the block until the deadline at most; past it, log the step and go on."""
        try:
            async with asyncio.timeout_at(self.at()):
                yield
        except TimeoutError:
            log.warning("shutdown_grace_exceeded", step=step, **fields)
