"""``relayd_commit_to_delivery_seconds``: how long after its commit each entry was delivered.

``store`` stamps each outbox and spawn value with its commit time on the Redis server's clock,
as the value's last key (``"ct": 1712345678.123456``, ``store.codec.stamp_commit_time``); a
timer is due at its ``fire_at``. When the sink confirms an entry, the delay from that time to
now (the engine's clock is the Redis server's, ``engine.redis_time``) is observed, per prefix
and kind. An entry written without a commit time (by harel, another engine, an older store)
gives no observation and no error. The time is found at the end of the stored bytes, without
parsing the value again.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from typing import Final

from prometheus_client import Histogram

from relayd.engine.fresh import FreshBatch
from relayd.engine.plan import Held
from relayd.envelope import Kind
from relayd.metrics import RelayMetrics, observe_many
from store import RawEntry, RawTimer

_STAMP: Final = b',"ct":'
#: The stamp is the value's last key: ``,"ct":`` and a float's repr fit in this many bytes.
_TAIL: Final = 40


def commit_time(value: bytes) -> float | None:
    """The commit time stamped at the end of a stored value (epoch seconds), or None."""
    at = value.rfind(_STAMP, max(0, len(value) - _TAIL))
    if at < 0 or not value.endswith(b"}"):
        return None
    try:
        committed = float(value[at + len(_STAMP) : -1])
    except ValueError:
        return None
    return committed if math.isfinite(committed) else None


def delays(raws: Iterable[RawEntry | RawTimer], now: float) -> list[float]:
    """Seconds from each entry's commit (a timer's ``fire_at``) to ``now``; none for an entry
    without a commit time. Never negative (clocks a little apart)."""
    out = []
    for raw in raws:
        since = raw.fire_at if isinstance(raw, RawTimer) else commit_time(raw.value)
        if since is not None:
            out.append(max(0.0, now - since))
    return out


class CommitDelays:
    """Observes the delays of one prefix's confirmed entries."""

    def __init__(self, metrics: RelayMetrics, prefix: str) -> None:
        self._histograms: dict[Kind, Histogram] = {}
        self._metrics = metrics
        self._prefix = prefix

    def observe(self, kind: Kind, acked: list[Held], acked_fast: FreshBatch, now: float) -> None:
        raws = [h.raw for h in acked]
        raws += acked_fast.raws
        observed = delays(raws, now)
        if observed:
            histogram = self._histograms.get(kind)
            if histogram is None:
                histogram = self._histograms[kind] = self._metrics.commit_to_delivery.labels(
                    self._prefix, kind
                )
            observe_many(histogram, observed)
