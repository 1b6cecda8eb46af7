"""``relayd_commit_to_delivery_seconds``: how long after its commit each entry was delivered.

``store`` stamps each outbox and spawn value with its commit time on the Redis server's clock,
as the value's last key (``"ct": 1712345678.123456``, ``store.codec.stamp_commit_time``); a
timer is due at its ``fire_at``. When the sink confirms an entry, the delay from that time to
now (the engine's clock is the Redis server's, ``engine.redis_time``) is observed, per prefix
and kind. An entry written without a commit time (by harel, another engine, an older store)
gives no observation and no error. The time is found at the end of the stored bytes, without
parsing the value again.

A delivery of more than ``SAMPLE`` entries is sampled: every n-th entry stands for the n it
was taken from and is observed with that weight, so the count stays about the number of
entries delivered while the cost per delivery stays bounded (reading a stamp costs about a
quarter of the rest of an entry's way through the relay).
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Final

from prometheus_client import Histogram

from relayd.engine.fresh import FreshBatch
from relayd.engine.plan import Held
from relayd.envelope import Kind
from relayd.observability.metrics import RelayMetrics, observe_many
from store import RawEntry, RawTimer

_STAMP: Final = b',"ct":'
#: The stamp is the value's last key: ``,"ct":`` and a float's repr fit in this many bytes.
_TAIL: Final = 40
_SKIP: Final = len(_STAMP)
_CLOSE: Final = ord("}")
#: No commit time is later than this (epoch seconds, the year 5138): ``inf`` is refused.
_LATEST: Final = 1e11
#: Most entries of one delivery whose stamps are read; the others are counted through them.
SAMPLE: Final = 64


def commit_time(value: bytes) -> float | None:
    """The commit time stamped at the end of a stored value (epoch seconds), or None."""
    at = value.rfind(_STAMP, -_TAIL)
    if at < 0 or value[-1] != _CLOSE:
        return None
    try:
        committed = float(value[at + _SKIP : -1])
    except ValueError:
        return None
    # Also refuses inf and nan (a comparison with nan is false): the sum must stay finite.
    return committed if 0.0 < committed < _LATEST else None


def delays(raws: Iterable[RawEntry | RawTimer], now: float) -> list[float]:
    """Seconds from each entry's commit (a timer's ``fire_at``) to ``now``; none for an entry
    without a commit time. Never negative (clocks a little apart).

    Per delivered entry on the hot path: ``commit_time``'s steps inline, no call per entry.
    """
    out: list[float] = []
    append = out.append
    for raw in raws:
        if type(raw) is RawTimer:
            append(max(0.0, now - raw.fire_at))
            continue
        value = raw.value  # type: ignore[union-attr]  # a RawEntry: the type check above
        at = value.rfind(_STAMP, -_TAIL)
        if at < 0 or value[-1] != _CLOSE:
            continue
        try:
            committed = float(value[at + _SKIP : -1])
        except ValueError:
            continue
        if 0.0 < committed < _LATEST:
            append(max(0.0, now - committed))
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
        if not raws:
            return
        histogram = self._histograms.get(kind)
        if histogram is None:
            histogram = self._histograms[kind] = self._metrics.commit_to_delivery.labels(self._prefix, kind)
        if len(raws) <= SAMPLE:
            observe_many(histogram, delays(raws, now))
            return
        # Every stride-th entry stands for the stride it opens; the last for what is left.
        stride = -(-len(raws) // SAMPLE)
        sampled = raws[::stride]
        rest = len(raws) - (len(sampled) - 1) * stride
        observe_many(histogram, delays(sampled[:-1], now), weight=stride)
        observe_many(histogram, delays(sampled[-1:], now), weight=rest)
