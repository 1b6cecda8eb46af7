"""retry_delay: exponential growth, the cap, and both jitter modes stay in their band."""

from __future__ import annotations

import random

import pytest

from relayd.engine.backoff import retry_delay


@pytest.mark.parametrize(
    ("attempt", "ceiling"), [(1, 0.5), (2, 1.0), (3, 2.0), (6, 16.0), (7, 20.0), (500, 20.0)]
)
def test_equal_jitter_stays_between_half_and_full_ceiling(attempt, ceiling):
    rng = random.Random(7)

    delays = [retry_delay(attempt, base_s=0.5, cap_s=20.0, rng=rng) for _ in range(200)]

    assert min(delays) >= ceiling / 2
    assert max(delays) <= ceiling
    assert max(delays) - min(delays) > ceiling / 10  # it does jitter


def test_full_jitter_spans_zero_to_ceiling():
    rng = random.Random(3)

    delays = [retry_delay(4, base_s=1.0, cap_s=100.0, rng=rng, jitter="full") for _ in range(500)]

    assert min(delays) < 1.0
    assert max(delays) <= 8.0
    assert max(delays) > 7.0


def test_attempt_is_one_based():
    with pytest.raises(ValueError, match="1-based"):
        retry_delay(0, base_s=1.0, cap_s=2.0, rng=random.Random())
