"""Fenced writes of relayd's own scripts: refused by Redis once the lease holds another token.

Each fenced script checks ``GET P:relay:lease == token`` in the same call as its write, with the
store's convention (``store.fence``: the lease last of KEYS, the token first of ARGV, the error
``RELAYD_FENCED``); ``refused_as_fenced`` turns that reply into ``store.StoreFenced``, the error
the store's own fenced acks raise, so the engine handles every refused write in one place.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

from redis.exceptions import ResponseError

from store import Fence
from store.fence import fenced_refusal


@contextmanager
def refused_as_fenced(fence: Fence | None) -> Iterator[None]:
    """Raise ``StoreFenced`` for a fenced script's refusal inside the block."""
    try:
        yield
    except ResponseError as exc:
        if (fenced := fenced_refusal(exc, fence)) is not None:
            raise fenced from exc
        raise
