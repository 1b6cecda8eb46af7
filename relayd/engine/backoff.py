"""Retry delays: exponential backoff with jitter, as a pure function of the attempt number."""

from __future__ import annotations

import random
from typing import Literal

Jitter = Literal["full", "equal"]


def retry_delay(
    attempt: int,
    *,
    base_s: float,
    cap_s: float,
    rng: random.Random,
    jitter: Jitter = "equal",
) -> float:
    """Return how long to wait before the attempt after ``attempt`` (1-based) failed.

    The ceiling grows as ``base_s * 2**(attempt-1)`` up to ``cap_s``. ``full`` jitter draws
    uniformly in ``[0, ceiling]``; ``equal`` jitter (the default) in ``[ceiling/2, ceiling]``, so
    a failing entry never comes back almost at once while replicas still spread out.
    """
    if attempt < 1:
        raise ValueError(f"attempt is 1-based, got {attempt}")
    # Cap the exponent first: 2**attempt overflows float for absurd attempt counts.
    ceiling_s = min(cap_s, base_s * 2.0 ** min(attempt - 1, 64))
    if jitter == "full":
        return rng.uniform(0.0, ceiling_s)
    return ceiling_s / 2.0 + rng.uniform(0.0, ceiling_s / 2.0)
