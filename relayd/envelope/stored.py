"""How relayd reads bytes it did not write: decoding that cannot raise, bounded JSON, the event shape.

Every outbox and spawn field and value and every timer member comes from another process and
may hold anything. The rules, each applied where the entry is read:

- text: a hash field arrives decoded with ``surrogateescape`` (``store.readers``), so it keeps
  its original bytes (``field_bytes``) and is shown with ``display_text`` (undecodable bytes as
  ``\\xNN``); an entry whose field, value or member is not UTF-8 is dead-lettered as
  ``not_utf8``, its original bytes kept as base64 in the dead letter;
- size: a stored value or member longer than ``MAX_ENTRY_BYTES`` is ``too_large``, refused by
  a length check before anything parses it;
- depth: JSON nested deeper than the parsers allow (orjson's 1024 levels for the stored value,
  the interpreter's recursion limit, about 1,000, for the event msgspec checks) is ``too_deep``,
  never a ``RecursionError``;
- the event of an outbox entry is the engine's shape (``EventShape``): an object whose ``id``
  and ``kind`` are strings and whose ``data``, when present, is an object (absent, the engine's
  default is the empty object).

The fast path of a drain runs these as one ``try`` around the parse and the checks; the
``*_fault`` functions work out the precise reason only for an entry that failed them. Pure.
"""

from __future__ import annotations

from typing import Final

import msgspec
import orjson

from store import MalformedEntry

#: Longest stored value or timer member relayd parses (bytes); a longer one is dead-lettered.
MAX_ENTRY_BYTES: Final = 16 * 1024 * 1024


class EventData(msgspec.Struct):
    """An event's ``data``: any JSON object. Its members are skipped (still checked to be JSON),
    never built, but ``traceparent``: a CloudEvent of the event carries a well-formed one, and
    its presence read here spares that path a decode per event (``relayd.sinks.cloudevents``)."""

    traceparent: object = None


class EventShape(msgspec.Struct):
    """The part of an outbox event relayd checks; every other field passes through unread."""

    id: str
    kind: str
    data: EventData | msgspec.UnsetType = msgspec.UNSET


#: Checks an event's bytes against ``EventShape`` without building its data.
EVENT_SHAPE: Final = msgspec.json.Decoder(EventShape)


def display_text(raw: bytes | str) -> str:
    """``raw`` as printable text whatever it holds: bytes that are not UTF-8 become ``\\xNN``."""
    if isinstance(raw, str):
        if raw.isascii():
            return raw
        raw = field_bytes(raw)
    return raw.decode("utf-8", "backslashreplace")


def field_bytes(field: str) -> bytes:
    """A hash field's original bytes (it was decoded with ``surrogateescape``); any other lone
    surrogate is kept as its own bytes."""
    try:
        return field.encode("utf-8", "surrogateescape")
    except UnicodeEncodeError:
        return field.encode("utf-8", "surrogatepass")


def is_utf8(raw: bytes | str) -> bool:
    """Whether ``raw`` is valid UTF-8 (a str: holds no escaped byte)."""
    try:
        if isinstance(raw, str):
            raw.encode("utf-8")
        else:
            raw.decode("utf-8")
    except UnicodeError:
        return False
    return True


def bytes_fault(raw: bytes | str, what: str) -> MalformedEntry | None:
    """Why ``raw`` cannot even be parsed (``too_large`` or ``not_utf8``), or None."""
    if len(raw) > MAX_ENTRY_BYTES:
        return MalformedEntry("too_large", f"{what} is {len(raw)} bytes, over the {MAX_ENTRY_BYTES} limit")
    if not is_utf8(raw):
        return MalformedEntry("not_utf8", f"{what} is not UTF-8 (its bytes are kept as base64)")
    return None


def json_object(raw: bytes | str, what: str) -> dict[str, object]:
    """Parse ``raw`` as one JSON object, bounded in size and depth.

    Raises:
        MalformedEntry: ``too_large``, ``not_utf8``, ``too_deep``, ``bad_json`` or ``wrong_type``.
    """
    fault = bytes_fault(raw, what)
    if fault is not None:
        raise fault
    try:
        decoded = orjson.loads(raw)
    except orjson.JSONDecodeError as exc:
        if "depth" in str(exc) or "recursion" in str(exc):
            raise MalformedEntry("too_deep", f"{what} is nested deeper than 1024 levels") from None
        raise MalformedEntry("bad_json", f"{what} is not JSON") from None
    except RecursionError:
        raise MalformedEntry("too_deep", f"{what} is nested too deep") from None
    if not isinstance(decoded, dict):
        raise MalformedEntry("wrong_type", f"{what} is not a JSON object")
    return decoded


def event_fault(event_json: bytes) -> MalformedEntry | None:
    """Why an outbox event is not the engine's shape (``EventShape``), or None when it is."""
    try:
        EVENT_SHAPE.decode(event_json)
    except RecursionError:
        return MalformedEntry("too_deep", "outbox event is nested deeper than the parser's limit")
    except msgspec.ValidationError as exc:
        # msgspec names the path and the types, never a value: "Expected `str`, got `int` - at `$.kind`"
        code = "missing_field" if "missing required field" in str(exc) else "wrong_type"
        return MalformedEntry(code, f"outbox event: {exc}")
    except msgspec.DecodeError:
        return MalformedEntry("bad_json", "outbox event is not JSON")
    return None
