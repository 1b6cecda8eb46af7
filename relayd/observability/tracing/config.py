"""Pure: whether the standard OpenTelemetry variables ask relayd to export traces, and why not.

Tracing is off unless asked for: ``OTEL_TRACES_EXPORTER=otlp``, or no ``OTEL_TRACES_EXPORTER``
and an OTLP endpoint (``OTEL_EXPORTER_OTLP_ENDPOINT`` or ``OTEL_EXPORTER_OTLP_TRACES_ENDPOINT``).
``OTEL_SDK_DISABLED=true`` and ``OTEL_TRACES_EXPORTER=none`` turn it off. relayd ships the
OTLP exporter over HTTP only: another exporter or ``OTEL_EXPORTER_OTLP_(TRACES_)PROTOCOL``
other than ``http/protobuf`` leaves tracing off with a reason the caller logs (not an exit:
these variables are often set for a whole fleet, and a relay must not stop over its
telemetry). Sampling (``OTEL_TRACES_SAMPLER``/``_ARG``), the endpoint, headers and
``OTEL_SERVICE_NAME`` are read by the SDK itself.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Final

#: The one exporter and protocol relayd ships (opentelemetry-exporter-otlp-proto-http).
EXPORTER: Final = "otlp"
PROTOCOL: Final = "http/protobuf"
_ENDPOINTS: Final = ("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "OTEL_EXPORTER_OTLP_ENDPOINT")
_PROTOCOLS: Final = ("OTEL_EXPORTER_OTLP_TRACES_PROTOCOL", "OTEL_EXPORTER_OTLP_PROTOCOL")


@dataclass(frozen=True, slots=True)
class TracingChoice:
    """``enabled``: export spans; ``problem``: why variables that ask for traces are not
    honoured (None when nothing asked, or all is well)."""

    enabled: bool
    problem: str | None = None


OFF: Final = TracingChoice(enabled=False)


def choose(env: Mapping[str, str]) -> TracingChoice:
    """What the OTEL_* variables in ``env`` ask for (see the module docstring)."""
    if env.get("OTEL_SDK_DISABLED", "").strip().lower() == "true":
        return OFF
    named = env.get("OTEL_TRACES_EXPORTER")
    if named is None:
        exporters = [EXPORTER] if any(env.get(name) for name in _ENDPOINTS) else []
    else:
        exporters = [part.strip().lower() for part in named.split(",") if part.strip()]
    if not exporters or exporters == ["none"]:
        return OFF
    others = sorted(set(exporters) - {EXPORTER, "none"})
    if EXPORTER not in exporters:
        return TracingChoice(False, f"OTEL_TRACES_EXPORTER={named}: relayd exports with {EXPORTER} only")
    protocol = next((env[name].strip() for name in _PROTOCOLS if env.get(name)), PROTOCOL)
    if protocol != PROTOCOL:
        return TracingChoice(False, f"OTLP protocol {protocol!r}: relayd exports {PROTOCOL} only")
    if others:
        return TracingChoice(True, f"OTEL_TRACES_EXPORTER: {','.join(others)} ignored, {EXPORTER} only")
    return TracingChoice(True)
