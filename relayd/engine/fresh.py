"""Fresh entries: read, not yet delivered, with no delivery history (the fast path's columns).

Freshly read entries on the fast path are a ``FreshBatch`` rather than ``Held`` entries: most
entries are delivered and acked on their first attempt and need no delivery history.
``engine.build`` makes them from entries as read; ``engine.judge`` judges their delivery.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Sequence

from relayd.engine.plan import Dead
from relayd.envelope import Envelope
from relayd.envelope.outbox_window import OutboxWindow
from store import RawEntry, RawTimer

#: One fresh entry: its ref (hash field or timer id), the entry as read, its envelope.
Fresh = tuple[str, RawEntry | RawTimer, Envelope]


class FreshBatch:
    """Fresh entries on the fast path, in order, as columns: refs, entries as read, envelopes.

    The envelopes are a list for spawns and timers and an ``OutboxWindow`` for outbox entries,
    which makes no object per entry unless a slow path or a sink indexes it. That is the drain's
    hot path: a thousand envelopes, ``Fresh`` tuples and their frees per window are what
    ``relayd bench --kinds outbox`` drains spent most on. Iterating gives ``Fresh`` tuples (for
    the slow paths).
    """

    __slots__ = ("envelopes", "raws", "refs")

    def __init__(
        self,
        refs: list[str] | None = None,
        raws: list[RawEntry | RawTimer] | None = None,
        envelopes: list[Envelope] | OutboxWindow | None = None,
    ) -> None:
        self.refs = refs if refs is not None else []
        self.raws = raws if raws is not None else []
        self.envelopes = envelopes if envelopes is not None else []

    @classmethod
    def of(cls, items: Iterable[Fresh]) -> FreshBatch:
        batch = cls()
        envelopes: list[Envelope] = []
        for ref, raw, envelope in items:
            batch.refs.append(ref)
            batch.raws.append(raw)
            envelopes.append(envelope)
        batch.envelopes = envelopes
        return batch

    def __len__(self) -> int:
        return len(self.refs)

    def __iter__(self) -> Iterator[Fresh]:
        return zip(self.refs, self.raws, self.envelopes, strict=True)

    def extend(self, other: FreshBatch) -> None:
        """Append ``other`` (a window built in slices)."""
        if not self.refs:
            self.envelopes = other.envelopes
        elif isinstance(self.envelopes, OutboxWindow):
            assert isinstance(other.envelopes, OutboxWindow)  # a lane builds one kind
            self.envelopes.extend(other.envelopes)
        else:
            self.envelopes += other.envelopes
        self.refs += other.refs
        self.raws += other.raws

    def stamped(self, relayed_at: float) -> Sequence[Envelope]:
        """The envelopes, stamped as handed over at ``relayed_at``: the sink's batch."""
        envelopes = self.envelopes
        if isinstance(envelopes, OutboxWindow):
            envelopes.stamp(relayed_at)
        else:
            for envelope in envelopes:
                envelope.stamp(relayed_at)
        return envelopes


#: What one read brought: fresh entries, malformed ones (to dead-letter), how many, when (epoch s).
Fetched = tuple[FreshBatch, list[Dead], int, float]
