"""Why a stored entry is malformed: the slow path of ``relayd.envelope.decode``'s builders.

A builder runs one ``try`` around the parse and the checks; only an entry that fails them comes
here, to learn which reason of ``store.MALFORMED_REASONS`` to dead-letter it with. Pure.
"""

from __future__ import annotations

from relayd.envelope.stored import event_fault, is_utf8, json_object
from store import MalformedEntry, RawEntry


def _require(obj: dict[str, object], key: str, what: str) -> object:
    if key not in obj:
        raise MalformedEntry("missing_field", f"{what} has no {key!r}")
    return obj[key]


def _string(obj: dict[str, object], key: str, what: str, *, nullable: bool = False) -> str | None:
    value = _require(obj, key, what)
    if value is None and nullable:
        return None
    if not isinstance(value, str):
        raise MalformedEntry("wrong_type", f"{what} field {key!r} is not a string")
    return value


def _field_fault(entry: RawEntry, kind: str) -> MalformedEntry | None:
    if not is_utf8(entry.field):
        return MalformedEntry("not_utf8", f"{kind} field is not UTF-8 (its bytes are kept as base64)")
    if entry.seq is None:
        return MalformedEntry("bad_seq", "hash field is not a decimal integer")
    return None


def outbox_fault(entry: RawEntry) -> MalformedEntry:
    """Why an outbox entry that failed ``outbox_envelopes``'s checks is malformed."""
    fault = _field_fault(entry, "outbox")
    if fault is not None:
        return fault
    try:
        value = json_object(entry.value, "outbox value")
        _string(value, "t", "outbox value", nullable=True)
        event_text = _string(value, "e", "outbox value")
        fault = event_fault(str(event_text).encode())
    except MalformedEntry as exc:
        return exc
    return fault or MalformedEntry("wrong_type", "outbox value has an unexpected shape")  # not reached


def spawn_fault(entry: RawEntry) -> MalformedEntry:
    """Why a spawn entry that failed ``spawn_envelope``'s checks is malformed."""
    fault = _field_fault(entry, "spawn")
    if fault is not None:
        return fault
    try:
        value = json_object(entry.value, "spawn value")
        for key in ("p", "c", "r"):
            _string(value, key, "spawn value")
        if not isinstance(_require(value, "x", "spawn value"), dict):
            raise MalformedEntry("wrong_type", "spawn value field 'x' is not an object")
    except MalformedEntry as exc:
        return exc
    return MalformedEntry("wrong_type", "spawn value has an unexpected shape")  # not reached
