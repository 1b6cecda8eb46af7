"""A read window's CloudEvents come from its columns by a faster path than one envelope at a time
(``relayd.sinks.cloudevents``); whatever the window holds, that path must give the same events."""

from __future__ import annotations

from typing import Any

import orjson
import pytest

from relayd.envelope.batch import Batch
from relayd.envelope.decode import outbox_envelopes
from relayd.envelope.outbox_window import OutboxWindow
from relayd.sinks import cloudevents as ce
from store import RawEntry
from store.codec import stamp_commit_time

TRACEPARENT = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"
SOURCES = (ce.DEFAULT_SOURCE, 'urn:"shop"/ü/{prefix}')
MADE = ("by hand", "by a read", "by a stamped read")


def window() -> OutboxWindow:
    """Events of every shape a window can hold, to targets that JSON must escape, under a prefix
    that the id, the source and JSON must all escape."""
    events: list[dict[str, Any]] = [
        {"id": "e1", "kind": "OrderPlaced", "data": {"n": 1}},
        {"id": "e2", "kind": "", "data": {}},
        {"id": "e3", "kind": 'Ünïcode "kind"'},
        {"id": "e4", "kind": "Traced", "data": {"traceparent": TRACEPARENT, "tracestate": "a=1"}},
        {"id": "e5", "kind": "BadTrace", "data": {"traceparent": "not one"}},
        {"id": "e6", "kind": "Mentions", "data": {"note": "traceparent"}},
        {"id": "e7", "kind": "OrderPlaced", "data": {"nested": {"deep": [1, "x"]}}},
    ]
    targets = ["exe-1", None, 'exe "quoted" ü', "exe-1", None, "exe\\2", "exe-1"]
    seqs = [1, 2, 30, 400, 5_000, 60_000, 2**63 - 1]
    texts = [orjson.dumps(event) for event in events]
    texts[0] = b'{"id": "e1",  "kind":"OrderPlaced", "data": {"n": 1}}'  # as committed, spaces kept
    return OutboxWindow('{p}"ü', 3, 1_700_000_000.25, [str(s) for s in seqs], seqs, targets, texts)


def read(columns: OutboxWindow, *, stamped: bool = False) -> OutboxWindow:
    """The same entries as a drain reads them: a window carrying the shapes checked at read;
    ``stamped``, most with the commit time ``store`` writes (one commit's two, then another's)."""
    entries = [
        RawEntry(field, seq, orjson.dumps({"t": target, "e": event.decode()}))
        for field, seq, target, event in zip(
            columns.fields, columns.seqs, columns.targets, columns.events, strict=True
        )
    ]
    if stamped:
        for index in range(len(entries) - 1):  # the last one as harel writes it
            field, seq, stored = entries[index]
            entries[index] = RawEntry(field, seq, stamp_commit_time(stored, 1_700_000_000.5 + index // 2))
    window, _, malformed = outbox_envelopes(
        entries, prefix=columns.prefix, attempt=columns.attempt, relayed_at=columns.relayed_at
    )
    assert not malformed
    assert window.shapes is not None
    assert (window.committed is not None) == stamped
    return window


def made_as(made: str) -> OutboxWindow:
    return window() if made == "by hand" else read(window(), stamped=made == "by a stamped read")


def one_by_one(columns: OutboxWindow) -> Batch:
    """The window's envelopes as a plain batch: rendered one envelope at a time."""
    return Batch.of([columns[index] for index in range(len(columns))])


@pytest.mark.parametrize("made", MADE)
@pytest.mark.parametrize("source", SOURCES)
def test_structured_events_of_a_window_are_those_of_its_envelopes(source: str, made: str) -> None:
    """A window read from the store brings its events' shapes; one made by hand has none."""
    columns = made_as(made)

    fast = ce.structured_renderer("cloudevents", source)(columns)

    slow = ce.structured_renderer("cloudevents", source)(one_by_one(columns))
    assert [orjson.loads(body) for body in fast] == [orjson.loads(body) for body in slow]
    for body, event in zip(fast, columns.events, strict=True):
        assert body.endswith(b',"data":' + event + b"}")  # the event as committed, byte for byte
    assert orjson.loads(fast[3])["traceparent"] == TRACEPARENT
    assert "traceparent" not in orjson.loads(fast[4])


@pytest.mark.parametrize("made", MADE)
@pytest.mark.parametrize("source", SOURCES)
@pytest.mark.parametrize("mode", ["binary", "structured"])
def test_kafka_records_of_a_window_are_those_of_its_envelopes(source: str, mode: Any, made: str) -> None:
    columns = made_as(made)

    values, headers = ce.kafka_records(columns, mode, source)

    slow_values, slow_headers = ce.kafka_records(one_by_one(columns), mode, source)
    assert headers == slow_headers  # names, values and order
    assert [orjson.loads(v) for v in values] == [orjson.loads(v) for v in slow_values]
    if mode == "binary":
        assert values == columns.events
    assert ("traceparent", TRACEPARENT.encode()) in headers[3]
    assert all(name != "traceparent" for name, _ in headers[4])


@pytest.mark.parametrize("made", MADE)
@pytest.mark.parametrize("source", SOURCES)
@pytest.mark.parametrize("binding", ["nats", "amqp"])
def test_nats_and_amqp_binary_messages_of_a_window_are_those_of_its_envelopes(
    source: str, binding: str, made: str
) -> None:
    """The data as committed, and every header (percent-encoded for NATS) as one envelope gives."""
    columns = made_as(made)

    if binding == "nats":
        render = ce.nats_renderer("cloudevents", "binary", source)
        (values, headers), (slow_values, slow_headers) = render(columns), render(one_by_one(columns))
    else:
        render_amqp = ce.amqp_renderer("cloudevents", "binary", source)
        (values, content, headers), (slow_values, _, slow_headers) = (
            render_amqp(columns),
            render_amqp(one_by_one(columns)),
        )
        assert content == "application/json"

    assert headers == slow_headers
    assert values[:3] == columns.events[:3]  # untraced: the event as committed
    assert [orjson.loads(v) for v in values] == [orjson.loads(v) for v in slow_values]
    assert headers is not None
    name = "ce-traceparent" if binding == "nats" else "cloudEvents_traceparent"
    assert name in headers[3]
    assert name not in headers[4]


@pytest.mark.parametrize("made", MADE)
@pytest.mark.parametrize("source", SOURCES)
@pytest.mark.parametrize("mode", ["binary", "structured"])
def test_http_requests_of_a_window_are_those_of_its_envelopes(source: str, mode: Any, made: str) -> None:
    columns = made_as(made)

    bodies, headers = ce.http_messages(columns, mode, source)

    slow_bodies, slow_headers = ce.http_messages(one_by_one(columns), mode, source)
    assert headers == slow_headers
    assert [orjson.loads(body) for body in bodies] == [orjson.loads(body) for body in slow_bodies]
    assert headers[3]["traceparent"] == TRACEPARENT  # the W3C header, in either mode
    assert "traceparent" not in headers[4]
    if mode == "binary":
        assert bodies[:3] == columns.events[:3]
        assert headers[0]["Content-Type"] == "application/json"


def test_an_event_the_window_was_not_checked_for_still_renders() -> None:
    """A hand-made window skips the read checks: a ``data`` that is no object goes the whole way."""
    columns = OutboxWindow("p", 1, 1.5, ["1"], [1], ["t"], [b'{"id":"e","kind":"K","data":[1]}'])

    (body,) = ce.structured_renderer("cloudevents", ce.DEFAULT_SOURCE)(columns)

    assert orjson.loads(body)["data"] == {"id": "e", "kind": "K", "data": [1]}
    assert orjson.loads(body)["type"] == "K"


def test_slices_and_extensions_of_a_read_window_keep_each_event_with_its_shape() -> None:
    whole = read(window())
    front, back = whole[:3], whole[3:]
    front.extend(back)
    mixed = whole[:3]
    mixed.extend(window()[3:])  # one part made by hand: the shapes are dropped, not misaligned

    assert front.shapes == whole.shapes
    assert mixed.shapes is None
    render = ce.structured_renderer("cloudevents", ce.DEFAULT_SOURCE)
    assert render(front) == render(whole)
    assert [orjson.loads(body) for body in render(mixed)] == [orjson.loads(body) for body in render(whole)]
