"""The decode policy for bytes relayd did not write: text that cannot fail, bounded JSON, the event shape."""

from __future__ import annotations

import orjson
import pytest

from relayd.envelope.decode import outbox_envelopes, spawn_envelope, timer_envelope
from relayd.envelope.stored import MAX_ENTRY_BYTES, display_text, event_fault, field_bytes, json_object
from store import MalformedEntry, RawEntry, RawTimer

DEEP = 100_000


def _value(event: str, target: str | None = "a") -> bytes:
    return orjson.dumps({"t": target, "e": event})


GOOD_EVENT = '{"id": "e1", "kind": "K", "data": {"n": 1}}'


def test_display_text_never_raises_and_shows_undecodable_bytes_escaped():
    """A field read with surrogateescape keeps its bytes; shown, they are ``\\xNN``."""
    field = b"\xff\xfe7".decode("utf-8", "surrogateescape")

    assert display_text(field) == "\\xff\\xfe7"
    assert display_text(b"exe-\xff\x00p") == "exe-\\xff\x00p"
    assert display_text("plain") == "plain"
    assert field_bytes(field) == b"\xff\xfe7"


@pytest.mark.parametrize(
    ("raw", "reason"),
    [
        (b"[" * DEEP, "too_deep"),
        (b'{"a": ' + b"[" * DEEP + b"]" * DEEP + b"}", "too_deep"),
        (b'{"a": "\xff"}', "not_utf8"),
        (b"not json", "bad_json"),
        (b"[1]", "wrong_type"),
    ],
    ids=["deep-brackets", "deep-valid", "not-utf8", "not-json", "not-object"],
)
def test_json_object_bounds_depth_and_reports_why(raw, reason):
    with pytest.raises(MalformedEntry) as caught:
        json_object(raw, "value")

    assert caught.value.reason == reason


@pytest.mark.parametrize(
    ("event", "reason"),
    [
        ("{}", "missing_field"),
        ('{"id": "e", "kind": 5}', "wrong_type"),
        ('{"id": "e", "kind": "K", "data": [1]}', "wrong_type"),
        ('{"id": "e", "kind": "K", "data": null}', "wrong_type"),
        ('{"id": 7, "kind": "K"}', "wrong_type"),
        ("[1]", "wrong_type"),
        ('{"id": "e", "kind": "K", "data": {"x": ' + "[" * DEEP + "]" * DEEP + "}}", "too_deep"),
        ('{"id": "e", "kind": "K", "x": [1,}', "bad_json"),
    ],
    ids=["empty", "numeric-kind", "list-data", "null-data", "numeric-id", "array", "deep", "bad-json"],
)
def test_an_event_not_in_the_engine_shape_is_faulted_with_its_reason(event, reason):
    fault = event_fault(event.encode())

    assert fault is not None
    assert fault.reason == reason


@pytest.mark.parametrize(
    "event", [GOOD_EVENT, '{"id": "e", "kind": "K"}', '{"kind": "K", "id": "e", "extra": [1, {"a": 2}]}']
)
def test_an_event_in_the_engine_shape_passes(event):
    assert event_fault(event.encode()) is None


def test_one_bad_entry_never_takes_its_window_down():
    """Every hostile shape in one window among good entries: the good ones come out, in order,
    the bad ones set aside each with its reason (none raises)."""
    not_utf8_field = b"\xff9".decode("utf-8", "surrogateescape")
    entries = [
        RawEntry("1", 1, _value(GOOD_EVENT)),
        RawEntry("2", 2, b"[" * DEEP),
        RawEntry("3", 3, _value('{"id": "d", "kind": "K", "data": {"x": ' + "[" * DEEP + "]" * DEEP + "}}")),
        RawEntry("4", 4, b'{"t": "a", "e": "\xff"}'),
        RawEntry("5", 5, _value("{}")),
        RawEntry("6", 6, _value('{"id": "e", "kind": 5}')),
        RawEntry("7", 7, _value('{"id": "e", "kind": "K", "data": [1]}')),
        RawEntry("8", 8, b" " * (MAX_ENTRY_BYTES + 1)),
        RawEntry(not_utf8_field, None, _value(GOOD_EVENT)),
        RawEntry("10", 10, _value(GOOD_EVENT, target=None)),
    ]

    window, good, malformed = outbox_envelopes(entries, prefix="p", attempt=1, relayed_at=1.0)

    assert window.seqs == [1, 10]
    assert [e.field for e in good] == ["1", "10"]
    assert [(e.field, why.reason) for e, why in malformed] == [
        ("2", "too_deep"),
        ("3", "too_deep"),
        ("4", "not_utf8"),
        ("5", "missing_field"),
        ("6", "wrong_type"),
        ("7", "wrong_type"),
        ("8", "too_large"),
        (not_utf8_field, "not_utf8"),
    ]
    assert all(why.detail for _, why in malformed)


@pytest.mark.parametrize(
    ("entry", "reason"),
    [
        (
            RawEntry("1", 1, b'{"p": "a", "c": "b", "r": "c", "x": ' + b"[" * DEEP + b"]" * DEEP + b"}"),
            "too_deep",
        ),
        (RawEntry(b"\xc3\x28".decode("utf-8", "surrogateescape"), None, b"{}"), "not_utf8"),
        (RawEntry("1", 1, b"\xff"), "not_utf8"),
    ],
    ids=["deep-context", "field-not-utf8", "value-not-utf8"],
)
def test_hostile_spawn_entries_are_faulted_with_their_reason(entry, reason):
    with pytest.raises(MalformedEntry) as caught:
        spawn_envelope(entry, prefix="p", attempt=1, relayed_at=1.0)

    assert caught.value.reason == reason


def test_a_timer_member_over_the_size_limit_is_too_large():
    with pytest.raises(MalformedEntry) as caught:
        timer_envelope(
            RawTimer(b"e\x00" + b"F" * MAX_ENTRY_BYTES, 1.0), prefix="p", attempt=1, relayed_at=1.0
        )

    assert caught.value.reason == "too_large"
