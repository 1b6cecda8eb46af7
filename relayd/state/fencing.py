"""Fenced writes of relayd's own scripts: refused by Redis once the lease holds another token.

Each fenced script checks ``GET P:relay:lease == token`` in the same call as its write and
replies ``RELAYD_FENCED`` instead of writing when it does not; ``refused_as_fenced`` turns
that reply into ``store.StoreFenced``, the error the store's own fenced acks raise, so the
engine handles every refused write in one place.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

from redis.exceptions import ResponseError

from relayd.state.scripts import FENCED_TAG
from store import Fence, StoreFenced


@contextmanager
def refused_as_fenced(fence: Fence | None) -> Iterator[None]:
    """Raise ``StoreFenced`` for a fenced script's refusal inside the block."""
    try:
        yield
    except ResponseError as exc:
        if fence is not None and FENCED_TAG in str(exc):
            raise StoreFenced(fence.key) from exc
        raise


def fenced_keys(keys: tuple[str, ...], fence: Fence | None) -> tuple[str, ...]:
    """``keys`` with the fence's guard key last, when there is a fence."""
    return keys if fence is None else (*keys, fence.key)
