"""Pure planning of one delivery step: which held entries go now, and what each outcome means.

``Held`` is an entry relayd has read and not yet acked or dead-lettered. ``choose`` picks the
entries to hand to the sink (per-target order, retry backoff); ``judge`` turns the sink's
outcomes into acks, retries (with the time they may go again) and dead letters. Neither reads a
clock nor touches Redis: ``now`` and the delay function are parameters.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Final

from relayd.engine.breaker import not_attempted
from relayd.engine.ordering import select_heads
from relayd.envelope import Envelope
from relayd.sinks.base import Delivered, Outcome, Permanent, Retry
from store import RawEntry, RawTimer

#: Dead-letter reason codes besides the store's malformed reasons (bounded metric labels).
PERMANENT: Final = "permanent"
MAX_ATTEMPTS: Final = "max_attempts"


@dataclass(slots=True)
class Held:
    """One read, unresolved entry and its delivery history (times are epoch seconds)."""

    ref: str  # unique per kind: the hash field, or the timer's event id
    raw: RawEntry | RawTimer
    envelope: Envelope  # decoded once; restamped per attempt
    first_seen_at: float
    attempts: int = 0  # attempts already made (persisted under P:relay:attempts:{kind})
    first_attempt_at: float | None = None
    last_attempt_at: float | None = None
    not_before: float = 0.0  # earliest time of the next attempt
    last_error: str = ""
    probed_at: float = 0.0  # when it last went in a delivery its sink's breaker took as an outage

    @property
    def order(self) -> tuple[float, str]:
        """Delivery order: seq for outbox and spawns, fire_at for timers."""
        raw = self.raw
        if isinstance(raw, RawTimer):
            return (raw.fire_at, self.ref)
        return (float(raw.seq if raw.seq is not None else 0), self.ref)


@dataclass(frozen=True, slots=True)
class Dead:
    """An entry to move to the dead letters, with a bounded code and a free-text reason."""

    held: Held
    reason_code: str
    reason: str


@dataclass(frozen=True, slots=True)
class Verdicts:
    """What to do after one delivery: ack, retry later, or dead-letter."""

    ack: list[Held] = field(default_factory=list)
    retry: list[Held] = field(default_factory=list)  # already updated: attempts, not_before
    dead: list[Dead] = field(default_factory=list)
    held_back: list[Held] = field(default_factory=list)  # untouched: behind a failed head


def choose(
    held: Iterable[Held],
    *,
    now: float,
    limit: int,
    blocked: Collection[str] = (),
) -> tuple[list[Held], set[str]]:
    """Pick at most ``limit`` entries, in delivery order, that may be attempted at ``now``.

    Returns the picked entries and the ordering keys held back (see ``select_heads``).
    """
    ordered = sorted(held, key=lambda h: h.order)
    return select_heads(
        ordered,
        key=lambda h: h.envelope.ordering_key,
        ready=lambda h: h.not_before <= now,
        limit=limit,
        blocked=blocked,
    )


def pick_probe(candidates: Iterable[Held], limit: int) -> list[Held]:
    """The entries of a half-open breaker's probe, from ``choose``'s picks: one per ordering key
    (its head), least recently in a failed probe first, at most ``limit``, in delivery order.

    Rotating keeps a few targets that always fail from taking every probe while others wait.
    """
    seen: set[str] = set()
    heads: list[Held] = []
    for held in candidates:
        key = held.envelope.ordering_key
        if key is not None:
            if key in seen:
                continue
            seen.add(key)
        heads.append(held)
    heads.sort(key=lambda h: h.probed_at)  # stable: delivery order among equals
    return sorted(heads[:limit], key=lambda h: h.order)


def judge(
    batch: Sequence[Held],
    outcomes: Sequence[Outcome],
    *,
    now: float,
    max_attempts: int,
    delay_s: Callable[[int], float],
) -> Verdicts:
    """Classify each attempted entry by its outcome and update its attempt history.

    A ``Retry`` waits ``max(delay_s(attempts), after_s)``: the backoff, and never sooner than
    the sink asked. Reaching ``max_attempts`` attempts without delivery dead-letters the entry.
    An entry whose key already failed earlier in the batch is a hold-back, not an attempt,
    whether the sink did not send it (``Retry``) or confirmed it (``Delivered``: acking it
    would leave it ahead of the earlier entry for good); it is left unchanged in ``held_back``.
    So is an entry the sink says it did not attempt (``breaker.not_attempted``): no attempt is
    charged for what never left.
    A sink that returns the wrong number of outcomes broke its contract: every entry retries.
    """
    if len(outcomes) != len(batch):
        error = f"sink returned {len(outcomes)} outcomes for {len(batch)} entries"
        outcomes = [Retry(error=error)] * len(batch)
    verdicts = Verdicts()
    failed_keys: set[str] = set()
    for item, outcome in zip(batch, outcomes, strict=True):
        key = item.envelope.ordering_key
        if not_attempted(outcome):
            # The sink did not send it (behind a failure in its request's lane, or the lease may
            # have expired): no attempt of its own, and it stops its key like a failure.
            if key is not None:
                failed_keys.add(key)
            verdicts.held_back.append(item)
            continue
        if key is not None and key in failed_keys and not isinstance(outcome, Permanent):
            # Behind an earlier failure of its own key in this batch: held back, not an attempt
            # of its own. Even when the sink confirmed it, it is not acked: it goes again after
            # that entry, so the consumer's last copy comes in order. It waits behind that head.
            verdicts.held_back.append(item)
            continue
        if key is not None and not isinstance(outcome, Delivered):
            failed_keys.add(key)
        item.attempts += 1
        if item.first_attempt_at is None:
            item.first_attempt_at = now
        item.last_attempt_at = now
        if isinstance(outcome, Delivered):
            verdicts.ack.append(item)
        elif isinstance(outcome, Permanent):
            item.last_error = outcome.reason
            verdicts.dead.append(Dead(item, PERMANENT, outcome.reason))
        elif item.attempts >= max_attempts:
            item.last_error = outcome.error
            reason = f"gave up after {item.attempts} attempts: {outcome.error}".rstrip(": ")
            verdicts.dead.append(Dead(item, MAX_ATTEMPTS, reason))
        else:
            item.last_error = outcome.error
            wait_s = delay_s(item.attempts)
            if outcome.after_s is not None:
                wait_s = max(wait_s, outcome.after_s)
            item.not_before = now + wait_s
            verdicts.retry.append(item)
    return verdicts
