"""The span of a sink call: off, the sink is called as it is; on, one PRODUCER span per batch
with the messaging attributes, a link per producer context (carrying the envelope id), the
child of its producer for a batch of one, and an error status when not all was delivered; in a
batch of several, a span for each envelope whose producer is sampled, the child of its producer."""

from __future__ import annotations

from collections.abc import Iterator

import orjson
import pytest
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import SpanKind, StatusCode

from relayd.envelope.decode import outbox_envelopes
from relayd.envelope.outbox_window import OutboxWindow
from relayd.observability.tracing import sink_span
from relayd.sinks.base import DELIVERED, Retry
from relayd.sinks.memory import MemorySink
from store import RawEntry

TRACE = "a" * 32
STORED = f"00-{TRACE}-{'b' * 16}-01"


def window(prefix: str, count: int, *, traced: bool = True) -> OutboxWindow:
    values = [
        {"t": "a", "e": orjson.dumps({"id": f"e{n}", "kind": "K"}).decode()}
        | ({"tc": {"traceparent": STORED.replace("a" * 32, f"{n:032x}")}} if traced and n != 2 else {})
        for n in range(1, count + 1)
    ]
    entries = [RawEntry(str(seq), seq, orjson.dumps(value)) for seq, value in enumerate(values, 1)]
    return outbox_envelopes(entries, prefix=prefix, attempt=1, relayed_at=1.0)[0]


def batch_span(exporter: InMemorySpanExporter) -> ReadableSpan:
    """The one span of the sink call (the envelopes' own spans carry no batch count)."""
    (span,) = [
        s for s in exporter.get_finished_spans() if "messaging.batch.message_count" in (s.attributes or {})
    ]
    return span


def entry_spans(exporter: InMemorySpanExporter) -> list[ReadableSpan]:
    return [
        s
        for s in exporter.get_finished_spans()
        if "messaging.batch.message_count" not in (s.attributes or {})
    ]


@pytest.fixture
def spans() -> Iterator[InMemorySpanExporter]:
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    sink_span.use_tracer(provider.get_tracer("tests"))
    yield exporter
    sink_span.use_tracer(None)


async def test_off_the_sink_is_called_and_no_span_made() -> None:
    sink = MemorySink()
    assert await sink_span.deliver(sink, window("p", 3), "p") == [DELIVERED] * 3
    assert len(sink.delivered) == 3


async def test_a_batch_is_one_span_linked_to_each_producer(spans: InMemorySpanExporter) -> None:
    outcomes = await sink_span.deliver(MemorySink(name="kafka"), window("p", 3), "p")

    span = batch_span(spans)
    assert outcomes == [DELIVERED] * 3
    assert (span.name, span.kind, span.parent) == ("send kafka", SpanKind.PRODUCER, None)
    assert dict(span.attributes or {}) == {
        "messaging.system": "kafka",
        "messaging.destination.name": "kafka",
        "messaging.operation": "publish",
        "messaging.operation.type": "send",
        "messaging.operation.name": "send",
        "messaging.batch.message_count": 3,
        "relayd.prefix": "p",
        "relayd.kind": "outbox",
    }
    assert [(link.context.trace_id, dict(link.attributes or {})) for link in span.links] == [
        (1, {"messaging.message.id": "p:outbox:1"}),
        (3, {"messaging.message.id": "p:outbox:3"}),  # entry 2 carries no context: no link
    ]
    assert span.status.status_code == StatusCode.UNSET


async def test_a_batch_of_one_is_the_child_of_its_producer(spans: InMemorySpanExporter) -> None:
    await sink_span.deliver(MemorySink(), window("p", 1), "p")

    (span,) = spans.get_finished_spans()
    assert span.parent is not None
    assert (span.context.trace_id, span.parent.trace_id, span.parent.is_remote) == (1, 1, True)
    assert span.attributes["messaging.message.id"] == "p:outbox:1"  # type: ignore[index]
    assert list(span.links) == []


async def test_a_batch_not_delivered_whole_is_an_error_with_its_counts(spans: InMemorySpanExporter) -> None:
    sink = MemorySink(lambda envelope: Retry(error="no") if envelope.id.endswith(":2") else DELIVERED)
    await sink_span.deliver(sink, window("p", 3, traced=False), "p")

    (span,) = spans.get_finished_spans()
    assert span.status.status_code == StatusCode.ERROR
    attributes = span.attributes or {}
    # entry 3 shares entry 2's key: held back behind it, a Retry too
    assert [attributes[f"relayd.{name}_count"] for name in ("delivered", "retry", "permanent")] == [1, 2, 0]
    assert list(span.links) == []


async def test_a_sink_that_raises_records_the_exception(spans: InMemorySpanExporter) -> None:
    sink = MemorySink()
    sink.raises = RuntimeError("down")
    with pytest.raises(RuntimeError):
        await sink_span.deliver(sink, window("p", 2), "p")

    span = batch_span(spans)
    assert span.status.status_code == StatusCode.ERROR
    assert [event.name for event in span.events] == ["exception"]
    (entry,) = entry_spans(spans)  # entry 2 carries no context
    assert (entry.attributes["relayd.outcome"], entry.status.status_code) == ("error", StatusCode.ERROR)  # type: ignore[index]


async def test_links_go_to_distinct_producers_up_to_the_limit(spans: InMemorySpanExporter) -> None:
    """Entries 1 and 2 share a producer: one link (entry 1's id); the limit stops at two."""
    shared = {"tc": {"traceparent": STORED}}
    values = [{"t": "a", "e": f'{{"id":"e{n}","kind":"K"}}'} | shared for n in (1, 2)]
    values += [
        {
            "t": "a",
            "e": f'{{"id":"e{n}","kind":"K"}}',
            "tc": {"traceparent": STORED.replace("a" * 32, f"{n:032x}")},
        }
        for n in (3, 4)
    ]
    entries = [RawEntry(str(seq), seq, orjson.dumps(value)) for seq, value in enumerate(values, 1)]
    sink_span.use_tracer(sink_span._tracer, max_links=2)

    await sink_span.deliver(
        MemorySink(), outbox_envelopes(entries, prefix="p", attempt=1, relayed_at=1.0)[0], "p"
    )

    span = batch_span(spans)
    assert [(link.context.trace_id, dict(link.attributes or {})) for link in span.links] == [
        (int(TRACE, 16), {"messaging.message.id": "p:outbox:1"}),
        (3, {"messaging.message.id": "p:outbox:3"}),
    ]
    assert span.attributes["messaging.batch.message_count"] == 4  # type: ignore[index]


async def test_each_envelope_of_a_sampled_producer_gets_its_own_span_in_that_trace(
    spans: InMemorySpanExporter,
) -> None:
    """Entries 1 and 3 have sampled producers, entry 2 none, entry 4 an unsampled one (flags 00):
    two envelope spans, each the child of its producer, with its id and outcome, over the call."""
    values = [
        {"t": "a", "e": f'{{"id":"e{n}","kind":"K"}}'}
        | ({"tc": {"traceparent": f"00-{n:032x}-{'c' * 16}-{flags}"}} if flags else {})
        for n, flags in ((1, "01"), (2, None), (3, "03"), (4, "00"))
    ]
    entries = [RawEntry(str(seq), seq, orjson.dumps(value)) for seq, value in enumerate(values, 1)]
    sink = MemorySink(lambda envelope: Retry(error="no") if envelope.id.endswith(":3") else DELIVERED)

    await sink_span.deliver(sink, outbox_envelopes(entries, prefix="p", attempt=1, relayed_at=1.0)[0], "p")

    batch = batch_span(spans)
    own = entry_spans(spans)
    assert [(s.context.trace_id, s.parent.trace_id, s.parent.span_id, s.parent.is_remote) for s in own] == [  # type: ignore[union-attr]
        (1, 1, int("c" * 16, 16), True),
        (3, 3, int("c" * 16, 16), True),
    ]
    assert [dict(s.attributes or {}) for s in own] == [
        {
            "messaging.system": "memory",
            "messaging.destination.name": "memory",
            "messaging.operation": "publish",
            "messaging.operation.type": "send",
            "messaging.operation.name": "send",
            "messaging.message.id": f"p:outbox:{n}",
            "relayd.prefix": "p",
            "relayd.kind": "outbox",
            "relayd.outcome": outcome,
        }
        for n, outcome in ((1, "delivered"), (3, "retry"))
    ]
    assert [(s.name, s.kind, s.status.status_code) for s in own] == [
        ("send memory", SpanKind.PRODUCER, StatusCode.UNSET),
        ("send memory", SpanKind.PRODUCER, StatusCode.ERROR),
    ]
    for span in own:
        assert batch.start_time <= span.start_time <= span.end_time <= batch.end_time  # type: ignore[operator]


async def test_unsampled_producers_get_no_span_of_their_own(spans: InMemorySpanExporter) -> None:
    values = [
        {"t": "a", "e": f'{{"id":"e{n}","kind":"K"}}', "tc": {"traceparent": f"00-{n:032x}-{'c' * 16}-00"}}
        for n in range(1, 5)
    ]
    entries = [RawEntry(str(seq), seq, orjson.dumps(value)) for seq, value in enumerate(values, 1)]

    await sink_span.deliver(
        MemorySink(), outbox_envelopes(entries, prefix="p", attempt=1, relayed_at=1.0)[0], "p"
    )

    assert len(spans.get_finished_spans()) == 1
    assert len(batch_span(spans).links) == 4
