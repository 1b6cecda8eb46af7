"""One kind's lane in a sweeper: what one kind carries from pass to pass.

Its sink and the sink's guard, its reader, its waiting line (``Held`` entries by ref) and what it
keeps in flight between two windows (``engine.overlap``).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from relayd.engine.fresh import FreshBatch
from relayd.engine.overlap import Overlap
from relayd.engine.plan import Held
from relayd.engine.sink_guard import SinkGuard
from relayd.envelope import Kind
from relayd.sinks.base import Sink
from store import AsyncBacklogReader


@dataclass(slots=True)
class Lane:
    """One kind's sink and its guard (lock, breaker, rate), reader, and the entries waiting in
    memory (by ref)."""

    kind: Kind
    sink: Sink
    guard: SinkGuard
    reader: AsyncBacklogReader | None  # None for timers (read straight from the zset)
    held: dict[str, Held] = field(default_factory=dict)
    # P:relay:attempts:{kind} may hold records: False only after an EXISTS said it is empty
    # and this sweeper wrote none since, so a first-time read needs no HMGET of the records.
    attempts_maybe: bool = True
    # The next window read ahead and the last window's ack, in flight between two windows.
    overlap: Overlap = field(default_factory=Overlap)

    def hold(self, fresh: FreshBatch, now: float) -> None:
        """Put fresh entries in the waiting line (not delivered now: the lease, a smaller batch)."""
        for ref, raw, envelope in fresh:
            self.held[ref] = Held(ref, raw, envelope, now)
