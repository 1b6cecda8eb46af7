"""What relayd tells its operators, as they set it: the logs, the HTTP endpoints, the events.

Declared here (``relayd.options``) and read by ``logs``, ``http``, ``health`` with ``inflight``,
and ``events``. Light on purpose: the CLI imports it for its flags.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from relayd.options import OBSERVE, SINKS, option


@dataclass(frozen=True, slots=True)
class LogOptions:
    """How relayd logs (``relayd.observability.logs``)."""

    # None: json unless the log stream is a tty.
    log_format: Literal["json", "console"] | None = option(
        None, "json or console (default: json unless stderr is a terminal).", panel=OBSERVE
    )
    log_level: Literal["debug", "info", "warning", "error"] = option(
        "info", "debug, info, warning or error.", panel=OBSERVE
    )


@dataclass(frozen=True, slots=True)
class ServeOptions:
    """The ``/metrics``, ``/healthz`` and ``/readyz`` endpoints of a sweep, and when it is hung."""

    # A sink call this long past its sink's own timeout is hung: /healthz 503 (relayd.observability.inflight).
    hung_sink_grace: float = option(
        30.0,
        "Seconds a sink call may run past its sink's own timeout before /healthz fails (503).",
        panel=OBSERVE,
        constraints={"ge": 0, "le": 3600},
    )
    # Loopback by default: metrics and health reveal backlog sizes; containers set 0.0.0.0:9464.
    metrics_addr: str = option(
        "127.0.0.1:9464",
        "HOST:PORT for /metrics, /healthz, /readyz (loopback by default; 0.0.0.0:9464 in containers).",
        panel=OBSERVE,
    )


@dataclass(frozen=True, slots=True)
class EventsOptions:
    """Where the operational events go (``relayd.observability.events``)."""

    # Any sink spec; None: nowhere.
    events_sink: str | None = option(
        None,
        "Sink spec receiving a CloudEvent per breaker change, dead letter, pause, takeover.",
        panel=SINKS,
    )
