"""The judge step of a pass: what one delivery of held and fresh entries means for each entry.

``judge_delivery`` judges a delivery the sink answered (``plan.judge`` for the held entries and
the fresh ones it did not confirm; a confirmed fresh entry is acked without one), and
``hold_all`` one the sink's breaker counts as an outage (nothing charged). Pure.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from relayd.engine.fresh import Fresh, FreshBatch
from relayd.engine.plan import Held, Verdicts, judge
from relayd.sinks.base import Delivered, Outcome, Retry, all_delivered


def hold_all(picked: list[Held], fast: FreshBatch, now: float) -> tuple[Verdicts, FreshBatch, list[Held]]:
    """``judge_delivery`` for a delivery the sink's breaker counts as an outage: no attempt is
    charged, nothing acked or dead-lettered; the fast entries join the waiting line."""
    failed = [Held(ref, raw, envelope, now) for ref, raw, envelope in fast]
    for held in (*picked, *failed):
        held.probed_at = now
    return Verdicts(held_back=list(picked)), FreshBatch(), failed


def judge_delivery(
    picked: list[Held],
    fast: FreshBatch,
    outcomes: Sequence[Outcome],
    *,
    now: float,
    max_attempts: int,
    delay_s: Callable[[int], float],
) -> tuple[Verdicts, FreshBatch, list[Held]]:
    """Judge one delivery of ``picked`` then ``fast``: verdicts, the fast entries to ack, and
    the fast entries the sink did not confirm, now ``Held`` (they join the waiting line).

    The held entries and the fast ones the sink did not confirm go through one ``plan.judge``,
    in the order the sink had them (retry with backoff, hold-back behind its key's failed head,
    dead letter); a confirmed fast entry is acked without one, unless an earlier entry of its
    ordering key in this delivery was not delivered: then it is held back too, and delivered
    again after that entry (per-key order, whatever the sink).
    """
    total = len(picked) + len(fast)
    if len(outcomes) != total:  # the sink broke its contract: every entry retries
        outcomes = [Retry(error=f"sink returned {len(outcomes)} outcomes for {total} entries")] * total
    elif not picked and all_delivered(outcomes, total):
        return Verdicts(), fast, []  # the common case: all fresh, all confirmed
    judged, judged_outcomes = list(picked), list(outcomes[: len(picked)])
    failed_keys = {
        key
        for held, outcome in zip(picked, judged_outcomes, strict=True)
        if type(outcome) is not Delivered and (key := held.envelope.ordering_key) is not None
    }
    acked: list[Fresh] = []
    failed: list[Held] = []
    for fresh, outcome in zip(fast, outcomes[len(picked) :], strict=True):
        key = fresh[2].ordering_key
        if type(outcome) is Delivered and (key is None or key not in failed_keys):
            acked.append(fresh)
        else:
            if key is not None:
                failed_keys.add(key)
            failed.append(Held(fresh[0], fresh[1], fresh[2], now))
            judged_outcomes.append(outcome)
    judged += failed
    verdicts = judge(judged, judged_outcomes, now=now, max_attempts=max_attempts, delay_s=delay_s)
    return verdicts, FreshBatch.of(acked), failed
