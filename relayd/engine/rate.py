"""A token bucket per sink: at most ``rate_per_s`` entries a second, across batches.

The bucket holds at most ``capacity`` tokens (a tenth of a second's worth, at least one) and
starts full; each entry of a delivery takes one. A delivery reserves its tokens up front and the
caller waits until the bucket would have held them (``reserve`` returns how long), so a batch
costs its size in time whatever the batch size. Batches are cut to ``capacity`` entries, so no
burst exceeds a tenth of a second's worth. Pure: the caller passes monotonic seconds.
"""

from __future__ import annotations

import math
from typing import Final

#: Seconds of tokens the bucket holds: the largest burst, and the largest batch, at the rate.
BURST_S: Final = 0.1


class TokenBucket:
    """``reserve(count, now_s)`` → seconds to wait before sending ``count`` entries."""

    __slots__ = ("_tokens", "_updated_s", "capacity", "rate_per_s")

    def __init__(self, rate_per_s: float) -> None:
        if rate_per_s <= 0:
            raise ValueError("a token bucket needs a rate above 0")
        self.rate_per_s = rate_per_s
        self.capacity = max(1, math.floor(rate_per_s * BURST_S))
        self._tokens = float(self.capacity)
        self._updated_s: float | None = None

    def reserve(self, count: int, now_s: float) -> float:
        """Take ``count`` tokens (the balance may go below zero); seconds until they are earned."""
        if self._updated_s is not None:
            earned = (now_s - self._updated_s) * self.rate_per_s
            self._tokens = min(float(self.capacity), self._tokens + max(earned, 0.0))
        self._updated_s = now_s
        self._tokens -= count
        return 0.0 if self._tokens >= 0 else -self._tokens / self.rate_per_s
