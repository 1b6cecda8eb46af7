"""The ``relayd/1`` delivery envelope (docs/internals.md#key-space): what every sink receives for every entry.

``Envelope`` is the value type shared by the engine and the sinks, and ``Kind`` names the three
kinds of entry. The package's modules build and read envelopes: ``decode`` builds them from stored
entries (``stored`` and ``faults``: the policy for bytes relayd did not write, ``trace``: the
stored trace context); an outbox entry's envelope keeps its parts (``outbox``, ``outbox_json``),
a read window of them stays columns (``outbox_window``), and ``batch`` is what a sink receives.
"""

from __future__ import annotations

from typing import Final, Literal

from store import dumps

#: The envelope format tag; a receiver refuses what it does not know.
ENVELOPE_VERSION: Final = "relayd/1"

Kind = Literal["outbox", "spawn", "timer"]
KINDS: Final[tuple[Kind, ...]] = ("spawn", "outbox", "timer")  # the order of one pass


class Envelope:
    """One entry ready for a sink; treat it as immutable once handed to a sink.

    ``body`` is the whole ``relayd/1`` JSON object (``v``, ``kind``, ``id``, ``prefix``,
    ``attempt``, ``relayed_at`` and the kind's fields); ``ordering_key`` is the per-target
    order key (``target_id`` for outbox, ``child_id`` for spawns, ``execution_id`` for timers).
    A new attempt gets a new envelope (``restamped``); the JSON is cached by the first ``to_json``.
    ``relayd.envelope.decode.outbox_envelope`` builds an ``OutboxEnvelope``, which keeps parts
    instead of a body.
    """

    # A plain class with slots, not a dataclass: one envelope is built per entry on the hot
    # path, and a frozen dataclass builds slower (``relayd bench --kinds spawn,timer``).
    __slots__ = ("_body", "_json", "attempt", "committed_at", "id", "kind", "ordering_key", "prefix")

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
        #: The commit time ``store`` stamped on the entry (epoch seconds), None when unknown.
        self.committed_at: float | None = None

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
        again = Envelope(self.id, self.kind, self.prefix, attempt, body, self.ordering_key)
        again.committed_at = self.committed_at
        return again

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
