"""Delivery rates from two overview readings, for the kinds whose engine counters allow it. Pure.

The engine INCRs ``P:outbox:seq`` / ``P:spawns:seq`` for every entry it writes, so between two
readings ``written - (backlog growth) - (dead-letter growth)`` entries were delivered. Timers have
no such counter; their rate is not shown rather than guessed.
"""

from __future__ import annotations

from dataclasses import dataclass

from relayd.envelope import Kind


@dataclass(frozen=True, slots=True)
class KindCounters:
    """One kind at one instant: the engine's seq counter (None for timers), backlog, dead letters."""

    seq: int | None
    backlog: int
    dead: int


def delivery_rate(before: KindCounters, after: KindCounters, elapsed_s: float) -> float | None:
    """Entries delivered per second between the readings, or None when it cannot be known."""
    if before.seq is None or after.seq is None or elapsed_s <= 0:
        return None
    delivered = (after.seq - before.seq) - (after.backlog - before.backlog) - (after.dead - before.dead)
    return max(0.0, delivered / elapsed_s)


def delivery_rates(
    before: dict[Kind, KindCounters], after: dict[Kind, KindCounters], elapsed_s: float
) -> dict[Kind, float | None]:
    return {kind: delivery_rate(before[kind], after[kind], elapsed_s) for kind in after if kind in before}
