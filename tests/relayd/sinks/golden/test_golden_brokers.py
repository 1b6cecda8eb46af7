"""Golden bytes of the broker sinks against real local servers, per content mode: Kafka (tansu:
each record's topic, key, headers and value, read back), NATS (each message published to the
JetStream subjects: subject, header block and payload as the server forwards them), AMQP (each
``basic.publish`` the sink sends RabbitMQ, on its way in: routing key, flags, properties and
body) and the Pub/Sub emulator (each message's topic, ordering key, attributes and data).

What the server adds of its own is left out: offsets, message ids and publish times, a NATS
message's reply subject (the PubAck inbox); and the Kafka record timestamp, which librdkafka
stamps from the host's clock (the sink sets none).
"""

from __future__ import annotations

import asyncio
import contextlib
import time
import uuid
from collections.abc import AsyncIterator, Iterator
from typing import Any, Final

import pytest
from support.kafka import KafkaBroker, start_kafka
from support.nats import NatsServer, start_nats
from support.pubsub import PROJECT, PubSubEmulator
from support.rabbitmq import RabbitServer, declare

from .conftest import PREFIX, check, deliver_all, deliveries, open_sink, payload

pytestmark = pytest.mark.slow

#: The entries ``deliveries`` hands over, all delivered: what each destination must hold.
SENT: Final = sum(len(batch) for _, batch in deliveries())
KINDS: Final = ("outbox", "spawn", "timer")
CONTENT_MODES: Final[dict[str, dict[str, str]]] = {
    "": {},
    "-cloudevents-binary": {"format": "cloudevents", "cloudevents_mode": "binary"},
    "-cloudevents-structured": {"format": "cloudevents", "cloudevents_mode": "structured"},
}
MODE_IDS: Final = [mode.removeprefix("-") or "relayd" for mode in CONTENT_MODES]
#: Seconds a reader waits, once it has every record, for any the sink sent beyond them.
EXTRA_WAIT_S: Final = 0.2


# -- kafka ------------------------------------------------------------------------------------


@pytest.fixture
def kafka() -> Iterator[KafkaBroker]:
    """A tansu broker of the test's own (it starts in a moment): fixed topic names, nothing else in them."""
    broker = start_kafka()
    try:
        for kind in KINDS:
            broker.create_topic(f"{PREFIX}.{kind}", partitions=1)
        yield broker
    finally:
        broker.stop()


def read_records(broker: KafkaBroker, topics: list[str], count: int) -> list[Any]:
    """Every record of ``topics`` (each a single partition) in topic, then offset order."""
    from confluent_kafka import Consumer, TopicPartition

    consumer = Consumer(
        {"bootstrap.servers": broker.bootstrap, "group.id": "golden", "enable.auto.commit": False}
    )
    records: list[Any] = []
    try:
        consumer.assign([TopicPartition(topic, 0, 0) for topic in topics])
        deadline = time.monotonic() + 30
        while len(records) < count and time.monotonic() < deadline:
            records += [r for r in consumer.consume(count - len(records), 1.0) if r.error() is None]
        records += [r for r in consumer.consume(100, EXTRA_WAIT_S) if r.error() is None]
    finally:
        consumer.close()
    return sorted(records, key=lambda r: (r.topic(), r.offset()))


@pytest.mark.parametrize("mode", list(CONTENT_MODES), ids=MODE_IDS)
async def test_kafka_produces_the_recorded_records(mode: str, kafka: KafkaBroker) -> None:
    spec = f"kafka:{kafka.bootstrap}?topic={{prefix}}.{{kind}}"
    sink = await open_sink(spec, **CONTENT_MODES[mode])
    try:
        await deliver_all(sink)
    finally:
        await sink.close()

    records = read_records(kafka, [f"{PREFIX}.{kind}" for kind in KINDS], SENT)
    sent = [
        {
            "topic": record.topic(),
            "key": None if record.key() is None else payload(record.key()),
            "headers": [[name, payload(value)] for name, value in record.headers() or []],
            "value": payload(record.value()),
        }
        for record in records
    ]
    check(
        f"kafka{mode}",
        {
            "sink": "kafka:127.0.0.1:<port>?topic={prefix}.{kind}",
            "flags": CONTENT_MODES[mode],
            "records": sent,
        },
    )


# -- nats -------------------------------------------------------------------------------------


@pytest.fixture
def nats_own() -> Iterator[NatsServer]:
    """A nats-server of the test's own (it starts in a moment)."""
    server = start_nats()
    try:
        yield server
    finally:
        server.cleanup()


class NatsTap:
    """A bare NATS client subscribed to ``gold.>``: every message published there, its header
    block and payload as the server forwards them (the stream keeps only one copy of a
    redelivery, by its ``Nats-Msg-Id``, so it is read here, where every publish arrives)."""

    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self._reader, self._writer = reader, writer

    @classmethod
    async def open(cls, port: int) -> NatsTap:
        reader, writer = await asyncio.open_connection("127.0.0.1", port)
        assert (await reader.readline()).startswith(b"INFO ")
        writer.write(b'CONNECT {"verbose":false,"headers":true,"protocol":1}\r\nSUB gold.> 1\r\n')
        tap = cls(reader, writer)
        assert await tap.take() == []  # subscribed before anything is published
        return tap

    async def take(self) -> list[dict[str, Any]]:
        """What arrived since the last call: a PING's PONG comes after everything routed before."""
        self._writer.write(b"PING\r\n")
        got: list[dict[str, Any]] = []
        async with asyncio.timeout(30):
            while (line := await self._reader.readline()) != b"PONG\r\n":
                if line == b"PING\r\n":
                    self._writer.write(b"PONG\r\n")
                    continue
                if line.startswith(b"INFO "):  # the server's news about itself
                    continue
                verb, subject, _sid, *rest = line.decode().split()
                # HMSG subject sid [reply-to] header-bytes total-bytes; MSG subject sid [reply-to] bytes.
                # The reply-to is the publisher's inbox for its PubAck, a random name: left out.
                assert verb in {"HMSG", "MSG"}, line
                sizes = [int(size) for size in (rest[-2:] if verb == "HMSG" else rest[-1:])]
                data = await self._reader.readexactly(sizes[-1] + 2)
                header_bytes = sizes[0] if verb == "HMSG" else 0
                got.append(
                    {
                        "subject": subject,
                        # the header block, line by line (it ends with an empty line)
                        "headers": data[:header_bytes].decode().split("\r\n") if header_bytes else None,
                        "payload": payload(data[header_bytes:-2]),
                    }
                )
        return got

    async def close(self) -> None:
        self._writer.close()
        await self._writer.wait_closed()


@pytest.mark.parametrize("mode", list(CONTENT_MODES), ids=MODE_IDS)
async def test_nats_publishes_the_recorded_messages(mode: str, nats_own: NatsServer) -> None:
    import nats
    from nats.js.api import StreamConfig

    connection = await nats.connect(nats_own.url)
    tap = await NatsTap.open(nats_own.port)
    try:
        await connection.jetstream().add_stream(StreamConfig(name="GOLD", subjects=[f"{PREFIX}.>"]))
        sink = await open_sink(
            f"nats:{nats_own.url}?subject={{prefix}}.{{kind}}.{{target}}", **CONTENT_MODES[mode]
        )
        try:
            await deliver_all(sink)
        finally:
            await sink.close()
        sent = await tap.take()
    finally:
        await tap.close()
        await connection.close()

    assert len(sent) == SENT
    check(
        f"nats{mode}",
        {
            "sink": "nats:nats://127.0.0.1:<port>?subject={prefix}.{kind}.{target}",
            "flags": CONTENT_MODES[mode],
            "messages": sent,
        },
    )


# -- amqp -----------------------------------------------------------------------------------

#: Every property of an AMQP 0-9-1 message (the ``basic`` class), in the order of its flags.
AMQP_PROPERTIES: Final = (
    "content_type",
    "content_encoding",
    "headers",
    "delivery_mode",
    "priority",
    "correlation_id",
    "reply_to",
    "expiration",
    "message_id",
    "timestamp",
    "message_type",
    "user_id",
    "app_id",
    "cluster_id",
)


class Recorder:
    """A TCP relay on 127.0.0.1 to ``port`` keeping every byte its clients send: the sink's
    frames as they went out (RabbitMQ behind it confirms them as usual), where a consumer would
    get the broker's own encoding of them. aiormq's codec writes a header table sorted by name,
    so the order of the sink's headers never reaches the wire."""

    def __init__(self, port: int) -> None:
        self.upstream_port = port
        self.sent = bytearray()
        self._tasks: set[asyncio.Task[None]] = set()

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        up_reader, up_writer = await asyncio.open_connection("127.0.0.1", self.upstream_port)
        back = asyncio.create_task(self._pipe(up_reader, writer, None))
        self._tasks.add(back)
        await self._pipe(reader, up_writer, self.sent)
        await back

    @staticmethod
    async def _pipe(
        reader: asyncio.StreamReader, writer: asyncio.StreamWriter, keep: bytearray | None
    ) -> None:
        try:
            while data := await reader.read(65536):
                if keep is not None:
                    keep += data
                writer.write(data)
                await writer.drain()
        except ConnectionError:
            pass
        finally:
            writer.close()

    @contextlib.asynccontextmanager
    async def listening(self) -> AsyncIterator[int]:
        server = await asyncio.start_server(self._serve, "127.0.0.1", 0)
        try:
            yield server.sockets[0].getsockname()[1]
        finally:
            server.close()
            await server.wait_closed()


def amqp_publishes(sent: bytes, exchange: str) -> list[dict[str, Any]]:
    """Each ``basic.publish`` in ``sent`` (a client's bytes: protocol header, then frames) with
    its content header's properties (as set, in flag order; a header table in its own order) and
    its body, decoded with pamqp (aiormq's own codec)."""
    from pamqp import body, commands, frame, header

    publishes: list[dict[str, Any]] = []
    while sent:
        consumed, _channel, value = frame.unmarshal(sent)
        sent = sent[consumed:]
        if isinstance(value, commands.Basic.Publish):
            assert value.exchange == exchange
            publishes.append(
                {"routing_key": value.routing_key, "mandatory": value.mandatory, "immediate": value.immediate}
            )
        elif isinstance(value, header.ContentHeader) and publishes:
            properties = value.properties
            publishes[-1]["properties"] = [
                [name, _amqp_value(getattr(properties, name))]
                for name in AMQP_PROPERTIES
                if getattr(properties, name) is not None
            ]
            publishes[-1]["body"] = b""
        elif isinstance(value, body.ContentBody) and publishes:
            publishes[-1]["body"] += value.value
    for publish in publishes:
        publish["body"] = payload(publish["body"])
    return publishes


def _amqp_value(value: Any) -> Any:
    if isinstance(value, bytes):
        return payload(value)
    if isinstance(value, dict):
        return [[name, _amqp_value(item)] for name, item in value.items()]
    return value if isinstance(value, str | int | float | bool | None) else repr(value)


@pytest.mark.parametrize("mode", list(CONTENT_MODES), ids=MODE_IDS)
async def test_amqp_publishes_the_recorded_messages(mode: str, rabbitmq_server: RabbitServer) -> None:
    """The node is the session's: the exchange and queue are this test's own (the exchange's
    name is the operator's, in the spec, not the sink's choice: checked, not recorded)."""
    exchange, queue = f"gold-x-{uuid.uuid4().hex[:10]}", f"gold-q-{uuid.uuid4().hex[:10]}"
    await declare(rabbitmq_server.url, exchange, {queue: "#"})
    recorder = Recorder(rabbitmq_server.port)
    async with recorder.listening() as port:
        spec = f"amqp:amqp://guest@127.0.0.1:{port}/?exchange={exchange}&routing_key={{prefix}}.{{kind}}.{{target}}"
        sink = await open_sink(spec, **CONTENT_MODES[mode])
        try:
            await deliver_all(sink)
        finally:
            await sink.close()

    sent = amqp_publishes(bytes(recorder.sent), exchange)
    assert len(sent) == SENT
    check(
        f"amqp{mode}",
        {
            "sink": "amqp:amqp://guest@127.0.0.1:<port>/?exchange=<exchange>&routing_key={prefix}.{kind}.{target}",
            "flags": CONTENT_MODES[mode],
            "publishes": sent,
        },
    )


# -- pubsub -----------------------------------------------------------------------------------


@pytest.fixture
def emulator(pubsub_emulator: PubSubEmulator, monkeypatch: pytest.MonkeyPatch) -> PubSubEmulator:
    monkeypatch.setenv("PUBSUB_EMULATOR_HOST", pubsub_emulator.host)
    return pubsub_emulator


def _subscribe(emulator: PubSubEmulator) -> dict[str, str]:
    """A fresh ordered subscription to each kind's topic (made when missing: the emulator is the
    session's, and a new subscription gets only what is published after it)."""
    from google.api_core.exceptions import AlreadyExists

    publisher, subscriber = emulator._clients()
    subscriptions = {}
    for kind in KINDS:
        topic = f"projects/{PROJECT}/topics/{PREFIX}-{kind}"
        with contextlib.suppress(AlreadyExists):
            publisher.create_topic(name=topic)
        name = f"projects/{PROJECT}/subscriptions/golden-{uuid.uuid4().hex[:10]}"
        subscriber.create_subscription(
            request={"name": name, "topic": topic, "enable_message_ordering": True}
        )
        subscriptions[topic.rpartition("/")[2]] = name
    return subscriptions


def _pull(emulator: PubSubEmulator, subscriptions: dict[str, str], count: int) -> list[tuple[str, Any]]:
    """(topic, message) of every message the subscriptions get, until ``count`` came."""
    from google.api_core.exceptions import DeadlineExceeded

    _, subscriber = emulator._clients()
    got: list[tuple[str, Any]] = []
    deadline = time.monotonic() + 30
    extra = False
    while time.monotonic() < deadline and not extra:
        extra = len(got) >= count  # one more round, for anything beyond them
        for topic, subscription in subscriptions.items():
            try:
                reply = subscriber.pull(
                    request={"subscription": subscription, "max_messages": 100}, timeout=EXTRA_WAIT_S
                )
            except DeadlineExceeded:
                continue
            received = list(reply.received_messages)
            if received:
                subscriber.acknowledge(
                    request={"subscription": subscription, "ack_ids": [m.ack_id for m in received]}
                )
                got += [(topic, m.message) for m in received]
    return got


@pytest.mark.parametrize("mode", list(CONTENT_MODES), ids=MODE_IDS)
async def test_pubsub_publishes_the_recorded_messages(mode: str, emulator: PubSubEmulator) -> None:
    """Messages are recorded sorted by topic, entry id and data: the emulator hands out messages
    of different ordering keys in no fixed order. The attributes are a protobuf map, which keeps
    no order: sorted by name."""
    subscriptions = _subscribe(emulator)
    sink = await open_sink(f"pubsub:projects/{PROJECT}/topics/{{prefix}}-{{kind}}", **CONTENT_MODES[mode])
    try:
        await deliver_all(sink)
    finally:
        await sink.close()

    got = _pull(emulator, subscriptions, SENT)
    assert len(got) == SENT
    sent = sorted(
        (
            {
                "topic": topic,
                "ordering_key": message.ordering_key,
                "attributes": sorted([name, value] for name, value in message.attributes.items()),
                "data": payload(message.data),
            }
            for topic, message in got
        ),
        key=lambda m: (m["topic"], dict(m["attributes"])["relayd-id"], m["data"].get("text", "")),
    )
    check(
        f"pubsub{mode}",
        {
            "sink": f"pubsub:projects/{PROJECT}/topics/{{prefix}}-{{kind}}",
            "flags": CONTENT_MODES[mode],
            "messages": sent,
        },
    )
