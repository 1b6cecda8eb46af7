"""CloudEvents ``time`` is the commit time ``store`` stamped on an outbox or spawn entry (``"ct"``),
and the relay's time for an entry without one (harel's, another engine's): through every binding,
read back by the CloudEvents SDK (``cloudevents`` on PyPI), which no one here wrote."""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable
from typing import Any

import orjson
import pytest
from cloudevents.core.base import BaseCloudEvent
from cloudevents.core.bindings import amqp as ce_amqp
from cloudevents.core.bindings import http as ce_http
from cloudevents.core.bindings import kafka as ce_kafka
from cloudevents.core.formats.json import JSONFormat

from relayd.envelope import Envelope
from relayd.envelope.batch import Batch
from relayd.envelope.decode import outbox_envelopes, spawn_envelope
from relayd.envelope.outbox_window import OutboxWindow
from relayd.sinks import cloudevents as ce
from relayd.sinks.gcp.sink import _cloudevent_attributes
from store import RawEntry
from store.codec import stamp_commit_time

PREFIX = "ct"
RELAYED_AT = 1_712_345_700.25
#: What the SDK must read for the relay's time, and for the two commit times stamped below.
RELAYED = dt.datetime(2024, 4, 5, 19, 35, 0, 250_000, dt.UTC)
COMMITTED = 1_712_345_678.123456
COMMITTED_AT = dt.datetime(2024, 4, 5, 19, 34, 38, 123_456, dt.UTC)
LATER = 1_712_345_679.5
LATER_AT = dt.datetime(2024, 4, 5, 19, 34, 39, 500_000, dt.UTC)


def value(target: str | None, event: dict[str, Any], committed: float | None) -> bytes:
    plain = orjson.dumps({"t": target, "e": orjson.dumps(event).decode()})
    return plain if committed is None else stamp_commit_time(plain, committed)


def drained() -> OutboxWindow:
    """A window as a drain reads it: two entries of one commit, one of a later commit, one harel
    wrote (no stamp), and a stamped one whose data names a trace context (the whole way)."""
    entries = [
        RawEntry("1", 1, value("exe-1", {"id": "e1", "kind": "Paid", "data": {}}, COMMITTED)),
        RawEntry("2", 2, value(None, {"id": "e2", "kind": "Paid"}, COMMITTED)),
        RawEntry("3", 3, value("exe-2", {"id": "e3", "kind": "Shipped"}, LATER)),
        RawEntry("4", 4, value("exe-1", {"id": "e4", "kind": "Harel"}, None)),
        RawEntry(
            "5",
            5,
            value(
                "exe-3",
                {"id": "e5", "kind": "T", "data": {"traceparent": f"00-{'a' * 32}-{'b' * 16}-01"}},
                LATER,
            ),
        ),
    ]
    window, good, malformed = outbox_envelopes(entries, prefix=PREFIX, attempt=1, relayed_at=RELAYED_AT)
    assert len(good) == len(entries)
    assert not malformed
    return window


WINDOW_TIMES = [COMMITTED_AT, COMMITTED_AT, LATER_AT, RELAYED, LATER_AT]


def spawns() -> list[Envelope]:
    """A stamped spawn and one harel wrote."""
    spawn = {"p": "exe-1", "c": "exe-1.c", "r": "root", "x": {}}
    return [
        spawn_envelope(
            RawEntry("6", 6, stamp_commit_time(orjson.dumps(spawn), COMMITTED)),
            prefix=PREFIX,
            attempt=1,
            relayed_at=RELAYED_AT,
        ),
        spawn_envelope(
            RawEntry("7", 7, orjson.dumps(spawn)), prefix=PREFIX, attempt=1, relayed_at=RELAYED_AT
        ),
    ]


SPAWN_TIMES = [COMMITTED_AT, RELAYED]

#: A drain's window (its columns), its entries one envelope at a time (a retry's batch), spawns.
BATCHES: dict[str, tuple[Callable[[], Batch], list[dt.datetime]]] = {
    "window": (drained, WINDOW_TIMES),
    "envelopes": (lambda: Batch.of([drained()[i] for i in range(5)]), WINDOW_TIMES),
    "spawns": (lambda: Batch.of(spawns()), SPAWN_TIMES),
}


def http_event(body: bytes, headers: dict[str, str]) -> BaseCloudEvent:
    return ce_http.from_http(ce_http.HTTPMessage(headers, body), JSONFormat())


def times(events: list[BaseCloudEvent]) -> list[dt.datetime]:
    return [event.get_time() for event in events]  # type: ignore[misc]  # the SDK's datetime


@pytest.mark.parametrize("made", list(BATCHES))
@pytest.mark.parametrize("mode", ["binary", "structured"])
def test_http_requests_carry_the_commit_time(made: str, mode: Any) -> None:
    """Binary: a ``ce-time`` header each; structured: the body's ``time``."""
    make, expected = BATCHES[made]

    bodies, headers = ce.http_messages(make(), mode, ce.DEFAULT_SOURCE)

    events = [http_event(body, h) for body, h in zip(bodies, headers, strict=True)]
    assert times(events) == expected


@pytest.mark.parametrize("made", list(BATCHES))
@pytest.mark.parametrize("mode", ["binary", "structured"])
def test_kafka_records_carry_the_commit_time(made: str, mode: Any) -> None:
    """Binary: a ``ce_time`` header each; structured: the value's ``time``."""
    make, expected = BATCHES[made]

    values, headers = ce.kafka_records(make(), mode, ce.DEFAULT_SOURCE)

    events = [
        ce_kafka.from_kafka(ce_kafka.KafkaMessage(dict(h), None, v), JSONFormat())
        for v, h in zip(values, headers, strict=True)
    ]
    assert times(events) == expected


@pytest.mark.parametrize("made", list(BATCHES))
@pytest.mark.parametrize("mode", ["binary", "structured"])
def test_nats_messages_carry_the_commit_time(made: str, mode: Any) -> None:
    """The NATS binding's headers are HTTP's: the SDK's HTTP reader reads them."""
    make, expected = BATCHES[made]

    bodies, headers = ce.nats_renderer("cloudevents", mode, ce.DEFAULT_SOURCE)(make())

    assert headers is not None
    events = [http_event(body, h) for body, h in zip(bodies, headers, strict=True)]
    assert times(events) == expected


@pytest.mark.parametrize("made", list(BATCHES))
@pytest.mark.parametrize("mode", ["binary", "structured"])
def test_amqp_messages_carry_the_commit_time(made: str, mode: Any) -> None:
    """Binary: a ``cloudEvents_time`` property each; structured: the body's ``time``."""
    make, expected = BATCHES[made]

    bodies, content_type, properties = ce.amqp_renderer("cloudevents", mode, ce.DEFAULT_SOURCE)(make())

    events = [
        ce_amqp.from_amqp(
            ce_amqp.AMQPMessage({"content-type": content_type}, properties[i] if properties else {}, b),
            JSONFormat(),
        )
        for i, b in enumerate(bodies)
    ]
    assert times(events) == expected


@pytest.mark.parametrize("made", list(BATCHES))
@pytest.mark.parametrize("mode", ["binary", "structured"])
def test_pubsub_messages_carry_the_commit_time(made: str, mode: str) -> None:
    """What the pubsub sink publishes (``PubSubSink._messages``): the SDK has no Pub/Sub reader,
    its HTTP reader takes the same attribute names."""
    make, expected = BATCHES[made]

    rendered = ce.render(make(), source_template=ce.DEFAULT_SOURCE)

    events = [
        ce_http.from_http(
            ce_http.HTTPMessage(
                _cloudevent_attributes(event, mode), event.data if mode == "binary" else event.structured
            ),
            JSONFormat(),
        )
        for event in rendered
    ]
    assert times(events) == expected


@pytest.mark.parametrize("made", list(BATCHES))
def test_structured_lines_carry_the_commit_time(made: str) -> None:
    """jsonl, redis-stream, SQS, SNS and Kinesis send the structured event."""
    make, expected = BATCHES[made]

    bodies = ce.structured_renderer("cloudevents", ce.DEFAULT_SOURCE)(make())

    assert times([JSONFormat().read(None, body) for body in bodies]) == expected
    assert orjson.loads(bodies[0])["time"] == "2024-04-05T19:34:38.123456Z"  # RFC 3339, UTC, microseconds


def test_a_window_without_commit_times_shares_the_relay_time_and_carries_no_column() -> None:
    """Entries as harel writes them: the relay's time, as before, and no column to fill."""
    window, _, _ = outbox_envelopes(
        [RawEntry(str(s), s, value("exe", {"id": f"e{s}", "kind": "K"}, None)) for s in (1, 2)],
        prefix=PREFIX,
        attempt=1,
        relayed_at=RELAYED_AT,
    )

    bodies = ce.structured_renderer("cloudevents", ce.DEFAULT_SOURCE)(window)

    assert window.committed is None
    assert times([JSONFormat().read(None, body) for body in bodies]) == [RELAYED, RELAYED]


@pytest.mark.parametrize("stamp", [b"1e300", b"-5.0", b'"1712345678.1"', b"true"])
def test_an_implausible_commit_time_is_ignored(stamp: bytes) -> None:
    """The stamp comes from another process: a value that is no plausible epoch time is the relay's."""
    entry = RawEntry("1", 1, value("exe", {"id": "e1", "kind": "K"}, None)[:-1] + b',"ct":' + stamp + b"}")
    window, good, _ = outbox_envelopes([entry], prefix=PREFIX, attempt=1, relayed_at=RELAYED_AT)

    assert good == [entry]
    (body,) = ce.structured_renderer("cloudevents", ce.DEFAULT_SOURCE)(window)
    assert JSONFormat().read(None, body).get_time() == RELAYED


def test_slices_and_extensions_keep_each_entry_with_its_commit_time() -> None:
    """A window read in slices, one mixed with harel's entries, an entry indexed or retried."""
    whole = drained()
    front, back = whole[:2], whole[2:]
    front.extend(back)
    harel = OutboxWindow(PREFIX, 1, RELAYED_AT, ["9"], [9], [None], [b'{"id":"e9","kind":"K"}'])
    harel.extend(whole[:1])  # a window without the column takes one with it: aligned with None
    render = ce.structured_renderer("cloudevents", ce.DEFAULT_SOURCE)

    assert render(front) == render(whole)
    assert times([JSONFormat().read(None, body) for body in render(harel)]) == [RELAYED, COMMITTED_AT]
    assert whole[0].committed_at == COMMITTED
    assert whole[3].committed_at is None
    assert whole[0].restamped(attempt=2, relayed_at=RELAYED_AT + 1).committed_at == COMMITTED
