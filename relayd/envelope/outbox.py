"""``OutboxEnvelope``: an outbox entry's envelope kept as its parts, its body built only when read."""

from __future__ import annotations

import json

import orjson

from relayd.envelope import ENVELOPE_VERSION, Envelope, trace
from relayd.envelope.outbox_json import OutboxFrame


class OutboxEnvelope(Envelope):
    """An outbox entry's envelope kept as its parts: seq, target, stamp and the event as stored.

    The event is a pass-through payload: ``relayd.envelope.decode`` checks that it is a JSON object
    and keeps its text, which ``to_json`` writes as it is. ``to_json`` renders the rest from the
    parts, and what the envelopes of one delivery share (prefix, attempt, stamp) once per
    delivery (``OutboxFrame``), instead of building a dict and serialising it: the bytes orjson
    gives for the body, with the event's stored text where its serialisation would be, at less
    CPU (``tests/benchmarks/profile_drain.py``). ``body`` is built, and the event decoded, only
    when read (the harel and log sinks; the stream, JSONL and webhook sinks never do).
    """

    __slots__ = ("_context", "_event", "_field", "_relayed_at", "_seq")

    def __init__(  # noqa: PLR0917 - one per entry on the hot path
        self,
        prefix: str,
        field: str,
        seq: int,
        attempt: int,
        relayed_at: float,
        target_id: str | None,
        event_json: bytes,
        context: dict[str, str] = trace.NONE,
        committed_at: float | None = None,
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
        self._context = context  # the stored trace context, checked (``trace``)
        self._body = None
        self._json = None
        self.committed_at = committed_at

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
                **self._context,
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
            self.prefix,
            self._field,
            self._seq,
            attempt,
            relayed_at,
            self.ordering_key,
            self._event,
            self._context,
            self.committed_at,
        )

    def to_json(self) -> bytes:
        if self._json is None:
            frame = OutboxFrame.of(self.prefix, self.attempt, self._relayed_at)
            members = trace.members(self._context)
            self._json = frame.render((self._field,), (self.ordering_key,), (self._event,), (members,))[0]
        return self._json


def _decode_event(event_json: bytes) -> dict[str, object]:
    """A pass-through event as an object (checked to be a JSON object when it was read)."""
    try:
        event = orjson.loads(event_json)
    except orjson.JSONDecodeError:
        # JSON orjson refuses although the check passed: a number beyond a double's range.
        event = json.loads(event_json)
    return event  # type: ignore[no-any-return]
