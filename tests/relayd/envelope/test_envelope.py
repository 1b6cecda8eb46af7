"""The relayd/1 envelope builders: every field per docs/sinks.md, and malformed shapes refused."""

from __future__ import annotations

import json
import random

import orjson
import pytest
from harel.engine.core import timeout_event as harel_timeout_event

from relayd.envelope.decode import (
    outbox_envelope,
    outbox_envelopes,
    spawn_envelope,
    timer_envelope,
    timer_event_id,
)
from relayd.envelope.outbox_window import OutboxWindow
from store.backlog import RawEntry, RawTimer
from store.errors import MalformedEntry


def _outbox_value(target, event) -> bytes:
    return json.dumps({"t": target, "e": json.dumps(event)}).encode()


def test_outbox_envelope_has_every_field():
    """An outbox entry becomes P:outbox:{seq} with the event parsed into an object."""
    event = {"id": "e1", "kind": "Go", "data": {"n": 1}}
    entry = RawEntry("17", 17, _outbox_value("exe-2", event))

    env = outbox_envelope(entry, prefix="stm", attempt=3, relayed_at=12.5)

    assert env.body == {
        "v": "relayd/1",
        "kind": "outbox",
        "id": "stm:outbox:17",
        "prefix": "stm",
        "attempt": 3,
        "relayed_at": 12.5,
        "seq": 17,
        "target_id": "exe-2",
        "event": event,
    }
    assert (env.id, env.kind, env.prefix, env.attempt, env.ordering_key) == (
        "stm:outbox:17",
        "outbox",
        "stm",
        3,
        "exe-2",
    )
    assert orjson.loads(env.to_json()) == env.body


def test_outbox_envelope_without_target_has_null_target_and_no_ordering_key():
    entry = RawEntry("1", 1, _outbox_value(None, {"id": "x", "kind": "K"}))

    env = outbox_envelope(entry, prefix="p", attempt=1, relayed_at=0.0)

    assert env.body["target_id"] is None
    assert env.ordering_key is None


def test_spawn_envelope_has_every_field():
    value = json.dumps({"p": "parent", "c": "child", "r": "root.a", "x": {"k": [1, 2]}}).encode()

    env = spawn_envelope(RawEntry("4", 4, value), prefix="stm", attempt=1, relayed_at=9.0)

    assert env.body == {
        "v": "relayd/1",
        "kind": "spawn",
        "id": "stm:spawn:4",
        "prefix": "stm",
        "attempt": 1,
        "relayed_at": 9.0,
        "seq": 4,
        "parent_id": "parent",
        "child_id": "child",
        "root_path": "root.a",
        "context": {"k": [1, 2]},
    }
    assert env.ordering_key == "child"


@pytest.mark.parametrize(
    ("execution_id", "path", "fire_at"),
    [("exe-1", "a.b", 1_700_000_000.5), ("e:with:colons", "p q", 1_700_000_000.0), ("ünï", "x", 1e9 + 1 / 3)],
    ids=["fraction", "colons-space-whole", "unicode-repeating"],
)
def test_timer_envelope_carries_harels_own_timeout_event(execution_id, path, fire_at):
    """The timer id and event equal, id and payload, what harel's timeout_event builds."""
    member = f"{execution_id}\x00{path}".encode()
    expected = harel_timeout_event(execution_id, path, fire_at).model_dump(mode="json")

    env = timer_envelope(RawTimer(member, fire_at), prefix="stm", attempt=2, relayed_at=5.0)

    assert env.id == expected["id"] == timer_event_id(execution_id, path, fire_at)
    assert env.body["event"] == {"id": expected["id"], "kind": expected["kind"], "data": expected["data"]}
    assert env.body == {
        "v": "relayd/1",
        "kind": "timer",
        "id": expected["id"],
        "prefix": "stm",
        "attempt": 2,
        "relayed_at": 5.0,
        "execution_id": execution_id,
        "path": path,
        "fire_at": fire_at,
        "event": env.body["event"],
    }
    assert isinstance(env.body["fire_at"], float)
    assert env.ordering_key == execution_id


def test_timer_envelope_json_is_the_design_body_key_for_key():
    """The bytes a sink writes: docs/sinks.md's key order, fire_at as the float, the id by str(float)."""
    env = timer_envelope(RawTimer(b"exe-7\x00a.b", 1_700_000_000.1), prefix="stm", attempt=1, relayed_at=3.5)
    env.body["relayed_at"] = 4.25  # stamped at hand-over, before the first serialisation

    assert env.to_json() == (
        b'{"v":"relayd/1","kind":"timer","id":"timeout:exe-7:a.b:1700000000.1","prefix":"stm",'
        b'"attempt":1,"relayed_at":4.25,"execution_id":"exe-7","path":"a.b","fire_at":1700000000.1,'
        b'"event":{"id":"timeout:exe-7:a.b:1700000000.1","kind":"Timeout",'
        b'"data":{"path":"a.b","fire_at":1700000000.1}}}'
    )


def test_restamp_changes_only_attempt_and_relayed_at():
    env = outbox_envelope(
        RawEntry("1", 1, _outbox_value("t", {"id": "a", "kind": "K"})), prefix="p", attempt=1, relayed_at=1.0
    )

    again = env.restamped(attempt=2, relayed_at=7.0)

    assert (again.attempt, again.body["attempt"], again.body["relayed_at"]) == (2, 2, 7.0)
    assert {k: v for k, v in again.body.items() if k not in ("attempt", "relayed_at")} == {
        k: v for k, v in env.body.items() if k not in ("attempt", "relayed_at")
    }
    assert env.body["attempt"] == 1


def test_an_outbox_event_is_passed_through_as_stored_and_decoded_only_when_read():
    """The sink gets the event's stored text; ``body`` decodes it for a sink that reads it."""
    text = '{"id": "e1",  "kind": "Go", "data": {"n": 1.50, "z": null}}'  # not orjson's form
    entry = RawEntry("3", 3, orjson.dumps({"t": "exe", "e": text}))

    env = outbox_envelope(entry, prefix="p", attempt=1, relayed_at=2.0)
    env.stamp(5.0)

    assert env.to_json().endswith(b',"event":' + text.encode() + b"}")
    assert orjson.loads(env.to_json())["relayed_at"] == 5.0
    assert env.body["event"] == {"id": "e1", "kind": "Go", "data": {"n": 1.5, "z": None}}
    assert orjson.loads(env.to_json()) == env.body


def test_a_passed_through_event_written_over_several_lines_stays_on_one():
    """Line breaks between tokens become spaces: a JSONL record is one line, the event the same."""
    event = {"id": "e3", "kind": "Go", "data": {"text": "two\nlines", "n": [1, 2]}}
    text = json.dumps(event, indent=2).replace("\n", "\r\n", 1)
    entry = RawEntry("6", 6, orjson.dumps({"t": "exe", "e": text}))

    env = outbox_envelope(entry, prefix="p", attempt=1, relayed_at=0.0)

    assert b"\n" not in env.to_json()
    assert b"\r" not in env.to_json()
    assert orjson.loads(env.to_json())["event"] == env.body["event"] == event


def test_a_retry_of_a_passed_through_event_keeps_its_text():
    text = '{"kind": "Go", "id": "e2"}'
    env = outbox_envelope(
        RawEntry("4", 4, orjson.dumps({"t": None, "e": text})), prefix="p", attempt=1, relayed_at=1.0
    )

    again = env.restamped(attempt=2, relayed_at=3.0)

    assert again.to_json().endswith(b',"event":' + text.encode() + b"}")
    assert orjson.loads(again.to_json())["attempt"] == 2
    assert again.body["event"] == env.body["event"] == {"kind": "Go", "id": "e2"}
    assert again == env.restamped(attempt=2, relayed_at=3.0)


def test_an_event_number_beyond_a_double_is_valid_json_and_still_decodes():
    """JSON has no number range: such an event is delivered as written; ``body`` reads it as inf."""
    entry = RawEntry("5", 5, orjson.dumps({"t": "exe", "e": '{"id": "e", "kind": "K", "n": 1e999}'}))

    env = outbox_envelope(entry, prefix="p", attempt=1, relayed_at=0.0)

    assert env.to_json().endswith(b'"event":{"id": "e", "kind": "K", "n": 1e999}}')
    assert env.body["event"] == {"id": "e", "kind": "K", "n": float("inf")}


def _rendered_by_dict(prefix, field, *, attempt, relayed_at, target, event_text):
    """What serialising the body dict gives, with the event's stored text spliced in."""
    body = {
        "v": "relayd/1",
        "kind": "outbox",
        "id": f"{prefix}:outbox:{field}",
        "prefix": prefix,
        "attempt": attempt,
        "relayed_at": relayed_at,
        "seq": int(field),
        "target_id": target,
    }
    return orjson.dumps(body)[:-1] + b',"event":' + event_text.encode() + b"}"


@pytest.mark.parametrize(
    ("prefix", "target", "relayed_at"),
    [
        ("stm", "exe-1", 1_796_026_849.2047246),
        ('we"ird\\pre\tfix', 'ta"rget\n\u2028é', 0.0),
        ("{stm}", None, 1e-7),
        ("ünï", "", 1e22),
    ],
)
def test_an_outbox_envelope_renders_the_bytes_its_body_serialises_to(prefix, target, relayed_at):
    """Rendered from its parts, not from a dict: the same bytes, escapes and float forms included."""
    text = '{"id": "e", "kind": "K", "data": {"s": "\\u00e9\\"q"}}'
    entry = RawEntry("1234", 1234, orjson.dumps({"t": target, "e": text}))

    env = outbox_envelope(entry, prefix=prefix, attempt=1, relayed_at=0.5)
    env.stamp(relayed_at)
    again = env.restamped(attempt=12, relayed_at=relayed_at + 1)

    assert env.to_json() == _rendered_by_dict(
        prefix, "1234", attempt=1, relayed_at=relayed_at, target=target, event_text=text
    )
    assert again.to_json() == _rendered_by_dict(
        prefix, "1234", attempt=12, relayed_at=relayed_at + 1, target=target, event_text=text
    )
    assert orjson.loads(env.to_json()) == env.body


def test_envelopes_of_different_deliveries_rendered_in_turn_keep_their_own_stamp():
    """What a delivery's envelopes share is rendered once: another prefix, attempt or stamp is
    rendered afresh, and a stamp equal to the last but not the same object gives the same bytes."""
    rng = random.Random(7)
    cases = []
    for n in range(1, 200):
        prefix = rng.choice(["a", "b", "{c}"])
        attempt = rng.choice([1, 2])
        relayed_at = rng.choice([1.5, 2.25, float("1.5"), 1e16 + rng.random()])
        target = rng.choice([None, "t1", "t2"])
        event = f'{{"id":"e{n}","kind":"K","n":{n}}}'
        entry = RawEntry(str(n), n, orjson.dumps({"t": target, "e": event}))
        env = outbox_envelope(entry, prefix=prefix, attempt=attempt, relayed_at=0.0)
        env.stamp(relayed_at)
        expected = _rendered_by_dict(
            prefix, str(n), attempt=attempt, relayed_at=relayed_at, target=target, event_text=event
        )
        cases.append((env, expected))

    assert [env.to_json() for env, _ in cases] == [expected for _, expected in cases]


def test_a_window_of_outbox_entries_keeps_its_order_and_sets_the_malformed_aside():
    """``outbox_envelopes`` builds a whole window in one loop: a malformed entry anywhere in it
    comes back with its reason, and every other entry in order, exactly as one by one."""
    entries = [
        RawEntry("1", 1, _outbox_value("a", {"id": "e1", "kind": "K"})),
        RawEntry("2", 2, b"{not json"),
        RawEntry("3", 3, _outbox_value(None, {"id": "e3", "kind": "K"})),
        RawEntry("x", None, _outbox_value("a", {"id": "ex", "kind": "K"})),
        RawEntry("5", 5, _outbox_value("b", {"id": "e5", "kind": "K"})),
    ]

    window, good, malformed = outbox_envelopes(entries, prefix="p", attempt=2, relayed_at=3.5)

    assert good == [entries[0], entries[2], entries[4]]
    assert window.fields == ["1", "3", "5"]
    expected = [outbox_envelope(entries[n], prefix="p", attempt=2, relayed_at=3.5) for n in (0, 2, 4)]
    assert list(window) == expected
    assert [(entry.field, why.reason) for entry, why in malformed] == [("2", "bad_json"), ("x", "bad_seq")]


def _window(prefix: str = "p", count: int = 5) -> tuple[OutboxWindow, list[RawEntry]]:
    entries = [
        RawEntry(
            str(n), n, _outbox_value(f"t{n % 2}" if n % 3 else None, {"id": f"e{n}", "kind": "K", "x": n / 3})
        )
        for n in range(1, count + 1)
    ]
    window, good, malformed = outbox_envelopes(entries, prefix=prefix, attempt=1, relayed_at=0.0)
    assert good == entries
    assert not malformed
    return window, entries


def test_a_window_is_a_sequence_of_envelopes_and_a_slice_is_a_window():
    window, entries = _window(count=6)
    window.stamp(2.5)

    assert len(window) == 6
    assert window[4] == outbox_envelope(entries[4], prefix="p", attempt=1, relayed_at=2.5)
    part = window[2:5]
    assert isinstance(part, OutboxWindow)
    assert list(part) == list(window)[2:5]
    assert part.render() == window.render()[2:5]
    more, _ = _window(count=2)
    window.extend(more)
    assert [env.id for env in window] == [f"p:outbox:{n}" for n in (1, 2, 3, 4, 5, 6, 1, 2)]


@pytest.mark.parametrize(
    ("field", "value", "reason"),
    [
        ("1", b"{not json", "bad_json"),
        ("1", b"[1, 2]", "wrong_type"),
        ("1", json.dumps({"e": "{}"}).encode(), "missing_field"),
        ("1", json.dumps({"t": "x"}).encode(), "missing_field"),
        ("1", json.dumps({"t": 5, "e": "{}"}).encode(), "wrong_type"),
        ("1", json.dumps({"t": "x", "e": {"id": "obj"}}).encode(), "wrong_type"),
        ("1", json.dumps({"t": "x", "e": "not json"}).encode(), "bad_json"),
        ("1", json.dumps({"t": "x", "e": "[1]"}).encode(), "wrong_type"),
        ("1", json.dumps({"t": "x", "e": '{"id": "a", "kind": "K"} {'}).encode(), "bad_json"),
        ("1", json.dumps({"t": "x", "e": '{"a": "\\ud800"}'}).encode(), "bad_json"),
        ("1", json.dumps({"t": "x", "e": ' "{}"'}).encode(), "wrong_type"),
        ("abc", _outbox_value("x", {"id": "a", "kind": "K"}), "bad_seq"),
    ],
    ids=[
        "bad-json",
        "not-object",
        "missing-t",
        "missing-e",
        "t-not-string",
        "e-not-string",
        "e-bad-json",
        "e-not-object",
        "e-trailing-text",
        "e-lone-surrogate",
        "e-a-string",
        "non-integer-seq",
    ],
)
def test_malformed_outbox_entry_raises_with_reason(field, value, reason):
    seq = int(field) if field.isdigit() else None

    with pytest.raises(MalformedEntry) as caught:
        outbox_envelope(RawEntry(field, seq, value), prefix="p", attempt=1, relayed_at=0.0)

    assert caught.value.reason == reason


@pytest.mark.parametrize(
    ("value", "reason"),
    [
        (b"\xff\xfe", "not_utf8"),
        (json.dumps({"p": "a", "c": "b", "r": "c"}).encode(), "missing_field"),
        (json.dumps({"p": "a", "c": 3, "r": "c", "x": {}}).encode(), "wrong_type"),
        (json.dumps({"p": "a", "c": "b", "r": "c", "x": "ctx"}).encode(), "wrong_type"),
    ],
    ids=["not-utf8", "missing-x", "child-not-string", "context-not-object"],
)
def test_malformed_spawn_entry_raises_with_reason(value, reason):
    with pytest.raises(MalformedEntry) as caught:
        spawn_envelope(RawEntry("1", 1, value), prefix="p", attempt=1, relayed_at=0.0)

    assert caught.value.reason == reason


@pytest.mark.parametrize(
    ("member", "reason"),
    [(b"no-separator", "bad_member"), (b"\xff\x00path", "not_utf8")],
    ids=["no-nul", "not-utf8"],
)
def test_malformed_timer_member_raises_with_reason(member, reason):
    with pytest.raises(MalformedEntry) as caught:
        timer_envelope(RawTimer(member, 1.0), prefix="p", attempt=1, relayed_at=0.0)

    assert caught.value.reason == reason
