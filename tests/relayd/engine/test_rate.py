"""The token bucket: a rate across batches, bursts bounded (pure: times passed in)."""

from __future__ import annotations

import pytest

from relayd.engine.rate import TokenBucket


def test_a_full_bucket_sends_its_capacity_at_once_then_paces_at_the_rate() -> None:
    bucket = TokenBucket(500)

    first = bucket.reserve(50, now_s=0.0)
    second = bucket.reserve(50, now_s=0.0)
    third = bucket.reserve(50, now_s=0.0)

    assert bucket.capacity == 50
    assert (first, second, third) == (0.0, pytest.approx(0.1), pytest.approx(0.2))


def test_entries_over_a_long_run_follow_the_rate() -> None:
    """Sending as soon as allowed, 5000 entries in batches of 50 take 10 s at 500/s (less one burst)."""
    bucket = TokenBucket(500)
    now_s = 0.0
    for _ in range(100):
        now_s += bucket.reserve(50, now_s)

    assert now_s == pytest.approx((5000 - 50) / 500)


def test_idle_time_refills_up_to_the_capacity_only() -> None:
    bucket = TokenBucket(100)
    bucket.reserve(10, now_s=0.0)

    wait_s = bucket.reserve(20, now_s=3600.0)

    assert wait_s == pytest.approx(0.1)  # 10 tokens at most saved up, 10 more to earn


def test_a_rate_below_ten_still_sends_one_entry_at_a_time() -> None:
    bucket = TokenBucket(2)

    assert bucket.capacity == 1
    assert bucket.reserve(1, 0.0) == 0.0
    assert bucket.reserve(1, 0.0) == pytest.approx(0.5)
