"""The kafka sink against a real Kafka-protocol broker (tansu): records, keys, headers, order,
oversize, an unreachable broker, the configuration it builds, and rotated credential and CA files."""

from __future__ import annotations

import contextlib
import datetime as dt
import socket
import socketserver
import threading
from collections import defaultdict
from collections.abc import Callable
from pathlib import Path

import orjson
import pytest
from support.kafka import start_kafka
from support.redis_server import free_port
from support.secret_files import SecretDir
from support.tls import make_pki

from relayd.config.settings import load_settings
from relayd.envelope.batch import Batch
from relayd.errors import ConfigError
from relayd.security.material import Fixed, pem_file, secret_file
from relayd.sinks import DELIVERED, Permanent, Retry, SinkOptions, parse_sink_spec, resolve_sink
from relayd.sinks.kafka.config import KafkaMaterial, producer_config
from relayd.sinks.kafka.options import KafkaOptions
from relayd.sinks.kafka.sink import KafkaSink

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
    options = SinkOptions(
        own=KafkaOptions(username=Fixed("relay"), password=Fixed("s3cret"), ca_file=Path("/ca.pem"))
    )

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
            SinkOptions(own=KafkaOptions(username=Fixed("u"), password=Fixed("p")), allow_plaintext=True),
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


def test_watched_material_gives_the_credentials_and_the_ca_bundle_as_pem_text():
    """With watched files the CA bundle goes to librdkafka as PEM text (every certificate of it),
    not as a path it would read again later."""
    material = KafkaMaterial(username="relay", password="pw-two", ca_pem=b"-----BEGIN CERTIFICATE-----\n")

    config = producer_config(parse_sink_spec("kafka:kafka-1:9093?topic=events"), SinkOptions(), material)

    assert config["security.protocol"] == "sasl_ssl"
    assert (config["sasl.username"], config["sasl.password"]) == ("relay", "pw-two")
    assert config["ssl.ca.pem"] == "-----BEGIN CERTIFICATE-----\n"
    assert "ssl.ca.location" not in config
    assert "pw-two" not in repr(material)


class PlaintextBrokerLibrary:
    """confluent_kafka in the kafka sink's place, for a broker that enforces neither SASL nor TLS
    (tansu here: it has no SASL user without an authenticated admin, and no TLS listener).

    Each producer is first made with the sink's whole configuration (so librdkafka checks the
    material as it would in production, and refuses a bundle it cannot load), which is recorded;
    the producer the sink gets is then made without the SASL and TLS settings, so it reaches the
    plaintext broker. Everything else (flush, close, delivery reports) is the real client's."""

    def __init__(self, library) -> None:
        self._library = library
        self.KafkaException = library.KafkaException
        self.configs: list[dict] = []

    def Producer(self, config: dict):
        checked = self._library.Producer(config)
        checked.flush(0)
        del checked
        self.configs.append(config)
        security = ("sasl.", "ssl.", "security.protocol", "enable.ssl.")
        return self._library.Producer({k: v for k, v in config.items() if not k.startswith(security)})


async def test_rotated_credential_and_ca_files_make_a_new_producer_between_batches_nothing_lost(
    kafka_broker, monkeypatch, tmp_path, prefix
):
    """A rotated password and CA bundle are taken by the next batch on a new producer made with them,
    after the old one is flushed; every record of every batch is in the topic exactly once; an
    unchanged batch keeps the producer; a bundle librdkafka refuses keeps the old producer."""
    import confluent_kafka
    import structlog

    from relayd.sinks.kafka import sink as kafka_module

    library = PlaintextBrokerLibrary(confluent_kafka)
    monkeypatch.setattr(kafka_module, "import_extra", lambda *_, **__: (library,))
    pki = make_pki(tmp_path, now=dt.datetime.now(dt.UTC))
    secrets = SecretDir(tmp_path / "secrets", "kubelet")
    secrets.write({"user": "relay\n", "password": "pw-one\n", "ca.crt": pki.ca_cert.read_bytes()})
    username = secret_file("--kafka-username-file", secrets.path("user"))
    password = secret_file("--kafka-password-file", secrets.path("password"))
    ca = pem_file("--kafka-ca-file", secrets.path("ca.crt"))
    options = SinkOptions(own=KafkaOptions(username=username, password=password, ca=ca))
    kafka_broker.create_topic(f"{prefix}-events", partitions=2)
    sink = KafkaSink(parse_sink_spec(f"kafka:{kafka_broker.bootstrap}?topic={prefix}-events"), options)
    await sink.start()
    batches = [
        [outbox(prefix, seq, f"t-{seq % 3}") for seq in range(n * 50 + 1, n * 50 + 51)] for n in range(4)
    ]
    try:
        first = await sink.deliver(Batch.of(batches[0]))
        both_cas = pki.ca_cert.read_bytes() + pki.wrong_ca_cert.read_bytes()
        secrets.write({"password": "pw-two\n", "ca.crt": both_cas})
        reloads = [password.check(), ca.check()]
        second = await sink.deliver(Batch.of(batches[1]))
        third = await sink.deliver(Batch.of(batches[2]))
        made_after_rotation = len(library.configs)
        unloadable = b"-----BEGIN CERTIFICATE-----\nnot base64\n-----END CERTIFICATE-----\n"
        secrets.write({"ca.crt": unloadable})
        reloads.append(ca.check())
        with structlog.testing.capture_logs() as logs:
            fourth = await sink.deliver(Batch.of(batches[3]))
    finally:
        await sink.close()
    records = kafka_broker.read_topic(f"{prefix}-events", 200)

    assert [first, second, third, fourth] == [[DELIVERED] * 50] * 4
    assert reloads == ["reloaded", "reloaded", "reloaded"]
    assert made_after_rotation == len(library.configs) == 2  # one at start, one for the rotation
    before, after = library.configs
    assert (before["sasl.password"], after["sasl.password"]) == ("pw-one", "pw-two")
    assert before["ssl.ca.pem"] == pki.ca_cert.read_text()
    assert after["ssl.ca.pem"] == both_cas.decode()
    assert [entry["event"] for entry in logs] == ["kafka_material_refused"]
    ids = sorted(dict(record.headers())["relayd-id"].decode() for record in records)
    assert ids == sorted(envelope.id for batch in batches for envelope in batch)


class _CountingRelay(socketserver.ThreadingTCPServer):
    """A TCP relay to a broker counting the bytes clients send through it (the producer's requests).

    Threads, not the test's event loop: the relay must forward while the sink holds the loop.
    """

    daemon_threads = True

    def __init__(self, broker_port: int) -> None:
        super().__init__(("127.0.0.1", 0), _RelayConnection)
        self.broker_port = broker_port
        self.sent = 0
        self._lock = threading.Lock()
        threading.Thread(target=self.serve_forever, daemon=True).start()

    @property
    def port(self) -> int:
        return int(self.server_address[1])

    def count(self, size: int) -> None:
        with self._lock:
            self.sent += size


class _RelayConnection(socketserver.BaseRequestHandler):
    server: _CountingRelay

    def handle(self) -> None:
        client: socket.socket = self.request
        with socket.create_connection(("127.0.0.1", self.server.broker_port)) as broker:
            threading.Thread(target=_pipe, args=(broker, client, None), daemon=True).start()
            _pipe(client, broker, self.server.count)


def _pipe(source: socket.socket, target: socket.socket, count: Callable[[int], None] | None) -> None:
    with contextlib.suppress(OSError):
        while data := source.recv(65536):
            if count is not None:
                count(len(data))
            target.sendall(data)
    with contextlib.suppress(OSError):
        target.shutdown(socket.SHUT_WR)


async def _bytes_sent_with(compression: str, prefix: str) -> int:
    """Deliver one compressible batch through ``--kafka-compression``; the bytes the sink sent."""
    relay = _CountingRelay(free_port())
    with relay:
        broker = start_kafka(port=relay.broker_port, advertised_port=relay.port)
        try:
            topic = f"{prefix}-{compression}"
            broker.create_topic(topic, partitions=1)
            options = load_settings(kafka_compression=compression).sink_options()
            sink = resolve_sink(f"kafka:{broker.bootstrap}?topic={topic}", options)
            await sink.start()
            batch = [outbox(prefix, seq, "same-target") for seq in range(1, 501)]
            try:
                outcomes = await sink.deliver(Batch.of(batch))
            finally:
                await sink.close()
            assert outcomes == [DELIVERED] * len(batch)
            records = broker.read_topic(topic, len(batch))
            assert [r.value() for r in records] == [e.to_json() for e in batch]  # read back as sent
        finally:
            broker.stop()
            relay.shutdown()
    return relay.sent


async def test_kafka_compression_compresses_the_batches_on_the_wire(prefix):
    """``--kafka-compression zstd`` sends the same batch in a fraction of the bytes of ``none``,
    and the records read back unchanged."""
    plain = await _bytes_sent_with("none", prefix)
    compressed = await _bytes_sent_with("zstd", prefix)

    assert compressed * 3 < plain


@pytest.mark.parametrize("codec", ["none", "gzip", "snappy", "lz4", "zstd"])
def test_each_kafka_compression_is_librdkafka_s_compression_type(
    codec: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """From the flag (or ``RELAYD_KAFKA_COMPRESSION``) to ``compression.type``, and librdkafka takes it."""
    import confluent_kafka

    monkeypatch.setenv("RELAYD_KAFKA_COMPRESSION", codec)
    spec = parse_sink_spec("kafka:127.0.0.1:9092?topic=t")

    config = producer_config(spec, SinkOptions(own=load_settings().own_options(KafkaOptions)))

    assert config["compression.type"] == codec
    confluent_kafka.Producer(config)  # raises KafkaException for a value librdkafka does not know


def test_an_unknown_kafka_compression_is_one_config_error() -> None:
    with pytest.raises(ConfigError) as info:
        load_settings(kafka_compression="brotli")

    assert str(info.value).startswith(
        "invalid --kafka-compression (RELAYD_KAFKA_COMPRESSION): Input should be"
    )
