"""The pubsub sink against the real Pub/Sub emulator: every entry once, per-key order on an
ordered subscription, attributes, topic templates, CloudEvents read back by the SDK, a missing
topic, oversize and bad names; the spec's checks and the CLI's exit 2 without the emulator."""

from __future__ import annotations

import uuid
from collections.abc import Awaitable, Callable

import pytest
from support.pubsub import PROJECT, PubSubEmulator
from typer.testing import CliRunner

from relayd.cli.app import app
from relayd.envelope.batch import Batch
from relayd.errors import ConfigError
from relayd.sinks import DELIVERED, Permanent, Retry, SinkOptions, parse_sink_spec
from relayd.sinks.gcp.sink import PubSubSink
from relayd.sinks.gcp.target import ordering_key, parse_pubsub_target
from relayd.sinks.per_key import HELD_BACK

from .conftest import outbox, timer

pytestmark = pytest.mark.slow

MakeSink = Callable[..., Awaitable[PubSubSink]]


@pytest.fixture
def emulator(pubsub_emulator: PubSubEmulator, monkeypatch: pytest.MonkeyPatch) -> PubSubEmulator:
    monkeypatch.setenv("PUBSUB_EMULATOR_HOST", pubsub_emulator.host)
    return pubsub_emulator


@pytest.fixture
def name() -> str:
    return f"t{uuid.uuid4().hex[:10]}"


@pytest.fixture
def make_sink(started) -> MakeSink:
    async def make(target: str, options: SinkOptions | None = None) -> PubSubSink:
        return await started(PubSubSink(parse_sink_spec(f"pubsub:{target}"), options or SinkOptions()))

    return make


async def test_every_entry_once_in_per_key_order_with_its_attributes(
    emulator: PubSubEmulator, name: str, make_sink: MakeSink
) -> None:
    emulator.topic(name)
    sink = await make_sink(f"projects/{PROJECT}/topics/{name}")
    batch = [outbox("p", seq, f"exe-{seq % 4}" if seq % 9 else None) for seq in range(1, 61)]
    batch[4].body["traceparent"] = "00-" + "a" * 32 + "-" + "b" * 16 + "-01"  # as store recorded it

    outcomes = await sink.deliver(Batch.of(batch))

    assert outcomes == [DELIVERED] * len(batch)
    assert sink.ready()
    got = emulator.pull(name, len(batch))
    by_id = {m.attributes["relayd-id"]: m for m in got}
    assert len(got) == len(batch) == len(by_id)  # every entry once
    for envelope in batch:
        message = by_id[envelope.id]
        assert message.data == envelope.to_json()
        assert message.attributes["relayd-kind"] == "outbox"
        assert message.ordering_key == (envelope.ordering_key or "")
        assert message.attributes.get("traceparent") == envelope.body.get("traceparent")
    for key in {e.ordering_key for e in batch if e.ordering_key}:
        sent = [e.id for e in batch if e.ordering_key == key]
        assert [m.attributes["relayd-id"] for m in got if m.ordering_key == key] == sent


async def test_topic_templates_route_by_kind_prefix_and_target(
    emulator: PubSubEmulator, name: str, make_sink: MakeSink
) -> None:
    emulator.topic(f"{name}.p.outbox.a")
    emulator.topic(f"{name}.p.timer.exe-1")
    sink = await make_sink(f"projects/{PROJECT}/topics/{name}.{{prefix}}.{{kind}}.{{target}}")

    assert await sink.deliver(Batch.of([outbox("p", 1, "a"), outbox("p", 2, "a")])) == [DELIVERED] * 2
    assert await sink.deliver(Batch.of([timer("p", "exe-1", "/s", 10.0)])) == [DELIVERED]

    assert [m.attributes["relayd-id"] for m in emulator.pull(f"{name}.p.outbox.a", 2)] == [
        "p:outbox:1",
        "p:outbox:2",
    ]
    assert len(emulator.pull(f"{name}.p.timer.exe-1", 1)) == 1


async def test_a_missing_topic_is_retry_and_not_ready_until_it_exists(
    emulator: PubSubEmulator, name: str, make_sink: MakeSink
) -> None:
    sink = await make_sink(f"projects/{PROJECT}/topics/{name}")

    outcomes = await sink.deliver(Batch.of([outbox("p", 1, "a"), outbox("p", 2, "a")]))

    assert all(isinstance(outcome, Retry) for outcome in outcomes)
    assert sink.not_ready_reason() == "pubsub refused the request (NOT_FOUND)"
    emulator.topic(name)
    assert await sink.deliver(Batch.of([outbox("p", 1, "a")])) == [DELIVERED]
    assert sink.ready()


async def test_an_illegal_filled_in_name_and_an_oversized_entry_are_permanent(
    emulator: PubSubEmulator, name: str, make_sink: MakeSink
) -> None:
    emulator.topic(f"{name}-ok")
    sink = await make_sink(f"projects/{PROJECT}/topics/{name}-{{target}}")
    huge = outbox("p", 3, "ok", {"id": "e", "kind": "Big", "data": {"pad": "x" * 10_100_000}})
    batch = [
        outbox("p", 1, "bad name"),
        outbox("p", 2, "bad name"),
        huge,
        outbox("p", 4, "ok"),
        outbox("p", 5, "ok"),
    ]

    outcomes = await sink.deliver(Batch.of(batch))

    assert isinstance(outcomes[0], Permanent)
    assert "topic name" in outcomes[0].reason
    assert outcomes[1] == outcomes[0]  # its key's topic name is as illegal
    assert isinstance(outcomes[2], Permanent)
    assert "too large" in outcomes[2].reason
    assert outcomes[3:] == [Retry(error=HELD_BACK)] * 2
    assert sink.ready()


@pytest.mark.parametrize("mode", ["binary", "structured"])
async def test_cloudevents_by_the_pubsub_binding_read_by_the_sdk(
    emulator: PubSubEmulator, name: str, make_sink: MakeSink, mode: str
) -> None:
    """Binary: the data, a ``ce-`` attribute each and ``Content-Type``; structured: the event and
    ``Content-Type: application/cloudevents+json``. The CloudEvents SDK has no Pub/Sub reader:
    its HTTP reader takes the same names (case-insensitive) and body."""
    from cloudevents.core.bindings import http as ce_http
    from cloudevents.core.formats.json import JSONFormat

    from .test_cloudevents import as_read, envelopes, expected

    batch = [e for e in envelopes("ce-ps") if e.kind == "outbox"]
    emulator.topic(name)
    options = SinkOptions(output_format="cloudevents", cloudevents_mode=mode)
    sink = await make_sink(f"projects/{PROJECT}/topics/{name}", options)

    assert await sink.deliver(Batch.of(batch)) == [DELIVERED] * len(batch)

    got = {m.attributes["relayd-id"]: m for m in emulator.pull(name, len(batch))}
    for envelope in batch:
        message = got[envelope.id]
        binding = {
            k: v for k, v in message.attributes.items() if k.lower().startswith(("ce-", "content-type"))
        }
        event = ce_http.from_http(ce_http.HTTPMessage(binding, message.data), JSONFormat())
        assert as_read(event) == expected(envelope, "relayd://ce-ps")
        if mode == "binary":
            assert binding["Content-Type"] == "application/json"
            assert "ce-datacontenttype" not in binding
        else:
            assert binding == {"Content-Type": "application/cloudevents+json"}


async def test_a_request_the_service_calls_invalid_makes_only_the_bad_entry_permanent(
    emulator: PubSubEmulator, name: str, make_sink: MakeSink
) -> None:
    """The emulator checks no attribute limits, so the service's refusal of one message (as it
    refuses, say, an attribute over 1,024 bytes) is played in front of it: the request is refused
    whole, sent again one message at a time, and only the bad one is Permanent."""
    from google.api_core.exceptions import InvalidArgument

    emulator.topic(name)
    sink = await make_sink(f"projects/{PROJECT}/topics/{name}")
    real = sink._client.publish

    async def publish(*, messages, **kwargs):
        if any(m.attributes["relayd-id"] == "p:outbox:2" for m in messages):
            raise InvalidArgument("an attribute is too long")
        return await real(messages=messages, **kwargs)

    sink._client.publish = publish
    batch = [outbox("p", 1, "a"), outbox("p", 2, "b"), outbox("p", 3, "c")]

    outcomes = await sink.deliver(Batch.of(batch))

    assert outcomes[0] == DELIVERED
    assert outcomes[1] == Permanent(reason="pubsub rejected the message (INVALID_ARGUMENT)")
    assert outcomes[2] == DELIVERED
    assert sorted(m.attributes["relayd-id"] for m in emulator.pull(name, 2)) == ["p:outbox:1", "p:outbox:3"]
    assert sink.ready()


async def test_resent_one_by_one_a_key_whose_message_was_not_delivered_holds_its_later_ones(
    emulator: PubSubEmulator, name: str, make_sink: MakeSink
) -> None:
    """The request is refused whole (invalid); sent again one by one, the first message of key
    ``a`` meets an outage (Retry): the later message of ``a`` is held back, never published ahead
    of it, while key ``b`` goes on."""
    from google.api_core.exceptions import InvalidArgument, ServiceUnavailable

    emulator.topic(name)
    sink = await make_sink(f"projects/{PROJECT}/topics/{name}")
    real = sink._client.publish

    async def publish(*, messages, **kwargs):
        ids = [m.attributes["relayd-id"] for m in messages]
        if len(ids) > 1:
            raise InvalidArgument("an attribute is too long")
        if ids == ["p:outbox:1"]:
            raise ServiceUnavailable("try again")
        return await real(messages=messages, **kwargs)

    sink._client.publish = publish
    batch = [outbox("p", 1, "a"), outbox("p", 2, "b"), outbox("p", 3, "a")]

    outcomes = await sink.deliver(Batch.of(batch))

    assert isinstance(outcomes[0], Retry)
    assert outcomes[1] == DELIVERED
    assert outcomes[2] == Retry(error=HELD_BACK)
    assert [m.attributes["relayd-id"] for m in emulator.pull(name, 1)] == ["p:outbox:2"]


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("events", "needs a topic name"),
        ("projects/p/topics/events", "not a Google Cloud project id"),
        ("projects/my-project/topics/ab", "not a legal topic name"),
        ("projects/my-project/topics/goog-events", "not a legal topic name"),
        ("projects/my-project/topics/bad name", "not a legal topic name"),
        ("projects/my-project/topics/1events", "not a legal topic name"),
        ("projects/my-project/topics/events?timeout_s=0", "timeout_s"),
        ("projects/my-project/topics/events?ordering=1", "unknown parameter 'ordering'"),
    ],
    ids=["no-path", "project", "short", "goog", "space", "digit-first", "timeout", "unknown-param"],
)
def test_bad_pubsub_specs_are_one_line_config_errors(text: str, message: str) -> None:
    with pytest.raises(ConfigError, match=message) as caught:
        parse_pubsub_target(text)

    assert "\n" not in str(caught.value)


def test_good_specs_keep_their_template_and_long_keys_are_hashed() -> None:
    target = parse_pubsub_target(
        "projects/example.com:my-project/topics/{prefix}.{kind}.{target}?timeout_s=5"
    )

    assert target.path("p.outbox.a") == "projects/example.com:my-project/topics/p.outbox.a"
    assert target.timeout_s == 5.0
    assert ordering_key("k" * 1024) == "k" * 1024
    assert ordering_key("k" * 1025).startswith("sha256-")


@pytest.mark.usefixtures("restore_logging")
def test_a_bad_topic_name_stops_relayd_with_one_line_and_exit_2() -> None:
    result = CliRunner().invoke(
        app,
        [
            "sweep",
            "--once",
            "--sink",
            "pubsub:projects/my-project/topics/goog-x",
            "--redis-url",
            "redis://127.0.0.1:1",
        ],
        env={"RELAYD_LOG_FORMAT": "json"},
    )

    assert result.exit_code == 2
    assert "not a legal topic name" in result.output
    assert len(result.output.strip().splitlines()) == 1
