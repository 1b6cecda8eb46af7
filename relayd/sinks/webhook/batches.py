"""Pure rules of ``--webhook-batch N``: which entries share a request, its id and its body.

A sink batch is cut into **lanes**, each a run of requests sent one after another, the lanes
concurrently. Every entry of one ordering key goes to the same lane, in batch order, so a key's
entries keep their order inside a request and across requests; a request that fails holds back
the rest of its lane. Keys are dealt to lanes in order of first appearance (an entry without a
key counts as a key of its own), as many lanes as it takes to fill requests of up to N entries,
at most the webhook concurrency.

A request's id (``webhook-id``, ``Idempotency-Key``) is ``batch-`` and a hash of its entries'
ids in order: a redelivery re-forms the same request, and so the same id, only when the same
entries fall together again, which a changed backlog or a partial failure of the lane before
it can prevent. Receivers dedupe on each entry's own ``id``.
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from typing import Final

#: The request id's prefix, telling a batch's id from an envelope's.
BATCH_ID_PREFIX: Final = "batch-"


def lanes(keys: Sequence[str | None], size: int, max_lanes: int) -> list[list[list[int]]]:
    """The batch's indexes as lanes of requests of at most ``size`` entries (see the module docstring)."""
    count = max(1, min(max_lanes, -(-len(keys) // size)))
    lane_of: dict[str, int] = {}
    members: list[list[int]] = [[] for _ in range(count)]
    dealt = 0
    for index, key in enumerate(keys):
        if key is None:
            lane, dealt = dealt % count, dealt + 1
        elif key in lane_of:
            lane = lane_of[key]
        else:
            lane = lane_of[key] = dealt % count
            dealt += 1
        members[lane].append(index)
    return [[lane[start : start + size] for start in range(0, len(lane), size)] for lane in members if lane]


def batch_id(ids: Sequence[str]) -> str:
    """The id of a request carrying entries ``ids``, in order: the same ids give the same id."""
    digest = hashlib.sha256("\n".join(ids).encode()).hexdigest()[:32]
    return f"{BATCH_ID_PREFIX}{digest}"


def envelopes_body(bodies: Sequence[bytes]) -> bytes:
    """``{"data": [envelope, ...]}``: the body of a request of ``relayd/1`` envelopes."""
    return b'{"data":[' + b",".join(bodies) + b"]}"
