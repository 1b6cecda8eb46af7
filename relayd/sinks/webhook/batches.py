"""Pure rules of ``--webhook-batch N``: which entries share a request, its id and its body.

A sink batch is cut into **lanes**, each a run of requests sent one after another, the lanes
concurrently. Every entry of one ordering key goes to the same lane, in batch order, so a key's
entries keep their order inside a request and across requests; a request that fails holds back
the rest of its lane. Keys are dealt to lanes in order of first appearance (an entry without a
key counts as a key of its own), as many lanes as it takes to fill requests of up to N entries,
at most the webhook concurrency.

A request the receiver refuses for its content (a 500 from its handler, a 4xx about the body:
``http_policy.about_content``) may be refused for one entry alone: it is split in halves, the
first half sent, and so on, until the entry is found (``send_lane``), one found by elimination
being sent alone to confirm it (a refusal that does not repeat parks nothing); the entries before
it are delivered, it alone gets the refusal (an attempt, towards its dead letter), the later entries of
its key are held back, and the rest of the lane goes on. A lane that has delivered nothing
isolates one entry at most: when the rest is refused too, the receiver refuses everything (an
outage, for the sink's breaker), and the lane stops there.

A request's id (``webhook-id``, ``Idempotency-Key``) is ``batch-`` and a hash of its entries'
ids in order: a redelivery re-forms the same request, and so the same id, only when the same
entries fall together again, which a changed backlog or a partial failure of the lane before
it can prevent. Receivers dedupe on each entry's own ``id``.
"""

from __future__ import annotations

import hashlib
from collections.abc import Awaitable, Callable, Sequence
from typing import Final

from relayd.sinks.base import Delivered, Outcome

#: Sends one request of the given indexes: its outcome, and whether splitting it may find one
#: refused entry (``http_policy.about_content``).
SendRequest = Callable[[list[int]], Awaitable[tuple[Outcome, bool]]]

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


async def send_lane(
    lane: list[list[int]], keys: Sequence[str | None], size: int, send: SendRequest, outcomes: list[Outcome]
) -> None:
    """Send one lane's requests (``lanes``) in order, setting ``outcomes`` (entries never sent
    keep the held-back outcome they have); see the module docstring."""
    delivered_any, isolated = False, 0
    stopped: set[str] = set()  # keys with a refused entry: their later entries are held back
    remaining = [index for request in lane for index in request]
    while remaining:
        request, remaining = remaining[:size], remaining[size:]
        outcome, split = await send(request)
        if type(outcome) is Delivered:
            for index in request:
                outcomes[index] = outcome
            delivered_any = True
            continue
        if not split or len(request) == 1 or (isolated and not delivered_any):
            for index in request:
                outcomes[index] = outcome
            return  # the rest of the lane stays held back: its keys' order holds
        start, end, outcome, halves_delivered, found = await _first_refused(request, outcome, send, outcomes)
        delivered_any |= halves_delivered
        for index in request[start:end]:
            outcomes[index] = outcome
        if type(outcome) is Delivered:  # the refusal did not repeat: what was halved went through
            delivered_any = True
            remaining = [*request[end:], *remaining]
            continue
        if not found:  # the receiver stopped answering about the content: not one entry's fault
            return
        isolated += 1
        refused_key = keys[request[start]]
        if refused_key is not None:
            stopped.add(refused_key)
        remaining = [i for i in (*request[end:], *remaining) if keys[i] is None or keys[i] not in stopped]


async def _first_refused(
    request: list[int], outcome: Outcome, send: SendRequest, outcomes: list[Outcome]
) -> tuple[int, int, Outcome, bool, bool]:
    """Halve ``request`` (refused whole with ``outcome``) down to its first refused entry: its
    slice ``[start, end)`` in ``request``, the refusal, whether a half was delivered, and whether
    that one entry was found (False: a half met an answer not about its content, such as a 429
    or a 503, which then stands for the slice it was sent with; or the entry left once the rest
    was delivered was delivered alone too, and ``outcome`` says so).

    A delivered first half only suggests the refused entry is in the other one: the refusal may
    not repeat. The entry found that way is sent alone before it is given a refusal."""
    start, end, delivered, confirmed = 0, len(request), False, True
    while end - start > 1 or not confirmed:
        # narrowed to one entry by elimination: ask about it alone
        middle = end if end - start == 1 else start + (end - start) // 2
        half_outcome, split = await send(request[start:middle])
        if type(half_outcome) is Delivered:
            for index in request[start:middle]:
                outcomes[index] = half_outcome
            if middle == end:
                return start, end, half_outcome, True, False
            start, delivered, confirmed = middle, True, False  # the refused entry is in the other half
            continue
        if not split:
            return start, middle, half_outcome, delivered, False
        end, outcome, confirmed = middle, half_outcome, True
    return start, end, outcome, delivered, True
