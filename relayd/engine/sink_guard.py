"""What stands between the engine and one sink: its lock, its circuit breaker, its rate limit.

One ``SinkGuard`` per sink instance, shared by every prefix and kind that delivers to it (a
breaker is about the sink, not about a prefix). ``engine.breaker`` decides; this shell reads the
clock, logs each transition (``sink_breaker_opened`` / ``_half_open`` / ``_closed``), keeps the
metrics and sleeps out the rate limit (``engine.rate``).
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable, Mapping, Sequence

import structlog

from relayd.engine.breaker import STATES, SUCCESS, Breaker, BreakerPolicy, Transition, delivery_signal
from relayd.engine.clock import SYSTEM_CLOCK, Clock
from relayd.engine.rate import TokenBucket
from relayd.engine.shared_rate import SharedBucket
from relayd.envelope import Kind
from relayd.envelope.batch import Batch
from relayd.observability import events
from relayd.observability.metrics import RelayMetrics
from relayd.sinks.base import DELIVERED, Outcome, Sink

log = structlog.get_logger(__name__)


class SinkGuard:
    """One sink's lock, breaker and token bucket (see the module docstring)."""

    def __init__(
        self,
        name: str,
        *,
        policy: BreakerPolicy | None = None,
        rate_per_s: float = 0.0,
        metrics: RelayMetrics | None = None,
        clock: Clock = SYSTEM_CLOCK,
        shared: SharedBucket | None = None,
    ) -> None:
        self.name = name
        self.lock = asyncio.Lock()
        self.breaker = Breaker(policy or BreakerPolicy())
        self.bucket = TokenBucket(rate_per_s) if rate_per_s > 0 else None
        # ``--sink-rate-scope cluster``: the tokens come from the sink's bucket in Redis instead.
        self.shared = shared
        self._opened_s: float | None = None  # when the breaker last opened (monotonic s)
        self.metrics = metrics
        self.clock = clock
        if metrics is not None:
            metrics.add_sink(name)

    @property
    def max_batch(self) -> int | None:
        """Most entries one delivery may carry under the rate limit (None: no limit)."""
        return self.bucket.capacity if self.bucket is not None else None

    def admit(self) -> int | None:
        """Most entries the next delivery may carry: None (closed), a probe's size, or 0 (open)."""
        allowed, transition = self.breaker.admit(self.clock.monotonic())
        self._note(transition)
        return allowed

    def cancel_probe(self) -> None:
        self.breaker.cancel_probe()

    def wait_s(self) -> float | None:
        """Seconds until a delivery may go while the breaker is open (None: it may go now)."""
        return self.breaker.wait_s(self.clock.monotonic())

    def record(self, batch: Batch, outcomes: Sequence[Outcome]) -> bool:
        """Account one delivery; whether its failures count as attempts (False: an outage)."""
        # Any confirmed entry is a success: checked first, without the batch's columns.
        min_targets = self.breaker.policy.min_targets
        signal = (
            SUCCESS
            if DELIVERED in outcomes
            else delivery_signal(batch.keys(), batch.ids(), outcomes, min_targets=min_targets)
        )
        transition = self.breaker.record(signal, now_s=self.clock.monotonic(), at=self.clock.now())
        self._note(transition)
        return signal.succeeded or self.breaker.state == "closed"

    async def throttle(self, count: int) -> None:
        """Wait until ``count`` entries may go under the rate limit (at once without one)."""
        if self.shared is not None:
            wait_s = await self.shared.reserve(count)
        elif self.bucket is not None:
            wait_s = self.bucket.reserve(count, self.clock.monotonic())
        else:
            return
        if wait_s > 0:
            await asyncio.sleep(wait_s)

    def open_reason(self) -> str | None:
        """``"open since T: reason"`` while the breaker is not closed (for ``/readyz``)."""
        breaker = self.breaker
        if breaker.state == "closed" or breaker.opened_at is None:
            return None
        since = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(breaker.opened_at))
        state = "open" if breaker.state == "open" else "half-open (probing)"
        return f"{state} since {since}: {breaker.reason}"

    def _note(self, transition: Transition | None) -> None:
        if transition is None:
            return
        event = "sink_breaker_" + ("half_open" if transition.after == "half_open" else transition.after)
        now_s = self.clock.monotonic()
        if transition.after == "closed":
            # How long deliveries were held, and no error: the one that opened it is over.
            log.info(event, sink=self.name, duration_s=round(now_s - (self._opened_s or now_s), 3))
            self._opened_s = None
        else:
            if transition.before == "closed":
                self._opened_s = now_s
            emit = log.warning if transition.after == "open" else log.info
            # open: the cool-down before the next probe.
            emit(event, sink=self.name, error=transition.reason, duration_s=self.breaker.cooldown_s)
        state = {"open": "opened", "half_open": "half_opened", "closed": "closed"}[transition.after]
        events.emit(f"sink.breaker.{state}", self.name, sink=self.name, error=transition.reason)
        if self.metrics is not None:
            self.metrics.breaker_transitions.labels(self.name, transition.after).inc()
            for state in STATES:
                self.metrics.breaker_state.labels(self.name, state).set(1 if state == transition.after else 0)


def guards_for(
    sinks: Mapping[Kind, Sink],
    *,
    policy: BreakerPolicy | None = None,
    rate_per_s: float = 0.0,
    metrics: RelayMetrics | None = None,
    clock: Clock = SYSTEM_CLOCK,
    shared: Callable[[str], SharedBucket] | None = None,
) -> dict[Kind, SinkGuard]:
    """One guard per sink instance, under each kind that delivers to it.

    A guard is named after its sink, or ``kind+kind:name`` when two sinks share a name.
    ``shared``: the sink's bucket in Redis by guard name (``--sink-rate-scope cluster``).
    """
    kinds_of: dict[int, list[Kind]] = {}
    for kind, sink in sinks.items():
        kinds_of.setdefault(id(sink), []).append(kind)
    names = [sink.name for sink in {id(s): s for s in sinks.values()}.values()]
    guards: dict[Kind, SinkGuard] = {}
    for kinds in kinds_of.values():
        sink = sinks[kinds[0]]
        name = sink.name if names.count(sink.name) == 1 else f"{'+'.join(kinds)}:{sink.name}"
        guard = SinkGuard(
            name,
            policy=policy,
            rate_per_s=rate_per_s,
            metrics=metrics,
            clock=clock,
            shared=shared(name) if shared is not None and rate_per_s > 0 else None,
        )
        for kind in kinds:
            guards[kind] = guard
    return guards
