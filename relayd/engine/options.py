"""The options of a sweep, as the engine sees them (the CLI maps Settings onto these)."""

from __future__ import annotations

from dataclasses import dataclass, field

from relayd.engine.breaker import BreakerPolicy


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
    #: server publishes them (``engine.wake``). Off here, on by default in ``Settings``.
    wake: bool = False
    #: When each sink's circuit breaker opens and how long it stays open (``engine.breaker``).
    breaker: BreakerPolicy = field(default_factory=BreakerPolicy)
    #: Most entries a second delivered to each sink (0: unlimited; ``engine.rate``).
    sink_rate_per_s: float = 0.0
    #: ``process``: each process limits itself; ``cluster``: one bucket per sink name in Redis,
    #: shared by every replica (``engine.shared_rate``).
    sink_rate_scope: str = "process"
    #: With ``cluster``, when the bucket's script fails: ``process`` (this process's own bucket
    #: meanwhile) or ``hold`` (the pass fails as on any Redis error).
    sink_rate_fallback: str = "process"
