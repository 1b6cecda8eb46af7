"""Pure: the bounded, gap-tolerant reader of an outbox or spawns hash (no I/O, no clock).

The hash maps ``seq -> value``; seqs come from an INCR counter *before* the commit
transaction, so a seq may appear late (a slow writer) or never (an aborted transaction
burned it). ``SeqWindow`` decides what to read and what is new; ``BacklogReader`` and
``AsyncBacklogReader`` (``store.readers``) run it against Redis.

State:

* frontier ``f`` — the next seq never examined (restored from ``P:relay:cursor:{kind}``,
  1 when that key is missing);
* ``gaps`` — ``{seq: first_seen_missing}``: seqs below the frontier that were allocated
  but absent when examined;
* ``open`` — fields returned and not yet resolved (acked or dead-lettered);
* ``c_start`` — the counter value seen by the first read.

Each read pipelines ``GET <kind>:seq`` and one HMGET of (the tracked gaps and the window
``[f, f+W)``). Present fields are new entries. Missing seqs above ``c_start`` below the new
frontier become gaps; missing seqs ``<= c_start`` are treated as resolved (acked or burned
before this reader existed). A gap that fills is returned late; a gap older than ``grace_s``
is dropped, and the gap set is capped at ``4 * limit`` (oldest dropped first). ``W`` starts
at ``limit`` and doubles (up to ``64 * limit``) while windows come back empty, so a long
acked prefix is skipped quickly. Once a counter was seen, ``W`` is no larger than what it
allocated beyond the frontier plus a headroom for commits since (the last read's counter growth,
at least ``MIN_HEADROOM``, at most ``limit``): a reader polled often under a light load asks for
the few seqs there are, not a full window of absent ones.

Reconcile: one incremental HSCAN step (COUNT = limit) at most every
``reconcile_interval_s``, and whenever a read finds nothing new. It returns entries below the
frontier that are neither open nor gaps (a commit later than the grace, anything missed), every
entry above the counter (written without taking its seq from the counter: no window would
reach it) and every field that is not a canonical decimal integer (``seq=None``). So a late entry is
returned within ``grace_s`` through its gap, or else within one full reconcile cycle
(``hash size / limit`` steps, one per ``reconcile_interval_s`` or per idle read). A burned seq
never stalls anything: the frontier never waits on it. A read that finds nothing with more than
``SKIP_FACTOR * limit`` seqs left below the counter (a counter jump) looks at the hash's size
(the read's HLEN, below): when it holds at most a widest window (``MAX_WINDOW_FACTOR * limit``)
of entries besides the open ones, one HKEYS of them tells the lowest seq ahead, and the
frontier jumps there instead of walking the burned range.

Below the frontier: each read also asks the hash's size (HLEN, first in the same round-trip, so
a commit during it is not counted). When the hash holds more entries than the reader has open
plus every seq left up to the counter (or, after a read that was not full yet fell short of the
counter, more than it has open), and the hash lists cheaply, one HKEYS tells whether some
lie below the frontier unknown to it (the engine's counter was reset or restored from a
backup): the frontier then moves back to the lowest of them (``rewind``), this read's later
entries are taken back and the window is read again from there at once, so everything comes in
seq order, the entries already open skipped. A listing that finds none makes the next wait a
reconcile interval. A larger hash leaves such entries to the reconcile scan. While the
reconcile is due by the clock a read keeps an eighth of its room for it (``reconcile_share``),
so a reader whose every read is full still scans.

A read returns at most ``limit`` entries in seq order (``seq=None`` last). Its cost is
O(limit + tracked gaps), never O(backlog).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from operator import itemgetter
from typing import NamedTuple

from store.codec import parse_seq

#: The window grows to at most this many times ``limit`` while skipping an empty stretch.
MAX_WINDOW_FACTOR = 64
#: Gaps tracked at most, as a multiple of ``limit`` (the oldest are dropped first).
MAX_GAPS_FACTOR = 4
#: Seqs read past the last counter seen, at least (commits allocated since that read).
MIN_HEADROOM = 32
#: An empty read with more than this many times ``limit`` seqs left to examine looks at the
#: hash's size instead of walking them (``SeqWindow.burned_ahead``).
SKIP_FACTOR = 2


class RawEntry(NamedTuple):
    """One hash entry exactly as stored (immutable).

    A ``NamedTuple`` rather than a frozen dataclass: one is built per entry read, and a tuple
    builds faster (a frozen dataclass sets each field through ``object.__setattr__``).
    """

    field: str  # the hash field exactly as stored (normally str(seq))
    seq: int | None  # int(field) when canonical decimal integer, else None (malformed seq)
    value: bytes  # the stored value, untouched


class RawTimer(NamedTuple):
    """One timers zset entry exactly as stored (immutable; a tuple for the same reason)."""

    member: bytes  # the zset member as stored
    fire_at: float  # its score (epoch seconds)


@dataclass(frozen=True, slots=True)
class WindowRead:
    """What one read fetches: HMGET ``fields`` (gap seqs first, then window seqs)."""

    gap_seqs: tuple[int, ...]
    window_start: int
    window_size: int
    budget: int
    #: the HMGET arguments, built once: ``apply`` names the entries it returns with them
    fields: list[str] = dataclasses.field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        seqs = [*self.gap_seqs, *range(self.window_start, self.window_start + self.window_size)]
        object.__setattr__(self, "fields", [str(s) for s in seqs])


_field_of, _seq_of = itemgetter(0), itemgetter(1)  # RawEntry.field and .seq, read in C


def _sort_key(entry: RawEntry) -> tuple[int, int, str]:
    return (0, entry.seq, "") if entry.seq is not None else (1, 0, entry.field)


class SeqWindow:
    """The reader's state machine. Time (``now``, epoch or monotonic seconds) is a parameter."""

    def __init__(self, *, grace_s: float = 30.0, reconcile_interval_s: float = 1.0) -> None:
        self.grace_s = grace_s
        self.reconcile_interval_s = reconcile_interval_s
        self.frontier = 1
        self.gaps: dict[int, float] = {}
        # field -> seq of every open entry: the low-water mark needs the seqs on every
        # checkpoint, and parsing a thousand fields again each pass cost more than the read.
        self.open: dict[str, int | None] = {}
        self.c_start: int | None = None
        self.counter = 0  # the counter as the last window read saw it
        # seqs above that counter the reconcile scan returned and are still open: no window
        # read returns them again (a commit's INCR may land between the read and the scan)
        self.ahead: set[int] = set()
        self._growth = 0  # how far the counter moved between the last two window reads
        self.scan_cursor = 0
        self.scan_found = 0  # entries the last read's reconcile step returned (0: none, or no step)
        self._window = 0
        self._last_reconcile: float | None = None
        self._full_cycles = 0
        # (cycles, cursor) when the frontier last caught up; None while behind
        self._caught_up: tuple[int, int] | None = None
        self._found_nothing = False
        # The frontier before the last rewind: window reads below it skip the open entries.
        self._rewound_until = 0
        self._listed_in_vain: float | None = None  # when the hash was last listed for no rewind
        # The last read was not full yet left seqs up to the counter unexamined: the counter moved
        # by more than its window (a jump, or a reset and then a jump).
        self._fell_short = False

    # --- state ------------------------------------------------------------------------------
    def restore(self, cursor: int | None) -> None:
        """Start at a persisted low-water mark (None: seq 1)."""
        self.frontier = max(1, cursor or 1)

    def resolve(self, fields: Iterable[str]) -> None:
        """Forget returned entries that were acked or dead-lettered."""
        pop = self.open.pop
        if self.ahead:
            for field in fields:
                self.ahead.discard(pop(field, None))
            return
        for field in fields:
            pop(field, None)

    @property
    def open_count(self) -> int:
        return len(self.open)

    @property
    def low_water_mark(self) -> int:
        """Every seq below this was resolved or passed over: a safe restart point."""
        lowest = min(self.frontier, *self.gaps) if self.gaps else self.frontier
        if not self.open:
            return lowest
        return min(lowest, min((s for s in self.open.values() if s is not None), default=lowest))

    @property
    def caught_up(self) -> bool:
        """The frontier has passed the counter: every allocated seq was examined."""
        return self._caught_up is not None

    @property
    def exhausted(self) -> bool:
        """Nothing new last read, and a full reconcile cycle ran since the frontier caught up."""
        if not self._found_nothing or self._caught_up is None:
            return False
        cycles, cursor = self._caught_up
        return self._full_cycles > cycles + (0 if cursor == 0 else 1)

    # --- the window -------------------------------------------------------------------------
    def plan(self, limit: int) -> WindowRead:
        if limit < 1:
            raise ValueError("limit must be >= 1")
        self._window = max(self._window, limit)
        size = self._window
        if self.c_start is not None:  # a counter was seen
            headroom = min(max(self._growth, MIN_HEADROOM), limit)
            size = min(size, max(self.counter + 1 - self.frontier, 0) + headroom)
        return WindowRead(tuple(sorted(self.gaps)), self.frontier, size, limit)

    def apply(
        self, read: WindowRead, counter: int | None, values: Sequence[bytes | None], now: float
    ) -> list[RawEntry]:
        """Fold one HMGET reply (aligned with ``read.fields``) into the state; return new entries."""
        counter = counter or 0
        self._growth = max(counter - self.counter, 0) if self.c_start is not None else 0
        self.counter = counter
        if self.c_start is None:
            self.c_start = counter
        if self._last_reconcile is None:
            self._last_reconcile = now
        n_gaps = len(read.gap_seqs)
        out = self._take_gaps(read, values[:n_gaps], now)
        window_values = values[n_gaps:]
        found, end = self._window_entries(read, window_values, counter, room=read.budget - len(out))
        out += found
        if len(found) < end:  # some seqs in the window were missing: in-flight commits or burned seqs
            self._note_gaps(read.window_start, window_values[:end], self.c_start, now)
        self.frontier = read.window_start + end
        self._cap_gaps(read.budget)
        self._grow_window(read, len(found), counter)
        self._track_catch_up(counter)
        self.open.update(zip(map(_field_of, out), map(_seq_of, out), strict=True))
        self._found_nothing = not out
        self._fell_short = len(out) < read.budget and self.frontier <= counter
        self.scan_found = 0
        return out

    def _take_gaps(self, read: WindowRead, values: Sequence[bytes | None], now: float) -> list[RawEntry]:
        """The gaps that now hold an entry (up to the budget); gaps older than the grace are let go."""
        out: list[RawEntry] = []
        for seq, value in zip(read.gap_seqs, values, strict=True):
            if value is not None and len(out) < read.budget:
                del self.gaps[seq]
                out.append(RawEntry(str(seq), seq, value))
            elif value is None and now - self.gaps[seq] > self.grace_s:
                del self.gaps[seq]  # passed over: the reconcile scan still finds a late commit
        return out

    def _window_entries(
        self, read: WindowRead, window_values: Sequence[bytes | None], counter: int, *, room: int
    ) -> tuple[list[RawEntry], int]:
        """The window's present entries (at most ``room``) and how far the window was examined."""
        start = read.window_start
        # examined up to the counter, or past anything present beyond it (allocated meanwhile)
        end = min(read.window_size, max(counter + 1 - start, 0))
        last = len(window_values)
        while last > end and window_values[last - 1] is None:
            last -= 1
        end = max(end, last)
        # The hot loop of a drain: one tuple per present entry, named by the field HMGET asked
        # for (tuple.__new__ builds the NamedTuple without its Python-level __new__).
        n_gaps = len(read.gap_seqs)
        new, names = tuple.__new__, read.fields[n_gaps : n_gaps + end]
        found = [
            new(RawEntry, row)
            for row in zip(names, range(start, start + end), window_values[:end], strict=True)
            if row[2] is not None
        ]
        if self.ahead:
            found = [entry for entry in found if entry.seq not in self.ahead]
        if start < self._rewound_until and self.open:  # walking again what was returned before
            found = [entry for entry in found if entry.field not in self.open]
        if len(found) > room:
            first_left = found[room].seq  # the rest waits for the next read
            assert first_left is not None  # window entries always carry their seq
            end, found = first_left - start, found[:room]
        return found, end

    def _note_gaps(self, start: int, values: Sequence[bytes | None], c_start: int, now: float) -> None:
        """Remember the missing seqs of an examined window above the first counter seen."""
        for i, value in enumerate(values):
            if value is None and start + i > c_start:
                self.gaps.setdefault(start + i, now)

    def _grow_window(self, read: WindowRead, taken: int, counter: int) -> None:
        skipping = taken == 0 and self.frontier <= counter
        self._window = min(self._window * 2, read.budget * MAX_WINDOW_FACTOR) if skipping else read.budget

    def _cap_gaps(self, limit: int) -> None:
        excess = len(self.gaps) - MAX_GAPS_FACTOR * limit
        if excess > 0:
            for seq in sorted(self.gaps, key=lambda s: (self.gaps[s], s))[:excess]:
                del self.gaps[seq]

    def _track_catch_up(self, counter: int) -> None:
        if self.frontier <= counter:
            self._caught_up = None
        elif self._caught_up is None:
            self._caught_up = (self._full_cycles, self.scan_cursor)

    # --- a burned range -------------------------------------------------------------------
    def burned_ahead(self, limit: int) -> bool:
        """Whether the last read found nothing while more than ``SKIP_FACTOR * limit`` seqs
        the counter allocated are left to examine: a counter jump, or seqs burned or acked
        long ago. The hash's size then tells where to go (``skip_to``) instead of walking them."""
        return self._found_nothing and self.counter + 1 - self.frontier > SKIP_FACTOR * limit

    def skip_target(self, limit: int, hash_size: int, fields: Iterable[str] | None) -> int | None:
        """Where the frontier may jump, given the hash's size and (when it is small) all its
        fields; None to walk on (more entries than a widest window besides the open ones: as
        many as one walking read would cost to list).

        The jump goes to the lowest seq at or above the frontier the hash holds, at most to
        ``limit`` seqs below the counter (commits in flight near it are walked as usual). A
        late commit in the range jumped over is found by the reconcile scan."""
        if not self.lists_cheaply(limit, hash_size) or fields is None:
            return None
        ahead = [
            seq
            for field in fields
            if (seq := parse_seq(field)) is not None and seq >= self.frontier and field not in self.open
        ]
        return min([self.counter + 1 - limit, *ahead])

    def lists_cheaply(self, limit: int, hash_size: int) -> bool:
        """Whether the hash's fields cost no more to list than one widest window costs to read."""
        return hash_size - len(self.open) <= MAX_WINDOW_FACTOR * limit

    def skip_to(self, seq: int) -> None:
        """Move the frontier to ``seq`` (``skip_target``), past a range holding no entry."""
        if seq > self.frontier:
            self.frontier = seq
            self._window = 0
            self._track_catch_up(self.counter)

    # --- entries below the frontier ---------------------------------------------------------
    def unknown_entries(self, hash_size: int, now: float) -> bool:
        """Whether the hash holds more entries than this reader has open plus every seq left
        between the frontier and the counter: some are below the frontier (a counter reset or
        restore, a late commit) or above the counter.

        ``hash_size`` is read before the window, so a commit during the read is not counted.
        A read that was not full yet left seqs up to the counter unexamined (the counter moved by
        more than its window: a jump, or a reset and then a jump) cannot tell where the entries
        it did not see are: any entry it does not have open may then be below the frontier.
        After a listing that found nothing below the frontier (an entry above the counter,
        a malformed field: the reconcile's), the next waits a reconcile interval."""
        seen = len(self.open)
        if hash_size <= seen:
            return False
        if not self._fell_short and hash_size <= seen + max(self.counter + 1 - self.frontier, 0):
            return False
        last = self._listed_in_vain
        return last is None or now - last >= self.reconcile_interval_s

    def rewind(self, fields: Iterable[str], returned: list[RawEntry], now: float) -> list[RawEntry] | None:
        """Walk again from the lowest seq below the frontier that the hash holds and this reader
        neither has open nor tracks as a gap, so such entries come in seq order, before the
        later ones of their target; None when there is none (nothing changes).

        ``returned`` is this read's entries: those at or above that seq are taken back (the walk
        returns them again, in order) and the rest is returned. Missing seqs up to the counter
        are then resolved, as at a first read."""
        below = [
            seq
            for field in fields
            if (seq := parse_seq(field)) is not None
            and seq < self.frontier
            and seq not in self.gaps
            and field not in self.open
        ]
        if not below:
            self._listed_in_vain = now
            return None
        self._listed_in_vain = None
        start = min(below)
        kept = [entry for entry in returned if entry.seq is None or entry.seq < start]
        for entry in returned:
            if entry.seq is not None and entry.seq >= start:
                del self.open[entry.field]
        self._rewound_until = max(self._rewound_until, self.frontier)
        self.frontier, self.c_start, self._window = start, self.counter, 0
        self._track_catch_up(self.counter)
        self._found_nothing = not kept
        return kept

    # --- the reconcile scan -----------------------------------------------------------------
    def reconcile_due(self, now: float, found_new: bool) -> bool:
        last = self._last_reconcile
        return not found_new or last is None or now - last >= self.reconcile_interval_s

    def reconcile_share(self, limit: int, now: float) -> int:
        """Room a read keeps for its reconcile step when one is due by the clock: an eighth of
        ``limit`` (at least one, none for a read of one), so a reader whose every window comes
        back full still scans."""
        last = self._last_reconcile
        if limit < 2 or last is None or now - last < self.reconcile_interval_s:
            return 0
        return max(1, limit // 8)

    def apply_scan(
        self, next_cursor: int, pairs: Iterable[tuple[str, bytes]], budget: int, now: float
    ) -> list[RawEntry]:
        """Fold one HSCAN step; return entries nobody else will return, at most ``budget``."""
        self._last_reconcile = now
        out: list[RawEntry] = []
        overflow = False
        for field, value in pairs:
            seq = parse_seq(field)
            # A seq between the frontier and the counter is the window's to read; one above the
            # counter no window reaches until the counter does (written without its INCR), so
            # the scan returns it now and marks it ``ahead``.
            if field in self.open or (
                seq is not None and (self.frontier <= seq <= self.counter or seq in self.gaps)
            ):
                continue
            if len(out) >= budget:
                overflow = True
                break
            out.append(RawEntry(field, seq, value))
        self.scan_cursor = int(next_cursor)
        if self.scan_cursor == 0:
            self._full_cycles += 1
        if overflow and self._caught_up is not None:
            # something was left behind in this step: only a fresh full cycle proves exhaustion
            self._caught_up = (self._full_cycles, self.scan_cursor)
        self.open.update((e.field, e.seq) for e in out)
        self.ahead.update(seq for e in out if (seq := e.seq) is not None and seq > self.counter)
        if out:
            self._found_nothing = False
        self.scan_found = len(out)
        return out


def merge(*batches: Sequence[RawEntry]) -> list[RawEntry]:
    """One read's entries in seq order, malformed (``seq=None``) last."""
    return sorted((e for batch in batches for e in batch), key=_sort_key)
