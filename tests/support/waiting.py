"""Waiting in async tests for a condition another task brings about, with a deadline."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable


async def until(predicate: Callable[[], object], timeout_s: float = 5.0, poll_s: float = 0.01) -> None:
    """Return once ``predicate()`` is true; fail the test after ``timeout_s``."""
    deadline = time.monotonic() + timeout_s
    while not predicate():
        if time.monotonic() > deadline:
            raise AssertionError("condition not reached in time")
        await asyncio.sleep(poll_s)
