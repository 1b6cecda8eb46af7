"""The commit time at the end of a stored value, and the delays observed from it."""

from __future__ import annotations

import pytest

from relayd.engine.commit_delay import commit_time, delays
from store import RawEntry, RawTimer
from store.codec import stamp_commit_time


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        (stamp_commit_time(b'{"t":"a","e":"{}"}', 1712345678.123456), 1712345678.123456),
        (stamp_commit_time(b'{"p":"a","c":"b","r":"r","x":{},"tc":{"traceparent":"x"}}', 5.5), 5.5),
        (b'{"t":"a","e":"{}"}', None),
        (b'{"t": "a", "e": "{}", "ct": 12.0}', None),  # not the store's compact stamp
        (b'{"t":"a","e":"{}","ct":"soon"}', None),
        (b'{"t":"a","e":"{}","ct":1e999}', None),
        (b'{"t":"a","e":"{}","ct":5.0', None),
        (b"", None),
    ],
    ids=["outbox", "spawn-with-trace", "harel", "spaced", "text", "infinite", "cut", "empty"],
)
def test_commit_time_is_read_from_the_store_stamp_only(value: bytes, expected: float | None) -> None:
    assert expected == commit_time(value)


def test_delays_count_from_the_commit_or_the_fire_at_and_skip_entries_without_one() -> None:
    raws = [
        RawEntry("1", 1, stamp_commit_time(b'{"t":"a","e":"{}"}', 100.0)),
        RawEntry("2", 2, b'{"t":"a","e":"{}"}'),
        RawTimer(b"exe\x00p", 101.5),
        RawEntry("3", 3, stamp_commit_time(b'{"t":"a","e":"{}"}', 103.0)),  # a clock a little ahead
    ]

    assert delays(raws, 102.5) == [2.5, 1.0, 0.0]


def test_a_large_delivery_is_sampled_and_still_counts_every_entry() -> None:
    """1,000 entries, their stamps read for a few dozen: the count is 1,000, the sum right."""
    from prometheus_client import CollectorRegistry

    from relayd.engine.commit_delay import SAMPLE, CommitDelays
    from relayd.engine.fresh import FreshBatch
    from relayd.observability.metrics import RelayMetrics

    registry = CollectorRegistry()
    delays_ = CommitDelays(RelayMetrics(registry), "p")
    value = stamp_commit_time(b'{"t":"a","e":"{}"}', 100.0)
    fresh = FreshBatch([str(i) for i in range(1000)], [RawEntry(str(i), i, value) for i in range(1000)], [])

    delays_.observe("outbox", [], fresh, 102.0)

    labels = {"prefix": "p", "kind": "outbox"}
    assert registry.get_sample_value("relayd_commit_to_delivery_seconds_count", labels) == 1000
    assert registry.get_sample_value("relayd_commit_to_delivery_seconds_sum", labels) == 2000.0
    assert SAMPLE < 1000
