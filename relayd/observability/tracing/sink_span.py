"""The span of one sink call: the engine delivers through ``deliver``, which is the sink's own
``deliver`` when tracing is off (one check per batch) and the same call inside a span when on.

The span follows OpenTelemetry's messaging conventions for a producer: kind ``PRODUCER``, named
``send <destination>``, with ``messaging.system`` (the sink), ``messaging.destination.name``,
``messaging.operation`` ``publish`` (and the newer ``messaging.operation.type`` ``send``) and
``messaging.batch.message_count``. One span per batch, not per envelope: a span per envelope
would cost more than the delivery it describes. Each distinct producer trace context the
batch's envelopes carry (``relayd.sinks.trace_context.of_batch``) is a link of the span, with
the ``messaging.message.id`` (envelope id) of the first envelope that carries it, up to a
limit (``relayd.observability.tracing.setup``): a link costs the relay more than relaying its
envelope does (building it, and encoding it for the export), so links past the limit are never
built. A
batch of one envelope is instead a child of its producer's span, its id the span's
``messaging.message.id``. The outcomes are counted as attributes, and a batch not delivered
whole sets the status to error.

Every producer trace shows its entry's delivery: in a batch of several, an envelope whose
producer context is sampled (the ``traceparent`` flags' sampled bit) also gets a span of its
own, a child of that context, with its ``messaging.message.id`` and its outcome
(``relayd.outcome``; status error when not delivered), spanning the sink call. Those spans are
made after the call returns, with its start and end times, and only for sampled contexts: an
envelope whose producer is not sampled costs nothing beyond the batch span.
"""

from __future__ import annotations

import functools
import time
from collections.abc import Sequence
from types import ModuleType
from typing import TYPE_CHECKING, Final, NamedTuple

from relayd.envelope.batch import Batch
from relayd.sinks.base import Delivered, Outcome, Permanent, Retry, Sink, all_delivered
from relayd.sinks.trace_context import of_batch

if TYPE_CHECKING:
    from opentelemetry.trace import (
        Link,
        SpanContext,
        SpanKind,
        Status,
        StatusCode,
        TraceFlags,
        Tracer,
        TraceState,
    )

#: The ``messaging.system`` of sinks whose system the conventions name; any other is its scheme.
SYSTEMS: Final = {
    "kafka": "kafka",
    "amqp": "rabbitmq",
    "sqs": "aws_sqs",
    "sns": "aws_sns",
    "nats": "nats",
    "redis-stream": "redis",
}

_tracer: Tracer | None = None
_max_links: int | None = None


def use_tracer(tracer: Tracer | None, *, max_links: int | None = None) -> None:
    """Trace every delivery with ``tracer`` from now on (None: no more spans), with at most
    ``max_links`` links a span (None: no limit)."""
    global _tracer, _max_links  # one switch the hot path reads once per batch
    _tracer, _max_links = tracer, max_links


async def deliver(sink: Sink, batch: Batch, prefix: str) -> Sequence[Outcome]:
    """``sink.deliver(batch)``, inside a span when tracing is on."""
    tracer = _tracer
    if tracer is None:
        return await sink.deliver(batch)
    return await _traced(tracer, sink, batch, prefix)


async def _traced(tracer: Tracer, sink: Sink, batch: Batch, prefix: str) -> Sequence[Outcome]:
    otel = _otel()
    count, contexts = len(batch), of_batch(batch)
    destination = sink.name  # the sink's scheme: sinks do not name their topic or queue yet
    attributes: dict[str, str | int] = {
        "messaging.system": SYSTEMS.get(sink.name, sink.name),
        "messaging.destination.name": destination,
        "messaging.operation": "publish",
        "messaging.operation.type": "send",
        "messaging.operation.name": "send",
        "messaging.batch.message_count": count,
        "relayd.prefix": prefix,
        "relayd.kind": batch.kind,
    }
    parent, links = None, []
    if count == 1:
        attributes["messaging.message.id"] = batch[0].id
        producer = _span_context(contexts[0], otel)
        if producer is not None:
            parent = otel.trace.set_span_in_context(otel.trace.NonRecordingSpan(producer))
    else:
        links = _links(batch, contexts, otel, _max_links)
    started_ns = ended_ns = 0  # the sink call's, for the envelopes' own spans
    outcomes: Sequence[Outcome] = ()
    try:
        with tracer.start_as_current_span(
            f"send {destination}", context=parent, kind=otel.PRODUCER, attributes=attributes, links=links
        ) as span:
            started_ns = time.time_ns()
            outcomes = await sink.deliver(batch)
            ended_ns = time.time_ns()
            if not all_delivered(outcomes, count):
                delivered = sum(type(outcome) is Delivered for outcome in outcomes)
                retried = sum(type(outcome) is Retry for outcome in outcomes)
                span.set_attribute("relayd.delivered_count", delivered)
                span.set_attribute("relayd.retry_count", retried)
                span.set_attribute("relayd.permanent_count", len(outcomes) - delivered - retried)
                span.set_status(otel.Status(otel.ERROR, "not every envelope was delivered"))
            return outcomes
    finally:
        if count > 1:
            _entry_spans(
                tracer,
                otel,
                batch,
                contexts,
                batch_attributes=attributes,
                outcomes=outcomes,
                started_ns=started_ns or time.time_ns(),
                ended_ns=ended_ns or time.time_ns(),
            )


def _entry_spans(
    tracer: Tracer,
    otel: _Otel,
    batch: Batch,
    contexts: Sequence[dict[str, str]],
    *,
    batch_attributes: dict[str, str | int],
    outcomes: Sequence[Outcome],
    started_ns: int,
    ended_ns: int,
) -> None:
    """A span for each envelope whose producer context is sampled, its child, over the sink call.

    ``outcomes`` is empty when the sink raised: each such span is then an error too.
    """
    attributes: dict[str, str | int] | None = None
    for index, found in enumerate(contexts):
        # the flags' last hex digit holds the sampled bit (checked: lower-case hex)
        if not found or found["traceparent"][54] not in _SAMPLED:
            continue
        producer = _span_context(found, otel)
        if producer is None:
            continue
        if attributes is None:
            attributes = {k: v for k, v in batch_attributes.items() if k != "messaging.batch.message_count"}
        outcome = outcomes[index] if outcomes else None
        span = tracer.start_span(
            f"send {batch_attributes['messaging.destination.name']}",
            context=otel.trace.set_span_in_context(otel.trace.NonRecordingSpan(producer)),
            kind=otel.PRODUCER,
            attributes={
                **attributes,
                "messaging.message.id": batch[index].id,
                "relayd.outcome": _OUTCOME_NAMES.get(type(outcome), "error"),
            },
            start_time=started_ns,
        )
        if type(outcome) is not Delivered:
            span.set_status(otel.Status(otel.ERROR, "not delivered"))
        span.end(end_time=ended_ns)


#: The last hex digit of a ``traceparent``'s flags when its sampled bit is set.
_SAMPLED: Final = frozenset("13579bdf")
_OUTCOME_NAMES: Final[dict[type, str]] = {Delivered: "delivered", Retry: "retry", Permanent: "permanent"}


class _Otel(NamedTuple):
    """What a traced delivery uses of opentelemetry-api, imported once (an import statement
    per link would cost more than the link)."""

    trace: ModuleType
    Link: type[Link]
    SpanContext: type[SpanContext]
    TraceFlags: type[TraceFlags]
    TraceState: type[TraceState]
    Status: type[Status]
    PRODUCER: SpanKind
    ERROR: StatusCode


@functools.cache
def _otel() -> _Otel:
    from opentelemetry import trace
    from opentelemetry.trace import Link, SpanContext, SpanKind, Status, StatusCode, TraceFlags, TraceState

    return _Otel(
        trace, Link, SpanContext, TraceFlags, TraceState, Status, SpanKind.PRODUCER, StatusCode.ERROR
    )


def _links(batch: Batch, contexts: Sequence[dict[str, str]], otel: _Otel, limit: int | None) -> list[Link]:
    """A link to each distinct producer context, with the id of its first envelope, at most
    ``limit``; none for an envelope without a context. Only a linked envelope's id is made."""
    links: list[Link] = []
    seen: set[str] = set()
    for index, found in enumerate(contexts):
        if limit is not None and len(links) >= limit:
            break
        if not found or found["traceparent"] in seen:
            continue
        seen.add(found["traceparent"])
        producer = _span_context(found, otel)
        if producer is not None:
            links.append(otel.Link(producer, {"messaging.message.id": batch[index].id}))
    return links


def _span_context(found: dict[str, str], otel: _Otel) -> SpanContext | None:
    """The remote span context a checked ``traceparent`` (and ``tracestate``) names; None when
    there is none, or it names the invalid all-zero trace or span."""
    if not found:
        return None
    traceparent = found["traceparent"]  # checked: 2-32-16-2 lower-case hex
    state = found.get("tracestate")
    context = otel.SpanContext(
        int(traceparent[3:35], 16),
        int(traceparent[36:52], 16),
        True,  # remote
        otel.TraceFlags(int(traceparent[53:55], 16)),
        otel.TraceState.from_header([state]) if state else None,
    )
    return context if context.is_valid else None
