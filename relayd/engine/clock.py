"""The clock the engine's shells read: epoch seconds for data, monotonic seconds for intervals."""

from __future__ import annotations

import time
from typing import Final, Protocol


class Clock(Protocol):
    """Where the shells get time; tests pass a fake one they move by hand."""

    def now(self) -> float:
        """Epoch seconds (``relayed_at``, ``fire_at`` comparisons, dead-letter times)."""

    def monotonic(self) -> float:
        """Seconds on a clock that never jumps (timeouts, lease validity, durations)."""


class SystemClock:
    """The real clock."""

    def now(self) -> float:
        return time.time()

    def monotonic(self) -> float:
        return time.monotonic()


SYSTEM_CLOCK: Final = SystemClock()
