"""``judge.judge_delivery``: how one delivery of held and fresh entries is judged (pure)."""

from __future__ import annotations

import orjson

from relayd.engine.fresh import Fresh, FreshBatch
from relayd.engine.judge import judge_delivery
from relayd.engine.plan import MAX_ATTEMPTS, Held
from relayd.envelope.decode import outbox_envelope
from relayd.sinks.base import DELIVERED, Permanent, Retry
from store.backlog import RawEntry

NOW = 1_000.0


def _fresh(seq: int, target: str) -> Fresh:
    value = orjson.dumps({"t": target, "e": orjson.dumps({"id": f"e{seq}", "kind": "K"}).decode()})
    raw = RawEntry(str(seq), seq, value)
    return (raw.field, raw, outbox_envelope(raw, prefix="p", attempt=1, relayed_at=NOW))


def _judge(picked: list[Held], fast: list[Fresh], outcomes: list, max_attempts: int = 5):  # type: ignore[no-untyped-def]
    verdicts, acked, failed = judge_delivery(
        picked, FreshBatch.of(fast), outcomes, now=NOW, max_attempts=max_attempts, delay_s=lambda n: 2.0 * n
    )
    return verdicts, list(acked), failed


def test_all_fresh_and_confirmed_acks_them_all_with_nothing_to_judge() -> None:
    fast = [_fresh(1, "a"), _fresh(2, "b")]

    verdicts, acked, failed = _judge([], fast, [DELIVERED, DELIVERED])

    assert acked == fast
    assert failed == []
    assert (verdicts.ack, verdicts.retry, verdicts.dead, verdicts.held_back) == ([], [], [], [])


def test_an_unconfirmed_fresh_entry_becomes_held_and_retries_while_the_rest_are_acked() -> None:
    fast = [_fresh(1, "a"), _fresh(2, "b"), _fresh(3, "b")]

    verdicts, acked, failed = _judge([], fast, [DELIVERED, Retry(error="down"), Retry(error="behind")])

    assert acked == fast[:1]
    assert [h.ref for h in failed] == ["2", "3"]
    # seq 2 is an attempt (backoff from now); seq 3 waits behind its target's failed head
    assert [(h.ref, h.attempts, h.not_before, h.last_error) for h in verdicts.retry] == [
        ("2", 1, NOW + 2.0, "down")
    ]
    assert [h.ref for h in verdicts.held_back] == ["3"]


def test_held_entries_are_judged_first_and_a_permanent_failure_is_dead() -> None:
    fresh = _fresh(1, "a")
    held = Held(fresh[0], fresh[1], fresh[2], NOW, attempts=4)
    fast = [_fresh(2, "b"), _fresh(3, "c")]

    verdicts, acked, failed = _judge(
        [held], fast, [Retry(error="still down"), Permanent(reason="no"), DELIVERED]
    )

    assert [(d.held.ref, d.reason_code) for d in verdicts.dead] == [("1", MAX_ATTEMPTS), ("2", "permanent")]
    assert acked == fast[1:]
    assert [h.ref for h in failed] == ["2"]


def test_a_sink_answering_the_wrong_number_of_outcomes_retries_everything() -> None:
    fast = [_fresh(1, "a"), _fresh(2, "b")]

    verdicts, acked, failed = _judge([], fast, [DELIVERED])

    assert acked == []
    assert [h.ref for h in verdicts.retry] == ["1", "2"]
    assert all("1 outcomes for 2 entries" in h.last_error for h in verdicts.retry)
    assert [h.ref for h in failed] == ["1", "2"]


def test_a_fresh_entry_confirmed_behind_a_failed_one_of_its_key_is_held_not_acked() -> None:
    """A broker confirmed b's second entry but not its first: the second waits behind the first."""
    fast = [_fresh(1, "b"), _fresh(2, "b"), _fresh(3, "c")]

    verdicts, acked, failed = _judge([], fast, [Retry(error="nacked"), DELIVERED, DELIVERED])

    assert acked == fast[2:]
    assert [h.ref for h in failed] == ["1", "2"]
    assert [h.ref for h in verdicts.retry] == ["1"]
    assert [(h.ref, h.attempts) for h in verdicts.held_back] == [("2", 0)]
