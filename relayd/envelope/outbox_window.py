"""``OutboxWindow``: the outbox envelopes of one read window as columns, the drain's sink batch."""

from __future__ import annotations

from typing import Final, overload

from relayd.envelope import Kind, trace
from relayd.envelope.batch import Batch
from relayd.envelope.outbox import OutboxEnvelope
from relayd.envelope.outbox_json import OutboxFrame
from relayd.envelope.stored import EventShape

#: No commit time is later than this (epoch seconds, the year 5138).
_LATEST: Final = 1e11


def commit_time(stamp: object) -> float | None:
    """A commit time stamped on a stored value (``"ct"``, epoch seconds on the Redis server's
    clock, ``store.codec.stamp_commit_time``) when it is a plausible one; else None. The stamp
    comes from another process: a string, a negative or an infinite number is none."""
    if type(stamp) is float and 0.0 < stamp < _LATEST:  # the comparison refuses nan too
        return stamp
    return None


class OutboxWindow(Batch):
    """The outbox envelopes of one read window, kept as columns: the fast path's sink batch.

    A drain hands a sink a thousand outbox envelopes per call; as objects they cost more to
    build, stamp, render and free than the columns, and drains are faster without them
    (``relayd bench --kinds outbox``). A window keeps the columns ``outbox_envelopes`` parsed
    (fields, seqs, targets, events as stored, and the events' checked ``EventShape``, or None
    for a window made by hand) and one stamp, and is a ``Batch`` like any other:
    indexing it makes that entry's ``OutboxEnvelope`` (equal, not identical, on each access), a
    slice is a window, and ``render``, ``ids`` and ``keys`` read the columns without making
    envelopes, so every sink's bytes come from the same ``OutboxFrame.render``.
    """

    __slots__ = (
        "attempt",
        "committed",
        "contexts",
        "events",
        "fields",
        "prefix",
        "relayed_at",
        "seqs",
        "shapes",
        "targets",
    )

    def __init__(  # noqa: PLR0917 - the columns, in the order of an OutboxEnvelope's parts
        self,
        prefix: str,
        attempt: int,
        relayed_at: float,
        fields: list[str],
        seqs: list[int],
        targets: list[str | None],
        events: list[bytes],
        shapes: list[EventShape] | None = None,
        contexts: list[dict[str, str]] | None = None,
        committed: list[float | None] | None = None,
    ) -> None:
        self.prefix = prefix
        self.attempt = attempt
        self.relayed_at = relayed_at
        self.fields = fields
        self.seqs = seqs
        self.targets = targets
        self.events = events
        self.shapes = shapes
        #: Each entry's stored trace context, checked (``trace``; ``NONE``, shared, for none).
        self.contexts = [trace.NONE] * len(fields) if contexts is None else contexts
        #: Each entry's commit time ``store`` stamped, as read (None where there is none; check
        #: one with ``commit_time`` before use); None when no entry of the window carries one
        #: (harel's entries), so those cost nothing.
        self.committed = committed

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
                None if self.shapes is None else self.shapes[index],
                self.contexts[index],
                None if self.committed is None else self.committed[index],
            )
        return OutboxEnvelope(
            self.prefix,
            self.fields[index],
            self.seqs[index],
            self.attempt,
            self.relayed_at,
            self.targets[index],
            self.events[index],
            self.contexts[index],
            None if self.committed is None else commit_time(self.committed[index]),
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
        if self.shapes is not None and other.shapes is not None:
            self.shapes += other.shapes
        else:
            self.shapes = None
        if self.committed is not None or other.committed is not None:
            ours = self.committed or [None] * (len(self.fields) - len(other.fields))
            ours += other.committed or [None] * len(other.fields)
            self.committed = ours
        self.contexts += other.contexts

    def render(self) -> list[bytes]:
        """Every envelope's JSON, in order (what they share rendered once)."""
        frame = OutboxFrame.of(self.prefix, self.attempt, self.relayed_at)
        if any(self.contexts):  # an empty context is false: checked in C, the common case
            members = [trace.members(context) for context in self.contexts]
        else:
            members = [b""] * len(self.contexts)
        return frame.render(self.fields, self.targets, self.events, members)

    def ids(self) -> list[str]:
        return [f"{self.prefix}:outbox:{field}" for field in self.fields]

    def keys(self) -> list[str | None]:
        return self.targets[:]  # a copy: the window's own column stays the window's
