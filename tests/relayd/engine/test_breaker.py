"""The circuit breaker's rule, state by state (pure: times passed in)."""

from __future__ import annotations

import pytest

from relayd.engine.breaker import Breaker, BreakerPolicy, Signal, delivery_signal
from relayd.sinks.base import DELIVERED, Permanent, Retry
from relayd.sinks.per_key import HELD_BACK
from relayd.sinks.sending import NOT_SENT

DOWN = Retry("webhook connection error (ClientConnectorError)")


def _failure(*keys: str) -> Signal:
    return Signal(False, len(keys), frozenset(keys), DOWN.error)


def test_failures_across_targets_open_the_breaker_with_the_error_as_reason() -> None:
    """Five failed entries over two targets, no success between: open, since ``at``."""
    breaker = Breaker(BreakerPolicy(threshold=5, min_targets=2))

    first = breaker.record(_failure("a", "b"), now_s=10.0, at=1000.0)
    second = breaker.record(_failure("a", "b", "c"), now_s=11.0, at=1001.0)

    assert first is None
    assert second is not None
    assert (second.before, second.after, second.reason) == ("closed", "open", DOWN.error)
    assert (breaker.state, breaker.opened_at) == ("open", 1001.0)


def test_one_target_failing_alone_never_opens_the_breaker() -> None:
    """A receiver's 500s for one target are that target's problem: max-attempts handles it."""
    breaker = Breaker(BreakerPolicy(threshold=3, min_targets=2))

    for step in range(50):
        breaker.record(_failure("poison"), now_s=float(step), at=float(step))

    assert breaker.state == "closed"


def test_a_success_between_failures_resets_the_count() -> None:
    breaker = Breaker(BreakerPolicy(threshold=4, min_targets=2))

    breaker.record(_failure("a", "b", "c"), now_s=0.0, at=0.0)
    breaker.record(Signal(True), now_s=1.0, at=1.0)
    breaker.record(_failure("a", "b", "c"), now_s=2.0, at=2.0)

    assert breaker.state == "closed"


def test_open_admits_nothing_until_the_cooldown_then_one_probe_of_limited_size() -> None:
    breaker = Breaker(BreakerPolicy(threshold=2, cooldown_base_s=1.0, probe_entries=3))
    breaker.record(_failure("a", "b"), now_s=100.0, at=0.0)

    during = breaker.admit(100.5)
    probe, transition = breaker.admit(101.0)
    second = breaker.admit(101.0)

    assert during == (0, None)
    assert probe == 3
    assert transition is not None
    assert (transition.before, transition.after) == ("open", "half_open")
    assert second == (0, None)  # one probe at a time
    assert breaker.wait_s(101.0) is not None


def test_failed_probes_double_the_cooldown_up_to_the_cap_and_a_success_closes() -> None:
    breaker = Breaker(BreakerPolicy(threshold=2, cooldown_base_s=1.0, cooldown_cap_s=5.0))
    now_s = 0.0
    breaker.record(_failure("a", "b"), now_s=now_s, at=0.0)
    cooldowns = [breaker.cooldown_s]
    for _ in range(4):
        now_s = breaker.probe_at_s
        assert breaker.admit(now_s)[0] == breaker.policy.probe_entries
        breaker.record(_failure("a"), now_s=now_s, at=now_s)
        cooldowns.append(breaker.cooldown_s)

    breaker.admit(breaker.probe_at_s)
    closed = breaker.record(Signal(True), now_s=breaker.probe_at_s, at=0.0)

    assert cooldowns == [1.0, 2.0, 4.0, 5.0, 5.0]
    assert closed is not None
    assert (closed.before, closed.after) == ("half_open", "closed")
    assert breaker.admit(1e9) == (None, None)


def test_a_cancelled_probe_lets_the_next_delivery_probe() -> None:
    breaker = Breaker(BreakerPolicy(threshold=2))
    breaker.record(_failure("a", "b"), now_s=0.0, at=0.0)
    breaker.admit(breaker.probe_at_s)

    breaker.cancel_probe()

    assert breaker.admit(breaker.probe_at_s)[0] == breaker.policy.probe_entries


@pytest.mark.parametrize(
    ("keys", "outcomes", "expected"),
    [
        (["a", "b"], [DOWN, DELIVERED], Signal(True)),
        (["a", "b"], [DOWN, Permanent("http 422")], Signal(True)),
        (["a", "a", "b"], [DOWN, DOWN, DOWN], Signal(False, 2, frozenset({"a", "b"}), DOWN.error)),
        ([None, None], [DOWN, DOWN], Signal(False, 2, frozenset({"id0", "id1"}), DOWN.error)),
        (["a", "b"], [DOWN], Signal(False, 2, frozenset({"a", "b"}), "")),
    ],
    ids=[
        "delivered",
        "permanent-is-an-answer",
        "held-back-not-counted",
        "keyless-each-a-target",
        "bad-count",
    ],
)
def test_delivery_signal(keys, outcomes, expected) -> None:
    ids = [f"id{i}" for i in range(len(keys))]

    assert delivery_signal(keys, ids, outcomes) == expected


UNAUTHORIZED = Permanent("http 401", wholesale="check the credentials")


def test_case_10_the_same_401_from_many_targets_at_once_opens_the_breaker_naming_what_to_check() -> None:
    """A 401 for every target of one delivery is the sink refused, not three poisoned entries."""
    breaker = Breaker(BreakerPolicy(threshold=5, min_targets=2))
    signal = delivery_signal(["a", "b", "c"], ["1", "2", "3"], [UNAUTHORIZED] * 3)

    transition = breaker.record(signal, now_s=0.0, at=0.0)

    assert not signal.succeeded
    assert transition is not None
    assert transition.after == "open"
    assert transition.reason == "http 401 from 3 targets at once: check the credentials"


def test_case_10_a_401_from_one_target_alone_is_that_target_s_answer() -> None:
    signal = delivery_signal(["a", "a"], ["1", "2"], [UNAUTHORIZED, UNAUTHORIZED])

    assert signal.succeeded
    assert Breaker().record(signal, now_s=0.0, at=0.0) is None


def test_case_10_a_probe_answered_401_does_not_close_the_breaker() -> None:
    breaker = Breaker(BreakerPolicy(threshold=1, min_targets=1, cooldown_base_s=1.0))
    breaker.record(_failure("a"), now_s=0.0, at=0.0)
    assert breaker.admit(5.0)[0] == 3

    breaker.record(delivery_signal(["a"], ["1"], [UNAUTHORIZED]), now_s=5.0, at=5.0)

    assert breaker.state == "open"
    breaker.admit(10.0)
    assert breaker.record(delivery_signal(["a"], ["1"], [DELIVERED]), now_s=10.0, at=10.0) is not None
    assert breaker.state == "closed"


def test_case_11_retry_after_holds_the_breaker_open_longer_than_its_cooldown() -> None:
    """The receiver asked for 30 s: no probe before then, though the cool-down is 2 s."""
    breaker = Breaker(BreakerPolicy(threshold=2, min_targets=2, cooldown_base_s=2.0, cooldown_cap_s=4.0))
    busy = Retry("http 503", after_s=30.0)

    breaker.record(delivery_signal(["a", "b"], ["1", "2"], [busy, busy]), now_s=0.0, at=0.0)

    assert breaker.admit(29.0)[0] == 0
    assert breaker.admit(30.0)[0] == 3
    breaker.record(delivery_signal(["a"], ["1"], [Retry("http 503", after_s=60.0)]), now_s=30.0, at=30.0)
    assert breaker.admit(89.0)[0] == 0
    assert breaker.admit(90.0)[0] == 3


def test_case_7_entries_left_unsent_for_the_lease_are_no_signal_about_the_sink() -> None:
    """A lease expiring mid-batch: what was not sent neither opens nor closes the breaker."""
    unsent = Retry(NOT_SENT)
    signal = delivery_signal(["a", "b", "c"], ["1", "2", "3"], [unsent, Retry(HELD_BACK), unsent])
    breaker = Breaker(BreakerPolicy(threshold=1, min_targets=1))

    for step in range(10):
        assert breaker.record(signal, now_s=float(step), at=float(step)) is None

    assert not signal.attempted
    assert breaker.state == "closed"
