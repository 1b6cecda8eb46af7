"""The ``relayd/1`` delivery envelope (DESIGN §3): what every sink receives for every entry.

``Envelope`` is the value type shared by the engine and the sinks. The pure builders that turn
raw stored entries into envelopes live beside it (added by the engine).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Final, Literal

import orjson

#: The envelope format tag; a receiver refuses what it does not know.
ENVELOPE_VERSION: Final = "relayd/1"

Kind = Literal["outbox", "spawn", "timer"]
KINDS: Final[tuple[Kind, ...]] = ("spawn", "outbox", "timer")  # the order of one pass


@dataclass(frozen=True, slots=True)
class Envelope:
    """One entry ready for a sink.

    ``body`` is the whole ``relayd/1`` JSON object (``v``, ``kind``, ``id``, ``prefix``,
    ``attempt``, ``relayed_at`` and the kind's fields); ``ordering_key`` is the per-target
    order key (``target_id`` for outbox, ``child_id`` for spawns, ``execution_id`` for timers).
    """

    id: str
    kind: Kind
    prefix: str
    attempt: int
    body: dict[str, object]
    ordering_key: str | None = None
    _json: list[bytes] = field(default_factory=list, repr=False, compare=False)

    def to_json(self) -> bytes:
        """The body as compact JSON bytes (serialised once, then cached)."""
        if not self._json:
            self._json.append(orjson.dumps(self.body))
        return self._json[0]
