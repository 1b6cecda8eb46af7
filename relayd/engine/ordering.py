"""Per-target head-of-line ordering: a failing head holds back its own target only.

Entries arrive in delivery order (seq for outbox and spawns, fire_at for timers). An entry
with an ordering key may go out only when no earlier entry of the same key is still waiting
(for a retry backoff) or blocked; entries without a key (an untargeted outbox event) are free.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Iterable
from typing import TypeVar

T = TypeVar("T")


def select_heads(
    items: Iterable[T],
    *,
    key: Callable[[T], str | None],
    ready: Callable[[T], bool],
    limit: int,
    blocked: Collection[str] = (),
) -> tuple[list[T], set[str]]:
    """Pick, in order, at most ``limit`` items that may be delivered now.

    Args:
        items: pending items in delivery order.
        key: the item's ordering key (``None``: no order constraint).
        ready: whether the item itself may go now (its retry backoff has passed).
        limit: most items to pick.
        blocked: keys held back from outside (a spawn of that child still pending).

    Returns:
        The picked items, and every key that is held back (blocked, or whose head is waiting).
    """
    picked: list[T] = []
    held = set(blocked)
    for item in items:
        if len(picked) >= limit:
            break
        k = key(item)
        if k is not None and k in held:
            continue
        if not ready(item):
            if k is not None:
                held.add(k)
            continue
        picked.append(item)
    return picked, held


def split_fresh(
    items: Iterable[T],
    *,
    key: Callable[[T], str | None],
    has_history: Callable[[T], bool],
    blocked: set[str],
) -> tuple[list[T], list[T]]:
    """Split freshly read items (in delivery order) into a fast lane and a waiting line.

    An item may go straight to the sink when it has no delivery history and its key is not
    ``blocked`` (an entry of that key is already held in memory, or a spawn of that child is
    pending). Otherwise it joins the line, and its key is added to ``blocked`` (updated in
    place), so every later item of the same key queues behind it: per-key order holds.

    Returns:
        The fast items and the waiting items, each in the order given.
    """
    fast: list[T] = []
    slow: list[T] = []
    for item in items:
        k = key(item)
        if (k is not None and k in blocked) or has_history(item):
            slow.append(item)
            if k is not None:
                blocked.add(k)
        else:
            fast.append(item)
    return fast, slow
