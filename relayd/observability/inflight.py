"""Sink calls in flight, each with its deadline: the delivery half of liveness.

The event loop's heartbeat (``relayd.observability.heartbeat``) shows the loop runs; it says
nothing of a ``Sink.deliver`` call that never returns. A sink waits on its destination at most its own
timeout at a time (one request, one round of confirmations); a call that has gone longer than
that plus a grace without finishing, and without reporting a finished request, ignores its own
timeout: a hung process, which a restart fixes, unlike a slow receiver. ``/healthz`` then turns
503 and names the sink and how long the call has run (``Health.watch_deliveries``).

Which timeout applies: the sink's ``timeout_s`` attribute when it has one (the webhook's
``--webhook-timeout``; the AWS sinks' connect plus read timeout; kafka's and nats's from their
``timeout_s``; a plugin's own), else ``UNDECLARED_TIMEOUT_S``. A sink whose one call sends many
requests in turn (the webhook: a batch of a thousand entries, sixteen at a time; the AWS sinks'
lanes of requests) calls ``progressed()`` as each request ends, which starts its deadline
again: a long batch of slow but answered requests stays live.

The engine wraps each call in ``DELIVERIES.track(sink, prefix, kind)`` (``engine.window``);
the HTTP thread reads ``overruns``. One registry per process, like the metrics registry: any
number of prefixes and sinks share it.
"""

from __future__ import annotations

import contextlib
import itertools
import threading
import time
from collections.abc import Callable, Iterator
from contextvars import ContextVar
from dataclasses import dataclass
from typing import Final

#: The timeout of a sink that declares none: longer than any built-in sink waits at a time.
UNDECLARED_TIMEOUT_S: Final = 300.0


@dataclass(slots=True)
class Call:
    """One ``deliver`` call: its sink, the timeout it keeps, and when it started and last progressed."""

    sink: str
    timeout_s: float
    started_s: float
    progressed_s: float
    #: whose entries the call delivers (empty when not said)
    prefix: str = ""
    kind: str = ""


def timeout_of(sink: object) -> float:
    """The sink's own ``timeout_s`` when it declares a positive number, else ``UNDECLARED_TIMEOUT_S``."""
    declared = getattr(sink, "timeout_s", None)
    if isinstance(declared, int | float) and not isinstance(declared, bool) and declared > 0:
        return float(declared)
    return UNDECLARED_TIMEOUT_S


def overrun(call: Call, *, now_s: float, grace_s: float) -> str | None:
    """Why ``call`` counts as hung at ``now_s``, or None while it is within its timeout plus grace."""
    quiet_s = now_s - call.progressed_s
    if quiet_s <= call.timeout_s + grace_s:
        return None
    since = f", {quiet_s:.1f}s since a request ended" if call.progressed_s > call.started_s else ""
    what = f" (prefix {call.prefix!r}, {call.kind})" if call.prefix else ""
    return (
        f"delivery to sink {call.sink!r}{what} running for {now_s - call.started_s:.1f}s{since}, "
        f"past its timeout {call.timeout_s:g}s + grace {grace_s:g}s"
    )


_current: ContextVar[tuple[InFlight, Call] | None] = ContextVar("relayd_inflight_call", default=None)


def progressed() -> None:
    """Inside a tracked call (and the tasks it starts): one request ended; its deadline starts again."""
    current = _current.get()
    if current is not None:
        registry, call = current
        call.progressed_s = registry.clock()


class InFlight:
    """The calls in flight now; the loop adds and removes them, the HTTP thread reads them."""

    def __init__(self, clock: Callable[[], float] = time.monotonic) -> None:
        self.clock = clock
        self._lock = threading.Lock()
        self._calls: dict[int, Call] = {}
        self._ids = itertools.count()

    @contextlib.contextmanager
    def track(self, sink: object, prefix: str = "", kind: str = "") -> Iterator[Call]:
        """Count the block as a call to ``sink`` (with ``prefix``'s entries of ``kind``) in flight."""
        now = self.clock()
        name = str(getattr(sink, "name", type(sink).__name__))
        call = Call(name, timeout_of(sink), now, now, prefix, kind)
        key = next(self._ids)
        with self._lock:
            self._calls[key] = call
        token = _current.set((self, call))
        try:
            yield call
        finally:
            _current.reset(token)
            with self._lock:
                del self._calls[key]

    def overruns(self, now_s: float, grace_s: float) -> list[str]:
        """Why each call in flight past its timeout plus ``grace_s`` is hung, longest first."""
        with self._lock:
            calls = sorted(self._calls.values(), key=lambda c: c.progressed_s)
        return [why for call in calls if (why := overrun(call, now_s=now_s, grace_s=grace_s))]


#: The process's registry (``relayd.engine.window`` tracks each ``deliver`` in it).
DELIVERIES: Final = InFlight()
