"""Garbage-collector settings for the relay's hot path, applied while ``run_relay`` runs.

A drain allocates a few short-lived containers per entry (the decoded value, the envelope body,
the outcome lists) and almost never a reference cycle. With CPython's default gen0 threshold
the cyclic collector runs every few entries and, worse, promotes each batch in flight into
the older generations, whose collections walk everything alive (``relayd bench`` drains show it
in the relay's CPU per entry). Two changes take it away: objects alive at start (modules, settings,
clients) are frozen out of every collection, and gen0 runs every ``GEN0_THRESHOLD`` allocations.
Cycles are still collected; the memory they can hold meanwhile is bounded by the threshold.

Only the young generations are collected before the freeze. A full collection with the CLI's
modules loaded is paid at every start (a ``--once`` job, each bench drain) and finds nothing the
young one had not; any garbage frozen with the rest waits for the unfreeze when the
relay stops.

A process that is about to end skips the collector's last walk (``skip_collection_at_exit``).
"""

from __future__ import annotations

import atexit
import contextlib
import gc
from collections.abc import Iterator
from typing import Final

#: Allocations between young-generation collections (CPython's default: 700).
GEN0_THRESHOLD: Final = 50_000


class _Tuning:
    """Reference-counted, so relays running side by side in one process restore it once."""

    active = 0
    saved: tuple[int, int, int] = gc.get_threshold()


@contextlib.contextmanager
def relay_gc(gen0_threshold: int = GEN0_THRESHOLD) -> Iterator[None]:
    """Run the body with start-up objects frozen and a larger gen0 threshold; restore after."""
    if _Tuning.active == 0:
        _Tuning.saved = gc.get_threshold()
        gc.collect(1)
        gc.freeze()
        gc.set_threshold(max(gen0_threshold, _Tuning.saved[0]), *_Tuning.saved[1:])
    _Tuning.active += 1
    try:
        yield
    finally:
        _Tuning.active -= 1
        if _Tuning.active == 0:
            gc.set_threshold(*_Tuning.saved)
            gc.unfreeze()


def skip_collection_at_exit() -> None:
    """Leave every object out of the collection the interpreter runs as this process exits.

    That collection walks everything still alive (after a drain, all the relay left behind) to
    free memory the exit gives back anyway, and a ``--once`` job waits for it. Exit handlers
    still run, and objects still go when their last reference does; only cycles stay unfreed.
    """
    atexit.register(gc.freeze)
