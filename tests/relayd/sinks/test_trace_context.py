"""An event's ``data.traceparent`` reaches the webhook's and Kafka's consumers, where
OpenTelemetry's own W3C propagator extracts the producer's trace; a malformed one is dropped."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

import pytest
from aiohttp import web
from opentelemetry import trace
from opentelemetry.trace.propagation.tracecontext import TraceContextTextMapPropagator
from support.http_receiver import serve_on_this_loop

from relayd.envelope.batch import Batch
from relayd.sinks import DELIVERED, SinkOptions, SinkSpec, parse_sink_spec
from relayd.sinks import trace_context as tc
from relayd.sinks.kafka.sink import KafkaSink
from relayd.sinks.webhook.sink import WebhookSink

from .conftest import deliver_runs, outbox

TRACE_ID = "4bf92f3577b34da6a3ce929d0e0e4736"
TRACEPARENT = f"00-{TRACE_ID}-00f067aa0ba902b7-01"


def traced_batch(prefix: str) -> list:
    return [
        outbox(
            prefix,
            1,
            "a",
            {"id": "e1", "kind": "K", "data": {"traceparent": TRACEPARENT, "tracestate": "ro=1"}},
        ),
        outbox(prefix, 2, "a", {"id": "e2", "kind": "K", "data": {"traceparent": "00-x\r\nEvil: 1"}}),
        outbox(prefix, 3, "b", {"id": "e3", "kind": "K", "data": {"n": 3}}),
    ]


def producer_trace(headers: dict[str, str]) -> tuple[str, str]:
    """The trace id and trace state OpenTelemetry's propagator extracts from ``headers``."""
    context = trace.get_current_span(TraceContextTextMapPropagator().extract(headers)).get_span_context()
    return format(context.trace_id, "032x"), context.trace_state.to_header()


@asynccontextmanager
async def local_receiver(received: dict[str, dict[str, str]]) -> AsyncIterator[str]:
    async def receive(request: web.Request) -> web.Response:
        received[request.headers["webhook-id"]] = dict(request.headers)
        return web.Response(status=204)

    async with serve_on_this_loop(receive) as url:
        yield url


def test_only_a_well_formed_traceparent_is_taken() -> None:
    assert tc.from_event({"data": {"traceparent": TRACEPARENT}}) == {"traceparent": TRACEPARENT}
    assert tc.from_event({"data": {"traceparent": TRACEPARENT.upper()}}) == {}
    assert tc.from_event({"data": {"traceparent": "00-x\r\nEvil: 1"}}) == {}
    assert tc.from_event({"data": {"tracestate": "ro=1"}}) == {}
    assert tc.from_event({"data": "not an object"}) == {}
    assert tc.from_envelope_json(b'{"event":{"data":{"n":1}}}') == {}


async def test_the_webhook_hands_the_producers_trace_to_the_receiver() -> None:
    batch = traced_batch("tr")
    received: dict[str, dict[str, str]] = {}

    async with local_receiver(received) as url:
        sink = WebhookSink(SinkSpec("webhook", url), SinkOptions())
        await sink.start()
        outcomes = await sink.deliver(Batch.of(batch))
        await sink.close()

    assert list(outcomes) == [DELIVERED] * 3
    assert producer_trace(received["tr:outbox:1"]) == (TRACE_ID, "ro=1")
    assert "traceparent" not in received["tr:outbox:2"]
    assert "Evil" not in received["tr:outbox:2"]
    assert "traceparent" not in received["tr:outbox:3"]


@pytest.mark.slow
async def test_kafka_records_carry_the_producers_trace(kafka_broker, started, prefix: str) -> None:
    topic = f"{prefix}-traced"
    kafka_broker.create_topic(topic, partitions=1)
    sink = await started(
        KafkaSink(parse_sink_spec(f"kafka:{kafka_broker.bootstrap}?topic={topic}"), SinkOptions())
    )

    outcomes = await deliver_runs(sink, traced_batch(prefix))

    assert outcomes == [DELIVERED] * 3
    records = kafka_broker.read_topic(topic, 3)
    headers = {
        dict(r.headers())["relayd-id"].decode(): {k: v.decode() for k, v in r.headers()} for r in records
    }
    assert producer_trace(headers[f"{prefix}:outbox:1"]) == (TRACE_ID, "ro=1")
    assert "traceparent" not in headers[f"{prefix}:outbox:2"]
    assert "traceparent" not in headers[f"{prefix}:outbox:3"]
