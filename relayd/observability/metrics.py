"""Every Prometheus metric of docs/metrics.md, built on an injected ``CollectorRegistry``.

Labels stay bounded: ``prefix`` (configured), ``kind`` (outbox, spawn, timer), ``outcome``
(delivered, retry, permanent), ``reason`` (the dead-letter reason codes, the fence reasons),
``event`` (lease transitions), ``sink`` and ``state`` (the configured sinks' circuit breakers),
``scope`` (what an operator paused: prefix, kind, sink or target).
Never an entry id, a target id or a URL.
"""

from __future__ import annotations

import platform
from bisect import bisect_left
from collections.abc import Iterable
from typing import Final

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, Info

from relayd import __version__
from relayd.envelope import KINDS
from relayd.state.deadletters import REASON_CODES

#: The outcomes of one delivery attempt.
OUTCOMES: Final = ("delivered", "retry", "permanent")
#: Lease transitions.
LEASE_EVENTS: Final = ("acquired", "lost", "released")
#: A sink's circuit breaker states (``relayd.engine.breaker``).
BREAKER_STATES: Final = ("closed", "open", "half_open")
#: Why entries were not sent or not acked for a lease that may be gone (``engine.fencing``).
FENCE_REASONS: Final = ("send_expired", "ack_expired", "ack_refused", "read_refused")

# Sub-second sinks up to a slow webhook at its timeout.
_LATENCY_BUCKETS_S: Final = (
    0.001,
    0.0025,
    0.005,
    0.01,
    0.025,
    0.05,
    0.1,
    0.25,
    0.5,
    1.0,
    2.5,
    5.0,
    10.0,
    30.0,
)
# From a commit (or a timer's fire_at) to the sink's confirmation: milliseconds on a live relay,
# seconds behind a backlog, minutes and hours through an outage or a pause.
_COMMIT_DELAY_BUCKETS_S: Final = (
    0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0,
    300.0, 900.0, 3600.0,
)  # fmt: skip
# Timers are polled, so lag below the poll interval is normal; minutes mean trouble.
_LAG_BUCKETS_S: Final = (0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 300.0, 900.0, 3600.0)


class RelayMetrics:
    """The relay's metrics; tests assert on ``registry.get_sample_value(...)``."""

    def __init__(self, registry: CollectorRegistry) -> None:
        self.registry = registry
        self.delivered = Counter(
            "relayd_delivered", "Entries delivered and acked.", ["prefix", "kind"], registry=registry
        )
        self.attempts = Counter(
            "relayd_delivery_attempts",
            "Delivery attempts by outcome (delivered, retry, permanent).",
            ["prefix", "kind", "outcome"],
            registry=registry,
        )
        self.dead_lettered = Counter(
            "relayd_dead_lettered",
            "Entries moved to the dead letters, by reason code.",
            ["prefix", "kind", "reason"],
            registry=registry,
        )
        self.backlog = Gauge(
            "relayd_backlog_entries",
            "Pending entries (outbox, spawn) or timers due now (timer).",
            ["prefix", "kind"],
            registry=registry,
        )
        self.dead_letters = Gauge(
            "relayd_dead_letters",
            "Entries parked in the dead letters.",
            ["prefix", "kind"],
            registry=registry,
        )
        self.oldest_due_age = Gauge(
            "relayd_oldest_due_age_seconds",
            "How long the oldest due, undelivered entry has waited (retry waits included).",
            ["prefix", "kind"],
            registry=registry,
        )
        self.timer_lag = Histogram(
            "relayd_timer_lag_seconds",
            "Timer delivery time minus fire_at.",
            ["prefix"],
            buckets=_LAG_BUCKETS_S,
            registry=registry,
        )
        self.sink_latency = Histogram(
            "relayd_sink_latency_seconds",
            "Time the sink took for one batch.",
            ["prefix", "kind"],
            buckets=_LATENCY_BUCKETS_S,
            registry=registry,
        )
        self.sweep_duration = Histogram(
            "relayd_sweep_duration_seconds",
            "Duration of one pass over a prefix.",
            ["prefix"],
            buckets=_LATENCY_BUCKETS_S,
            registry=registry,
        )
        self.redis_errors = Counter(
            "relayd_redis_errors", "Redis commands that failed.", ["prefix"], registry=registry
        )
        self.active = Gauge(
            "relayd_active", "1 on the replica holding the prefix's lease.", ["prefix"], registry=registry
        )
        self.lease_transitions = Counter(
            "relayd_lease_transitions",
            "Lease acquired, lost or released.",
            ["prefix", "event"],
            registry=registry,
        )
        self.fenced = Counter(
            "relayd_fenced",
            "Entries not sent (send_expired) or not acked (ack_expired, ack_refused by Redis)"
            " because this replica's lease may be gone.",
            ["prefix", "kind", "reason"],
            registry=registry,
        )
        self.wakeups = Counter(
            "relayd_wakeups",
            "Idle waits cut short by a keyspace notification of new work (--wake).",
            ["prefix"],
            registry=registry,
        )
        self.last_sweep = Gauge(
            "relayd_last_sweep_timestamp_seconds",
            "Epoch seconds when the last pass finished.",
            ["prefix"],
            registry=registry,
        )
        self.breaker_state = Gauge(
            "relayd_sink_breaker_state",
            "1 for the state each sink's circuit breaker is in (closed, open, half_open), else 0.",
            ["sink", "state"],
            registry=registry,
        )
        self.breaker_transitions = Counter(
            "relayd_sink_breaker_transitions",
            "Circuit breaker transitions of each sink, by the state entered.",
            ["sink", "state"],
            registry=registry,
        )
        self.commit_to_delivery = Histogram(
            "relayd_commit_to_delivery_seconds",
            "From an entry's commit (the store's stamp on the Redis clock; a timer's fire_at) to the"
            " sink's confirmation; entries without a commit time are not observed.",
            ["prefix", "kind"],
            buckets=_COMMIT_DELAY_BUCKETS_S,
            registry=registry,
        )
        self.events = Counter(
            "relayd_events",
            "Operational events (--events-sink) by outcome: sent, dropped (the queue was full), failed.",
            ["outcome"],
            registry=registry,
        )
        self.paused_since = Gauge(
            "relayd_paused_since_timestamp_seconds",
            "Epoch seconds since when the oldest operator pause of each scope (prefix, kind, sink,"
            " target) has held deliveries back; no series while nothing is paused.",
            ["prefix", "scope"],
            registry=registry,
        )
        self.build = Info("relayd_build", "relayd version and Python.", registry=registry)
        self.build.info({"version": __version__, "python": platform.python_version()})

    def add_prefix(self, prefix: str) -> None:
        """Create every series of ``prefix`` at zero, so a scrape shows all names from the start."""
        for kind in KINDS:
            self.delivered.labels(prefix, kind)
            self.backlog.labels(prefix, kind)
            self.dead_letters.labels(prefix, kind)
            self.oldest_due_age.labels(prefix, kind)
            self.sink_latency.labels(prefix, kind)
            self.commit_to_delivery.labels(prefix, kind)
            for outcome in OUTCOMES:
                self.attempts.labels(prefix, kind, outcome)
            for reason in sorted(REASON_CODES):
                self.dead_lettered.labels(prefix, kind, reason)
            for reason in FENCE_REASONS:
                self.fenced.labels(prefix, kind, reason)
        self.timer_lag.labels(prefix)
        self.sweep_duration.labels(prefix)
        self.redis_errors.labels(prefix)
        self.active.labels(prefix).set(0)
        for event in LEASE_EVENTS:
            self.lease_transitions.labels(prefix, event)
        self.last_sweep.labels(prefix)
        self.wakeups.labels(prefix)

    def add_sink(self, sink: str) -> None:
        """Create the breaker series of ``sink`` (closed, no transition yet)."""
        for state in BREAKER_STATES:
            self.breaker_state.labels(sink, state).set(1 if state == "closed" else 0)
            self.breaker_transitions.labels(sink, state)


def observe_many(histogram: Histogram, amounts: Iterable[float], *, weight: int = 1) -> None:
    """Observe each of ``amounts`` on one histogram series, as ``observe`` once per amount would
    (``weight`` times each: a sampled amount standing for that many).

    One pass of a timer drain observes a lag per timer: ``observe`` takes two locked increments
    each (``tests/benchmarks/profile_drain.py`` shows them in a timer drain), this one per bucket
    hit plus one for the sum.
    It reads the series' bucket bounds and values (prometheus_client internals); should they
    ever be missing it observes one by one. Lags are finite (never NaN), as ``observe`` needs.
    """
    bounds: list[float] | None = getattr(histogram, "_upper_bounds", None)
    buckets: list[object] | None = getattr(histogram, "_buckets", None)
    total: object = getattr(histogram, "_sum", None)
    if bounds is None or buckets is None or total is None or len(bounds) != len(buckets):
        for amount in amounts:
            for _ in range(weight):
                histogram.observe(amount)
        return
    counts = [0] * len(bounds)
    sum_s = 0.0
    for amount in amounts:
        sum_s += amount
        # the first bound >= amount: the bucket ``observe`` increments (the last bound is +Inf)
        counts[bisect_left(bounds, amount)] += 1
    total.inc(sum_s * weight)  # type: ignore[attr-defined]  # a prometheus_client MutexValue
    for bucket, count in zip(buckets, counts, strict=True):
        if count:
            bucket.inc(count * weight)  # type: ignore[attr-defined]
