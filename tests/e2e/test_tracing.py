"""Trace context end to end: a producer commits with ``store`` inside OpenTelemetry SDK spans
(and one event carries ``data.traceparent`` instead); a real ``relayd sweep --once`` exports
its delivery spans with OTLP/HTTP to a local receiver and hands each producer's context on to
a webhook receiver and to a real Kafka-protocol broker's consumer."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field

import pytest
import redis
from aiohttp import web
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
from opentelemetry.sdk.trace import TracerProvider
from support.http_receiver import serve_in_thread

from store import Event, Execution, RedisStore, Status
from tests.e2e.conftest import run_relayd

pytestmark = pytest.mark.slow

TRACER = TracerProvider().get_tracer("tests.e2e.producer")
#: The producer trace of the event that carries it in its data (no span current at its commit).
IN_DATA_TRACE = "4bf92f3577b34da6a3ce929d0e0e4736"


@dataclass
class Backlog:
    """Each envelope id and the trace id of its producer."""

    traces: dict[str, str] = field(default_factory=dict)


def commit_traced(client: redis.Redis, prefix: str, count: int) -> Backlog:
    """``count`` outbox entries and a spawn committed each in a span of its own, and one outbox
    entry whose event carries its producer's ``traceparent`` in its data."""
    store = RedisStore(client, prefix=prefix)
    backlog = Backlog()
    for n in range(count):
        exe = Execution(definition_id="d", status=Status.RUNNING)
        with TRACER.start_as_current_span(f"commit {n}") as span:
            seqs = store.commit(exe, [(f"target-{n % 3}", Event(kind="K", data={"n": n}))])
        backlog.traces[f"{prefix}:outbox:{seqs[0]}"] = f"{span.get_span_context().trace_id:032x}"
    exe = Execution(definition_id="d", status=Status.RUNNING)
    with TRACER.start_as_current_span("spawn") as span:
        store.commit(exe, [], spawns=(("child", "r", {}),))
    backlog.traces[f"{prefix}:spawn:1"] = f"{span.get_span_context().trace_id:032x}"
    traceparent = f"00-{IN_DATA_TRACE}-00f067aa0ba902b7-01"
    seqs = store.commit(
        Execution(definition_id="d", status=Status.RUNNING),
        [("target-x", Event(kind="K", data={"traceparent": traceparent}))],
    )
    backlog.traces[f"{prefix}:outbox:{seqs[0]}"] = IN_DATA_TRACE
    return backlog


@dataclass
class Received:
    """What a local HTTP receiver was sent: each request's headers and body."""

    requests: list[tuple[dict[str, str], bytes]] = field(default_factory=list)


@pytest.fixture
def otlp() -> Iterator[tuple[str, Received]]:
    """An OTLP/HTTP traces endpoint on loopback that records each export request."""
    received = Received()

    async def handle(request: web.Request) -> web.Response:
        received.requests.append((dict(request.headers), await request.read()))
        return web.Response(status=200, content_type="application/x-protobuf", body=b"")

    with serve_in_thread(handle, "/v1/traces") as url:
        yield url, received


def otel_env(endpoint: str) -> dict[str, str]:
    return {
        "OTEL_TRACES_EXPORTER": "otlp",
        "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": endpoint,
        "OTEL_EXPORTER_OTLP_PROTOCOL": "http/protobuf",
        "OTEL_SERVICE_NAME": "relayd-under-test",
    }


@dataclass(frozen=True)
class SpanSeen:
    name: str
    attributes: dict[str, object]
    parent_trace: str | None  # the span's trace id when it has a parent, else None
    links: dict[str, str]  # envelope id (a link's messaging.message.id) -> the link's trace id


def exported_spans(received: Received) -> list[SpanSeen]:
    """Every span of every export request, decoded with OpenTelemetry's own protobuf classes."""
    spans = []
    for headers, body in received.requests:
        assert headers["Content-Type"] == "application/x-protobuf"
        request = ExportTraceServiceRequest()
        request.ParseFromString(body)
        for resource_spans in request.resource_spans:
            service = {a.key: a.value.string_value for a in resource_spans.resource.attributes}[
                "service.name"
            ]
            assert service == "relayd-under-test"
            for scope_spans in resource_spans.scope_spans:
                for span in scope_spans.spans:
                    attributes = {a.key: _value(a.value) for a in span.attributes}
                    links = {_link_message_id(link): link.trace_id.hex() for link in span.links}
                    parent = span.trace_id.hex() if span.parent_span_id else None
                    spans.append(SpanSeen(span.name, attributes, parent, links))
    return spans


def _link_message_id(link: object) -> str:
    return {a.key: a.value.string_value for a in link.attributes}["messaging.message.id"]  # type: ignore[attr-defined]


def _value(value: object) -> object:
    kind = value.WhichOneof("value")  # type: ignore[attr-defined]
    return getattr(value, kind)


def producer_of_each_envelope(spans: list[SpanSeen]) -> dict[str, str]:
    """Envelope id -> the producer trace id relayd's spans name for it (as parent or link)."""
    found: dict[str, str] = {}
    for span in spans:
        if "messaging.message.id" in span.attributes and span.parent_trace is not None:
            found[str(span.attributes["messaging.message.id"])] = span.parent_trace
        found.update(span.links)
    return found


def header_trace(headers: dict[str, str]) -> str | None:
    traceparent = {name.lower(): value for name, value in headers.items()}.get("traceparent")
    return traceparent.split("-")[1] if traceparent else None


def test_webhook_delivery_is_traced_and_hands_on_each_producers_context(redis_server, otlp, prefix) -> None:
    endpoint, exported = otlp
    backlog = commit_traced(redis_server.client(), prefix, 5)
    hooks = Received()

    async def hook(request: web.Request) -> web.Response:
        hooks.requests.append((dict(request.headers), await request.read()))
        return web.Response(status=200)

    with serve_in_thread(hook) as url:
        result = run_relayd(
            "sweep", "--once", "--redis-url", redis_server.url, "--prefix", prefix,
            "--sink", f"webhook:{url}", env=otel_env(endpoint),
        )  # fmt: skip

    assert result.returncode == 0, result.stderr[-2000:]
    received = {orjson_id(body): header_trace(headers) for headers, body in hooks.requests}
    assert len(hooks.requests) == len(backlog.traces)  # once each
    assert received == backlog.traces
    spans = exported_spans(exported)
    assert producer_of_each_envelope(spans) == backlog.traces
    for span in spans:
        assert span.attributes["messaging.system"] == "webhook"
        assert span.attributes["messaging.operation"] == "publish"
        assert span.attributes["relayd.prefix"] == prefix
        assert span.name == f"send {span.attributes['messaging.destination.name']}"
    batches = [span for span in spans if "messaging.batch.message_count" in span.attributes]
    assert sum(int(span.attributes["messaging.batch.message_count"]) for span in batches) == len(
        backlog.traces
    )


def orjson_id(body: bytes) -> str:
    import orjson

    return str(orjson.loads(body)["id"])


def test_kafka_records_carry_each_producers_context(redis_server, kafka_broker, otlp, prefix) -> None:
    endpoint, exported = otlp
    backlog = commit_traced(redis_server.client(), prefix, 5)
    kafka_broker.create_topic(f"{prefix}.traced", partitions=2)

    result = run_relayd(
        "sweep", "--once", "--redis-url", redis_server.url, "--prefix", prefix,
        "--sink", f"kafka:{kafka_broker.bootstrap}?topic={prefix}.traced", env=otel_env(endpoint),
    )  # fmt: skip

    assert result.returncode == 0, result.stderr[-2000:]
    records = kafka_broker.read_topic(f"{prefix}.traced", len(backlog.traces))
    received = {
        dict(record.headers())["relayd-id"].decode(): header_trace(
            {name: value.decode() for name, value in record.headers()}
        )
        for record in records
    }
    assert received == backlog.traces
    spans = exported_spans(exported)
    assert producer_of_each_envelope(spans) == backlog.traces
    assert {span.attributes["messaging.system"] for span in spans} == {"kafka"}


def test_each_sampled_entry_has_one_delivery_span_in_its_producers_trace(
    redis_server, otlp, prefix, tmp_path
) -> None:
    """Entries committed in sampled spans, and three whose producer was not sampled (flags 00 in
    their data): one span per sampled entry, the child of its producer, with its id; none for
    the unsampled ones (they are at most links of a batch span)."""
    endpoint, exported = otlp
    backlog = commit_traced(redis_server.client(), prefix, 12)
    store = RedisStore(redis_server.client(), prefix=prefix)
    unsampled = {}
    for n in range(3):
        trace = f"{n + 1:032x}"
        seqs = store.commit(
            Execution(definition_id="d", status=Status.RUNNING),
            [(f"target-u{n}", Event(kind="K", data={"traceparent": f"00-{trace}-00f067aa0ba902b7-00"}))],
        )
        unsampled[f"{prefix}:outbox:{seqs[0]}"] = trace
    out = tmp_path / "out.jsonl"

    result = run_relayd(
        "sweep", "--once", "--redis-url", redis_server.url, "--prefix", prefix, "--sink", f"jsonl:{out}",
        env=otel_env(endpoint),
    )  # fmt: skip

    assert result.returncode == 0, result.stderr[-2000:]
    assert len(out.read_text().splitlines()) == len(backlog.traces) + len(unsampled)
    spans = exported_spans(exported)
    own = [
        (str(span.attributes["messaging.message.id"]), span.parent_trace)
        for span in spans
        if "messaging.message.id" in span.attributes and span.parent_trace is not None
    ]
    assert sorted(own) == sorted(backlog.traces.items())  # one each, in its producer's trace
    with_ids = {
        str(span.attributes["messaging.message.id"])
        for span in spans
        if "messaging.message.id" in span.attributes
    }
    assert not with_ids & set(unsampled)  # an unsampled entry has no span of its own, rooted or not
    assert any(int(span.attributes["messaging.batch.message_count"]) > 1 for span in spans if
               "messaging.batch.message_count" in span.attributes)  # fmt: skip
    assert all(
        span.attributes["relayd.outcome"] == "delivered"
        for span in spans
        if "relayd.outcome" in span.attributes
    )


def test_a_collector_that_does_not_answer_changes_nothing_but_the_log(redis_server, prefix, tmp_path) -> None:
    """Export fails (a closed port): every entry is still delivered and acked, the exit code is 0."""
    from support.redis_server import free_port

    backlog = commit_traced(redis_server.client(), prefix, 3)
    out = tmp_path / "out.jsonl"

    result = run_relayd(
        "sweep", "--once", "--redis-url", redis_server.url, "--prefix", prefix, "--sink", f"jsonl:{out}",
        env=otel_env(f"http://127.0.0.1:{free_port()}/v1/traces"),
    )  # fmt: skip

    assert result.returncode == 0, result.stderr[-2000:]
    assert {orjson_id(line.encode()) for line in out.read_text().splitlines()} == set(backlog.traces)
    assert redis_server.client().hlen(f"{prefix}:outbox") == 0
    assert "Failed to export" in result.stderr
