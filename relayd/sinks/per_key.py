"""Deliver a batch one ordering key at a time: in order within a key, concurrently across keys.

Used by the sinks that send entries one by one (webhook, harel). Within one batch, envelopes
with the same ``ordering_key`` are sent sequentially in batch order; once one of them is not
``Delivered``, the later ones of that key are not sent and come back as ``Retry``, so a target
never receives an entry before an earlier one it has not acknowledged. Envelopes whose
``ordering_key`` is ``None`` (an outbox entry without a target) have no order to keep and each
go on their own. No I/O here: the caller passes ``send_one`` and bounds its concurrency;
``deliver_in_key_order`` takes the keys as a column (``Batch.keys()``) and sends by index.
Before each entry it asks ``relayd.sinks.sending.may_send()``: once the replica's lease may
have expired, no further entry is sent (each comes back ``Retry(error=NOT_SENT)``).

A sink that publishes a whole batch at once (a broker) need not correct for order itself: the
engine holds back an entry confirmed behind an undelivered earlier entry of its key and sends it
again after that entry (``relayd.engine.plan.judge``).
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Sequence

from relayd.envelope import Envelope
from relayd.sinks.base import Delivered, Outcome, Retry
from relayd.sinks.sending import NOT_SENT, may_send

#: The error text of an entry held back behind an earlier failure of its own key.
HELD_BACK = "held back: an earlier entry of its target was not delivered"


def group_by_key(keys: Sequence[str | None]) -> list[list[int]]:
    """Return the batch's indexes grouped by ordering key, each group in batch order."""
    groups: dict[str, list[int]] = {}
    loners: list[list[int]] = []
    for index, key in enumerate(keys):
        if key is None:
            loners.append([index])
        else:
            groups.setdefault(key, []).append(index)
    return [*groups.values(), *loners]


async def deliver_in_key_order(
    keys: Sequence[str | None], send_one: Callable[[int], Awaitable[Outcome]]
) -> list[Outcome]:
    """Send entry ``i`` with ``send_one(i)`` for every ordering key of ``keys``, keeping per-key order.

    One outcome per entry, in order; an entry held back behind a failure of its key is ``Retry``.
    """
    outcomes: list[Outcome] = [Retry(error=HELD_BACK)] * len(keys)

    async def run_group(indexes: list[int]) -> None:
        for position, index in enumerate(indexes):
            if not may_send():
                for unsent in indexes[position:]:
                    outcomes[unsent] = Retry(error=NOT_SENT)
                return
            outcome = await send_one(index)
            outcomes[index] = outcome
            if not isinstance(outcome, Delivered):
                return

    await asyncio.gather(*(run_group(group) for group in group_by_key(keys)))
    return outcomes


async def deliver_per_key(
    batch: Sequence[Envelope], send_one: Callable[[Envelope], Awaitable[Outcome]]
) -> list[Outcome]:
    """``deliver_in_key_order`` for a sink that sends envelope by envelope."""

    async def send_index(index: int) -> Outcome:
        return await send_one(batch[index])

    return await deliver_in_key_order([envelope.ordering_key for envelope in batch], send_index)
