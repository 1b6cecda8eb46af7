"""The engine's options: declared here (``relayd.options``), and the ``SweepOptions`` made of them.

``TuningOptions`` (how a sweep reads, retries, leases and stops) and ``PacingOptions`` (each
sink's circuit breaker and rate limit) are the options an operator sets: ``--batch``,
``RELAYD_BATCH`` and so on, with their defaults, help and bounds. ``SweepOptions`` is what the
engine reads, with units in the names; ``SweepOptions.of`` makes it from the two. Adding an
engine option is a field in one of the classes and, when the engine reads it, in
``SweepOptions`` and ``of``: this module only.

Light on purpose (the CLI imports it to build its flags): the breaker is imported when a
``SweepOptions`` is made.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Literal

from relayd.options import SINKS, TUNING, option

if TYPE_CHECKING:
    from relayd.engine.breaker import BreakerPolicy


@dataclass(frozen=True, slots=True)
class TuningOptions:
    """How a sweep reads, retries, holds its leases and stops."""

    batch: int = option(
        1000, "Most entries of each kind read per poll.", panel=TUNING, constraints={"ge": 1, "le": 100_000}
    )
    poll_interval: float = option(
        1.0,
        "Longest wait between polls when idle, in seconds.",
        panel=TUNING,
        constraints={"gt": 0, "le": 3600},
    )
    max_attempts: int = option(
        10, "Attempts before an entry is dead-lettered.", panel=TUNING, constraints={"ge": 1}
    )
    # Retry delays grow from retry_base to retry_cap (seconds, jittered): a minute at most by
    # default, so a sink that comes back is drained within a minute rather than five.
    retry_base: float = option(
        0.5,
        "First retry delay in seconds; it doubles per attempt, with jitter.",
        panel=TUNING,
        constraints={"gt": 0, "le": 3600},
    )
    retry_cap: float = option(
        60.0,
        "Longest retry delay in seconds (a sink's Retry-After may exceed it).",
        panel=TUNING,
        constraints={"gt": 0, "le": 86400},
    )
    lease_ttl: float = option(
        5.0,
        "Lease time-to-live per prefix in seconds (renewed every third of it).",
        panel=TUNING,
        constraints={"ge": 0.3, "le": 3600},
    )
    # Use keyspace notifications when the server publishes them (relayd never turns them on).
    wake: bool = option(
        True,
        "Wake an idle prefix at once on new work, from keyspace notifications when the server "
        "publishes them (notify-keyspace-events Khz); polling goes on regardless.",
        panel=TUNING,
        shown="on",
        negatable=True,
    )
    # Under a steady writer a pass costs about the same for one entry as for ten, so how often
    # passes start sets the relay's CPU; the linger is what the pass before left of this period.
    linger: float = option(
        0.008,
        "While commits keep coming, how long after a pass began the next may wait, in seconds, to "
        "take the commits of that moment too (0: at once). Longer: fewer passes, less CPU; shorter: "
        "lower latency.",
        panel=TUNING,
        constraints={"ge": 0, "le": 1.0},
    )
    shutdown_grace: float = option(
        10.0,
        "Seconds a shutdown may take after SIGTERM/SIGINT.",
        panel=TUNING,
        constraints={"ge": 0, "le": 3600},
    )


@dataclass(frozen=True, slots=True)
class PacingOptions:
    """Each sink's circuit breaker (``engine.breaker``) and rate limit (``engine.rate``)."""

    # Failed entries over 2+ targets with no success between that open a breaker (0: never).
    breaker_threshold: int = option(
        5,
        "Failed entries over 2+ targets, no success between, that open a sink's breaker (0: never).",
        panel=SINKS,
        constraints={"ge": 0, "le": 1_000_000},
    )
    breaker_cooldown_cap: float = option(
        15.0,
        "Longest wait in seconds of an open sink breaker before its probe.",
        panel=SINKS,
        constraints={"gt": 0, "le": 3600},
    )
    sink_rate: float = option(
        0.0,
        "Most entries a second delivered to each sink (0: unlimited).",
        panel=SINKS,
        constraints={"ge": 0, "le": 10_000_000},
    )
    # Whether that limit is each process's or one for every replica, in Redis (per sink name).
    sink_rate_scope: Literal["process", "cluster"] = option(
        "process",
        "process: each process's own --sink-rate; cluster: one for every replica, in Redis.",
        panel=SINKS,
    )
    # With the cluster scope, what limits a process while Redis does not answer its bucket.
    sink_rate_fallback: Literal["process", "hold"] = option(
        "process",
        "With --sink-rate-scope cluster, while Redis fails: process (own limit) or hold (no delivery).",
        panel=SINKS,
    )


def _default_breaker() -> BreakerPolicy:
    from relayd.engine.breaker import BreakerPolicy

    return BreakerPolicy()


@dataclass(frozen=True, slots=True)
class SweepOptions:
    """Everything the engine needs to know, with units in the names."""

    prefixes: tuple[str, ...] = ("stm",)
    batch: int = 1000
    poll_interval_s: float = 1.0
    max_attempts: int = 10
    backoff_base_s: float = 0.5
    backoff_cap_s: float = 60.0
    lease_ttl_s: float = 5.0
    shutdown_grace_s: float = 10.0
    #: How long a missing seq below delivered ones is waited for before it is passed over
    #: (the reconcile scan still finds it later).
    gap_grace_s: float = 30.0
    #: Most entries kept in memory per kind and prefix while held back or awaiting retry.
    max_held: int = 50_000
    once: bool = False
    #: Subscribe to keyspace notifications and wake an idle prefix at once on new work, when the
    #: server publishes them (``engine.wake``). Off here, on by default in ``TuningOptions``.
    wake: bool = False
    #: While commits keep coming, the next pass starts this long after the last one began (the
    #: wait is what that pass left of it; ``engine.prefix_relay``). 0: at once.
    linger_s: float = 0.008
    #: When each sink's circuit breaker opens and how long it stays open (``engine.breaker``).
    breaker: BreakerPolicy = field(default_factory=_default_breaker)
    #: Most entries a second delivered to each sink (0: unlimited; ``engine.rate``).
    sink_rate_per_s: float = 0.0
    #: ``process``: each process limits itself; ``cluster``: one bucket per sink name in Redis,
    #: shared by every replica (``engine.shared_rate``).
    sink_rate_scope: str = "process"
    #: With ``cluster``, when the bucket's script fails: ``process`` (this process's own bucket
    #: meanwhile) or ``hold`` (the pass fails as on any Redis error).
    sink_rate_fallback: str = "process"

    @classmethod
    def of(
        cls, tuning: TuningOptions, pacing: PacingOptions, *, prefixes: tuple[str, ...], once: bool
    ) -> SweepOptions:
        """The engine's options from those the operator set (a retry cap below the base is the base)."""
        from relayd.engine.breaker import BreakerPolicy

        return cls(
            prefixes=prefixes,
            batch=tuning.batch,
            poll_interval_s=tuning.poll_interval,
            max_attempts=tuning.max_attempts,
            backoff_base_s=tuning.retry_base,
            backoff_cap_s=max(tuning.retry_cap, tuning.retry_base),
            lease_ttl_s=tuning.lease_ttl,
            shutdown_grace_s=tuning.shutdown_grace,
            once=once,
            wake=tuning.wake,
            linger_s=tuning.linger,
            breaker=BreakerPolicy(
                threshold=pacing.breaker_threshold, cooldown_cap_s=pacing.breaker_cooldown_cap
            ),
            sink_rate_per_s=pacing.sink_rate,
            sink_rate_scope=pacing.sink_rate_scope,
            sink_rate_fallback=pacing.sink_rate_fallback,
        )
