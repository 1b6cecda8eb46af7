"""``--format cloudevents`` on the broker sinks (NATS, AMQP, SQS, SNS, Kinesis), read back from
the real brokers with the CloudEvents SDK: what a consumer of each gets is the event as committed,
with the attributes docs/sinks.md lists."""

from __future__ import annotations

import uuid
from typing import Any

import nats
import pytest
from cloudevents.core.bindings import amqp as ce_amqp
from cloudevents.core.bindings import http as ce_http
from cloudevents.core.formats.json import JSONFormat
from nats.js.api import StreamConfig
from support.moto import AWS_ENV, MotoServer, kinesis_records, receive_all, subscribe_queue
from support.rabbitmq import RabbitServer, declare, drain

from relayd.envelope.batch import Batch
from relayd.sinks import DELIVERED, SinkOptions, parse_sink_spec, trace_context
from relayd.sinks.amqp import AmqpSink
from relayd.sinks.aws import KinesisSink, SnsSink, SqsSink
from relayd.sinks.nats import NatsSink

from .conftest import deliver_runs
from .test_cloudevents import as_read, envelopes, expected


@pytest.fixture
def _aws_env(monkeypatch: pytest.MonkeyPatch) -> None:
    """Fake credentials and region through the standard chain's environment variables."""
    for name, value in AWS_ENV.items():
        monkeypatch.setenv(name, value)


def options(mode: str = "binary") -> SinkOptions:
    return SinkOptions(output_format="cloudevents", cloudevents_mode=mode)  # type: ignore[arg-type]


@pytest.mark.slow
@pytest.mark.parametrize("mode", ["binary", "structured"])
async def test_nats_messages_parse_with_the_sdk_in_either_mode(
    nats_server, started, prefix: str, mode: str
) -> None:
    """Binary: the data as payload, a ``ce-`` header per attribute (HTTP's encoding, which the
    NATS binding shares); structured: the event, ``Content-Type: application/cloudevents+json``."""
    connection = await nats.connect(nats_server.url)
    jetstream = connection.jetstream()
    await jetstream.add_stream(StreamConfig(name=prefix, subjects=[f"{prefix}.>"]))
    spec = parse_sink_spec(f"nats:{nats_server.url}?subject={prefix}.events")
    sink = await started(NatsSink(spec, options(mode)))
    batch = envelopes(prefix)

    outcomes = await deliver_runs(sink, batch)

    info = await jetstream.stream_info(prefix)
    messages = [await jetstream.get_msg(prefix, seq) for seq in range(1, info.state.last_seq + 1)]
    await connection.close()
    assert outcomes == [DELIVERED] * len(batch)
    for envelope, message in zip(batch, messages, strict=True):
        # the binding's headers only: the timer's Nats-Msg-Id is not ASCII, nats-py reads it as a Header
        headers = {
            k: str(v) for k, v in message.headers.items() if k.lower().startswith(("ce-", "content-type"))
        }
        event = ce_http.from_http(ce_http.HTTPMessage(headers, message.data), JSONFormat())
        assert as_read(event) == expected(envelope, f"relayd://{prefix}")
        if mode == "binary":
            assert "Content-Type" not in headers
            assert headers["ce-datacontenttype"] == "application/json"
        else:
            assert headers == {"Content-Type": "application/cloudevents+json"}


@pytest.mark.parametrize("mode", ["binary", "structured"])
async def test_amqp_messages_parse_with_the_sdk_in_either_mode(
    rabbitmq_server: RabbitServer, started, mode: str
) -> None:
    """Binary: the data as body, ``cloudEvents_<name>`` headers, the content type
    ``application/json``; structured: the event as body, ``application/cloudevents+json``."""
    stem = uuid.uuid4().hex[:10]
    exchange, queue = f"x-{stem}", f"q-{stem}"
    await declare(rabbitmq_server.url, exchange, {queue: "ce.#"})
    spec = parse_sink_spec(f"amqp:{rabbitmq_server.url}?exchange={exchange}&routing_key=ce.{{kind}}")
    sink = await started(AmqpSink(spec, options(mode)))
    batch = envelopes("ce-amqp")

    outcomes = await deliver_runs(sink, batch)

    got = await drain(rabbitmq_server.url, queue)
    assert outcomes == [DELIVERED] * len(batch)
    assert [m.message_id for m in got] == [e.id for e in batch]
    for envelope, message in zip(batch, got, strict=True):
        amqp_message = ce_amqp.AMQPMessage(
            {"content-type": message.content_type}, message.headers, message.body
        )
        event = ce_amqp.from_amqp(amqp_message, JSONFormat())
        assert as_read(event) == expected(envelope, "relayd://ce-amqp")
        if mode == "binary":
            assert message.content_type == "application/json"
            assert message.headers["cloudEvents_id"] == envelope.id
        else:
            assert message.content_type == "application/cloudevents+json"
            # no CloudEvents headers: only the W3C trace context every amqp message carries
            assert message.headers == trace_context.of_batch(Batch.of([envelope]))[0]


def structured(bodies: list[bytes], prefix: str) -> dict[str, dict[str, Any]]:
    """Each structured body as the SDK reads it, by event id."""
    read = [as_read(JSONFormat().read(None, body)) for body in bodies]
    assert all(event["source"] == f"relayd://{prefix}" for event in read)
    return {event["id"]: event for event in read}


@pytest.mark.usefixtures("_aws_env")
async def test_sqs_and_sns_message_bodies_are_structured_cloudevents(
    moto_server: MotoServer, started, prefix: str
) -> None:
    """A standard queue, and a topic read through a queue subscribed to it with raw delivery."""
    queue = moto_server.create("sqs", f"{prefix}-q")
    topic = moto_server.create("sns", f"{prefix}-t")
    subscribed = subscribe_queue(moto_server, topic, f"{prefix}-sub")
    sqs = await started(SqsSink(parse_sink_spec(moto_server.spec("sqs", queue)), options()))
    sns = await started(SnsSink(parse_sink_spec(moto_server.spec("sns", topic)), options()))
    batch = envelopes(prefix)

    outcomes = [*await deliver_runs(sqs, batch), *await deliver_runs(sns, batch)]

    assert outcomes == [DELIVERED] * 2 * len(batch)
    want = {e.id: expected(e, f"relayd://{prefix}") for e in batch}
    for url in (queue, subscribed):
        got = receive_all(moto_server.client("sqs"), url)
        assert structured([m.body.encode() for m in got], prefix) == want
        assert {m.attributes["relayd-id"] for m in got} == set(want)


@pytest.mark.usefixtures("_aws_env")
async def test_kinesis_records_are_structured_cloudevents_keyed_by_the_partition_key(
    moto_server: MotoServer, started, prefix: str
) -> None:
    stream = moto_server.create("kinesis", prefix)
    sink = await started(KinesisSink(parse_sink_spec(moto_server.spec("kinesis", stream)), options()))
    batch = envelopes(prefix)

    outcomes = await deliver_runs(sink, batch)

    records = kinesis_records(moto_server, stream)
    assert outcomes == [DELIVERED] * len(batch)
    assert structured([data for _, data in records], prefix) == {
        e.id: expected(e, f"relayd://{prefix}") for e in batch
    }
    assert [key for key, _ in records] == [e.ordering_key or e.id for e in batch]
