"""Waiting for a condition another thread, task or process brings about, with a deadline.

The deadline only bounds a hang: tests assert causally, never on how long something took.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from typing import TypeVar

T = TypeVar("T")


def wait_until(
    predicate: Callable[[], T], timeout_s: float = 30.0, what: str = "the condition", poll_s: float = 0.05
) -> T:
    """Poll ``predicate`` until it returns something true, and return that; fail after ``timeout_s``."""
    deadline = time.monotonic() + timeout_s
    while not (value := predicate()):
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout_s:g}s waiting for {what}")
        time.sleep(poll_s)
    return value


def seconds_until(
    predicate: Callable[[], object],
    timeout_s: float = 30.0,
    what: str = "the condition",
    poll_s: float = 0.05,
) -> float:
    """``wait_until``, returning how many seconds it took (a figure a test reports, not asserts)."""
    started = time.monotonic()
    wait_until(predicate, timeout_s, what, poll_s)
    return time.monotonic() - started


async def until(predicate: Callable[[], object], timeout_s: float = 5.0, poll_s: float = 0.01) -> None:
    """Return once ``predicate()`` is true, polling between event-loop turns; fail after ``timeout_s``."""
    deadline = time.monotonic() + timeout_s
    while not predicate():
        if time.monotonic() > deadline:
            raise AssertionError("condition not reached in time")
        await asyncio.sleep(poll_s)
