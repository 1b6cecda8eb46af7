"""Start and stop relayd's span export: the OpenTelemetry SDK's batch processor and OTLP/HTTP
exporter, when ``relayd.observability.tracing.config`` says the environment asks for them.

The SDK comes with the ``otel`` extra. Without it, variables that ask for traces get one
warning line with the install command, and relayd relays untraced (as for a variable it
cannot honour: telemetry never stops the relay). The provider is relayd's own, not the global
one: nothing else in the process is traced through it. A batch span links to its envelopes'
producers, at most ``DEFAULT_LINKS`` of them unless ``OTEL_SPAN_LINK_COUNT_LIMIT`` says how
many: a link costs more than relaying an envelope (``relayd.observability.tracing.sink_span``),
and a full window linked to each producer would cost a traced relay most of its rate.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping

import structlog

from relayd import __version__
from relayd.extras import install_command
from relayd.observability.tracing import sink_span
from relayd.observability.tracing.config import choose

log = structlog.get_logger(__name__)

#: The service name when neither OTEL_SERVICE_NAME nor OTEL_RESOURCE_ATTRIBUTES names one.
SERVICE_NAME = "relayd"
#: Links a delivery span carries at most, unless OTEL_SPAN_LINK_COUNT_LIMIT says.
DEFAULT_LINKS = 16
#: The one line printed when the variables ask for traces and the SDK is not installed.
INSTALL_HINT = f"OTEL_* variables ask for traces, which need the otel extra: {install_command('otel')}"


def start_tracing(env: Mapping[str, str] = os.environ) -> Callable[[], None] | None:
    """Export delivery spans if ``env`` asks for it; returns the shutdown (which flushes what
    is pending), or None when tracing stays off."""
    choice = choose(env)
    if choice.problem is not None:
        log.warning("tracing_variables_ignored", reason=choice.problem)
    if not choice.enabled:
        return None
    try:
        from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
        from opentelemetry.sdk.resources import Resource
        from opentelemetry.sdk.trace import SpanLimits, TracerProvider
        from opentelemetry.sdk.trace.export import BatchSpanProcessor
    except ImportError:
        log.warning("tracing_unavailable", hint=INSTALL_HINT)
        return None
    resource = Resource.create()
    if str(resource.attributes.get("service.name", "")).startswith("unknown_service"):
        resource = resource.merge(Resource({"service.name": SERVICE_NAME}))
    limits = SpanLimits()  # the SDK's defaults, or what the OTEL_*_LIMIT variables say
    provider = TracerProvider(resource=resource, span_limits=limits)
    provider.add_span_processor(BatchSpanProcessor(OTLPSpanExporter()))
    max_links = limits.max_links if "OTEL_SPAN_LINK_COUNT_LIMIT" in env else DEFAULT_LINKS
    sink_span.use_tracer(provider.get_tracer("relayd", __version__), max_links=max_links)
    log.info("tracing_started", exporter="otlp")

    def shutdown() -> None:
        sink_span.use_tracer(None)
        provider.shutdown()

    return shutdown
