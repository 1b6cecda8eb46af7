"""plan.choose and plan.judge: what goes now, and what each outcome leads to."""

from __future__ import annotations

import json

from relayd.engine.plan import Held, choose, judge
from relayd.envelope.decode import outbox_envelope
from relayd.sinks.base import DELIVERED, Permanent, Retry
from store.backlog import RawEntry


def _held(seq: int, target: str | None, *, not_before: float = 0.0, attempts: int = 0) -> Held:
    raw = RawEntry(
        str(seq), seq, json.dumps({"t": target, "e": json.dumps({"id": f"e{seq}", "kind": "K"})}).encode()
    )
    env = outbox_envelope(raw, prefix="p", attempt=1, relayed_at=0.0)
    return Held(str(seq), raw, env, first_seen_at=0.0, attempts=attempts, not_before=not_before)


def test_choose_orders_by_seq_and_skips_targets_behind_a_waiting_head():
    held = [_held(3, "A"), _held(1, "A", not_before=50.0), _held(2, "B"), _held(4, "B")]

    picked, blocked = choose(held, now=10.0, limit=10)

    assert [h.ref for h in picked] == ["2", "4"]
    assert blocked == {"A"}


def test_choose_takes_the_head_once_its_backoff_has_passed():
    held = [_held(1, "A", not_before=50.0), _held(2, "A")]

    picked, _ = choose(held, now=50.0, limit=10)

    assert [h.ref for h in picked] == ["1", "2"]


def test_judge_acks_delivered_and_backs_off_retries_honouring_after_s():
    batch = [_held(1, "A"), _held(2, "B"), _held(3, "C")]

    verdicts = judge(
        batch,
        [DELIVERED, Retry("boom"), Retry("slow down", after_s=30.0)],
        now=100.0,
        max_attempts=5,
        delay_s=lambda attempt: 2.0 * attempt,
    )

    assert [h.ref for h in verdicts.ack] == ["1"]
    assert [(h.ref, h.attempts, h.not_before, h.last_error) for h in verdicts.retry] == [
        ("2", 1, 102.0, "boom"),
        ("3", 1, 130.0, "slow down"),
    ]
    assert batch[1].first_attempt_at == 100.0
    assert verdicts.dead == []


def test_judge_dead_letters_permanent_and_exhausted_entries():
    batch = [_held(1, "A"), _held(2, "B", attempts=2)]

    verdicts = judge(
        batch, [Permanent("http 400"), Retry("503")], now=1.0, max_attempts=3, delay_s=lambda a: 1.0
    )

    assert [(d.held.ref, d.reason_code) for d in verdicts.dead] == [("1", "permanent"), ("2", "max_attempts")]
    assert verdicts.dead[0].reason == "http 400"
    assert "3 attempts" in verdicts.dead[1].reason
    assert verdicts.dead[1].held.attempts == 3


def test_judge_retries_everything_when_the_sink_miscounts_outcomes():
    batch = [_held(1, "A"), _held(2, "B")]

    verdicts = judge(batch, [DELIVERED], now=0.0, max_attempts=5, delay_s=lambda a: 1.0)

    assert [h.ref for h in verdicts.retry] == ["1", "2"]
    assert "1 outcomes for 2" in batch[0].last_error


def test_judge_does_not_count_entries_held_back_behind_a_failed_head_as_attempts():
    """A later entry of the same key that the sink did not send stays untouched."""
    batch = [_held(1, "A"), _held(2, "A"), _held(3, "B")]

    verdicts = judge(
        batch, [Retry("down"), Retry("held back"), DELIVERED], now=5.0, max_attempts=1, delay_s=lambda a: 1.0
    )

    assert [h.ref for h in verdicts.held_back] == ["2"]
    assert (batch[1].attempts, batch[1].not_before) == (0, 0.0)
    assert [d.held.ref for d in verdicts.dead] == ["1"]
    assert [h.ref for h in verdicts.ack] == ["3"]


def test_judge_holds_back_an_entry_confirmed_behind_a_failure_of_its_key():
    """[Retry, Delivered] for key A: the second is not acked (it goes again after the first),
    is no attempt of its own; B's confirmed entry is acked."""
    batch = [_held(1, "A"), _held(2, "A"), _held(3, "B")]

    verdicts = judge(
        batch, [Retry("nack"), DELIVERED, DELIVERED], now=5.0, max_attempts=5, delay_s=lambda a: 1.0
    )

    assert [h.ref for h in verdicts.retry] == ["1"]
    assert [h.ref for h in verdicts.held_back] == ["2"]
    assert batch[1].attempts == 0
    assert [h.ref for h in verdicts.ack] == ["3"]


def test_case_1_entries_the_sink_did_not_send_are_held_back_without_an_attempt():
    """Behind a refused request of their lane, or unsent for the lease: nothing charged, and a
    later entry of their key the sink confirmed is held back behind them."""
    from relayd.sinks.per_key import HELD_BACK
    from relayd.sinks.sending import NOT_SENT

    batch = [_held(1, "A", attempts=4), _held(2, "B", attempts=4), _held(3, "A")]

    verdicts = judge(
        batch,
        [Retry(HELD_BACK), Retry(NOT_SENT), DELIVERED],
        now=100.0,
        max_attempts=5,
        delay_s=lambda attempt: 1.0,
    )

    assert not verdicts.dead
    assert not verdicts.retry
    assert not verdicts.ack
    assert [(h.ref, h.attempts) for h in verdicts.held_back] == [("1", 4), ("2", 4), ("3", 0)]
