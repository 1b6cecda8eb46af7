"""One kind's lane in a sweeper: its sink, reader and waiting line, and the fast-path entries.

Freshly read entries on the fast path are a ``FreshBatch`` rather than ``Held`` entries: most
entries are delivered and acked on their first attempt and need no delivery history.
``build_fresh`` makes them from entries as read and ``judge_delivery`` judges a delivery of
held and fresh entries (both pure). ``Lane`` keeps what one kind carries from pass to pass.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import cast

from relayd.decode import outbox_envelopes, spawn_envelope, timer_envelope
from relayd.engine.overlap import Overlap
from relayd.engine.plan import Dead, Held, Verdicts, judge
from relayd.engine.sink_guard import SinkGuard
from relayd.envelope import Envelope, Kind
from relayd.outbox_window import OutboxWindow
from relayd.sinks.base import Delivered, Outcome, Retry, Sink, all_delivered
from relayd.stored import display_text
from store import AsyncBacklogReader, MalformedEntry, RawEntry, RawTimer

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


def timer_ref(timer: RawTimer) -> str:
    """A timer's stable id: its Timeout event id, or a readable stand-in when malformed."""
    try:
        return timer_envelope(timer, prefix="", attempt=1, relayed_at=0.0).id
    except MalformedEntry:
        member = display_text(timer.member).replace("\x00", "\\x00")
        return f"timeout:{member}:{float(timer.fire_at)}"


def build_fresh(
    kind: Kind, prefix: str, raws: Sequence[RawEntry | RawTimer], now: float
) -> tuple[FreshBatch, list[Dead]]:
    """Envelopes (attempt 1, stamped ``now``) for ``raws``; malformed ones become dead letters."""
    failures: list[tuple[RawEntry | RawTimer, MalformedEntry]] = []
    if kind == "outbox":
        # The hot path of a drain: a window in one loop, into columns (``outbox_envelopes``).
        # A hash lane's reader returns entries only.
        entries = cast("Sequence[RawEntry]", raws)
        window, good, bad = outbox_envelopes(entries, prefix=prefix, attempt=1, relayed_at=now)
        # ``refs`` a copy of the window's fields: extending the batch extends both, once each.
        fresh = FreshBatch(window.fields[:], cast("list[RawEntry | RawTimer]", good), window)
        failures += bad
    else:
        fresh = FreshBatch()
        envelopes: list[Envelope] = []
        for raw in raws:
            try:
                if isinstance(raw, RawTimer):
                    envelope = timer_envelope(raw, prefix=prefix, attempt=1, relayed_at=now)
                    ref = envelope.id
                else:
                    envelope = spawn_envelope(raw, prefix=prefix, attempt=1, relayed_at=now)
                    ref = raw.field
            except MalformedEntry as exc:
                failures.append((raw, exc))
                continue
            fresh.refs.append(ref)
            fresh.raws.append(raw)
            envelopes.append(envelope)
        fresh.envelopes = envelopes
    return fresh, [_dead_letter(kind, prefix, raw, why, now) for raw, why in failures]


def dead_letter_id(prefix: str, kind: Kind, ref: str) -> str:
    """The id a dead letter is parked and logged under (the one ``relayd dlq list`` shows)."""
    return display_text(ref) if kind == "timer" else f"{prefix}:{kind}:{display_text(ref)}"


def _dead_letter(kind: Kind, prefix: str, raw: RawEntry | RawTimer, why: MalformedEntry, now: float) -> Dead:
    """A malformed entry on its way to the dead letters: no envelope could be built, so an empty
    one, named by the dead letter's id."""
    ref = timer_ref(raw) if isinstance(raw, RawTimer) else raw.field
    placeholder = Envelope(dead_letter_id(prefix, kind, ref), kind, prefix, 0, {})
    return Dead(Held(ref, raw, placeholder, now), why.reason, str(why))


def hold_all(picked: list[Held], fast: FreshBatch, now: float) -> tuple[Verdicts, FreshBatch, list[Held]]:
    """``judge_delivery`` for a delivery the sink's breaker counts as an outage: no attempt is
    charged, nothing acked or dead-lettered; the fast entries join the waiting line."""
    failed = [Held(ref, raw, envelope, now) for ref, raw, envelope in fast]
    for held in (*picked, *failed):
        held.probed_at = now
    return Verdicts(held_back=list(picked)), FreshBatch(), failed


def judge_delivery(
    picked: list[Held],
    fast: FreshBatch,
    outcomes: Sequence[Outcome],
    *,
    now: float,
    max_attempts: int,
    delay_s: Callable[[int], float],
) -> tuple[Verdicts, FreshBatch, list[Held]]:
    """Judge one delivery of ``picked`` then ``fast``: verdicts, the fast entries to ack, and
    the fast entries the sink did not confirm, now ``Held`` (they join the waiting line).

    The held entries and the fast ones the sink did not confirm go through one ``plan.judge``,
    in the order the sink had them (retry with backoff, hold-back behind its key's failed head,
    dead letter); a confirmed fast entry is acked without one, unless an earlier entry of its
    ordering key in this delivery was not delivered: then it is held back too, and delivered
    again after that entry (per-key order, whatever the sink).
    """
    total = len(picked) + len(fast)
    if len(outcomes) != total:  # the sink broke its contract: every entry retries
        outcomes = [Retry(error=f"sink returned {len(outcomes)} outcomes for {total} entries")] * total
    elif not picked and all_delivered(outcomes, total):
        return Verdicts(), fast, []  # the common case: all fresh, all confirmed
    judged, judged_outcomes = list(picked), list(outcomes[: len(picked)])
    failed_keys = {
        key
        for held, outcome in zip(picked, judged_outcomes, strict=True)
        if type(outcome) is not Delivered and (key := held.envelope.ordering_key) is not None
    }
    acked: list[Fresh] = []
    failed: list[Held] = []
    for fresh, outcome in zip(fast, outcomes[len(picked) :], strict=True):
        key = fresh[2].ordering_key
        if type(outcome) is Delivered and (key is None or key not in failed_keys):
            acked.append(fresh)
        else:
            if key is not None:
                failed_keys.add(key)
            failed.append(Held(fresh[0], fresh[1], fresh[2], now))
            judged_outcomes.append(outcome)
    judged += failed
    verdicts = judge(judged, judged_outcomes, now=now, max_attempts=max_attempts, delay_s=delay_s)
    return verdicts, FreshBatch.of(acked), failed
