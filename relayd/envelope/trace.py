"""Pure: the W3C trace context an entry carries, checked, as the ``relayd/1`` envelope's members.

``store`` records the trace context active at commit with each outbox and spawn value, as
``"tc": {"traceparent": ..., "tracestate": ...}`` (``store.trace_context``). relayd hands it on
as the envelope's top-level ``traceparent`` (and ``tracestate``) members, so a consumer of
``relayd/1`` can give the envelope to its W3C propagator as it is, and the sinks send it as
headers or attributes (``relayd.sinks.trace_context``). The value comes from another process: a
``traceparent`` that is not well-formed, or a ``tracestate`` that is not one printable header
line, is dropped, so an entry cannot inject a header. No I/O.
"""

from __future__ import annotations

import re
from typing import Final

import orjson

from store.trace_context import TRACE_KEY

#: ``version-trace_id-parent_id-flags``, lower-case hex (W3C Trace Context, level 1).
TRACEPARENT: Final = re.compile(r"[0-9a-f]{2}-[0-9a-f]{32}-[0-9a-f]{16}-[0-9a-f]{2}")
#: A ``tracestate`` header value: printable ASCII, at most the 512 characters a tracer keeps.
TRACESTATE: Final = re.compile(r"[\x20-\x7e]{1,512}")
#: The context of an entry that carries none: one object, shared, never changed.
NONE: Final[dict[str, str]] = {}


def checked(carrier: object) -> dict[str, str]:
    """``traceparent`` (and ``tracestate``) of a mapping, when well-formed; else ``NONE``."""
    if not isinstance(carrier, dict):
        return NONE
    traceparent = carrier.get("traceparent")
    if type(traceparent) is not str or not TRACEPARENT.fullmatch(traceparent):
        return NONE
    if len(carrier) == 1:
        return carrier  # exactly a well-formed traceparent: the mapping itself will do
    found = {"traceparent": traceparent}
    tracestate = carrier.get("tracestate")
    if type(tracestate) is str and TRACESTATE.fullmatch(tracestate):
        found["tracestate"] = tracestate
    return found


def of_value(stored_value: dict[str, object]) -> dict[str, str]:
    """The trace context a stored outbox or spawn value carries, checked; else ``NONE``."""
    return checked(stored_value.get(TRACE_KEY))


def members(context: dict[str, str]) -> bytes:
    """A checked context as the envelope's members, JSON text to splice before its closing
    brace (``,"traceparent":"…"``); empty for ``NONE``. The ``traceparent`` is hex and dashes
    (checked), so it needs no escaping; a ``tracestate`` may hold a quote and is encoded."""
    if not context:
        return b""
    spliced = b',"traceparent":"' + context["traceparent"].encode() + b'"'
    tracestate = context.get("tracestate")
    return spliced + b',"tracestate":' + orjson.dumps(tracestate) if tracestate else spliced
