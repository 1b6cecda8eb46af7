"""Every broker sink hands each envelope's trace context on as its protocol's headers or
attributes: NATS headers, AMQP headers, SQS/SNS message attributes, Redis stream fields (the
script and the one-XADD-each fallback), and a ``--webhook-batch`` request the context its
envelopes share. The batch mixes the three cases: a context ``store`` recorded at commit (an
outbox window's column), one in the event's data, and none."""

from __future__ import annotations

import uuid

import nats
import orjson
import pytest
import redis.asyncio as aioredis
from aiohttp import web
from nats.js.api import StreamConfig
from support.http_receiver import serve_on_this_loop
from support.moto import AWS_ENV, MotoServer, receive_all, subscribe_queue
from support.rabbitmq import RabbitServer, declare, drain

from relayd.envelope.batch import Batch
from relayd.envelope.decode import outbox_envelopes
from relayd.envelope.outbox_window import OutboxWindow
from relayd.sinks import DELIVERED, SinkOptions, SinkSpec, parse_sink_spec
from relayd.sinks.amqp import AmqpSink
from relayd.sinks.aws import SnsSink, SqsSink
from relayd.sinks.nats import NatsSink
from relayd.sinks.redis_stream import RedisStreamSink
from relayd.sinks.webhook import WebhookSink
from relayd.sinks.webhook.options import WebhookOptions
from store import RawEntry

STORED = "00-" + "a" * 32 + "-" + "b" * 16 + "-01"
IN_DATA = "00-" + "c" * 32 + "-" + "d" * 16 + "-01"


def traced_window(prefix: str) -> OutboxWindow:
    """seq 1: a stored context with a tracestate; 2: one in the event's data; 3: none."""
    values = [
        {"t": "a", "e": '{"id":"e1","kind":"K"}', "tc": {"traceparent": STORED, "tracestate": "ro=1"}},
        {"t": "a", "e": orjson.dumps({"id": "e2", "kind": "K", "data": {"traceparent": IN_DATA}}).decode()},
        {"t": "b", "e": '{"id":"e3","kind":"K"}'},
    ]
    entries = [RawEntry(str(seq), seq, orjson.dumps(value)) for seq, value in enumerate(values, 1)]
    window, _, _ = outbox_envelopes(entries, prefix=prefix, attempt=1, relayed_at=1.0)
    return window


def expected(prefix: str) -> dict[str, dict[str, str]]:
    return {
        f"{prefix}:outbox:1": {"traceparent": STORED, "tracestate": "ro=1"},
        f"{prefix}:outbox:2": {"traceparent": IN_DATA},
        f"{prefix}:outbox:3": {},
    }


def trace_of(headers: dict[str, object]) -> dict[str, str]:
    return {name: str(headers[name]) for name in ("traceparent", "tracestate") if name in headers}


@pytest.mark.slow
async def test_nats_messages_carry_the_trace_headers(nats_server, started, prefix: str) -> None:
    connection = await nats.connect(nats_server.url)
    js = connection.jetstream()
    await js.add_stream(StreamConfig(name=prefix, subjects=[f"{prefix}.>"]))
    sink = await started(
        NatsSink(parse_sink_spec(f"nats:{nats_server.url}?subject={prefix}.ev"), SinkOptions())
    )

    outcomes = await sink.deliver(traced_window(prefix))

    messages = [await js.get_msg(prefix, seq) for seq in (1, 2, 3)]
    await connection.close()
    assert outcomes == [DELIVERED] * 3
    assert {m.headers["Nats-Msg-Id"]: trace_of(m.headers) for m in messages} == expected(prefix)


@pytest.mark.slow
async def test_amqp_messages_carry_the_trace_headers(rabbitmq_server: RabbitServer, started, prefix) -> None:
    stem = uuid.uuid4().hex[:10]
    await declare(rabbitmq_server.url, f"x-{stem}", {f"q-{stem}": "ev"})
    spec = f"amqp:{rabbitmq_server.url}?exchange=x-{stem}&routing_key=ev"
    sink = await started(AmqpSink(parse_sink_spec(spec), SinkOptions()))

    outcomes = await sink.deliver(traced_window(prefix))

    got = await drain(rabbitmq_server.url, f"q-{stem}")
    assert outcomes == [DELIVERED] * 3
    assert len(got) == 3  # once each: the dict below would fold a duplicate
    assert {m.message_id: trace_of(m.headers or {}) for m in got} == expected(prefix)


@pytest.mark.slow
@pytest.mark.parametrize("service", ["sqs", "sns"])
async def test_sqs_and_sns_messages_carry_the_trace_attributes(
    moto_server: MotoServer, started, prefix: str, service: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    for name, value in AWS_ENV.items():
        monkeypatch.setenv(name, value)
    name = f"t{uuid.uuid4().hex[:10]}"
    if service == "sqs":
        queue = target = moto_server.create("sqs", name)
        sink = await started(SqsSink(parse_sink_spec(moto_server.spec("sqs", target)), SinkOptions()))
    else:
        target = moto_server.create("sns", name)
        queue = subscribe_queue(moto_server, target, f"{name}-q")
        sink = await started(SnsSink(parse_sink_spec(moto_server.spec("sns", target)), SinkOptions()))

    outcomes = await sink.deliver(traced_window(prefix))

    got = receive_all(moto_server.client("sqs"), queue)
    assert outcomes == [DELIVERED] * 3
    assert len(got) == 3  # once each: the dict below would fold a duplicate
    assert {m.attributes["relayd-id"]: trace_of(m.attributes) for m in got} == expected(prefix)


@pytest.mark.parametrize("scripted", [True, False], ids=["script", "one-xadd-each"])
@pytest.mark.parametrize("routed", [False, True], ids=["one-stream", "per-target"])
async def test_stream_entries_carry_the_trace_fields(
    async_client: aioredis.Redis, started, prefix: str, scripted: bool, routed: bool
) -> None:
    stream = f"{prefix}:ev" + (":{target}" if routed else "")
    spec = parse_sink_spec(f"redis-stream:redis://127.0.0.1:6379/0?stream={stream}&maxlen=100")
    sink = await started(RedisStreamSink(spec, SinkOptions(), client=async_client))
    sink._scripted = scripted  # the fallback a server without scripts gets

    outcomes = await sink.deliver(traced_window(prefix))
    assert sink._scripted is scripted  # the path under test, not a fallback taken on the way

    names = [f"{prefix}:ev:a", f"{prefix}:ev:b"] if routed else [f"{prefix}:ev"]
    entries = [fields for name in names for _, fields in await async_client.xrange(name)]
    assert outcomes == [DELIVERED] * 3
    found = {
        fields[b"id"].decode(): {k.decode(): v.decode() for k, v in fields.items() if k.startswith(b"trace")}
        for fields in entries
    }
    assert found == expected(prefix)
    assert [orjson.loads(fields[b"envelope"]) for fields in entries] == [
        e.body for e in traced_window(prefix)
    ]


async def test_a_webhook_batch_request_carries_the_context_its_envelopes_share(prefix: str) -> None:
    requests: list[tuple[dict[str, str], list[str]]] = []

    async def receive(request: web.Request) -> web.Response:
        body = orjson.loads(await request.read())
        requests.append((trace_of(dict(request.headers)), [e["id"] for e in body["data"]]))
        return web.Response(status=204)

    shared = Batch.of([traced_window(prefix)[0], traced_window(prefix)[0]])  # one context twice
    async with serve_on_this_loop(receive) as url:
        options = SinkOptions(own=WebhookOptions(batch=10))
        sink = WebhookSink(SinkSpec("webhook", url), options)
        await sink.start()
        outcomes = [*await sink.deliver(traced_window(prefix)), *await sink.deliver(shared)]
        await sink.close()

    assert outcomes == [DELIVERED] * 5
    assert len(requests) == 2  # one request per batch
    by_ids = {tuple(ids): headers for headers, ids in requests}
    window_ids = tuple(expected(prefix))
    assert by_ids[window_ids] == {}  # three different contexts: none on the request
    assert by_ids[(window_ids[0], window_ids[0])] == expected(prefix)[window_ids[0]]
