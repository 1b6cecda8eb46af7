"""Stored entries to envelopes: ``store.backlog.RawEntry`` / ``RawTimer`` in, ``Envelope`` out.

The builders import no Redis and read no clock (``relayed_at`` is a parameter). A window of
outbox entries is built into columns (``outbox_envelopes``: an ``OutboxWindow``, which makes an
envelope only when indexed). A stored value that cannot be decoded raises (or, for a window, is
returned with) ``store.errors.MalformedEntry`` with one of the fixed reasons
(``relayd.envelope.faults``), so the engine can dead-letter it with a bounded ``reason_code``.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Final

import msgspec
import orjson

from relayd.envelope import ENVELOPE_VERSION, Envelope, trace
from relayd.envelope.faults import outbox_fault, spawn_fault
from relayd.envelope.outbox import OutboxEnvelope
from relayd.envelope.outbox_window import OutboxWindow, commit_time
from relayd.envelope.stored import EVENT_SHAPE, MAX_ENTRY_BYTES, EventShape, bytes_fault
from store import MalformedEntry, RawEntry, RawTimer, parse_timer_member
from store.codec import COMMIT_TIME_KEY
from store.trace_context import TRACE_KEY

#: Line breaks to spaces: in JSON text they can only be whitespace between tokens.
_LINE_BREAKS_TO_SPACES: Final = bytes.maketrans(b"\r\n", b"  ")
#: The line breaks as byte values: ``int in bytes`` is a memchr, while ``bytes in bytes`` first
#: tries the needle as an int and builds and clears a TypeError (``relayd bench --kinds outbox``).
_LF, _CR = ord("\n"), ord("\r")


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


def outbox_envelopes(
    entries: Iterable[RawEntry], *, prefix: str, attempt: int, relayed_at: float
) -> tuple[OutboxWindow, list[RawEntry], list[tuple[RawEntry, MalformedEntry]]]:
    """The envelopes of outbox entries ``{"t": target_id|null, "e": event_json_string}`` (and
    the commit's trace context ``"tc"``, when ``store`` recorded one: ``relayd.envelope.trace``).

    Returns the well-formed entries' envelopes as one ``OutboxWindow`` and those entries (both
    in order), and each malformed entry with why (a reason of ``store.MALFORMED_REASONS``).
    One loop for a window, into columns: no object per entry.
    """
    # The hot path of a drain: a length check, then one try around the parse and the checks;
    # only an entry that fails them goes through ``outbox_fault`` to learn which reason to
    # dead-letter with. The event is checked here (``relayd.envelope.stored``: the engine's shape,
    # its depth bounded), so a malformed one is caught at read, not by the sink.
    shapes: list[EventShape] = []
    fields: list[str] = []
    seqs: list[int] = []
    targets: list[str | None] = []
    events: list[bytes] = []
    traced: list[tuple[int, dict[str, str]]] = []  # (index, context): few entries carry one
    stamped: list[int] = []  # the indexes of entries ``store`` stamped with a commit time
    stamps: list[float | None] = []  # their stamps as read (checked where used: ``OutboxWindow.committed``)
    context_of = trace.of_value
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
                shape = check(event_json)
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
            malformed.append((entry, outbox_fault(entry)))
            continue
        if _LF in event_json or _CR in event_json:
            # A string must escape its line breaks, so these lie between tokens; as spaces they
            # keep an envelope one line (a JSONL record, a log line) and the event the same.
            event_json = event_json.translate(_LINE_BREAKS_TO_SPACES)
        fields.append(field)
        seqs.append(seq)
        targets.append(target_id)
        events.append(event_json)
        shapes.append(shape)
        if len(value) != 2:  # beyond harel's two keys: the commit's trace context and time
            if TRACE_KEY in value:
                traced.append((len(good), context_of(value)))
            if type(committed := value.get(COMMIT_TIME_KEY)) is float:
                stamped.append(len(good))
                stamps.append(committed)
        good.append(entry)
    window = OutboxWindow(prefix, attempt, relayed_at, fields, seqs, targets, events, shapes)
    for index, context in traced:
        window.contexts[index] = context
    if len(stamped) == len(fields):  # every one (or none: then the window keeps no column)
        window.committed = stamps or None
    elif stamped:
        column: list[float | None] = [None] * len(fields)
        for index, committed in zip(stamped, stamps, strict=True):
            column[index] = committed
        window.committed = column
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
        raise spawn_fault(entry)
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
    envelope = Envelope(id_, "spawn", prefix, attempt, body, child_id)
    if len(value) > 4:  # more than harel's four keys: the commit's trace context and time, perhaps
        body.update(trace.of_value(value))
        envelope.committed_at = commit_time(value.get(COMMIT_TIME_KEY))
    # Keyed by the child: its events (outbox entries targeted at it) must not overtake it.
    return envelope


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
