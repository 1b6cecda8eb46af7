"""One kind's lane in a sweeper: everything one kind carries from pass to pass.

Its sink and the sink's guard, its reader, its waiting line (``Held`` entries by ref), and what
it keeps in flight between two windows: the next window read ahead, the last window's ack.

A full window's delivery runs while the next window is read and built (the read-ahead), and the
ack of a window delivered whole on the fast path runs while the next one is delivered (the
deferred ack). Both overlap Redis's work with the relay's instead of waiting out a round-trip
(``relayd bench --kinds outbox`` shows each, old and new code alternating). The lane holds
them, so a pass reads as read (``take_read_ahead`` first), deliver, settle (``settled`` first).

The ack of the last window of a pass that was not full may instead be carried to the lane's
next read (``carried``): under a steady writer the next pass comes within milliseconds, and its
read takes the HDEL along in the same round-trip (``Window.read``, unless it takes a window
read ahead), one round-trip less per pass. The loop says when to carry: only
when a write was noticed during the pass (another pass is coming); else, and on a stop or
hand-back, it is sent on its own. A carried ack outlives one pass at most: one the next pass's
reads did not take is sent at that pass's end (``carried_from_last_pass``).

Only a hash lane defers or carries its ack, and only for a window of fresh entries all confirmed:
its settlement is the HDEL and the reader's ``resolve``, which nothing before the next ack depends
on. Its entries stay open in the reader until then, so no read returns them again and a
checkpoint stays below them; a crash meanwhile redelivers them (at-least-once). A timer lane
never defers: its next read would return timers delivered but not yet deleted. At most one ack
per lane is in flight: the one before is awaited (and counted) first; its error fails the pass
that awaits it, like any Redis error.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Coroutine
from dataclasses import dataclass, field
from typing import Any

from relayd.engine.fresh import Fetched, FreshBatch
from relayd.engine.plan import Held
from relayd.engine.sink_guard import SinkGuard
from relayd.envelope import Kind
from relayd.sinks.base import Sink
from store import AsyncBacklogReader


@dataclass(slots=True)
class Lane:
    """One kind's sink and its guard (lock, breaker, rate), reader, the entries waiting in
    memory (by ref), and its read-ahead window, ack in flight and carried ack (each None when
    there is none)."""

    kind: Kind
    sink: Sink
    guard: SinkGuard
    reader: AsyncBacklogReader | None  # None for timers (read straight from the zset)
    held: dict[str, Held] = field(default_factory=dict)
    # P:relay:attempts:{kind} may hold records: False only after an EXISTS said it is empty
    # and this sweeper wrote none since, so a first-time read needs no HMGET of the records.
    attempts_maybe: bool = True
    # The next window, read while the sink delivered the last one (a timer read-ahead skips the
    # timers in flight: ``engine.timer_reads``). Consumed by the next read.
    read_ahead: Fetched | None = None
    # The ack (HDEL) of the last fully delivered window, still in flight, and how many it acks.
    acking: tuple[asyncio.Task[None], int] | None = None
    # The fields of the last window delivered whole, to be deleted by the lane's next read.
    carried: list[str] | None = None
    # Timers: when the first timer not yet due is (epoch s), from the lane's last read or probe.
    next_due_at: float | None = None
    # The carried ack as the pass under way found it (``begin_pass``).
    _carried_before: list[str] | None = field(default=None, init=False, repr=False)

    def hold(self, fresh: FreshBatch, now: float) -> None:
        """Put fresh entries in the waiting line (not delivered now: the lease, a smaller batch)."""
        for ref, raw, envelope in fresh:
            self.held[ref] = Held(ref, raw, envelope, now)

    # --- the read-ahead ------------------------------------------------------------------------
    def take_read_ahead(self) -> Fetched | None:
        """The window read ahead, if any; the next read after it goes to Redis."""
        fetched, self.read_ahead = self.read_ahead, None
        return fetched

    # --- the deferred ack ----------------------------------------------------------------------
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

    # --- the carried ack -----------------------------------------------------------------------
    def carry(self, fields: list[str]) -> None:
        """Keep the ack of ``fields`` for the next read; nothing may be in flight or carried."""
        assert self.acking is None, "settle the ack in flight before carrying one"
        assert self.carried is None, "send the carried ack before carrying another"
        self.carried = fields

    def take_carried(self) -> list[str]:
        """The carried ack's fields (empty: none); the caller sends them."""
        fields, self.carried = self.carried or [], None
        return fields

    def begin_pass(self) -> None:
        """Note the carried ack the last pass left (``carried_from_last_pass``)."""
        self._carried_before = self.carried

    def carried_from_last_pass(self) -> bool:
        """Whether the last pass's carried ack is still here: no read of this pass took it (its
        breaker open, too many held, a window read ahead), so this pass's end sends it."""
        return bool(self.carried) and self.carried is self._carried_before

    # --- a sweeper given up --------------------------------------------------------------------
    def abandon(
        self,
        send: Callable[[list[str]], Coroutine[Any, Any, None]],
        on_acked: Callable[[int], None],
        on_failed: Callable[[BaseException], None] = lambda exc: None,
    ) -> None:
        """Let the ack in flight finish on its own, the carried one sent now alike (``send``);
        ``on_acked(count)`` runs for each that succeeds, ``on_failed(error)`` for each that raises."""
        self._let_finish(on_acked, on_failed)
        if fields := self.take_carried():
            self.defer_ack(asyncio.create_task(send(fields)), len(fields))
            self._let_finish(on_acked, on_failed)

    def _let_finish(
        self, on_acked: Callable[[int], None], on_failed: Callable[[BaseException], None]
    ) -> None:
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
