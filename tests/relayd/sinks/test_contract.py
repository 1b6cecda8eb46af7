"""Every built-in sink and the plugin example through one contract (``relayd.sinks.testing``).

Each class says how to open its sink against a real destination (the session's redis-server,
kafka, nats, rabbitmq and moto servers, the Pub/Sub emulator, a scripted HTTP server, a file)
and how to read back what arrived; the cases are the contract's (the null sink, which keeps
nothing, is the one left out). The memory and webhook sinks can be told to refuse
a target, so they also run the cases of mixed outcomes, ``Retry-After`` and ``Permanent``.
"""

from __future__ import annotations

import sqlite3
import sys
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import orjson
import pytest
from structlog.testing import capture_logs
from support.http_server import Reply, serve
from support.moto import AWS_ENV, kinesis_records, receive_all, subscribe_queue
from support.rabbitmq import declare, drain

from relayd.envelope import Envelope
from relayd.sinks import DELIVERED, Outcome, Permanent, Retry, Sink, SinkOptions, parse_sink_spec
from relayd.sinks.jsonl import JsonlSink
from relayd.sinks.log import LogSink
from relayd.sinks.memory import MemorySink
from relayd.sinks.redis_stream.sink import RedisStreamSink
from relayd.sinks.testing import RETRY_AFTER_S, Refusal, RefusingContract, SinkContract
from relayd.sinks.webhook.sink import WebhookSink

ROOT = Path(__file__).resolve().parents[3]


async def _started(sink: Sink) -> Sink:
    await sink.start()
    return sink


class TestMemorySink(RefusingContract):
    @pytest.fixture(autouse=True)
    def _fresh(self) -> None:
        self.refusals: dict[str, Refusal] = {}
        self.sinks: list[MemorySink] = []

    def _answer(self, envelope: Envelope) -> Outcome:
        how = self.refusals.get(envelope.ordering_key or "")
        if how == "permanent":
            return Permanent("refused for good")
        if how is not None:
            return Retry("refused", after_s=RETRY_AFTER_S if how == "retry_after" else None)
        return DELIVERED

    async def refuse(self, key: str, how: Refusal) -> None:
        self.refusals[key] = how

    async def open_sink(self) -> Sink:
        sink = MemorySink(self._answer)
        self.sinks.append(sink)
        return await _started(sink)

    async def received(self, count: int) -> list[str]:
        return [e.id for sink in self.sinks for e in sink.delivered]


class TestWebhookSink(RefusingContract):
    @pytest.fixture(autouse=True)
    def _server(self) -> Iterator[None]:
        self.refusals: dict[str, Refusal] = {}
        with serve(self._reply) as server:
            self.server = server
            yield

    def _reply(self, body: dict[str, Any], nth: int) -> Reply:
        how = self.refusals.get(str(body.get("target_id")))
        if how == "permanent":
            return Reply(422)
        if how == "retry_after":
            return Reply(503, (("Retry-After", str(int(RETRY_AFTER_S))),))
        if how == "retry":
            return Reply(503)
        return Reply(200)

    async def refuse(self, key: str, how: Refusal) -> None:
        self.refusals[key] = how

    async def open_sink(self) -> Sink:
        return await _started(WebhookSink(parse_sink_spec(f"webhook:{self.server.url}"), SinkOptions()))

    async def received(self, count: int) -> list[str]:
        return [
            str(r.body["id"]) for r in self.server.requests if r.body.get("target_id") not in self.refusals
        ]


class TestLogSink(SinkContract):
    @pytest.fixture(autouse=True)
    def _capture(self) -> Iterator[None]:
        with capture_logs() as logs:
            self.logs = logs
            yield

    async def open_sink(self) -> Sink:
        return await _started(LogSink(parse_sink_spec("log"), SinkOptions()))

    async def received(self, count: int) -> list[str]:
        return [str(line["id"]) for line in self.logs if line["event"] == "envelope"]


class TestJsonlSink(SinkContract):
    @pytest.fixture(autouse=True)
    def _path(self, tmp_path: Path) -> None:
        self.path = tmp_path / "out.jsonl"

    async def open_sink(self) -> Sink:
        return await _started(JsonlSink(parse_sink_spec(f"jsonl:{self.path}"), SinkOptions()))

    async def received(self, count: int) -> list[str]:
        return [orjson.loads(line)["id"] for line in self.path.read_bytes().splitlines()]


class TestRedisStreamSink(SinkContract):
    @pytest.fixture(autouse=True)
    def _server(self, redis_server: Any, prefix: str) -> None:
        self.server, self.stream = redis_server, f"{prefix}-out"

    async def open_sink(self) -> Sink:
        spec = f"redis-stream:{self.server.url}?stream={self.stream}"
        return await _started(RedisStreamSink(parse_sink_spec(spec), SinkOptions()))

    async def received(self, count: int) -> list[str]:
        client = self.server.client()
        try:
            return [fields[b"id"].decode() for _, fields in client.xrange(self.stream)]
        finally:
            client.close()


class TestKafkaSink(SinkContract):
    @pytest.fixture(autouse=True)
    def _broker(self, kafka_broker: Any, prefix: str) -> None:
        self.broker, self.topic = kafka_broker, f"{prefix}-contract"
        kafka_broker.create_topic(self.topic, partitions=3)

    async def open_sink(self) -> Sink:
        from relayd.sinks.kafka.sink import KafkaSink

        spec = parse_sink_spec(f"kafka:{self.broker.bootstrap}?topic={self.topic}")
        return await _started(KafkaSink(spec, SinkOptions()))

    async def received(self, count: int) -> list[str]:
        records = self.broker.read_topic(self.topic, count)
        return [dict(r.headers())["relayd-id"].decode() for r in records]


class TestNatsSink(SinkContract):
    @pytest.fixture(autouse=True)
    async def _server(self, nats_server: Any, prefix: str) -> Any:
        import nats
        from nats.js.api import StreamConfig

        self.server, self.stream = nats_server, prefix
        connection = await nats.connect(nats_server.url)
        self.js = connection.jetstream()
        await self.js.add_stream(StreamConfig(name=prefix, subjects=[f"{prefix}.>"]))
        yield
        await connection.close()

    async def open_sink(self) -> Sink:
        from relayd.sinks.nats.sink import NatsSink

        spec = parse_sink_spec(f"nats:{self.server.url}?subject={self.stream}.{{target}}")
        return await _started(NatsSink(spec, SinkOptions()))

    async def received(self, count: int) -> list[str]:
        info = await self.js.stream_info(self.stream)
        messages = [await self.js.get_msg(self.stream, seq) for seq in range(1, info.state.last_seq + 1)]
        return [m.headers["Nats-Msg-Id"] for m in messages]


class TestAmqpSink(SinkContract):
    @pytest.fixture(autouse=True)
    async def _broker(self, rabbitmq_server: Any) -> None:
        stem = uuid.uuid4().hex[:10]
        self.server, self.exchange, self.queue = rabbitmq_server, f"x-{stem}", f"q-{stem}"
        await declare(rabbitmq_server.url, self.exchange, {self.queue: "ev.#"})

    async def open_sink(self) -> Sink:
        from relayd.sinks.amqp.sink import AmqpSink

        spec = f"amqp:{self.server.url}?exchange={self.exchange}&routing_key=ev.{{target}}"
        return await _started(AmqpSink(parse_sink_spec(spec), SinkOptions()))

    async def received(self, count: int) -> list[str]:
        return [str(m.message_id) for m in await drain(self.server.url, self.queue)]


class _AwsContract(SinkContract):
    @pytest.fixture(autouse=True)
    def _aws(self, moto_server: Any, monkeypatch: pytest.MonkeyPatch) -> None:
        for name, value in AWS_ENV.items():
            monkeypatch.setenv(name, value)
        self.moto, self.name = moto_server, f"c{uuid.uuid4().hex[:10]}"


class TestSqsFifoSink(_AwsContract):
    async def open_sink(self) -> Sink:
        from relayd.sinks.aws.sink import SqsSink

        self.url = getattr(self, "url", None) or self.moto.create("sqs", self.name, fifo=True)
        return await _started(SqsSink(parse_sink_spec(self.moto.spec("sqs", self.url)), SinkOptions()))

    async def received(self, count: int) -> list[str]:
        return [m.attributes["relayd-id"] for m in receive_all(self.moto.client("sqs"), self.url)]


class TestSnsFifoSink(_AwsContract):
    async def open_sink(self) -> Sink:
        from relayd.sinks.aws.sink import SnsSink

        if not hasattr(self, "topic"):
            self.topic = self.moto.create("sns", self.name, fifo=True)
            self.queue = subscribe_queue(self.moto, self.topic, self.name, fifo=True)
        return await _started(SnsSink(parse_sink_spec(self.moto.spec("sns", self.topic)), SinkOptions()))

    async def received(self, count: int) -> list[str]:
        return [m.attributes["relayd-id"] for m in receive_all(self.moto.client("sqs"), self.queue)]


class TestKinesisSink(_AwsContract):
    async def open_sink(self) -> Sink:
        from relayd.sinks.aws.sink import KinesisSink

        self.stream = getattr(self, "stream", None) or self.moto.create("kinesis", self.name)
        return await _started(
            KinesisSink(parse_sink_spec(self.moto.spec("kinesis", self.stream)), SinkOptions())
        )

    async def received(self, count: int) -> list[str]:
        return [orjson.loads(data)["id"] for _, data in kinesis_records(self.moto, self.stream)]


class TestPubSubSink(SinkContract):
    @pytest.fixture(autouse=True)
    def _emulator(self, pubsub_emulator: Any, monkeypatch: pytest.MonkeyPatch) -> None:
        monkeypatch.setenv("PUBSUB_EMULATOR_HOST", pubsub_emulator.host)
        self.emulator, self.topic = pubsub_emulator, f"c{uuid.uuid4().hex[:10]}"
        self.path = pubsub_emulator.topic(self.topic)

    async def open_sink(self) -> Sink:
        from relayd.sinks.gcp.sink import PubSubSink

        return await _started(PubSubSink(parse_sink_spec(f"pubsub:{self.path}"), SinkOptions()))

    async def received(self, count: int) -> list[str]:
        return [m.attributes["relayd-id"] for m in self.emulator.pull(self.topic, count)]


class TestPluginExampleSink(SinkContract):
    """``deploy/plugin-example``'s SQLite sink, imported from its source tree."""

    @pytest.fixture(autouse=True)
    def _path(self, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
        monkeypatch.syspath_prepend(str(ROOT / "deploy" / "plugin-example"))
        self.path = tmp_path / "out.db"

    async def open_sink(self) -> Sink:
        from relayd_sqlite_sink import SqliteSink

        sink: Sink = SqliteSink(parse_sink_spec(f"sqlite:{self.path}"), SinkOptions())
        return await _started(sink)

    async def received(self, count: int) -> list[str]:
        with sqlite3.connect(self.path) as db:
            return [row[0] for row in db.execute("SELECT id FROM envelopes ORDER BY rowid")]

    @pytest.fixture(autouse=True)
    def _forget_module(self) -> Iterator[None]:
        yield
        sys.modules.pop("relayd_sqlite_sink", None)


class TestHarelSink(SinkContract):
    """harel's transport on the session's redis-server, read back as a harel worker claims it.

    An untargeted outbox event has no harel execution to go to: confirmed and not published.
    """

    untargeted_received = False

    @pytest.fixture(autouse=True)
    def _server(self, redis_server: Any, prefix: str) -> None:
        self.server, self.prefix = redis_server, prefix

    async def open_sink(self) -> Sink:
        from relayd.sinks.harel.sink import HarelSink

        return await _started(
            HarelSink(
                parse_sink_spec(f"harel:{self.server.url}?handoff_delay=0&timer_grace=0&timer_hold=0"),
                SinkOptions(),
            )
        )

    async def received(self, count: int) -> list[str]:
        import redis.asyncio as aioredis
        from harel.engine.aio_transport import AsyncRedisTransport

        client = aioredis.Redis.from_url(self.server.url)
        transport = AsyncRedisTransport(client, prefix=self.prefix)
        got: list[str] = []
        try:
            while (lease := await transport.claim("contract", 30.0, 0)) is not None:
                # the event id is the contract's "ev-<seq>": back to the envelope id it came in
                got.append(f"{self.prefix}:outbox:{lease.event.id.removeprefix('ev-')}")
                await transport.ack(lease)
        finally:
            await client.aclose()
        return got
