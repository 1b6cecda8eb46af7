"""The ``relayd/1`` delivery envelope (docs/internals.md#key-space): what every sink receives for every entry.

``Envelope`` is the value type shared by the engine and the sinks. The pure builders below turn
raw stored entries (``store.backlog.RawEntry`` / ``RawTimer``) into envelopes; they import no
Redis and read no clock (``relayed_at`` is a parameter). A window of outbox entries stays
columns (``OutboxWindow``, the columnar ``relayd.batch.Batch`` that makes an envelope only when
indexed). A stored value that cannot be decoded
raises ``store.errors.MalformedEntry`` with one of the fixed reasons, so the engine can
dead-letter it with a bounded ``reason_code``.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from typing import ClassVar, Final, Literal, overload

import msgspec
import orjson

from relayd.batch import Batch
from relayd.stored import (
    EVENT_SHAPE,
    MAX_ENTRY_BYTES,
    bytes_fault,
    event_fault,
    is_utf8,
    json_object,
)
from store import MalformedEntry, RawEntry, RawTimer, dumps, parse_timer_member

#: The envelope format tag; a receiver refuses what it does not know.
ENVELOPE_VERSION: Final = "relayd/1"
#: Line breaks to spaces: in JSON text they can only be whitespace between tokens.
_LINE_BREAKS_TO_SPACES: Final = bytes.maketrans(b"\r\n", b"  ")
#: The line breaks as byte values: ``int in bytes`` is a memchr, while ``bytes in bytes`` first
#: tries the needle as an int and builds and clears a TypeError (``relayd bench --kinds outbox``).
_LF, _CR = ord("\n"), ord("\r")

Kind = Literal["outbox", "spawn", "timer"]
KINDS: Final[tuple[Kind, ...]] = ("spawn", "outbox", "timer")  # the order of one pass


class Envelope:
    """One entry ready for a sink; treat it as immutable once handed to a sink.

    ``body`` is the whole ``relayd/1`` JSON object (``v``, ``kind``, ``id``, ``prefix``,
    ``attempt``, ``relayed_at`` and the kind's fields); ``ordering_key`` is the per-target
    order key (``target_id`` for outbox, ``child_id`` for spawns, ``execution_id`` for timers).
    A new attempt gets a new envelope (``restamped``); the JSON is cached by the first ``to_json``.
    ``outbox_envelope`` builds an ``OutboxEnvelope``, which keeps parts instead of a body.
    """

    # A plain class with slots, not a dataclass: one envelope is built per entry on the hot
    # path, and a frozen dataclass builds slower (``relayd bench --kinds spawn,timer``).
    __slots__ = ("_body", "_json", "attempt", "id", "kind", "ordering_key", "prefix")

    def __init__(  # noqa: PLR0917 - one per entry on the hot path: positional is cheaper (relayd bench)
        self,
        id: str,
        kind: Kind,
        prefix: str,
        attempt: int,
        body: dict[str, object],
        ordering_key: str | None = None,
    ) -> None:
        self.id = id
        self.kind = kind
        self.prefix = prefix
        self.attempt = attempt
        self.ordering_key = ordering_key
        self._body: dict[str, object] | None = body
        self._json: bytes | None = None

    @property
    def body(self) -> dict[str, object]:
        assert self._body is not None  # set by __init__; only an OutboxEnvelope builds it late
        return self._body

    def stamp(self, relayed_at: float) -> None:
        """Set ``relayed_at`` of an envelope not yet handed to a sink (no copy)."""
        self.body["relayed_at"] = relayed_at
        self._json = None

    def restamped(self, *, attempt: int, relayed_at: float) -> Envelope:
        """This envelope for another attempt: same id and fields, new stamp.

        The stored value is decoded once, when the entry is first read; each attempt copies what
        the envelope carries (here a shallow copy of the body) instead of parsing it again.
        """
        body = dict(self.body)
        body["attempt"] = attempt
        body["relayed_at"] = relayed_at
        return Envelope(self.id, self.kind, self.prefix, attempt, body, self.ordering_key)

    def to_json(self) -> bytes:
        """The body as compact JSON bytes (cached)."""
        if self._json is None:
            self._json = dumps(self.body)  # right-sized: orjson's own buffer is 4 KiB and up
        return self._json

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Envelope):
            return NotImplemented
        return (self.id, self.kind, self.prefix, self.attempt, self.ordering_key, self.body) == (
            other.id,
            other.kind,
            other.prefix,
            other.attempt,
            other.ordering_key,
            other.body,
        )

    __hash__ = None  # type: ignore[assignment]  # mutable, like the dict it carries

    def __repr__(self) -> str:
        return (
            f"{type(self).__name__}(id={self.id!r}, kind={self.kind!r}, prefix={self.prefix!r}, "
            f"attempt={self.attempt!r}, body={self.body!r}, ordering_key={self.ordering_key!r})"
        )


class OutboxEnvelope(Envelope):
    """An outbox entry's envelope kept as its parts: seq, target, stamp and the event as stored.

    The event is a pass-through payload: ``outbox_envelope`` checks that it is a JSON object and
    keeps its text, which ``to_json`` writes as it is. ``to_json`` renders the rest from the
    parts, and what the envelopes of one delivery share (prefix, attempt, stamp) once per
    delivery (``_OutboxFrame``), instead of building a dict and serialising it: the bytes orjson
    gives for the body, with the event's stored text where its serialisation would be, at less
    CPU (``tests/benchmarks/profile_drain.py``). ``body`` is built, and the event decoded, only
    when read (the harel and log sinks; the stream, JSONL and webhook sinks never do).
    """

    __slots__ = ("_event", "_field", "_relayed_at", "_seq")

    def __init__(  # noqa: PLR0917 - one per entry on the hot path
        self,
        prefix: str,
        field: str,
        seq: int,
        attempt: int,
        relayed_at: float,
        target_id: str | None,
        event_json: bytes,
    ) -> None:
        self.id = f"{prefix}:outbox:{field}"  # the stable delivery id, ``P:outbox:{seq}``
        self.kind = "outbox"
        self.prefix = prefix
        self.attempt = attempt
        self.ordering_key = target_id
        self._field = field  # canonical decimal (``RawEntry``): the id's tail, and the seq as JSON
        self._seq = seq
        self._relayed_at = relayed_at
        self._event = event_json
        self._body = None
        self._json = None

    @property
    def body(self) -> dict[str, object]:
        if self._body is None:
            self._body = {
                "v": ENVELOPE_VERSION,
                "kind": "outbox",
                "id": self.id,
                "prefix": self.prefix,
                "attempt": self.attempt,
                "relayed_at": self._relayed_at,
                "seq": self._seq,
                "target_id": self.ordering_key,
                "event": _decode_event(self._event),
            }
        return self._body

    def stamp(self, relayed_at: float) -> None:
        self._relayed_at = relayed_at
        self._json = None
        if self._body is not None:
            self._body["relayed_at"] = relayed_at

    def restamped(self, *, attempt: int, relayed_at: float) -> Envelope:
        """This envelope for another attempt: the same parts, the event still undecoded."""
        return OutboxEnvelope(
            self.prefix, self._field, self._seq, attempt, relayed_at, self.ordering_key, self._event
        )

    def to_json(self) -> bytes:
        if self._json is None:
            frame = _OutboxFrame.of(self.prefix, self.attempt, self._relayed_at)
            self._json = frame.render((self._field,), (self.ordering_key,), (self._event,))[0]
        return self._json


class OutboxWindow(Batch):
    """The outbox envelopes of one read window, kept as columns: the fast path's sink batch.

    A drain hands a sink a thousand outbox envelopes per call; as objects they cost more to
    build, stamp, render and free than the columns, and drains are faster without them
    (``relayd bench --kinds outbox``). A window keeps the columns ``outbox_envelopes`` parsed
    (fields, seqs, targets, events as stored) and one stamp, and is a ``Batch`` like any other:
    indexing it makes that entry's ``OutboxEnvelope`` (equal, not identical, on each access), a
    slice is a window, and ``render``, ``ids`` and ``keys`` read the columns without making
    envelopes, so every sink's bytes come from the same ``_OutboxFrame.render``.
    """

    __slots__ = ("attempt", "events", "fields", "prefix", "relayed_at", "seqs", "targets")

    def __init__(  # noqa: PLR0917 - the columns, in the order of an OutboxEnvelope's parts
        self,
        prefix: str,
        attempt: int,
        relayed_at: float,
        fields: list[str],
        seqs: list[int],
        targets: list[str | None],
        events: list[bytes],
    ) -> None:
        self.prefix = prefix
        self.attempt = attempt
        self.relayed_at = relayed_at
        self.fields = fields
        self.seqs = seqs
        self.targets = targets
        self.events = events

    @property
    def kind(self) -> Kind:
        return "outbox"

    def __len__(self) -> int:
        return len(self.fields)

    @overload
    def __getitem__(self, index: int) -> OutboxEnvelope: ...
    @overload
    def __getitem__(self, index: slice) -> OutboxWindow: ...
    def __getitem__(self, index: int | slice) -> OutboxEnvelope | OutboxWindow:
        if isinstance(index, slice):
            return OutboxWindow(
                self.prefix,
                self.attempt,
                self.relayed_at,
                self.fields[index],
                self.seqs[index],
                self.targets[index],
                self.events[index],
            )
        return OutboxEnvelope(
            self.prefix,
            self.fields[index],
            self.seqs[index],
            self.attempt,
            self.relayed_at,
            self.targets[index],
            self.events[index],
        )

    def stamp(self, relayed_at: float) -> None:
        """Set ``relayed_at`` of every envelope of the window (not yet handed to a sink)."""
        self.relayed_at = relayed_at

    def extend(self, other: OutboxWindow) -> None:
        """Append ``other``'s entries (a window read in slices; the same prefix and attempt)."""
        self.fields += other.fields
        self.seqs += other.seqs
        self.targets += other.targets
        self.events += other.events

    def render(self) -> list[bytes]:
        """Every envelope's JSON, in order (what they share rendered once)."""
        frame = _OutboxFrame.of(self.prefix, self.attempt, self.relayed_at)
        return frame.render(self.fields, self.targets, self.events)

    def ids(self) -> list[str]:
        return [f"{self.prefix}:outbox:{field}" for field in self.fields]

    def keys(self) -> list[str | None]:
        return self.targets[:]  # a copy: the window's own column stays the window's


class _OutboxFrame:
    """What the outbox envelopes of one delivery share, rendered once; the last one is kept.

    ``head`` runs up to the seq in the id (``{"v":...,"id":"P:outbox:``), ``middle`` from the
    id's closing quote to the seq's value (``","prefix":...,"relayed_at":T,"seq":``). A delivery
    stamps every envelope with one float object, so a check of identity finds the frame; any
    other stamp (an equal float included) renders a new one.
    """

    __slots__ = ("attempt", "head", "middle", "prefix", "relayed_at")
    last: ClassVar[_OutboxFrame]

    def __init__(self, prefix: str, attempt: int, relayed_at: float) -> None:
        self.prefix = prefix
        self.attempt = attempt
        self.relayed_at = relayed_at
        id_head = orjson.dumps(f"{prefix}:outbox:")[:-1]  # the opening quote, the prefix escaped
        self.head = b'{"v":"' + ENVELOPE_VERSION.encode() + b'","kind":"outbox","id":' + id_head
        self.middle = b'","prefix":%b,"attempt":%b,"relayed_at":%b,"seq":' % (
            orjson.dumps(prefix),
            orjson.dumps(attempt),
            orjson.dumps(relayed_at),
        )

    @classmethod
    def of(cls, prefix: str, attempt: int, relayed_at: float) -> _OutboxFrame:
        """The frame of a delivery: the last one when it is the same, else a new one."""
        frame = cls.last
        if frame.relayed_at is not relayed_at or frame.attempt != attempt or frame.prefix != prefix:
            cls.last = frame = cls(prefix, attempt, relayed_at)
        return frame

    def render(
        self, fields: Iterable[str], targets: Iterable[str | None], events: Iterable[bytes]
    ) -> list[bytes]:
        """Envelopes' JSON: the bytes orjson gives for each body, with the event as stored.

        One loop for a window: a call per entry costs more than the rendering can spare
        (``tests/benchmarks/profile_drain.py``).
        """
        head, middle, dumps = self.head, self.middle, orjson.dumps
        rendered = []
        for field, target, event in zip(fields, targets, events, strict=True):
            seq = field.encode()  # canonical decimal: the id's tail, and the seq as JSON
            rendered.append(
                b"".join((head, seq, middle, seq, b',"target_id":', dumps(target), b',"event":', event, b"}"))
            )
        return rendered


_OutboxFrame.last = _OutboxFrame("", 0, 0.0)


def _decode_event(event_json: bytes) -> dict[str, object]:
    """A pass-through event as an object (checked to be a JSON object when it was read)."""
    try:
        event = orjson.loads(event_json)
    except orjson.JSONDecodeError:
        # JSON orjson refuses although the check passed: a number beyond a double's range.
        event = json.loads(event_json)
    return event  # type: ignore[no-any-return]


def spawn_id(prefix: str, field_: str) -> str:
    """The stable delivery id of a spawn intent: ``P:spawn:{seq}``."""
    return f"{prefix}:spawn:{field_}"


def timer_event_id(execution_id: str, path: str, fire_at: float) -> str:
    """The engine's own Timeout event id; ``fire_at`` rendered by ``str(float)`` as harel does."""
    return f"timeout:{execution_id}:{path}:{float(fire_at)}"


def timeout_event(execution_id: str, path: str, fire_at: float) -> dict[str, object]:
    """The Timeout event the engine builds for a due timer (harel's ``timeout_event``, as JSON)."""
    fire_at = float(fire_at)
    return {
        "id": timer_event_id(execution_id, path, fire_at),
        "kind": "Timeout",
        "data": {"path": path, "fire_at": fire_at},
    }


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


def outbox_envelopes(
    entries: Iterable[RawEntry], *, prefix: str, attempt: int, relayed_at: float
) -> tuple[OutboxWindow, list[RawEntry], list[tuple[RawEntry, MalformedEntry]]]:
    """The envelopes of outbox entries ``{"t": target_id|null, "e": event_json_string}``.

    Returns the well-formed entries' envelopes as one ``OutboxWindow`` and those entries (both
    in order), and each malformed entry with why (a reason of ``store.MALFORMED_REASONS``).
    One loop for a window, into columns: no object per entry.
    """
    # The hot path of a drain: a length check, then one try around the parse and the checks;
    # only an entry that fails them goes through ``_outbox_fault`` to learn which reason to
    # dead-letter with. The event is checked here (``relayd.stored``: the engine's shape, its
    # depth bounded), so a malformed one is caught at read, not by the sink.
    window = OutboxWindow(prefix, attempt, relayed_at, [], [], [], [])
    fields, seqs, targets, events = window.fields, window.seqs, window.targets, window.events
    good: list[RawEntry] = []
    malformed: list[tuple[RawEntry, MalformedEntry]] = []
    loads, check, limit = orjson.loads, EVENT_SHAPE.decode, MAX_ENTRY_BYTES
    for entry in entries:
        field, seq, stored = entry
        well_formed = False
        if len(stored) <= limit:
            try:
                value = loads(stored)
                target_id, event_text = value["t"], value["e"]
                event_json = event_text.encode()
                check(event_json)
                well_formed = target_id is None or type(target_id) is str
            # RecursionError: an event nested past msgspec's limit (the interpreter's).
            except (
                orjson.JSONDecodeError,
                msgspec.DecodeError,
                KeyError,
                TypeError,
                AttributeError,
                RecursionError,
            ):
                pass
        if not well_formed or seq is None:
            malformed.append((entry, _outbox_fault(entry)))
            continue
        if _LF in event_json or _CR in event_json:
            # A string must escape its line breaks, so these lie between tokens; as spaces they
            # keep an envelope one line (a JSONL record, a log line) and the event the same.
            event_json = event_json.translate(_LINE_BREAKS_TO_SPACES)
        fields.append(field)
        seqs.append(seq)
        targets.append(target_id)
        events.append(event_json)
        good.append(entry)
    return window, good, malformed


def outbox_envelope(entry: RawEntry, *, prefix: str, attempt: int, relayed_at: float) -> OutboxEnvelope:
    """Build the envelope of one outbox entry (``outbox_envelopes`` of one).

    Raises:
        MalformedEntry: with a reason of ``store.MALFORMED_REASONS``.
    """
    window, _, malformed = outbox_envelopes([entry], prefix=prefix, attempt=attempt, relayed_at=relayed_at)
    if malformed:
        raise malformed[0][1]
    return window[0]


def _field_fault(entry: RawEntry, kind: str) -> MalformedEntry | None:
    if not is_utf8(entry.field):
        return MalformedEntry("not_utf8", f"{kind} field is not UTF-8 (its bytes are kept as base64)")
    if entry.seq is None:
        return MalformedEntry("bad_seq", "hash field is not a decimal integer")
    return None


def _outbox_fault(entry: RawEntry) -> MalformedEntry:
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


def spawn_envelope(entry: RawEntry, *, prefix: str, attempt: int, relayed_at: float) -> Envelope:
    """Build the envelope of one spawn intent ``{"p", "c", "r", "x"}``.

    Raises:
        MalformedEntry: with a reason of ``store.MALFORMED_REASONS``.
    """
    seq = entry.seq
    well_formed = False
    if len(entry.value) <= MAX_ENTRY_BYTES:  # the hot path, as in ``outbox_envelopes``
        try:
            value = orjson.loads(entry.value)
            parent_id, child_id, root_path, context = value["p"], value["c"], value["r"], value["x"]
            well_formed = (
                type(parent_id) is str
                and type(child_id) is str
                and type(root_path) is str
                and type(context) is dict
                and seq is not None
            )
        except (orjson.JSONDecodeError, KeyError, TypeError):
            pass
    if not well_formed:
        raise _spawn_fault(entry)
    id_ = spawn_id(prefix, entry.field)
    body: dict[str, object] = {
        "v": ENVELOPE_VERSION,
        "kind": "spawn",
        "id": id_,
        "prefix": prefix,
        "attempt": attempt,
        "relayed_at": relayed_at,
        "seq": seq,
        "parent_id": parent_id,
        "child_id": child_id,
        "root_path": root_path,
        "context": context,
    }
    # Keyed by the child: its events (outbox entries targeted at it) must not overtake it.
    return Envelope(id_, "spawn", prefix, attempt, body, child_id)


def _spawn_fault(entry: RawEntry) -> MalformedEntry:
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


def timer_envelope(timer: RawTimer, *, prefix: str, attempt: int, relayed_at: float) -> Envelope:
    """Build the envelope of one due timer, carrying the engine's own Timeout event.

    Raises:
        MalformedEntry: ``too_large``, ``not_utf8``, or ``bad_member`` when it has no ``\\x00``.
    """
    if len(timer.member) > MAX_ENTRY_BYTES:
        raise bytes_fault(timer.member, "timer member") or MalformedEntry("too_large")
    execution_id, path = parse_timer_member(timer.member)
    fire_at = float(timer.fire_at)
    event = timeout_event(execution_id, path, fire_at)
    id_ = str(event["id"])
    body: dict[str, object] = {
        "v": ENVELOPE_VERSION,
        "kind": "timer",
        "id": id_,
        "prefix": prefix,
        "attempt": attempt,
        "relayed_at": relayed_at,
        "execution_id": execution_id,
        "path": path,
        "fire_at": fire_at,
        "event": event,
    }
    return Envelope(id_, "timer", prefix, attempt, body, execution_id)
