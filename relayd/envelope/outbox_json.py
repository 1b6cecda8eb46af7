"""The ``relayd/1`` JSON of outbox envelopes, rendered from their parts instead of a dict.

One ``OutboxFrame`` renders what the envelopes of one delivery share once, then each envelope's
bytes in one loop: the bytes orjson gives for the body, with the event's stored text where its
serialisation would be. ``OutboxEnvelope.to_json`` and ``OutboxWindow.render`` both use it, so
every sink's bytes of an outbox entry are the same. Pure.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import ClassVar

import orjson

from relayd.envelope import ENVELOPE_VERSION


class OutboxFrame:
    """What the outbox envelopes of one delivery share, rendered once; the last one is kept.

    ``head`` runs up to the seq in the id (``{"v":...,"id":"P:outbox:``), ``middle`` from the
    id's closing quote to the seq's value (``","prefix":...,"relayed_at":T,"seq":``). A delivery
    stamps every envelope with one float object, so a check of identity finds the frame; any
    other stamp (an equal float included) renders a new one.
    """

    __slots__ = ("attempt", "head", "middle", "prefix", "relayed_at")
    last: ClassVar[OutboxFrame]

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
    def of(cls, prefix: str, attempt: int, relayed_at: float) -> OutboxFrame:
        """The frame of a delivery: the last one when it is the same, else a new one."""
        frame = cls.last
        if frame.relayed_at is not relayed_at or frame.attempt != attempt or frame.prefix != prefix:
            cls.last = frame = cls(prefix, attempt, relayed_at)
        return frame

    def render(
        self,
        fields: Iterable[str],
        targets: Iterable[str | None],
        events: Iterable[bytes],
        members: Iterable[bytes],
    ) -> list[bytes]:
        """Envelopes' JSON: the bytes orjson gives for each body, with the event as stored and
        the trace members (``relayd.envelope.trace.members``, mostly empty) last.

        One loop for a window: a call per entry costs more than the rendering can spare
        (``tests/benchmarks/profile_drain.py``).
        """
        head, middle, dumps = self.head, self.middle, orjson.dumps
        target_key, event_key = b',"target_id":', b',"event":'
        rendered = []
        for field, target, event, trace in zip(fields, targets, events, members, strict=True):
            seq = field.encode()  # canonical decimal: the id's tail, and the seq as JSON
            rendered.append(
                b"".join((head, seq, middle, seq, target_key, dumps(target), event_key, event, trace, b"}"))
            )
        return rendered


OutboxFrame.last = OutboxFrame("", 0, 0.0)
