"""The trace context ``store`` records with an entry (``"tc"``) becomes the ``relayd/1``
envelope's top-level ``traceparent``/``tracestate``; a malformed one is dropped, and the
event's own ``data.traceparent`` wins where both are present."""

from __future__ import annotations

import orjson
import pytest

from relayd.envelope.batch import Batch
from relayd.envelope.decode import outbox_envelopes, spawn_envelope
from relayd.sinks import trace_context
from relayd.sinks.cloudevents import Mode, http_messages, kafka_records, render
from store import RawEntry

STORED = "00-" + "a" * 32 + "-" + "b" * 16 + "-01"
IN_DATA = "00-" + "c" * 32 + "-" + "d" * 16 + "-01"


def _outbox(seq: int, data: dict[str, object], tc: object = None) -> RawEntry:
    value: dict[str, object] = {
        "t": "exe",
        "e": orjson.dumps({"id": f"e{seq}", "kind": "K", "data": data}).decode(),
    }
    if tc is not None:
        value["tc"] = tc
    return RawEntry(str(seq), seq, orjson.dumps(value))


def test_an_outbox_entrys_stored_context_is_an_envelope_member_and_handed_on() -> None:
    entries = [
        _outbox(1, {}, {"traceparent": STORED, "tracestate": "ro=1"}),
        _outbox(2, {}, {"traceparent": "00-x\r\nEvil: 1"}),
        _outbox(3, {"traceparent": IN_DATA}, {"traceparent": STORED}),
        _outbox(4, {}),
    ]
    window, good, malformed = outbox_envelopes(entries, prefix="p", attempt=1, relayed_at=5.0)
    rendered = [orjson.loads(body) for body in window.render()]

    assert (len(good), malformed) == (4, [])
    assert [(r.get("traceparent"), r.get("tracestate")) for r in rendered] == [
        (STORED, "ro=1"),
        (None, None),
        (STORED, None),
        (None, None),
    ]
    assert rendered == [window[i].body for i in range(4)]  # built or rendered, the same
    assert window[0].to_json() == window.render()[0]
    handed_on = [STORED, None, IN_DATA, None]
    assert [
        trace_context.from_envelope_json(body).get("traceparent") for body in window.render()
    ] == handed_on
    assert [c.get("traceparent") for c in trace_context.of_batch(window)] == handed_on
    assert [c.get("traceparent") for c in trace_context.of_batch(Batch.of(list(window)))] == handed_on
    assert [e.attributes.get("traceparent") for e in render(window, source_template="s")] == [
        STORED,
        None,
        IN_DATA,
        None,
    ]
    assert window[2:3].render() == window.render()[2:3]


def test_a_spawns_stored_context_is_an_envelope_member_and_handed_on() -> None:
    value = orjson.dumps({"p": "a", "c": "a:c", "r": "r", "x": {}, "tc": {"traceparent": STORED}})
    envelope = spawn_envelope(RawEntry("4", 4, value), prefix="p", attempt=1, relayed_at=9.0)

    assert orjson.loads(envelope.to_json())["traceparent"] == STORED
    assert trace_context.from_envelope_json(envelope.to_json()) == {"traceparent": STORED}
    assert render([envelope], source_template="s")[0].attributes["traceparent"] == STORED


@pytest.mark.parametrize("mode", ["binary", "structured"])
def test_the_cloudevents_window_paths_carry_the_stored_context(mode: Mode) -> None:
    """An outbox window's fast CloudEvents paths send a stored context's entry the whole way."""
    entries = [_outbox(1, {}, {"traceparent": STORED}), _outbox(2, {})]
    window, _, _ = outbox_envelopes(entries, prefix="p", attempt=1, relayed_at=5.0)

    _, http = http_messages(window, mode, "s")
    _, kafka = kafka_records(window, mode, "s")

    assert [headers.get("traceparent") for headers in http] == [STORED, None]
    assert [dict(headers).get("traceparent") for headers in kafka] == [STORED.encode(), None]
