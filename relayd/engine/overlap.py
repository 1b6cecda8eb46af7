"""What one lane keeps in flight between two windows: the next window read ahead, the last ack.

A full window's delivery runs while the next window is read and built (the read-ahead), and the
ack of a window delivered whole on the fast path runs while the next one is delivered (the
deferred ack). Both overlap Redis's work with the relay's instead of waiting out a round-trip
(``relayd bench --kinds outbox`` shows each, old and new code alternating). This object holds
them, so a pass reads as read (``take_read_ahead`` first), deliver, settle (``settled`` first).

The ack of the last window of a pass that was not full may instead be carried to the lane's
next read (``carried``): under a steady writer the next pass comes within milliseconds, and its
read takes the HDEL along in the same round-trip (``AsyncBacklogReader.read_new``), one
round-trip less per pass. The loop says when to carry: only when a write was noticed during the
pass (another pass is coming); else, and on a stop or hand-back, it is sent on its own.

Only a hash lane defers or carries its ack, and only for a window of fresh entries all confirmed: its
settlement is the HDEL and the reader's ``resolve``, which nothing before the next ack depends
on. Its entries stay open in the reader until then, so no read returns them again and a
checkpoint stays below them; a crash meanwhile redelivers them (at-least-once). A timer lane
never defers: its next read would return timers delivered but not yet deleted. At most one ack
per lane is in flight: the one before is awaited (and counted) first; its error fails the pass
that awaits it, like any Redis error.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from dataclasses import dataclass

from relayd.engine.fresh import Fetched


@dataclass(slots=True)
class Overlap:
    """One lane's read-ahead window and its ack in flight (each None when there is none)."""

    # The next window, read while the sink delivered the last one (a timer read-ahead skips the
    # timers in flight: ``engine.timer_reads``). Consumed by the next read.
    read_ahead: Fetched | None = None
    # The ack (HDEL) of the last fully delivered window, still in flight, and how many it acks.
    acking: tuple[asyncio.Task[None], int] | None = None
    # The fields of the last window delivered whole, to be deleted by the lane's next read.
    carried: list[str] | None = None

    def take_read_ahead(self) -> Fetched | None:
        """The window read ahead, if any; the next read after it goes to Redis."""
        fetched, self.read_ahead = self.read_ahead, None
        return fetched

    def carry(self, fields: list[str]) -> None:
        """Keep the ack of ``fields`` for the next read; nothing may be in flight or carried."""
        assert self.acking is None, "settle the ack in flight before carrying one"
        assert self.carried is None, "send the carried ack before carrying another"
        self.carried = fields

    def take_carried(self) -> list[str]:
        """The carried ack's fields (empty: none); the caller sends them."""
        fields, self.carried = self.carried or [], None
        return fields

    def defer_ack(self, task: asyncio.Task[None], count: int) -> None:
        """Leave ``task`` (an ack of ``count`` entries) in flight; the one before must be settled."""
        assert self.acking is None, "settle the ack in flight before deferring another"
        self.acking = (task, count)

    async def settled(self) -> int | None:
        """Wait for the ack in flight; how many entries it acked, or None when none was in flight."""
        pending, self.acking = self.acking, None
        if pending is None:
            return None
        task, count = pending
        await task
        return count

    def abandon(
        self, on_acked: Callable[[int], None], on_failed: Callable[[BaseException], None] = lambda exc: None
    ) -> None:
        """Let the ack in flight finish on its own; ``on_acked(count)`` runs if it succeeds,
        ``on_failed(error)`` if it raises."""
        pending, self.acking = self.acking, None
        if pending is None:
            return
        task, count = pending

        def done(finished: asyncio.Task[None]) -> None:
            if finished.cancelled():
                return
            error = finished.exception()
            if error is None:
                on_acked(count)
            else:
                on_failed(error)

        task.add_done_callback(done)
