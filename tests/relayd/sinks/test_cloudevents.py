"""``--format cloudevents``: what the webhook, kafka and redis-stream sinks send, read back with the
CloudEvents SDK (``cloudevents`` on PyPI), which no one here wrote."""

from __future__ import annotations

import base64
from typing import Any

import nats
import orjson
import pytest
import standardwebhooks
from aiohttp import web
from cloudevents.core.bindings import http as ce_http
from cloudevents.core.bindings import kafka as ce_kafka
from cloudevents.core.formats.json import JSONFormat
from nats.js.api import StreamConfig
from support.http_receiver import serve_on_this_loop
from support.redis_server import RedisServer

from relayd.envelope import Envelope
from relayd.envelope.batch import Batch
from relayd.envelope.outbox_window import OutboxWindow
from relayd.security.material import Fixed
from relayd.sinks import DELIVERED, SinkOptions, SinkSpec, parse_sink_spec
from relayd.sinks import cloudevents as ce
from relayd.sinks.jsonl import JsonlSink
from relayd.sinks.kafka.sink import KafkaSink
from relayd.sinks.nats.sink import NatsSink
from relayd.sinks.redis_stream.sink import RedisStreamSink
from relayd.sinks.webhook.options import WebhookOptions
from relayd.sinks.webhook.sink import WebhookSink

from .conftest import deliver_runs, outbox, spawn, timer

TRACEPARENT = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"
KEY = b"k" * 32
SECRET = "whsec_" + base64.b64encode(KEY).decode()


def envelopes(prefix: str) -> list[Envelope]:
    """A targeted event carrying a traceparent, an untargeted one without a kind, a spawn, a timer."""
    return [
        outbox(
            prefix, 1, "exe ü", {"id": "ev-1", "kind": "OrderPlaced", "data": {"traceparent": TRACEPARENT}}
        ),
        outbox(prefix, 2, None, {"id": "ev-2", "data": {"n": 2}}),
        spawn(prefix, 3, "exe ü", "exe ü.child", root_path="r", context={"a": 1}),
        timer(prefix, "exe ü", "wait", 1_700_000_123.5),
    ]


def expected(envelope: Envelope, source: str) -> dict[str, Any]:
    """The attributes and data the CloudEvent of ``envelope`` must carry, written from the docs."""
    body = envelope.body
    if envelope.kind == "outbox":
        event: dict[str, Any] = body["event"]  # type: ignore[assignment]
        found = {"type": event.get("kind", "dev.relayd.outbox"), "data": event, "subject": body["target_id"]}
        if "traceparent" in event["data"]:
            found["traceparent"] = event["data"]["traceparent"]
    elif envelope.kind == "spawn":
        data = {name: body[name] for name in ("parent_id", "child_id", "root_path", "context")}
        found = {"type": "dev.relayd.spawn", "data": data, "subject": body["child_id"]}
    else:
        found = {"type": "dev.relayd.timer", "data": body["event"], "subject": body["execution_id"]}
    found |= {
        "id": envelope.id,
        "source": source,
        "specversion": "1.0",
        "datacontenttype": "application/json",
    }
    if "seq" in body:
        found["sequence"] = f"{body['seq']:020d}"
    found["partitionkey"] = envelope.ordering_key
    return {key: value for key, value in found.items() if value is not None}


def as_read(event: Any) -> dict[str, Any]:
    """What the SDK read: every attribute but ``time`` (checked apart), and the data."""
    attributes = {k: v for k, v in event.get_attributes().items() if k != "time"}
    return attributes | {"data": event.get_data()}


@pytest.mark.parametrize("mode", ["binary", "structured"])
async def test_webhook_requests_parse_with_the_sdk_and_verify_with_standard_webhooks(mode: str) -> None:
    """Each request is one CloudEvent by the HTTP binding, signed over the body as sent."""
    batch = envelopes("ce-web")
    options = SinkOptions(
        output_format="cloudevents",
        cloudevents_mode=mode,  # type: ignore[arg-type]
        own=WebhookOptions(secrets=Fixed((KEY,))),
    )
    received: dict[str, tuple[dict[str, str], bytes]] = {}

    async def receive(request: web.Request) -> web.Response:
        received[request.headers["webhook-id"]] = (dict(request.headers), await request.read())
        return web.Response(status=204)

    async with serve_on_this_loop(receive) as url:
        sink = WebhookSink(SinkSpec("webhook", url), options)
        await sink.start()
        outcomes = await deliver_runs(sink, batch)
        await sink.close()

    assert outcomes == [DELIVERED] * len(batch)
    for envelope in batch:
        headers, body = received[envelope.id]
        event = ce_http.from_http(ce_http.HTTPMessage(headers, body), JSONFormat())
        assert as_read(event) == expected(envelope, "relayd://ce-web")
        assert event.get_time().timestamp() == pytest.approx(envelope.body.get("fire_at", 1_700_000_000.0))
        assert headers["Content-Type"] == (
            "application/json" if mode == "binary" else ce.STRUCTURED_CONTENT_TYPE
        )
        standardwebhooks.Webhook(SECRET).verify(body, headers)
        assert headers["webhook-id"] == envelope.id
        assert headers.get("traceparent") == (TRACEPARENT if envelope.id.endswith(":outbox:1") else None)


@pytest.mark.slow
@pytest.mark.parametrize("mode", ["binary", "structured"])
async def test_kafka_records_parse_with_the_sdk(kafka_broker, started, prefix: str, mode: str) -> None:
    """Binary: data as the value, ``ce_`` headers; structured: the event as the value; key = partitionkey."""
    topic = f"{prefix}-ce-{mode}"
    kafka_broker.create_topic(topic, partitions=2)
    options = SinkOptions(output_format="cloudevents", cloudevents_mode=mode)  # type: ignore[arg-type]
    sink = await started(KafkaSink(parse_sink_spec(f"kafka:{kafka_broker.bootstrap}?topic={topic}"), options))
    batch = envelopes(prefix)

    outcomes = await deliver_runs(sink, batch)

    assert outcomes == [DELIVERED] * len(batch)
    records = kafka_broker.read_topic(topic, len(batch))
    by_id = {dict(r.headers())["relayd-id"].decode(): r for r in records}
    for envelope in batch:
        record = by_id[envelope.id]
        message = ce_kafka.KafkaMessage(dict(record.headers()), record.key(), record.value())
        event = ce_kafka.from_kafka(message, JSONFormat())
        assert as_read(event) == expected(envelope, f"relayd://{prefix}")
        assert record.key() == (envelope.ordering_key.encode() if envelope.ordering_key else None)


async def test_stream_entries_are_structured_cloudevents(
    redis_server: RedisServer, started, prefix: str
) -> None:
    """The ``envelope`` field holds the structured event; ``id`` stays the envelope id."""
    options = SinkOptions(output_format="cloudevents", cloudevents_source="urn:shop:{prefix}")
    spec = parse_sink_spec(f"redis-stream:{redis_server.url}?stream={prefix}:out")
    sink = await started(RedisStreamSink(spec, options))
    batch = envelopes(prefix)

    outcomes = await deliver_runs(sink, batch)

    client = redis_server.client()
    entries = [fields for _, fields in client.xrange(f"{prefix}:out")]
    client.close()
    assert outcomes == [DELIVERED] * len(batch)
    assert [e[b"id"].decode() for e in entries] == [e.id for e in batch]
    for envelope, entry in zip(batch, entries, strict=True):
        event = JSONFormat().read(None, entry[b"envelope"])
        assert as_read(event) == expected(envelope, f"urn:shop:{prefix}")


def test_a_prefix_is_percent_encoded_into_the_default_source_and_untargeted_entries_have_no_subject() -> None:
    (rendered,) = ce.render(
        Batch.of([outbox("{shard-7}x", 4, None, {"id": "e", "kind": ""})]), source_template=ce.DEFAULT_SOURCE
    )

    assert rendered.attributes["source"] == "relayd://%7Bshard-7%7Dx"
    assert rendered.attributes["type"] == "dev.relayd.outbox"
    assert "subject" not in rendered.attributes
    assert "partitionkey" not in rendered.attributes
    assert orjson.loads(rendered.structured)["data"] == {"id": "e", "kind": ""}


def test_the_relayd_format_renders_the_envelope_itself() -> None:
    batch = Batch.of([outbox("p", 1, "a")])

    assert ce.structured_renderer("relayd", ce.DEFAULT_SOURCE)(batch) == batch.render()


async def test_jsonl_lines_are_structured_cloudevents(tmp_path, started) -> None:
    path = tmp_path / "out.jsonl"
    sink = await started(JsonlSink(SinkSpec("jsonl", str(path)), SinkOptions(output_format="cloudevents")))
    batch = envelopes("ce-file")

    outcomes = await deliver_runs(sink, batch)

    lines = path.read_bytes().splitlines()
    assert outcomes == [DELIVERED] * len(batch)
    for envelope, line in zip(batch, lines, strict=True):
        assert as_read(JSONFormat().read(None, line)) == expected(envelope, "relayd://ce-file")


@pytest.mark.slow
async def test_nats_messages_are_structured_cloudevents_with_the_envelope_id_for_dedupe(
    nats_server, started, prefix: str
) -> None:
    connection = await nats.connect(nats_server.url)
    jetstream = connection.jetstream()
    await jetstream.add_stream(StreamConfig(name=prefix, subjects=[f"{prefix}.>"]))
    options = SinkOptions(output_format="cloudevents", cloudevents_mode="structured")
    sink = await started(
        NatsSink(parse_sink_spec(f"nats:{nats_server.url}?subject={prefix}.events"), options)
    )
    batch = envelopes(prefix)

    outcomes = await deliver_runs(sink, batch)

    info = await jetstream.stream_info(prefix)
    messages = [await jetstream.get_msg(prefix, seq) for seq in range(1, info.state.last_seq + 1)]
    await connection.close()
    assert outcomes == [DELIVERED] * len(batch)
    # the timer's id holds a non-ASCII execution id, which nats-py reads back as an email Header
    assert [m.headers["Nats-Msg-Id"] for m in messages[:3]] == [e.id for e in batch[:3]]
    for envelope, message in zip(batch, messages, strict=True):
        assert as_read(JSONFormat().read(None, message.data)) == expected(envelope, f"relayd://{prefix}")


def test_a_read_window_renders_from_its_columns_as_its_envelopes_do_one_by_one() -> None:
    events = [
        b'{"id":"e1","kind":"Paid","data":{"traceparent":"' + TRACEPARENT.encode() + b'"}}',
        b'{"id":"e2", "data": {"n": 2}}',
    ]
    window = OutboxWindow("{w}", 2, 1_700_000_000.5, ["7", "8"], [7, 8], ["exe-1", None], events)

    columnar = ce.render(window, source_template=ce.DEFAULT_SOURCE)

    one_by_one = [ce.render_one(window[i], source_template=ce.DEFAULT_SOURCE) for i in range(2)]
    assert [r.attributes for r in columnar] == [r.attributes for r in one_by_one]
    assert [orjson.loads(r.structured) for r in columnar] == [orjson.loads(r.structured) for r in one_by_one]
    assert [r.data for r in columnar] == events  # the event as committed, byte for byte
