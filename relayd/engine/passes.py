"""What one sweeper pass did: the running ``Tally`` and the ``PassResult`` the loop acts on."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

from relayd.engine.plan import Verdicts
from relayd.envelope import Kind


@dataclass(frozen=True, slots=True)
class PassResult:
    """What one pass did, per kind, and whether there is more to do at once."""

    delivered: dict[Kind, int] = field(default_factory=dict)
    retried: dict[Kind, int] = field(default_factory=dict)
    dead_lettered: dict[Kind, int] = field(default_factory=dict)
    read: int = 0
    attempted: int = 0
    full: bool = False  # a read or a delivery hit its bound: poll again at once
    drained: bool = False  # nothing new, readers exhausted, nothing eligible left
    held: int = 0  # entries waiting in memory (retry backoff, or behind a failing head)
    # until the earliest held entry may go again, or the next timer is due
    next_retry_in_s: float | None = None


@dataclass(slots=True)
class Tally:
    """What a pass has done so far, per kind (filled lane by lane)."""

    delivered: dict[Kind, int] = field(default_factory=dict)
    retried: dict[Kind, int] = field(default_factory=dict)
    dead_lettered: dict[Kind, int] = field(default_factory=dict)
    read: int = 0
    attempted: int = 0
    full: bool = False
    interrupted: bool = False
    #: A live wake-up subscription announces new work (``Sweeper.run_pass``'s ``notified``).
    noticed: bool = False

    def count(self, kind: Kind, verdicts: Verdicts, acked_fast: int) -> None:
        self.delivered[kind] = self.delivered.get(kind, 0) + len(verdicts.ack) + acked_fast
        self.retried[kind] = self.retried.get(kind, 0) + len(verdicts.retry)
        self.dead_lettered[kind] = self.dead_lettered.get(kind, 0) + len(verdicts.dead)

    def freeze(
        self, *, waits: list[float], exhausted: bool, eligible: Callable[[], bool], held: int
    ) -> PassResult:
        """The pass's result: ``waits`` until held entries or the next timer may go (s),
        whether every reader is exhausted, whether a held entry may go now, how many wait."""
        idle = not self.interrupted and self.read == 0 and not self.full
        return PassResult(
            delivered=self.delivered,
            retried=self.retried,
            dead_lettered=self.dead_lettered,
            read=self.read,
            attempted=self.attempted,
            full=self.full,
            drained=idle and exhausted and not eligible(),
            held=held,
            next_retry_in_s=min(waits) if waits else None,
        )
