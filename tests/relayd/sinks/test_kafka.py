"""The kafka sink against a real Kafka-protocol broker (tansu): records, keys, headers, order,
oversize, an unreachable broker, and the configuration it builds."""

from __future__ import annotations

from collections import defaultdict

import orjson
import pytest
from support.redis_server import free_port

from relayd.batch import Batch
from relayd.errors import ConfigError
from relayd.sinks import DELIVERED, Permanent, Retry, SinkOptions, parse_sink_spec
from relayd.sinks.kafka import KafkaSink, producer_config

from .conftest import outbox, spawn, timer

pytestmark = pytest.mark.slow


@pytest.fixture
def make_sink(started):
    async def make(target: str, options: SinkOptions | None = None) -> KafkaSink:
        return await started(KafkaSink(parse_sink_spec(f"kafka:{target}"), options or SinkOptions()))

    return make


async def test_every_record_carries_its_envelope_key_and_headers_in_target_order(
    kafka_broker, make_sink, prefix
):
    kafka_broker.create_topic(f"{prefix}-events", partitions=4)
    sink = await make_sink(f"{kafka_broker.bootstrap}?topic={{prefix}}-events")
    batch = [outbox(prefix, seq, f"target-{seq % 5}" if seq % 7 else None) for seq in range(1, 201)]

    outcomes = await sink.deliver(Batch.of(batch))

    assert outcomes == [DELIVERED] * len(batch)
    assert sink.ready()
    records = kafka_broker.read_topic(f"{prefix}-events", len(batch))
    by_id = {dict(r.headers())["relayd-id"].decode(): r for r in records}
    assert len(records) == len(batch) == len(by_id)
    for envelope in batch:
        record = by_id[envelope.id]
        assert record.value() == envelope.to_json()
        assert orjson.loads(record.value())["id"] == envelope.id
        assert record.key() == (envelope.ordering_key.encode() if envelope.ordering_key else None)
        assert dict(record.headers())["relayd-kind"] == b"outbox"
    seqs_per_target: dict[bytes, list[int]] = defaultdict(list)
    partitions_per_target: dict[bytes, set[int]] = defaultdict(set)
    for record in records:  # each partition in its own order
        if record.key() is not None:
            seqs_per_target[record.key()].append(orjson.loads(record.value())["seq"])
            partitions_per_target[record.key()].add(record.partition())
    assert set(seqs_per_target) == {f"target-{n}".encode() for n in range(5)}  # the checks below ran
    assert all(seqs == sorted(seqs) for seqs in seqs_per_target.values())
    assert all(len(partitions) == 1 for partitions in partitions_per_target.values())


async def test_topic_templates_route_by_kind_and_target(kafka_broker, make_sink, prefix):
    for topic in (f"{prefix}.timer.exe-1", f"{prefix}.spawn.child-1"):
        kafka_broker.create_topic(topic, partitions=1)
    sink = await make_sink(f"{kafka_broker.bootstrap}?topic={{prefix}}.{{kind}}.{{target}}")

    timers = await sink.deliver(Batch.of([timer(prefix, "exe-1", "root.wait", 1.5)]))
    spawns = await sink.deliver(Batch.of([spawn(prefix, 1, "exe-1", "child-1", root_path="r", context={})]))

    assert timers == spawns == [DELIVERED]
    [timer_record] = kafka_broker.read_topic(f"{prefix}.timer.exe-1", 1)
    [spawn_record] = kafka_broker.read_topic(f"{prefix}.spawn.child-1", 1)
    assert dict(timer_record.headers())["relayd-kind"] == b"timer"
    assert dict(spawn_record.headers())["relayd-id"] == f"{prefix}:spawn:1".encode()


async def test_a_record_too_large_is_permanent_with_its_size_and_the_rest_delivered(
    kafka_broker, make_sink, prefix
):
    kafka_broker.create_topic(f"{prefix}-big", partitions=1)
    sink = await make_sink(f"{kafka_broker.bootstrap}?topic={prefix}-big")
    huge = outbox(prefix, 2, "t", {"id": "ev-2", "kind": "Blob", "data": {"x": "y" * 2_000_000}})

    outcomes = await sink.deliver(Batch.of([outbox(prefix, 1, "t"), huge, outbox(prefix, 3, "u")]))

    assert outcomes[0] == outcomes[2] == DELIVERED
    assert isinstance(outcomes[1], Permanent)
    assert "too large" in outcomes[1].reason
    assert str(len(huge.to_json())) in outcomes[1].reason


async def test_an_illegal_topic_name_for_an_entry_is_permanent(kafka_broker, make_sink, prefix):
    sink = await make_sink(f"{kafka_broker.bootstrap}?topic=t-{{target}}")

    [outcome] = await sink.deliver(Batch.of([outbox(prefix, 1, "not/legal here")]))

    assert isinstance(outcome, Permanent)


async def test_an_unreachable_broker_is_retry_and_not_ready(make_sink, prefix):
    sink = await make_sink(f"127.0.0.1:{free_port()}?topic=nowhere&timeout_s=2")

    outcomes = await sink.deliver(Batch.of([outbox(prefix, 1, "t"), outbox(prefix, 2, None)]))

    assert len(outcomes) == 2
    assert all(isinstance(o, Retry) for o in outcomes)
    assert not sink.ready()


def test_the_producer_is_idempotent_with_acks_all_and_secrets_only_from_options():
    options = SinkOptions(kafka_username="relay", kafka_password="s3cret", kafka_ca_file="/ca.pem")

    config = producer_config(parse_sink_spec("kafka:kafka-1:9093,kafka-2:9093?topic=events"), options)

    assert config["acks"] == "all"
    assert config["enable.idempotence"] is True
    # sparse connections leave a new producer waiting for librdkafka's producer-id retry timer
    assert config["enable.sparse.connections"] is False
    assert config["bootstrap.servers"] == "kafka-1:9093,kafka-2:9093"
    assert config["security.protocol"] == "sasl_ssl"
    assert config["ssl.ca.location"] == "/ca.pem"
    assert config["enable.ssl.certificate.verification"] is True
    assert (config["sasl.username"], config["sasl.password"]) == ("relay", "s3cret")
    assert "s3cret" not in repr(options)


@pytest.mark.parametrize(
    ("target", "options", "message"),
    [
        ("kafka-1:9092?topic=e", SinkOptions(), "needs --allow-plaintext"),
        (
            "kafka-1:9092?topic=e",
            SinkOptions(kafka_username="u", kafka_password="p", allow_plaintext=True),
            "refusing to send kafka credentials over plaintext",
        ),
        ("kafka-1?topic=e", SinkOptions(), "HOST:PORT"),
        ("127.0.0.1:9092", SinkOptions(), "needs a topic"),
        ("127.0.0.1:9092?topic=a b", SinkOptions(), "not a legal Kafka topic"),
        ("127.0.0.1:9092?topic=e&acks=1", SinkOptions(), "unknown parameter 'acks'"),
        ("127.0.0.1:9092?topic=e&timeout_s=0", SinkOptions(), "timeout_s"),
    ],
    ids=[
        "plaintext-remote",
        "credentials-plaintext",
        "no-port",
        "no-topic",
        "bad-topic",
        "unknown-param",
        "timeout",
    ],
)
def test_a_spec_that_cannot_work_is_one_config_error(target, options, message):
    with pytest.raises(ConfigError, match=message) as caught:
        KafkaSink(parse_sink_spec(f"kafka:{target}"), options)

    assert "\n" not in str(caught.value)
