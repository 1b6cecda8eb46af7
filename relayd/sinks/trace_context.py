"""Pure W3C trace context of an envelope: ``traceparent`` and ``tracestate`` to hand on.

Two sources, in this order: the event's ``data`` (an engine that writes ``data.traceparent``,
and optionally ``data.tracestate``, into an event), then the envelope's own top-level
members, which carry the trace context ``store`` recorded when the entry was committed
(``relayd.envelope.trace``). The explicit one in the data wins. The webhook sends them as the
``traceparent``/``tracestate`` headers, the broker sinks as message headers or attributes,
CloudEvents as the distributed tracing extension. A value that is not a well-formed W3C
``traceparent`` (or a ``tracestate`` that is not one printable header line) is ignored, so an
entry cannot inject a header. No I/O.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Final

import orjson

from relayd.envelope.batch import Batch
from relayd.envelope.outbox_window import OutboxWindow
from relayd.envelope.trace import NONE, checked

#: What an envelope's JSON must contain before it is worth decoding for a trace context.
_MARKER: Final = b'"traceparent"'


def from_event(event: object) -> dict[str, str]:
    """``traceparent`` (and ``tracestate``) of an event's ``data``, when well-formed; else nothing."""
    return checked(event.get("data")) if isinstance(event, dict) else NONE


def from_body(body: dict[str, object], data: object) -> dict[str, str]:
    """The context to hand on for an envelope ``body`` whose event (or spawn data) is ``data``:
    the data's own, else the one ``store`` recorded at commit (the envelope's members)."""
    return from_event(data) or checked(body)


def from_envelope_json(envelope_json: bytes) -> dict[str, str]:
    """The trace context of a rendered ``relayd/1`` envelope (decoded only when it names one)."""
    if _MARKER not in envelope_json:
        return {}
    envelope = orjson.loads(envelope_json)
    if not isinstance(envelope, dict):
        return {}
    return from_body(envelope, envelope.get("event"))


def of_batch(batch: Batch) -> list[dict[str, str]]:
    """Each envelope's trace context to hand on, in order, from an outbox window's columns
    where it is one (no envelope rendered or built), else from each envelope's body. An
    envelope without one gets ``NONE``, shared: read the contexts, never change them."""
    if isinstance(batch, OutboxWindow):
        if _MARKER not in b"".join(batch.events):  # no event's data names one: checked in C
            return batch.contexts[:]
        columns = zip(batch.events, batch.contexts, strict=True)
        return [_of_window_entry(event, context) for event, context in columns]
    return [from_body(body, body.get("event")) for body in (envelope.body for envelope in batch)]


def _of_window_entry(event_json: bytes, context: dict[str, str]) -> dict[str, str]:
    if _MARKER in event_json:
        return from_event(orjson.loads(event_json)) or context
    return context


def shared(contexts: Sequence[dict[str, str]]) -> dict[str, str]:
    """The context every one of ``contexts`` is, for a message that carries several envelopes
    (a ``--webhook-batch`` request); none when they differ, since each envelope still carries
    its own inside the message."""
    first = contexts[0] if contexts else {}
    return first if all(context == first for context in contexts) else {}
