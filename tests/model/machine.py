"""The model's schedules: Hypothesis's stateful testing over ``model.world.World``.

Each rule is one action of the engine, an operator, the receiver, a replica, or the clocks; a
schedule is a sequence of them, and its teardown drains with a healthy sink and checks every
invariant (``model.invariants``). Hypothesis shrinks a failing schedule and prints it as the calls
below (``state.commit_outbox(target='t1')`` ...), which ``tests/model/test_regressions.py`` keeps
as plain functions.
"""

from __future__ import annotations

import typing
from typing import Any

from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, precondition, rule
from model.invariants import check
from model.world import REPLICAS, Answer, MidPass, World

TARGETS = ("t1", "t2")
EXECUTIONS = ("x1", "x2")
ANSWERS: tuple[Answer, ...] = ("retry", "retry_after", "permanent")
MID_PASS: tuple[MidPass, ...] = typing.get_args(MidPass)
#: What an operator pauses as a whole: ``(kind, sink)`` selectors, ``None`` for each left out
#: (the sink ``model`` is every kind's; both ``None``: the whole prefix).
PAUSED_LANES: tuple[tuple[str | None, str | None], ...] = (
    ("outbox", None),
    ("spawn", None),
    ("timer", None),
    (None, "model"),
    (None, None),
)


class Schedules(RuleBasedStateMachine):
    """One world per schedule; ``redis_port`` (a class attribute) runs it on a real redis-server."""

    redis_port: int | None = None
    #: Actions left out of the schedules: each meets a broken promise not fixed yet, which its
    #: regression test records (``tests/model/test_regressions.py``, marked xfail).
    off: frozenset[str] = frozenset()
    #: When set, only these actions (a regression hunt for one case).
    only: frozenset[str] | None = None

    def __init__(self) -> None:
        super().__init__()
        self.world = World(redis_port=self.redis_port)

    def allows(self, action: str) -> bool:
        if self.only is not None:
            return action in self.only
        return action not in self.off

    def _run(self, coro: Any) -> None:
        self.world.step += 1
        self.world.run(coro)
        self.world.settle()

    @initialize()
    def first_replica_active(self) -> None:
        self.world.keeper("A")

    # --- the engine ---------------------------------------------------------------------------
    @precondition(lambda self: self.allows("commit_outbox"))
    @rule(to=st.sampled_from(TARGETS))
    def commit_outbox(self, to: str) -> None:
        self._run(self.world.commit_outbox(to))

    @precondition(lambda self: self.allows("commit_spawn"))
    @rule()
    def commit_spawn(self) -> None:
        self._run(self.world.commit_spawn())

    @precondition(lambda self: any(e.kind == "spawn" for e in self.world.committed))
    @precondition(lambda self: self.allows("commit_to_child"))
    @rule(back=st.integers(0, 3))
    def commit_to_child(self, back: int) -> None:
        children = [e.id for e in self.world.committed if e.kind == "spawn"]
        self._run(self.world.commit_outbox(children[-1 - back % len(children)]))

    @precondition(lambda self: self.allows("arm_timer"))
    @rule(execution=st.sampled_from(EXECUTIONS), in_s=st.sampled_from([-1.0, 0.0, 2.0, 20.0]))
    def arm_timer(self, execution: str, in_s: float) -> None:
        self._run(self.world.arm_timer(execution, "p", in_s))

    @precondition(lambda self: self.allows("cancel_timer"))
    @rule(execution=st.sampled_from(EXECUTIONS))
    def cancel_timer(self, execution: str) -> None:
        self._run(self.world.cancel_timer(execution, "p"))

    # A reset while a replica holds entries read and not acked can make their acks delete the
    # entries committed at the reused seqs (acks compare no values: docs/internals.md); the
    # world resets only a drained outbox.
    @precondition(lambda self: all(r.quiet for r in self.world.replicas.values()))
    @precondition(lambda self: self.allows("reset_counter"))
    @rule()
    def reset_counter(self) -> None:
        self._run(self.world.reset_counter())

    @precondition(lambda self: self.allows("jump_counter"))
    @rule(by=st.sampled_from([40, 100_000]))
    def jump_counter(self, by: int) -> None:
        self._run(self.world.jump_counter(by))

    # --- an operator --------------------------------------------------------------------------
    @precondition(lambda self: self.allows("replay"))
    @rule()
    def replay(self) -> None:
        self._run(self.world.replay())

    @precondition(lambda self: self.allows("purge"))
    @rule()
    def purge(self) -> None:
        self._run(self.world.purge())

    @precondition(lambda self: self.allows("pause"))
    @rule(lane=st.sampled_from(PAUSED_LANES))
    def pause(self, lane: tuple[str | None, str | None]) -> None:
        self._run(self.world.pause(*lane, None))

    @precondition(lambda self: self.allows("pause"))
    @rule(key=st.sampled_from((TARGETS[0], EXECUTIONS[0])))
    def pause_target(self, key: str) -> None:
        self._run(self.world.pause(None, None, key))

    @precondition(lambda self: bool(self.world.pauses))
    @precondition(lambda self: self.allows("resume"))
    @rule(which=st.integers(0, 3))
    def resume(self, which: int) -> None:
        scopes = sorted(self.world.pauses)
        self._run(self.world.resume(scopes[which % len(scopes)]))

    # --- the receiver -------------------------------------------------------------------------
    @precondition(lambda self: bool(self.world.committed or self.world.armed_timers))
    @precondition(lambda self: self.allows("answer_entry"))
    @rule(back=st.integers(0, 5), answers=st.lists(st.sampled_from(ANSWERS), min_size=1, max_size=3))
    def answer_entry(self, back: int, answers: list[Answer]) -> None:
        world = self.world
        ids = [e.id for e in world.committed] + list(world.armed_timers)
        world.step += 1
        world.receiver.scripted[ids[-1 - back % len(ids)]] = list(answers)

    @precondition(lambda self: self.allows("sink_down"))
    @rule(down=st.booleans())
    def sink_down(self, down: bool) -> None:
        self.world.step += 1
        self.world.receiver.down = down

    @precondition(lambda self: self.allows("batch_requests"))
    @rule(size=st.sampled_from([0, 3]))
    def batch_requests(self, size: int) -> None:
        """The sink sends requests of up to ``size`` entries to a receiver that takes or refuses
        each whole (0: one entry at a time, answered on its own)."""
        self.world.step += 1
        self.world.receiver.batched = size

    @precondition(lambda self: self.allows("sink_refuses"))
    @rule(refusing=st.booleans())
    def sink_refuses(self, refusing: bool) -> None:
        """Every entry gets the same refusal about the sink itself (a 401), or no longer."""
        self.world.step += 1
        receiver = self.world.receiver
        receiver.refusing = refusing
        if not refusing:
            receiver.refused_together.clear()

    @precondition(lambda self: self.allows("lease_lapses_in_request"))
    @rule(replica=st.sampled_from(REPLICAS), sent=st.integers(0, 3))
    def lease_lapses_in_request(self, replica: str, sent: int) -> None:
        """The replica's next request sends ``sent`` entries, then its sink finds the lease may
        have expired and leaves the rest unsent (``Retry(error=NOT_SENT)``)."""
        self.world.step += 1
        self.world.receiver.lapse[replica] = sent

    @precondition(lambda self: self.allows("hang_next_request"))
    @rule(replica=st.sampled_from(REPLICAS))
    def hang_next_request(self, replica: str) -> None:
        self.world.step += 1
        self.world.receiver.hang.add(replica)

    @precondition(lambda self: self.allows("answer_hung_request"))
    @rule()
    def answer_hung_request(self) -> None:
        self.world.step += 1
        self.world.receiver.release()
        self.world.settle()

    # --- replicas and clocks ------------------------------------------------------------------
    @precondition(lambda self: self.allows("keeper"))
    @rule(replica=st.sampled_from(REPLICAS))
    def keeper(self, replica: str) -> None:
        self.world.step += 1
        self.world.keeper(replica)

    @precondition(lambda self: self.allows("run_pass"))
    @rule(replica=st.sampled_from(REPLICAS))
    def run_pass(self, replica: str) -> None:
        self.world.step += 1
        self.world.start_pass(replica)

    @precondition(lambda self: self.allows("during_pass"))
    @rule(replica=st.sampled_from(REPLICAS), after=st.integers(0, 6), what=st.sampled_from(MID_PASS))
    def during_pass(self, replica: str, after: int, what: MidPass) -> None:
        """``what`` happens between two round-trips of a pass of ``replica`` (an engine commit,
        an operator's replay, the lease key lost), which starts now (or, if one is under way,
        when it sends again)."""
        self.world.step += 1
        self.world.happens_during(replica, after, what)
        self.world.start_pass(replica)

    @precondition(lambda self: self.allows("advance"))
    @rule(seconds=st.sampled_from([0.5, 2.0, 7.0, 40.0]))
    def advance(self, seconds: float) -> None:
        self._run(self.world.advance(seconds))

    @precondition(lambda self: self.allows("step_redis_clock"))
    @rule(seconds=st.sampled_from([-30.0, 30.0]))
    def step_redis_clock(self, seconds: float) -> None:
        self.world.step += 1
        self.world.step_redis_clock(seconds)

    @precondition(lambda self: self.allows("lose_lease"))
    @rule()
    def lose_lease(self) -> None:
        self._run(self.world.lose_lease())

    def teardown(self) -> None:
        world = self.world
        try:
            world.drain()
            violations = world.run(check(world))
        finally:
            world.close()
        assert not violations, "\n".join(violations[:20])
