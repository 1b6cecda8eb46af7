"""Liveness and readiness: a snapshot of the relay's state and a pure verdict for each probe.

``/healthz`` answers whether the event loop still runs (its heartbeat,
``relayd.observability.heartbeat``, beat recently: a stuck loop is what a restart fixes) and every
sink call in flight is within its sink's own timeout plus a grace
(``relayd.observability.inflight``: a call past it ignores its timeout, and a restart fixes that
too). A pass waiting on a slow sink that keeps its timeout stays live,
since a restart would not fix the sink (``relayd_last_sweep_timestamp_seconds`` shows how long
ago a pass finished). ``/readyz`` answers whether Redis answers and every sink is
ready (an outage a restart does not fix). ``Health`` is the thread-safe holder the
loop writes and the HTTP thread reads; times are monotonic seconds passed in by the caller.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace
from typing import Any, Final

#: Default silence of the event loop after which it counts as stuck: the heartbeat beats every
#: second, so only a loop blocked by synchronous work this long stays silent.
DEFAULT_STALE_AFTER_S: Final = 30.0


@dataclass(frozen=True, slots=True)
class Answer:
    """A probe's verdict: ``ok`` and a one-line reason for the response body."""

    ok: bool
    reason: str

    @property
    def status(self) -> int:
        return 200 if self.ok else 503


@dataclass(frozen=True, slots=True)
class HealthSnapshot:
    """What the probes look at, copied out of ``Health`` at one instant."""

    last_progress_s: float | None = None  # monotonic time the event loop last beat
    redis_error: str | None = "not connected yet"  # None once Redis answered
    sinks_ready: Mapping[str, bool] = field(default_factory=dict)
    stopping: bool = False
    #: the master's name when Redis is reached through sentinels (``redis+sentinel://``)
    sentinel_service: str | None = None
    #: why a sink is not ready, for the sinks that say (``not_ready_reason()``)
    sinks_reason: Mapping[str, str] = field(default_factory=dict)
    #: secret or certificate files whose new content was refused (the old material stays in use)
    material_refused: tuple[str, ...] = ()
    #: ``prefix:kind`` -> why that lane is parked (its key has the wrong type)
    parked_lanes: Mapping[str, str] = field(default_factory=dict)
    #: sinks whose circuit breaker is not closed: "open since T: reason" by sink name
    breakers_open: Mapping[str, str] = field(default_factory=dict)
    #: sink calls in flight past their timeout plus grace, each saying which and for how long
    hung_deliveries: tuple[str, ...] = ()


def healthz(snapshot: HealthSnapshot, *, now_s: float, stale_after_s: float) -> Answer:
    """Live while the event loop has beat within ``stale_after_s`` (or has not started yet) and
    no sink call in flight has overrun its timeout plus grace."""
    if snapshot.last_progress_s is not None:
        silent_s = now_s - snapshot.last_progress_s
        if silent_s > stale_after_s:
            return Answer(False, f"event loop silent for {silent_s:.1f}s")
    if snapshot.hung_deliveries:
        return Answer(False, "; ".join(snapshot.hung_deliveries))
    if snapshot.last_progress_s is None:
        return Answer(True, "starting")
    return Answer(True, "ok")


def readyz(snapshot: HealthSnapshot) -> Answer:
    """Ready when Redis answers, every live key has its type, every sink is ready and no sink's
    breaker is open; the reason names what is not ("sink webhook open since
    2026-01-01T00:00:00Z: webhook timeout ...")."""
    if snapshot.stopping:
        return Answer(False, "shutting down")
    if snapshot.material_refused:
        refused = "; ".join(snapshot.material_refused)
        return Answer(False, f"secret file refused, the previous material stays in use: {refused}")
    if snapshot.redis_error is not None:
        return Answer(False, f"redis: {redis_waiting_for(snapshot.redis_error, snapshot.sentinel_service)}")
    if snapshot.parked_lanes:
        parked = "; ".join(why for _, why in sorted(snapshot.parked_lanes.items()))
        return Answer(False, f"wrong key type (those kinds are not relayed): {parked}")
    # An open breaker first: it says why deliveries stopped (a sink may be not ready as well).
    problems = [f"sink {name} {why}" for name, why in sorted(snapshot.breakers_open.items())]
    not_ready = sorted(name for name, ready in snapshot.sinks_ready.items() if not ready)
    if not_ready:
        named = (
            f"{name} ({snapshot.sinks_reason[name]})" if name in snapshot.sinks_reason else name
            for name in not_ready
        )
        problems.append(f"sink not ready: {', '.join(named)}")
    if problems:
        return Answer(False, "; ".join(problems))
    return Answer(True, "ok")


def redis_waiting_for(error: str, sentinel_service: str | None) -> str:
    """What the relay waits for while Redis fails with ``error`` (a class name or short text).

    Through sentinels the answer names the step of a failover: no master named yet
    (``MasterNotFoundError``: the sentinels have not agreed on one), or the named master not
    answering (it died and the sentinels have not noticed yet, or it was demoted).
    """
    if sentinel_service is None:
        return error
    if error == "MasterNotFoundError":
        return f"waiting for the sentinels to name a master for {sentinel_service!r} ({error})"
    return f"waiting for the master of {sentinel_service!r} named by the sentinels ({error})"


class Health:
    """Shared state for the probes: the loop reports, the HTTP thread asks."""

    def __init__(
        self, *, stale_after_s: float = DEFAULT_STALE_AFTER_S, sentinel_service: str | None = None
    ) -> None:
        self.stale_after_s = stale_after_s
        self.sentinel_service = sentinel_service
        self._lock = threading.Lock()
        self._last_progress_s: float | None = None
        self._redis_error: str | None = "not connected yet"
        self._sinks: dict[str, Callable[[], bool]] = {}
        self._reasons: dict[str, Callable[[], str | None]] = {}
        self._breakers: dict[str, Callable[[], str | None]] = {}
        self._stopping = False
        self._material: Callable[[], list[str]] = list
        self._parked: dict[str, str] = {}
        self._deliveries: Callable[[float], list[str]] = lambda _now_s: []

    def progress(self, now_s: float) -> None:
        """The event loop ran at ``now_s``: its heartbeat, or a relay loop's iteration."""
        with self._lock:
            self._last_progress_s = now_s

    def redis_ok(self) -> None:
        with self._lock:
            self._redis_error = None

    def redis_failed(self, reason: str) -> None:
        """Redis did not answer; ``reason`` is the error's class or text, never a URL."""
        with self._lock:
            self._redis_error = reason

    def lanes_parked(self, prefix: str, parked: Mapping[Any, str]) -> None:
        """The kinds of ``prefix`` whose key has the wrong type now (kind -> why); empty: none."""
        with self._lock:
            for name in [n for n in self._parked if n.rpartition(":")[0] == prefix]:
                del self._parked[name]
            self._parked.update({f"{prefix}:{kind}": why for kind, why in parked.items()})

    def watch_sinks(
        self,
        sinks: Mapping[str, Callable[[], bool]],
        reasons: Mapping[str, Callable[[], str | None]] | None = None,
    ) -> None:
        """Ask these ``ready()`` callables on every readiness probe, and ``reasons`` why not."""
        with self._lock:
            self._sinks = dict(sinks)
            self._reasons = dict(reasons or {})

    def watch_material(self, problems: Callable[[], list[str]]) -> None:
        """Ask ``problems`` (``MaterialWatch.problems``) on every readiness probe."""
        with self._lock:
            self._material = problems

    def watch_breakers(self, breakers: Mapping[str, Callable[[], str | None]]) -> None:
        """Ask these callables on every readiness probe why a sink's breaker is open (None: closed)."""
        with self._lock:
            self._breakers = dict(breakers)

    def watch_deliveries(self, overruns: Callable[[float], list[str]]) -> None:
        """Ask ``overruns(now_s)`` on every liveness probe which sink calls are hung
        (``relayd.observability.inflight``)."""
        with self._lock:
            self._deliveries = overruns

    def stopping(self) -> None:
        with self._lock:
            self._stopping = True

    def snapshot(self) -> HealthSnapshot:
        with self._lock:
            sinks, reasons, breakers = dict(self._sinks), dict(self._reasons), dict(self._breakers)
            progress_s, redis_error, stopping = self._last_progress_s, self._redis_error, self._stopping
            material = self._material
            parked = dict(self._parked)
        ready: dict[str, bool] = {}
        why: dict[str, str] = {}
        for name, is_ready in sinks.items():
            try:
                ready[name] = bool(is_ready())
                reason = reasons[name]() if not ready[name] and name in reasons else None
            except Exception:  # a broken ready() means not ready, never a failed probe
                ready[name], reason = False, None
            if reason:
                why[name] = reason
        opened = {name: text for name, open_reason in breakers.items() if (text := open_reason())}
        return HealthSnapshot(
            last_progress_s=progress_s,
            redis_error=redis_error,
            sinks_ready=ready,
            stopping=stopping,
            sentinel_service=self.sentinel_service,
            sinks_reason=why,
            material_refused=tuple(material()),
            parked_lanes=parked,
            breakers_open=opened,
        )

    def live(self, now_s: float) -> Answer:
        with self._lock:
            deliveries = self._deliveries
        snapshot = replace(self.snapshot(), hung_deliveries=tuple(deliveries(now_s)))
        return healthz(snapshot, now_s=now_s, stale_after_s=self.stale_after_s)

    def ready(self) -> Answer:
        return readyz(self.snapshot())
