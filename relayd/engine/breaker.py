"""A circuit breaker per sink: tell an outage (the sink fails wholesale) from poison (one entry).

The rule, from the outcomes of each delivery (``delivery_signal``):

- A delivery *succeeds* when at least one entry came back ``Delivered`` or ``Permanent``: the
  sink reached its destination and got an answer about an entry (a 422 is an answer).
- A delivery *fails* when every entry it attempted came back ``Retry`` (refused connections,
  timeouts, 5xx, 429, a broker away, the sink raising). Entries held back behind an earlier
  failure of their own ordering key were not attempted and do not count; neither do entries
  the sink did not send because the lease may have expired (``NOT_SENT``, ``HELD_BACK``): that
  is the replica's doing, not the sink's, so a delivery with nothing else is no signal at all.
- A ``Permanent`` marked ``wholesale`` (a 401, 403, or 404 from a receiver's default backend) is
  an answer about the sink, not the entry, when it comes from many targets at once: when no
  entry was delivered and the same such answer came for at least ``min_targets`` ordering keys,
  the delivery *fails* (an outage: nothing dead-lettered) with the answer's hint (what to
  check) as its error. From one target it stays an answer about that target. In a probe
  (half-open), such an answer never closes the breaker.
- The breaker opens when, with no success in between, at least ``threshold`` entries failed and
  they span at least ``min_targets`` ordering keys (an entry without a key counts as a target of
  its own). One target failing on its own (a receiver's 500s for one target) never opens it:
  that is the entry's problem, and ``--max-attempts`` dead-letters it as before.

Open: nothing is delivered for a cool-down, which starts at ``cooldown_base_s`` and doubles
with each failed probe up to ``cooldown_cap_s``, or for as long as the sink's ``Retry-After``
asked (``Retry.after_s``, the longest of the failed delivery's), whichever is longer. Then it
is half-open: one delivery of at most ``probe_entries`` entries (the probe) may go; a success
closes the breaker, a failure opens it again. Deliveries the breaker counts as an outage (the
one that opens it, a failed probe) charge no attempt: their entries wait, and nothing is
dead-lettered for being undeliverable.

Pure: the caller passes the monotonic time (``now_s``, for cool-downs) and the epoch time
(``at``, for ``/readyz``'s "open since"); nothing here sleeps, logs or counts.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Final, Literal

from relayd.sinks.base import Delivered, Outcome, Permanent, Retry
from relayd.sinks.per_key import HELD_BACK
from relayd.sinks.sending import NOT_SENT

State = Literal["closed", "open", "half_open"]
#: Every state, in the order the state metric lists them.
STATES: Final[tuple[State, ...]] = ("closed", "open", "half_open")

#: Failed entries, with no success in between, that open the breaker (see the module docstring).
DEFAULT_THRESHOLD: Final = 5
#: Distinct ordering keys those failures must span: one failing target alone is not an outage.
DEFAULT_MIN_TARGETS: Final = 2
#: First cool-down after the breaker opens, in seconds; it doubles per failed probe ...
DEFAULT_COOLDOWN_BASE_S: Final = 2.0
#: ... up to this many seconds.
DEFAULT_COOLDOWN_CAP_S: Final = 15.0
#: Most entries in one probe delivery (half-open).
DEFAULT_PROBE_ENTRIES: Final = 3
#: While another caller's probe is in flight, look again after this many seconds.
PROBE_POLL_S: Final = 0.1


@dataclass(frozen=True, slots=True)
class BreakerPolicy:
    """When a breaker opens and how long it stays open (see the module docstring)."""

    threshold: int = DEFAULT_THRESHOLD
    min_targets: int = DEFAULT_MIN_TARGETS
    cooldown_base_s: float = DEFAULT_COOLDOWN_BASE_S
    cooldown_cap_s: float = DEFAULT_COOLDOWN_CAP_S
    probe_entries: int = DEFAULT_PROBE_ENTRIES


@dataclass(frozen=True, slots=True)
class Signal:
    """What one delivery says about its sink: a success, or how many entries of which keys failed.

    ``attempted`` False: the sink sent nothing it could be judged by (no signal either way).
    """

    succeeded: bool
    failed: int = 0
    keys: frozenset[str] = frozenset()
    error: str = ""
    after_s: float | None = None
    attempted: bool = True
    #: The delivery's only answers were ``wholesale`` ones: a failure opens the breaker at once;
    #: a success (one target's) does not close an open one.
    wholesale: bool = False


@dataclass(frozen=True, slots=True)
class Transition:
    """A change of state, for the log line and the metrics."""

    before: State
    after: State
    reason: str


#: A delivery that succeeded.
SUCCESS: Final = Signal(True)
#: A delivery that sent nothing the sink can be judged by (every entry not attempted).
NO_SIGNAL: Final = Signal(False, attempted=False)
#: The errors of entries a sink did not attempt: not a failure of the sink.
NOT_ATTEMPTED: Final = frozenset({HELD_BACK, NOT_SENT})


def not_attempted(outcome: Outcome) -> bool:
    """Whether the sink did not attempt this entry (held back, or not sent for the lease)."""
    return isinstance(outcome, Retry) and outcome.error in NOT_ATTEMPTED


def delivery_signal(
    keys: Sequence[str | None], ids: Sequence[str], outcomes: Sequence[Outcome], *, min_targets: int = 2
) -> Signal:
    """Read one delivery's outcomes (in batch order, with each entry's key and id) as a ``Signal``.

    A wrong number of outcomes (a sink that broke its contract) is a failure of every entry.
    """
    if len(outcomes) != len(keys):
        return Signal(False, len(keys), frozenset(k or i for k, i in zip(keys, ids, strict=True)), "")
    failed_keys: set[str] = set()
    failed, error, after_s = 0, "", None
    wholesale: dict[str, set[str]] = {}  # a wholesale answer -> the targets that got it
    hints: dict[str, str] = {}
    for key, id_, outcome in zip(keys, ids, outcomes, strict=True):
        if isinstance(outcome, Delivered):
            return SUCCESS
        target = key if key is not None else id_
        if isinstance(outcome, Permanent):
            if not outcome.wholesale:
                return SUCCESS
            wholesale.setdefault(outcome.reason, set()).add(target)
            hints[outcome.reason] = outcome.wholesale
            continue
        if key is not None and key in failed_keys:
            continue  # held back behind an earlier failure of its key: not attempted
        if not_attempted(outcome):
            continue
        failed_keys.add(target)
        failed += 1
        error = error or outcome.error
        if outcome.after_s is not None:
            after_s = max(after_s or 0.0, outcome.after_s)
    if wholesale:
        return _wholesale_signal(
            wholesale, hints, Signal(False, failed, frozenset(failed_keys), error, after_s), min_targets
        )
    if not failed:
        return NO_SIGNAL
    return Signal(False, failed, frozenset(failed_keys), error, after_s)


def _wholesale_signal(
    wholesale: dict[str, set[str]], hints: dict[str, str], failures: Signal, min_targets: int
) -> Signal:
    """A delivery's signal when some entries got a ``wholesale`` answer (the others ``failures``)."""
    reason, targets = max(wholesale.items(), key=lambda item: len(item[1]))
    answered = frozenset(target for group in wholesale.values() for target in group)
    if len(targets) < min_targets:  # one target's own answer: dead-lettered as the sink said
        return Signal(True, len(answered), answered, f"{reason}: {hints[reason]}", wholesale=True)
    error = f"{reason} from {len(targets)} targets at once: {hints[reason]}"
    failed, keys = failures.failed + len(answered), answered | failures.keys
    return Signal(False, failed, keys, error, failures.after_s, wholesale=True)


@dataclass(slots=True)
class Breaker:
    """One sink's breaker state; ``admit`` before a delivery, ``record`` after it."""

    policy: BreakerPolicy = field(default_factory=BreakerPolicy)
    state: State = "closed"
    #: Epoch seconds when it last opened (kept while half-open), and why.
    opened_at: float | None = None
    reason: str = ""
    #: Monotonic seconds when the next probe may go (while open).
    probe_at_s: float = 0.0
    #: Whether the probe delivery is in flight (half-open).
    probing: bool = False
    cooldown_s: float = 0.0
    # The current run of failures: how many entries, which keys (at most ``min_targets`` kept).
    _failed: int = 0
    _keys: set[str] = field(default_factory=set)

    def admit(self, now_s: float) -> tuple[int | None, Transition | None]:
        """How many entries the next delivery may carry: None for any number (closed), the
        probe's size (this caller sends the probe), or 0 (open, or a probe already in flight)."""
        if self.state == "closed":
            return None, None
        if self.probing or now_s < self.probe_at_s:
            return 0, None
        self.probing = True
        transition = None
        if self.state == "open":
            transition = Transition("open", "half_open", self.reason)
            self.state = "half_open"
        return self.policy.probe_entries, transition

    def cancel_probe(self) -> None:
        """The admitted probe had nothing to send: the next delivery may probe instead."""
        self.probing = False

    def wait_s(self, now_s: float) -> float | None:
        """Seconds until a delivery may go (None when one may go now, or when closed)."""
        if self.state == "closed" or (not self.probing and now_s >= self.probe_at_s):
            return None
        return max(self.probe_at_s - now_s, PROBE_POLL_S)

    def record(self, signal: Signal, *, now_s: float, at: float) -> Transition | None:
        """Account one delivery; the transition it caused, if any."""
        if not signal.attempted:  # nothing the sink can be judged by: a probe may go again
            self.probing = False
            return None
        if self.state != "closed":
            self.probing = False
            if signal.succeeded and not signal.wholesale:
                return self._close()
            self.cooldown_s = min(self.cooldown_s * 2, self.policy.cooldown_cap_s)
            self.probe_at_s = now_s + max(self.cooldown_s, signal.after_s or 0.0)
            self.reason = signal.error or self.reason
            before, self.state = self.state, "open"
            return Transition(before, "open", self.reason)
        if signal.succeeded or self.policy.threshold <= 0:  # 0: the breaker never opens
            self._failed = 0
            self._keys.clear()
            return None
        self._failed += signal.failed
        for key in signal.keys:
            if len(self._keys) >= self.policy.min_targets:
                break
            self._keys.add(key)
        short = self._failed < self.policy.threshold or len(self._keys) < self.policy.min_targets
        if short and not signal.wholesale:  # the same refusal from many targets opens it at once
            return None
        self.state, self.opened_at, self.reason = "open", at, signal.error or "deliveries failed"
        self.cooldown_s = min(self.policy.cooldown_base_s, self.policy.cooldown_cap_s)
        self.probe_at_s = now_s + max(self.cooldown_s, signal.after_s or 0.0)
        return Transition("closed", "open", self.reason)

    def _close(self) -> Transition:
        before = self.state
        self.state, self.opened_at, self.cooldown_s = "closed", None, 0.0
        self._failed = 0
        self._keys.clear()
        return Transition(before, "closed", self.reason)
