"""Pure W3C trace context carried by an event: ``traceparent`` and ``tracestate`` from its ``data``.

An engine that writes ``data.traceparent`` (and optionally ``data.tracestate``) into an event
gets the trace handed on: the webhook sends them as the ``traceparent``/``tracestate`` headers,
the kafka sink as record headers, CloudEvents as the distributed tracing extension. A value
that is not a well-formed W3C ``traceparent`` (or a ``tracestate`` that is not one printable
header line) is ignored, so an event's data cannot inject a header. No I/O.
"""

from __future__ import annotations

import re
from typing import Final

import orjson

#: ``version-trace_id-parent_id-flags``, lower-case hex (W3C Trace Context, level 1).
_TRACEPARENT: Final = re.compile(r"[0-9a-f]{2}-[0-9a-f]{32}-[0-9a-f]{16}-[0-9a-f]{2}")
#: A ``tracestate`` header value: printable ASCII, at most the 512 characters a tracer keeps.
_TRACESTATE: Final = re.compile(r"[\x20-\x7e]{1,512}")
#: What an envelope's JSON must contain before it is worth decoding for a trace context.
_MARKER: Final = b'"traceparent"'


def from_event(event: object) -> dict[str, str]:
    """``traceparent`` (and ``tracestate``) of an event's ``data``, when well-formed; else nothing."""
    data = event.get("data") if isinstance(event, dict) else None
    if not isinstance(data, dict):
        return {}
    traceparent = data.get("traceparent")
    if not isinstance(traceparent, str) or not _TRACEPARENT.fullmatch(traceparent):
        return {}
    found = {"traceparent": traceparent}
    tracestate = data.get("tracestate")
    if isinstance(tracestate, str) and _TRACESTATE.fullmatch(tracestate):
        found["tracestate"] = tracestate
    return found


def from_envelope_json(envelope_json: bytes) -> dict[str, str]:
    """The trace context of a rendered ``relayd/1`` envelope's event (decoded only when it names one)."""
    if _MARKER not in envelope_json:
        return {}
    envelope = orjson.loads(envelope_json)
    return from_event(envelope.get("event")) if isinstance(envelope, dict) else {}
