"""The W3C trace context active at a commit, recorded with each outbox and spawn entry.

When ``opentelemetry-api`` is installed and a span is current while an engine commits, the
store writes that span's context into each outbox and spawn value it commits, as the extra key
``tc``: ``{"traceparent": "00-<trace id>-<span id>-<flags>", "tracestate": "..."}``
(``tracestate`` only when the span has one). harel's own relay and worker read the keys they
know (``t``/``e``, ``p``/``c``/``r``/``x``) and ignore this one; relayd hands it on to every
sink (docs/tracing.md). Without opentelemetry, or outside a span, nothing is added and the
values are exactly harel's.

The context is formatted here rather than by a propagator: the stored form is W3C whatever
propagators the application configured, and formatting costs less than a carrier round-trip.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import TYPE_CHECKING, Final

if TYPE_CHECKING:
    from opentelemetry.trace import SpanContext

#: The extra key of an outbox or spawn value that holds the commit's trace context.
TRACE_KEY: Final = "tc"


@functools.cache
def _current_span_context() -> Callable[[], SpanContext] | None:
    """OpenTelemetry's current-span lookup, found once; None when opentelemetry is not installed."""
    try:
        from opentelemetry import trace
    except ImportError:
        return None

    def span_context() -> SpanContext:
        return trace.get_current_span().get_span_context()

    return span_context


def active() -> dict[str, str] | None:
    """The current span's W3C context (``traceparent``, and ``tracestate`` when it has one), or
    None when opentelemetry is missing or no valid span is current."""
    lookup = _current_span_context()
    if lookup is None:
        return None
    context = lookup()
    if not context.is_valid:
        return None
    found = {"traceparent": f"00-{context.trace_id:032x}-{context.span_id:016x}-{context.trace_flags:02x}"}
    state = context.trace_state.to_header()
    if state:
        found["tracestate"] = state
    return found
